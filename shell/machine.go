package shell

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// setuidPrograms names the setuid and setgid programs the step runs, as
// the parser saw them (wrappers such as sudo included), looked up in
// path: in a copy made without root they run without privilege.
func setuidPrograms(f *parser.Facts, path string) []string {
	if f == nil {
		return nil
	}
	var out []string
	check := func(name string) {
		if name == "" || slices.Contains(out, filepath.Base(name)) {
			return
		}
		p := name
		if !strings.Contains(name, "/") {
			for dir := range strings.SplitSeq(path, ":") {
				if dir == "" {
					continue
				}
				if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() {
					p = filepath.Join(dir, name)
					break
				}
			}
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			out = append(out, filepath.Base(name))
		}
	}
	for _, c := range f.Commands {
		for _, w := range c.Wrappers {
			name, _, _ := strings.Cut(w, " ")
			check(name)
		}
		if len(c.Argv) > 0 && !c.Argv[0].Dynamic {
			check(c.Argv[0].Value)
		}
	}
	return out
}

// stepSignals are the signals to undosh that end a step run elsewhere (in
// a copy of the machine): the terminal's, and a kill's.
var stepSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// cancelOnSignal returns a context of parent that one of stepSignals to
// undosh cancels, and got, the signal that did (nil if none did); stop
// cancels the context and stops catching the signals.
func cancelOnSignal(parent context.Context) (ctx context.Context, got func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stepSignals...)
	var mu sync.Mutex
	var caught os.Signal
	go func() {
		select {
		case s := <-sigs:
			mu.Lock()
			caught = s
			mu.Unlock()
			cancel()
		case <-ctx.Done():
		}
	}()
	got = func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return caught
	}
	return ctx, got, func() {
		signal.Stop(sigs)
		cancel()
	}
}

// protectFork runs a machine-changing step in a copy of the machine: the
// step, then verify (the policy's, $UNDOSH_VERIFY, or none: the step's own
// status decides), each a session in the copy with only lo for a
// network. The copy is committed onto the machine only when both pass,
// or whatever the step does when its rollback is never.
func (r *run) protectFork(rec journal.Record, start time.Time) int {
	p := r.proc
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
	ctx, got, stop := cancelOnSignal(r.context())
	defer stop()
	if r.beforeStep != nil {
		r.beforeStep()
	}
	out, err := machine.Run(ctx, machine.Step{Argv: p.Argv, Path: r.real, Dir: r.cwd, Env: env,
		Stdin: files[0], Stdout: files[1], Stderr: files[2], Verify: verify, VerifyDir: r.verifyDir(),
		Shell: r.real, StateDir: r.stateDir, Journal: j, ID: step.ID, Protected: r.protected(),
		Include: classify.WorkspaceRoots(r.cwd, r.proc.Getenv("HOME")), Setuid: setuidPrograms(r.facts, r.env["PATH"]),
		KeepFailed: r.keepsFailure(), Leftovers: true, Own: ownDaemons}, true)
	if err != nil && ctx.Err() != nil {
		// Ended by a signal to undosh, or by the caller's context: an
		// interactive line its user interrupted.
		sig := syscall.SIGINT
		if s, ok := got().(syscall.Signal); ok {
			sig = s
		}
		out.Status, out.Signal = 128+int(sig), sig
	} else if err != nil {
		step.Abandon()
		p.errorf(fmt.Errorf("step %d: %w", step.ID, err), "nothing was applied to the machine; undoctl doctor shows what the fork engine needs")
		return exit.Usage
	}
	notice, code := machine.Report(step.ID, out, verify, &rec)
	sayMachine(p, step.ID, notice, out)
	r.finishStep(step, rec, start, out.Signal)
	return code
}

// ownDaemons are the argv[0]s of undosh's own daemons, which a nested
// undosh may start in a machine step's copy: not the step's processes.
var ownDaemons = []string{state.ServerName}

// sayMachine says, on stderr, the notice of machine step id, then what
// became of the processes it left running in its copy: started again on
// the machine after the commit, or stopped with the copy. Neither goes
// unsaid.
func sayMachine(p *Process, id int, notice string, out machine.Outcome) {
	if notice != "" {
		p.say(notice)
	}
	if line := out.LeftoverSummary(); line != "" {
		p.say(fmt.Sprintf("step %d %s", id, line))
	}
}
