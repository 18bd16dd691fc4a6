package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/agent"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/policy"
	"github.com/undosh/undosh/service"
)

// openStore opens the checkpoint store of the workspace named by -C, with
// the policy's excludes and size limit.
func (c *common) openStore(io stdio, getenv func(string) string) (*checkpoint.Store, error) {
	p, o, err := c.setup(getenv)
	if err != nil {
		return nil, err
	}
	sd := state.Dir(c.stateDir, getenv, os.Getuid())
	if sd == "" {
		return nil, &exit.UsageError{Msg: "no state directory: set --state DIR or UNDOSH_STATE_DIR"}
	}
	ws := o.Cwd
	if len(o.Roots) > 0 {
		ws = o.Roots[0]
	}
	opts := storeOptions(sd, p, getenv)
	if f, ok := io.err.(*os.File); ok && isTerminal(f) {
		opts.Progress = f
	}
	s, err := checkpoint.Open(ws, opts)
	if errors.Is(err, checkpoint.ErrBadWorkspace) {
		return nil, &exit.UsageError{Msg: err.Error()}
	}
	return s, err
}

// storeOptions are the checkpoint options policy p gives, for stores in
// the state directory sd.
func storeOptions(sd string, p *policy.Policy, getenv func(string) string) checkpoint.Options {
	return state.StoreOptions(sd, p, getenv("HOME"))
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// storeCmd runs the checkpoint subcommands.
func storeCmd(name string, args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	msg := fs.String("m", "", "checkpoint message")
	maxAge := fs.Duration("max-age", 24*time.Hour, "gc: drop checkpoints older than this")
	maxBytes := fs.Int64("max-bytes", 0, "gc: drop the oldest checkpoints until the store fits")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	want := map[string]int{"checkpoint": 0, "checkpoints": 0, "diff": -1, "restore": 1, "gc": 0, "check": 0, "status": 0}
	if n := want[name]; n >= 0 && len(ops) != n || name == "diff" && (len(ops) < 1 || len(ops) > 2) {
		return &exit.UsageError{Msg: fmt.Sprintf("%s: wrong number of arguments (see undoctl help)", name)}
	}
	s, err := c.openStore(io, getenv)
	if err != nil {
		return err
	}
	defer s.Close()
	out := io.out
	switch name {
	case "checkpoint":
		r, err := s.Checkpoint(*msg)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, r)
		}
		fmt.Fprintln(out, r.ID)
		if !r.Changed {
			fmt.Fprintln(io.err, "undoctl: nothing changed since this checkpoint")
		}
		if len(r.LeftOut) > 0 {
			fmt.Fprintf(io.err, "undoctl: %d paths left out (undoctl status lists them)\n", len(r.LeftOut))
		}
	case "checkpoints":
		l, err := s.Log()
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, l)
		}
		for i, e := range l {
			fmt.Fprintf(out, "~%-3d %s  %s  %6d files  %s\n", i, e.ID[:12], e.Time.Local().Format("2006-01-02 15:04:05"), e.Files, e.Message)
		}
	case "diff":
		b := ""
		if len(ops) == 2 {
			b = ops[1]
		}
		ch, err := s.Diff(ops[0], b)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, ch)
		}
		for _, x := range ch {
			fmt.Fprintf(out, "%-11s %s\n", x.Kind, quotePath(x.Path))
		}
	case "restore":
		r, err := s.Restore(ops[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, r)
		}
		fmt.Fprintf(out, "restored %s: %d written, %d removed\n", r.Target[:12], len(r.Written), len(r.Removed))
		for _, k := range r.Kept {
			fmt.Fprintf(io.err, "undoctl: kept %s: it holds paths checkpoints leave out\n", quotePath(k))
		}
		fmt.Fprintf(io.err, "undoctl: to undo this restore: undoctl restore %s\n", r.Before[:12])
	case "gc":
		r, err := s.GC(checkpoint.GCOptions{MaxAge: *maxAge, MaxBytes: *maxBytes})
		if err != nil {
			return err
		}
		// The service checkpoints and the machine commits go too,
		// whatever is printed.
		sd := state.Dir(c.stateDir, getenv, os.Getuid())
		services, err := serviceGC(sd, *maxAge)
		if err != nil {
			fmt.Fprintf(io.err, "undoctl: service checkpoints: %v\n", err)
		}
		commits, commitBytes, err := machineGC(sd, *maxAge)
		if err != nil {
			fmt.Fprintf(io.err, "undoctl: machine commits: %v\n", err)
		}
		if *asJSON {
			return printJSON(out, struct {
				checkpoint.GCResult
				Services    int   `json:"service_checkpoints_dropped"`
				Commits     int   `json:"machine_commits_dropped"`
				CommitBytes int64 `json:"machine_commit_bytes"`
			}{r, services, commits, commitBytes})
		}
		fmt.Fprintf(out, "kept %d checkpoints, dropped %d; store %d → %d bytes\n", r.Kept, r.Dropped, r.BytesBefore, r.BytesAfter)
		if services > 0 {
			fmt.Fprintf(out, "dropped %d service checkpoints older than %s\n", services, *maxAge)
		}
		if commits > 0 {
			fmt.Fprintf(out, "dropped the records of %d machine commits older than %s (%d bytes): they can no longer be undone\n", commits, *maxAge, commitBytes)
		}
	case "check":
		r, err := s.Check()
		if err != nil {
			return err
		}
		if *asJSON {
			if err := printJSON(out, r); err != nil {
				return err
			}
		} else {
			for _, n := range r.Notes {
				fmt.Fprintf(out, "note: %s\n", n)
			}
			for _, p := range r.Problems {
				fmt.Fprintf(out, "problem: %s\n", p)
			}
			fmt.Fprintf(out, "%d checkpoints, %d objects, %d packs: %s\n", r.Checkpoints, r.Objects, r.Packs, map[bool]string{true: "ok", false: "damaged"}[len(r.Problems) == 0])
		}
		if len(r.Problems) > 0 {
			return fmt.Errorf("the store %s has %d problems", s.Dir(), len(r.Problems))
		}
	case "status":
		st, err := s.Status()
		if err != nil {
			return err
		}
		w := c.watchStatus(s, getenv)
		if *asJSON {
			return printJSON(out, struct {
				checkpoint.Status
				Watch string `json:"watch"`
			}{st, w})
		}
		fmt.Fprintf(out, "workspace:   %s\nstore:       %s (%d bytes)\ncheckpoints: %d\n", st.Workspace, st.Store, st.Bytes, st.Checkpoints)
		if st.Newest != "" {
			fmt.Fprintf(out, "newest:      %s\n", st.Newest[:12])
		}
		fmt.Fprintf(out, "host:        %s\n", c.hostStatus(getenv))
		if p, _, err := c.setup(getenv); err == nil {
			if found, err := service.Detect(p.Services); err == nil {
				printServices(out, found)
			}
		}
		fmt.Fprintf(out, "watch:       %s\n", w)
		fmt.Fprintf(out, "left out:    %d\n", len(st.LeftOut))
		for _, l := range st.LeftOut {
			fmt.Fprintf(out, "  %-12s %s\n", l.Reason, quotePath(l.Path))
		}
	}
	return nil
}

