package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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

// notifyConf is a notify command that tells the copy named by .Copy, or
// the sandbox's VM when it is empty: testdata/provider.sh appends the
// message to ROOT/notified.
const notifyConf = `  notify:   ["{{.Vars.script}}", "{{.Vars.root}}", notify, "{{.Sandbox}}", "{{.Copy}}"]` + "\n"

// providerCall is one line of testdata/provider.sh's ROOT/calls.
type providerCall struct {
	at   time.Time
	args []string
}

func providerCalls(t *testing.T, root string) []providerCall {
	t.Helper()
	var calls []providerCall
	for _, l := range strings.Split(readFile(t, filepath.Join(root, "calls")), "\n") {
		f := strings.Fields(l)
		sec, nsec, ok := strings.Cut(f0(f), ".")
		s, err1 := strconv.ParseInt(sec, 10, 64)
		n, err2 := strconv.ParseInt(nsec, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue // a later line of a step with newlines
		}
		calls = append(calls, providerCall{at: time.Unix(s, n), args: f[1:]})
	}
	return calls
}

func f0(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// notice is one WHO_YOU_ARE that testdata/provider.sh delivered.
type notice struct {
	to string // the copy, or the sandbox
	w  hostlink.WhoYouAre
}

func notices(t *testing.T, root string) []notice {
	t.Helper()
	var out []notice
	for _, l := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(root, "notified"))), "\n") {
		if l == "" {
			continue
		}
		to, msg, _ := strings.Cut(l, " ")
		n := notice{to: to}
		if err := json.Unmarshal([]byte(msg), &n.w); err != nil {
			t.Fatalf("notified %q: %v", l, err)
		}
		out = append(out, n)
	}
	return out
}

// told is what a notice says, but for its token, entropy and time.
type told struct {
	To                 string
	Role               hostlink.Role
	Generation, Parent uint64
	Op, Checkpoint     string
	Network            string
}

func toldOf(ns []notice) []told {
	var out []told
	for _, n := range ns {
		out = append(out, told{n.to, n.w.Role, n.w.Generation, n.w.Parent, n.w.Op, n.w.Checkpoint, n.w.Network})
	}
	return out
}

// settle polls op until it is final, with the token of the moment: it
// changes whenever the generation does.
func settle(t *testing.T, d *daemon, url, op string) hostlink.Op {
	t.Helper()
	cx := ctx(t)
	for {
		o, err := quickClient(t, d, url, "").Status(cx, op, 500*time.Millisecond)
		if err != nil && !errors.Is(err, &hostlink.Error{Code: hostlink.CodeStaleGeneration}) {
			t.Fatal(err)
		}
		if err == nil && o.State.Final() {
			return o
		}
		if cx.Err() != nil {
			t.Fatalf("op %s: %v", op, cx.Err())
		}
	}
}

