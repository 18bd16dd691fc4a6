package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/undosh/undosh/internal/enforce"
)

// needEnforcement skips unless the kernel can enforce a step's class
// here (a mount namespace as root, or Landlock).
func needEnforcement(t *testing.T) {
	t.Helper()
	if _, err := enforce.Probe(enforce.Auto); err != nil {
		t.Skipf("enforcement needs CAP_SYS_ADMIN or Landlock: %v", err)
	}
}

// enforceEnv is an environment with enforcement on, its own state
// directory and HOME, and a git workspace holding one committed file.
func enforceEnv(t *testing.T) (env []string, ws string) {
	t.Helper()
	// Not under /tmp, a scratch path every step may write, nor under a
	// path the policy calls the system's (/root): /home, else $HOME.
	var err error
	ws, err = os.MkdirTemp("/home", "undosh-enforce-test-")
	if err != nil {
		home := os.Getenv("HOME")
		if home == "" || home == "/" {
			t.Skip("enforcement tests need a workspace outside the scratch paths: /home is not writable and HOME is not set")
		}
		if ws, err = os.MkdirTemp(home, "undosh-enforce-test-"); err != nil {
			t.Skipf("cannot make a workspace outside the scratch paths: %v", err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	env = append(os.Environ(), "UNDOSH_STATE_DIR="+t.TempDir(), "HOME="+t.TempDir(), "UNDOSH_POLICY=-",
		"UNDOSH_ENFORCE=1", "UNDOSH_REAL_BASH=/bin/bash")
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"}} {
		if args[0] == "add" {
			if err := os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("before\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return env, ws
}

// leftMounts lists the mounts of this process's mount table that name
// dir: a step under enforcement mounts only in a namespace of its own,
// which goes with it. (The whole table is not compared: tests of other
// packages mount copies of the machine meanwhile.)
func leftMounts(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, dir) {
			out = append(out, l)
		}
	}
	return out
}

// A step the classifier puts in git, but which writes /etc (through a
// program it cannot read), writes /etc only in its view of the machine:
// what undosh then does is the policy's escalate. A step that fails has
// it dropped, whatever escalate says.
func TestEnforceMisclassifiedStep(t *testing.T) {
	needForkEngine(t)
	tool := func(p string, code int) string {
		return fmt.Sprintf("import sys\nopen('kept.txt', 'w').write('changed\\n')\nopen('%s', 'w').write('x')\nsys.exit(%d)\n", p, code)
	}
	setup := func(t *testing.T, escalate string, code int) (env []string, ws, p string) {
		env, ws = enforceEnv(t)
		p = harmless(t)
		if err := os.WriteFile(filepath.Join(ws, "tool.py"), []byte(tool(p, code)), 0o644); err != nil {
			t.Fatal(err)
		}
		return append(env, writePolicy(t, "version: 1\nescalate: "+escalate+"\n")), ws, p
	}
	check := func(t *testing.T, ws, p, kept string, etc bool) {
		t.Helper()
		if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != kept {
			t.Errorf("kept.txt = %q, want %q", b, kept)
		}
		if _, err := os.Lstat(p); (err == nil) != etc {
			t.Errorf("%s exists: %v, want %v", p, err == nil, etc)
		}
		if left := leftMounts(t, ws); len(left) > 0 {
			t.Errorf("mounts left behind on the host:\n%s", strings.Join(left, "\n"))
		}
	}

	t.Run("commit", func(t *testing.T) {
		env, ws, p := setup(t, "commit", 0)
		got := runWith(t, undoshBin, ws, env, "bash", "-c", "python3 tool.py")
		if got.code != 0 || len(undoshLines(got.stderr)) != 1 ||
			!strings.Contains(got.stderr, "wrote "+p+": kept as a machine step would be; undo it with: undoctl back 1") {
			t.Fatalf("kept step: %+v", got)
		}
		check(t, ws, p, "changed\n", true)
		rec := lastRecord(t, env)
		if esc, _ := rec["escalated"].(map[string]any); esc["how"] != "commit" || esc["to"] != "fork" || rec["outcome"] != "committed" || rec["machine"] == nil {
			t.Errorf("journal: %v", rec)
		}
		// undoctl is undosh's own tool: through undosh too it runs as it
		// is, outside any limit.
		back := runWith(t, undoshBin, ws, append(env, "PATH="+filepath.Dir(undoctlBin)+":"+os.Getenv("PATH")), "bash", "-c", "undoctl back 1")
		if back.code != 0 {
			t.Fatalf("undoctl back 1, through undosh: %+v", back)
		}
		check(t, ws, p, "before\n", false)
	})
	t.Run("rerun", func(t *testing.T) {
		env, ws, p := setup(t, "rerun", 0)
		got := runWith(t, undoshBin, ws, env, "bash", "-c", "python3 tool.py")
		if got.code != 0 || !strings.Contains(got.stderr, "wrote "+p+": everything it changed was put back") ||
			!strings.Contains(got.stderr, "it runs again as a machine step") {
			t.Fatalf("rerun step: %+v", got)
		}
		check(t, ws, p, "changed\n", true) // committed from the copy
		recs := journalRecords(t, env)
		if len(recs) != 2 || recs[0]["outcome"] != "rolled back" || recs[1]["class"] != "fork" ||
			recs[1]["outcome"] != "committed" || recs[1]["rerun_of"] != float64(1) {
			t.Errorf("journal: %v", recs)
		}
	})
	t.Run("rerun with a pipe on stdin", func(t *testing.T) {
		env, ws, p := setup(t, "rerun", 0)
		cmd := exec.Command(undoshBin, "-c", "python3 tool.py")
		cmd.Dir, cmd.Env = ws, env
		cmd.Stdin = strings.NewReader("data")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 126 || !strings.Contains(stderr.String(), "cannot run again as a machine step: its standard input is a pipe") {
			t.Fatalf("exit %v, stderr %q", err, stderr.String())
		}
		check(t, ws, p, "before\n", false)
	})
	t.Run("refuse", func(t *testing.T) {
		env, ws, p := setup(t, "refuse", 0)
		got := runWith(t, undoshBin, ws, env, "bash", "-c", "python3 tool.py")
		lines := undoshLines(got.stderr)
		if got.code != 126 || len(lines) != 2 || !strings.HasPrefix(lines[0], "undosh: refused: step 1, run as a workspace step, wrote "+p) ||
			!strings.Contains(lines[0], "rolled back 1 file") || lines[1] != "undosh: hint: run it as a machine step: undoctl run --fork -- bash -c 'python3 tool.py'" {
			t.Fatalf("refused step: %+v", got)
		}
		check(t, ws, p, "before\n", false)
		if rec := lastRecord(t, env); rec["outcome"] != "refused" {
			t.Errorf("journal: %v", rec)
		}
	})
	t.Run("failed", func(t *testing.T) {
		env, ws, p := setup(t, "commit", 3)
		got := runWith(t, undoshBin, ws, env, "bash", "-c", "python3 tool.py")
		if got.code != 3 || !strings.Contains(got.stderr, "rolled back 1 file") || !strings.Contains(got.stderr, "what it wrote beyond its workspace ("+p+") was dropped too") {
			t.Fatalf("failed step: %+v", got)
		}
		check(t, ws, p, "before\n", false)
		if esc, _ := lastRecord(t, env)["escalated"].(map[string]any); esc["how"] != "drop" {
			t.Errorf("journal: %v", lastRecord(t, env))
		}
	})
	t.Run("verify fails", func(t *testing.T) {
		env, ws, p := setup(t, "commit", 0)
		got := runWith(t, undoshBin, ws, append(env, writePolicy(t, "version: 1\nverify: \"test ! -e "+p+"\"\n")), "bash", "-c", "python3 tool.py")
		if got.code != 1 || !strings.Contains(got.stderr, "and passed, but verify `test ! -e") || !strings.Contains(got.stderr, "everything it changed was put back (rolled back 1 file") {
			t.Fatalf("step whose verify fails: %+v", got)
		}
		check(t, ws, p, "before\n", false)
	})

	// With a hard limit (no view: the fork engine is off), the kernel
	// refuses the write; the notice names the path and the command that
	// runs the step as a machine step.
	t.Run("hard limit", func(t *testing.T) {
		env, ws, p := setup(t, "commit", 0)
		env = append(env, "UNDOSH_NO_FORK_ENGINE=1")
		got := runWith(t, undoshBin, ws, env, "bash", "-c", "python3 tool.py")
		if got.code == 0 {
			t.Fatalf("the step that writes %s passed under a hard limit: %+v", p, got)
		}
		check(t, ws, p, "before\n", false)
		for _, want := range []string{"rolled back 1 file", "stopped writing " + p, "it needs class fork",
			"undoctl run --fork -- bash -c 'python3 tool.py'"} {
			if !strings.Contains(got.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, got.stderr)
			}
		}
	})
}

// undoshLines are the lines of stderr that undosh wrote.
func undoshLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "undosh: ") {
			out = append(out, l)
		}
	}
	return out
}

