package procstate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/procstate"
)

// The tests run this test binary again (TestMain) in two roles, chosen
// by $PROCSTATE_TEST:
//
//	launch:ROLE  the caller: sets up the state named by $PROCSTATE_IGNORE,
//	             $PROCSTATE_BLOCK and $PROCSTATE_CLOSE (signal numbers and
//	             fds, comma-separated) and execs the binary again as ROLE,
//	             or, with ROLE "sh", /bin/sh with the probe directly
//	             (what the real shell would see without undosh between)
//	ROLE         undosh: what it does to start the real shell, here the
//	             probe: exec (procstate.Exec), start (procstate.StartProcess
//	             with procstate.Files), report (writes procstate's record as
//	             JSON), or, to show what the Go runtime alone does, the
//	             same without procstate: plain-exec, plain-start
//
// The probe is a /bin/sh that writes to $PROCSTATE_OUT (the standard fds
// may be closed) which of its fds 0, 1 and 2 are open, then execs grep to
// write its SigIgn and SigBlk (which exec keeps). Read from another
// process, the shell's own would show the mask it sets while it waits.
const probe = `exec 9>"$PROCSTATE_OUT"
for fd in 0 1 2; do if [ -e /proc/$$/fd/$fd ]; then echo "fd$fd open" >&9; else echo "fd$fd closed" >&9; fi; done
exec grep -E '^Sig(Ign|Blk):' /proc/self/status >&9`

func TestMain(m *testing.M) {
	role := os.Getenv("PROCSTATE_TEST")
	if role == "" {
		os.Exit(m.Run())
	}
	if next, ok := strings.CutPrefix(role, "launch:"); ok {
		launch(next)
	}
	os.Exit(helper(role))
}

