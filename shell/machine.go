package shell

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/policy"
)

// protectFork runs a machine-changing step in a copy of the machine: the
// step, then verify (the policy's, $UNDOSH_VERIFY, or none: the step's own
// status decides), each a session in the copy with only lo for a
// network. The copy is committed onto the machine only when both pass.
func (r *run) protectFork(rec journal.Record, start time.Time) int {
	e := r.e
	j, step, ok := r.beginStep(nil) // a machine step may touch any workspace
	if !ok {
		return exit.Usage
	}
	rec.ID = step.ID
	rec.CPUs, rec.MemGiB = machine.Size()
	verify := r.machineVerify()
	markSupervising(policy.Fork, false)
	env, files := r.stepEnv(step.ID), r.stepFiles()
	// A signal to undosh ends the session in the copy, which is then
	// discarded, and undosh dies by it.
	ctx, cancel := context.WithCancel(r.context())
	defer cancel()
	var got os.Signal
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	go func() {
		select {
		case got = <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	if r.beforeStep != nil {
		r.beforeStep()
	}
	out, err := machine.Run(ctx, machine.Step{Argv: e.Argv, Path: r.real, Dir: r.cwd, Env: env,
		Stdin: files[0], Stdout: files[1], Stderr: files[2], Verify: verify, VerifyDir: r.verifyDir(),
		Shell: r.real, StateDir: r.stateDir, Journal: j, ID: step.ID, Protected: r.protected(),
		Include: classify.WorkspaceRoots(r.cwd, r.e.Getenv("HOME"))}, true)
	if err != nil && ctx.Err() != nil {
		// Ended by a signal to undosh, or by the caller's context: an
		// interactive line its user interrupted.
		sig := syscall.SIGINT
		if s, ok := got.(syscall.Signal); ok {
			sig = s
		}
		out.Status, out.Signal = 128+int(sig), sig
	} else if err != nil {
		step.Abandon()
		e.errorf(fmt.Errorf("step %d: %w", step.ID, err), "nothing was applied to the machine; undoctl doctor shows what the fork engine needs")
		return exit.Usage
	}
	notice, code := machine.Report(step.ID, out, verify, &rec)
	if notice != "" {
		e.say(notice)
	}
	r.finishStep(step, rec, start, out.Signal)
	return code
}
