package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/agent"
)

// stateDirOf is the state directory env gives undosh and undoctl.
func stateDirOf(env []string) string {
	var sd string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "UNDOSH_STATE_DIR="); ok {
			sd = v
		}
	}
	return sd
}

// keepIdentity writes host.json as undoctl agent would after the host's
// WHO_YOU_ARE for generation gen.
func keepIdentity(t *testing.T, stateDir string, gen uint64, token string) {
	t.Helper()
	b, err := json.Marshal(hostlink.WhoYouAre{Sandbox: "default", Generation: gen, Role: hostlink.RolePrimary, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agent.Path(stateDir), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// undoctl back of a host step takes the token from host.json, as undosh
// does, when UNDOSH_HOST carries none: the host refuses a request without
// it.
func TestHostBackTokenFile(t *testing.T) {
	needForkEngine(t)
	base, token, _ := strings.Cut(startHost(t), "?token=")
	env, ws := machineEnv(t)
	keepIdentity(t, stateDirOf(env), 1, token)
	env = append(env, "UNDOSH_HOST="+base)
	p := harmless(t)
	if got := runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+p); got.code != 0 {
		t.Fatalf("host step with the token from host.json: %+v", got)
	}
	rec := lastRecord(t, env)
	if rec["host_before"] == nil {
		t.Fatalf("journal: %v", rec)
	}
	back := runWith(t, undoctlBin, ws, env, "undoctl", "back", fmt.Sprint(rec["id"]))
	if back.code != 0 {
		t.Fatalf("undoctl back with the token in host.json: %+v", back)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s is still there after undoctl back: %v", p, err)
	}
}

// notifyingHost runs undohost with the test provider (directories for
// VMs) and a notify command that writes each new generation's
// WHO_YOU_ARE into stateDir's host.json, as undoctl agent would; it keeps
// generation 1's there and returns the host's URL without a token, and
// that token.
func notifyingHost(t *testing.T, stateDir string) (url, token string) {
	t.Helper()
	if os.Getuid() != 0 {
		// The test provider runs the step on this machine, and the steps
		// that go to a host write under /etc.
		t.Skip("machine steps need root")
	}
	script, err := filepath.Abs("../undohost/testdata/provider.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sandboxes", "default"), 0o755); err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "backend: provider\nprovider:\n  vars: {script: %q, root: %q, hostjson: %q}\n", script, root, agent.Path(stateDir))
	for _, c := range [][2]string{
		{"fork", `fork, "{{.Sandbox}}", "{{.Op}}"`}, {"network", `network, "{{.Copy}}", "{{.Network}}", "{{.Allow}}"`},
		{"exec", `exec, "{{.Copy}}", "{{.Argv}}"`}, {"promote", `promote, "{{.Sandbox}}", "{{.Copy}}"`},
		{"delete", `delete, "{{.Copy}}"`}, {"snapshot", `snapshot, "{{.Sandbox}}", "{{.Snapshot}}"`},
		{"restore", `restore, "{{.Sandbox}}", "{{.Snapshot}}"`}, {"delete_snapshot", `delete-snapshot, "{{.Snapshot}}"`},
	} {
		fmt.Fprintf(&conf, "  %s: [\"{{.Vars.script}}\", \"{{.Vars.root}}\", %s]\n", c[0], c[1])
	}
	// Written whole: undosh may read it at any moment. A message for a
	// copy ({{.Copy}} set) is another VM's: this test's undosh runs in
	// the sandbox's.
	conf.WriteString(`  notify: ["sh", "-c", "if [ -n \"$1\" ]; then cat >/dev/null; else cat > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; fi", "{{.Vars.hostjson}}", "{{.Copy}}"]` + "\n")
	cfg := filepath.Join(t.TempDir(), "undohost.yaml")
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// undohost's start tells the VM, which has been told nothing, who it
	// is: host.json is written by the notify above.
	url, token, _ = strings.Cut(startHostWith(t, "--config", cfg), "?token=")
	return url, token
}

// A host whose promotion puts a new VM behind the sandbox (the provider's
// notify delivers each new generation's WHO_YOU_ARE). The undosh that
// asked for the step finishes in the promoted VM with the new token,
// exits with the step's status and journals it; undoctl back after it
// uses the newest token.
func TestHostPromotionToken(t *testing.T) {
	env, ws := machineEnv(t)
	sd := stateDirOf(env)
	base, token := notifyingHost(t, sd)
	env = append(env, "UNDOSH_HOST="+base)

	p := harmless(t)
	start := time.Now()
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "echo kept > "+p+"; cat "+p)
	if got.code != 0 || got.stdout != "kept\n" || got.stderr != "" {
		t.Fatalf("a host step across a promotion: %+v (after %v)", got, time.Since(start))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the step took %v", d)
	}
	rec := lastRecord(t, env)
	if rec["outcome"] != "committed" || rec["host_op"] == nil || rec["host_checkpoint"] == nil {
		t.Errorf("journal after the promotion: %v", rec)
	}
	w, ok := agent.Read(sd)
	if !ok || w.Generation < 2 || w.Token == token {
		t.Fatalf("host.json after the promotion: %+v %v; the provider's notify did not deliver a new generation", w, ok)
	}
	if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", fmt.Sprint(rec["id"])); back.code != 0 {
		t.Errorf("undoctl back after the promotion: %+v", back)
	}
	if w2, _ := agent.Read(sd); w2.Generation <= w.Generation || w2.Role != hostlink.RoleRestored {
		t.Errorf("host.json after undoctl back: %+v, want a restored generation after %d", w2, w.Generation)
	}
}

