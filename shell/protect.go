package shell

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/shquote"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/where"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// protect runs a step that is not plainly read-only.
func (r *run) protect() int {
	start := time.Now()
	p, code, rec := r.routeProtected(start)
	switch p {
	case routeDone:
		return code
	case routeNested:
		return r.proc.exec(r.real, r.src)
	}
	return r.protectGit(rec, start)
}

// protectRoute is how a step that is not plainly read-only runs, once
// [run.routeProtected] has applied the policy to it.
type protectRoute int

const (
	// routeDone: the step was refused, or ran in a copy of the machine;
	// it is over, and code is its status.
	routeDone protectRoute = iota
	// routeNested: the step runs as it is, inside an outer step whose
	// checkpoint covers it.
	routeNested
	// routeGit: the step runs here after a checkpoint of its workspaces.
	routeGit
)

// routeProtected applies the policy's verdict, the nesting rule and the run-time
// constraints to the step, and runs a machine-changing step in a copy of
// the machine. It returns the step's journal record so far.
func (r *run) routeProtected(start time.Time) (protectRoute, int, journal.Record) {
	d := r.dec
	rec := r.record(start, d.Class)
	out, nested := outerStep(r.stateDir)
	if !nested && (where.InCopy("") || where.InHostCopy(r.stateDir)) {
		// Inside a machine step's copy (the local engine's, or a fork of
		// the VM the host made): the copy is the protection.
		out, nested = outer{class: policy.Fork, pid: 1}, true
	}
	if nested {
		rec.Parent = out.step
	}
	if d.Verdict == policy.Deny {
		why, rule := denial(d)
		return routeDone, r.refuse(rec, why+" ("+rule+")", r.denyHint(rule)), rec
	}
	if nested && d.Class > out.class && !out.held {
		why := fmt.Sprintf("this command needs class %s (%s), but it runs inside a step of class %s (undosh pid %d); a nested command may not go beyond its step",
			d.Class, firstReason(d, d.Class), out.class, out.pid)
		return routeDone, r.refuse(rec, why, "run it as a step of its own, not from inside another one"), rec
	}
	if d.Verdict == policy.Constrain {
		if why, hint, ok := r.checkConstraints(); !ok {
			return routeDone, r.refuse(rec, why, hint), rec
		}
	}
	if nested {
		return routeNested, 0, rec
	}
	if d.Class == policy.Fork {
		if code, asGit := r.protectMachine(rec, start); !asGit {
			return routeDone, code, rec
		}
	}
	return routeGit, 0, rec
}

// protectMachine runs a machine-changing step: on the sandbox host, else
// in the local fork engine's copy; one that runs sudo, for a user who is
// not root, in root's engine entered through sudo (sudo.go). When
// neither can run it, the policy's
// host.fallback decides: deny refuses it, git (asGit) leaves it to the
// caller to run with a workspace checkpoint only.
func (r *run) protectMachine(rec journal.Record, start time.Time) (code int, asGit bool) {
	d := r.dec
	code, handled, note := r.protectHost(rec, start)
	if handled {
		return code, false
	}
	if note != "" {
		r.proc.say("note: " + note + "; the step runs with the fallback")
	}
	if names, all := d.Live(); all {
		// It talks to services running here, or signals the sandbox's
		// processes: a copy has none of them (live.go).
		if why := r.prepareLive(names); why != "" {
			if r.pol.Host.FallbackFor(os.Geteuid()) != "git" {
				return r.refuse(rec, fmt.Sprintf("this step talks to a service running here (%s): %s", firstReason(d, policy.Fork), why),
					"run undosh as root or as the service's user, or set host.fallback: git in the policy to run such steps with the workspace checkpointed only"), false
			}
			r.live.services = nil
			r.liveNote(why)
		}
		r.dec.Verify = r.machineVerify()
		return 0, true
	}
	if r.viaSudo && os.Geteuid() != 0 {
		// Only root's engine can run what sudo runs in a copy.
		return r.protectMachineSudo(rec, start)
	}
	ok, missing := machine.Engine(r.proc.Getenv)
	if ok {
		return r.protectFork(rec, start), false
	}
	if r.pol.Host.FallbackFor(os.Geteuid()) != "git" {
		return r.refuse(rec, fmt.Sprintf("this step changes the machine (%s), and no sandbox host or local fork engine can run it in a copy: %s",
			firstReason(d, policy.Fork), missing), "set host.fallback: git in the policy to run such steps with a file checkpoint only, or run them outside undosh"), false
	}
	if r.firstTime("fallback-noted") {
		r.proc.say(fmt.Sprintf("note: this step changes the machine (%s); no fork engine can run here (%s), so machine steps have only the workspace checkpointed (policy host.fallback: git; said once in %s)",
			firstReason(d, policy.Fork), missing, r.stateDir))
	}
	return 0, true
}

