package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/undohost"
)

// startHost runs undohost with the local backend on a Unix socket and
// returns the URL undosh reaches it by (with the sandbox's token).
func startHost(t *testing.T) string {
	t.Helper()
	return startHostWith(t, "--backend", "local")
}

// startHostWith runs undohost with args (its backend) as startHost does.
func startHostWith(t *testing.T, args ...string) string {
	t.Helper()
	state := t.TempDir()
	sock := filepath.Join(t.TempDir(), "host.sock")
	cmd := exec.Command(undohostBin, append(args, "--listen", "unix://"+sock, "--state", state)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	token := filepath.Join(state, "tokens", "default")
	waitForListener(t, sock)
	waitForFile(t, token)
	// Started once its log says so: a provider's VM has been told who it
	// is, and the token file is that generation's.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if undohost.Starts(state) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("undohost did not log its start within 30 s")
		}
	}
	tok, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	return "unix://" + sock + "?token=" + strings.TrimSpace(string(tok))
}

// undoCommitOf undoes the fork engine's commit that put path in place, so
// that the machine and the engine's journal are left as they were.
func undoCommitOf(t *testing.T, path string) {
	t.Helper()
	dir := fork.JournalDir("/")
	recs, err := fork.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Committed && !r.Undone && (slices.Contains(r.Paths, path) || slices.Contains(r.Paths, "/"+path) || slices.Contains(r.Paths, strings.TrimPrefix(path, "/"))) {
			if err := fork.Undo(dir, r.ID, false); err != nil {
				t.Errorf("undo the commit of %s: %v", path, err)
			}
			return
		}
	}
	var seen []string
	for _, r := range recs[max(0, len(recs)-3):] {
		seen = append(seen, strings.Join(r.Paths, ","))
	}
	t.Errorf("no commit put %s in place (the last commits changed %q)", path, seen)
}

// Machine steps go to the sandbox host when one is configured: a passing
// step is kept, one whose verify fails is discarded, and the output and
// exit status arrive intact.
func TestHostSteps(t *testing.T) {
	needForkEngine(t)
	url := startHost(t)
	env, ws := machineEnv(t)
	env = append(env, "UNDOSH_HOST="+url)

	if st := runWith(t, undoctlBin, ws, env, "undoctl", "status"); !strings.Contains(st.stdout, "answers (sandbox default, generation 1, primary)") {
		t.Errorf("undoctl status does not show the host link: %+v", st)
	}

	p := harmless(t)
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "echo kept > "+p+"; cat "+p+"; echo to-stderr >&2")
	if got.code != 0 || got.stdout != "kept\n" || got.stderr != "to-stderr\n" {
		t.Fatalf("a passing step through the host: %+v", got)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "kept\n" {
		t.Fatalf("%s after the host kept the fork: %q, %v", p, b, err)
	}
	rec := lastRecord(t, env)
	if rec["outcome"] != "committed" || rec["host_op"] == nil {
		t.Errorf("journal: %v", rec)
	}
	undoCommitOf(t, strings.TrimPrefix(p, "/"))

	// The host runs the real bash under the caller's argv[0].
	want := runWith(t, "/bin/bash", ws, env, "-bash", "-c", `echo "$0|$BASH"`)
	login := harmless(t)
	got = runWith(t, undoshBin, ws, env, "-bash", "-c", `echo "$0|$BASH" | tee `+login)
	if got.stdout != want.stdout || lastRecord(t, env)["host_op"] == nil {
		t.Errorf("$0|$BASH through the host: %+v, bash gives %q", got, want.stdout)
	}
	undoCommitOf(t, strings.TrimPrefix(login, "/"))

	q := harmless(t)
	got = runWith(t, undoshBin, ws, append(env, "UNDOSH_VERIFY=false"), "bash", "-c", "echo x > "+q)
	if got.code != 1 || !strings.Contains(got.stderr, "verify `false` failed") {
		t.Errorf("a step whose verify fails through the host: %+v", got)
	}
	if _, err := os.Lstat(q); !os.IsNotExist(err) {
		t.Errorf("a discarded fork reached the machine: %v", err)
	}
	got = runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+q+"; exit 7")
	if got.code != 7 {
		t.Errorf("the step's status through the host: %+v", got)
	}

	// A host that does not answer: one note, and the local engine runs it.
	r := harmless(t)
	got = runWith(t, undoshBin, ws, append(env, "UNDOSH_HOST=unix:///nonexistent/host.sock"), "bash", "-c", "echo local > "+r)
	if got.code != 0 || !strings.Contains(got.stderr, "does not answer") {
		t.Errorf("unreachable host: %+v", got)
	}
	undoLast(t, env, ws)
}

// undoctl back N of a host step asks the host to go back to its
// checkpoint from before the step, which undoes the later steps too.
func TestHostBack(t *testing.T) {
	needForkEngine(t)
	url := startHost(t)
	env, ws := machineEnv(t)
	env = append(env, "UNDOSH_HOST="+url)
	a, b := harmless(t), harmless(t)
	for _, p := range []string{a, b} {
		if got := runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+p); got.code != 0 {
			t.Fatalf("host step writing %s: %+v", p, got)
		}
	}
	recs := journalRecords(t, env)
	if len(recs) != 2 || recs[0]["host_before"] == nil || recs[1]["host_checkpoint"] == nil {
		t.Fatalf("journal: %v", recs)
	}
	if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", fmt.Sprint(recs[0]["id"])); back.code != 0 {
		t.Fatalf("undoctl back: %+v", back)
	}
	for _, p := range []string{a, b} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after going back before the first step: %v", p, err)
		}
	}
	// Without UNDOSH_HOST naming the host, undoctl says how to reach it.
	var noHost []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "UNDOSH_HOST=") {
			noHost = append(noHost, kv)
		}
	}
	if back := runWith(t, undoctlBin, ws, noHost, "undoctl", "back", fmt.Sprint(recs[1]["id"])); back.code == 0 || !strings.Contains(back.stderr, "set UNDOSH_HOST") {
		t.Errorf("undoctl back without UNDOSH_HOST: %+v", back)
	}
}

