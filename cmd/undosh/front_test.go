package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverFor starts the front end's server of stateDir as a child of the
// test and waits for its socket; it is killed when the test ends.
func serverFor(t *testing.T, stateDir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(undoshBin)
	cmd.Args[0] = "undosh-classifier"
	cmd.Env = append(os.Environ(), "UNDOSH_STATE_DIR="+stateDir, "UNDOSH_CLASSIFIER_DEBUG=1", "UNDOSH_CLASSIFIER_IDLE=2m")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The pid file is written after listen: the socket then accepts.
	waitForFile(t, filepath.Join(stateDir, "run", "classify.pid"))
	return cmd
}

// waitForFile waits until name exists: the event the test needs, with a
// generous bound in case it never comes.
func waitForFile(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitForListener waits until something accepts connections on the Unix
// socket at name. The file appears at bind, before listen, so its existence
// alone is not the event.
func waitForListener(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.Dial("unix", name)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", name, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// answers counts the server's answers of each kind, from its log.
func answers(t *testing.T, stateDir string) (e, u int) {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(stateDir, "run", "classify.log"))
	// 'E' execs the real shell; 'L' and 'N' exec it under the read-only
	// limit.
	for _, v := range []string{"E", "L", "N"} {
		e += strings.Count(string(data), `"verdict":"`+v+`"`)
	}
	return e, strings.Count(string(data), `"verdict":"U"`)
}

// warm runs step until the server answers it: the first read-only
// steps in a workspace go to undosh, which walks the workspace for their
// checkpoint, until the server's watcher has a base there.
func warm(t *testing.T, stateDir string, step func()) {
	t.Helper()
	for range 50 {
		before, _ := answers(t, stateDir)
		step()
		if after, _ := answers(t, stateDir); after > before {
			return
		}
	}
	t.Fatalf("the server never answered the step:\n%s", readLog(t, stateDir))
}

type ran struct {
	stdout, stderr string
	code           int
	signaled       bool
}

func runWith(t *testing.T, bin string, dir string, env []string, argv ...string) ran {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Args = argv
	cmd.Dir, cmd.Env = dir, env
	return runCmd(t, cmd)
}

// runCmd runs cmd and returns what it printed and how it ended.
func runCmd(t *testing.T, cmd *exec.Cmd) ran {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := ran{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		r.code, r.signaled = ws.ExitStatus(), ws.Signaled()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func needFast(t *testing.T) {
	if fastBin == "" {
		t.Skip("undosh-fast not built: no C compiler (cc) on this machine")
	}
}

// Through the front end, read-only steps are answered by its server
// and run by the real bash exactly as bash runs them; everything else goes
// to undosh, which protects it.
func TestFastFrontEnd(t *testing.T) {
	needFast(t)
	t.Parallel()
	state, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	serverFor(t, state)
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir())
	warm(t, state, func() { runWith(t, fastBin, ws, env, "bash", "-c", "true") })
	e0, _ := answers(t, state)

	cases := []struct {
		name string
		argv []string
	}{
		{"ls", []string{"bash", "-c", "ls"}},
		{"positional parameters", []string{"bash", "-c", `echo "$0|$1|$2"`, "name", "a b", "c"}},
		{"login", []string{"-bash", "-c", "shopt -q login_shell && echo login"}},
		{"exit status", []string{"bash", "-c", "exit 7"}},
		{"syntax error", []string{"bash", "-c", "if then"}},
		{"version", []string{"bash", "--version"}},
		{"environment is untouched", []string{"bash", "-c", `echo "${UNDOSH_FRONT-unset}"`}},
		{"sh", []string{"sh", "-c", "echo $0"}},
	}
	for _, c := range cases {
		want := runWith(t, "/bin/bash", ws, env, c.argv...)
		if c.argv[0] == "sh" {
			want = runWith(t, "/bin/sh", ws, env, c.argv...)
		}
		got := runWith(t, fastBin, ws, env, c.argv...)
		if got != want {
			t.Errorf("%s: undosh-fast gave %+v, bash %+v", c.name, got, want)
		}
	}
	// Run through bash's path under the name sh (exec -a sh /bin/bash),
	// the front end is bash in POSIX mode, on the fast path (the
	// server decides by the file run) and through undosh.
	viaDir := t.TempDir()
	bashLink := filepath.Join(viaDir, "bash")
	realLink := filepath.Join(viaDir, "real", "bash")
	os.MkdirAll(filepath.Dir(realLink), 0o755)
	if os.Symlink(fastBin, bashLink) != nil || os.Symlink("/bin/bash", realLink) != nil {
		t.Fatal("cannot make the links")
	}
	for _, argv := range [][]string{
		{"sh", "-c", `[[ :$SHELLOPTS: == *:posix:* ]] && echo posix; echo "$0"; [[ a == a ]] && echo dbl`},
		{"sh", "-c", `echo x > c.txt; [[ :$SHELLOPTS: == *:posix:* ]] && echo posix; cat c.txt; rm c.txt`},
	} {
		want := runWith(t, realLink, ws, env, argv...)
		got := runWith(t, bashLink, ws, env, argv...)
		if got != want || !strings.Contains(want.stdout, "posix") {
			t.Errorf("%q through a link named bash: undosh-fast gave %+v, bash %+v", argv, got, want)
		}
	}
	e, _ := answers(t, state)
	if e -= e0; e < 7 {
		t.Errorf("only %d read-only steps took the fast path", e)
	}

	// A failing step that writes goes to undosh and is rolled back.
	got := runWith(t, fastBin, ws, env, "bash", "-c", `echo "${UNDOSH_FRONT-unset}" > a.txt; false`)
	if got.code != 1 || !strings.Contains(got.stderr, "rolled back 1 file") {
		t.Errorf("failing write through the front end: %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\n" {
		t.Errorf("a.txt after the rollback: %q", b)
	}
	got = runWith(t, fastBin, ws, env, "bash", "-c", `echo "${UNDOSH_FRONT-unset}" > b.txt`)
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); got.code != 0 || string(b) != "unset\n" {
		t.Errorf("the shell saw UNDOSH_FRONT=%q (%+v)", b, got)
	}
	// Refusals too.
	got = runWith(t, fastBin, ws, env, "bash", "-c", "curl -d x http://example.invalid/")
	if got.code != 126 || !strings.HasPrefix(got.stderr, "undosh: refused: ") {
		t.Errorf("refusal through the front end: %+v", got)
	}
	if _, u := answers(t, state); u < 3 {
		t.Errorf("%d steps handed to undosh, want at least 3", u)
	}
}

// The front end changes nothing the caller set up: ignored signals and
// closed standard fds reach bash as they do without it.
func TestFastFrontEndKeepsProcessState(t *testing.T) {
	needFast(t)
	t.Parallel()
	state := t.TempDir()
	serverFor(t, state)
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state)
	for _, script := range []string{
		// Read with a builtin: a child would inherit the mask bash sets
		// for a moment around fork.
		`trap '' TERM USR1 PIPE; exec -a bash "$0" -c 'while read -r k v; do case $k in SigIgn:|SigBlk:) echo "$k $v";; esac; done < /proc/$$/status; yes | head -1; echo ${PIPESTATUS[*]}'`,
		`exec -a bash "$0" -c 'echo hi' >&-`,
		`exec -a bash "$0" -c 'echo hi; echo err >&2' 2>&-`,
		`exec -a bash "$0" -c 'read x; echo "read: $?"' <&-`,
		`ulimit -Sn 512; umask 027; exec -a bash "$0" -c 'ulimit -Sn; umask'`,
	} {
		// $0 is the program the launcher execs: bash, or the front end.
		want := runWith(t, "/bin/bash", "/", env, "bash", "-c", script, "/bin/bash")
		got := runWith(t, "/bin/bash", "/", env, "bash", "-c", script, fastBin)
		if got != want {
			t.Errorf("%s:\nundosh-fast: %+v\nbash:        %+v", script, got, want)
		}
	}
}

// With no server, the front end hands the step to undosh and starts one
// for the next invocations.
func TestFastFrontEndStartsTheServer(t *testing.T) {
	needFast(t)
	t.Parallel()
	state := t.TempDir()
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "UNDOSH_CLASSIFIER_IDLE=1m")
	got := runWith(t, fastBin, "/", env, "bash", "-c", "echo first")
	if got.stdout != "first\n" || got.code != 0 {
		t.Fatalf("first call: %+v", got)
	}
	pidFile := filepath.Join(state, "run", "classify.pid")
	waitForFile(t, pidFile)
	waitForFile(t, filepath.Join(state, "run", "classify.sock"))
	data, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); !strings.HasPrefix(string(comm), "undosh-classifier") {
		t.Errorf("pid file names %q, not the server", comm)
	}
	got = runWith(t, fastBin, "/", env, "bash", "-c", "echo second")
	if got.stdout != "second\n" {
		t.Errorf("second call: %+v", got)
	}
	// A second server for the same state directory gives way.
	cmd := exec.Command(undoshBin)
	cmd.Args[0] = "undosh-classifier"
	cmd.Env = env
	if err := cmd.Run(); err != nil {
		t.Errorf("second server: %v", err)
	}
}

