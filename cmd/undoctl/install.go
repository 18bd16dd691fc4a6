package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/install"
	"github.com/undosh/undosh/internal/watchd"
)

var installUsage = map[string]string{
	"install": `usage: undoctl install [--root DIR] [--undosh PATH] [--fast PATH | --no-fast] [--user NAME] [--sh] [--guards | --no-guards]

Make undosh the shell: the real bash moves to /usr/lib/undosh/real/bash
(a dpkg diversion where dpkg is installed, so bash upgrades land there),
and /bin/bash and /usr/bin/bash become links to /usr/lib/undosh/undosh-fast,
a small C front end that runs the real bash for plainly read-only steps and
/usr/lib/undosh/undosh for the rest (with --no-fast, links to undosh itself).
It also guards the actors that change the machine, so that a dpkg -i
buried in a script is refused outside a machine step (docs/guards.md):
/etc/dpkg/dpkg.cfg.d/undosh-guard makes dpkg run /usr/lib/undosh/undosh-guard
first, and a PEP 668 marker (EXTERNALLY-MANAGED) in each system Python's
standard library makes pip refuse to install into system paths; a copy of
the machine does not see the marker. npm has no hook to guard.
Every change is recorded in /etc/undosh/install.json for undoctl uninstall.
Run again, it updates the binaries and adds what is asked for.

  --root DIR     act on the tree at DIR (an image, a chroot) instead of /
  --undosh PATH  the undosh binary to install (default: undosh next to undoctl)
  --fast PATH    the undosh-fast front end to install (default: undosh-fast
                 next to undoctl if it is there, else keep what is installed)
  --no-fast      no front end: bash is undosh itself (removes an installed one)
  --user NAME    make undosh (/bin/bash) the login shell of NAME
  --sh           take over /bin/sh too; the real sh goes to /usr/lib/undosh/real/sh
  --no-guards    no guards at dpkg and pip (removes installed ones; later runs
                 keep them off)
  --guards       put the guards back after --no-guards
`,
	"uninstall": `usage: undoctl uninstall [--root DIR]

Put back everything undoctl install changed, newest change first, from
/etc/undosh/install.json: the guards (a PEP 668 marker that was there
before comes back byte for byte), the real shells, the diversions, login
shells, /etc/shells and /etc/undosh/shells; then remove /usr/lib/undosh
(undosh and undosh-fast).

  --root DIR     act on the tree at DIR instead of /
`,
	"doctor": `usage: undoctl doctor [--root DIR] [--user NAME] [--json]

Report what is installed (whether bash is undosh through the undosh-fast
front end or undosh directly), the real shells undosh will run, a login
shell, the policy in force, the state directory and whether the front
end's server serves it, and what undosh does with a file-changing and a
machine-changing command. Exits 1 when something is wrong, saying how to
fix it. It never starts the server: the first call through undosh-fast
does.

  --root DIR     look at the tree at DIR instead of /
  --user NAME    the user whose login shell and state to check (default: you)
  --json         print the report as JSON
  --policy FILE  the policy (default: $UNDOSH_POLICY, /etc/undosh/policy.yaml,
                 then the embedded default)
  --state DIR    the state directory
`,
}

// installCmd runs install, uninstall and doctor.
func installCmd(name string, args []string, io stdio, getenv func(string) string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(io.out, installUsage[name])
			return nil
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	root := fs.String("root", "", "the root to act on")
	var o install.Options
	var do install.DoctorOptions
	var asJSON bool
	switch name {
	case "install":
		fs.StringVar(&o.Undosh, "undosh", "", "the undosh binary")
		fs.StringVar(&o.Fast, "fast", "", "the undosh-fast front end")
		fs.BoolVar(&o.NoFast, "no-fast", false, "no front end")
		fs.StringVar(&o.User, "user", "", "the user whose login shell becomes undosh")
		fs.BoolVar(&o.Sh, "sh", false, "take over /bin/sh too")
		fs.BoolVar(&o.Guards, "guards", false, "put the guards back")
		fs.BoolVar(&o.NoGuards, "no-guards", false, "no guards")
	case "doctor":
		fs.StringVar(&do.User, "user", "", "the user to check")
		fs.BoolVar(&asJSON, "json", false, "print JSON")
		fs.StringVar(&do.Policy, "policy", "", "the policy file")
		fs.StringVar(&do.State, "state", "", "the state directory")
	}
	ops, err := parse(fs, args)
	switch {
	case err != nil:
	case len(ops) > 0:
		err = &exit.UsageError{Msg: fmt.Sprintf("%s takes no arguments, only flags (got %q)", name, ops[0])}
	case o.Fast != "" && o.NoFast:
		err = &exit.UsageError{Msg: "--fast and --no-fast together: give one"}
	case o.Guards && o.NoGuards:
		err = &exit.UsageError{Msg: "--guards and --no-guards together: give one"}
	}
	if err != nil {
		fmt.Fprint(io.err, installUsage[name])
		return err
	}
	o.Root, o.Log = *root, io.out
	switch name {
	case "install":
		return runInstall(o, io)
	case "uninstall":
		return runUninstall(o, io)
	}
	do.Root, do.UID, do.Getenv = *root, os.Getuid(), getenv
	return runDoctor(do, asJSON, io)
}

