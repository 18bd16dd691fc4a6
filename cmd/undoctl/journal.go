package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/agent"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/state"
)

// openJournal opens the journal of the state directory named by --state.
func (c *common) openJournal(getenv func(string) string) (*journal.Journal, string, error) {
	sd := state.Dir(c.stateDir, getenv, os.Getuid())
	if sd == "" {
		return nil, "", &exit.UsageError{Msg: "no state directory: set --state DIR or UNDOSH_STATE_DIR"}
	}
	j, err := journal.Open(sd)
	return j, sd, err
}

// stepArg reads a step number.
func stepArg(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "#"))
	if err != nil || n <= 0 {
		return 0, &exit.UsageError{Msg: fmt.Sprintf("%q is not a step number (undoctl log lists them)", s)}
	}
	return n, nil
}

// journalCmd runs log, show and back.
func journalCmd(name string, args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	force := fs.Bool("force", false, "back: undo a machine step even over later changes to its paths")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	want := map[string]int{"log": 0, "show": 1, "back": 1}[name]
	if len(ops) != want {
		return &exit.UsageError{Msg: fmt.Sprintf("%s: wrong number of arguments (see undoctl help)", name)}
	}
	j, sd, err := c.openJournal(getenv)
	if err != nil {
		return err
	}
	switch name {
	case "log":
		recs, err := j.Read()
		if err != nil {
			return err
		}
		if *asJSON {
			if recs == nil {
				recs = []journal.Record{}
			}
			return printJSON(io.out, recs)
		}
		if len(recs) == 0 {
			fmt.Fprintf(io.err, "undoctl: no steps yet in %s\n", j.Path())
			return nil
		}
		fmt.Fprintf(io.out, "%-5s %-19s %-5s %-5s %-17s %-12s %s\n", "STEP", "TIME", "CLASS", "EXIT", "OUTCOME", "CHECKPOINT", "COMMAND")
		for _, r := range recs {
			cp := "-"
			switch {
			case len(r.Points) > 0:
				cp = shortID(r.Points[0].Before)
			case r.HostCheckpoint != "":
				cp = "host " + shortID(r.HostCheckpoint)
			case len(r.Machine) > 0:
				// Machine commits are named by time: show hhmmss.
				cp = "fork@" + r.Machine[0].ID[min(9, len(r.Machine[0].ID)):min(15, len(r.Machine[0].ID))]
			}
			ex := strconv.Itoa(r.Exit)
			if r.Signal != "" {
				ex = r.Signal
			}
			fmt.Fprintf(io.out, "%-5d %-19s %-5s %-5s %-17s %-12s %s\n", r.ID, r.Time.Local().Format("2006-01-02 15:04:05"),
				r.Class, ex, r.Outcome, cp, oneLine(r.Command, 80))
		}
		return nil
	case "show":
		n, err := stepArg(ops[0])
		if err != nil {
			return err
		}
		r, err := j.Find(n)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(io.out, r)
		}
		showRecord(io, sd, r)
		return nil
	}
	n, err := stepArg(ops[0])
	if err != nil {
		return err
	}
	return back(&c, j, sd, n, io, getenv, *asJSON, *force)
}

