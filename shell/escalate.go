package shell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/policy"
)

// A step whose view caught writes beyond its class is settled by the
// policy's escalate (docs/enforce.md): commit keeps them once the step
// and verify passed, as a step of the class it needed would have been
// kept; rerun puts everything back and runs the step again at that
// class; refuse puts everything back and refuses it. A step that failed
// has them dropped with the rest of what it did, whatever escalate says.

// escalation is the policy's escalate, commit by default.
func (r *run) escalation() string {
	if r.pol != nil && r.pol.Escalate != "" {
		return r.pol.Escalate
	}
	return policy.EscalateCommit
}

// escalateAt names the policy's escalate and where it is set, for
// refusals.
func (r *run) escalateAt() string {
	return "escalate: " + r.escalation() + " at " + r.pol.Location("escalate")
}

// beyondText names what b's step wrote, for a notice.
func beyondText(b *beyond) string {
	s := clip(strings.Join(b.paths, ", "), 200)
	if b.err != nil {
		s += " (" + clip(b.err.Error(), 120) + ")"
	}
	return s
}

// stdinMark is where a step's standard input was when it started, so
// that a rerun reads it from there again.
type stdinMark struct {
	// why is set when it cannot be read again (a pipe read from).
	why string
	off int64 // a regular file's offset
	reg bool
}

// markStdin records where the step's standard input is.
func (r *run) markStdin() stdinMark {
	if r.src.stdin != nil {
		if r.src.unseen != "" {
			return stdinMark{why: "its script on standard input was too large to keep"}
		}
		return stdinMark{} // undosh holds the script: it relays it again
	}
	if r.proc.Closed(0) {
		return stdinMark{}
	}
	var st unix.Stat_t
	if err := unix.Fstat(0, &st); err != nil {
		return stdinMark{}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		off, err := unix.Seek(0, 0, io.SeekCurrent)
		if err != nil {
			return stdinMark{why: "its standard input cannot be read again (" + err.Error() + ")"}
		}
		return stdinMark{reg: true, off: off}
	case unix.S_IFIFO, unix.S_IFSOCK:
		return stdinMark{why: "its standard input is a pipe, which the first run may have read"}
	}
	return stdinMark{} // a terminal, /dev/null
}

// rewind puts standard input back where the step found it.
func (r *run) rewind(m stdinMark) error {
	switch {
	case m.why != "":
		return errors.New(m.why)
	case m.reg:
		_, err := unix.Seek(0, m.off, io.SeekStart)
		return err
	case r.src.stdin != nil:
		f, err := relayText("/dev/stdin", r.src.text)
		if err != nil {
			return err
		}
		r.src.stdin.Close()
		r.src.stdin = f
	}
	return nil
}

