package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/hostlink"
)

// providerDaemon starts undohost with the provider backend driven by
// testdata/provider.sh, whose sandboxes are directories under root.
func providerDaemon(t *testing.T, extra string) (d *daemon, c *hostlink.Client, root string) {
	script, err := filepath.Abs("testdata/provider.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := shortDir(t)
	root = filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "sandboxes", "default"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "undohost.yaml")
	cfg := fmt.Sprintf(`backend: provider
provider:
  vars: {script: %q, root: %q}
  fork:     ["{{.Vars.script}}", "{{.Vars.root}}", fork, "{{.Sandbox}}", "{{.Op}}"]
  network:  ["{{.Vars.script}}", "{{.Vars.root}}", network, "{{.Copy}}", "{{.Network}}", "{{.Allow}}"]
  exec:     ["{{.Vars.script}}", "{{.Vars.root}}", exec, "{{.Copy}}", "{{.Argv}}"]
  promote:  ["{{.Vars.script}}", "{{.Vars.root}}", promote, "{{.Sandbox}}", "{{.Copy}}"]
  delete:   ["{{.Vars.script}}", "{{.Vars.root}}", delete, "{{.Copy}}"]
  snapshot: ["{{.Vars.script}}", "{{.Vars.root}}", snapshot, "{{.Sandbox}}", "{{.Snapshot}}"]
  restore:  ["{{.Vars.script}}", "{{.Vars.root}}", restore, "{{.Sandbox}}", "{{.Snapshot}}"]
  delete_snapshot: ["{{.Vars.script}}", "{{.Vars.root}}", delete-snapshot, "{{.Snapshot}}"]
%s`, script, root, extra)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "v.sock")
	d = newDaemon(t, t.TempDir(), "--listen", "unix://"+sock, "--config", conf)
	return d, d.client("default", "unix://"+sock), root
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