// launch sets up the caller's state and execs next: what a caller does
// before it runs undosh.
func launch(next string) {
	runtime.LockOSThread()
	var mask unix.Sigset_t
	for _, s := range numbers("PROCSTATE_BLOCK") {
		mask.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &mask, nil); err != nil {
		fail("launch: sigmask: %v", err)
	}
	for _, s := range numbers("PROCSTATE_IGNORE") {
		// SIG_IGN now, kept by the exec below.
		signal.Ignore(syscall.Signal(s))
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PROCSTATE_TEST=") })
	env = append(env, "PROCSTATE_TEST="+next)
	path, argv := os.Args[0], []string{os.Args[0]}
	if next == "sh" {
		path, argv = "/bin/sh", []string{"sh", "-c", probe}
	}
	for _, fd := range numbers("PROCSTATE_CLOSE") {
		unix.Close(fd)
	}
	err := syscall.Exec(path, argv, env)
	fail("launch: exec %s: %v", path, err)
}

func helper(role string) int {
	argv := []string{"sh", "-c", probe}
	switch role {
	case "report":
		var r report
		r.Recorded = procstate.Recorded()
		for s := 1; s <= 64; s++ {
			if procstate.Ignored(syscall.Signal(s)) {
				r.Ignored = append(r.Ignored, s)
			}
			if procstate.Blocked(syscall.Signal(s)) {
				r.Blocked = append(r.Blocked, s)
			}
		}
		for fd := range 3 {
			if procstate.Closed(fd) {
				r.Closed = append(r.Closed, fd)
			}
		}
		for _, f := range procstate.Files() {
			r.Files = append(r.Files, f != nil)
		}
		b, err := json.Marshal(r)
		if err != nil {
			fail("report: %v", err)
		}
		if err := os.WriteFile(os.Getenv("PROCSTATE_OUT"), b, 0o644); err != nil {
			fail("report: %v", err)
		}
		return 0
	case "exec":
		procstate.Ignore()
		err := procstate.Exec("/bin/sh", argv, os.Environ())
		fail("exec: %v", err)
	case "plain-exec":
		err := syscall.Exec("/bin/sh", argv, os.Environ())
		fail("plain-exec: %v", err)
	case "start", "plain-start":
		var p *os.Process
		var err error
		if role == "start" {
			procstate.Ignore()
			p, err = procstate.StartProcess("/bin/sh", argv, &os.ProcAttr{Files: procstate.Files()})
		} else {
			p, err = os.StartProcess("/bin/sh", argv, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
		}
		if err != nil {
			fail("%s: %v", role, err)
		}
		st, err := p.Wait()
		if err != nil {
			fail("%s: wait: %v", role, err)
		}
		return st.ExitCode()
	case "die-by":
		n, err := strconv.Atoi(os.Getenv("PROCSTATE_SIG"))
		if err != nil {
			fail("die-by: %v", err)
		}
		procstate.DieBy(syscall.Signal(n))
		return 3
	case "plain-die-by":
		n, err := strconv.Atoi(os.Getenv("PROCSTATE_SIG"))
		if err != nil {
			fail("plain-die-by: %v", err)
		}
		// The signal is delivered before kill returns when the
		// calling thread has it unblocked: the runtime handles it, or
		// it is ignored, and the process exits 3.
		syscall.Kill(os.Getpid(), syscall.Signal(n))
		return 3
	case "environ", "executed":
		var v any = procstate.Environ()
		if role == "executed" {
			v = procstate.Executed()
		}
		b, err := json.Marshal(v)
		if err != nil {
			fail("%s: %v", role, err)
		}
		if err := os.WriteFile(os.Getenv("PROCSTATE_OUT"), b, 0o644); err != nil {
			fail("%s: %v", role, err)
		}
		return 0
	}
	fail("unknown role %q", role)
	return 2
}

// report is what the role report writes: procstate's record.
type report struct {
	Recorded                 bool
	Ignored, Blocked, Closed []int
	Files                    []bool // Files()[fd] != nil
}

func fail(format string, args ...any) {
	// fd 2 may be closed; the test reads the exit status.
	fmt.Fprintf(os.Stderr, "procstate test: "+format+"\n", args...)
	os.Exit(100)
}

func numbers(name string) []int {
	var ns []int
	for f := range strings.SplitSeq(os.Getenv(name), ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			fail("$%s: %v", name, err)
		}
		ns = append(ns, n)
	}
	return ns
}

// setup is what the caller sets up before it runs undosh.
type setup struct {
	ignore, block []syscall.Signal
	close         []int
}

func (s setup) String() string {
	return fmt.Sprintf("ignore %v, block %v, close %v", s.ignore, s.block, s.close)
}

func list[T ~int](xs []T) string {
	var fs []string
	for _, x := range xs {
		fs = append(fs, strconv.Itoa(int(x)))
	}
	return strings.Join(fs, ",")
}

// run runs the test binary as role under the caller's state s, and
// returns what it wrote to $PROCSTATE_OUT.
func run(t *testing.T, s setup, role string, extraEnv ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(),
		"PROCSTATE_TEST=launch:"+role,
		"PROCSTATE_IGNORE="+list(s.ignore),
		"PROCSTATE_BLOCK="+list(s.block),
		"PROCSTATE_CLOSE="+list(s.close),
		"PROCSTATE_OUT="+out)
	cmd.Env = append(cmd.Env, extraEnv...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s under %v: %v\n%s", role, s, err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%s under %v: %v\n%s", role, s, err, stderr.String())
	}
	return string(b)
}

// shellSees is the probe's view: its SigIgn and SigBlk as sets of signal
// numbers and its fds.
type shellSees struct {
	ignored, blocked []int
	fds              string
}

func parseProbe(t *testing.T, out string) shellSees {
	t.Helper()
	var s shellSees
	var fds []string
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("probe: %q: %v", line, err)
			}
			var sigs []int
			for i := range 64 {
				if m&(1<<i) != 0 {
					sigs = append(sigs, i+1)
				}
			}
			switch k {
			case "SigIgn":
				s.ignored = sigs
			case "SigBlk":
				s.blocked = sigs
			}
			continue
		}
		fds = append(fds, line)
	}
	s.fds = strings.Join(fds, ", ")
	if len(fds) != 3 || !strings.Contains(out, "SigIgn:") || !strings.Contains(out, "SigBlk:") {
		t.Fatalf("probe wrote:\n%s", out)
	}
	return s
}