// firstTime reports whether the state directory has not yet seen name,
// and marks it seen: for a note said once, not on every step.
func (r *run) firstTime(name string) bool {
	if r.stateDir == "" || os.MkdirAll(r.stateDir, 0o700) != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(r.stateDir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return !errors.Is(err, fs.ErrExist)
	}
	f.Close()
	return true
}

// protectSession runs a session fed one command at a time on a pipe as
// one step: the workspace is checkpointed first and the commands run as
// they come. Judging each command as it comes belongs to the interactive
// proxy (pty/); until then this is the protection that does not hang.
func (r *run) protectSession() int {
	start := time.Now()
	r.dec = policy.Decision{Class: policy.Git, Verdict: policy.Run, Rollback: policy.RollbackNever,
		Roots: classify.WorkspaceRoots(r.cwd, r.env["HOME"])}
	rec := journal.Record{Time: start, PID: os.Getpid(), Cwd: r.cwd, Command: "(commands on standard input, one at a time) " + clip(r.src.text, 200),
		Class: policy.Git.String(), Verdict: policy.Run.String()}
	return r.protectGit(rec, start)
}

// record starts the journal record of the step, run as class c.
func (r *run) record(start time.Time, c policy.Class) journal.Record {
	d := r.dec
	rec := journal.Record{Time: start, PID: os.Getpid(), Cwd: r.cwd, Class: c.String(), Egress: d.Egress,
		Verdict: d.Verdict.String(), Verify: d.Verify}
	rec.Command, rec.Wrapper = r.commandText()
	kept, left := keptReasons(d.Reasons, c, d.Verdict)
	rec.Reasons, rec.ReasonsLeft = journalReasons(kept), left
	return rec
}

// journalReasons is rs as the journal keeps them.
func journalReasons(rs []policy.Reason) []journal.Reason {
	if rs == nil {
		return nil
	}
	out := make([]journal.Reason, len(rs))
	for i, r := range rs {
		out[i] = journal.Reason{Rule: r.Rule, At: r.At, Pos: r.Pos, Text: r.Text, Class: r.Class.String(), Egress: r.Egress,
			Verdict: r.Verdict.String(), Message: r.Message, Live: r.Live}
	}
	return out
}

// maxCommand bounds the command the journal keeps for a step.
const maxCommand = 4096

// commandText is the step as the journal shows it: the command alone
// when a harness wrapped it in scaffolding, with the scaffolding saved
// once in the state directory.
func (r *run) commandText() (string, *journal.Wrapper) {
	var t string
	var wr *journal.Wrapper
	switch r.inv.Mode {
	case modeCommand:
		t = r.inv.Command
		if w, ok := parser.Unwrap(t); ok && r.stateDir != "" {
			if id, err := journal.SaveScaffold(r.stateDir, w.Scaffold); err == nil {
				t, wr = w.Command, &journal.Wrapper{Harness: w.Harness, Scaffold: id}
			}
		}
	case modeScript:
		t = strings.Join(r.proc.Argv, " ")
	default:
		t = r.src.text
	}
	if len(t) > maxCommand {
		t = strings.ToValidUTF8(t[:maxCommand], "") + "…"
	}
	return t, wr
}

// maxReasons bounds the reasons the journal keeps beyond those that
// decided the step; undoctl explain gives them all.
const maxReasons = 8

