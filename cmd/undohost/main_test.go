package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/scripttest"
	"github.com/undosh/undosh/internal/undohost"
)

// bin is undohost, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == fork.InitName {
		os.Exit(fork.Init())
	}
	// The scripts run this test binary as undohost; the daemons of the
	// Go tests are a build of their own, with the race detector.
	testscript.Main(built{m}, map[string]func(){"undohost": main})
}

// built runs the tests with bin built.
type built struct{ m *testing.M }

func (b built) Run() int {
	dir, err := os.MkdirTemp("", "undohost-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "undohost")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build undohost: %v\n%s", err, out)
		return 1
	}
	return b.m.Run()
}

// TestScript runs the end-to-end scripts in testdata/script.
func TestScript(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: scripttest.Cmds(),
	})
}

// daemon is one undohost process.
type daemon struct {
	t     *testing.T
	state string
	args  []string
	cmd   *exec.Cmd
	// pids are those of every undohost started, which name the copies
	// they make (fork's copies/PID-…).
	pids []int
	// starts counts the starts its log records.
	starts int
}

// output is what undohost wrote to its stdout and stderr.
func (d *daemon) output() string {
	b, _ := os.ReadFile(filepath.Join(d.state, "stderr"))
	return string(b)
}

func newDaemon(t *testing.T, state string, args ...string) *daemon {
	d := &daemon{t: t, state: state, args: append([]string{"--state", state}, args...)}
	d.start()
	t.Cleanup(func() {
		if d.cmd != nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
	})
	return d
}