func showRecord(io stdio, sd string, r journal.Record) {
	w := io.out
	fmt.Fprintf(w, "step:      %d\n", r.ID)
	fmt.Fprintf(w, "time:      %s (%.1f ms)\n", r.Time.Local().Format(time.RFC3339), r.Duration)
	fmt.Fprintf(w, "cwd:       %s\n", r.Cwd)
	fmt.Fprintf(w, "command:   %s\n", oneLine(r.Command, 2000))
	if wr := r.Wrapper; wr != nil {
		fmt.Fprintf(w, "wrapper:   %s's scaffolding around it, %s\n", wr.Harness, journal.ScaffoldFile(sd, wr.Scaffold))
	}
	eg := ""
	if r.Egress {
		eg = ", egress"
	}
	fmt.Fprintf(w, "class:     %s%s, verdict %s\n", r.Class, eg, r.Verdict)
	if r.Parent != 0 {
		fmt.Fprintf(w, "inside:    step %d\n", r.Parent)
	}
	if r.RerunOf != 0 {
		fmt.Fprintf(w, "rerun of:  step %d\n", r.RerunOf)
	}
	if e := r.Escalated; e != nil {
		fmt.Fprintf(w, "beyond:    needed class %s, %s: %s\n", e.To, e.How, oneLine(strings.Join(e.Paths, ", "), 400))
	}
	ex := strconv.Itoa(r.Exit)
	if r.Signal != "" {
		ex += " (" + r.Signal + ")"
	}
	fmt.Fprintf(w, "exit:      %s\n", ex)
	if r.Verify != "" {
		v := "not run"
		if r.VerifyOK != nil {
			v = map[bool]string{true: "passed", false: "failed"}[*r.VerifyOK]
		}
		fmt.Fprintf(w, "verify:    %s (%s)\n", r.Verify, v)
	}
	fmt.Fprintf(w, "outcome:   %s\n", r.Outcome)
	if r.Notice != "" {
		fmt.Fprintf(w, "notice:    %s\n", r.Notice)
	}
	if r.Sudo {
		fmt.Fprintf(w, "as root:   through sudo -n: the copy and its commits are root's, so undoctl back undoes them through sudo\n")
	}
	for _, m := range r.Machine {
		fmt.Fprintf(w, "machine:   %s, commit %s (%d %s)\n", m.Target, m.ID, len(m.Paths), map[bool]string{true: "path", false: "paths"}[len(m.Paths) == 1])
	}
	for _, p := range r.Points {
		fmt.Fprintf(w, "workspace: %s\n  before:  %s\n", p.Root, p.Before)
		if p.After != "" {
			fmt.Fprintf(w, "  after:   %s (%d files restored)\n", p.After, p.Restored)
		}
	}
	for _, sp := range r.Services {
		fmt.Fprintf(w, "service:   %s\n  before:  %s (%s, frozen %.1f ms)\n", sp.Name, sp.Before, size(sp.Bytes), sp.Frozen)
		if sp.After != "" {
			fmt.Fprintf(w, "  after:   %s (put back: %v)\n", sp.After, sp.Restored)
		}
	}
	for _, p := range r.Killed {
		fmt.Fprintf(w, "killed:    pid %d, %s (in %s, uid %d)\n", p.PID, oneLine(p.Command(), 200), p.Cwd, p.UID)
	}
	if len(r.Reasons) > 0 {
		fmt.Fprintln(w, "reasons:")
		for _, rs := range r.Reasons {
			at := ""
			if rs.At != "" {
				at = " (" + rs.At + ")"
			}
			fmt.Fprintf(w, "  %-5s %s%s at %s: %s\n", rs.Class, rs.Rule, at, rs.Pos, oneLine(rs.Text, 200))
		}
		if r.ReasonsLeft > 0 {
			fmt.Fprintf(w, "  … and %d more that did not decide it (undoctl explain lists them all)\n", r.ReasonsLeft)
		}
	}
	if r.VerifyOutput != "" {
		fmt.Fprintf(w, "verify output:\n%s\n", r.VerifyOutput)
	}
}

// back restores every workspace step n checkpointed to its state before
// step n, after checkpointing the current state, and journals the restore.
func back(c *common, j *journal.Journal, sd string, n int, io stdio, getenv func(string) string, asJSON, force bool) error {
	r, err := j.Find(n)
	if err != nil {
		return err
	}
	if r.Host != "" && r.HostBefore != "" {
		var configured string
		if getenv("UNDOSH_HOST") == "" {
			if p, _, err := c.setup(getenv); err == nil {
				configured = p.Host.Address
			}
		}
		return backHost(j, r, io, agent.Address(getenv("UNDOSH_HOST"), configured), sd)
	}
	if r.Sudo && len(r.Machine) > 0 && os.Geteuid() != 0 {
		return backSudo(sd, r, io, asJSON, force)
	}
	if len(r.Machine) > 0 {
		// A workspace step kept for what it wrote beyond its workspace
		// (escalate: commit) has both: the machine first, last done.
		if err := backMachine(j, r, io, force); err != nil || len(r.Points) == 0 {
			return err
		}
	}
	start := time.Now()
	var live journal.Record
	if len(r.Services) > 0 || len(r.Killed) > 0 {
		// A live step (it talked to services running here): they go
		// back first, then its workspace.
		if live, err = backLive(sd, r, io); err != nil {
			return err
		}
	}
	if len(r.Points) == 0 {
		if len(live.Services) > 0 || len(r.Killed) > 0 {
			live.Command, live.Class, live.Parent = fmt.Sprintf("undoctl back %d", n), "fork", n
			journalRestore(j, live, start, io)
			return nil
		}
		return fmt.Errorf("step %d took no checkpoint (outcome: %s); there is nothing to go back to", n, r.Outcome)
	}
	p, _, err := c.setup(getenv)
	if err != nil {
		return err
	}
	rec := journal.Record{Time: start, PID: os.Getpid(), Command: fmt.Sprintf("undoctl back %d", n), Class: "git",
		Verdict: "run", Outcome: journal.Restored, Parent: n, Services: live.Services}
	rec.Cwd, _ = os.Getwd()
	var results []checkpoint.RestoreResult
	for _, pt := range r.Points {
		s, err := checkpoint.Open(pt.Root, storeOptions(sd, p, getenv))
		if err != nil {
			return err
		}
		res, err := s.Restore(pt.Before)
		s.Close()
		if err != nil {
			return fmt.Errorf("restore %s to before step %d: %w", pt.Root, n, err)
		}
		results = append(results, res)
		rec.Points = append(rec.Points, journal.Checkpoint{Root: pt.Root, Before: res.Before, After: pt.Before,
			Restored: len(res.Written) + len(res.Removed)})
		if !asJSON {
			fmt.Fprintf(io.out, "%s: back to before step %d (checkpoint %s): %d written, %d removed\n",
				pt.Root, n, shortID(pt.Before), len(res.Written), len(res.Removed))
			for _, k := range res.Kept {
				fmt.Fprintf(io.err, "undoctl: kept %s: it holds paths checkpoints leave out\n", quotePath(k))
			}
			fmt.Fprintf(io.err, "undoctl: to undo this: undoctl restore -C %s %s\n", pt.Root, shortID(res.Before))
		}
	}
	rec.Duration = float64(time.Since(start).Microseconds()) / 1000
	if id, err := j.NewID(); err == nil {
		rec.ID = id
		if err := j.Append(rec); err != nil {
			fmt.Fprintf(io.err, "undoctl: the restore is not in the journal: %v\n", err)
		}
	}
	if asJSON {
		return printJSON(io.out, results)
	}
	return nil
}

