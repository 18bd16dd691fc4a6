package undohost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/atomicfile"
)

// Data is what a provider's command templates can use. Lists (Argv, Env,
// Allow) are spliced in as separate arguments when an element is exactly
// "{{.Argv}}"; elsewhere use {{join .Allow ","}}.
type Data struct {
	Sandbox  string // the sandbox's name, from its listener
	Op       string // the operation's id
	Copy     string // the copy's id, as the fork command printed it; for notify, the copy to tell ("": the sandbox's VM)
	Snapshot string // the checkpoint's id (snapshot, restore, delete_snapshot)
	Label    string // the checkpoint's label
	Network  string // "off" or "allow"
	Allow    []string
	Argv     []string // the command to run in the copy (a shell step is /bin/sh -c STEP)
	Cwd      string
	Env      []string          // KEY=VALUE
	Phase    string            // "step" or "verify", for exec
	Vars     map[string]string // the config's vars
	State    string            // the provider's directory in the state directory
}

// Provider is the backend whose operations are commands of the
// configuration file (docs/undohost.md): fork, network, exec, promote,
// delete, snapshot, restore. Every command is an argv rendered from a
// template; it must exit 0 on success, except exec, whose exit status is
// the status of the command it ran in the copy.
type Provider struct {
	cfg     ProviderConfig
	tmpl    map[string]argvTemplate
	state   string
	log     *slog.Logger
	catalog catalog
	// advance starts a new generation of a sandbox (hostlink.Server.Advance,
	// and the token file); set by Run. See notify.go.
	advance func(name string, role hostlink.Role, cause string) (hostlink.WhoYouAre, error)
}

// NewProvider returns the provider backend of cfg, keeping its records in
// dir.
func NewProvider(cfg ProviderConfig, dir string, log *slog.Logger) (*Provider, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.KeepLast <= 0 {
		cfg.KeepLast = 32
	}
	p := &Provider{cfg: cfg, tmpl: map[string]argvTemplate{}, state: dir, log: log, catalog: catalog{dir: dir}}
	for name, argv := range map[string][]string{"fork": cfg.Fork, "network": cfg.Network, "exec": cfg.Exec,
		"promote": cfg.Promote, "delete": cfg.Delete, "snapshot": cfg.Snapshot, "restore": cfg.Restore,
		"delete_snapshot": cfg.DeleteSnapshot, "notify": cfg.Notify} {
		t, err := compile(argv)
		if err != nil {
			return nil, err
		}
		p.tmpl[name] = t
	}
	return p, nil
}

// commandError is a provider command that failed.
type commandError struct {
	name   string
	status int
	stderr string
}

func (e *commandError) Error() string {
	msg := fmt.Sprintf("provider command %s exited %d", e.name, e.status)
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

// run runs the named command for d. Stdout goes to stdout when set, and
// is returned otherwise; it returns the exit status, and an error only when
// the command could not be run at all, or (unless passStatus) exited
// non-zero.
func (p *Provider) run(ctx context.Context, name string, d *Data, cmdIO cmdIO) (string, int, error) {
	argv, err := p.tmpl[name].render(d)
	if err != nil {
		return "", -1, fmt.Errorf("provider command %s: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// Its own process group, so that a budget kills a wrapper's children
	// too; and killed if undohost dies, so that a step does not outlive
	// the daemon that would delete its copy.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	tail := &tailBuffer{max: 2048}
	cmd.Stdin = cmdIO.stdin
	cmd.Stdout, cmd.Stderr = &out, tail
	if cmdIO.stdout != nil {
		cmd.Stdout = cmdIO.stdout
	}
	if cmdIO.stderr != nil {
		cmd.Stderr = io.MultiWriter(cmdIO.stderr, tail)
	}
	start := time.Now()
	err = cmd.Run()
	status := -1
	if ps := cmd.ProcessState; ps != nil {
		status = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = 128 + int(ws.Signal())
		}
	}
	p.log.Debug("provider command", "name", name, "argv", argv, "status", status, "took", time.Since(start))
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return "", -1, fmt.Errorf("provider command %s: %w", name, err)
	}
	if status != 0 && !cmdIO.passStatus {
		if ctx.Err() != nil {
			return "", status, fmt.Errorf("provider command %s: %w", name, ctx.Err())
		}
		return "", status, &commandError{name: name, status: status, stderr: strings.TrimSpace(tail.String())}
	}
	return out.String(), status, nil
}

type cmdIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	passStatus     bool // exec: the status is the result, not an error
}