// start runs undohost and waits for its first sandbox's token file, which
// it writes once its listeners are bound.
func (d *daemon) start() {
	d.t.Helper()
	os.RemoveAll(filepath.Join(d.state, "tokens"))
	os.MkdirAll(d.state, 0o700)
	f, err := os.Create(filepath.Join(d.state, "stderr"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	d.cmd = exec.Command(bin, d.args...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.pids = append(d.pids, d.cmd.Process.Pid)
	// Started once its log says so: the VMs have been told who they are
	// and the token files are the current generation's.
	before := d.starts
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := undohost.Starts(d.state); n > before {
			d.starts = n
			return
		}
		if err := syscall.Kill(d.cmd.Process.Pid, 0); err != nil || time.Now().After(deadline) {
			d.cmd.Wait()
			d.t.Fatalf("undohost did not start: %v\n%s", err, d.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop sends sig and waits for the exit.
func (d *daemon) stop(sig syscall.Signal) error {
	d.cmd.Process.Signal(sig)
	err := d.cmd.Wait()
	d.cmd = nil
	return err
}

func (d *daemon) client(sandbox, url string) *hostlink.Client {
	d.t.Helper()
	var tok []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if tok, err = os.ReadFile(filepath.Join(d.state, "tokens", sandbox)); err == nil || time.Now().After(deadline) {
			if err != nil {
				d.t.Fatal(err)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c, err := hostlink.NewClient(url, hostlink.ClientOptions{Token: strings.TrimSpace(string(tok)), Agent: "undohost-test", RetryWindow: 20 * time.Second, PollWait: 2 * time.Second})
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "uh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func needEngine(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the local backend's tests commit steps that write /etc, which needs root")
	}
	if err := fork.Probe(); err != nil {
		t.Skipf("the local backend needs the fork engine (root, overlayfs, namespaces): %v", err)
	}
}

func random() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func forkMounts(t *testing.T, d *daemon) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "undosh-fork") {
			continue
		}
		// Other packages' tests make copies too, meanwhile.
		for _, pid := range d.pids {
			if strings.Contains(l, "/copies/"+strconv.Itoa(pid)+"-") {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// undoLeftover undoes, with fork.Undo, any commit of the machine's journal
// that put path in place and is still standing, so that a failing test
// leaves the machine clean.
func undoLeftover(t *testing.T, path string) {
	if _, err := os.Lstat(path); err != nil {
		return
	}
	dir := fork.JournalDir("/")
	recs, err := fork.List(dir)
	if err != nil {
		t.Errorf("list commits: %v", err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if !r.Committed || r.Undone {
			continue
		}
		for _, p := range r.Paths {
			if "/"+strings.TrimPrefix(p, "/") == path {
				if err := fork.Undo(dir, r.ID, true); err != nil {
					t.Errorf("undo %s: %v", r.ID, err)
				}
			}
		}
	}
	os.Remove(path)
}

func shell(s string) hostlink.Command { return hostlink.Command{Shell: s, Cwd: "/"} }

func exitOf(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func TestLocalKeptDiscardedRestored(t *testing.T) {
	needEngine(t)
	sock := filepath.Join(shortDir(t), "v.sock")
	d := newDaemon(t, t.TempDir(), "--backend", "local", "--listen", "unix://"+sock)
	c := d.client("default", "unix://"+sock)
	cx := ctx(t)

	cp0, err := c.Checkpoint(cx, hostlink.Checkpoint{Key: "cp0-" + random(), Label: "before"})
	if err != nil {
		t.Fatal(err)
	}
	op, err := c.Status(cx, cp0.Op, 10*time.Second)
	if err != nil || op.State != hostlink.StateDone || op.Result.Checkpoint == "" {
		t.Fatalf("checkpoint: %+v %v", op, err)
	}
	base := op.Result.Checkpoint

	kept := "/etc/undosh-hosttest-" + random()
	t.Cleanup(func() { undoLeftover(t, kept) })
	var stdout, stderr bytes.Buffer
	op, err = c.Run(cx, hostlink.ForkRun{Key: "k-" + random(), Network: hostlink.Network{Mode: "off"},
		Step:   shell("echo out; echo err >&2; echo hello > " + kept),
		Verify: &hostlink.Command{Argv: []string{"grep", "-q", "hello", kept}, Cwd: "/"}}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != hostlink.StateKept || exitOf(op.Result.StepExit) != 0 || exitOf(op.Result.VerifyExit) != 0 {
		t.Fatalf("kept step: %+v %+v", op, op.Error)
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("output: %q %q", stdout.String(), stderr.String())
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "hello\n" {
		t.Fatalf("kept file on the machine: %q %v", b, err)
	}

	discarded := "/etc/undosh-hosttest-" + random()
	t.Cleanup(func() { undoLeftover(t, discarded) })
	stdout.Reset()
	stderr.Reset()
	op, err = c.Run(cx, hostlink.ForkRun{Key: "d-" + random(), Network: hostlink.Network{Mode: "off"},
		Step:   shell("echo hi > " + discarded + "; echo step"),
		Verify: &hostlink.Command{Shell: "echo verify says no; exit 3", Cwd: "/"}}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != hostlink.StateDiscarded || exitOf(op.Result.StepExit) != 0 || exitOf(op.Result.VerifyExit) != 3 {
		t.Fatalf("verify failed: %+v", op)
	}
	if stdout.String() != "step\n" || stderr.String() != "verify says no\n" {
		t.Errorf("output: %q %q", stdout.String(), stderr.String())
	}
	if _, err := os.Lstat(discarded); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("discarded step's file is on the machine: %v", err)
	}

	stdout.Reset()
	op, err = c.Run(cx, hostlink.ForkRun{Key: "f-" + random(), Network: hostlink.Network{Mode: "off"},
		Step: shell("printf 'a\\0b'; exit 7")}, &stdout, nil)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != hostlink.StateDiscarded || exitOf(op.Result.StepExit) != 7 || op.Result.VerifyExit != nil || stdout.String() != "a\x00b" {
		t.Fatalf("failed step: %+v %q", op, stdout.String())
	}

	// The engine's copies are offline only: an allowlist is refused, not
	// widened.
	acc, err := c.ForkRun(cx, hostlink.ForkRun{Key: "n-" + random(), Network: hostlink.Network{Mode: "allow", Allow: []string{"127.0.0.1:80"}}, Step: shell("true")})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = c.Status(cx, acc.Op, 10*time.Second); err != nil || op.State != hostlink.StateFailed || op.Error == nil || op.Error.Code != hostlink.CodeBackend {
		t.Fatalf("network allow: %+v %v", op, err)
	}

	list, err := c.Checkpoints(cx)
	if err != nil || len(list) != 1 || list[0].ID != base {
		t.Fatalf("checkpoints: %+v %v", list, err)
	}
	a, err := c.Restore(cx, hostlink.Restore{Key: "r-" + random(), Checkpoint: base})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = c.Status(cx, a.Op, 10*time.Second); err != nil || op.State != hostlink.StateDone {
		t.Fatalf("restore: %+v %+v %v", op, op.Error, err)
	}
	if _, err := os.Lstat(kept); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after going back to %s, %s is still there: %v", base, kept, err)
	}
	a, err = c.Restore(cx, hostlink.Restore{Key: "r-" + random(), Checkpoint: "cp-nosuch"})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = c.Status(cx, a.Op, 10*time.Second); err != nil || op.State != hostlink.StateFailed || op.Error == nil || op.Error.Code != hostlink.CodeNotFound {
		t.Fatalf("restore of an unknown checkpoint: %+v %v", op, err)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.output())
	}
	if d.output() != "" {
		t.Errorf("undohost wrote to its stderr: %s", d.output())
	}
}

// startSlow submits a step that prints "started" and sleeps, and returns
// once it printed.
func startSlow(t *testing.T, c *hostlink.Client) string {
	cx := ctx(t)
	a, err := c.ForkRun(cx, hostlink.ForkRun{Key: "slow-" + random(), Network: hostlink.Network{Mode: "off"}, Step: shell("echo started; exec sleep 60")})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ch, err := c.Output(cx, hostlink.OutputRequest{Op: a.Op, WaitMS: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ch.Stdout), "started") {
			return a.Op
		}
		if ch.End {
			t.Fatalf("slow step ended: %+v", ch)
		}
	}
}

func TestLocalRestartMidOperation(t *testing.T) {
	needEngine(t)
	sock := filepath.Join(shortDir(t), "v.sock")
	d := newDaemon(t, t.TempDir(), "--backend", "local", "--listen", "unix://"+sock)
	c := d.client("default", "unix://"+sock)
	id := startSlow(t, c)
	if len(forkMounts(t, d)) == 0 {
		t.Log("no undosh-fork mount seen while the step runs")
	}
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client("default", "unix://"+sock)
	op, err := c.Status(ctx(t), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != hostlink.StateAbandoned || op.Error == nil || op.Error.Code != hostlink.CodeHostRestarted {
		t.Fatalf("after a restart: %+v %+v", op, op.Error)
	}
	if m := forkMounts(t, d); len(m) > 0 {
		t.Errorf("copies left mounted after the restart:\n%s", strings.Join(m, "\n"))
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

func TestLocalSIGTERM(t *testing.T) {
	needEngine(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "v.sock")
	conf := filepath.Join(dir, "undohost.yaml")
	if err := os.WriteFile(conf, []byte("grace: 100ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDaemon(t, t.TempDir(), "--backend", "local", "--listen", "unix://"+sock, "--config", conf)
	c := d.client("default", "unix://"+sock)
	id := startSlow(t, c)
	start := time.Now()
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: exit %v\n%s", err, d.output())
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("stopping took %v", el)
	}
	if m := forkMounts(t, d); len(m) > 0 {
		t.Errorf("copies left mounted after SIGTERM:\n%s", strings.Join(m, "\n"))
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	d.start()
	op, err := d.client("default", "unix://"+sock).Status(ctx(t), id, 0)
	if err != nil || op.State != hostlink.StateAbandoned {
		t.Fatalf("after SIGTERM and a start: %+v %v", op, err)
	}
}

func TestLocalTwoListeners(t *testing.T) {
	needEngine(t)
	dir := shortDir(t)
	conf := filepath.Join(dir, "undohost.yaml")
	cfg := fmt.Sprintf("sandboxes:\n  - {name: a, listen: \"unix://%s/a.sock\"}\n  - {name: b, listen: \"unix://%s/b.sock\"}\n", dir, dir)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDaemon(t, t.TempDir(), "--backend", "local", "--config", conf)
	a := d.client("a", "unix://"+dir+"/a.sock")
	b := d.client("b", "unix://"+dir+"/b.sock")
	cx := ctx(t)
	op, err := a.Run(cx, hostlink.ForkRun{Key: "same-key", Network: hostlink.Network{Mode: "off"}, Step: shell("true")}, nil, nil)
	if err != nil || op.State != hostlink.StateKept {
		t.Fatalf("a's step: %+v %v", op, err)
	}
	if w, err := b.Hello(cx); err != nil || w.Sandbox != "b" {
		t.Fatalf("b's hello: %+v %v", w, err)
	}
	if _, err := b.Status(cx, op.ID, 0); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeNotFound}) {
		t.Errorf("b sees a's operation: %v", err)
	}
	if _, err := b.Output(cx, hostlink.OutputRequest{Op: op.ID}); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeNotFound}) {
		t.Errorf("b reads a's output: %v", err)
	}
	if _, err := b.Cancel(cx, op.ID); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeNotFound}) {
		t.Errorf("b cancels a's operation: %v", err)
	}
	// The same key in b is b's own: a new operation, not a's replayed.
	acc, err := b.ForkRun(cx, hostlink.ForkRun{Key: "same-key", Network: hostlink.Network{Mode: "off"}, Step: shell("true")})
	if err != nil || acc.Replayed || acc.Op == op.ID {
		t.Errorf("b's submission with a's key: %+v %v", acc, err)
	}
	b.Status(cx, acc.Op, 30*time.Second)
	// a's token on b's listener is nobody's.
	tokA, _ := os.ReadFile(filepath.Join(d.state, "tokens", "a"))
	x, _ := hostlink.NewClient("unix://"+dir+"/b.sock", hostlink.ClientOptions{Token: strings.TrimSpace(string(tokA)), RetryWindow: time.Second})
	if _, err := x.Hello(cx); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeUnauthorized}) {
		t.Errorf("a's token on b's listener: %v", err)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// Checkpoints are positions in the sandbox's kept steps: going back to one
// undoes the steps kept after it, last first, and only those.
func TestLocalCheckpointChain(t *testing.T) {
	needEngine(t)
	sock := filepath.Join(shortDir(t), "v.sock")
	d := newDaemon(t, t.TempDir(), "--backend", "local", "--listen", "unix://"+sock)
	c := d.client("default", "unix://"+sock)
	cx := ctx(t)
	checkpoint := func(label string) string {
		a, err := c.Checkpoint(cx, hostlink.Checkpoint{Key: label + "-" + random(), Label: label})
		if err != nil {
			t.Fatal(err)
		}
		op, err := c.Status(cx, a.Op, 10*time.Second)
		if err != nil || op.State != hostlink.StateDone {
			t.Fatalf("checkpoint %s: %+v %v", label, op, err)
		}
		return op.Result.Checkpoint
	}
	step := func(path string) {
		t.Cleanup(func() { undoLeftover(t, path) })
		op, err := c.Run(cx, hostlink.ForkRun{Key: "s-" + random(), Network: hostlink.Network{Mode: "off"}, Step: shell("echo x > " + path)}, nil, nil)
		if err != nil || op.State != hostlink.StateKept {
			t.Fatalf("step %s: %+v %v", path, op, err)
		}
	}
	restore := func(cp string) {
		a, err := c.Restore(cx, hostlink.Restore{Key: "r-" + random(), Checkpoint: cp})
		if err != nil {
			t.Fatal(err)
		}
		if op, err := c.Status(cx, a.Op, 10*time.Second); err != nil || op.State != hostlink.StateDone {
			t.Fatalf("restore %s: %+v %+v %v", cp, op, op.Error, err)
		}
	}
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	a, b := "/etc/undosh-hosttest-"+random(), "/etc/undosh-hosttest-"+random()
	cp0 := checkpoint("zero")
	step(a)
	cp1 := checkpoint("one")
	step(b)
	checkpoint("two")
	restore(cp1)
	if !exists(a) || exists(b) {
		t.Fatalf("back to one: a %v, b %v", exists(a), exists(b))
	}
	list, err := c.Checkpoints(cx)
	if err != nil || len(list) != 2 || list[0].ID != cp0 || list[1].ID != cp1 || list[1].Parent != cp0 || list[1].Generation != 1 {
		t.Fatalf("checkpoints after going back to one: %+v %v", list, err)
	}
	restore(cp0)
	if exists(a) {
		t.Fatal("back to zero: a is still there")
	}
	d.stop(syscall.SIGTERM)
}
