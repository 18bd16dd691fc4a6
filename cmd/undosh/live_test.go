package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/testsvc"
	"github.com/undosh/undosh/internal/testuser"
)

// withVerify is env with UNDOSH_VERIFY set to verify ("" for none).
func withVerify(env []string, verify string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "UNDOSH_VERIFY=") })
	if verify != "" {
		out = append(out, "UNDOSH_VERIFY="+verify)
	}
	return out
}

// A migration against the sandbox's PostgreSQL runs on the machine after
// a checkpoint of the server: a good one is kept; a bad one that fails
// verify is put back, server and all, in one line; undoctl back N undoes
// the good one later.
func TestLivePostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t, testsvc.PostgresOptions{})
	pg.Psql(t, "create table users (id int primary key, name text); insert into users values (1, 'ada'), (2, 'bob')")
	env, ws := machineEnv(t)
	env = append(env, pg.Env()...)

	good := runWith(t, undoshBin, ws, withVerify(env, "psql -Atc 'select email from users'"),
		"bash", "-c", `psql -c "alter table users add column email text"`)
	if good.code != 0 || !strings.Contains(good.stdout, "ALTER TABLE") || len(undoshLines(good.stderr)) != 0 {
		t.Fatalf("the good migration: %+v", good)
	}
	rec := lastRecord(t, env)
	goodID := fmt.Sprint(rec["id"])
	svcs, _ := rec["services"].([]any)
	if rec["outcome"] != "kept" || len(svcs) != 1 {
		t.Fatalf("the good migration's record: %v", rec)
	}
	if sp := svcs[0].(map[string]any); !strings.HasPrefix(fmt.Sprint(sp["name"]), "postgres") || sp["before"] == "" {
		t.Errorf("the good migration's service point: %v", sp)
	}

	// The service's checkpoint counts in undoctl cost, and status lists
	// the server.
	if c := runWith(t, undoctlBin, ws, env, "undoctl", "cost", "--json"); c.code != 0 || !strings.Contains(c.stdout, `"step": `+goodID) || !strings.Contains(c.stdout, "snapshot_bytes") {
		t.Errorf("undoctl cost after the migration: %+v", c)
	}
	if st := runWith(t, undoctlBin, ws, env, "undoctl", "status"); st.code != 0 || !strings.Contains(st.stdout, "postgres") || !strings.Contains(st.stdout, pg.Data) {
		t.Errorf("undoctl status does not list the server: %+v", st)
	}

	bad := runWith(t, undoshBin, ws, withVerify(env, "psql -Atc 'select count(*) from users'"),
		"bash", "-c", `psql -c "drop table users"`)
	lines := undoshLines(bad.stderr)
	if bad.code != 1 || len(lines) != 1 || !strings.Contains(lines[0], "put back service postgres") ||
		!strings.Contains(lines[0], "undoctl service restore") {
		t.Fatalf("the bad migration: %+v", bad)
	}
	if got := pg.Psql(t, "select count(*) from users"); got != "2" {
		t.Errorf("users after the rollback: %q rows, want 2", got)
	}
	if _, err := pg.PsqlErr("select email from users"); err != nil {
		t.Errorf("the good migration's column is gone after the bad one's rollback: %v", err)
	}
	if rec := lastRecord(t, env); rec["outcome"] != "rolled back" {
		t.Errorf("the bad migration's outcome: %v", rec["outcome"])
	}

	if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", goodID); back.code != 0 {
		t.Fatalf("undoctl back %s: %+v", goodID, back)
	}
	if _, err := pg.PsqlErr("select email from users"); err == nil {
		t.Error("the column is still there after undoctl back of the migration")
	}
	if got := pg.Psql(t, "select count(*) from users"); got != "2" {
		t.Errorf("users after undoctl back: %q rows, want 2", got)
	}
}

// A redis-cli write rolled back with its step: the key is as it was,
// and the server answers.
func TestLiveRedis(t *testing.T) {
	r := testsvc.StartRedis(t, testsvc.RedisOptions{})
	r.Do(t, "SET", "k", "before")
	env, ws := machineEnv(t)
	port := strconv.Itoa(r.Port)
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "redis-cli -p "+port+" set k during; exit 3")
	lines := undoshLines(got.stderr)
	if got.code != 3 || len(lines) != 1 || !strings.Contains(lines[0], "put back service redis") {
		t.Fatalf("a failing redis-cli step: %+v", got)
	}
	if v := r.Do(t, "GET", "k"); v != "before" {
		t.Errorf("k after the rollback: %q, want before", v)
	}
	got = runWith(t, undoshBin, ws, env, "bash", "-c", "redis-cli -p "+port+" set k after")
	if got.code != 0 || len(undoshLines(got.stderr)) != 0 {
		t.Fatalf("a passing redis-cli step: %+v", got)
	}
	if v := r.Do(t, "GET", "k"); v != "after" {
		t.Errorf("k after a kept step: %q, want after", v)
	}
}