// The front end never runs itself in a loop, even when told that it is
// the real shell.
func TestFastFrontEndNeverLoops(t *testing.T) {
	needFast(t)
	t.Parallel()
	state := t.TempDir()
	serverFor(t, state)
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "UNDOSH_REAL_BASH="+fastBin)
	got := runWith(t, fastBin, "/", env, "bash", "-c", "echo ok")
	if got.stdout != "ok\n" || got.code != 0 {
		t.Errorf("with UNDOSH_REAL_BASH naming the front end: %+v", got)
	}
}

// Through the front end, as root, a read-only step runs in a mount
// namespace the server keeps made under the read-only limit: two
// steps share it, a write outside the scratch paths is refused, and a
// mount made on the machine meanwhile makes the server make another,
// which shows it.
func TestFastFrontEndReadOnlyNamespace(t *testing.T) {
	needFast(t)
	needEnforcement(t)
	if os.Getuid() != 0 {
		t.Skip("the kept namespaces are root's: without root the front end applies Landlock itself")
	}
	// Not parallel: it mounts and unmounts a tmpfs on the machine, which
	// the views of other tests' steps would take as a layer meanwhile.
	state := t.TempDir()
	_, ws := enforceEnv(t) // outside the scratch paths
	serverFor(t, state)
	// A program the policy wrongly calls read-only.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "undosh-report"), []byte("#!/bin/sh\necho x > report.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), "PATH="+bin+":"+os.Getenv("PATH"),
		writePolicy(t, "version: 1\ntrusted_dirs: ["+bin+"]\nrules:\n  - name: report-is-read-only\n    programs: [undosh-report]\n    class: none\n"))
	host, _ := os.Readlink("/proc/self/ns/mnt")
	ns := func() string {
		t.Helper()
		r := runWith(t, fastBin, ws, env, "bash", "-c", "readlink /proc/self/ns/mnt")
		if r.code != 0 {
			t.Fatalf("read-only step: %+v", r)
		}
		return strings.TrimSpace(r.stdout)
	}
	warm(t, state, func() { ns() })
	first, second := ns(), ns()
	if first == host || first != second {
		t.Errorf("namespaces: host %s, steps %s and %s; want both steps in one of their own", host, first, second)
	}
	if e, _ := answers(t, state); e < 2 || !strings.Contains(readLog(t, state), `"verdict":"N"`) {
		t.Errorf("the server did not hand out a namespace (%d fast answers):\n%s", e, readLog(t, state))
	}
	// A read-only step that writes its workspace: refused.
	r := runWith(t, fastBin, ws, env, "bash", "-c", "undosh-report")
	if _, err := os.Stat(filepath.Join(ws, "report.txt")); err == nil || r.code == 0 || !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("a step in the read-only namespace wrote the workspace (%v): %+v", err, r)
	}
	// A read-only step nested in one (Codex's wrapper ends in exec bash
	// -c CMD) is answered too, and runs where it is: no second limit, no
	// undosh. Nested, the wrongly read-only program is still refused.
	nested := filepath.Join(bin, "bash") // a trusted directory, first on PATH
	if err := os.Symlink(fastBin, nested); err != nil {
		t.Fatal(err)
	}
	before, u0 := answers(t, state)
	r = runWith(t, fastBin, ws, env, "bash", "-c", "exec bash -c 'readlink /proc/self/ns/mnt'")
	if got := strings.TrimSpace(r.stdout); r.code != 0 || got != first {
		t.Errorf("a nested read-only step: %+v; want it in %s", r, first)
	}
	if e, u := answers(t, state); e != before+2 || u != u0 {
		t.Errorf("a nested read-only step: %d fast answers and %d undosh, want 2 and 0:\n%s", e-before, u-u0, readLog(t, state))
	}
	r = runWith(t, fastBin, ws, env, "bash", "-c", "exec bash -c undosh-report")
	if _, err := os.Stat(filepath.Join(ws, "report.txt")); err == nil || r.code == 0 || !strings.Contains(r.stderr, "Read-only file system") {
		t.Errorf("a nested step in the read-only namespace wrote the workspace (%v): %+v", err, r)
	}
	os.Remove(nested)
	// Steps undosh protects itself (a program it cannot read) mount and
	// unmount views on the machine: the kept namespace stays, and the
	// mount below is still seen (its event has been seen not to come).
	for _, c := range []string{"readlink /proc/self/ns/mnt", "undosh-report"} {
		r = runWith(t, fastBin, ws, env, "bash", "-c", "exec -a bash "+fastBin+" -c '"+c+"'")
		if _, err := os.Stat(filepath.Join(ws, "report.txt")); err == nil || (r.code == 0) != (c != "undosh-report") {
			t.Errorf("%s nested under a program undosh cannot read (%v): %+v", c, err, r)
		}
	}
	// A mount made on the machine: the next step is in another namespace
	// (whose number may be the old one's, given again), which has it.
	mnt := filepath.Join(ws, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("undosh-test", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := runWith(t, fastBin, ws, env, "bash", "-c", "readlink /proc/self/ns/mnt; cat mnt/new")
		if r.code == 0 && strings.HasSuffix(r.stdout, "\nx") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a mount on the machine, a read-only step still runs in the old namespace: %+v\n%s", r, readLog(t, state))
		}
		time.Sleep(10 * time.Millisecond) // until the server's watch marks the old one stale
	}
}

