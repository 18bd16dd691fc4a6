package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/sudo"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// viaSudo reports whether a command of the step runs through sudo: not
// doas, su or runuser, which have no -n to ask without prompting.
func viaSudo(f *parser.Facts) bool {
	return f != nil && slices.ContainsFunc(f.Commands, func(c parser.Command) bool {
		return c.Root && slices.Contains(c.Wrappers, "sudo")
	})
}

// protectMachineSudo runs a machine step that runs sudo, for a user who
// is not root, in the root engine entered through sudo (internal/sudo),
// when this user's sudo needs no password. Otherwise it says in one line
// that the step is not protected in a copy, and the policy's
// host.fallback applies as it does where no engine runs: git (asGit)
// runs it here with a workspace checkpoint, where sudo's prompt works as
// ever; deny refuses it.
func (r *run) protectMachineSudo(rec journal.Record, start time.Time) (code int, asGit bool) {
	code, done, why := r.protectSudo(rec, start)
	if done {
		return code, false
	}
	d := r.dec
	if r.pol.Host.FallbackFor(os.Geteuid()) != "git" {
		return r.refuse(rec, fmt.Sprintf("this step changes the machine (%s) and runs sudo, but %s, so undosh cannot run it in a copy of the machine as root",
			firstReason(d, policy.Fork), why), "give this user passwordless sudo to run such steps in a copy, set host.fallback: git in the policy to run them with a file checkpoint only, or run them outside undosh"), false
	}
	r.proc.say(fmt.Sprintf("note: this step runs sudo, but %s, so it was not protected in a copy of the machine; only the workspace is checkpointed (policy host.fallback: git)", why))
	return 0, true
}

// protectSudo hands the step to a root undosh started with sudo -n. done
// is false when it could not (why says so) and nothing ran.
func (r *run) protectSudo(rec journal.Record, start time.Time) (code int, done bool, why string) {
	p := r.proc
	path, err := exec.LookPath("sudo")
	if err != nil {
		return 0, false, "sudo is not found on PATH"
	}
	if err := sudo.Probe(path); err != nil {
		return 0, false, err.Error()
	}
	self, err := enforce.Self()
	if err != nil {
		return 0, false, "undosh cannot find its own executable to run as root (" + err.Error() + ")"
	}
	_, step, ok := r.beginStep(nil) // a machine step may touch any workspace
	if !ok {
		return exit.Usage, true, ""
	}
	rec.ID = step.ID
	rec.CPUs, rec.MemGiB = machine.Size()
	rec.Sudo = true
	verify := r.machineVerify()
	env, files := r.stepEnv(step.ID), r.stepFiles()
	spec := sudo.Spec{Argv: p.Argv, Path: r.real, Dir: r.cwd, Env: env, Verify: verify, VerifyDir: r.verifyDir(), Shell: r.real,
		Include: classify.WorkspaceRoots(r.cwd, p.Getenv("HOME")), Protected: r.protected(), Step: step.ID, KeepFailed: r.keepsFailure()}
	if filepath.IsAbs(r.stateDir) {
		spec.Hide = []string{r.stateDir}
	}
	b, err := sudo.EncodeSpec(spec)
	var offer *sudo.Offer
	if err == nil {
		offer, err = sudo.NewOffer(b)
	}
	if err != nil {
		step.Abandon()
		p.errorf(fmt.Errorf("step %d: %w", step.ID, err), "nothing ran")
		return exit.Usage, true, ""
	}
	defer offer.Close()
	markSupervising(policy.Fork, false)
	cmd := exec.Command(path, append([]string{"-n", "--", self}, offer.Args()...)...)
	cmd.Env = p.Environ
	// The step's own files: sudo passes 0, 1 and 2 to the root side (a
	// closed one stays /dev/null).
	if files[0] != nil {
		cmd.Stdin = files[0]
	}
	if files[1] != nil {
		cmd.Stdout = files[1]
	}
	if files[2] != nil {
		cmd.Stderr = files[2]
	}
	if r.beforeStep != nil {
		r.beforeStep()
	}
	if err := cmd.Start(); err != nil {
		step.Abandon()
		return 0, false, "sudo cannot be started (" + err.Error() + ")"
	}
	// A signal to undosh goes to sudo, which passes it on: the root side
	// ends the session in the copy, which is discarded.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stepSignals...)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-stop:
				return
			}
		}
	}()
	var ctxDone <-chan struct{}
	if r.ctx != nil {
		ctxDone = r.ctx.Done()
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctxDone:
		// An interactive line its user gave up on.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err = <-waited
	}
	signal.Stop(sigs)
	close(stop)
	taken, answer, rerr := offer.Result()
	switch {
	case rerr == nil && !taken:
		step.Abandon()
		return 0, false, fmt.Sprintf("sudo -n would not run undosh as root (it %s)", describeExit(cmd, err))
	case rerr == nil && answer == nil:
		rerr = fmt.Errorf("the root undosh ended without saying how the step went (sudo -n %s)", describeExit(cmd, err))
	}
	var res sudo.Result
	if rerr == nil {
		res, rerr = sudo.DecodeResult(answer)
	}
	if rerr == nil && res.Error != "" {
		rerr = errors.New(res.Error)
	}
	if rerr != nil {
		step.Abandon()
		p.errorf(fmt.Errorf("step %d, run as root through sudo: %w", step.ID, rerr), "a commit cut short is put back the next time undosh runs as root; sudo undoctl doctor shows what the fork engine needs")
		return exit.Usage, true, ""
	}
	out := outcomeOf(res)
	notice, code := machine.Report(step.ID, out, verify, &rec)
	sayMachine(p, step.ID, notice, out)
	r.finishStep(step, rec, start, out.Signal)
	return code, true, ""
}