// setups are callers' states that the Go runtime changes: it installs
// handlers for SIGTERM and SIGUSR1 (lost at execve), unblocks SIGTERM and
// SIGINT on its threads, and opens /dev/null on a closed standard fd.
// SIGUSR2 stays default and unblocked throughout, SIGHUP ignored (the
// runtime leaves an ignored SIGHUP alone), SIGWINCH blocked (the runtime
// never unblocks it).
var setups = map[string]setup{
	"ignored":       {ignore: []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGUSR1}},
	"blocked":       {block: []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGWINCH}},
	"stderr closed": {close: []int{2}},
	"stdout closed": {close: []int{1}},
	"stdin closed":  {close: []int{0}},
	"all": {
		ignore: []syscall.Signal{syscall.SIGTERM, syscall.SIGPIPE},
		block:  []syscall.Signal{syscall.SIGINT, syscall.SIGTERM},
		close:  []int{0, 2},
	},
}

// TestShellSeesCallersState runs the probe as the real shell, by Exec and
// by StartProcess, under each setup, and checks that it sees exactly what
// it sees when the caller runs it directly.
func TestShellSeesCallersState(t *testing.T) {
	for name, s := range setups {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := parseProbe(t, run(t, s, "sh"))
			checkSetUp(t, s, want)
			for _, role := range []string{"exec", "start"} {
				got := parseProbe(t, run(t, s, role))
				if !slices.Equal(got.ignored, want.ignored) {
					t.Errorf("%s: the shell ignores %v, want %v (as run directly)", role, got.ignored, want.ignored)
				}
				if !slices.Equal(got.blocked, want.blocked) {
					t.Errorf("%s: the shell blocks %v, want %v (as run directly)", role, got.blocked, want.blocked)
				}
				if got.fds != want.fds {
					t.Errorf("%s: the shell has %s, want %s (as run directly)", role, got.fds, want.fds)
				}
			}
		})
	}
}

// checkSetUp checks that the caller did set s up (the probe run directly
// sees it), so that the comparison above compares something.
func checkSetUp(t *testing.T, s setup, direct shellSees) {
	t.Helper()
	for _, sig := range s.ignore {
		if !slices.Contains(direct.ignored, int(sig)) {
			t.Fatalf("run directly, the shell does not ignore %v: the setup failed", sig)
		}
	}
	for _, sig := range s.block {
		if !slices.Contains(direct.blocked, int(sig)) {
			t.Fatalf("run directly, the shell does not block %v: the setup failed", sig)
		}
	}
	for _, fd := range s.close {
		if !strings.Contains(direct.fds, fmt.Sprintf("fd%d closed", fd)) {
			t.Fatalf("run directly, the shell has fd %d open: the setup failed", fd)
		}
	}
}

// TestWithoutProcstate shows that the comparison in
// TestShellSeesCallersState can fail: without procstate, the Go runtime
// changes what the shell sees in each setup. If this fails, a Go release
// stopped changing that state, and the test above no longer proves
// procstate keeps it.
func TestWithoutProcstate(t *testing.T) {
	for name, s := range setups {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := parseProbe(t, run(t, s, "sh"))
			for _, role := range []string{"plain-exec", "plain-start"} {
				got := parseProbe(t, run(t, s, role))
				if slices.Equal(got.ignored, want.ignored) && slices.Equal(got.blocked, want.blocked) && got.fds == want.fds {
					t.Errorf("%s: the shell sees what it sees run directly (ignored %v, blocked %v, %s): the Go runtime no longer changes it", role, got.ignored, got.blocked, got.fds)
				} else {
					t.Logf("%s: ignored %v (directly %v), blocked %v (directly %v), %s (directly %s)", role, got.ignored, want.ignored, got.blocked, want.blocked, got.fds, want.fds)
				}
			}
		})
	}
}

// TestRecord checks what the constructor recorded, as the accessors
// report it: exactly the caller's state, and nothing the Go runtime did
// since.
func TestRecord(t *testing.T) {
	for name, s := range setups {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var r report
			if err := json.Unmarshal([]byte(run(t, s, "report")), &r); err != nil {
				t.Fatal(err)
			}
			if !r.Recorded {
				t.Errorf("Recorded() = false")
			}
			// The probe run directly is the reference for the signals:
			// the test binary's own launch leaves others as they were
			// (go test may ignore or block some).
			direct := parseProbe(t, run(t, s, "sh"))
			if !slices.Equal(r.Ignored, direct.ignored) {
				t.Errorf("Ignored: %v, want %v", r.Ignored, direct.ignored)
			}
			if !slices.Equal(r.Blocked, direct.blocked) {
				t.Errorf("Blocked: %v, want %v", r.Blocked, direct.blocked)
			}
			if !slices.Equal(r.Closed, s.close) {
				t.Errorf("Closed: %v, want %v", r.Closed, s.close)
			}
			wantFiles := []bool{true, true, true}
			for _, fd := range s.close {
				wantFiles[fd] = false
			}
			if !slices.Equal(r.Files, wantFiles) {
				t.Errorf("Files() non-nil: %v, want %v", r.Files, wantFiles)
			}
		})
	}
}