// findArgv lists the processes whose argv is argv.
func findArgv(t *testing.T, argv []string) []procs.Proc {
	t.Helper()
	ps, err := procs.List()
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(ps, func(p procs.Proc) bool { return !slices.Equal(p.Argv, argv) || !p.Alive() })
}

// A kill of the sandbox's own process runs on the machine; the notice
// says what it ended and that its memory is gone, the journal keeps its
// command line, and undoctl back starts it again.
func TestLiveKill(t *testing.T) {
	dir := t.TempDir()
	argv := []string{"sleep", fmt.Sprintf("%d.%d", 4000+os.Getpid()%1000, 7)}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEV_SERVER_MARK=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() {
		for _, p := range findArgv(t, argv) {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	env, ws := machineEnv(t)
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "kill "+strconv.Itoa(cmd.Process.Pid))
	lines := undoshLines(got.stderr)
	if got.code != 0 || len(lines) != 1 || !strings.Contains(lines[0], "ended 1 process") || !strings.Contains(lines[0], "memory") {
		t.Fatalf("kill of the sandbox's process: %+v\nrecord %v", got, lastRecord(t, env))
	}
	waitFor(t, func() bool { return len(findArgv(t, argv)) == 0 })
	rec := lastRecord(t, env)
	killed, _ := rec["killed"].([]any)
	if len(killed) != 1 {
		t.Fatalf("the record of the kill: %v", rec)
	}
	k := killed[0].(map[string]any)
	if fmt.Sprint(k["argv"]) != fmt.Sprint(argvAny(argv)) || k["cwd"] != dir || !slices.Contains(anyStrings(k["env"]), "DEV_SERVER_MARK=1") {
		t.Errorf("the killed process as journalled: %v", k)
	}
	if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", fmt.Sprint(rec["id"])); back.code != 0 || !strings.Contains(back.stdout, "started again") {
		t.Fatalf("undoctl back of the kill: %+v", back)
	}
	again := findArgv(t, argv)
	if len(again) != 1 || again[0].Cwd != dir {
		t.Fatalf("after undoctl back, the processes with the killed one's argv: %+v", again)
	}
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(again[0].PID), "environ")); err != nil || !strings.Contains(string(b), "DEV_SERVER_MARK=1") {
		t.Errorf("the process started again lacks its environment: %v", err)
	}
}

func argvAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func anyStrings(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// userDir makes a directory owned by uid, removed at the end.
func userDir(t *testing.T, uid int) string {
	t.Helper()
	d, err := os.MkdirTemp("", "undosh-live-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, -1); err != nil {
		t.Fatal(err)
	}
	return d
}

// An agent that is not root, running as the user its PostgreSQL runs
// as: its failing migration is put back as root's would be.
func TestLivePostgresAsItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running the agent as the server's user, made for the test, needs root")
	}
	pg := testsvc.StartPostgres(t, testsvc.PostgresOptions{})
	if pg.UID == 0 {
		t.Skip("the server runs as root")
	}
	pg.Psql(t, "create table users (id int); insert into users values (1)")
	undosh := testuser.Install(t, undoshBin)
	home := userDir(t, pg.UID)
	ws := filepath.Join(home, "ws")
	cmd := pg.Command("mkdir", ws)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkdir: %v\n%s", err, out)
	}
	cmd = pg.Command(undosh, "-c", `psql -c "drop table users"`)
	cmd.Dir = ws
	cmd.Env = append(cmd.Env, append(pg.Env(), "HOME="+home, "UNDOSH_STATE_DIR="+filepath.Join(home, "state"),
		"UNDOSH_POLICY=-", "UNDOSH_VERIFY=psql -c 'select 1 from users'")...)
	r := runCmd(t, cmd)
	lines := undoshLines(r.stderr)
	if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "put back service postgres") {
		t.Fatalf("a failing migration as the server's user: %+v", r)
	}
	if got := pg.Psql(t, "select count(*) from users"); got != "1" {
		t.Errorf("users after the rollback: %q rows, want 1", got)
	}
}