// diffCmd shows what step N changed (undoctl diff N), or the paths that
// differ between two checkpoints (undoctl diff A [B]).
func diffCmd(args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 || strings.HasPrefix(ops[0], "~") {
		return storeCmd("diff", args, io, getenv)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(ops[0], "#"))
	if err != nil || n <= 0 || len(ops[0]) >= 7 {
		// A checkpoint id (hex, at least 7 characters).
		return storeCmd("diff", args, io, getenv)
	}
	j, sd, err := c.openJournal(getenv)
	if err != nil {
		return err
	}
	r, err := j.Find(n)
	if err != nil {
		return err
	}
	if len(r.Points) == 0 {
		return fmt.Errorf("step %d took no checkpoint (outcome: %s), so undosh cannot say what it changed", n, r.Outcome)
	}
	p, _, err := c.setup(getenv)
	if err != nil {
		return err
	}
	var all []checkpoint.Change
	for _, pt := range r.Points {
		s, err := checkpoint.Open(pt.Root, storeOptions(sd, p, getenv))
		if err != nil {
			return err
		}
		after, note, err := afterStep(s, pt, nextBefore(j, n, pt.Root))
		if err == nil {
			var ch []checkpoint.Change
			ch, err = s.Diff(pt.Before, after)
			all = append(all, ch...)
			if !*asJSON {
				if len(r.Points) > 1 {
					fmt.Fprintf(io.out, "%s:\n", pt.Root)
				}
				for _, x := range ch {
					fmt.Fprintf(io.out, "%-11s %s\n", x.Kind, quotePath(x.Path))
				}
				if note != "" {
					fmt.Fprintf(io.err, "undoctl: %s\n", note)
				}
			}
		}
		s.Close()
		if err != nil {
			return err
		}
	}
	if *asJSON {
		if all == nil {
			all = []checkpoint.Change{}
		}
		return printJSON(io.out, all)
	}
	return nil
}

// afterStep names the state just after a step: the checkpoint taken after
// it (when it was kept or rolled back), else the checkpoint before the
// next step in the same workspace (next), else the next checkpoint in the
// chain, else the workspace as it is now ("").
func afterStep(s *checkpoint.Store, pt journal.Checkpoint, next string) (string, string, error) {
	if pt.After != "" {
		return pt.After, "", nil
	}
	if next != "" {
		// Steps that change nothing share their checkpoint: the chain's
		// next one may be a later step's.
		return next, "", nil
	}
	l, err := s.Log()
	if err != nil {
		return "", "", err
	}
	for i, e := range l {
		if e.ID == pt.Before {
			if i > 0 {
				return l[i-1].ID, "", nil
			}
			return "", "no later checkpoint: compared with the workspace as it is now", nil
		}
	}
	return "", "", fmt.Errorf("checkpoint %s is gone from the store (undoctl gc drops old ones)", shortID(pt.Before))
}

// nextBefore is the checkpoint taken before the first step after step n
// in workspace root, "" when there is none.
func nextBefore(j *journal.Journal, n int, root string) string {
	recs, err := j.Read()
	if err != nil {
		return ""
	}
	best, before := 0, ""
	for _, r := range recs {
		if r.ID <= n || best != 0 && r.ID >= best {
			continue
		}
		for _, p := range r.Points {
			if p.Root == root && p.Before != "" {
				best, before = r.ID, p.Before
			}
		}
	}
	return before
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// oneLine shows s on one line, at most n characters.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len([]rune(s)) > n {
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}

