package shell

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/policy"
)

// A session's bash (interactive, or fed on a pipe) lives for many lines,
// so it runs under the limit of a workspace step for the whole session:
// as root in a view of the machine whose shared paths are the session's
// workspace and the scratch paths, else under the hard limit. A line
// classed fork still runs in a copy of the machine, as before.
//
// In a view, every line reports its end, and what it wrote beyond the
// shared paths is settled as a one-shot step's is (escalate.go), with
// one difference: the view lives on, so what must be put back is put
// back through it (enforce.SyncCommand), from the machine's own copy,
// and a line cannot be run again (rerun is refused).

// sessionView is a session's view of the machine.
type sessionView struct {
	lim *limit
	pid int // the session's bash, which is in the view
	// shared are the paths the view shares with the machine: its limit's
	// writable paths, and the workspaces bound in since.
	shared []string
}

// Contain prepares the session's bash (argv, env) under the limit of a
// workspace step, and returns what to run; l.view is set when the limit
// is a view. Without a limit the bash runs as it is.
func (l *sessionLines) Contain(argv, env []string) (path string, nargv, nenv []string) {
	r := l.r
	if !r.enforcing() {
		return r.real, argv, env
	}
	if len(r.dec.Roots) == 0 {
		r.dec.Roots = classify.WorkspaceRoots(r.cwd, r.proc.Getenv("HOME"))
	}
	lim, why := r.contain(policy.Git, argv, env)
	if lim == nil {
		if why != sudoKept {
			r.noLimitNote(why)
		}
		return r.real, argv, env
	}
	if lim.copy != nil {
		l.view = &sessionView{lim: lim, shared: lim.writable}
	}
	return lim.path, lim.argv, lim.env
}

// started records the session's bash, once it runs.
func (v *sessionView) started(pid int) {
	if v != nil {
		v.pid = pid
	}
}

// release discards the view's copy, once the session is over.
func (v *sessionView) release() {
	if v != nil {
		v.lim.release()
	}
}

// share binds the workspace roots of a line into the view, writable,
// where the view does not share them yet (the session went to another
// project): the line's checkpoint covers what it writes there.
func (v *sessionView) share(roots []string) error {
	if v == nil {
		return nil
	}
	var need []string
	for _, r := range roots {
		if real, err := filepath.EvalSymlinks(r); err == nil && !under(real, v.shared) {
			need = append(need, real)
		}
	}
	if len(need) == 0 {
		return nil
	}
	self, err := enforce.Self()
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{Path: self, Args: enforce.BindCommand(v.pid, need), Dir: "/"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("share %s with the session's view: %v: %s", strings.Join(need, ", "), err, strings.TrimSpace(string(out)))
	}
	v.shared = append(v.shared, need...)
	return nil
}

// follow shares the workspace of the directory the session's bash is in
// now (a line went to another project), and reports whether the shell
// must enter its directory again: a process that was in a directory
// before a mount covered it stays beneath the mount.
func (v *sessionView) follow(home string) (bool, error) {
	if v == nil || v.pid == 0 {
		return false, nil
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(v.pid) + "/cwd")
	if err != nil {
		return false, nil // the shell is gone
	}
	n := len(v.shared)
	err = v.share(classify.WorkspaceRoots(cwd, home))
	return len(v.shared) > n, err
}

// caught returns what the line that started at start wrote beyond the
// shared paths, or nil; the view goes on. roots are the line's
// workspace roots.
func (v *sessionView) caught(roots []string, start time.Time) *beyond {
	if v == nil {
		return nil
	}
	return v.lim.diff(roots, start)
}

// putBack puts back, through the view, what b holds, as the machine has
// it, so that the session sees the machine again there.
func (v *sessionView) putBack(b *beyond) error {
	puts := putsOf(b)
	if len(puts) == 0 || v.pid == 0 || !procs.Alive(v.pid) {
		// Nothing to put back, or no view left to put it back in: the
		// line ended the session (`…; exit 3`).
		return nil
	}
	self, err := enforce.Self()
	if err != nil {
		return err
	}
	argv := enforce.SyncCommand(v.pid, puts)
	cmd := &exec.Cmd{Path: self, Args: argv, Dir: "/"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("put back %s in the session's view: %v: %s", clip(b.pathText(), 120), err, strings.TrimSpace(string(out)))
	}
	// What is left differs from the machine only where the machine
	// changed since; the next line's diff shows it.
	return nil
}