// The guest end of the control channel: undoctl agent keeps what the host
// says this VM is. undosh then takes the token from it, and, in a VM the
// host says is a copy, runs machine steps as part of the step the copy is
// for, asking the host nothing.
func TestGuestAgent(t *testing.T) {
	needForkEngine(t)
	url := startHost(t)
	base, token, _ := strings.Cut(url, "?token=")
	env, ws := machineEnv(t)
	var sd string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "UNDOSH_STATE_DIR="); ok {
			sd = v
		}
	}
	agentSock := filepath.Join(t.TempDir(), "control.sock")
	agent := exec.Command(undoctlBin, "agent", "--listen", "unix://"+agentSock, "--state", sd)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		agent.Process.Signal(syscall.SIGTERM)
		agent.Wait()
	})
	waitForListener(t, agentSock)
	tell := func(role hostlink.Role, gen uint64) {
		t.Helper()
		conn, err := net.Dial("unix", agentSock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body, _ := json.Marshal(hostlink.WhoYouAre{Sandbox: "default", Generation: gen, Role: role, Token: token,
			Entropy: []byte("0123456789abcdef0123456789abcdef")})
		if err := hostlink.Encode(conn, hostlink.Frame{Type: hostlink.TypeWhoYouAre, Body: body}); err != nil {
			t.Fatal(err)
		}
		f, err := hostlink.Decode(conn, 0)
		if err != nil || f.Type != hostlink.TypeNoted {
			t.Fatalf("the agent answered %v, %v", f.Type, err)
		}
	}
	tell(hostlink.RolePrimary, 1)

	// The token comes from what the agent kept.
	env = append(env, "UNDOSH_HOST="+base)
	p := harmless(t)
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+p)
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("a host step with the agent's token: %+v", got)
	}
	if rec := lastRecord(t, env); rec["host_op"] == nil {
		t.Errorf("the step did not go to the host: %v", rec)
	}
	undoCommitOf(t, strings.TrimPrefix(p, "/"))

	// In a copy, a machine step is part of the copy's step.
	tell(hostlink.RoleCopy, 2)
	before := len(journalRecords(t, env))
	q := harmless(t)
	got = runWith(t, undoshBin, ws, env, "bash", "-c", "echo y > "+q)
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("a machine step in a copy: %+v", got)
	}
	if n := len(journalRecords(t, env)); n != before {
		t.Errorf("a command in a copy made %d journal records: it asked for protection again", n-before)
	}
	if b, _ := os.ReadFile(q); string(b) != "y\n" {
		t.Errorf("the command in the copy did not run: %q", b)
	}
}

// A backend that runs an argv (the provider's exec command) cannot set
// argv[0] itself: it runs the real bash through undosh, the step's
// Launcher, and bash's messages name the caller's argv[0] as they do
// without undosh. Without a launcher they name the real bash's path.
func TestHostProviderArgv0(t *testing.T) {
	script, err := filepath.Abs("../undohost/testdata/provider.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sandboxes", "default"), 0o755); err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "backend: provider\nprovider:\n  vars: {script: %q, root: %q}\n", script, root)
	for _, c := range [][2]string{
		{"fork", `fork, "{{.Sandbox}}", "{{.Op}}"`}, {"network", `network, "{{.Copy}}", "{{.Network}}", "{{.Allow}}"`},
		{"exec", `exec, "{{.Copy}}", "{{.Argv}}"`}, {"promote", `promote, "{{.Sandbox}}", "{{.Copy}}"`},
		{"delete", `delete, "{{.Copy}}"`}, {"snapshot", `snapshot, "{{.Sandbox}}", "{{.Snapshot}}"`},
		{"restore", `restore, "{{.Sandbox}}", "{{.Snapshot}}"`}, {"delete_snapshot", `delete-snapshot, "{{.Snapshot}}"`},
	} {
		fmt.Fprintf(&conf, "  %s: [\"{{.Vars.script}}\", \"{{.Vars.root}}\", %s]\n", c[0], c[1])
	}
	cfg := filepath.Join(t.TempDir(), "undohost.yaml")
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := hostlink.NewClient(startHostWith(t, "--config", cfg), hostlink.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"-bash", "-c", `echo "$0"; echo $((1+)); echo ${x!}`}
	want := runWith(t, "/bin/bash", "/", os.Environ(), argv...)
	for i, launcher := range []string{undoshBin, ""} {
		var stdout, stderr strings.Builder
		op, err := c.Run(context.Background(), hostlink.ForkRun{Key: fmt.Sprintf("argv0-%d", i), Network: hostlink.Network{Mode: "off"},
			Step: hostlink.Command{Argv: argv, Path: "/bin/bash", Launcher: launcher, Cwd: "/", Env: os.Environ()}}, &stdout, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		code := -1
		if op.Result.StepExit != nil {
			code = *op.Result.StepExit
		}
		got := ran{stdout: stdout.String(), stderr: stderr.String(), code: code}
		switch {
		case launcher != "" && got != want:
			t.Errorf("through undosh as the launcher: %+v, bash gives %+v", got, want)
		case launcher == "" && !strings.Contains(got.stderr, "/bin/bash: line 1:"):
			t.Errorf("without a launcher: %+v, want bash's path in its messages", got)
		}
	}
}