// keptReasons are the reasons the journal keeps for a step run as class
// c with verdict v: every one that decided the class or the verdict,
// then the first others up to maxReasons, and the count of the rest.
func keptReasons(all []policy.Reason, c policy.Class, v policy.Verdict) ([]policy.Reason, int) {
	if len(all) <= maxReasons {
		return all, 0
	}
	var kept, others []policy.Reason
	for _, x := range all {
		if x.Class == c || (x.Verdict == v && v != policy.Run) {
			kept = append(kept, x)
		} else if len(others) < maxReasons {
			others = append(others, x)
		}
	}
	if len(kept) > 4*maxReasons {
		kept = kept[:4*maxReasons]
	}
	kept = append(kept, others[:min(len(others), max(0, maxReasons-len(kept)))]...)
	return kept, len(all) - len(kept)
}

// denial returns the reason a denied step is refused, and its rule.
func denial(d policy.Decision) (why, rule string) {
	for _, rs := range d.Reasons {
		if rs.Verdict != policy.Deny {
			continue
		}
		why = rs.Text
		if rs.Message != "" {
			why += ": " + rs.Message
		}
		rule = "rule " + rs.Rule
		if rs.At != "" {
			rule += " at " + rs.At
		}
		return why, rule
	}
	return "the policy denies this step", "no rule named"
}

// firstReason names the first reason that gave the step class c.
func firstReason(d policy.Decision, c policy.Class) string {
	for _, rs := range d.Reasons {
		if rs.Class == c {
			s := rs.Rule
			if rs.At != "" {
				s += " at " + rs.At
			}
			if rs.Text != "" {
				s += ": " + clip(rs.Text, 80)
			}
			return s
		}
	}
	return "policy"
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "\\n")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

// denyHint suggests the allowed way for a refused step.
func (r *run) denyHint(rule string) string {
	switch {
	case strings.HasPrefix(rule, "rule git-push "):
		return "push a branch that is not " + strings.Join(r.pol.Egress.ProtectedBranches, " or ") +
			", named literally and without --force (git push origin HEAD:my-branch); undoctl explain shows every rule"
	case strings.HasPrefix(rule, "rule "+policy.SelfRule+" "):
		return "undosh is changed by an operator, from outside the agent's shell; self_protect: false in the policy turns this refusal off"
	case strings.HasPrefix(rule, "rule network-device"):
		return "use curl or wget for downloads; undoctl explain shows every rule"
	}
	return "undoctl explain '…' shows every reason; a policy rule with verdict: run allows this (see docs/policy.md)"
}

// protected are the paths a machine step may not commit: undosh's own,
// unless the policy says self_protect: false.
func (r *run) protected() []string {
	if r.pol == nil || !r.pol.SelfProtect {
		return nil
	}
	return append(slices.Clone(policy.SelfDirs), classify.SelfPaths(r.pol, r.stateDir)...)
}