func (p *Provider) data(sandbox, op string) *Data {
	return &Data{Sandbox: sandbox, Op: op, Vars: p.cfg.Vars, State: p.state}
}

func budget(ctx context.Context, ms int64) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

// ForkAndRun forks, sets the copy's network, runs step and verify in the
// copy, and promotes it or deletes it.
func (p *Provider) ForkAndRun(ctx context.Context, job hostlink.ForkJob) (res hostlink.ForkOutcome, err error) {
	req := job.Request
	d := p.data(job.Sandbox, job.Op)
	cctx, cancel := budget(ctx, req.Timeouts.CaptureMS)
	out, _, err := p.run(cctx, "fork", d, cmdIO{})
	cancel()
	if err != nil {
		return res, err
	}
	d.Copy = firstLine(out)
	if d.Copy == "" {
		return res, errors.New("provider command fork printed no copy id")
	}
	// The copy is on record until it is deleted or promoted, so that a
	// restarted undohost deletes what a killed one left (Recover).
	if err := p.mark(job.Op, copyMark{Sandbox: job.Sandbox, Copy: d.Copy}); err != nil {
		p.log.Error("record copy", "copy", d.Copy, "err", err)
	}
	promoted := false
	defer func() {
		if promoted {
			return
		}
		// The copy goes whatever happened, even after a cancel: a fresh
		// budget, not ctx.
		dctx, cancel := budget(context.Background(), req.Timeouts.PromoteMS)
		defer cancel()
		if _, _, derr := p.run(dctx, "delete", d, cmdIO{}); derr != nil {
			p.log.Error("delete copy", "sandbox", job.Sandbox, "copy", d.Copy, "err", derr)
			if err == nil {
				err = derr
			}
			return
		}
		p.unmark(job.Op)
	}()
	// The fork captured the original and resumed it, and the copy runs
	// from that capture: each is told who it is, the original now, the
	// copy once its network is cut, before its step runs.
	cw, err := p.forked(ctx, job.Sandbox, job.Op)
	if err != nil {
		return res, err
	}
	d.Network, d.Allow = req.Network.Mode, req.Network.Allow
	nctx, cancel := budget(ctx, req.Timeouts.CaptureMS)
	_, _, err = p.run(nctx, "network", d, cmdIO{})
	cancel()
	if err != nil {
		return res, err
	}
	if cw.Generation != 0 {
		cw.Network = req.Network.Mode
		if err := p.tell(ctx, job.Sandbox, d.Copy, cw); err != nil {
			return res, err
		}
	}
	status, timedOut, err := p.exec(ctx, d, "step", req.Step, req.Timeouts.StepMS, job)
	if err != nil {
		return res, err
	}
	res.Result.StepExit = &status
	if timedOut {
		res.Result.TimedOut = "step"
	}
	pass := status == 0 && !timedOut || req.KeepFailed
	if pass && req.Verify != nil && !req.KeepFailed {
		vs, vto, err := p.exec(ctx, d, "verify", *req.Verify, req.Timeouts.VerifyMS, job)
		if err != nil {
			return res, err
		}
		res.Result.VerifyExit = &vs
		if vto {
			res.Result.TimedOut = "verify"
		}
		pass = vs == 0 && !vto
	}
	if !pass {
		return res, nil
	}
	pctx, cancel := budget(ctx, req.Timeouts.PromoteMS)
	defer cancel()
	if err := p.mark(job.Op, copyMark{Sandbox: job.Sandbox, Copy: d.Copy, Promoting: true}); err != nil {
		return res, err
	}
	if _, _, err := p.run(pctx, "promote", d, cmdIO{}); err != nil {
		return res, err
	}
	// The copy is the sandbox now: nothing is left to delete.
	promoted, res.Kept = true, true
	p.unmark(job.Op)
	return res, p.resumed(ctx, job.Sandbox, pending{Op: job.Op, Role: hostlink.RolePrimary, Parent: cw.Generation})
}