// describeExit says how sudo ended, for a message.
func describeExit(cmd *exec.Cmd, err error) string {
	if cmd.ProcessState != nil {
		return "exited " + fmt.Sprint(cmd.ProcessState.ExitCode())
	}
	return "failed: " + err.Error()
}

// outcomeOf is the outcome the root side reported, as the root engine
// gives it here. Its units are left out: the root side restarted them.
func outcomeOf(r sudo.Result) machine.Outcome {
	out := machine.Outcome{Status: r.Status, Signal: syscall.Signal(r.Signal), TimedOut: r.TimedOut, KeptFailed: r.KeptFailed, VerifyStatus: r.VerifyStatus,
		VerifyOutput: r.VerifyOutput, Changes: r.Changes, Protected: r.Protected}
	for _, c := range r.Commits {
		out.Commits = append(out.Commits, machine.Commit{Target: c.Target, JournalDir: c.JournalDir, ID: c.ID, Paths: c.Paths})
	}
	if r.Conflict != nil {
		out.Conflict = &fork.ConflictError{}
		for _, p := range r.Conflict.Problems {
			out.Conflict.Problems = append(out.Conflict.Problems, fork.Problem{Path: p.Path, Reason: p.Reason})
		}
	}
	for _, m := range r.Mapped {
		out.Mapped = append(out.Mapped, fork.Mapping{PID: m.PID, Comm: m.Comm, Files: m.Files})
	}
	out.LeftoversUnread = r.LeftoversUnread
	for _, l := range r.Leftovers {
		out.Leftovers = append(out.Leftovers, machine.Leftover{Proc: procs.Proc{PID: l.PID, PPID: l.PPID, Comm: l.Comm, Argv: l.Argv},
			State: machine.LeftoverState(l.State), Started: procs.Proc{PID: l.NewPID, Start: l.NewStart}, Log: l.Log, Err: l.Error, Ended: l.Ended})
	}
	return out
}

// resultOf is the answer the root side gives for out.
func resultOf(out machine.Outcome) sudo.Result {
	r := sudo.Result{Status: out.Status, Signal: int(out.Signal), TimedOut: out.TimedOut, KeptFailed: out.KeptFailed, VerifyStatus: out.VerifyStatus,
		VerifyOutput: out.VerifyOutput, Changes: out.Changes, Protected: out.Protected, Units: out.Units}
	for _, c := range out.Commits {
		r.Commits = append(r.Commits, sudo.Commit{Target: c.Target, JournalDir: c.JournalDir, ID: c.ID, Paths: c.Paths})
	}
	if out.Conflict != nil {
		r.Conflict = &sudo.Conflict{}
		for _, p := range out.Conflict.Problems {
			r.Conflict.Problems = append(r.Conflict.Problems, sudo.Problem{Path: p.Path, Reason: p.Reason})
		}
	}
	for _, m := range out.Mapped {
		r.Mapped = append(r.Mapped, sudo.Mapping{PID: m.PID, Comm: m.Comm, Files: m.Files})
	}
	r.LeftoversUnread = out.LeftoversUnread
	for _, l := range out.Leftovers {
		r.Leftovers = append(r.Leftovers, sudo.Leftover{PID: l.Proc.PID, PPID: l.Proc.PPID, Comm: l.Proc.Comm, Argv: l.Proc.Argv,
			State: string(l.State), NewPID: l.Started.PID, NewStart: l.Started.Start, Log: l.Log, Error: l.Err, Ended: l.Ended})
	}
	return r
}