// refuse prints the refusal, journals it and returns 126.
func (r *run) refuse(rec journal.Record, why, hint string) int {
	r.proc.say("refused: " + why)
	if hint != "" {
		r.proc.say("hint: " + hint)
	}
	rec.Outcome = journal.Refused
	rec.Exit = exit.Refused
	rec.Duration = ms(time.Since(rec.Time))
	if j, err := journal.Open(r.stateDir); err == nil {
		// A refusal changed nothing: it must not keep a step it runs
		// inside (or beside) from rolling back.
		if id, err := j.NewQuietID(); err == nil {
			rec.ID = id
			_ = j.Append(rec)
		}
	}
	return exit.Refused
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// checkConstraints evaluates a constrained step's conditions: the current
// branch must not be protected, and verify must pass.
func (r *run) checkConstraints() (why, hint string, ok bool) {
	c := r.dec.Checks
	if c.Branch {
		dir := c.Cwd
		if dir == "" {
			dir = r.cwd
		}
		out, err := exec.Command("git", "-C", dir, "symbolic-ref", "--quiet", "--short", "HEAD").Output()
		branch := strings.TrimSpace(string(out))
		if err == nil {
			for _, b := range r.pol.Egress.ProtectedBranches {
				if branch == b {
					return fmt.Sprintf("git push of the current branch %s, which the policy protects (egress.protected_branches; %s)", b, constraintRule(r.dec)),
						r.denyHint("rule git-push "), false
				}
			}
		}
	}
	if c.Verify && r.dec.Verify != "" {
		code, tail := r.verify()
		if code != 0 {
			msg := fmt.Sprintf("verify `%s` failed (exit %d), and this step runs only after verify passes (%s)", r.dec.Verify, code, constraintRule(r.dec))
			if t := lastLine(tail); t != "" {
				msg += "; it said: " + clip(t, 120)
			}
			return msg, "fix what verify reports, then run the step again", false
		}
	}
	return "", "", true
}

// constraintRule names the rule that constrains the step, and where the
// policy says it, as a refusal does.
func constraintRule(d policy.Decision) string {
	for _, rs := range d.Reasons {
		if rs.Verdict == policy.Constrain {
			s := "rule " + rs.Rule
			if rs.At != "" {
				s += " at " + rs.At
			}
			return s
		}
	}
	return "policy egress settings"
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// verify runs the verify command in the workspace with the real bash and
// returns its status and the end of its output.
func (r *run) verify() (int, []byte) {
	cmd := exec.Command(r.real, "-c", r.dec.Verify)
	cmd.Dir = r.verifyDir()
	cmd.Env = r.proc.Environ
	var out tail
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.b
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), out.b
		}
		return ee.ExitCode(), out.b
	}
	return exit.NotRun, []byte(err.Error())
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append([]byte(nil), t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

// storeOptions are the checkpoint options the policy gives.
func (r *run) storeOptions() checkpoint.Options {
	return state.StoreOptions(r.stateDir, r.pol, r.proc.Getenv("HOME"))
}

// protectGit checkpoints the workspace, runs the step, and rolls it back
// when it fails.
func (r *run) protectGit(rec journal.Record, start time.Time) int {
	switch {
	case r.sup != nil:
		if !r.sup.attach() {
			return 0 // the shell-to-be runs the step itself
		}
	case r.handOverOK():
		if code, handed := r.handOver(); handed {
			return code
		}
	}
	g, code, ok := r.startGit(rec, start)
	if !ok {
		return code
	}
	defer g.close()
	if r.src.session {
		r.proc.say(fmt.Sprintf("note: commands are coming one at a time on standard input: they run as one step (%d), checkpointed first, and a failing command is not rolled back on its own (undoctl back %d undoes them all)", g.step.ID, g.step.ID))
		go feedSession(r.src.feed, []byte(r.src.text))
	}
	path, argv, env, files := r.real, r.proc.Argv, r.stepEnv(g.step.ID), r.stepFiles()
	var errTail *stderrTail
	// A machine step run with a file checkpoint only (host.fallback:
	// git) is not held to the workspace: that is what the fallback says.
	if r.enforcing() && !r.src.session && r.dec.Class != policy.Fork {
		if l, _ := r.contain(policy.Git, argv, env); l != nil {
			g.lim = l
			path, argv, env = l.path, l.argv, l.env
			if l.copy == nil {
				files, errTail = captureStderr(files)
			}
			markSupervising(policy.Git, l.copy != nil)
		}
	}
	g.stdin = r.markStdin()
	if r.sup != nil && g.lim != nil && g.lim.copy != nil {
		g.step.HeldFor(r.sup.pid, true)
		_ = g.step.Running(g.rec)
	}
	st, err := r.runStep(stepProc{path: path, argv: argv, env: env, files: files}, errTail.started)
	if st.lost {
		r.proc.say(fmt.Sprintf("note: undosh lost track of step %d's shell (a thread other than its first ran execve), so its changes were kept; to go back: undoctl back %d", g.step.ID, g.step.ID))
	}
	if r.src.session {
		r.src.stdin.Close()
	}
	if err != nil {
		errTail.end()
		g.lim.release()
		g.step.Abandon()
		r.proc.errorf(fmt.Errorf("run %s: %w", r.real, err), "check UNDOSH_REAL_BASH and "+ConfigFile)
		return exit.NotRun
	}
	if g.lim != nil && g.lim.copy == nil && st.code != 0 && st.sig == 0 {
		g.hint = r.blockedHint(g.lim, errTail.end())
	} else {
		errTail.end()
	}
	return g.finish(st)
}

// gitStep is a step whose workspaces are checkpointed, running.
type gitStep struct {
	r      *run
	j      *journal.Journal
	step   *journal.Step
	stores []*checkpoint.Store
	rec    journal.Record
	start  time.Time
	// lim is the limit the step runs under, nil for none.
	lim *limit
	// view, for a line of a session in a view, is that view, and
	// viewCaught what the line wrote beyond its workspace there.
	view       *sessionView
	viewCaught *beyond
	// stdin is where its standard input was, for a rerun.
	stdin stdinMark
	// hint, when set, says where a hard limit stopped the step; it is
	// printed after the rollback's notice.
	hint string
}

// startGit numbers the step, checkpoints every workspace it can write and
// journals it as running. When it cannot, it has said why, nothing ran,
// and code is the status to end with.
func (r *run) startGit(rec journal.Record, start time.Time) (g *gitStep, code int, ok bool) {
	p := r.proc
	d := r.dec
	j, step, err := r.openStep(d.Roots)
	if err != nil {
		if storeSealed(err) && !slices.ContainsFunc(d.Roots, writableHere) {
			// A sandbox around undosh keeps the store and every
			// workspace read-only: the step can change nothing a
			// checkpoint would undo, so it runs as bash would.
			return nil, r.runSealed(), false
		}
		r.stepError(err)
		return nil, exit.Usage, false
	}
	g = &gitStep{r: r, j: j, step: step, rec: rec, start: start}
	g.rec.ID = step.ID
	if r.sup != nil && r.sup.t != nil {
		// The step's shell runs in the process the caller started.
		g.rec.PID = r.sup.pid
		step.HeldFor(r.sup.pid, false)
	}
	for _, root := range d.Roots {
		s, err := checkpoint.Open(root, r.storeOptions())
		if err == nil {
			g.stores = append(g.stores, s)
			var res checkpoint.Result
			res, err = s.Checkpoint(fmt.Sprintf("before step %d: %s", step.ID, clip(rec.Command, 200)))
			if err == nil {
				g.rec.Points = append(g.rec.Points, journal.Checkpoint{Root: s.Workspace(), Before: res.ID, Walk: res.Walk})
				continue
			}
		}
		step.Abandon()
		g.close()
		p.errorf(fmt.Errorf("cannot checkpoint %s before this step: %w", root, err),
			"free space or repair the state directory "+r.stateDir+" (undoctl check, undoctl gc); nothing ran")
		return nil, exit.Usage, false
	}
	if l := r.live; l != nil && len(l.services) > 0 {
		ctx, cancel := context.WithTimeout(r.context(), serviceTimeout)
		err := l.checkpointServices(ctx, &g.rec)
		cancel()
		if err != nil {
			step.Abandon()
			g.close()
			p.errorf(err, "undoctl status lists the services undosh sees; free space in "+r.stateDir+" or declare the service in the policy (services:); nothing ran")
			return nil, exit.Usage, false
		}
	}
	if err := step.Running(g.rec); err != nil {
		step.Abandon()
		g.close()
		p.errorf(err, "check the state directory "+r.stateDir+"; nothing ran")
		return nil, exit.Usage, false
	}
	markSupervising(d.Class, r.inView)
	return g, 0, true
}

func (g *gitStep) close() {
	for _, s := range g.stores {
		s.Close()
	}
	g.stores = nil
	g.lim.release()
}

// finish ends the step that ended with st: verify when it passed, roll
// back when either failed, journal it. When its view caught writes
// beyond its workspace, a step that passed is escalated (escalate.go);
// one that failed has them dropped with the rest. It returns the step's
// status, or verify's when only verify failed.
func (g *gitStep) finish(st status) int {
	r, d, rec := g.r, g.r.dec, &g.rec
	rec.Exit = st.code
	if st.sig != 0 {
		rec.Signal = unix.SignalName(st.sig)
	}
	b := g.lim.caught(d.Roots)
	if g.view != nil {
		b = g.viewCaught
	}
	code := st.code
	failure := ""
	switch {
	case st.sig != 0:
		failure = "failed (killed by " + unix.SignalName(st.sig) + ")"
	case st.code != 0:
		failure = fmt.Sprintf("failed (exit %d)", st.code)
	case r.src.session:
		// No one command's failure can be told apart: keep everything.
	case b != nil:
		// Verify runs once what it wrote beyond its workspace is kept.
	case d.Verify != "" && d.Rollback == policy.RollbackOnFailure:
		vcode, out := r.verify()
		ok := vcode == 0
		rec.VerifyOK = &ok
		if !ok {
			rec.VerifyOutput = string(out)
			failure = fmt.Sprintf("passed, but verify `%s` failed (exit %d)", clip(d.Verify, 60), vcode)
			code = vcode
		}
	}
	if b != nil && (failure == "" || d.Rollback == policy.RollbackNever) {
		return g.escalate(b, st)
	}
	rec.Outcome = journal.Kept
	r.live.killed(rec)
	if failure != "" && d.Rollback == policy.RollbackOnFailure && (len(g.stores) > 0 || r.live != nil) && !r.src.session {
		r.rollback(g.j, g.step, g.stores, rec, failure)
		if r.live != nil && rec.Outcome == journal.RolledBack {
			r.rollbackLive(rec, failure)
		}
	}
	if rec.Outcome == journal.Kept {
		g.checkpointAfter()
		if n := r.live.killNotice(g.step.ID, rec.Killed); n != "" && rec.Notice == "" {
			rec.Notice = n
		}
	}
	if b != nil {
		rec.Escalated = b.record(journal.EscalateDrop)
		dropped := fmt.Sprintf("what it wrote beyond its workspace (%s) was dropped", beyondText(b)) + g.dropBeyond(b)
		if rec.Notice == "" {
			rec.Notice = fmt.Sprintf("step %d %s; %s", g.step.ID, failure, dropped)
		} else {
			rec.Notice += "; " + dropped + " too"
		}
	}
	if rec.Notice != "" {
		r.proc.say(rec.Notice)
	}
	if g.hint != "" {
		rec.Notice = strings.TrimPrefix(rec.Notice+"; "+g.hint, "; ")
		r.proc.say("hint: " + g.hint)
	}
	r.finishStep(g.step, *rec, g.start, st.sig)
	return code
}

// checkpointAfter records what a kept step left, when a watcher can tell
// what it changed (a walk would double the step's cost): undoctl diff
// shows it, and the next step, read-only ones above all, finds nothing
// left to read.
func (g *gitStep) checkpointAfter() {
	for i, s := range g.stores {
		res, err := s.CheckpointIf(fmt.Sprintf("after step %d: %s", g.step.ID, clip(g.rec.Command, 200)), checkpoint.WalkNever)
		if err == nil && i < len(g.rec.Points) {
			g.rec.Points[i].After = res.ID
		}
	}
}

// beginStep opens the journal and numbers a step that may change the
// workspaces roots (nil: any). When it cannot, it has said why, and
// nothing ran.
func (r *run) beginStep(roots []string) (*journal.Journal, *journal.Step, bool) {
	j, step, err := r.openStep(roots)
	if err != nil {
		r.stepError(err)
		return nil, nil, false
	}
	return j, step, true
}

// openStep opens the journal and numbers a step that may change the
// workspaces roots (nil: any).
func (r *run) openStep(roots []string) (*journal.Journal, *journal.Step, error) {
	if r.stateDir == "" {
		return nil, nil, errNoStateDir
	}
	j, err := journal.Open(r.stateDir)
	if err != nil {
		return nil, nil, err
	}
	step, err := j.BeginIn(roots)
	if err != nil {
		return nil, nil, err
	}
	return j, step, nil
}

var errNoStateDir = errors.New("no state directory for checkpoints")

// stepError says why openStep could not begin a step: nothing ran.
func (r *run) stepError(err error) {
	switch {
	case errors.Is(err, errNoStateDir):
		r.proc.errorf(err, "set UNDOSH_STATE_DIR to a writable directory; nothing ran")
	case storeSealed(err):
		// A sandbox around the shell (Codex's -s workspace-write, a
		// read-only bind mount) lets the step write its workspace but
		// not undosh's store, so no checkpoint can be taken.
		why := err.Error()
		var en syscall.Errno
		if errors.As(err, &en) {
			why = en.Error()
		}
		r.proc.errorf(fmt.Errorf("cannot checkpoint this step: undosh's state directory %s is not writable here (%s)", r.stateDir, why),
			"this shell runs inside a sandbox that keeps the state directory read-only while the step may write; "+
				"make it writable there (Codex: -c 'sandbox_workspace_write.writable_roots=[\""+r.stateDir+"\"]'), "+
				"or put undosh around the sandbox rather than inside it; nothing ran")
	default:
		r.proc.errorf(err, "check the state directory "+r.stateDir+"; nothing ran")
	}
}

// storeSealed reports whether err is the state directory refusing a
// write: a read-only mount, or a permission a sandbox took away.
func storeSealed(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)
}