// putsOf lists how to put back each path b's plans change: a path whose
// whole tree is copied (or removed) stands for what is beneath it.
func putsOf(b *beyond) []enforce.Put {
	var puts []enforce.Put
	var whole []string
	for _, plan := range b.plans {
		for _, op := range plan.Ops {
			p := filepath.Join(plan.Target, op.Path)
			if under(p, whole) {
				continue
			}
			var st unix.Stat_t
			exists := unix.Lstat(p, &st) == nil
			switch {
			case !exists:
				puts = append(puts, enforce.Put{Path: p, How: enforce.PutRemove})
				whole = append(whole, p)
			case op.Kind == fork.OpMeta:
				puts = append(puts, enforce.Put{Path: p, How: enforce.PutMeta})
			default:
				puts = append(puts, enforce.Put{Path: p, How: enforce.PutCopy})
				whole = append(whole, p)
			}
		}
	}
	return puts
}

// dropBeyond discards what a step's view caught beyond its workspace: a
// one-shot step's copy goes with it, a session's view has it put back.
// It returns "" or what went wrong, for the notice.
func (g *gitStep) dropBeyond(b *beyond) string {
	if g.view == nil {
		return ""
	}
	if err := g.view.putBack(b); err != nil {
		return "; " + err.Error()
	}
	return ""
}

// settleLine settles what a line that took no checkpoint (a read-only
// line) wrote beyond the shared paths: kept when it passed (and the
// policy's escalate is commit), else put back. It journals the line.
func (l *sessionLines) settleLine(cur *line, b *beyond, code int) {
	lr := cur.run
	d := lr.dec
	roots := cur.roots()
	j, step, ok := lr.beginStep(roots)
	if !ok {
		return
	}
	rec := lr.record(cur.start, d.Class)
	rec.ID, rec.Exit, rec.Verify = step.ID, code, ""
	what := fmt.Sprintf("step %d, run as read-only, wrote %s", step.ID, beyondText(b))
	how := lr.escalation()
	failed := code != 0 && d.Rollback == policy.RollbackOnFailure
	put := func() string {
		if err := l.view.putBack(b); err != nil {
			return "; " + err.Error()
		}
		return ""
	}
	switch {
	case failed:
		rec.Escalated = b.record(journal.EscalateDrop)
		rec.Outcome = journal.Discarded
		rec.Notice = fmt.Sprintf("step %d failed (exit %d), run as read-only, after writing %s: that was put back%s", step.ID, code, beyondText(b), put())
	case how != policy.EscalateCommit || b.err != nil:
		rec.Escalated = b.record(policy.EscalateRefuse)
		rec.Outcome = journal.Refused
		rec.Notice = "refused: " + what + " (" + lr.escalateAt() + "; a line of a session cannot run again): that was put back" + put()
	default:
		rec.Escalated = b.record(policy.EscalateCommit)
		out, err := machine.Keep(b.plans, machine.Step{StateDir: lr.stateDir, Journal: j, ID: step.ID, Protected: lr.protected()})
		switch {
		case err != nil:
			rec.Outcome = journal.Failed
			rec.Notice = fmt.Sprintf("%s, which could not be kept (%v): that was put back%s", what, err, put())
		case len(out.Protected) > 0:
			rec.Outcome = journal.Refused
			rec.Notice = fmt.Sprintf("refused: %s, which was not kept: %s (%s); that was put back%s", what, policy.SelfText, strings.Join(out.Protected, ", "), put())
		case out.Conflict != nil:
			rec.Outcome = journal.Discarded
			rec.Notice = fmt.Sprintf("%s, which was not kept: %s changed on the machine meanwhile; that was put back%s", what, conflictPaths(out), put())
		default:
			rec.Machine = machineCommits(out)
			rec.Outcome = journal.Committed
			rec.Notice = fmt.Sprintf("%s: kept as a machine step would be; undo it with: undoctl back %d", what, step.ID)
			machine.RestartUnits(out.Units)
		}
	}
	lr.proc.say(rec.Notice)
	lr.finishStep(step, rec, cur.start, 0)
}

// roots are the line's workspace roots.
func (cur *line) roots() []string {
	if len(cur.run.dec.Roots) > 0 {
		return cur.run.dec.Roots
	}
	return classify.WorkspaceRoots(cur.run.cwd, cur.run.env["HOME"])
}

// pathText names what b holds, for an error.
func (b *beyond) pathText() string { return strings.Join(b.paths, ", ") }