// SudoStep is the root side of a machine step handed over through sudo
// (internal/sudo): args follow [sudo.Entry]. It takes the step from the
// caller, runs it in a copy of the machine as the caller's user, with
// root's state directory (the machine lock, the marks of commits in
// progress) and the standard files sudo passed, commits it when it and
// verify pass, and answers how it went. It returns the step's status,
// or 2 when it did not take the step.
func SudoStep(args []string, getenv func(string) string, stderr io.Writer) int {
	h, err := sudo.Accept(args, getenv("SUDO_UID"), getenv("SUDO_GID"))
	if err != nil {
		fmt.Fprintf(stderr, "undosh: error: %v\nundosh: hint: %s is undosh's own entry for machine steps that run sudo (docs/policy.md); nothing ran\n", err, sudo.Entry)
		return exit.Usage
	}
	defer h.Close()
	if err := h.Taken(); err != nil {
		fmt.Fprintf(stderr, "undosh: error: %v\n", err)
		return exit.Usage
	}
	answer := func(r sudo.Result) int {
		b, err := sudo.EncodeResult(r)
		if err == nil {
			err = h.Reply(b)
		}
		if err != nil {
			fmt.Fprintf(stderr, "undosh: error: %v\n", err)
			return exit.Usage
		}
		return r.Status
	}
	spec, err := sudo.DecodeSpec(h.Spec)
	if err != nil {
		return answer(sudo.Result{Error: err.Error() + "; nothing ran", Status: exit.Usage})
	}
	stateDir := state.Dir("", getenv, 0)
	p := &Process{Getenv: getenv, Stderr: stderr, Closed: func(int) bool { return false }}
	if _, err := os.Lstat(journal.PendingDir(stateDir)); err == nil {
		finishRollbacks(p, stateDir) // commits a root undosh cut short
	}
	j, err := journal.Open(stateDir)
	if err != nil {
		return answer(sudo.Result{Error: err.Error() + "; nothing ran", Status: exit.Usage})
	}
	// A signal (sudo passes the caller's on) or the caller's death ends
	// the session in the copy, which is then discarded.
	sigCtx, got, stop := cancelOnSignal(context.Background())
	defer stop()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	defer watchCaller(h.Caller.PID, cancel)()
	c := h.Caller
	out, err := machine.Run(ctx, machine.Step{Argv: spec.Argv, Path: spec.Path, Dir: spec.Dir, Env: spec.Env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Verify: spec.Verify, VerifyDir: spec.VerifyDir, Shell: spec.Shell,
		Timeout: spec.Timeout, VerifyTimeout: spec.VerifyTimeout, Include: spec.Include, Protected: spec.Protected, Hide: spec.Hide,
		StateDir: stateDir, Journal: j, ID: spec.Step, User: &fork.User{UID: c.UID, GID: c.GID, Groups: c.Groups}, KeepFailed: spec.KeepFailed,
		Leftovers: true, Own: ownDaemons}, true)
	if err != nil && ctx.Err() != nil {
		sig := syscall.SIGKILL // the caller died
		if s, ok := got().(syscall.Signal); ok {
			sig = s
		}
		out.Status, out.Signal = 128+int(sig), sig
	} else if err != nil {
		return answer(sudo.Result{Error: err.Error() + "; nothing was applied to the machine", Status: exit.Usage})
	}
	if (out.Passed() || out.KeptFailed) && len(out.Protected) == 0 && out.Conflict == nil {
		machine.RestartUnits(out.Units)
	}
	return answer(resultOf(out))
}

// watchCaller calls cancel when process pid ends; the returned function
// stops watching.
func watchCaller(pid int, cancel func()) func() {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return func() {}
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		unix.Close(fd)
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(p[0]), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err == nil && fds[0].Revents != 0 {
				cancel()
			}
			return
		}
	}()
	return func() {
		unix.Close(p[1]) // wakes the poll
		<-done
		unix.Close(p[0])
		unix.Close(fd)
	}
}