// writableHere reports whether this process may make a file in dir: an
// unnamed one (O_TMPFILE), which leaves nothing behind, so that a
// sandbox's Landlock rules count as well as the mount's flags.
func writableHere(dir string) bool {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err == nil {
		unix.Close(fd)
		return true
	}
	switch err {
	case unix.EROFS, unix.EACCES, unix.EPERM:
		return false
	}
	// No O_TMPFILE on this filesystem: the mount's flags and the mode.
	return unix.Access(dir, unix.W_OK) == nil
}

// runSealed runs a step that can change nothing undosh could undo as
// the read-only steps run: under the read-only limit where there is
// one, else as it is.
func (r *run) runSealed() int {
	if r.enforcing() {
		if l, _ := r.contain(policy.None, r.proc.Argv, r.proc.Environ); l != nil {
			return r.proc.execAs(l.path, l.argv, l.env, r.src)
		}
	}
	return r.proc.exec(r.real, r.src)
}

// stepEnv is the environment of a protected step's shell: the caller's,
// with UNDOSH_STEP naming the step.
func (r *run) stepEnv(id int) []string {
	return append(append([]string(nil), r.proc.Environ...), "UNDOSH_STEP="+strconv.Itoa(id))
}

// stepFiles are the standard files of a protected step's shell: the
// caller's, with the relayed script as standard input.
func (r *run) stepFiles() []*os.File {
	files := append([]*os.File(nil), r.proc.Files...)
	if r.src.stdin != nil {
		files[0] = r.src.stdin
	}
	return files
}

