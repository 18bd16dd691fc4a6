package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// program it cannot read), is stopped by the kernel: /etc is unchanged,
// the workspace is rolled back, and the notice names the path, the class
// the step needs and the command that runs it there. Run there, it
// succeeds in the copy.
func TestEnforceMisclassifiedStep(t *testing.T) {
	needEnforcement(t)
	env, ws := enforceEnv(t)
	p := harmless(t)
	tool := "open('kept.txt', 'w').write('changed\\n')\nopen('" + p + "', 'w').write('x')\n"
	if err := os.WriteFile(filepath.Join(ws, "tool.py"), []byte(tool), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "python3 tool.py")
	if got.code == 0 {
		t.Fatalf("the step that writes %s passed under enforcement: %+v", p, got)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("%s exists: enforcement did not stop the write (%v)", p, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "before\n" {
		t.Errorf("kept.txt = %q: the failed step was not rolled back", b)
	}
	for _, want := range []string{"rolled back 1 file", "stopped writing " + p, "it needs class fork",
		"undoctl run --fork -- bash -c 'python3 tool.py'"} {
		if !strings.Contains(got.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got.stderr)
		}
	}
	if rec := lastRecord(t, env); !strings.Contains(rec["notice"].(string), "it needs class fork") {
		t.Errorf("the journal's notice lacks the hint: %v", rec["notice"])
	}
	if left := leftMounts(t, ws); len(left) > 0 {
		t.Errorf("mounts left behind on the host:\n%s", strings.Join(left, "\n"))
	}

	// At the class it needs, it runs in a copy of the machine.
	if os.Getuid() != 0 {
		t.Skip("rerunning at fork needs the local fork engine (root)")
	}
	needForkEngine(t)
	rerun := runWith(t, undoctlBin, ws, env, "undoctl", "run", "--fork", "--", "bash", "-c", "python3 tool.py")
	if rerun.code != 0 {
		t.Fatalf("undoctl run --fork: %+v", rerun)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "x" {
		t.Errorf("%s after the run at fork: %q, %v", p, b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "changed\n" {
		t.Errorf("kept.txt = %q after the run at fork", b)
	}
}

// A step the policy calls read-only runs with a read-only view of the
// files: a write to the workspace is stopped, and the notice says it needs
// class git. Scratch paths, /dev/null and pipes stay writable.
func TestEnforceReadOnlyStep(t *testing.T) {
	needEnforcement(t)
	env, ws := enforceEnv(t)
	// A program on PATH that the policy wrongly calls read-only.
	bin := t.TempDir()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\ntrusted_dirs: ["+bin+"]\nrules:\n  - name: report-is-read-only\n    programs: [undosh-report]\n    class: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "undosh-report"), []byte("#!/bin/bash\necho scratch > \"$TMPFILE\"\necho null > /dev/null\necho out\necho x > report.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(os.TempDir(), "undosh-enforce-scratch-"+filepath.Base(ws))
	t.Cleanup(func() { os.Remove(scratch) })
	env = append(env, "UNDOSH_POLICY="+pol, "TMPFILE="+scratch, "PATH="+bin+":"+os.Getenv("PATH"))
	if c := runWith(t, undoctlBin, ws, env, "undoctl", "explain", "undosh-report"); !strings.Contains(c.stdout, "class:     none") {
		t.Fatalf("the test policy does not make undosh-report read-only:\n%s%s", c.stdout, c.stderr)
	}
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "undosh-report")
	if got.code == 0 || got.stdout != "out\n" {
		t.Errorf("read-only step that writes the workspace: %+v", got)
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
	for _, want := range []string{"ran read-only (class none)", "it needs class git"} {
		if !strings.Contains(got.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got.stderr)
		}
	}
	// Off, the same step writes.
	off := runWith(t, undoshBin, ws, append(env, "UNDOSH_ENFORCE=0"), "bash", "-c", "undosh-report")
	if off.code != 0 {
		t.Errorf("without enforcement: %+v", off)
	}
}
