// Package machine runs machine-changing steps with the local fork engine:
// the step, then verify, each a session in a copy of the machine with the
// network cut off; the copy is committed onto the real root only when both
// pass, and discarded otherwise. It is the glue between fork (the engine)
// and its callers, undosh's shell and undoctl run --fork / try.
//
// Machine steps run one at a time: a second one waits for the first (an
// flock in the state directory).
package machine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/flock"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/policy"
)

// Step is one machine-changing step.
type Step struct {
	// Argv is run in the copy: Path (the real bash, for undosh) with the
	// caller's argv, or Argv[0] looked up when Path is "". Argv is
	// required.
	Argv []string
	Path string
	Dir  string
	Env  []string
	// Stdin, Stdout, Stderr are the step's files (nil: /dev/null).
	Stdin, Stdout, Stderr *os.File
	// Verify, when set, runs after a step that passed, with bash -c in
	// VerifyDir (default Dir), in the same copy: the copy is kept only if
	// it passes. Empty: the step's own exit status decides.
	Verify, VerifyDir string
	// Shell runs Verify ("/bin/bash" by default).
	Shell string
	// Timeout bounds the step and verify each (0: 30 minutes);
	// VerifyTimeout, when set, bounds verify instead.
	Timeout, VerifyTimeout time.Duration
	// VerifyOut, when set, receives verify's output (stdout and stderr
	// together) as it runs, besides the tail kept in VerifyOutput.
	VerifyOut io.Writer
	// Include lists the workspaces the step runs in: committed even
	// inside a tree a commit leaves out (a project under /tmp).
	Include []string
	// StateDir holds the lock that serialises machine steps and the
	// logs of the processes a kept step left running, started again;
	// empty means this user's (state.Dir), as undosh's own.
	StateDir string
	// Protected are paths a commit may not change: undosh's own files,
	// under the policy's self_protect. A step that changed one is not
	// applied (Outcome.Protected).
	Protected []string
	// Journal and ID, when set, mark each commit as in progress in the
	// journal's pending directory, so that the next undosh has the fork
	// engine recover a commit cut short.
	Journal *journal.Journal
	ID      int
	Logger  *slog.Logger
	// Setuid names the setuid or setgid programs the step runs: in a
	// rootless copy they run without privilege, which the notice of a
	// failed step then says.
	Setuid []string
	// User, when set, is who the step and verify run as in the copy (a
	// step that entered the engine through sudo runs as its user; only
	// what it runs through sudo is root). Hide lists more paths hidden
	// from the copy and never committed (that user's state directory).
	User *fork.User
	Hide []string
	// KeepFailed commits the copy whatever the step's status (the
	// policy's rollback: never): a failing step leaves what it did, as it
	// would without undosh. Verify does not run.
	KeepFailed bool
	// Leftovers: the processes the step leaves running in its copy are
	// listed and, when the copy is kept, started again on this machine
	// (leftovers.go; Outcome.Leftovers). Without it they are killed with
	// the copy, unsaid.
	Leftovers bool
	// Own are the argv[0]s of undosh's own daemons, which a nested
	// undosh in the copy may start (the front end's server): with
	// their children, they are not the step's, and end with the copy
	// unsaid.
	Own []string
}

// Commit is one filesystem's commit of a step.
type Commit struct {
	Target     string   `json:"target"`
	JournalDir string   `json:"journal_dir"`
	ID         string   `json:"id"`
	Paths      []string `json:"paths"`
}

// Outcome is how a machine step ended.
type Outcome struct {
	// Status is the step's exit status (128+n for signal n); Signal the
	// signal that killed it.
	Status int
	Signal syscall.Signal
	// TimedOut: the step or verify ran out of time.
	TimedOut bool
	// KeptFailed: the step failed, and its copy was committed all the
	// same (Step.KeepFailed).
	KeptFailed bool
	// VerifyStatus is verify's status, or -1 when it did not run.
	VerifyStatus int
	// VerifyOutput is the end of what verify printed.
	VerifyOutput []byte
	// Commits are what was committed; empty when the copy was discarded.
	Commits []Commit
	// Changes counts the operations committed (or, for Try, planned).
	Changes int
	// Protected lists what the step changed of [Step.Protected]; when
	// set, nothing was committed.
	Protected []string
	// Conflict is set when the step and verify passed but the commit was
	// refused because real paths changed meanwhile; nothing was changed.
	Conflict *fork.ConflictError
	// Units are systemd units whose files changed; Mapped processes that
	// still map deleted files.
	Units  []string
	Mapped []fork.Mapping
	// Plans are the plans of the copy's layers (Try).
	Plans []fork.Plan
	// Phases are how long each phase took: create, step, verify, diff,
	// commit, restart (of the processes the step left), discard.
	Phases map[string]time.Duration
	// Rootless: the copy was a rootless one (fork.Rootless), for a user
	// who is not root. Setuid is Step.Setuid.
	Rootless bool
	Setuid   []string
	// Unwritable lists what a rootless copy changed that the user could
	// not have changed outside it (fork.CheckWritable); when set,
	// nothing was committed.
	Unwritable []fork.Problem
	// Leftovers are the processes the step left running in its copy
	// (Step.Leftovers), parents first, and what became of each: started
	// again on this machine after the commit, or stopped with a copy
	// that was not kept. LeftoverSummary says it in one line.
	// LeftoversUnread counts those the engine did not read
	// (fork.MaxLeftovers): stopped with the copy, whatever became of it.
	Leftovers       []Leftover
	LeftoversUnread int
}