func TestOutOfRange(t *testing.T) {
	for _, sig := range []syscall.Signal{0, -1, 65, 1000} {
		if procstate.Ignored(sig) || procstate.Blocked(sig) {
			t.Errorf("signal %d: Ignored %v, Blocked %v, want false", sig, procstate.Ignored(sig), procstate.Blocked(sig))
		}
	}
	for _, fd := range []int{-1, 3, 64} {
		if procstate.Closed(fd) {
			t.Errorf("Closed(%d) = true", fd)
		}
	}
}

// TestDieBy checks that the process dies by the signal, even one the Go
// runtime would catch (SIGSEGV, SIGQUIT: a stack dump and exit 2) and one
// the caller blocked or ignored.
func TestDieBy(t *testing.T) {
	for _, tc := range []struct {
		sig syscall.Signal
		s   setup
	}{
		{syscall.SIGSEGV, setup{}},
		{syscall.SIGQUIT, setup{}},
		{syscall.SIGTERM, setup{block: []syscall.Signal{syscall.SIGTERM}}},
		{syscall.SIGINT, setup{ignore: []syscall.Signal{syscall.SIGINT}}},
	} {
		t.Run(fmt.Sprint(tc.sig, " ", tc.s), func(t *testing.T) {
			t.Parallel()
			for _, role := range []string{"die-by", "plain-die-by"} {
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(),
					"PROCSTATE_TEST=launch:"+role,
					"PROCSTATE_SIG="+strconv.Itoa(int(tc.sig)),
					"PROCSTATE_IGNORE="+list(tc.s.ignore),
					"PROCSTATE_BLOCK="+list(tc.s.block))
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("%s: %v, want a death by %v\n%s", role, err, tc.sig, out)
				}
				ws := ee.Sys().(syscall.WaitStatus)
				died := ws.Signaled() && ws.Signal() == tc.sig
				if role == "die-by" && !died {
					t.Errorf("die-by: %v, want a death by %v\n%s", err, tc.sig, out)
				}
				if role == "plain-die-by" && died && tc.sig != syscall.SIGTERM {
					// Without DieBy, the runtime catches the signal (or
					// it is ignored); with SIGTERM blocked, it may
					// still arrive on a thread that has it unblocked.
					t.Errorf("plain-die-by: died by %v too: the test shows nothing", tc.sig)
				}
			}
		})
	}
}

// TestEnviron checks that Environ keeps the environment as given:
// duplicates, their order, and entries without "=".
func TestEnviron(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	env := []string{"PROCSTATE_TEST=environ", "PROCSTATE_OUT=" + out, "A=1", "B=2", "A=3", "NOEQUALS", "=empty-name", "A=1"}
	pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0]}, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, pid)
	var got []string
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, env) {
		t.Errorf("Environ() = %q, want %q", got, env)
	}
}

// TestExecuted checks that Executed is the path given to execve, as given
// (relative, through a symlink), not argv[0] nor the resolved file.
func TestExecuted(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{os.Args[0], "./link", filepath.Join(dir, "link")} {
		out := filepath.Join(dir, "out")
		env := []string{"PROCSTATE_TEST=executed", "PROCSTATE_OUT=" + out}
		pid, err := syscall.ForkExec(path, []string{"some-argv0"}, &syscall.ProcAttr{Dir: dir, Env: env, Files: []uintptr{0, 1, 2}})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, pid)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got != path {
			t.Errorf("exec %s: Executed() = %q, want %q", path, got, path)
		}
	}
}

func wait(t *testing.T, pid int) {
	t.Helper()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("helper: %v", ws)
	}
}