// watchStatus says whether the front end's server watches the workspace
// of s, and what its next checkpoint reads.
func (c *common) watchStatus(s *checkpoint.Store, getenv func(string) string) string {
	sd := state.Dir(c.stateDir, getenv, os.Getuid())
	if sd == "" {
		return "none (no state directory)"
	}
	a, err := watchd.Ask(state.SocketPath(sd), watchd.Request{Op: "status"}, 2*time.Second)
	if err != nil {
		return "none: no server runs for " + sd + ", so every checkpoint walks the whole workspace (undosh-fast starts one)"
	}
	for _, w := range a.Status {
		if w.Root == s.Workspace() {
			return watchLine(w)
		}
	}
	return "not watched yet: the server watches a workspace from its first checkpoint, which walks it"
}

// hostStatus says where machine steps go: the sandbox host and whether it
// answers, or the local fork engine.
func (c *common) hostStatus(getenv func(string) string) string {
	p, _, err := c.setup(getenv)
	if err != nil {
		return "unknown (the policy does not load)"
	}
	url := agent.Address(getenv("UNDOSH_HOST"), p.Host.Address)
	if url == "" {
		return "none configured: machine steps run in the local fork engine (or host.fallback)"
	}
	base := hostlink.HostName(url)
	cl, err := agent.Client(url, state.Dir(c.stateDir, getenv, os.Getuid()), hostlink.ClientOptions{Agent: "undoctl"})
	if err != nil {
		return base + ": misconfigured (" + err.Error() + ")"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w, err := cl.Hello(ctx)
	if err != nil {
		return base + ": does not answer (" + err.Error() + "); machine steps fall back"
	}
	return fmt.Sprintf("%s: answers (sandbox %s, generation %d, %s)", base, w.Sandbox, w.Generation, w.Role)
}

// quotePath shows a path on one line, whatever bytes it holds.
func quotePath(p string) string {
	if strings.ContainsAny(p, "\n\t\"\\") || !isPrintable(p) {
		return fmt.Sprintf("%q", p)
	}
	return p
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return false
		}
	}
	return true
}

// machineGC drops the records of the machine commits that the steps of
// state directory sd made and that ended more than maxAge ago. Other
// state directories' commits (the machine's journal is shared) stay.
func machineGC(sd string, maxAge time.Duration) (dropped int, bytes int64, err error) {
	j, err := journal.Open(sd)
	if err != nil {
		return 0, 0, err
	}
	recs, err := j.Read()
	if err != nil {
		return 0, 0, err
	}
	ids := map[string][]string{} // journal directory: commit ids
	var dirs []string
	for _, rec := range recs {
		for _, mc := range rec.Machine {
			if _, ok := ids[mc.JournalDir]; !ok {
				dirs = append(dirs, mc.JournalDir)
			}
			ids[mc.JournalDir] = append(ids[mc.JournalDir], mc.ID)
		}
	}
	cutoff := time.Now().Add(-maxAge)
	var errs []error
	for _, d := range dirs {
		r, err := fork.Prune(d, ids[d], cutoff)
		dropped += len(r.Dropped)
		bytes += r.Bytes
		errs = append(errs, err)
	}
	return dropped, bytes, errors.Join(errs...)
}