// quickClient is a client that does not wait out a stale token: with tok
// "", the one in the token file now.
func quickClient(t *testing.T, d *daemon, url, tok string) *hostlink.Client {
	t.Helper()
	if tok == "" {
		// The token file comes a moment after undohost starts.
		waitFile(t, filepath.Join(d.state, "tokens", "default"))
		tok = strings.TrimSpace(readFile(t, filepath.Join(d.state, "tokens", "default")))
	}
	c, err := hostlink.NewClient(url, hostlink.ClientOptions{Token: tok, Agent: "undohost-test", RetryWindow: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With a notify command, every VM that resumes from captured memory is
// told who it is (docs/hostlink.md §7), with a new generation and token:
// the copy (role copy, its network) before its step runs, the original
// after a fork or a checkpoint captured it, the promoted copy, and the
// restored VM. The sandbox's token file follows, and every earlier token
// is refused as stale.
func TestProviderNotify(t *testing.T) {
	d, _, root := providerDaemon(t, notifyConf)
	url := "unix://" + filepath.Join(filepath.Dir(root), "v.sock")
	cx := ctx(t)
	submit := func(f func(c *hostlink.Client) (hostlink.Accepted, error)) hostlink.Op {
		t.Helper()
		a, err := f(quickClient(t, d, url, ""))
		if err != nil {
			t.Fatal(err)
		}
		return settle(t, d, url, a.Op)
	}
	kept := submit(func(c *hostlink.Client) (hostlink.Accepted, error) {
		return c.ForkRun(cx, hostlink.ForkRun{Key: "keep", Network: hostlink.Network{Mode: "off"},
			Step: shell("echo v1 > app"), Verify: &hostlink.Command{Argv: []string{"grep", "-q", "v1", "app"}, Cwd: "/"}})
	})
	cp := submit(func(c *hostlink.Client) (hostlink.Accepted, error) {
		return c.Checkpoint(cx, hostlink.Checkpoint{Key: "cp", After: kept.ID})
	})
	dropped := submit(func(c *hostlink.Client) (hostlink.Accepted, error) {
		return c.ForkRun(cx, hostlink.ForkRun{Key: "drop", Network: hostlink.Network{Mode: "allow", Allow: []string{"deb.debian.org:443"}},
			Step: shell("exit 3")})
	})
	back := submit(func(c *hostlink.Client) (hostlink.Accepted, error) {
		return c.Restore(cx, hostlink.Restore{Key: "back", Checkpoint: cp.Result.Checkpoint})
	})
	if kept.State != hostlink.StateKept || cp.State != hostlink.StateDone || dropped.State != hostlink.StateDiscarded || back.State != hostlink.StateDone {
		t.Fatalf("states: %s %s %s %s (%+v %+v %+v %+v)", kept.State, cp.State, dropped.State, back.State, kept.Error, cp.Error, dropped.Error, back.Error)
	}

	// What was asked, in order: the original is told as soon as the
	// fork has resumed it, the copy once its network is cut and before
	// its step runs.
	calls := providerCalls(t, root)
	var got []string
	for _, c := range calls {
		e := c.args[0]
		switch e {
		case "network", "exec", "delete":
			e += " " + c.args[1]
		case "promote":
			e += " " + c.args[2]
		case "notify":
			if len(c.args) > 2 {
				e += " " + c.args[2]
			}
		}
		got = append(got, e)
	}
	c1, c3 := "copy-"+kept.ID, "copy-"+dropped.ID
	want := []string{
		"notify", // at the start: the VM has not been told anything yet
		"fork", "notify", "network " + c1, "notify " + c1, "exec " + c1, "exec " + c1, "promote " + c1, "notify",
		"snapshot", "notify",
		"fork", "notify", "network " + c3, "notify " + c3, "exec " + c3, "delete " + c3,
		"restore", "notify",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provider calls (-want +got):\n%s", diff)
	}

	// What each VM was told.
	ns := notices(t, root)
	gotTold := toldOf(ns)
	wantTold := []told{
		{"default", hostlink.RolePrimary, 2, 1, "start", "", "on"}, // at undohost's start
		{"default", hostlink.RolePrimary, 4, 2, kept.ID, "", "on"}, // the original, after the fork's capture
		{c1, hostlink.RoleCopy, 3, 2, kept.ID, "", "off"},          // the copy, before its step
		{"default", hostlink.RolePrimary, 5, 3, kept.ID, "", "on"}, // the copy, promoted
		{"default", hostlink.RolePrimary, 6, 5, cp.ID, "", "on"},   // the original, after the checkpoint's capture
		{"default", hostlink.RolePrimary, 8, 6, dropped.ID, "", "on"},
		{c3, hostlink.RoleCopy, 7, 6, dropped.ID, "", "allow"},
		{"default", hostlink.RoleRestored, 9, 5, back.ID, cp.Result.Checkpoint, "on"}, // from the checkpoint, taken at generation 5
	}
	if diff := cmp.Diff(wantTold, gotTold); diff != "" {
		t.Errorf("WHO_YOU_ARE sent (-want +got):\n%s", diff)
	}

	// Tokens: each new, the last one in the token file, all others
	// stale (a copy's too: it must not open the sandbox's listener).
	// Entropy fresh. The time is the host's as the notify starts, after
	// the VM resumed.
	tok := strings.TrimSpace(readFile(t, filepath.Join(d.state, "tokens", "default")))
	seen := map[string]bool{}
	notifies := 0
	for i, n := range ns {
		if n.w.Token == "" || seen[n.w.Token] || len(n.w.Entropy) < 32 {
			t.Errorf("message %d: token %q (seen %v), %d bytes of entropy", i, n.w.Token, seen[n.w.Token], len(n.w.Entropy))
		}
		seen[n.w.Token] = true
		if last := i == len(ns)-1; last != (n.w.Token == tok) {
			t.Errorf("message %d: token in the token file: %v, last: %v", i, n.w.Token == tok, last)
		}
		if i < len(ns)-1 {
			if _, err := quickClient(t, d, url, n.w.Token).Hello(cx); !errors.Is(err, &hostlink.Error{Code: hostlink.CodeStaleGeneration}) {
				t.Errorf("message %d's token (%s, generation %d): %v, want stale_generation", i, n.w.Role, n.w.Generation, err)
			}
		}
		for ; notifies < len(calls) && calls[notifies].args[0] != "notify"; notifies++ {
		}
		if notifies == len(calls) {
			t.Fatalf("message %d: no notify call", i)
		}
		if ht := n.w.HostTime; notifies > 0 && ht.Before(calls[notifies-1].at) || ht.After(calls[notifies].at) {
			t.Errorf("message %d: host_time %v, not between the call before (%v) and the notify (%v)", i, ht, calls[notifies-1].at, calls[notifies].at)
		}
		notifies++
	}
	if w, err := quickClient(t, d, url, "").Hello(cx); err != nil || w.Generation != 9 || w.Role != hostlink.RoleRestored {
		t.Errorf("welcome: %+v %v", w, err)
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

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// undohost killed while a notify runs: the sandbox's VM may not have
// been told, so the next undohost tells it, with a generation newer
// still, before it serves; a copy is deleted instead. A restart after
// that tells nobody again.
func TestProviderNotifyRestart(t *testing.T) {
	// What the first start told the VM, which had been told nothing.
	started := told{"default", hostlink.RolePrimary, 2, 1, "start", "", "on"}
	fork := func(cx context.Context, c *hostlink.Client) (hostlink.Accepted, error) {
		return c.ForkRun(cx, hostlink.ForkRun{Key: "f", Network: hostlink.Network{Mode: "off"}, Step: shell("echo changed > x")})
	}
	tests := []struct {
		name   string
		hold   string // the notify held is the first whose target starts with this
		submit func(cx context.Context, c *hostlink.Client) (hostlink.Accepted, error)
		calls  []string // what the restarted undohost asks
		told   func(op string) []told
	}{
		{"the original after a checkpoint", "", func(cx context.Context, c *hostlink.Client) (hostlink.Accepted, error) {
			return c.Checkpoint(cx, hostlink.Checkpoint{Key: "cp"})
		}, []string{"notify"}, func(op string) []told {
			// Generation 3 never arrived.
			return []told{started, {"default", hostlink.RolePrimary, 4, 2, op, "", "on"}}
		}},
		{"the original after a fork", "default", fork, []string{"delete", "notify"}, func(op string) []told {
			// 3 was the copy's, 4 never arrived.
			return []told{started, {"default", hostlink.RolePrimary, 5, 2, op, "", "on"}}
		}},
		{"the copy", "copy-", fork, []string{"delete"}, func(op string) []told {
			// The original had its message: it is not told again.
			return []told{started, {"default", hostlink.RolePrimary, 4, 2, op, "", "on"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _, root := providerDaemon(t, notifyConf)
			url := "unix://" + filepath.Join(filepath.Dir(root), "v.sock")
			cx := ctx(t)
			os.WriteFile(filepath.Join(root, "hold-notify"), []byte(tt.hold), 0o644)
			a, err := tt.submit(cx, quickClient(t, d, url, ""))
			if err != nil {
				t.Fatal(err)
			}
			waitFile(t, filepath.Join(root, "notify-held"))
			d.stop(syscall.SIGKILL)
			os.Remove(filepath.Join(root, "hold-notify"))
			before := len(providerCalls(t, root))

			d.start()
			op := settle(t, d, url, a.Op)
			if op.State != hostlink.StateAbandoned {
				t.Errorf("op after the restart: %+v", op)
			}
			var got []string
			for _, c := range providerCalls(t, root)[before:] {
				got = append(got, c.args[0])
			}
			if diff := cmp.Diff(tt.calls, got); diff != "" {
				t.Errorf("calls after the restart (-want +got):\n%s", diff)
			}
			ns := notices(t, root)
			if diff := cmp.Diff(tt.told(a.Op), toldOf(ns)); diff != "" {
				t.Errorf("told (-want +got):\n%s", diff)
			}
			tok := strings.TrimSpace(readFile(t, filepath.Join(d.state, "tokens", "default")))
			if len(ns) > 0 && ns[len(ns)-1].w.Token != tok {
				t.Errorf("the token file is not the last token told")
			}
			if ents, _ := os.ReadDir(filepath.Join(root, "copies")); len(ents) != 0 {
				t.Errorf("copies left: %v", ents)
			}

			// Nothing is pending any more: a restart tells nobody.
			if err := d.stop(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			d.start()
			if _, err := quickClient(t, d, url, "").Hello(cx); err != nil {
				t.Fatal(err)
			}
			if again := notices(t, root); len(again) != len(ns) {
				t.Errorf("told again after a second restart: %+v", toldOf(again[len(ns):]))
			}
		})
	}
}