// backMachine undoes the commits of machine step r, last first; the fork
// engine refuses when a later commit on the same paths is not undone, or,
// unless force, when a committed path changed since.
func backMachine(j *journal.Journal, r journal.Record, io stdio, force bool) error {
	var commits []machine.Commit
	for _, m := range r.Machine {
		commits = append(commits, machine.Commit{Target: m.Target, JournalDir: m.JournalDir, ID: m.ID, Paths: m.Paths})
	}
	start := time.Now()
	if err := machine.Undo(commits, force); err != nil {
		var ce *fork.ConflictError
		if errors.As(err, &ce) {
			return &hintError{err: err, hint: fmt.Sprintf("undoctl back --force %d puts the originals back over those changes", r.ID)}
		}
		var oe *fork.OrderError
		if errors.As(err, &oe) {
			return &hintError{err: err, hint: "machine steps are undone last first: go back over the later one first (undoctl log)"}
		}
		if errors.Is(err, fork.ErrNoCommit) {
			return &hintError{err: err, hint: fmt.Sprintf("step %d can no longer be undone: what it changed on the machine stays (undoctl show %d lists the paths)", r.ID, r.ID)}
		}
		return err
	}
	for _, m := range r.Machine {
		fmt.Fprintf(io.out, "%s: step %d undone: %d %s put back (commit %s)\n", m.Target, r.ID, len(m.Paths), map[bool]string{true: "path", false: "paths"}[len(m.Paths) == 1], m.ID)
	}
	if r.Sudo {
		// Run as root (through sudo) on its user's journal: what the
		// journal writes stays that user's.
		if err := journalAsOwner(filepath.Dir(j.Path())); err != nil {
			return fmt.Errorf("step %d is undone, but not in the journal: %w", r.ID, err)
		}
	}
	rec := journal.Record{Time: start, PID: os.Getpid(), Command: fmt.Sprintf("undoctl back %d", r.ID), Class: "fork",
		Verdict: "run", Outcome: journal.Restored, Parent: r.ID, Duration: float64(time.Since(start).Microseconds()) / 1000}
	rec.Cwd, _ = os.Getwd()
	if id, err := j.NewID(); err == nil {
		rec.ID = id
		if err := j.Append(rec); err != nil {
			fmt.Fprintf(io.err, "undoctl: the undo is not in the journal: %v\n", err)
		}
	}
	return nil
}

// hintError is an error with a hint for undoctl's report.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }
func (e *hintError) Hint() string  { return e.hint }

// backHost asks the sandbox host that ran step r, at url, to put the
// sandbox back to its checkpoint from before the step (which also undoes
// every later step of the host). The token is url's, or else host.json's
// in the state directory sd, as undosh's (agent.Client).
func backHost(j *journal.Journal, r journal.Record, io stdio, url, sd string) error {
	if hostlink.HostName(url) != r.Host {
		return &hintError{err: fmt.Errorf("step %d ran on the sandbox host %s, and neither UNDOSH_HOST nor the policy's host.address names it", r.ID, r.Host),
			hint: "set UNDOSH_HOST to " + r.Host + " (the token is host.json's, kept by undoctl agent, or the URL's ?token=…)"}
	}
	c, err := agent.Client(url, sd, hostlink.ClientOptions{Agent: "undoctl"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	acc, err := c.Restore(ctx, hostlink.Restore{Key: fmt.Sprintf("undoctl-back-%d-%d", r.ID, start.UnixNano()), Checkpoint: r.HostBefore})
	if err != nil {
		return fmt.Errorf("ask %s to go back to checkpoint %s: %w", r.Host, r.HostBefore, err)
	}
	op, err := c.Follow(ctx, acc.Op, io.out, io.err)
	if err != nil {
		return fmt.Errorf("going back to checkpoint %s on %s: %w", r.HostBefore, r.Host, err)
	}
	if op.State != hostlink.StateDone {
		why := string(op.State)
		if op.Error != nil {
			why += ": " + op.Error.Error()
		}
		return fmt.Errorf("the host did not go back to checkpoint %s (%s)", r.HostBefore, why)
	}
	fmt.Fprintf(io.out, "%s: the sandbox is back to checkpoint %s, before step %d\n", r.Host, r.HostBefore, r.ID)
	rec := journal.Record{Time: start, PID: os.Getpid(), Command: fmt.Sprintf("undoctl back %d", r.ID), Class: "fork",
		Verdict: "run", Outcome: journal.Restored, Parent: r.ID, Host: r.Host, HostBefore: r.HostBefore, HostOp: op.ID,
		Duration: float64(time.Since(start).Microseconds()) / 1000}
	rec.Cwd, _ = os.Getwd()
	if id, err := j.NewID(); err == nil {
		rec.ID = id
		if err := j.Append(rec); err != nil {
			fmt.Fprintf(io.err, "undoctl: the restore is not in the journal: %v\n", err)
		}
	}
	return nil
}