func TestProvider(t *testing.T) {
	d, c, root := providerDaemon(t, "  keep_last: 2\n")
	cx := ctx(t)
	sb := filepath.Join(root, "sandboxes", "default")
	copies := filepath.Join(root, "copies")

	// Kept: the network is cut before the step runs, the step's file is
	// in the sandbox after the promotion, and no copy is left.
	var stdout, stderr bytes.Buffer
	op, err := c.Run(cx, hostlink.ForkRun{Key: "one", Network: hostlink.Network{Mode: "off"},
		Step:   hostlink.Command{Shell: "cat .network; echo v1 > app; echo warn >&2", Cwd: "/"},
		Verify: &hostlink.Command{Argv: []string{"grep", "-q", "v1", "app"}, Cwd: "/"}}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != hostlink.StateKept || stdout.String() != "off\n" || stderr.String() != "warn\n" {
		t.Fatalf("kept: %+v %+v %q %q", op, op.Error, stdout.String(), stderr.String())
	}
	if got := readFile(t, filepath.Join(sb, "app")); got != "v1\n" {
		t.Errorf("sandbox after the kept step: app = %q", got)
	}
	if ents, _ := os.ReadDir(copies); len(ents) != 0 {
		t.Errorf("copies left: %v", ents)
	}

	a, err := c.Checkpoint(cx, hostlink.Checkpoint{Key: "cp1", After: op.ID, Label: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	cpop, err := c.Status(cx, a.Op, 10*time.Second)
	if err != nil || cpop.State != hostlink.StateDone {
		t.Fatalf("checkpoint: %+v %v", cpop, err)
	}
	cp1 := cpop.Result.Checkpoint

	// Discarded by verify: the sandbox keeps v1, the copy is deleted.
	stdout.Reset()
	op, err = c.Run(cx, hostlink.ForkRun{Key: "two", Network: hostlink.Network{Mode: "allow", Allow: []string{"deb.debian.org:443"}},
		Step:   hostlink.Command{Shell: "cat .network; echo v2 > app", Cwd: "/"},
		Verify: &hostlink.Command{Shell: "exit 4", Cwd: "/"}}, &stdout, nil)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != hostlink.StateDiscarded || exitOf(op.Result.VerifyExit) != 4 || stdout.String() != "allow\n" {
		t.Fatalf("discarded: %+v %q", op, stdout.String())
	}
	if got := readFile(t, filepath.Join(sb, "app")); got != "v1\n" {
		t.Errorf("sandbox after the discarded step: app = %q", got)
	}
	if ents, _ := os.ReadDir(copies); len(ents) != 0 {
		t.Errorf("copies left: %v", ents)
	}

	// A step that runs out of its budget is a result.
	op, err = c.Run(cx, hostlink.ForkRun{Key: "slow", Network: hostlink.Network{Mode: "off"},
		Step: hostlink.Command{Argv: []string{"sleep", "30"}, Cwd: "/"}, Timeouts: hostlink.Timeouts{StepMS: 300}}, nil, nil)
	if err != nil || op.State != hostlink.StateDiscarded || op.Result.TimedOut != "step" {
		t.Fatalf("timed out: %+v %v", op, err)
	}

	// Kept again, then back to cp1.
	op, err = c.Run(cx, hostlink.ForkRun{Key: "three", Network: hostlink.Network{Mode: "off"},
		Step: hostlink.Command{Shell: "echo v3 > app; touch new", Cwd: "/"}}, nil, nil)
	if err != nil || op.State != hostlink.StateKept || readFile(t, filepath.Join(sb, "app")) != "v3\n" {
		t.Fatalf("third step: %+v %v", op, err)
	}
	r, err := c.Restore(cx, hostlink.Restore{Key: "back", Checkpoint: cp1})
	if err != nil {
		t.Fatal(err)
	}
	if rop, err := c.Status(cx, r.Op, 10*time.Second); err != nil || rop.State != hostlink.StateDone {
		t.Fatalf("restore: %+v %v", rop, err)
	}
	if got := readFile(t, filepath.Join(sb, "app")); got != "v1\n" {
		t.Errorf("after restore: app = %q", got)
	}
	if _, err := os.Stat(filepath.Join(sb, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after restore: new exists")
	}

	// Retention: keep_last 2 drops the oldest snapshot, and its files.
	for _, k := range []string{"cp2", "cp3"} {
		a, err := c.Checkpoint(cx, hostlink.Checkpoint{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		c.Status(cx, a.Op, 10*time.Second)
	}
	list, err := c.Checkpoints(cx)
	if err != nil || len(list) != 2 || list[0].ID == cp1 || list[1].Parent != list[0].ID || list[0].Size <= 0 || list[0].Generation != 1 {
		t.Fatalf("checkpoints after retention: %+v %v", list, err)
	}
	if _, err := os.Stat(filepath.Join(root, "snapshots", cp1)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dropped checkpoint's snapshot still there")
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// A provider whose command fails makes the operation failed with code
// backend, and the copy is still deleted.
func TestProviderCommandFails(t *testing.T) {
	_, c, root := providerDaemon(t, "")
	cx := ctx(t)
	os.WriteFile(filepath.Join(root, "sandboxes", "default", "x"), nil, 0o644)
	r, err := c.Restore(cx, hostlink.Restore{Key: "r", Checkpoint: "cp-nosuch"})
	if err != nil {
		t.Fatal(err)
	}
	op, err := c.Status(cx, r.Op, 10*time.Second)
	if err != nil || op.State != hostlink.StateFailed || op.Error.Code != hostlink.CodeNotFound {
		t.Fatalf("unknown checkpoint: %+v %v", op, err)
	}
	// promote fails.
	sb := filepath.Join(root, "sandboxes", "default")
	op, err = c.Run(cx, hostlink.ForkRun{Key: "p", Network: hostlink.Network{Mode: "off"},
		Step: hostlink.Command{Shell: "echo changed > x; touch fail-promote", Cwd: "/"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if op.State != hostlink.StateFailed || op.Error == nil || op.Error.Code != hostlink.CodeBackend || !strings.Contains(op.Error.Message, "promote refused") {
		t.Fatalf("failing promote: %+v %+v", op, op.Error)
	}
	if got := readFile(t, filepath.Join(sb, "x")); got != "" {
		t.Errorf("sandbox changed: %q", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "copies")); len(ents) != 0 {
		t.Errorf("copies left: %v", ents)
	}
}

// With a notify command, a promotion starts a new generation: the VM is
// told (WHO_YOU_ARE on notify's stdin), the token file is rewritten, and
// the old token is refused as stale.
func TestProviderNotify(t *testing.T) {
	d, c, root := providerDaemon(t, `  notify: [sh, -c, 'cat > "$0/whoyouare.json"', "{{.Vars.root}}"]`+"\n")
	cx := ctx(t)
	a, err := c.ForkRun(cx, hostlink.ForkRun{Key: "n", Network: hostlink.Network{Mode: "off"},
		Step: hostlink.Command{Shell: "true", Cwd: "/"}})
	if err != nil {
		t.Fatal(err)
	}
	var op hostlink.Op
	for !op.State.Final() {
		// The token changes at the promotion: read it again each time.
		op, err = d.client("default", "unix://"+filepath.Join(filepath.Dir(root), "v.sock")).Status(cx, a.Op, 500*time.Millisecond)
		if err != nil && !errors.Is(err, &hostlink.Error{Code: hostlink.CodeStaleGeneration}) {
			t.Fatal(err)
		}
	}
	if op.State != hostlink.StateKept {
		t.Fatalf("%+v %+v", op, op.Error)
	}
	var w hostlink.WhoYouAre
	b, err := os.ReadFile(filepath.Join(root, "whoyouare.json"))
	if err == nil {
		err = json.Unmarshal(b, &w)
	}
	tok := strings.TrimSpace(readFile(t, filepath.Join(d.state, "tokens", "default")))
	if err != nil || w.Generation != 2 || w.Role != hostlink.RolePrimary || w.Op != a.Op || w.Token != tok || len(w.Entropy) < 32 {
		t.Fatalf("who you are: %+v %v", w, err)
	}
	if _, err := c.Hello(cx); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeStaleGeneration}) {
		t.Errorf("old token: %v", err)
	}
}

// undohost killed while a step runs in a provider's copy: after the
// restart the operation is abandoned, the copy deleted, the sandbox as it
// was.
func TestProviderRestartMidOperation(t *testing.T) {
	d, c, root := providerDaemon(t, "")
	cx := ctx(t)
	a, err := c.ForkRun(cx, hostlink.ForkRun{Key: "slow", Network: hostlink.Network{Mode: "off"},
		Step: hostlink.Command{Shell: "echo changed > x; echo started; exec sleep 60", Cwd: "/"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ch, err := c.Output(cx, hostlink.OutputRequest{Op: a.Op, WaitMS: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ch.Stdout), "started") {
			break
		}
		if ch.End {
			t.Fatalf("ended: %+v", ch)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "copies")); len(ents) != 1 {
		t.Fatalf("copies while the step runs: %v", ents)
	}
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client("default", "unix://"+filepath.Join(filepath.Dir(root), "v.sock"))
	op, err := c.Status(cx, a.Op, 0)
	if err != nil || op.State != hostlink.StateAbandoned || op.Error == nil || op.Error.Code != hostlink.CodeHostRestarted {
		t.Fatalf("after the restart: %+v %v", op, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "copies")); len(ents) != 0 {
		t.Errorf("copies left after the restart: %v", ents)
	}
	if got := readFile(t, filepath.Join(root, "sandboxes", "default", "x")); got != "" {
		t.Errorf("sandbox changed: %q", got)
	}
}
