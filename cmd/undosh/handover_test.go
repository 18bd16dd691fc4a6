package main

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hStart starts shell with argv (and env, added) in a fresh workspace
// and returns the process, the workspace and the read ends of its stdout
// and stderr.
func hStart(t *testing.T, shell string, argv []string, sys *syscall.SysProcAttr, env ...string) (*os.Process, string, *os.File, *os.File) {
	t.Helper()
	d := dNewDirs(t, false)
	dPrepare(t, diffCase{}, d)
	or, ow, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + d.home, "UNDOSH_STATE_DIR=" + d.st,
		"UNDOSH_POLICY=" + filepath.Join(d.root, "policy.yaml"), "UNDOSH_REAL_BASH=/bin/bash"}, env...)
	p, err := os.StartProcess(shell, argv, &os.ProcAttr{Dir: d.work, Env: env, Files: []*os.File{null, ow, ew}, Sys: sys})
	ow.Close()
	ew.Close()
	if err != nil {
		t.Fatal(err)
	}
	return p, d.work, or, er
}

// hWait waits for pid with wait4 and opts, or fails the test after 30s.
func hWait(t *testing.T, pid, opts int) syscall.WaitStatus {
	t.Helper()
	done := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, opts, nil)
			if err != syscall.EINTR {
				break
			}
		}
		done <- ws
	}()
	select {
	case ws := <-done:
		return ws
	case <-time.After(30 * time.Second):
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("pid %d did not change state", pid)
	}
	return 0
}

// TestHandOverStop: a step that stops itself is seen stopped by its
// caller, as bash would be, and goes on when the caller continues it;
// it is rolled back when it then fails, before the caller sees its exit.
func TestHandOverStop(t *testing.T) {
	t.Parallel()
	script := `echo x > f; kill -STOP $$; echo "after $$"; false`
	for _, shell := range []string{"/bin/bash", undoshBin} {
		p, work, out, errs := hStart(t, shell, []string{"bash", "-c", script}, nil)
		ws := hWait(t, p.Pid, syscall.WUNTRACED)
		if !ws.Stopped() || ws.StopSignal() != syscall.SIGSTOP {
			t.Fatalf("%s: wait status %#x, want stopped by SIGSTOP", shell, int(ws))
		}
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		ws = hWait(t, p.Pid, 0)
		stdout, _ := io.ReadAll(out)
		stderr, _ := io.ReadAll(errs)
		if !ws.Exited() || ws.ExitStatus() != 1 {
			t.Errorf("%s: wait status %#x, want exit 1 (stderr %q)", shell, int(ws), stderr)
		}
		if want := "after " + strconv.Itoa(p.Pid) + "\n"; string(stdout) != want {
			t.Errorf("%s: stdout %q, want %q", shell, stdout, want)
		}
		_, err := os.Lstat(filepath.Join(work, "f"))
		if shell == undoshBin {
			if !strings.Contains(string(stderr), "rolled back 1 file") || err == nil {
				t.Errorf("undosh: not rolled back: stderr %q, f: %v", stderr, err)
			}
		}
	}
}

// TestHandOverTraced: a shell that a tracer (here the test, as strace or
// gdb would) holds already cannot be held by undosh's supervisor: the
// step runs as undosh's child, protected as before.
func TestHandOverTraced(t *testing.T) {
	runtime.LockOSThread() // ptrace calls come from the thread that forked
	defer runtime.UnlockOSThread()
	p, work, out, errs := hStart(t, undoshBin, []string{"bash", "-c", `echo x > f; echo $$ $PPID; false`}, &syscall.SysProcAttr{Ptrace: true})
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(p.Pid, &ws, syscall.WALL, nil); err != nil {
			if err == syscall.EINTR {
				continue
			}
			t.Fatal(err)
		}
		if !ws.Stopped() {
			break
		}
		sig := ws.StopSignal()
		if sig == syscall.SIGTRAP {
			sig = 0
		}
		if err := syscall.PtraceCont(p.Pid, int(sig)); err != nil {
			t.Fatal(err)
		}
	}
	stdout, _ := io.ReadAll(out)
	stderr, _ := io.ReadAll(errs)
	if !ws.Exited() || ws.ExitStatus() != 1 {
		t.Fatalf("wait status %#x, want exit 1 (stderr %q)", int(ws), stderr)
	}
	f := strings.Fields(string(stdout))
	if len(f) != 2 || f[0] == strconv.Itoa(p.Pid) || f[1] != strconv.Itoa(p.Pid) {
		t.Errorf("stdout %q: want the step as undosh's (pid %d) child", stdout, p.Pid)
	}
	if _, err := os.Lstat(filepath.Join(work, "f")); err == nil || !strings.Contains(string(stderr), "rolled back 1 file") {
		t.Errorf("not rolled back: stderr %q, f: %v", stderr, err)
	}
}

// TestHandOverLarge: an instruction larger than the socket holds (300 kB
// of arguments) reaches the shell-to-be even when a signal stops it
// halfway through reading it (the supervisor relays the stop while it
// sends). Many at once, for the signals to come; without enforcement,
// which has nothing to do with it.
func TestHandOverLarge(t *testing.T) {
	t.Parallel()
	k100 := strings.Repeat("a", 100000)
	type run struct {
		p         *os.Process
		out, errs *os.File
	}
	var runs []run
	for range 30 {
		p, _, out, errs := hStart(t, undoshBin, []string{"bash", "-c", `echo x > f; echo $$ ${#1}${#2}${#3}`, "n", k100, k100, k100}, nil, "UNDOSH_ENFORCE=0")
		runs = append(runs, run{p, out, errs})
	}
	for _, r := range runs {
		// Its output fits in the pipes: read it once it has ended.
		ws := hWait(t, r.p.Pid, 0)
		stdout, _ := io.ReadAll(r.out)
		stderr, _ := io.ReadAll(r.errs)
		if want := strconv.Itoa(r.p.Pid) + " 100000100000100000\n"; !ws.Exited() || ws.ExitStatus() != 0 || string(stdout) != want {
			t.Errorf("wait status %#x, stdout %q, stderr %q: want exit 0 and %q", int(ws), stdout, stderr, want)
		}
	}
}