// silentProxy relays connections to the host at target (a unix:// URL)
// and stands for the network of a VM that was cloned: a connection whose
// HELLO carried another token than host.json's current one gets nothing
// more from the host and is never closed, as a connection from before the
// clone, which the copy's network never knew. It returns the proxy's URL.
func silentProxy(t *testing.T, target, stateDir string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	stale := func(token string) bool {
		w, ok := agent.Read(stateDir)
		return ok && w.Token != token
	}
	relay := func(c net.Conn) {
		hello, err := hostlink.Decode(c, hostlink.MaxRequest)
		if err != nil {
			c.Close()
			return
		}
		var h hostlink.Hello
		json.Unmarshal(hello.Body, &h)
		s, err := net.Dial("unix", strings.TrimPrefix(target, "unix://"))
		if err != nil {
			c.Close()
			return
		}
		defer s.Close()
		if hostlink.Encode(s, hello) != nil {
			c.Close()
			return
		}
		go func() {
			io.Copy(s, c)
			s.(*net.UnixConn).CloseWrite() // a HELLO alone ends so
		}()
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && !stale(h.Token) {
				c.Write(buf[:n])
			}
			if err != nil {
				break
			}
		}
		if stale(h.Token) {
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			return
		}
		c.Close()
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c)
		}
	}()
	return "unix://" + sock
}

// After a promotion, the connection undosh waits on (a long poll from
// before) may never be answered nor closed. undosh sees the new
// generation in host.json, gives that connection up and asks again at
// once: it finishes in about the time the step takes, not after the
// poll's wait and timeout.
func TestHostPromotionSilentConnection(t *testing.T) {
	env, ws := machineEnv(t)
	sd := stateDirOf(env)
	base, _ := notifyingHost(t, sd)
	env = append(env, "UNDOSH_HOST="+silentProxy(t, base, sd))
	p := harmless(t)
	// The step outlasts undosh's first poll for output, so that the poll
	// is waiting when the host promotes the copy.
	start := time.Now()
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "sleep 0.3; echo kept > "+p+"; cat "+p)
	if got.code != 0 || got.stdout != "kept\n" || got.stderr != "" {
		t.Fatalf("a host step across a promotion: %+v (after %v)", got, time.Since(start))
	}
	t.Logf("undosh took %v", time.Since(start))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the step took %v: undosh waited on the connection from before the promotion", d)
	}
	if rec := lastRecord(t, env); rec["outcome"] != "committed" {
		t.Errorf("journal: %v", rec)
	}
}

// refusingHost is a host that says hello and refuses every request with
// internal, and returns its URL without a token.
func refusingHost(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "host.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	send := func(conn net.Conn, typ hostlink.Type, v any) error {
		body, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return hostlink.Encode(conn, hostlink.Frame{Type: typ, Body: body})
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := hostlink.Decode(conn, hostlink.MaxRequest); err != nil {
					return
				}
				if send(conn, hostlink.TypeWelcome, hostlink.Welcome{Version: hostlink.Version, Sandbox: "default", Generation: 1, Role: hostlink.RolePrimary}) != nil {
					return
				}
				if _, err := hostlink.Decode(conn, hostlink.MaxRequest); err != nil {
					return
				}
				send(conn, hostlink.TypeError, hostlink.Error{Code: hostlink.CodeInternal, Message: "the disk is full"})
			}()
		}
	}()
	return "unix://" + sock
}

// The token never reaches the agent's terminal: what undosh and undoctl
// say of a host names it without its token.
func TestHostTokenNotPrinted(t *testing.T) {
	needForkEngine(t) // where the host does not answer, the local engine runs the step
	const secret = "s3cr3t0123456789"
	env, ws := machineEnv(t)
	host := refusingHost(t)
	for _, tt := range []struct {
		name, url, want string
	}{
		{"failed step", host + "?token=" + secret, "on the sandbox host " + host + ":"},
		{"no answer", "unix:///nonexistent/host.sock?token=" + secret, "unix:///nonexistent/host.sock does not answer"},
		{"misconfigured", "tcp://10.0.0.1:1?token=" + secret, "tcp://10.0.0.1:1 is misconfigured"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := append(env, "UNDOSH_HOST="+tt.url)
			p := harmless(t)
			got := runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+p)
			if _, err := os.Lstat(p); err == nil {
				undoCommitOf(t, strings.TrimPrefix(p, "/"))
			}
			if strings.Contains(got.stderr, secret) || !strings.Contains(got.stderr, tt.want) {
				t.Errorf("undosh's stderr: %q, want %q and not the token", got.stderr, tt.want)
			}
			st := runWith(t, undoctlBin, ws, env, "undoctl", "status")
			if strings.Contains(st.stdout+st.stderr, secret) {
				t.Errorf("undoctl status shows the token: %+v", st)
			}
		})
	}
}