// exec runs one command in the copy within its budget.
func (p *Provider) exec(ctx context.Context, d *Data, phase string, c hostlink.Command, ms int64, job hostlink.ForkJob) (int, bool, error) {
	d.Phase, d.Argv, d.Cwd, d.Env = phase, argvOf(c), cwdOf(c), c.Env
	ectx, cancel := budget(ctx, ms)
	defer cancel()
	_, status, err := p.run(ectx, "exec", d, cmdIO{stdout: job.Stdout, stderr: job.Stderr, passStatus: true})
	if err != nil {
		return 0, false, err
	}
	if ectx.Err() != nil && ctx.Err() == nil {
		return status, true, nil
	}
	if ctx.Err() != nil {
		return status, false, ctx.Err()
	}
	return status, false, nil
}

// Checkpoint runs the snapshot command; its stdout's first line, if a
// number, is the snapshot's size in bytes. The capture paused the VM,
// which is then told who it is.
func (p *Provider) Checkpoint(ctx context.Context, job hostlink.CheckpointJob) (hostlink.CheckpointInfo, error) {
	info, captured, err := p.checkpoint(ctx, job)
	if captured {
		if nerr := p.resumed(ctx, job.Sandbox, pending{Op: job.Op, Role: hostlink.RolePrimary}); err == nil {
			err = nerr
		}
	}
	return info, err
}

// checkpoint takes the snapshot and records it; captured reports that the
// snapshot command succeeded.
func (p *Provider) checkpoint(ctx context.Context, job hostlink.CheckpointJob) (_ hostlink.CheckpointInfo, captured bool, _ error) {
	p.catalog.mu.Lock()
	defer p.catalog.mu.Unlock()
	b, err := p.catalog.read(job.Sandbox)
	if err != nil {
		return hostlink.CheckpointInfo{}, false, err
	}
	cp := p.catalog.newCheckpoint(b, job, time.Duration(p.cfg.TTL))
	d := p.data(job.Sandbox, job.Op)
	d.Snapshot, d.Label = cp.ID, cp.Label
	out, _, err := p.run(ctx, "snapshot", d, cmdIO{})
	if err != nil {
		return hostlink.CheckpointInfo{}, false, err
	}
	if n, err := strconv.ParseInt(firstLine(out), 10, 64); err == nil {
		cp.Size = n
	}
	b.Checkpoints = append(b.Checkpoints, cp)
	dropped := prune(&b, time.Now(), keepLastOr(job.Request.Retention.KeepLast, p.cfg.KeepLast))
	if err := p.catalog.write(job.Sandbox, b); err != nil {
		return hostlink.CheckpointInfo{}, true, err
	}
	p.dropSnapshots(ctx, job.Sandbox, dropped)
	return cp.CheckpointInfo, true, nil
}

// dropSnapshots deletes the provider's snapshots of dropped checkpoints,
// when it has a delete_snapshot command. c.mu is held.
func (p *Provider) dropSnapshots(ctx context.Context, sandbox string, dropped []checkpoint) {
	if len(p.cfg.DeleteSnapshot) == 0 {
		return
	}
	for _, cp := range dropped {
		d := p.data(sandbox, "")
		d.Snapshot = cp.ID
		if _, _, err := p.run(ctx, "delete_snapshot", d, cmdIO{}); err != nil {
			p.log.Warn("delete snapshot", "sandbox", sandbox, "checkpoint", cp.ID, "err", err)
		}
	}
}

