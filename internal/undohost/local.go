package undohost

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/shquote"
)

// Local is the backend that forks this same machine with the local fork
// engine (internal/machine, fork). It is for a host that is the sandbox
// itself, and for tests.
//
// The mapping (docs/undohost.md): a fork-and-run is [machine.Run] with
// commit; a kept step's commits are recorded, in order, per sandbox. A
// checkpoint is a position in that list (no data is copied: the fork
// engine's journal already keeps every original). Going back to a
// checkpoint undoes the commits of the steps kept after it, last first,
// with fork.Undo, and drops the checkpoints taken after those steps.
type Local struct {
	log     *slog.Logger
	catalog catalog
	// KeepLast is the default bound on checkpoints per sandbox (32).
	keepLast int
}

// NewLocal returns the local backend, keeping its records in dir. It
// refuses when the fork engine cannot run here (not root, no overlayfs,
// missing namespaces), and discards the copies left by processes that
// died (an undohost killed during a step).
func NewLocal(dir string, log *slog.Logger) (*Local, error) {
	if err := fork.Probe(); err != nil {
		return nil, fmt.Errorf("the local backend cannot fork this machine: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := fork.Cleanup(""); err != nil {
		log.Warn("clean up copies left by dead processes", "err", err)
	}
	return &Local{log: log, catalog: catalog{dir: dir}, keepLast: 32}, nil
}

// ForkAndRun runs the step and verify in a copy of the machine and commits
// the copy when both pass.
func (l *Local) ForkAndRun(ctx context.Context, job hostlink.ForkJob) (hostlink.ForkOutcome, error) {
	var res hostlink.ForkOutcome
	req := job.Request
	if req.Network.Mode != "off" {
		// The engine's copies have only lo; an allowlist is not built
		// (fork's doc), and widening is never done silently.
		return res, fmt.Errorf("the local backend runs steps offline only; network mode %q is not supported", req.Network.Mode)
	}
	step := machine.Step{
		Argv:          argvOf(req.Step),
		Dir:           cwdOf(req.Step),
		Env:           envOf(req.Step),
		Timeout:       time.Duration(req.Timeouts.StepMS) * time.Millisecond,
		VerifyTimeout: time.Duration(req.Timeouts.VerifyMS) * time.Millisecond,
		Shell:         "/bin/sh",
		Logger:        l.log,
		KeepFailed:    req.KeepFailed,
		// What the step leaves running is started again on this
		// machine, the sandbox, once the copy is kept (logs in the
		// engine's state directory), or said to be stopped with it.
		Leftovers: true,
	}
	if c := req.Step; c.Path != "" && len(c.Argv) > 0 {
		step.Argv, step.Path = c.Argv, c.Path // the engine sets argv[0]
	}
	if v := req.Verify; v != nil {
		step.Verify = v.Shell
		if len(v.Argv) > 0 {
			step.Verify = shquote.Join(v.Argv)
		}
		step.VerifyDir = cwdOf(*v)
	}
	// The engine wants files; pipes carry the bytes to the operation's
	// streams as they come. Verify's output goes to stderr, after the
	// step's (same pipe, so in order).
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return res, err
	}
	step.Stdout, step.Stderr, step.VerifyOut = outW, errW, errW
	var wg sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		w io.Writer
	}{{outR, job.Stdout}, {errR, job.Stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(p.w, p.r)
			p.r.Close()
		}()
	}
	out, err := machine.Run(ctx, step, true)
	if err == nil && out.Conflict != nil {
		paths := make([]string, 0, len(out.Conflict.Problems))
		for _, p := range out.Conflict.Problems {
			paths = append(paths, p.Path)
		}
		fmt.Fprintf(errW, "undohost: the step passed in a copy of the machine but was not applied: %s changed on the machine meanwhile\n", strings.Join(paths, ", "))
	}
	if line := out.LeftoverSummary(); err == nil && line != "" {
		fmt.Fprintf(errW, "undohost: the step %s\n", line)
	}
	outW.Close()
	errW.Close()
	wg.Wait()
	l.log.Info("local fork", "sandbox", job.Sandbox, "op", job.Op, "status", out.Status, "verify", out.VerifyStatus,
		"timed_out", out.TimedOut, "changes", out.Changes, "commits", len(out.Commits), "err", err)
	if err != nil {
		return res, err
	}
	status := out.Status
	res.Result.StepExit = &status
	if out.VerifyStatus >= 0 {
		v := out.VerifyStatus
		res.Result.VerifyExit = &v
	}
	if out.TimedOut {
		res.Result.TimedOut = "step"
		if out.VerifyStatus >= 0 {
			res.Result.TimedOut = "verify"
		}
	}
	res.Kept = (out.Passed() || out.KeptFailed) && out.Conflict == nil
	if len(out.Commits) > 0 {
		l.catalog.mu.Lock()
		defer l.catalog.mu.Unlock()
		b, err := l.catalog.read(job.Sandbox)
		if err == nil {
			b.Steps = append(b.Steps, keptStep{Op: job.Op, Time: time.Now().UTC(), Commits: out.Commits})
			err = l.catalog.write(job.Sandbox, b)
		}
		if err != nil {
			// The commit stands (it is in the engine's journal); only
			// going back past it through a checkpoint is lost.
			l.log.Error("record kept step", "op", job.Op, "err", err)
		}
	}
	return res, nil
}