// A step the policy calls read-only runs under a read-only limit, exec'd
// as a pass-through is: a write to the workspace is refused and changes
// nothing, the step keeps the pid the caller started, and scratch paths,
// /dev/null and pipes stay writable.
func TestEnforceReadOnlyStep(t *testing.T) {
	needEnforcement(t)
	env, ws := enforceEnv(t)
	// A program on PATH that the policy wrongly calls read-only.
	bin := t.TempDir()
	pol := writePolicy(t, "version: 1\ntrusted_dirs: ["+bin+"]\nrules:\n  - name: report-is-read-only\n    programs: [undosh-report]\n    class: none\n")
	if err := os.WriteFile(filepath.Join(bin, "undosh-report"), []byte("#!/bin/bash\necho scratch > \"$TMPFILE\"\necho null > /dev/null\necho out\necho x > report.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(os.TempDir(), "undosh-enforce-scratch-"+filepath.Base(ws))
	t.Cleanup(func() { os.Remove(scratch) })
	env = append(env, pol, "TMPFILE="+scratch, "PATH="+bin+":"+os.Getenv("PATH"))
	if c := runWith(t, undoctlBin, ws, env, "undoctl", "explain", "undosh-report"); !strings.Contains(c.stdout, "class:     none") {
		t.Fatalf("the test policy does not make undosh-report read-only:\n%s%s", c.stdout, c.stderr)
	}
	cmd := exec.Command(undoshBin, "-c", "echo pid $$; undosh-report")
	cmd.Dir, cmd.Env = ws, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil || stdout.String() != fmt.Sprintf("pid %d\nout\n", cmd.Process.Pid) {
		t.Errorf("read-only step that writes the workspace: %v, stdout %q (want the pid undosh was started as, %d), stderr %q", err, stdout.String(), cmd.Process.Pid, stderr.String())
	}
	if want := "report.txt: " + refusal(); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q: %q", want, stderr.String())
	}
	if _, err := os.Lstat(filepath.Join(ws, "report.txt")); !os.IsNotExist(err) {
		t.Errorf("report.txt exists: the read-only step wrote the workspace")
	}
	if left := leftMounts(t, ws); len(left) > 0 {
		t.Errorf("mounts left behind on the host:\n%s", strings.Join(left, "\n"))
	}
	if b, err := os.ReadFile(scratch); err != nil || string(b) != "scratch\n" {
		t.Errorf("the scratch write was stopped: %q, %v", b, err)
	}
	// Off, the same step writes, and nothing holds it off the
	// workspace: its checkpoint undoes it.
	off := runWith(t, undoshBin, ws, append(env, "UNDOSH_ENFORCE=0"), "bash", "-c", "undosh-report")
	if _, err := os.Lstat(filepath.Join(ws, "report.txt")); off.code != 0 || err != nil {
		t.Fatalf("without enforcement: %+v, report.txt: %v", off, err)
	}
	recs := journalRecords(t, env)
	last := recs[len(recs)-1]
	if last["class"] != "none" || last["command"] != "undosh-report" || last["checkpoints"] == nil {
		t.Fatalf("without enforcement, the read-only step's record: %v, want its checkpoint", last)
	}
	if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", fmt.Sprint(last["id"])); back.code != 0 {
		t.Fatalf("undoctl back: %+v", back)
	}
	if _, err := os.Lstat(filepath.Join(ws, "report.txt")); err == nil {
		t.Errorf("report.txt is still there after undoctl back")
	}
}

