package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/testuser"
)

// uniqueSleep is a sleep duration no other process has: the argv
// `sleep SECS` names the process the test looks for.
func uniqueSleep() string { return fmt.Sprintf("1234.%d", rand.Uint32()) }

// sleeping returns the processes on this machine whose argv is `sleep
// secs`, and stops them (by pid) when the test ends.
func sleeping(t *testing.T, secs string) []procs.Proc {
	t.Helper()
	all, err := procs.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []procs.Proc
	for _, p := range all {
		if slices.Equal(p.Argv, []string{"sleep", secs}) {
			out = append(out, p)
			t.Cleanup(func() { procs.Stop(p, syscall.SIGKILL, 5*time.Second) })
		}
	}
	return out
}

// startedLine is the line that says a step's process was started again.
var startedLine = regexp.MustCompile(`^undosh: step (\d+) left 1 process running in its copy of the machine; started again on this machine after the commit \(new processes: memory and pids are not carried over\): sleep (\S+) \(pid (\d+), log (\S+)\)\n$`)

// A kept machine step that leaves a process running: its file is
// committed, the process runs on the machine afterwards, as it ran in the
// copy, and one line on stderr says so; the journal records it. A failing
// one's process is stopped with its copy, and the line says that.
func TestMachineStepLeftovers(t *testing.T) {
	needForkEngine(t)
	env, ws := machineEnv(t)
	p, secs := harmless(t), uniqueSleep()
	r := runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+p+"; (setsid sleep "+secs+" &)")
	m := startedLine.FindStringSubmatch(r.stderr)
	if r.code != 0 || r.stdout != "" || m == nil || m[2] != secs {
		t.Fatalf("a kept step with a process: %+v", r)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "x\n" {
		t.Errorf("%s after the commit: %q, %v", p, b, err)
	}
	got := sleeping(t, secs)
	if len(got) != 1 || strconv.Itoa(got[0].PID) != m[3] || got[0].Cwd != ws || got[0].Session != got[0].PID || got[0].UID != 0 {
		t.Fatalf("on the machine: %+v; stderr %q", got, r.stderr)
	}
	if !slices.ContainsFunc(got[0].Env, func(kv string) bool { return strings.HasPrefix(kv, "UNDOSH_STATE_DIR=") }) {
		t.Errorf("the process's environment is not the step's: %v", got[0].Env)
	}
	rec := lastRecord(t, env)
	if !strings.HasPrefix(m[4], filepath.Join(envValue(env, "UNDOSH_STATE_DIR"), "started")+"/") || rec["outcome"] != "committed" {
		t.Errorf("log %s; record %v", m[4], rec)
	}
	started, _ := rec["started"].([]any)
	if len(started) != 1 || fmt.Sprint(started[0].(map[string]any)["pid"]) != m[3] || started[0].(map[string]any)["command"] != "sleep "+secs {
		t.Errorf("journal: started %v", rec["started"])
	}

	q, secs := harmless(t), uniqueSleep()
	r = runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+q+"; (setsid sleep "+secs+" &); exit 3")
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if r.code != 3 || len(lines) != 2 || !strings.Contains(lines[0], "so the copy was discarded") ||
		!regexp.MustCompile(`^undosh: step \d+ left 1 process running in its copy of the machine, stopped with the copy, which was not kept: sleep `+regexp.QuoteMeta(secs)+` \(pid \d+ in the copy\)$`).MatchString(lines[1]) {
		t.Fatalf("a failing step with a process: %+v", r)
	}
	if got := sleeping(t, secs); len(got) != 0 {
		t.Errorf("a failing step's process runs on the machine: %+v", got)
	}
	if _, err := os.Lstat(q); !os.IsNotExist(err) {
		t.Errorf("a failed step's file reached the machine: %v", err)
	}
	if rec := lastRecord(t, env); fmt.Sprint(rec["stopped"]) != "[sleep "+secs+"]" || rec["started"] != nil {
		t.Errorf("journal: %v", rec)
	}

	// A step that leaves nothing says nothing more.
	r = runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+harmless(t)+"; sleep 0.01 & wait")
	if r.code != 0 || r.stderr != "" {
		t.Errorf("a step that leaves nothing: %+v", r)
	}
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// A user's machine step through sudo: the root side starts the process
// again, as the user it ran as, and the user's undosh says so.
func TestSudoMachineStepLeftovers(t *testing.T) {
	needSudo(t)
	u := makeSudoUser(t, "undosh-sudo-left", "NOPASSWD: ALL")
	p, secs, mine := harmless(t), uniqueSleep(), uniqueSleep()
	r := u.run(t, u.env(), undoshBin, "-c", "sudo sh -c 'echo x > "+p+"; (setsid sleep "+secs+" &)'; (setsid sleep "+mine+" &)")
	if r.code != 0 || !strings.Contains(r.stderr, "left 2 processes running in its copy of the machine; started again on this machine after the commit") {
		t.Fatalf("a step through sudo that leaves processes: %+v", r)
	}
	root, user := sleeping(t, secs), sleeping(t, mine)
	if len(root) != 1 || root[0].UID != 0 || len(user) != 1 || user[0].UID != u.UID || user[0].GID != u.GID {
		t.Fatalf("on the machine: root's %+v, the user's %+v", root, user)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "x\n" {
		t.Errorf("%s: %q, %v", p, b, err)
	}
}

// A rootless copy's leftovers: a user who is not root gets its process
// started again, as itself.
func TestRootlessLeftovers(t *testing.T) {
	u := testuser.New(t, "undosh-rl-left", testuser.Options{Home: true})
	undosh := testuser.Install(t, undoshBin)
	secs := uniqueSleep()
	// eval: code undosh cannot read ahead, a machine step by default.
	r := asUser(t, u, u.Home, []string{"UNDOSH_POLICY=-", "S=" + secs}, undosh, "-c", `eval "echo x > ~/f; (setsid sleep \$S &)"`)
	if strings.Contains(r.stderr, "cannot run here") {
		t.Skipf("no rootless copy here: %s", r.stderr)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "left 1 process running in its copy of the machine; started again on this machine after the commit") {
		t.Fatalf("a rootless step that leaves a process: %+v", r)
	}
	got := sleeping(t, secs)
	if len(got) != 1 || got[0].UID != u.UID || got[0].Cwd != u.Home {
		t.Fatalf("on the machine: %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(u.Home, "f")); err != nil || string(b) != "x\n" {
		t.Errorf("~/f: %q, %v", b, err)
	}
}

// A machine step that starts a Redis daemon (which rewrites its command
// line) and writes under /etc: after the commit, a Redis answers on the
// port the step gave, in the directory it gave.
func TestMachineStepStartsRedis(t *testing.T) {
	needForkEngine(t)
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server here (apt install redis-server)")
	}
	env, ws := machineEnv(t)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	p := harmless(t)
	redises := func() []procs.Proc { // on the test's port
		ps, _ := procs.List()
		return slices.DeleteFunc(ps, func(q procs.Proc) bool {
			return q.Comm != "redis-server" || !strings.Contains(strings.Join(q.Argv, " "), ":"+port)
		})
	}
	t.Cleanup(func() {
		for _, q := range redises() {
			procs.Stop(q, syscall.SIGKILL, 10*time.Second)
		}
	})
	got := runWith(t, undoshBin, ws, env, "bash", "-c",
		"echo port "+port+" > "+p+"; redis-server --port "+port+" --bind 127.0.0.1 --dir "+dir+" --save '' --daemonize yes --pidfile "+dir+"/redis.pid --logfile "+dir+"/log")
	lines := undoshLines(got.stderr)
	if got.code != 0 || len(lines) != 1 || !strings.Contains(lines[0], "started again on this machine") {
		t.Fatalf("a step that starts a Redis daemon: %+v", got)
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 5*time.Second)
	if err != nil {
		t.Fatalf("no Redis on port %s after the step: %v (%s)", port, err, lines[0])
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	for {
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(buf[:n]), "+PONG") {
			break
		}
		// -LOADING: it is reading its dump.
	}
	if rs := redises(); len(rs) != 1 || rs[0].Cwd != dir {
		t.Errorf("the Redis started again: %+v, want one, in %s", rs, dir)
	}
}