// verifyDir is where verify runs: the workspace, else the working
// directory.
func (r *run) verifyDir() string {
	if len(r.dec.Roots) > 0 {
		return r.dec.Roots[0]
	}
	return r.cwd
}

// machineVerify is the verify of a machine step: $UNDOSH_VERIFY, else the
// policy's (a rule's or the default); "" leaves it to the step's status.
// A step whose rollback is never has none: it is kept whatever it does.
func (r *run) machineVerify() string {
	if r.keepsFailure() {
		return ""
	}
	if v := r.proc.Getenv("UNDOSH_VERIFY"); v != "" {
		return v
	}
	return r.dec.Verify
}

// keepsFailure reports whether the step keeps what it did even when it
// fails (the policy's rollback: never), for a machine step as for a
// workspace step.
func (r *run) keepsFailure() bool { return r.dec.Rollback == policy.RollbackNever }

// finishStep journals rec as the end of step; when the step died by sig,
// undosh dies by it too.
func (r *run) finishStep(step *journal.Step, rec journal.Record, start time.Time, sig syscall.Signal) {
	rec.Duration = ms(time.Since(start))
	if err := step.Finish(rec); err != nil {
		r.proc.errorf(err, "the step ran; its record is missing from the journal")
	}
	if sig != 0 {
		r.proc.DieBy(sig)
	}
}