func where(root string) string {
	if root == "/" {
		return ""
	}
	return " in " + root
}

func runInstall(o install.Options, io stdio) error {
	if err := install.CheckRoot(o.Root, os.Geteuid()); err != nil {
		return err
	}
	if o.Undosh == "" || (o.Fast == "" && !o.NoFast) {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find undoctl's own path: %w", err)
		}
		if o.Undosh == "" {
			o.Undosh = filepath.Join(filepath.Dir(exe), "undosh")
		}
		// The front end is optional: without one next to undoctl,
		// install keeps what is installed.
		if fast := filepath.Join(filepath.Dir(exe), "undosh-fast"); o.Fast == "" && !o.NoFast && exists(fast) {
			o.Fast = fast
		}
	}
	res, err := install.Install(o)
	if err != nil {
		return err
	}
	switch {
	case !res.Already:
		fmt.Fprintf(io.out, "undosh is installed%s; %s records every change (undoctl uninstall puts them back)\n", where(res.Root), install.RecordFile)
	case res.Changed:
		fmt.Fprintf(io.out, "undosh was installed%s already; updated as above\n", where(res.Root))
	default:
		fmt.Fprintf(io.out, "undosh is installed%s already; nothing to change\n", where(res.Root))
	}
	return nil
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

func runUninstall(o install.Options, io stdio) error {
	if err := install.CheckRoot(o.Root, os.Geteuid()); err != nil {
		return err
	}
	res, err := install.Uninstall(o)
	if err != nil {
		return err
	}
	if res.Already {
		fmt.Fprintf(io.out, "undosh is not installed%s (no %s): nothing to do\n", where(res.Root), install.RecordFile)
		return nil
	}
	fmt.Fprintf(io.out, "undosh is uninstalled%s: everything it changed is back\n", where(res.Root))
	return nil
}

func runDoctor(o install.DoctorOptions, asJSON bool, io stdio) error {
	rep, err := install.Doctor(o)
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(io.out, rep); err != nil {
			return err
		}
	} else {
		printReport(io.out, rep)
		for _, p := range rep.Problems {
			fmt.Fprintf(io.err, "undoctl: error: %s\nundoctl: hint: %s\n", p.What, p.Fix)
		}
	}
	switch n := len(rep.Problems); n {
	case 0:
		return nil
	case 1:
		return errors.New("doctor found 1 problem")
	default:
		return fmt.Errorf("doctor found %d problems", n)
	}
}

