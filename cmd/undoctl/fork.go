package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
)

// runCmd is `undoctl run --fork [--verify CMD] -- CMD…`: CMD as a machine
// step, in a copy of the machine, committed only if it and verify pass.
// try is `undoctl try [--json] -- CMD…`: CMD in a copy, what it changed,
// and the copy always discarded.
func runCmd(name string, args []string, io stdio, getenv func(string) string) (int, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.err)
	var c common
	c.register(fs)
	forkFlag := fs.Bool("fork", false, "run: in a copy of the machine (the only kind there is yet)")
	verify := fs.String("verify", "", "run: a shell command that must pass in the copy before it is committed")
	asJSON := fs.Bool("json", false, "try: print the changes as JSON")
	timing := fs.Bool("timing", false, "print how long each phase took, on stderr")
	if err := fs.Parse(args); err != nil {
		return 0, &exit.UsageError{Msg: err.Error()}
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return 0, &exit.UsageError{Msg: fmt.Sprintf("%s: no command given (undoctl %s -- CMD…)", name, name)}
	}
	if name == "run" && !*forkFlag {
		return 0, &exit.UsageError{Msg: "run: say --fork (undoctl run --fork -- CMD…): a machine step is the only kind undoctl runs"}
	}
	if err := fork.Probe(); err != nil {
		return 0, &hintError{err: err, hint: "the local fork engine needs overlayfs, the mount, pid and network namespaces, and root or user namespaces that work; undoctl doctor says which is missing"}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return 0, err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	sd := ""
	j, sdir, jerr := c.openJournal(getenv)
	if jerr == nil {
		sd = sdir
	}
	step := machine.Step{Argv: argv, Dir: cwd, Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Verify: *verify, StateDir: sd, Include: classify.WorkspaceRoots(cwd, os.Getenv("HOME")), Leftovers: true}
	if name == "try" {
		out, err := machine.Run(ctx, step, false)
		if err != nil {
			return 0, err
		}
		printPhases(io, out, *timing)
		if line := out.LeftoverSummary(); line != "" {
			fmt.Fprintf(io.err, "undoctl: the command %s\n", line)
		}
		return out.Status, printChanges(io, out, *asJSON)
	}
	start := time.Now()
	rec := journal.Record{Time: start, PID: os.Getpid(), Cwd: cwd, Command: strings.Join(argv, " "), Class: "fork", Verdict: "run"}
	var s *journal.Step
	if jerr == nil {
		if s, err = j.BeginIn(nil); err != nil {
			return 0, err
		}
		rec.ID = s.ID
		step.Journal, step.ID = j, s.ID
	}
	out, err := machine.Run(ctx, step, true)
	if err != nil {
		if s != nil {
			s.Abandon()
		}
		return 0, err
	}
	printPhases(io, out, *timing)
	notice, code := machine.Report(rec.ID, out, *verify, &rec)
	if notice != "" {
		fmt.Fprintf(io.err, "undoctl: %s\n", notice)
	}
	if line := out.LeftoverSummary(); line != "" {
		fmt.Fprintf(io.err, "undoctl: step %d %s\n", rec.ID, line)
	}
	if s != nil {
		rec.Duration = float64(time.Since(start).Microseconds()) / 1000
		if err := s.Finish(rec); err != nil {
			fmt.Fprintf(io.err, "undoctl: the step is not in the journal: %v\n", err)
		}
	}
	if len(rec.Machine) > 0 {
		fmt.Fprintf(io.err, "undoctl: committed as step %d; undoctl back %d undoes it\n", rec.ID, rec.ID)
	}
	return code, nil
}

// change is one path a try changed.
type change struct {
	Path string `json:"path"`
	// What is added, changed, deleted or metadata (mode, owner, times,
	// xattrs only).
	What string `json:"what"`
	Type string `json:"type,omitempty"`
	Size int64  `json:"size,omitempty"`
}

func printChanges(io stdio, out machine.Outcome, asJSON bool) error {
	var all []change
	for _, p := range out.Plans {
		replaced := map[string]bool{}
		for _, op := range p.Ops {
			if op.Kind == fork.OpRemove {
				replaced[op.Path] = true
			}
		}
		for _, op := range p.Ops {
			c := change{Path: p.Name(op), Type: string(op.Type), Size: op.Size}
			switch op.Kind {
			case fork.OpRemove:
				c.What = "deleted"
			case fork.OpReplace:
				c.What = "changed"
			case fork.OpMeta:
				c.What = "metadata"
			default:
				c.What = "added"
				if replaced[op.Path] {
					c.What = "changed"
				}
			}
			all = append(all, c)
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].Path < all[b].Path })
	if asJSON {
		if all == nil {
			all = []change{}
		}
		return printJSON(io.out, struct {
			Exit    int      `json:"exit"`
			Changes []change `json:"changes"`
		}{out.Status, all})
	}
	defer fmt.Fprintf(io.err, "undoctl: %d %s in the copy, which is discarded; the machine is unchanged\n", len(all), map[bool]string{true: "change", false: "changes"}[len(all) == 1])
	for _, c := range all {
		size := ""
		if c.Type == string(fork.TypeFile) && c.What != "deleted" {
			size = fmt.Sprintf(" (%d bytes)", c.Size)
		}
		fmt.Fprintf(io.out, "%-8s %s%s\n", c.What, quotePath(c.Path), size)
	}
	return nil
}

// printPhases prints how long each phase of a machine step took.
func printPhases(io stdio, out machine.Outcome, on bool) {
	if !on {
		return
	}
	var parts []string
	for _, p := range []string{"create", "step", "verify", "diff", "commit", "discard"} {
		if d, ok := out.Phases[p]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f ms", p, float64(d.Microseconds())/1000))
		}
	}
	fmt.Fprintf(io.err, "undoctl: timing: %s\n", strings.Join(parts, ", "))
}