// relayText is a new pipe (or memory file) holding text, as a relayed
// script's standard input.
func relayText(name, text string) (*os.File, error) {
	mfd, err := unix.MemfdCreate("undosh-stdin", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	mem := os.NewFile(uintptr(mfd), name)
	if _, err := io.WriteString(mem, text); err != nil {
		mem.Close()
		return nil, err
	}
	return relay(mem, int64(len(text)))
}

// escalate settles a workspace step g whose view caught b, after it
// passed (or failed under a rule that keeps failures). It returns the
// status to end with.
func (g *gitStep) escalate(b *beyond, st status) int {
	r, rec := g.r, &g.rec
	how := r.escalation()
	if b.err != nil || g.view != nil && how == policy.EscalateRerun {
		// What cannot be committed cannot be kept; a line of a session
		// cannot run again.
		how = policy.EscalateRefuse
	}
	what := fmt.Sprintf("step %d, run as a workspace step, wrote %s", g.step.ID, beyondText(b))
	switch how {
	case policy.EscalateRefuse:
		rec.Escalated = b.record(policy.EscalateRefuse)
		back := g.putBack("wrote beyond its workspace")
		rec.Outcome = journal.Refused
		rec.Notice = "refused: " + what + " (" + r.escalateAt() + "): " + back
		r.proc.say(rec.Notice)
		r.proc.say("hint: run it as a machine step: undoctl run --fork -- " + r.rerunCommand())
		r.finishStep(g.step, *rec, g.start, 0)
		return exit.Refused
	case policy.EscalateRerun:
		rec.Escalated = b.record(policy.EscalateRerun)
		if err := r.rewind(g.stdin); err != nil {
			rec.Escalated.How = policy.EscalateRefuse
			back := g.putBack("wrote beyond its workspace")
			rec.Outcome = journal.Refused
			rec.Notice = fmt.Sprintf("refused: %s, and cannot run again as a machine step: %v: %s", what, err, back)
			r.proc.say(rec.Notice)
			r.proc.say("hint: run it as a machine step: undoctl run --fork -- " + r.rerunCommand())
			r.finishStep(g.step, *rec, g.start, 0)
			return exit.Refused
		}
		back := g.putBack("wrote beyond its workspace")
		rec.Outcome = journal.RolledBack
		rec.Notice = what + ": " + back + "; it runs again as a machine step"
		r.proc.say(rec.Notice)
		r.finishStep(g.step, *rec, g.start, 0)
		g.close()
		return r.rerunMachine(g.step.ID)
	}
	// Commit: kept as a machine step would be, then verify.
	rec.Escalated = b.record(policy.EscalateCommit)
	out, err := machine.Keep(b.plans, machine.Step{StateDir: r.stateDir, Journal: g.j, ID: g.step.ID, Protected: r.protected()})
	if err != nil {
		back := g.putBack("could not be kept")
		rec.Notice = fmt.Sprintf("%s, which could not be kept (%v): %s", what, err, back)
		r.proc.say(rec.Notice)
		r.finishStep(g.step, *rec, g.start, 0)
		return exit.Failure
	}
	if len(out.Protected) > 0 {
		back := g.putBack("changed undosh itself")
		rec.Outcome = journal.Refused
		rec.Notice = fmt.Sprintf("refused: %s, which was not kept: %s (%s); %s", what, policy.SelfText, strings.Join(out.Protected, ", "), back)
		r.proc.say(rec.Notice)
		r.finishStep(g.step, *rec, g.start, 0)
		return exit.Refused
	}
	if out.Conflict != nil {
		back := g.putBack("conflicted with the machine")
		rec.Outcome = journal.RolledBack
		rec.Notice = fmt.Sprintf("%s, which was not kept: %v changed on the machine meanwhile; %s; run it again", what, conflictPaths(out), back)
		r.proc.say(rec.Notice)
		r.finishStep(g.step, *rec, g.start, 0)
		return exit.Failure
	}
	rec.Machine = machineCommits(out)
	code := st.code
	d := r.dec
	if d.Verify != "" && d.Rollback == policy.RollbackOnFailure {
		vcode, vout := r.verify()
		ok := vcode == 0
		rec.VerifyOK = &ok
		if !ok {
			rec.VerifyOutput = string(vout)
			failure := fmt.Sprintf("passed, but verify `%s` failed (exit %d)", clip(d.Verify, 60), vcode)
			uerr := machine.Undo(out.Commits, false)
			if uerr == nil {
				rec.Machine = nil
			}
			back := g.putBack(failure)
			rec.Outcome = journal.RolledBack
			rec.Notice = fmt.Sprintf("%s, and %s: %s", what, failure, back)
			if uerr != nil {
				rec.Notice += fmt.Sprintf(", but not what it wrote beyond its workspace (%v); undoctl back %d", uerr, g.step.ID)
			}
			r.proc.say(rec.Notice)
			r.finishStep(g.step, *rec, g.start, 0)
			return vcode
		}
	}
	rec.Outcome = journal.Committed
	machine.RestartUnits(out.Units)
	rec.Notice = fmt.Sprintf("%s: kept as a machine step would be; undo it with: undoctl back %d", what, g.step.ID)
	r.proc.say(rec.Notice)
	r.finishStep(g.step, *rec, g.start, st.sig)
	return code
}

// putBack rolls the workspace back before the step, for why (a phrase
// after "step N"), and puts back what a session's view caught, and
// returns what it did, for a notice.
func (g *gitStep) putBack(why string) string {
	rec := g.rec
	g.r.rollback(g.j, g.step, g.stores, &rec, why)
	g.rec.Points, g.rec.Outcome = rec.Points, rec.Outcome
	view := ""
	if g.viewCaught != nil {
		view = g.dropBeyond(g.viewCaught)
	}
	if rec.Notice == "" {
		return "everything it changed was put back (its workspace had not changed)" + view
	}
	return "everything it changed was put back (" + strings.TrimPrefix(rec.Notice, fmt.Sprintf("step %d %s: ", g.step.ID, why)) + ")" + view
}

// conflictPaths names the paths of a refused commit.
func conflictPaths(out machine.Outcome) string {
	paths := make([]string, 0, len(out.Conflict.Problems))
	for _, p := range out.Conflict.Problems {
		paths = append(paths, p.Path)
	}
	return clip(strings.Join(paths, ", "), 200)
}

// machineCommits are out's commits, as the journal keeps them.
func machineCommits(out machine.Outcome) []journal.MachineCommit {
	var mc []journal.MachineCommit
	for _, c := range out.Commits {
		mc = append(mc, journal.MachineCommit{Target: c.Target, JournalDir: c.JournalDir, ID: c.ID, Paths: c.Paths})
	}
	return mc
}

// rerunMachine runs the step once more as a machine step: its first run
// (step first) wrote beyond its workspace.
func (r *run) rerunMachine(first int) int {
	start := time.Now()
	c := policy.Fork
	r.dec.Class = c
	if len(r.dec.Roots) == 0 {
		r.dec.Roots = classify.WorkspaceRoots(r.cwd, r.proc.Getenv("HOME"))
	}
	rec := r.record(start, c)
	rec.RerunOf = first
	// The rollback just now must not look, to the copy's commit, like a
	// change made on the machine while the step ran.
	fork.NextTick()
	if code, asGit := r.protectMachine(rec, start); !asGit {
		return code
	}
	return r.protectGit(rec, start)
}