// Passed reports whether the step and verify passed.
func (o Outcome) Passed() bool { return o.Status == 0 && o.VerifyStatus <= 0 && !o.TimedOut }

// Engine reports whether the local fork engine can run here, and what is
// missing when it cannot. UNDOSH_NO_FORK_ENGINE=1 turns it off (the
// policy's host.fallback then applies).
func Engine(getenv func(string) string) (bool, string) {
	if getenv("UNDOSH_NO_FORK_ENGINE") != "" {
		return false, "the local fork engine is turned off (UNDOSH_NO_FORK_ENGINE)"
	}
	if err := fork.Probe(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// Containment says how steps are held to their class here
// (docs/enforce.md): in a view of the machine that catches what a
// workspace step writes beyond its class (enforce.Capture: root, and the
// fork engine's copies), else by the kernel's hard limit (enforce.MountNS
// or enforce.Landlock), or not at all, with why.
func Containment(getenv func(string) string) (mode enforce.Mode, ok bool, why string) {
	if _, err := enforce.Probe(enforce.Capture); err == nil {
		if ok, _ := Engine(getenv); ok {
			return enforce.Capture, true, ""
		}
	}
	m, err := enforce.Probe(enforce.Auto)
	if err != nil {
		return 0, false, err.Error()
	}
	return m, true, ""
}

// MechanismName names how Containment's mode holds a step, for people.
func MechanismName(m enforce.Mode) string {
	switch m {
	case enforce.Capture:
		return "a view of the machine for workspace steps (what they write beyond the workspace is caught, then kept or put back), a read-only mount namespace for read-only steps"
	case enforce.MountNS:
		return "a mount namespace in which only the step's workspace and scratch paths are writable"
	case enforce.Landlock:
		return "Landlock: writes beyond the step's workspace and scratch paths are refused (sudo does not work in such a step)"
	}
	return m.String()
}

// stateDir is the step's state directory: the one it names, else this
// user's, as undosh's own would be (state.Dir): root's /var/lib/undosh,
// and for anyone else one that user may write.
func (s Step) stateDir() string {
	if s.StateDir != "" {
		return s.StateDir
	}
	return state.Dir("", os.Getenv, os.Geteuid())
}

// lock serialises machine steps.
func lock(stateDir string) (func(), error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	f, err := flock.Lock(filepath.Join(stateDir, "machine.lock"), unix.LOCK_EX)
	if err != nil {
		return nil, err
	}
	return func() { f.Close() }, nil
}

// Run runs s in a copy; with commit, a copy whose step and verify passed
// is committed onto the real root. The copy is always discarded at the end.
func Run(ctx context.Context, s Step, commit bool) (Outcome, error) {
	out := Outcome{VerifyStatus: -1, Phases: map[string]time.Duration{}, Rootless: fork.Rootless(), Setuid: s.Setuid}
	lap := time.Now()
	phase := func(name string) {
		now := time.Now()
		out.Phases[name] += now.Sub(lap)
		lap = now
	}
	if s.Timeout == 0 {
		s.Timeout = 30 * time.Minute
	}
	unlock, err := lock(s.stateDir())
	if err != nil {
		return out, fmt.Errorf("machine step lock: %w", err)
	}
	defer unlock()
	// Copies left by undosh processes that died are removed first.
	fork.Cleanup("")
	lap = time.Now()
	// The state directory is hidden from the copy and never committed:
	// an undosh nested in the step (a front end starting its server)
	// writes its own there, and must not reach the machine's server.
	hide := slices.Clone(s.Hide)
	if s.StateDir != "" {
		hide = append(hide, s.StateDir)
	}
	c, err := fork.Create(fork.Options{Logger: s.Logger, Hide: hide})
	if err != nil {
		return out, fmt.Errorf("make a copy of the machine: %w", err)
	}
	phase("create")
	defer func() {
		lap = time.Now()
		c.Discard()
		phase("discard")
	}()
	res, err := c.Run(ctx, fork.RunOptions{Argv: s.Argv, Path: s.Path, Dir: s.Dir, Env: s.Env,
		Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr, Timeout: s.Timeout, User: s.User, Leftovers: s.Leftovers})
	if err != nil {
		return out, fmt.Errorf("run the step in the copy: %w", err)
	}
	out.Status, out.Signal, out.TimedOut = res.ExitCode, res.Signal, res.TimedOut
	// Stopped, until a kept copy starts them again.
	out.Leftovers, out.LeftoversUnread = stopped(notOwn(res.Leftovers, s.Own)), res.LeftoversUnread
	phase("step")
	if out.Status == 0 && s.Verify != "" && !s.KeepFailed {
		if err := verify(ctx, c, s, &out); err != nil {
			return out, err
		}
		phase("verify")
	}
	if err := c.Settle(); err != nil {
		return out, fmt.Errorf("read what the step changed: %w", err)
	}
	for _, ov := range c.Overlays {
		plan, err := fork.Diff(fork.Layer{Target: ov.Mount, Upper: ov.Upper, T0: c.T0},
			fork.DiffOptions{Seeded: c.Seeded, Mirrored: c.Mirrored, Include: s.Include, StateDir: s.StateDir, Exclude: s.Hide})
		if err != nil {
			return out, fmt.Errorf("read what the step changed under %s: %w", ov.Mount, err)
		}
		if len(plan.Ops) > 0 {
			out.Plans = append(out.Plans, plan)
			out.Changes += len(plan.Ops)
		}
	}
	phase("diff")
	if !commit || !out.Passed() && !s.KeepFailed {
		return out, nil
	}
	if len(out.Plans) > 0 {
		err = commitPlans(&out, s)
		out.KeptFailed = !out.Passed() && len(out.Commits) > 0
		phase("commit")
	}
	if err == nil && out.kept() && len(out.Leftovers) > 0 {
		restart(out.Leftovers, s)
		phase("restart")
	}
	return out, err
}

// kept reports whether a step that passed (or whose failure is kept) was
// applied: not refused, no conflict.
func (o Outcome) kept() bool {
	return len(o.Protected) == 0 && len(o.Unwritable) == 0 && o.Conflict == nil
}

// Keep commits plans, what a step wrote outside its class in a view of
// the machine (enforce's capture mode), onto the real root as Run
// commits a copy that passed: under the machine lock, each commit marked
// in the journal while it runs. A conflict leaves the machine unchanged
// and sets Outcome.Conflict; out.Status and the rest are the caller's.
func Keep(plans []fork.Plan, s Step) (Outcome, error) {
	out := Outcome{VerifyStatus: -1, Plans: plans}
	for _, p := range plans {
		out.Changes += len(p.Ops)
	}
	unlock, err := lock(s.stateDir())
	if err != nil {
		return out, fmt.Errorf("machine step lock: %w", err)
	}
	defer unlock()
	return out, commitPlans(&out, s)
}

// commitPlans commits out.Plans, holding the machine lock, and records
// the commits, the units to restart and the processes that still map
// what they replaced. A conflict stops it before anything changed, but
// for the plans committed before the one that conflicted: those are
// undone.
func commitPlans(out *Outcome, s Step) error {
	if out.Protected = touched(out.Plans, s.Protected); len(out.Protected) > 0 {
		return nil
	}
	for _, plan := range out.Plans {
		out.Unwritable = append(out.Unwritable, fork.CheckWritable(plan)...)
	}
	if len(out.Unwritable) > 0 {
		return nil
	}
	for _, plan := range out.Plans {
		jd, err := fork.UserJournalDir(plan, userJournal(s.StateDir))
		if err != nil {
			return fmt.Errorf("commit onto %s: %w", plan.Target, err)
		}
		done := func() {}
		if s.Journal != nil {
			if done, err = s.Journal.MarkRollback(journal.Rollback{Kind: journal.Machine, Step: s.ID, Root: jd}); err != nil {
				return err
			}
		}
		rec, err := fork.Commit(plan, fork.CommitOptions{Logger: s.Logger, JournalDir: jd})
		done()
		var ce *fork.ConflictError
		if errors.As(err, &ce) {
			out.Conflict = ce
			if uerr := Undo(out.Commits, false); uerr != nil {
				return fmt.Errorf("undo the commits before a conflict: %w", uerr)
			}
			out.Commits = nil
			return nil
		}
		if err != nil {
			return fmt.Errorf("commit onto %s: %w", plan.Target, err)
		}
		out.Commits = append(out.Commits, Commit{Target: plan.Target, JournalDir: jd, ID: rec.ID, Paths: rec.Paths})
		if units, err := fork.ChangedUnits(plan); err == nil {
			out.Units = append(out.Units, units...)
		}
	}
	sort.Strings(out.Units)
	out.Mapped = mappedCommitted(out.Commits)
	return nil
}

// userJournal is where a user who is not root journals the commits of
// its machine steps, when the state directory is on the filesystem
// committed to (fork.UserJournalDir).
func userJournal(stateDir string) string {
	if stateDir == "" {
		return ""
	}
	return filepath.Join(stateDir, "fork", "journal")
}

// touched lists the paths plans change at or under one of protected.
func touched(plans []fork.Plan, protected []string) []string {
	var out []string
	for _, plan := range plans {
		for _, op := range plan.Ops {
			abs := filepath.Join(plan.Target, op.Path)
			for _, p := range protected {
				if abs == p || strings.HasPrefix(abs, strings.TrimSuffix(p, "/")+"/") {
					out = append(out, abs)
					break
				}
			}
		}
	}
	return out
}

// verify runs s.Verify in the copy, keeping the end of its output.
func verify(ctx context.Context, c *fork.Copy, s Step, out *Outcome) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	done := make(chan []byte)
	go func() {
		var src io.Reader = r
		if s.VerifyOut != nil {
			src = io.TeeReader(r, s.VerifyOut)
		}
		b, _ := io.ReadAll(src)
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		done <- b
	}()
	sh := s.Shell
	if sh == "" {
		sh = "/bin/bash"
	}
	dir := s.VerifyDir
	if dir == "" {
		dir = s.Dir
	}
	timeout := s.Timeout
	if s.VerifyTimeout > 0 {
		timeout = s.VerifyTimeout
	}
	res, err := c.Run(ctx, fork.RunOptions{Argv: []string{sh, "-c", s.Verify}, Dir: dir, Env: s.Env, Stdout: w, Stderr: w, Timeout: timeout, User: s.User})
	w.Close()
	out.VerifyOutput = <-done
	r.Close()
	if err != nil {
		return fmt.Errorf("run verify in the copy: %w", err)
	}
	out.VerifyStatus = res.ExitCode
	out.TimedOut = out.TimedOut || res.TimedOut
	return nil
}

// Undo undoes the commits of one step, last first.
func Undo(commits []Commit, force bool) error {
	for i := len(commits) - 1; i >= 0; i-- {
		c := commits[i]
		if err := fork.Undo(c.JournalDir, c.ID, force); err != nil {
			return fmt.Errorf("undo the commit %s onto %s: %w", c.ID, c.Target, err)
		}
	}
	return nil
}

// mappedCommitted lists the processes that still map a file the commits
// replaced or removed: they run the old version until restarted.
func mappedCommitted(commits []Commit) []fork.Mapping {
	changed := map[string]bool{}
	for _, c := range commits {
		for _, p := range c.Paths {
			changed[filepath.Join(c.Target, p)] = true
			changed[p] = true
		}
	}
	all, err := fork.MappedDeleted()
	if err != nil {
		return nil
	}
	var out []fork.Mapping
	for _, m := range all {
		for _, f := range m.Files {
			if changed[strings.TrimSuffix(f, " (deleted)")] {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// Report fills rec (a journal record of step id) from out, and returns the
// one line to say on stderr ("" for none) and the exit status the caller
// should give: the step's own, verify's when verify failed, or 1 when a
// conflict kept a passing step from being applied.
func Report(id int, out Outcome, verify string, rec *journal.Record) (notice string, code int) {
	rec.Exit = out.Status
	if out.Signal != 0 {
		rec.Signal = unix.SignalName(out.Signal)
	}
	rec.Verify = verify
	if out.VerifyStatus >= 0 {
		ok := out.VerifyStatus == 0
		rec.VerifyOK = &ok
		if !ok {
			rec.VerifyOutput = string(out.VerifyOutput)
		}
	}
	for _, c := range out.Commits {
		rec.Machine = append(rec.Machine, journal.MachineCommit{Target: c.Target, JournalDir: c.JournalDir, ID: c.ID, Paths: c.Paths})
	}
	rec.Started, rec.Stopped = journalLeftovers(out.Leftovers)
	code = out.Status
	switch {
	case len(out.Protected) > 0:
		rec.Outcome = journal.Refused
		notice = fmt.Sprintf("refused: step %d passed in a copy of the machine, but was not applied: %s (%s); the machine is unchanged, and an operator changes undosh from outside the agent's shell",
			id, policy.SelfText, clip(strings.Join(out.Protected, ", "), 200))
		code = exit.Refused
	case len(out.Unwritable) > 0:
		rec.Outcome = journal.Refused
		var paths []string
		for _, p := range out.Unwritable {
			paths = append(paths, p.String())
		}
		notice = fmt.Sprintf("refused: step %d passed in a copy of the machine, but was not applied: it changed what you cannot change outside the copy (%s), so for real it would fail or do something else; the machine is unchanged: run it with sudo, as root, or on a sandbox host",
			id, clip(strings.Join(paths, "; "), 300))
		code = exit.Refused
	case out.Conflict != nil:
		rec.Outcome = journal.Discarded
		paths := make([]string, 0, len(out.Conflict.Problems))
		for _, p := range out.Conflict.Problems {
			paths = append(paths, p.Path)
		}
		notice = fmt.Sprintf("step %d passed in a copy of the machine, but was not applied: %d %s changed on the machine meanwhile (%s); run it again",
			id, len(paths), plural(len(paths), "path", "paths"), clip(strings.Join(paths, ", "), 200))
		code = 1
	case out.KeptFailed:
		// rollback: never. What the step did stays, as it would
		// without undosh: nothing to say.
		rec.Outcome = journal.Committed
		RestartUnits(out.Units)
	case out.Status != 0 || out.TimedOut:
		rec.Outcome = journal.Discarded
		why := fmt.Sprintf("failed (exit %d)", out.Status)
		if out.Signal != 0 {
			why = "failed (killed by " + unix.SignalName(out.Signal) + ")"
		}
		if out.TimedOut {
			why = "ran out of time"
		}
		if out.Changes > 0 {
			notice = fmt.Sprintf("step %d %s in a copy of the machine, so the copy was discarded (%d %s); the machine is unchanged",
				id, why, out.Changes, plural(out.Changes, "change", "changes"))
		}
		if out.Rootless && len(out.Setuid) > 0 {
			if notice == "" {
				notice = fmt.Sprintf("step %d %s in a copy of the machine; the machine is unchanged", id, why)
			}
			notice += fmt.Sprintf(" (in a copy made without root, setuid programs run without privilege: %s)", strings.Join(out.Setuid, ", "))
		}
	case out.VerifyStatus > 0:
		rec.Outcome = journal.Discarded
		notice = fmt.Sprintf("step %d passed in a copy of the machine, but verify `%s` failed (exit %d): the copy was discarded; the machine is unchanged",
			id, clip(verify, 60), out.VerifyStatus)
		code = out.VerifyStatus
	default:
		rec.Outcome = journal.Committed
		if len(out.Commits) == 0 {
			rec.Outcome = journal.Kept // nothing to commit
		}
		RestartUnits(out.Units)
		if len(out.Mapped) > 0 {
			names := make([]string, 0, len(out.Mapped))
			for _, m := range out.Mapped {
				names = append(names, fmt.Sprintf("%s[%d]", m.Comm, m.PID))
			}
			notice = fmt.Sprintf("step %d changed files that running processes still use: %s (restart them to pick up the change)",
				id, clip(strings.Join(names, ", "), 200))
		}
	}
	rec.Notice = notice
	return notice, code
}

// RestartUnits restarts, where systemd runs the machine, the units whose
// files a commit changed, so that they run what was committed.
func RestartUnits(units []string) {
	if len(units) == 0 {
		return
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return // not booted with systemd (a container)
	}
	exec.Command("systemctl", "daemon-reload").Run()
	exec.Command("systemctl", append([]string{"try-restart"}, units...)...).Run()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "\\n")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

// Recover has the fork engine finish what a machine step's commit cut
// short left in journalDir.
func Recover(journalDir string) ([]string, error) { return fork.Recover(journalDir) }

// Size is the size of this sandbox: its vCPUs and its memory in GiB, what
// a fork of it holds while it runs.
func Size() (cpus int, memGiB float64) {
	cpus = runtime.NumCPU()
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					memGiB = kb / (1 << 20)
				}
			}
		}
	}
	return cpus, memGiB
}