func printReport(w io.Writer, rep install.Report) {
	line := func(k, format string, a ...any) {
		fmt.Fprintf(w, "%-15s %s\n", k+":", fmt.Sprintf(format, a...))
	}
	if rep.Root != "/" {
		line("root", "%s", rep.Root)
	}
	switch r := rep.Record; {
	case r == nil:
		line("installed", "no")
	case !r.Complete:
		line("installed", "cut short (%s)", r.Path)
	default:
		extra := ""
		if r.Sh {
			extra += ", with /bin/sh"
		}
		if len(r.Users) > 0 {
			extra += ", login shell of " + strings.Join(r.Users, ", ")
		}
		line("installed", "yes, %s (%s%s)", r.Time.Format("2006-01-02 15:04 UTC"), r.Path, extra)
	}
	b := rep.Binary
	switch {
	case !b.Present:
		line("undosh", "%s missing", b.Path)
	case !b.Undosh:
		line("undosh", "%s is not undosh", b.Path)
	default:
		line("undosh", "%s (version %s)", b.Path, b.Version)
	}
	switch f := rep.Fast; {
	case f.Installed && !f.Present:
		line("front end", "%s missing", f.Path)
	case f.Present && !f.OK:
		line("front end", "%s is not undosh-fast", f.Path)
	case f.Installed:
		line("front end", "%s (undosh-fast: bash asks its server, then runs the real bash or undosh)", f.Path)
	case rep.Record != nil:
		line("front end", "none: bash is undosh directly (undoctl install --fast PATH adds undosh-fast)")
	}
	for _, p := range rep.Paths {
		line(p.Path, "%s", p.Is)
	}
	for _, d := range rep.Diversions {
		line("diversion", "%s -> %s (%s)", d.Path, d.To, d.By)
	}
	for _, g := range rep.Guards {
		k := "guard " + g.Actor
		if g.Actor == "" {
			k = "guards"
		}
		line(k, "%s", g.Is)
	}
	for _, r := range rep.Real {
		if r.Path == "" {
			line("real "+r.Personality, "not found")
			continue
		}
		line("real "+r.Personality, "%s (%s; from %s)", r.Path, r.Is, r.From)
	}
	if u := rep.Login; u != nil {
		what := "not undosh"
		if rep.LoginIsUndosh {
			what = "undosh"
		}
		shell := u.Shell
		if shell == "" {
			shell = "(empty: /bin/sh)"
		}
		line("login shell", "%s: %s (%s)", u.Name, shell, what)
	}
	p := rep.Policy
	name := p.Path
	if name == "" {
		name = "embedded default"
	} else if strings.HasPrefix(p.From, "$") || strings.HasPrefix(p.From, "--") {
		name += " (from " + p.From + ")"
	}
	if p.OK {
		line("policy", "%s: loads; host.fallback: %s", name, p.Fallback)
	} else {
		line("policy", "%s: does not load", name)
	}
	s := rep.State
	switch {
	case s.Dir == "":
		line("state", "none")
	case !s.Exists:
		can := "can be created"
		if !s.Writable {
			can = "cannot be created"
		}
		line("state", "%s (not created yet; %s)", s.Dir, can)
	default:
		wr := "writable"
		if !s.Writable {
			wr = "NOT writable"
		}
		line("state", "%s (%s, %s, %d workspaces, %d checkpoints, %d journal steps)",
			s.Dir, wr, size(s.Bytes), s.Workspaces, s.Checkpoints, s.Steps)
	}
	switch c := rep.Server; {
	case c.Socket == "":
	case c.Running && c.PID > 0:
		line("server", "running, pid %d (%s)", c.PID, c.Socket)
	case c.Running:
		line("server", "running (%s)", c.Socket)
	case rep.Fast.Installed:
		line("server", "not running (%s); the first call through undosh-fast starts it", c.Socket)
	default:
		line("server", "not running (%s); only undosh-fast starts and asks it", c.Socket)
	}
	switch c := rep.Server; {
	case c.Socket == "":
	case !c.Running:
		line("watch", "none: with no server, every checkpoint walks the whole workspace")
	case len(c.Watches) == 0:
		line("watch", "no workspace yet (a workspace is watched from its first checkpoint; fs.inotify.max_user_watches = %d)", c.MaxUserWatches)
	default:
		for _, w := range c.Watches {
			line("watch", "%s", watchLine(w))
		}
	}
	switch e := rep.Enforcement; {
	case !rep.Policy.OK:
	case !e.On:
		line("enforcement", "off (%s): a step the classifier misjudges runs with the protection of the class it got", e.From)
	case e.Mechanism != "":
		line("enforcement", "on (%s): %s; escalate: %s", e.From, e.Is, e.Escalate)
	case e.Missing != "":
		line("enforcement", "on (%s), but nothing here can hold a step to its class: %s", e.From, e.Missing)
	default:
		line("enforcement", "on (%s); the kernel's means are those of the machine the tree runs on", e.From)
	}
	switch m := rep.Machine; {
	case m.Engine == "root":
		line("machine steps", "in a copy of the machine (root's: an overlay over / and each submount)")
	case m.Engine == "rootless":
		line("machine steps", "in a rootless copy (a user namespace that maps uid %d to itself, an overlay per directory; copies in %s); commits only what this user could write", os.Geteuid(), fork.RootlessCopiesDir())
	case m.Missing != "":
		line("machine steps", "no copy can be made here: %s; host.fallback: %s", m.Missing, m.Fallback)
	}
	for _, e := range rep.Examples {
		cls := ""
		if e.Class != "" {
			cls = "class " + e.Class + ": "
		}
		line(e.What, "%s -> %s%s", e.Command, cls, e.Outcome)
	}
	if len(rep.Problems) == 0 {
		fmt.Fprintln(w, "healthy")
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// watchLine says what a watcher watches and what the next checkpoint of
// its workspace reads.
func watchLine(w watchd.Status) string {
	next := "the next checkpoint reads only what changed"
	if w.Full != "" {
		next = "the next checkpoint walks everything: " + w.Full
	}
	return fmt.Sprintf("%s: %d directories, %d paths changed since the last checkpoint; %s", w.Root, w.Watches, w.Dirty, next)
}
