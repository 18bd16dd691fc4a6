package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/agent"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/policy"
)

// hostURL names the sandbox host: $UNDOSH_HOST, then the policy's
// host.address; "" when there is none. Its token, when it carries none,
// is host.json's (agent.Client).
func (r *run) hostURL() string {
	return agent.Address(r.proc.Getenv("UNDOSH_HOST"), r.pol.Host.Address)
}

// hostAbsent reports whether err means this machine has no way to reach
// a host at all (no vsock device), which is not worth a note.
func hostAbsent(err error) bool {
	return errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.EADDRNOTAVAIL)
}

// protectHost asks the sandbox host to fork the sandbox, run the step and
// verify in the copy with the network cut off, and keep the copy only if
// both pass. It returns handled false when no host answers; the caller then
// falls back (the local fork engine, or the policy's host.fallback), and
// note says why when a host was expected.
func (r *run) protectHost(rec journal.Record, start time.Time) (code int, handled bool, note string) {
	p := r.proc
	url := r.hostURL()
	if url == "" {
		return 0, false, ""
	}
	// The host as messages and the journal name it: never with the
	// token, which would land in the agent's transcript.
	name := hostlink.HostName(url)
	c, err := agent.Client(url, r.stateDir, hostlink.ClientOptions{Agent: "undosh"})
	if err != nil {
		return 0, false, fmt.Sprintf("the sandbox host %s is misconfigured (%v)", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = c.Hello(ctx)
	cancel()
	if err != nil {
		if hostAbsent(err) {
			return 0, false, ""
		}
		return 0, false, fmt.Sprintf("the sandbox host %s does not answer (%v)", name, err)
	}
	j, step, ok := r.beginStep(nil)
	if !ok {
		return exit.Usage, true, ""
	}
	rec.ID = step.ID
	rec.CPUs, rec.MemGiB = machine.Size()
	rec.Host = name
	// The sandbox before the step: the checkpoint kept after the last host
	// step, or a new one for the first.
	rec.HostBefore = lastHostCheckpoint(j, rec.Host)
	if rec.HostBefore == "" {
		rec.HostBefore, _ = hostCheckpoint(c, fmt.Sprintf("undosh-%d-%d-before", step.ID, start.UnixNano()), "", fmt.Sprintf("before step %d", step.ID))
	}
	verify := r.machineVerify()
	rec.Verify = verify
	// pip's guard, a PEP 668 marker on the VM's disk (docs/guards.md),
	// lets the step through in the copy: the host's fork is its machine
	// step.
	env := append(r.stepEnv(step.ID), "PIP_BREAK_SYSTEM_PACKAGES=1")
	req := hostlink.ForkRun{
		// Unique to this step on this machine: a retry of the same request
		// after a dropped connection is the same operation.
		Key:        fmt.Sprintf("undosh-%d-%d-%d", os.Getpid(), step.ID, start.UnixNano()),
		Step:       hostlink.Command{Argv: p.Argv, Path: r.real, Launcher: launcher(), Cwd: r.cwd, Env: env},
		Network:    hostlink.Network{Mode: "off"},
		KeepFailed: r.keepsFailure(),
	}
	if verify != "" {
		req.Verify = &hostlink.Command{Shell: verify, Cwd: r.verifyDir(), Env: env}
	}
	files := r.stepFiles()
	if r.beforeStep != nil {
		r.beforeStep()
	}
	op, err := c.Run(r.context(), req, writerOf(files[1]), writerOf(files[2]))
	if err != nil {
		step.Abandon()
		p.errorf(fmt.Errorf("step %d on the sandbox host %s: %w", step.ID, name, err), "undoctl doctor shows the host link; the step may not have run")
		return exit.Usage, true, ""
	}
	rec.HostOp = op.ID
	code = 0
	if op.Result.StepExit != nil {
		code = *op.Result.StepExit
	}
	rec.Exit = code
	if op.Result.VerifyExit != nil {
		ok := *op.Result.VerifyExit == 0
		rec.VerifyOK = &ok
	}
	switch op.State {
	case hostlink.StateKept:
		rec.Outcome = journal.Committed
		rec.HostCheckpoint, _ = hostCheckpoint(c, req.Key+"-after", op.ID, fmt.Sprintf("after step %d", step.ID))
		rec.SnapshotBytes = checkpointSize(c, rec.HostCheckpoint)
	case hostlink.StateDiscarded:
		rec.Outcome = journal.Discarded
		switch {
		case code != 0:
			rec.Notice = fmt.Sprintf("step %d failed (exit %d) in a fork of the sandbox, which the host discarded; this sandbox is unchanged", step.ID, code)
		case op.Result.VerifyExit != nil && *op.Result.VerifyExit != 0:
			code = *op.Result.VerifyExit
			rec.Notice = fmt.Sprintf("step %d passed in a fork of the sandbox, but verify `%s` failed (exit %d): the host discarded the fork; this sandbox is unchanged", step.ID, clip(verify, 60), code)
		case op.Result.TimedOut != "":
			code = 124
			rec.Notice = fmt.Sprintf("step %d ran out of time (%s) in a fork of the sandbox, which the host discarded", step.ID, op.Result.TimedOut)
		}
	default:
		rec.Outcome = journal.Failed
		why := string(op.State)
		if op.Error != nil {
			why += ": " + op.Error.Error()
		}
		rec.Notice = fmt.Sprintf("step %d did not complete on the sandbox host (%s); this sandbox is unchanged", step.ID, why)
		if code == 0 {
			code = 1
		}
	}
	if rec.Notice != "" {
		p.say(rec.Notice)
	}
	rec.Class = policy.Fork.String()
	r.finishStep(step, rec, start, 0)
	return code, true, ""
}

// writerOf is f as a writer, or one that discards when f is closed.
func writerOf(f *os.File) io.Writer {
	if f == nil {
		return io.Discard
	}
	return f
}

// hostCheckpoint asks the host for a checkpoint of the sandbox (after the
// kept operation after, or of the sandbox as it is) and returns its id.
func hostCheckpoint(c *hostlink.Client, key, after, label string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	acc, err := c.Checkpoint(ctx, hostlink.Checkpoint{Key: key, After: after, Label: label})
	if err != nil {
		return "", err
	}
	op, err := c.Follow(ctx, acc.Op, io.Discard, io.Discard)
	if err != nil {
		return "", err
	}
	if op.State != hostlink.StateDone || op.Result.Checkpoint == "" {
		return "", fmt.Errorf("checkpoint %s ended %s", acc.Op, op.State)
	}
	return op.Result.Checkpoint, nil
}

// lastHostCheckpoint is the newest checkpoint the journal holds of the
// sandbox at host.
func lastHostCheckpoint(j *journal.Journal, host string) string {
	recs, err := j.Read()
	if err != nil {
		return ""
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Host != host {
			continue
		}
		if r.HostCheckpoint != "" {
			return r.HostCheckpoint
		}
		if r.Outcome == journal.Restored && r.HostBefore != "" {
			return r.HostBefore // undoctl back went to this one
		}
	}
	return ""
}

// checkpointSize is the size the host reports for checkpoint id (0 when
// it does not say), for undoctl cost.
func checkpointSize(c *hostlink.Client, id string) int64 {
	if id == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Checkpoints(ctx)
	if err != nil {
		return 0
	}
	for _, cp := range list {
		if cp.ID == id {
			return cp.Size
		}
	}
	return 0
}

// launcher is undosh's own path, which the copy of the sandbox has too: a
// host's backend that cannot set argv[0] runs the real shell through it
// (hostlink.ExecAs), so the step's messages name the caller's argv[0].
func launcher() string {
	p, err := os.Executable()
	if err != nil || !filepath.IsAbs(p) {
		return ""
	}
	return p
}
