package fork

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/testuser"
)

// The names the test binary answers to besides its own: the copy's init,
// a network client that sessions run inside a copy (as /proc/1/exe, the
// init's binary, which the copy can exec without seeing its path), and a
// process that makes a copy and dies without discarding it.
const (
	testClientName = "fork-test-client"
	testCreateName = "fork-test-create"
)

// testStateDir holds the copies the tests make. TestMain cleans up what
// a killed earlier run left in it.
const testStateDir = "/var/tmp/undosh-fork-test"

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case InitName:
		os.Exit(Init())
	case testClientName:
		os.Exit(testClient(os.Args[1:]))
	case testCreateName:
		os.Exit(testCreate(os.Args[1:]))
	}
	if os.Geteuid() == 0 {
		if err := Cleanup(testStateDir); err != nil {
			fmt.Fprintln(os.Stderr, "clean up earlier test copies:", err)
			os.Exit(1)
		}
	}
	// Machine steps commit to /etc: the harness suite checks it.
	release := testuser.ChangingEtc()
	code := m.Run()
	release()
	if os.Geteuid() == 0 {
		if err := Cleanup(testStateDir); err != nil {
			fmt.Fprintln(os.Stderr, "clean up test copies:", err)
			code = 1
		}
		// None of this process's copies may be left (another test
		// process may be using the directory).
		entries, _ := os.ReadDir(testStateDir)
		for _, e := range entries {
			if pid, _, ok := parseID(e.Name()); ok && pid == os.Getpid() {
				fmt.Fprintf(os.Stderr, "copy left: %s\n", e.Name())
				code = 1
			}
		}
		os.Remove(testStateDir) // if empty
	}
	os.Exit(code)
}

// testClient runs inside a copy:
//
//	dial NETWORK ADDRESS   prints "connected" (exit 0) or the error (exit 1)
//	loopback               listens on 127.0.0.1 and connects to itself
func testClient(args []string) int {
	if len(args) == 0 {
		return 2
	}
	switch args[0] {
	case "dial":
		if len(args) != 3 {
			return 2
		}
		conn, err := net.DialTimeout(args[1], args[2], 5*time.Second)
		if err != nil {
			fmt.Println("error:", err)
			if errors.Is(err, syscall.ECONNREFUSED) {
				fmt.Println("ECONNREFUSED")
			}
			return 1
		}
		conn.Close()
		fmt.Println("connected")
		return 0
	case "loopback":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
		conn, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		conn.Close()
		fmt.Println("connected")
		return 0
	}
	return 2
}

// testCreate makes a copy in args[0], prints its directory, runs a
// session in it that leaves a file, and exits without discarding it: a
// process that crashed.
func testCreate(args []string) int {
	if len(args) != 1 {
		return 2
	}
	c, err := Create(Options{StateDir: args[0]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := c.Run(context.Background(), RunOptions{Argv: []string{"sh", "-c", "echo x > /root/undosh-test-crashed"}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(c.Dir)
	return 0
}

// requireEngine skips the test where the engine cannot run.
func requireEngine(t *testing.T) {
	t.Helper()
	if Rootless() {
		t.Skip("skipping: the root engine's tests need root (TestRootlessAsUser tests the rootless copy)")
	}
	if err := Probe(); err != nil {
		t.Skipf("skipping: needs root, overlayfs and namespaces: %v", err)
	}
}

// newCopy makes a copy in testStateDir and discards it when the test
// ends, checking that nothing of it is left: no mount, no directory.
func newCopy(t *testing.T, o Options) *Copy {
	t.Helper()
	requireEngine(t)
	o.StateDir = testStateDir
	before := mountLines(t)
	c, err := Create(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Discard(); err != nil {
			t.Errorf("discard: %v", err)
		}
		if _, err := os.Lstat(c.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after discard, %s: %v", c.Dir, err)
		}
		for _, l := range c.Overlays {
			if _, err := os.Lstat(l.Upper); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after discard, %s: %v", l.Upper, err)
			}
		}
		if p := processesIn(c); len(p) > 0 {
			t.Errorf("after discard, processes of the copy remain: %v", p)
		}
		after := mountLines(t)
		for line := range after {
			if !before[line] && strings.Contains(line, c.ID) {
				t.Errorf("after discard, a mount remains: %s", line)
			}
		}
		for line := range before {
			if !after[line] {
				t.Logf("a mount went away during the test (someone else's?): %s", line)
			}
		}
	})
	return c
}

// mountLines returns the lines of the host's mountinfo.
func mountLines(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line != "" {
			m[line] = true
		}
	}
	return m
}

// session is the outcome of one test session.
type session struct {
	Result
	err            error
	stdout, stderr string
}

// run runs script with bash in c, with a 60 s timeout, and returns what
// it printed.
func run(t *testing.T, c *Copy, script string) session {
	t.Helper()
	return runWith(t, c, RunOptions{Argv: []string{"bash", "-c", script}, Timeout: time.Minute})
}

func runWith(t *testing.T, c *Copy, o RunOptions) session {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	o.Stdout, o.Stderr = out, errf
	res, rerr := c.Run(context.Background(), o)
	so, _ := os.ReadFile(out.Name())
	se, _ := os.ReadFile(errf.Name())
	return session{Result: res, err: rerr, stdout: string(so), stderr: string(se)}
}

// processesWith returns the pids of the host's processes whose command
// line holds marker.
func processesWith(marker string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// processesIn returns the host's processes that run in the copy: those
// whose root is an overlay with the copy's layers.
func processesIn(c *Copy) []string {
	self, _ := os.Readlink("/proc/thread-self/ns/mnt")
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err != nil || ns == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/mountinfo")
		if err != nil {
			continue
		}
		// Its root is an overlay whose layers are the copy's. Another
		// test's namespace made while the copy existed lists the copy's
		// directory too, as a mount it took over from the machine.
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[4] == "/" && strings.Contains(line, c.Dir) {
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}

// killMarked kills what processesWith finds, for a test's clean-up.
func killMarked(t *testing.T, marker string) {
	t.Cleanup(func() {
		for _, p := range processesWith(marker) {
			var pid int
			fmt.Sscan(p, &pid)
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("process %d (%s) was left running", pid, marker)
			}
		}
	})
}

// Started by hand, the init refuses, changing nothing.
func TestInitByHand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, withPipes := range []bool{false, true} {
		cmd := exec.Command(exe)
		cmd.Args[0] = InitName
		if withPipes {
			// Pipes on fds 3 and 4, as Run gives, but not pid 1.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			rep, repW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer rep.Close()
			w.Write((&initSpec{Root: "/nonexistent", Argv: []string{"true"}, Layers: []specLayer{{Mount: "/"}}}).encode())
			w.Close()
			cmd.ExtraFiles = []*os.File{r, repW}
			out, err := cmd.CombinedOutput()
			repW.Close()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 125 {
				t.Errorf("with pipes: %v, %s", err, out)
			}
			got, err := readReport(rep)
			if err != nil || !strings.Contains(got.Error, "not pid 1") {
				t.Errorf("report: %+v, %v", got, err)
			}
			continue
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "must be started by fork.Run") {
			t.Errorf("without pipes: %v, %q", err, out)
		}
	}
}