// refusal is what the kernel answers a write the read-only limit
// refuses: a read-only mount as root, Landlock otherwise.
func refusal() string {
	if m, _ := enforce.Probe(enforce.Auto); m == enforce.Landlock {
		return "Permission denied"
	}
	return "Read-only file system"
}

// seccompHelper is a program that refuses, with a seccomp filter, every
// way undosh holds a step to its class (unshare, setns, mount and the new
// mount API, Landlock), as a container's profile may, then execs its
// arguments.
const seccompHelper = `#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#define DENY(nr, err) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | err)
int main(int argc, char **argv) {
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		DENY(SYS_unshare, EPERM), DENY(SYS_setns, EPERM), DENY(SYS_mount, EPERM),
		DENY(428, EPERM), DENY(429, EPERM), DENY(442, EPERM),
		DENY(444, ENOSYS), DENY(445, ENOSYS), DENY(446, ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		return 125;
	}
	execv(argv[1], argv + 1);
	perror("exec");
	return 127;
}
`

// Where the kernel offers neither a mount namespace nor Landlock (a
// seccomp profile refuses both), undosh says so once, and protects a
// read-only step as a workspace step: a checkpoint, journalled.
func TestEnforceUnavailable(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil || runtime.GOARCH != "amd64" {
		t.Skip("the seccomp helper needs cc, and is written for amd64")
	}
	src := filepath.Join(t.TempDir(), "deny.c")
	helper := filepath.Join(t.TempDir(), "deny")
	if err := os.WriteFile(src, []byte(seccompHelper), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-o", helper, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	os.Chmod(filepath.Dir(helper), 0o755)
	env, ws := enforceEnv(t)
	first := runWith(t, helper, ws, env, helper, undoshBin, "-c", "cat kept.txt")
	if first.code != 0 || first.stdout != "before\n" {
		t.Fatalf("a read-only step where nothing can hold it: %+v", first)
	}
	note := "the kernel offers no way here to hold a step to its class"
	if n := strings.Count(first.stderr, note); n != 1 {
		t.Errorf("the first step says %d times that nothing holds it, want once:\n%s", n, first.stderr)
	}
	if rec := lastRecord(t, env); rec["class"] != "git" || rec["checkpoints"] == nil {
		t.Errorf("the read-only step was not protected as a workspace step: %v", rec)
	}
	second := runWith(t, helper, ws, env, helper, undoshBin, "-c", "echo x > kept.txt; false")
	if strings.Contains(second.stderr, note) || !strings.Contains(second.stderr, "rolled back 1 file") {
		t.Errorf("the second step: %+v", second)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "before\n" {
		t.Errorf("kept.txt = %q after the rollback", b)
	}
	doc := runWith(t, helper, ws, env, helper, undoctlBin, "doctor")
	if !strings.Contains(doc.stdout+doc.stderr, "steps cannot be held to their class here") {
		t.Errorf("doctor does not say that nothing holds a step here:\n%s%s", doc.stdout, doc.stderr)
	}
}

// A process a workspace step leaves running keeps the step's limit: in
// its view, once the step has ended, it still writes the workspace, and
// its writes beyond the workspace fail instead of landing where no one
// reads them.
func TestEnforceDaemonKeepsLimit(t *testing.T) {
	needForkEngine(t)
	env, ws := enforceEnv(t)
	p := harmless(t)
	// The daemon waits for go, which the test writes once the step ended.
	daemon := fmt.Sprintf(`import os, time
while not os.path.exists("go"):
    time.sleep(0.01)
open("in-ws", "w").write("late\n")
try:
    open(%q, "w").write("late\n")
except OSError as e:
    open("refused", "w").write(e.strerror + "\n")
`, p)
	if err := os.WriteFile(filepath.Join(ws, "daemon.py"), []byte(daemon), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runWith(t, undoshBin, ws, env, "bash", "-c", "python3 daemon.py </dev/null >/dev/null 2>&1 & echo started"); r.code != 0 || r.stdout != "started\n" {
		t.Fatalf("the step: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(ws, "refused"))
	if b, err := os.ReadFile(filepath.Join(ws, "in-ws")); err != nil || string(b) != "late\n" {
		t.Errorf("the daemon's workspace write: %q, %v", b, err)
	}
	if _, err := os.Stat(p); err == nil {
		t.Errorf("the daemon's write beyond the workspace reached the machine")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "refused")); string(b) != "Read-only file system\n" {
		t.Errorf("the daemon's write beyond the workspace failed with %q, want the view's read-only file system", b)
	}
}

// Without root (a user of its own: nobody), a workspace step is held by
// Landlock: a write it may make for real (its own home) but not as a
// workspace step is refused, the workspace rolled back, and the hint
// names the path. A read-only step runs under Landlock too.
func TestEnforceNonRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the test runs undosh as nobody, which needs root")
	}
	if _, err := enforce.Probe(enforce.Landlock); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	base, err := os.MkdirTemp("/home", "undosh-nonroot-")
	if err != nil {
		t.Skipf("no /home: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ws, home, state := filepath.Join(base, "ws"), filepath.Join(base, "home"), filepath.Join(base, "state")
	for _, d := range []string{ws, home, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := "open('kept.txt', 'w').write('changed\\n')\nopen('" + home + "/notes.txt', 'w').write('x')\n"
	if err := os.WriteFile(filepath.Join(ws, "tool.py"), []byte(tool), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{base, ws, home, state} {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })
	}
	os.Chmod(base, 0o755)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "UNDOSH_STATE_DIR=" + state, "UNDOSH_POLICY=-", "UNDOSH_REAL_BASH=/bin/bash"}
	var started int // the pid of the last undosh run started
	run := func(script string) ran {
		t.Helper()
		cmd := exec.Command(undoshBin, "-c", script)
		defer func() {
			if cmd.Process != nil {
				started = cmd.Process.Pid
			}
		}()
		cmd.Dir, cmd.Env = ws, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := ran{stdout: out.String(), stderr: errb.String()}
		if cmd.ProcessState != nil {
			r.code = cmd.ProcessState.ExitCode()
		} else {
			t.Fatal(err)
		}
		return r
	}
	got := run("python3 tool.py")
	if got.code == 0 || !strings.Contains(got.stderr, "stopped writing "+home+"/notes.txt") || !strings.Contains(got.stderr, "rolled back 1 file") {
		t.Errorf("a workspace step that writes its home, as nobody: %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "before\n" {
		t.Errorf("kept.txt = %q: not rolled back", b)
	}
	if _, err := os.Stat(filepath.Join(home, "notes.txt")); err == nil {
		t.Errorf("the write beyond the workspace went through")
	}
	if r := run("grep -c . kept.txt; grep NoNewPrivs /proc/self/status"); r.code != 0 || !strings.Contains(r.stdout, "1\nNoNewPrivs:\t1") {
		t.Errorf("a read-only step as nobody, under Landlock: %+v", r)
	}
	// A plain workspace step as nobody, under Landlock, is handed over:
	// its shell is the process started (shell/handover.go).
	if r := run("echo changed > kept.txt; echo $$; false"); r.code != 1 || r.stdout != strconv.Itoa(started)+"\n" || !strings.Contains(r.stderr, "rolled back 1 file") {
		t.Errorf("a failing edit as nobody: want $$ %d, exit 1 and a rollback: %+v", started, r)
	}
	// Codex's wrapper shape: a nested undosh under Landlock cannot read
	// the outer one's /proc/PID/exe; it finds the outer step by its mark,
	// takes no step of its own, and the failing edit is rolled back.
	before := len(journalRecords(t, env))
	got = run(`export PATH=/x:$PATH; exec '` + undoshBin + `' -c 'echo changed > kept.txt && false'`)
	if got.code != 1 || !strings.Contains(got.stderr, "rolled back 1 file") {
		t.Errorf("a failing edit through a nested undosh, as nobody: %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "before\n" {
		t.Errorf("kept.txt = %q after the nested step", b)
	}
	if n := len(journalRecords(t, env)) - before; n != 1 {
		t.Errorf("the nested step left %d records, want the outer one only", n)
	}
}

// A nested undosh inside a view of the machine sees undosh's file
// through the view's overlay (another device): it still finds the outer
// step, and a failing edit is rolled back once. undosh is copied where
// the view overlays it (not a scratch path, which the view binds).
func TestNestedInView(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("views of the machine need root")
	}
	needEnforcement(t)
	t.Parallel()
	dir, err := os.MkdirTemp("/var/lib", "undosh-nest-")
	if err != nil {
		t.Skipf("no /var/lib to copy undosh to: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "undosh")
	data, err := os.ReadFile(undoshBin)
	if err == nil {
		err = os.WriteFile(bin, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	env, ws := enforceEnv(t)
	r := runWith(t, bin, ws, env, "bash", "-c", `export PATH=/x:$PATH; exec '`+bin+`' -c 'echo changed > kept.txt && false'`)
	if r.code != 1 || !strings.Contains(r.stderr, "rolled back 1 file") {
		t.Errorf("a failing edit through a nested undosh in a view: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "before\n" {
		t.Errorf("kept.txt = %q after the nested step", b)
	}
	if recs := journalRecords(t, env); len(recs) != 1 {
		t.Errorf("journal: want the outer step only, got %v", recs)
	}
}

// sudo under enforcement, as a user sudo lets run anything: Landlock's
// no_new_privs would stop it, so undosh checkpoints such a step instead,
// and sudo works. The sudoers entry is a file in a directory bound over
// /etc/sudoers.d in a private mount namespace (unshare -m), so the
// machine's sudoers never change and the binding goes with the process.
func TestEnforceSudoNonRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the test runs undosh as nobody with a sudoers entry, which needs root")
	}
	if _, err := enforce.Probe(enforce.Landlock); err != nil {
		t.Skipf("no Landlock here: %v", err)
	}
	sudo, err := exec.LookPath("sudo")
	if err != nil {
		t.Skip("no sudo here (.ci/run installs it)")
	}
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here (util-linux)", tool)
		}
	}
	if data, err := os.ReadFile("/etc/sudoers"); err != nil || !strings.Contains(string(data), "includedir /etc/sudoers.d") {
		t.Skip("/etc/sudoers does not include /etc/sudoers.d")
	}
	base, err := os.MkdirTemp("/home", "undosh-sudo-")
	if err != nil {
		t.Skipf("no /home: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	ws, home, state, sudoers := filepath.Join(base, "ws"), filepath.Join(base, "home"), filepath.Join(base, "state"), filepath.Join(base, "sudoers.d")
	for _, d := range []string{ws, home, state, sudoers} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sudoers, "undosh-test"), []byte("nobody ALL=(ALL) NOPASSWD: ALL\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{ws, home, state} {
		os.Lchown(d, 65534, 65534)
	}
	run := func(script string) ran {
		t.Helper()
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" /etc/sudoers.d && shift && exec setpriv --reuid 65534 --regid 65534 --clear-groups "$@"`,
			"sh", sudoers, "env", "-i", "PATH="+os.Getenv("PATH"), "HOME="+home, "UNDOSH_STATE_DIR="+state,
			"UNDOSH_POLICY=-", "UNDOSH_REAL_BASH=/bin/bash", undoshBin, "-c", script)
		cmd.Dir = ws
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if cmd.ProcessState == nil {
			t.Fatal(err)
		}
		return ran{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
	}
	if r := run("id -u; grep NoNewPrivs /proc/self/status"); r.code != 0 || r.stdout != "65534\nNoNewPrivs:\t1\n" {
		t.Fatalf("a read-only step as nobody, under Landlock: %+v", r)
	}
	if r := run(sudo + " -n id -u"); r.code != 0 || r.stdout != "0\n" {
		t.Errorf("sudo -n id -u as nobody, under enforcement: %+v", r)
	}
	if r := run("sudo -n sh -c 'echo uid $(id -u)'"); r.code != 0 || r.stdout != "uid 0\n" {
		t.Errorf("sudo through PATH, as nobody, under enforcement: %+v", r)
	}
}

// A read-only step whose workspace lies in a scratch path (a project in
// /tmp, which every step may write) is held off the workspace all the
// same. As root a mount namespace keeps the workspace read-only and the
// rest of /tmp writable. As nobody, under Landlock, which grants whole
// trees, nothing can: the workspace is checkpointed first, walking, so
// that undoctl back undoes the wrong guess.
func TestEnforceReadOnlyInScratch(t *testing.T) {
	needEnforcement(t)
	if os.Getuid() != 0 {
		t.Skip("the test runs undosh as root and as nobody, which needs root")
	}
	base, err := os.MkdirTemp("/tmp", "undosh-in-scratch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	bin := filepath.Join(base, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// A program the policy wrongly calls read-only: it writes a file in
	// /tmp outside the workspace, then the workspace's kept.txt.
	if err := os.WriteFile(filepath.Join(bin, "undosh-report"), []byte("#!/bin/bash\necho scratch > \"$SCRATCH\"\necho changed > kept.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(base, "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\ntrusted_dirs: ["+bin+"]\nrules:\n  - name: report-is-read-only\n    programs: [undosh-report]\n    class: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	for _, who := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"nobody", 65534}} {
		t.Run(who.name, func(t *testing.T) {
			dir := filepath.Join(base, who.name)
			ws, home, state := filepath.Join(dir, "ws"), filepath.Join(dir, "home"), filepath.Join(dir, "state")
			for _, d := range []string{ws, home, state} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("before\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, who.uid, who.uid) })
			scratch := filepath.Join(dir, "scratch.txt")
			env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home, "UNDOSH_STATE_DIR=" + state, "UNDOSH_POLICY=" + pol,
				"UNDOSH_REAL_BASH=/bin/bash", "SCRATCH=" + scratch}
			run := func(name string, argv ...string) ran {
				t.Helper()
				cmd := exec.Command(name, argv...)
				cmd.Dir, cmd.Env = ws, env
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(who.uid), Gid: uint32(who.uid)}}
				return runCmd(t, cmd)
			}
			if c := run(undoctlBin, "explain", "undosh-report"); !strings.Contains(c.stdout, "class:     none") {
				t.Fatalf("the test policy does not make undosh-report read-only:\n%s%s", c.stdout, c.stderr)
			}
			got := run(undoshBin, "-c", "undosh-report")
			if b, err := os.ReadFile(scratch); err != nil || string(b) != "scratch\n" {
				t.Errorf("the write to /tmp outside the workspace was stopped: %q, %v (%+v)", b, err, got)
			}
			kept, _ := os.ReadFile(filepath.Join(ws, "kept.txt"))
			if m, _ := enforce.Probe(enforce.Auto); who.uid == 0 && m == enforce.MountNS {
				if got.code == 0 || !strings.Contains(got.stderr, "kept.txt: Read-only file system") || string(kept) != "before\n" {
					t.Errorf("as root, the workspace in /tmp was not held read-only: kept.txt %q, %+v", kept, got)
				}
				if fastBin == "" {
					return
				}
				// Through the front end, whose server hands it a kept
				// namespace that holds the workspace.
				serverFor(t, state)
				warm(t, state, func() { runWith(t, fastBin, ws, env, "bash", "-c", "true") })
				os.Remove(scratch)
				got = runWith(t, fastBin, ws, env, "bash", "-c", "undosh-report")
				kept, _ = os.ReadFile(filepath.Join(ws, "kept.txt"))
				if got.code == 0 || !strings.Contains(got.stderr, "kept.txt: Read-only file system") || string(kept) != "before\n" {
					t.Errorf("through the front end, the workspace in /tmp was not held read-only: kept.txt %q, %+v\n%s", kept, got, readLog(t, state))
				}
				if b, err := os.ReadFile(scratch); err != nil || string(b) != "scratch\n" {
					t.Errorf("through the front end, the write to /tmp outside the workspace was stopped: %q, %v", b, err)
				}
				if !strings.Contains(readLog(t, state), `"verdict":"N"`) {
					t.Errorf("the server handed out no namespace:\n%s", readLog(t, state))
				}
				return
			}
			if got.code != 0 || string(kept) != "changed\n" {
				t.Fatalf("as %s, under Landlock, the step: kept.txt %q, %+v", who.name, kept, got)
			}
			recs := journalRecords(t, env)
			if len(recs) != 1 || recs[0]["class"] != "none" {
				t.Fatalf("journal %v: want the read-only step, with its checkpoint", recs)
			}
			if back := run(undoctlBin, "back", "1"); back.code != 0 {
				t.Fatalf("undoctl back 1: %+v", back)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "before\n" {
				t.Errorf("kept.txt = %q after undoctl back 1", b)
			}
		})
	}
}
