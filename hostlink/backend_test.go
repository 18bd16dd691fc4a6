package hostlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// dirBackend is a real backend for tests: a sandbox is a directory, a fork
// is a copy of it, the step and verify run as real processes in the copy,
// promotion renames the copy over the sandbox, and a checkpoint is a copy
// kept aside. It cannot cut a network; undohost's backends do.
type dirBackend struct {
	root  string
	forks atomic.Int64 // ForkAndRun calls, to check exactly-once

	mu     sync.Mutex
	checks map[string][]CheckpointInfo
}

func newDirBackend(root string) *dirBackend {
	return &dirBackend{root: root, checks: map[string][]CheckpointInfo{}}
}

func (b *dirBackend) dir(sandbox string) string { return filepath.Join(b.root, sandbox, "fs") }

func copyTree(dst, src string) error {
	return os.CopyFS(dst, os.DirFS(src))
}

func (b *dirBackend) exec(ctx context.Context, c *Command, dir string, budget int64, stdout, stderr io.Writer) (int, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(budget)*time.Millisecond)
	defer cancel()
	argv := c.Argv
	if c.Shell != "" {
		argv = []string{"/bin/sh", "-c", c.Shell}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return -1, true, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ctx.Err() != nil {
			return -1, false, ctx.Err()
		}
		return ee.ExitCode(), false, nil
	}
	return 0, false, err
}

func (b *dirBackend) ForkAndRun(ctx context.Context, job ForkJob) (ForkOutcome, error) {
	b.forks.Add(1)
	src := b.dir(job.Sandbox)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return ForkOutcome{}, err
	}
	cp := filepath.Join(b.root, job.Sandbox, "copy-"+job.Op)
	if err := copyTree(cp, src); err != nil {
		return ForkOutcome{}, err
	}
	defer os.RemoveAll(cp)
	var out ForkOutcome
	code, timedOut, err := b.exec(ctx, &job.Request.Step, cp, job.Request.Timeouts.StepMS, job.Stdout, job.Stderr)
	if err != nil {
		return out, err
	}
	out.Result.StepExit = &code
	if timedOut {
		out.Result.TimedOut = "step"
		return out, nil
	}
	if code != 0 {
		return out, nil
	}
	if v := job.Request.Verify; v != nil {
		vcode, timedOut, err := b.exec(ctx, v, cp, job.Request.Timeouts.VerifyMS, job.Stdout, job.Stderr)
		if err != nil {
			return out, err
		}
		out.Result.VerifyExit = &vcode
		if timedOut {
			out.Result.TimedOut = "verify"
			return out, nil
		}
		if vcode != 0 {
			return out, nil
		}
	}
	old := src + ".old-" + job.Op
	if err := os.Rename(src, old); err != nil {
		return out, err
	}
	if err := os.Rename(cp, src); err != nil {
		return out, err
	}
	out.Kept = true
	return out, os.RemoveAll(old)
}

func (b *dirBackend) Checkpoint(ctx context.Context, job CheckpointJob) (CheckpointInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	list := b.checks[job.Sandbox]
	id := fmt.Sprintf("ck-%d", len(list)+1)
	if err := copyTree(filepath.Join(b.root, job.Sandbox, id), b.dir(job.Sandbox)); err != nil {
		return CheckpointInfo{}, err
	}
	info := CheckpointInfo{ID: id, Label: job.Request.Label, Op: job.Request.After, Created: time.Now().UTC()}
	if len(list) > 0 {
		info.Parent = list[len(list)-1].ID
	}
	list = append(list, info)
	if k := job.Request.Retention.KeepLast; k > 0 && len(list) > k {
		for _, c := range list[:len(list)-k] {
			os.RemoveAll(filepath.Join(b.root, job.Sandbox, c.ID))
		}
		list = list[len(list)-k:]
	}
	b.checks[job.Sandbox] = list
	return info, nil
}

func (b *dirBackend) List(ctx context.Context, sandbox string) ([]CheckpointInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	list := append([]CheckpointInfo(nil), b.checks[sandbox]...)
	sort.Slice(list, func(i, j int) bool { return list[i].Created.Before(list[j].Created) })
	return list, nil
}

func (b *dirBackend) Restore(ctx context.Context, job RestoreJob) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.checks[job.Sandbox] {
		if c.ID == job.Request.Checkpoint {
			src := b.dir(job.Sandbox)
			if err := os.RemoveAll(src); err != nil {
				return err
			}
			return copyTree(src, filepath.Join(b.root, job.Sandbox, c.ID))
		}
	}
	return fmt.Errorf("checkpoint %s: %w", job.Request.Checkpoint, ErrNotFound)
}

// blockBackend's ForkAndRun writes a line and waits for ctx or release.
type blockBackend struct {
	dirBackend
	started chan string
	release chan struct{}
}

func (b *blockBackend) ForkAndRun(ctx context.Context, job ForkJob) (ForkOutcome, error) {
	fmt.Fprintln(job.Stdout, "started")
	b.started <- job.Op
	select {
	case <-ctx.Done():
		return ForkOutcome{}, ctx.Err()
	case <-b.release:
		code := 0
		return ForkOutcome{Result: Result{StepExit: &code}, Kept: true}, nil
	}
}