// List returns the sandbox's checkpoints that have not expired.
func (p *Provider) List(ctx context.Context, sandbox string) ([]hostlink.CheckpointInfo, error) {
	p.catalog.mu.Lock()
	defer p.catalog.mu.Unlock()
	b, err := p.catalog.read(sandbox)
	if err != nil {
		return nil, err
	}
	if dropped := prune(&b, time.Now(), 0); len(dropped) > 0 {
		if err := p.catalog.write(sandbox, b); err != nil {
			return nil, err
		}
		p.dropSnapshots(ctx, sandbox, dropped)
	}
	return infos(b), nil
}

// Restore runs the restore command for one of the sandbox's checkpoints.
// Later checkpoints are kept: a snapshot chain can be walked both ways.
func (p *Provider) Restore(ctx context.Context, job hostlink.RestoreJob) error {
	p.catalog.mu.Lock()
	b, err := p.catalog.read(job.Sandbox)
	p.catalog.mu.Unlock()
	if err != nil {
		return err
	}
	i, ok := find(b, job.Request.Checkpoint)
	if !ok {
		return fmt.Errorf("checkpoint %s: %w", job.Request.Checkpoint, hostlink.ErrNotFound)
	}
	d := p.data(job.Sandbox, job.Op)
	d.Snapshot = job.Request.Checkpoint
	if _, _, err := p.run(ctx, "restore", d, cmdIO{}); err != nil {
		return err
	}
	// The VM comes from the checkpoint's memory, of its generation.
	return p.resumed(ctx, job.Sandbox, pending{Op: job.Op, Role: hostlink.RoleRestored,
		Checkpoint: job.Request.Checkpoint, Parent: b.Checkpoints[i].Generation})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	s := bufio.NewScanner(bytes.NewReader(t.b))
	var lines []string
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	return strings.Join(lines, "; ")
}

// copyMark records a copy that exists, in <state>/provider/copies/OP.json.
type copyMark struct {
	Sandbox string `json:"sandbox"`
	Copy    string `json:"copy"`
	// Promoting: promote was started; the copy may already be the
	// sandbox, so recovery must not delete it.
	Promoting bool `json:"promoting,omitempty"`
}

func (p *Provider) markPath(op string) string { return filepath.Join(p.state, "copies", op+".json") }

func (p *Provider) mark(op string, m copyMark) error {
	if err := os.MkdirAll(filepath.Join(p.state, "copies"), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return atomicfile.Write(p.markPath(op), b, 0o600)
}

func (p *Provider) unmark(op string) { os.Remove(p.markPath(op)) }

// Recover deletes the copies that a previous undohost made and did not
// delete or promote (it was killed). A copy whose promotion had started is
// left alone and logged: it may already be the sandbox.
func (p *Provider) Recover(ctx context.Context) {
	ents, _ := os.ReadDir(filepath.Join(p.state, "copies"))
	for _, e := range ents {
		op, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		var m copyMark
		b, err := os.ReadFile(p.markPath(op))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			p.log.Warn("unreadable copy record", "file", e.Name(), "err", err)
			continue
		}
		if m.Promoting {
			p.log.Error("a promotion was cut short: check the sandbox", "sandbox", m.Sandbox, "copy", m.Copy, "op", op)
			p.unmark(op)
			continue
		}
		d := p.data(m.Sandbox, op)
		d.Copy = m.Copy
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, _, err = p.run(dctx, "delete", d, cmdIO{})
		cancel()
		if err != nil {
			p.log.Error("delete a leftover copy", "sandbox", m.Sandbox, "copy", m.Copy, "err", err)
			continue
		}
		p.log.Info("deleted a leftover copy", "sandbox", m.Sandbox, "copy", m.Copy, "op", op)
		p.unmark(op)
	}
}