// An agent that is not root cannot checkpoint another user's server: it
// says so once, and its step runs with its workspace checkpointed only
// (host.fallback: git, the default for users who are not root).
func TestLiveOtherUsersService(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a second user, made for the test, needs root")
	}
	pg := testsvc.StartPostgres(t, testsvc.PostgresOptions{})
	u := testuser.New(t, "undosh-live-other", testuser.Options{Home: true})
	undosh := testuser.Install(t, undoshBin)
	ws := filepath.Join(u.Home, "ws")
	if r := asUser(t, u, u.Home, nil, "mkdir", ws); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	env := append(pg.Env(), "UNDOSH_POLICY=-")
	r := asUser(t, u, ws, env, undosh, "-c", `psql -c "create table one (v int)"`)
	lines := undoshLines(r.stderr)
	if r.code != 0 || r.stdout != "CREATE TABLE\n" || len(lines) != 1 || !strings.Contains(lines[0], "runs as uid "+strconv.Itoa(pg.UID)) ||
		!strings.Contains(lines[0], "only the workspace checkpointed") {
		t.Fatalf("a client step against another user's server: %+v", r)
	}
	// Said once.
	if r := asUser(t, u, ws, env, undosh, "-c", `psql -c "create table two (v int)"`); r.code != 0 || len(undoshLines(r.stderr)) != 0 {
		t.Errorf("the second such step: %+v", r)
	}
}

// A kill whose target is known only as it runs (kill $(cat app.pid)):
// the long-running process that ended during the step is journalled as
// the step's, and the notice says how undosh knows.
func TestLiveKillDynamic(t *testing.T) {
	dir := t.TempDir()
	argv := []string{"sleep", fmt.Sprintf("%d.%d", 5000+os.Getpid()%1000, 9)}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() {
		for _, p := range findArgv(t, argv) {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "app.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	// It must have run a while to count as a server.
	p, err := procs.ReadStarted(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		b, _ := os.ReadFile("/proc/uptime")
		up, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
		return uint64(up*100) > p.Start+250
	})
	env, ws := machineEnv(t)
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "kill $(cat "+filepath.Join(dir, "app.pid")+")")
	lines := undoshLines(got.stderr)
	if got.code != 0 || len(lines) != 1 || !strings.Contains(lines[0], "ended 1 process") || !strings.Contains(lines[0], "only as it runs") {
		t.Fatalf("kill $(cat app.pid): %+v", got)
	}
	killed, _ := lastRecord(t, env)["killed"].([]any)
	if len(killed) != 1 || fmt.Sprint(killed[0].(map[string]any)["argv"]) != fmt.Sprint(argvAny(argv)) {
		t.Errorf("journalled as killed: %v", killed)
	}
}

// A service the policy declares (found by its program's name, its data
// where the policy says), named by a user's rule's live: a failing step
// of its client puts its data back and starts it again.
func TestLiveDeclaredService(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "state"), []byte("v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("undosh-app-%d", os.Getpid()%100000)
	prog := filepath.Join(dir, name)
	// Copied by cp, a process of its own: a write descriptor of this one
	// would leak into a test forking meanwhile ("text file busy").
	if out, err := exec.Command("cp", sleep, prog).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "appctl"), []byte("#!/bin/sh\necho \"$1\" > "+data+"/state\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() {
		for _, p := range findArgv(t, []string{prog, "1000"}) {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	pol := writePolicy(t, fmt.Sprintf(`version: 1
services:
  - name: app
    process: %q
    data: [%q]
rules:
  - name: app-client
    programs: [appctl]
    live: app
    class: fork
`, name, data))
	env, ws := machineEnv(t)
	env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "UNDOSH_POLICY=") || strings.HasPrefix(kv, "PATH=") }),
		pol, "PATH="+bin+":/usr/bin:/bin")
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "appctl v2; exit 5")
	lines := undoshLines(got.stderr)
	if got.code != 5 || len(lines) != 1 || !strings.Contains(lines[0], "put back service app") {
		t.Fatalf("a failing step of the declared service's client: %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(data, "state")); string(b) != "v1\n" {
		t.Errorf("the declared service's data after the rollback: %q, want v1", b)
	}
	if ps := findArgv(t, []string{prog, "1000"}); len(ps) != 1 || ps[0].PID == cmd.Process.Pid {
		t.Errorf("the declared service after the rollback: %+v (was pid %d)", ps, cmd.Process.Pid)
	}
}