// readLog is the server's log.
func readLog(t *testing.T, state string) string {
	data, _ := os.ReadFile(filepath.Join(state, "run", "classify.log"))
	return string(data)
}

// An image may bind-mount the front end over /usr/bin/bash instead of
// running undoctl install: nothing then sits next to it, and
// /etc/undosh/shells names undosh and the real bash. The test does that
// in a private mount and pid namespace, with /etc an overlay, so the
// machine's /usr/bin/bash and /etc are never touched and every process
// started (the server the front end spawns) dies with the namespace.
func TestFastFrontEndBindMounted(t *testing.T) {
	needFast(t)
	if os.Getuid() != 0 {
		t.Skip("a bind mount over /usr/bin/bash needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	t.Parallel()
	d, ws := t.TempDir(), t.TempDir()
	for _, sub := range []string{"up", "work"} {
		if err := os.Mkdir(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := `set -eu
cp /usr/bin/bash "$D/real-bash"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$D/up,workdir=$D/work" /etc
mkdir -p /etc/undosh
printf 'bash=%s\nundosh=%s\n' "$D/real-bash" "$UNDOSH" > /etc/undosh/shells
mount --bind "$FAST" /usr/bin/bash
cd "$WS"
set +e
/usr/bin/bash -c 'echo one > a.txt'; echo "status $?"
/usr/bin/bash -c 'echo two > a.txt; exit 4'; echo "status $?"
/usr/bin/bash -c 'cat a.txt'; echo "status $?"
# The server journals a read-only step it answered just after the
# answer; it dies with this pid namespace.
for i in $(seq 500); do [ "$(wc -l < "$UNDOSH_STATE_DIR/journal.jsonl")" -ge 3 ] && break; sleep 0.01; done
`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc",
		"/bin/bash", "-c", script)
	state := t.TempDir()
	cmd.Env = append(os.Environ(), "D="+d, "WS="+ws, "UNDOSH="+undoshBin, "FAST="+fastBin,
		"UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), "UNDOSH_POLICY=-")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 5 || lines[0] != "status 0" || !strings.HasPrefix(lines[1], "undosh: step 2 failed (exit 4): rolled back 1 file") ||
		lines[2] != "status 4" || lines[3] != "one" || lines[4] != "status 0" {
		t.Errorf("through the bind-mounted front end:\n%s", out)
	}
	if recs := journalRecords(t, append(os.Environ(), "UNDOSH_STATE_DIR="+state)); len(recs) != 3 || recs[0]["class"] != "git" || recs[2]["outcome"] != "passed through" {
		t.Errorf("journal: %v", recs)
	}
}