// rollback puts the workspace back before the step, unless another step
// overlapped it, and sets rec.Notice to the one line that says what it
// did ("" when there was nothing to undo), for the caller to say.
func (r *run) rollback(j *journal.Journal, step *journal.Step, stores []*checkpoint.Store, rec *journal.Record, failure string) {
	if step.Overlapped() {
		rec.Outcome = journal.Overlapped
		rec.Notice = fmt.Sprintf("step %d %s while another step ran, so its changes were kept; to go back: undoctl back %d", step.ID, failure, step.ID)
		return
	}
	files := 0
	var undo []string
	for i, s := range stores {
		p := &rec.Points[i]
		done, err := j.MarkRollback(journal.Rollback{Step: step.ID, Root: p.Root, Target: p.Before})
		if err != nil {
			rec.Notice = fmt.Sprintf("step %d %s; the rollback could not start (%v); to go back: undoctl back %d", step.ID, failure, err, step.ID)
			return
		}
		res, err := s.Restore(p.Before)
		done()
		if err != nil {
			rec.Notice = fmt.Sprintf("step %d %s; the rollback of %s failed (%v); to go back: undoctl back %d", step.ID, failure, p.Root, err, step.ID)
			return
		}
		p.After = res.Before
		p.Restored = len(res.Written) + len(res.Removed)
		files += p.Restored
		if p.Restored > 0 {
			undo = append(undo, "undoctl restore -C "+shquote.Word(p.Root)+" "+short(res.Before))
		}
	}
	rec.Outcome = journal.RolledBack
	if files == 0 {
		return // nothing to undo, nothing to say
	}
	names := make([]string, 0, len(rec.Points))
	for _, p := range rec.Points {
		names = append(names, short(p.Before))
	}
	rec.Notice = fmt.Sprintf("step %d %s: rolled back %d %s to checkpoint %s; undo the rollback with: %s",
		step.ID, failure, files, plural(files, "file", "files"), strings.Join(names, ", "), strings.Join(undo, " && "))
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// finishRollbacks completes rollbacks that were cut short.
func finishRollbacks(proc *Process, stateDir string) {
	j, err := journal.Open(stateDir)
	if err != nil {
		return
	}
	pending, done, err := j.Unfinished()
	if err != nil || len(pending) == 0 {
		return
	}
	pol := policyOrDefault(proc)
	for i, p := range pending {
		if p.Kind == journal.Machine {
			did, err := machine.Recover(p.Root)
			if err != nil {
				proc.errorf(fmt.Errorf("recover the commit of machine step %d cut short: %w", p.Step, err), "undoctl doctor shows the state of the fork engine's journal")
				continue
			}
			done[i]()
			if len(did) > 0 {
				proc.say(fmt.Sprintf("recovered the commit of machine step %d that was cut short: %s", p.Step, clip(strings.Join(did, "; "), 300)))
			}
			continue
		}
		s, err := checkpoint.Open(p.Root, state.StoreOptions(stateDir, pol, proc.Getenv("HOME")))
		if err != nil {
			proc.errorf(fmt.Errorf("finish the rollback of step %d: %w", p.Step, err), fmt.Sprintf("undoctl back %d puts %s back by hand", p.Step, p.Root))
			continue
		}
		res, err := s.Restore(p.Target)
		s.Close()
		if err != nil {
			proc.errorf(fmt.Errorf("finish the rollback of step %d: %w", p.Step, err), fmt.Sprintf("undoctl back %d puts %s back by hand", p.Step, p.Root))
			continue
		}
		done[i]()
		n := len(res.Written) + len(res.Removed)
		rec := journal.Record{Time: time.Now(), PID: os.Getpid(), Cwd: p.Root, Class: policy.Git.String(), Verdict: policy.Run.String(),
			Command: fmt.Sprintf("(finish the rollback of step %d)", p.Step), Outcome: journal.Finished, Parent: p.Step,
			Points: []journal.Checkpoint{{Root: p.Root, Before: res.Before, After: p.Target, Restored: n}}}
		if id, err := j.NewID(); err == nil {
			rec.ID = id
			_ = j.Append(rec)
		}
		proc.say(fmt.Sprintf("finished the rollback of step %d that was cut short: restored %d %s in %s; undo with: undoctl restore -C %s %s",
			p.Step, n, plural(n, "file", "files"), p.Root, shquote.Word(p.Root), short(res.Before)))
	}
}

// policyOrDefault loads the policy in force, or the default when it is
// broken (finishing a rollback needs only its checkpoint settings).
func policyOrDefault(proc *Process) *policy.Policy {
	if p, err := classify.LoadPolicy(classify.PolicyPath("", proc.Getenv), ""); err == nil {
		return p
	}
	return policy.Default()
}