// Checkpoint records the current position in the sandbox's kept steps.
func (l *Local) Checkpoint(ctx context.Context, job hostlink.CheckpointJob) (hostlink.CheckpointInfo, error) {
	l.catalog.mu.Lock()
	defer l.catalog.mu.Unlock()
	b, err := l.catalog.read(job.Sandbox)
	if err != nil {
		return hostlink.CheckpointInfo{}, err
	}
	cp := l.catalog.newCheckpoint(b, job, 0)
	cp.Seq = len(b.Steps)
	b.Checkpoints = append(b.Checkpoints, cp)
	prune(&b, time.Now(), keepLastOr(job.Request.Retention.KeepLast, l.keepLast))
	if err := l.catalog.write(job.Sandbox, b); err != nil {
		return hostlink.CheckpointInfo{}, err
	}
	return cp.CheckpointInfo, nil
}

// List returns the sandbox's checkpoints that have not expired.
func (l *Local) List(ctx context.Context, sandbox string) ([]hostlink.CheckpointInfo, error) {
	l.catalog.mu.Lock()
	defer l.catalog.mu.Unlock()
	b, err := l.catalog.read(sandbox)
	if err != nil {
		return nil, err
	}
	if len(prune(&b, time.Now(), 0)) > 0 {
		if err := l.catalog.write(sandbox, b); err != nil {
			return nil, err
		}
	}
	return infos(b), nil
}

// Restore undoes, last first, the commits of the steps kept after the
// checkpoint. Each undone step is dropped from the record at once, so a
// restore cut short can be asked again.
func (l *Local) Restore(ctx context.Context, job hostlink.RestoreJob) error {
	l.catalog.mu.Lock()
	defer l.catalog.mu.Unlock()
	b, err := l.catalog.read(job.Sandbox)
	if err != nil {
		return err
	}
	i, ok := find(b, job.Request.Checkpoint)
	if !ok {
		return fmt.Errorf("checkpoint %s: %w", job.Request.Checkpoint, hostlink.ErrNotFound)
	}
	seq := b.Checkpoints[i].Seq
	for len(b.Steps) > seq {
		if err := ctx.Err(); err != nil {
			return err
		}
		last := b.Steps[len(b.Steps)-1]
		if err := machine.Undo(last.Commits, false); err != nil {
			return fmt.Errorf("undo step %s: %w", last.Op, err)
		}
		b.Steps = b.Steps[:len(b.Steps)-1]
		if err := l.catalog.write(job.Sandbox, b); err != nil {
			return err
		}
		l.log.Info("local undo", "sandbox", job.Sandbox, "op", job.Op, "undid", last.Op)
	}
	var keep []checkpoint
	for _, cp := range b.Checkpoints {
		if cp.Seq <= seq {
			keep = append(keep, cp)
		}
	}
	b.Checkpoints = keep
	return l.catalog.write(job.Sandbox, b)
}

// argvOf is the command's argv for a backend that runs argv[0]: with
// Path, the Launcher that runs Path under Argv[0], or Path in place of
// Argv[0] when there is none.
func argvOf(c hostlink.Command) []string {
	if c.Path != "" && len(c.Argv) > 0 {
		switch {
		case c.Argv[0] == c.Path:
			return c.Argv
		case c.Launcher != "":
			return append([]string{c.Launcher, hostlink.ExecAs, c.Path}, c.Argv...)
		}
		return append([]string{c.Path}, c.Argv[1:]...)
	}
	if len(c.Argv) > 0 {
		return c.Argv
	}
	return []string{"/bin/sh", "-c", c.Shell}
}

func cwdOf(c hostlink.Command) string {
	if c.Cwd == "" {
		return "/"
	}
	return c.Cwd
}

func envOf(c hostlink.Command) []string {
	if len(c.Env) == 0 {
		return fork.DefaultEnv
	}
	return c.Env
}
