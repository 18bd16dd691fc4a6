package fork

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func randomName(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

func TestRunTrue(t *testing.T) {
	c := newCopy(t, Options{})
	s := runWith(t, c, RunOptions{Argv: []string{"true"}})
	if s.err != nil || s.ExitCode != 0 || s.Signal != 0 || s.TimedOut {
		t.Fatalf("true in a copy: %+v, %v; stderr:\n%s", s.Result, s.err, s.stderr)
	}
	if s.Setup <= 0 || s.Duration < s.Setup {
		t.Errorf("times: setup %v, duration %v", s.Setup, s.Duration)
	}
}

// A write in the copy lands in the upper layer and not on the real root.
func TestWriteStaysInCopy(t *testing.T) {
	name := "/etc/undosh-test-" + randomName(t)
	t.Cleanup(func() {
		if _, err := os.Lstat(name); err == nil {
			t.Errorf("%s reached the real root", name)
			os.Remove(name)
		}
	})
	c := newCopy(t, Options{})
	s := run(t, c, "echo in-copy > "+name+" && cat "+name)
	if s.err != nil || s.ExitCode != 0 || s.stdout != "in-copy\n" {
		t.Fatalf("write in copy: %+v, %v, stdout %q, stderr %q", s.Result, s.err, s.stdout, s.stderr)
	}
	l := c.OverlayOf(name)
	if l == nil || l.Mount != "/" {
		t.Fatalf("overlay of %s: %+v", name, l)
	}
	b, err := os.ReadFile(filepath.Join(l.Upper, name))
	if err != nil || string(b) != "in-copy\n" {
		t.Errorf("upper: %q, %v", b, err)
	}
	if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("real root: %s: %v", name, err)
	}
}

// Step then verify: the second session sees the first one's files, but
// none of its processes.
func TestSecondSessionSeesFirst(t *testing.T) {
	marker := "undosh-test-daemon-" + randomName(t)
	killMarked(t, marker)
	c := newCopy(t, Options{})
	step := run(t, c, "mkdir -p /opt/undosh-test && echo step > /opt/undosh-test/f && rm -f /usr/sbin/policy-rc.d; (exec -a "+marker+" sleep 100) & exit 0")
	if step.err != nil || step.ExitCode != 0 {
		t.Fatalf("step: %+v, %v, %s", step.Result, step.err, step.stderr)
	}
	if p := processesWith(marker); len(p) > 0 {
		t.Errorf("the step's background process outlived it: %v", p)
	}
	verify := run(t, c, "cat /opt/undosh-test/f; test -e /usr/sbin/policy-rc.d && echo policy-rc.d; pgrep -f '[u]"+marker[1:]+"' || echo no-daemon")
	if verify.err != nil || verify.ExitCode != 0 || verify.stdout != "step\nno-daemon\n" {
		t.Fatalf("verify: %+v, %v, stdout %q, stderr %q", verify.Result, verify.err, verify.stdout, verify.stderr)
	}
	if _, err := os.Lstat("/opt/undosh-test/f"); err == nil {
		t.Errorf("/opt/undosh-test/f reached the real root")
	}
}

func TestExitStatus(t *testing.T) {
	c := newCopy(t, Options{})
	for _, tc := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{
		{"true", 0, 0},
		{"exit 3", 3, 0},
		{"exit 255", 255, 0},
		{"kill -TERM $$", 128 + 15, syscall.SIGTERM},
		{"kill -KILL $$", 128 + 9, syscall.SIGKILL},
		{"kill -SEGV $$", 128 + 11, syscall.SIGSEGV},
	} {
		s := run(t, c, tc.script)
		if s.err != nil || s.ExitCode != tc.code || s.Signal != tc.sig || s.TimedOut {
			t.Errorf("%q: got %+v, %v; want status %d, signal %d", tc.script, s.Result, s.err, tc.code, tc.sig)
		}
	}
}

func TestNotFound(t *testing.T) {
	c := newCopy(t, Options{})
	s := runWith(t, c, RunOptions{Argv: []string{"undosh-no-such-command"}})
	if !errors.Is(s.err, exec.ErrNotFound) {
		t.Errorf("got %+v, %v; want exec.ErrNotFound", s.Result, s.err)
	}
	s = runWith(t, c, RunOptions{Argv: []string{"true"}, Dir: "/no/such/dir"})
	if s.err == nil {
		t.Errorf("a missing working directory: got %+v, no error", s.Result)
	}
}

func TestDirEnvStdin(t *testing.T) {
	c := newCopy(t, Options{})
	in, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	in.WriteString("from stdin\n")
	in.Seek(0, 0)
	s := runWith(t, c, RunOptions{
		Argv:  []string{"sh", "-c", `pwd; echo "$FOO"; cat; hostname`},
		Dir:   "/etc",
		Env:   []string{"PATH=/usr/bin:/bin", "FOO=bar"},
		Stdin: in,
	})
	host, _ := os.Hostname()
	if want := "/etc\nbar\nfrom stdin\n" + host + "\n"; s.err != nil || s.stdout != want {
		t.Errorf("got %q (%v, %s), want %q", s.stdout, s.err, s.stderr, want)
	}
	s = run(t, c, `echo "$DEBIAN_FRONTEND $HOME"`)
	if s.stdout != "noninteractive /root\n" {
		t.Errorf("default environment: %q", s.stdout)
	}
}

// The timeout kills the session and everything it started.
func TestTimeout(t *testing.T) {
	marker := "undosh-test-sleep-" + randomName(t)
	killMarked(t, marker)
	c := newCopy(t, Options{})
	start := time.Now()
	s := runWith(t, c, RunOptions{
		Argv:    []string{"bash", "-c", "(exec -a " + marker + " sleep 100) & exec -a " + marker + " sleep 100"},
		Timeout: 500 * time.Millisecond,
	})
	took := time.Since(start)
	if s.err != nil || !s.TimedOut || s.ExitCode != 137 || s.Signal != syscall.SIGKILL {
		t.Errorf("got %+v, %v; want a timeout", s.Result, s.err)
	}
	if took > 20*time.Second {
		t.Errorf("the timeout took %v", took)
	}
	if p := processesWith(marker); len(p) > 0 {
		t.Errorf("processes left after the timeout: %v", p)
	}
	if p := processesIn(c); len(p) > 0 {
		t.Errorf("processes of the copy left after the timeout: %v", p)
	}
	// The copy is usable after a timeout.
	if s := run(t, c, "true"); s.err != nil || s.ExitCode != 0 {
		t.Errorf("after the timeout: %+v, %v", s.Result, s.err)
	}
}

// waitForFile waits for a session to signal, through a file in the
// upper layer, that it has started.
func waitForFile(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Lstat(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// One session at a time; cancelling the context ends it; Discard ends a
// running session and makes the copy unusable.
func TestBusyCancelDiscard(t *testing.T) {
	marker := "undosh-test-busy-" + randomName(t)
	killMarked(t, marker)
	c := newCopy(t, Options{})
	started := filepath.Join(c.OverlayOf("/").Upper, "root", "undosh-test-started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type ended struct {
		res Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := c.Run(ctx, RunOptions{Argv: []string{"bash", "-c", "touch /root/undosh-test-started; exec -a " + marker + " sleep 100"}})
		done <- ended{res, err}
	}()
	waitForFile(t, started)
	if p := processesIn(c); len(p) < 2 {
		t.Errorf("processes in the running copy: %v, want the init and the session", p)
	}
	if _, err := c.Run(context.Background(), RunOptions{Argv: []string{"true"}}); !errors.Is(err, ErrBusy) {
		t.Errorf("a second session at once: %v, want ErrBusy", err)
	}
	cancel()
	e := <-done
	if !errors.Is(e.err, context.Canceled) || e.res.Signal != syscall.SIGKILL {
		t.Errorf("cancelled: %+v, %v", e.res, e.err)
	}
	if p := processesWith(marker); len(p) > 0 {
		t.Errorf("processes left after cancel: %v", p)
	}

	os.Remove(started)
	go func() {
		res, err := c.Run(context.Background(), RunOptions{Argv: []string{"bash", "-c", "touch /root/undosh-test-started; exec -a " + marker + " sleep 100"}})
		done <- ended{res, err}
	}()
	waitForFile(t, started)
	if err := c.Discard(); err != nil {
		t.Fatal(err)
	}
	if e := <-done; e.res.Signal != syscall.SIGKILL || !errors.Is(e.err, ErrDiscarded) {
		t.Errorf("discarded while running: %+v, %v", e.res, e.err)
	}
	if err := c.Discard(); err != nil {
		t.Errorf("second discard: %v", err)
	}
	if _, err := c.Run(context.Background(), RunOptions{Argv: []string{"true"}}); !errors.Is(err, ErrDiscarded) {
		t.Errorf("run after discard: %v, want ErrDiscarded", err)
	}
	if p := processesWith(marker); len(p) > 0 {
		t.Errorf("processes left after discard: %v", p)
	}
}

// The copy is offline: a TCP server on the host's loopback, a Unix
// socket on the real root and an abstract socket cannot be reached; the
// copy's own loopback works; lo is the only interface.
func TestOffline(t *testing.T) {
	c := newCopy(t, Options{})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	sockDir, err := os.MkdirTemp("/var/tmp", "undosh-fork-sock-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "s")
	unixL, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer unixL.Close()
	abstract := "@undosh-test-" + randomName(t)
	absL, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer absL.Close()
	for _, l := range []net.Listener{tcp, unixL, absL} {
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		// From the host, each answers.
		conn, err := net.Dial(l.Addr().Network(), l.Addr().String())
		if err != nil {
			t.Fatalf("from the host: %v", err)
		}
		conn.Close()
	}
	client := "exec -a " + testClientName + " /proc/1/exe "
	for _, tc := range []struct{ network, addr string }{
		{"tcp", tcp.Addr().String()},
		{"unix", sock},
		{"unix", abstract},
	} {
		s := run(t, c, client+"dial "+tc.network+" "+tc.addr)
		if s.err != nil || s.ExitCode != 1 || !strings.Contains(s.stdout, "ECONNREFUSED") {
			t.Errorf("dial %s %s from the copy: %+v, %v, stdout %q, stderr %q; want connection refused",
				tc.network, tc.addr, s.Result, s.err, s.stdout, s.stderr)
		}
	}
	s := run(t, c, client+"loopback")
	if s.err != nil || s.ExitCode != 0 {
		t.Errorf("the copy's own loopback: %+v, %v, %q %q", s.Result, s.err, s.stdout, s.stderr)
	}
	s = run(t, c, "ls /sys/class/net")
	if s.stdout != "lo\n" {
		t.Errorf("interfaces in the copy: %q (%s)", s.stdout, s.stderr)
	}
}

// /proc/sys, /proc/irq, /proc/bus and /sys are read-only; the timer list
// (and kcore, where the kernel has it) read as empty.
func TestProcSysReadOnly(t *testing.T) {
	c := newCopy(t, Options{})
	// Writing back the value that is there: harmless if it got through.
	s := run(t, c, "v=$(cat /proc/sys/vm/overcommit_memory) && echo $v > /proc/sys/vm/overcommit_memory")
	if s.err != nil || s.ExitCode == 0 || !strings.Contains(s.stderr, "Read-only file system") {
		t.Errorf("write to /proc/sys: %+v, %v, %q", s.Result, s.err, s.stderr)
	}
	s = run(t, c, "touch /sys/undosh-test")
	if s.err != nil || s.ExitCode == 0 || !strings.Contains(s.stderr, "Read-only file system") {
		t.Errorf("write to /sys: %+v, %v, %q", s.Result, s.err, s.stderr)
	}
	s = run(t, c, "cat /proc/self/mountinfo")
	ro := map[string]bool{}
	for line := range strings.SplitSeq(s.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) > 5 {
			ro[f[4]] = slices.Contains(strings.Split(f[5], ","), "ro")
		}
	}
	for _, p := range []string{"/proc/sys", "/proc/irq", "/proc/bus", "/sys"} {
		if !ro[p] {
			t.Errorf("%s is not mounted read-only in the copy:\n%s", p, s.stdout)
		}
	}
	s = run(t, c, "wc -c < /proc/timer_list; if [ -e /proc/kcore ]; then wc -c < /proc/kcore; else echo 0; fi")
	if s.stdout != "0\n0\n" {
		t.Errorf("masked files: %q %q", s.stdout, s.stderr)
	}
}

// A block device made in the copy cannot be opened: the overlay and /dev
// are nodev.
func TestNodev(t *testing.T) {
	c := newCopy(t, Options{})
	var st unix.Stat_t
	if err := unix.Stat("/", &st); err != nil {
		t.Fatal(err)
	}
	maj, min := unix.Major(st.Dev), unix.Minor(st.Dev)
	for _, dir := range []string{"/root", "/dev"} {
		dev := dir + "/undosh-test-blk"
		s := run(t, c, fmt.Sprintf("mknod %s b %d %d && head -c 512 %s > /dev/null", dev, maj, min, dev))
		if s.err != nil || s.ExitCode == 0 || !strings.Contains(s.stderr, "Permission denied") {
			t.Errorf("read a block device made in %s: %+v, %v, %q", dir, s.Result, s.err, s.stderr)
		}
	}
}

// The risky capabilities are gone from the session's bounding, permitted
// and effective sets; the others stay.
func TestCapabilitiesDropped(t *testing.T) {
	c := newCopy(t, Options{})
	s := run(t, c, "grep ^Cap /proc/self/status")
	if s.err != nil || s.ExitCode != 0 {
		t.Fatalf("%+v, %v, %s", s.Result, s.err, s.stderr)
	}
	for _, field := range []string{"CapBnd", "CapPrm", "CapEff"} {
		v, ok := statusField(s.stdout, field)
		if !ok {
			t.Fatalf("no %s in %q", field, s.stdout)
		}
		caps, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range droppedCaps {
			if caps&(1<<c) != 0 {
				t.Errorf("%s still has capability %d", field, c)
			}
		}
		for _, c := range []int{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_SETUID, unix.CAP_MKNOD} {
			if caps&(1<<c) == 0 {
				t.Errorf("%s lost capability %d", field, c)
			}
		}
	}
	if v, _ := statusField(s.stdout, "CapAmb"); strings.Trim(v, "0") != "" {
		t.Errorf("ambient capabilities: %s", v)
	}
}

// The copy does not see the pip guard's PEP 668 markers, and sees a
// distribution's own. (This machine's markers are whatever it has: the
// test changes none.)
func TestSeededMarkers(t *testing.T) {
	var all []string
	for _, g := range PythonLibs() {
		m, _ := filepath.Glob(filepath.Join(g, "EXTERNALLY-MANAGED"))
		all = append(all, m...)
	}
	if len(all) == 0 {
		t.Skip("no PEP 668 marker on this machine")
	}
	guarded := guardMarkers("/")
	c := newCopy(t, Options{})
	script := ""
	for _, m := range all {
		script += "if test -e " + m + "; then echo seen " + m + "; else echo hidden " + m + "; fi\n"
	}
	s := run(t, c, script)
	for _, m := range all {
		want := "seen " + m
		if slices.Contains(guarded, m) {
			want = "hidden " + m
			if d, err := filepath.EvalSymlinks(filepath.Dir(m)); err == nil && d == filepath.Dir(m) && !slices.Contains(c.Seeded, m) {
				t.Errorf("Seeded %v lacks %s", c.Seeded, m)
			}
		} else if slices.Contains(c.Seeded, m) {
			t.Errorf("Seeded %v has the distribution's %s", c.Seeded, m)
		}
		if !strings.Contains(s.stdout, want+"\n") {
			t.Errorf("in the copy: %q, want %q", s.stdout, want)
		}
	}
}

// A marker file found as guardMarkers finds them is hidden by a
// whiteout, and the real one is left as it was: the machinery of
// TestSeededMarkers, on a tree of the test's own in /var/tmp.
func TestHideMarkerFile(t *testing.T) {
	requireEngine(t)
	base, err := os.MkdirTemp("/var/tmp", "undosh-fork-marker-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	var root, st unix.Stat_t
	if unix.Stat("/", &root) != nil || unix.Stat(base, &st) != nil || root.Dev != st.Dev {
		t.Skip("/var/tmp is not on the root filesystem")
	}
	tagged := filepath.Join(base, "usr/lib/python3.99/EXTERNALLY-MANAGED")
	other := filepath.Join(base, "usr/lib/python3.98/EXTERNALLY-MANAGED")
	for name, data := range map[string]string{tagged: GuardTag + "\n[externally-managed]\n", other: "[externally-managed]\n"} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var hide []string
	for _, m := range guardMarkers(base) {
		hide = append(hide, filepath.Join(base, m))
	}
	if !slices.Equal(hide, []string{tagged}) {
		t.Fatalf("guardMarkers found %q, want %s", hide, tagged)
	}
	c := newCopy(t, Options{Hide: hide})
	if !slices.Contains(c.Seeded, tagged) {
		t.Errorf("Seeded %v lacks %s", c.Seeded, tagged)
	}
	s := run(t, c, "cat "+other+"; cat "+tagged+"; ls "+filepath.Dir(tagged))
	if s.stdout != "[externally-managed]\n" || !strings.Contains(s.stderr, tagged+": No such file or directory") {
		t.Errorf("in the copy: stdout %q, stderr %q", s.stdout, s.stderr)
	}
	if data, err := os.ReadFile(tagged); err != nil || !strings.HasPrefix(string(data), GuardTag) {
		t.Errorf("the real marker: %q, %v", data, err)
	}
}

// The copy has a policy-rc.d that refuses to start services, and cannot
// see the state directories.
func TestSeeded(t *testing.T) {
	_, hostErr := os.Lstat(PolicyRCD)
	c := newCopy(t, Options{})
	if _, err := os.Lstat("/usr/sbin"); err == nil && !slices.Contains(c.Seeded, PolicyRCD) {
		t.Errorf("Seeded %v lacks %s", c.Seeded, PolicyRCD)
	}
	var root, state unix.Stat_t
	if err := unix.Stat("/", &root); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(testStateDir, &state); err != nil {
		t.Fatal(err)
	}
	// The state directory needs hiding where the root overlay shows it
	// (not where /var/tmp is a tmpfs).
	hidden := []string{"/var/lib/undosh", "/" + HiddenName}
	if root.Dev == state.Dev {
		hidden = append(hidden, testStateDir)
	}
	for _, p := range hidden {
		if !slices.Contains(c.Seeded, p) {
			t.Errorf("Seeded %v lacks %s", c.Seeded, p)
		}
	}
	s := run(t, c, PolicyRCD+" some-service start; echo $?; ls -a "+filepath.Dir(testStateDir)+" /var/lib; ls "+testStateDir)
	if !strings.HasPrefix(s.stdout, "101\n") {
		t.Errorf("policy-rc.d in the copy: %q", s.stdout)
	}
	if strings.Contains(s.stdout, filepath.Base(testStateDir)) || strings.Contains(s.stdout, "undosh") {
		t.Errorf("the copy sees the state directory:\n%s", s.stdout)
	}
	if !strings.Contains(s.stderr, "No such file or directory") {
		t.Errorf("ls of the state directory in the copy: %q", s.stderr)
	}
	if _, err := os.Lstat(PolicyRCD); (err == nil) != (hostErr == nil) {
		t.Errorf("the real %s changed: %v, before %v", PolicyRCD, err, hostErr)
	}
	// The mirrored directories look as the real ones.
	dirs := []string{"/", "/usr", "/usr/sbin", "/var"}
	if root.Dev == state.Dev {
		dirs = append(dirs, filepath.Dir(testStateDir))
	}
	s = run(t, c, "stat -c '%n %a %u %g %Y' "+strings.Join(dirs, " "))
	want, err := exec.Command("stat", append([]string{"-c", "%n %a %u %g %Y"}, dirs...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if s.stdout != string(want) {
		t.Errorf("directories in the copy:\n%s\non the real root:\n%s", s.stdout, want)
	}
}

// An on-disk copy keeps its upper layer on the real filesystem, hidden
// from the copy.
func TestOnDisk(t *testing.T) {
	c := newCopy(t, Options{OnDisk: true})
	l := c.OverlayOf("/")
	if !l.SameFS {
		var a, b unix.Stat_t
		unix.Stat("/", &a)
		unix.Stat(testStateDir, &b)
		if a.Dev == b.Dev {
			t.Errorf("on-disk root overlay not on the root filesystem: %+v", l)
		}
	}
	s := run(t, c, "echo x > /root/undosh-test-ondisk; ls "+testStateDir+" 2>&1; ls "+l.Upper+" 2>&1")
	if strings.Contains(s.stdout, "Too many levels") || strings.Count(s.stdout, "No such file") != 2 {
		t.Errorf("the copy sees its own layers: %q", s.stdout)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(l.Upper, &st); err != nil || st.Type == unix.TMPFS_MAGIC {
		t.Errorf("upper %s is on a tmpfs (%v)", l.Upper, err)
	}
	if b, err := os.ReadFile(filepath.Join(l.Upper, "root/undosh-test-ondisk")); err != nil || string(b) != "x\n" {
		t.Errorf("upper: %q, %v", b, err)
	}
	if s := run(t, c, "cat /root/undosh-test-ondisk"); s.stdout != "x\n" {
		t.Errorf("second session: %q %q", s.stdout, s.stderr)
	}
	if _, err := os.Lstat("/root/undosh-test-ondisk"); err == nil {
		t.Errorf("the write reached the real root")
	}
}

// Cleanup discards the copies of a process that died, and leaves those
// of live processes.
func TestCleanup(t *testing.T) {
	live := newCopy(t, Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, testStateDir)
	cmd.Args[0] = testCreateName
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", testCreateName, err)
	}
	dead := strings.TrimSpace(string(out))
	t.Cleanup(func() { discardDir(dead) })
	if mounted, err := isMountPoint(dead); !mounted || err != nil {
		t.Fatalf("the dead process's copy %s: mounted %v, %v", dead, mounted, err)
	}
	if err := Cleanup(testStateDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead process's copy: %v", err)
	}
	for line := range mountLines(t) {
		if strings.Contains(line, filepath.Base(dead)) {
			t.Errorf("mount left: %s", line)
		}
	}
	if _, err := Open(live.Dir); err != nil {
		t.Errorf("the live copy: %v", err)
	}
	if s := run(t, live, "true"); s.err != nil || s.ExitCode != 0 {
		t.Errorf("the live copy after Cleanup: %+v, %v", s.Result, s.err)
	}
}

// Open reads back what Create recorded.
func TestOpen(t *testing.T) {
	c := newCopy(t, Options{})
	o, err := Open(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.ID != c.ID || !o.T0.Equal(c.T0) || len(o.Overlays) != len(c.Overlays) || !slices.Equal(o.Seeded, c.Seeded) {
		t.Errorf("Open: %+v\nCreate: %+v", o, c)
	}
	if c.T0.After(time.Now()) || time.Since(c.T0) > time.Minute {
		t.Errorf("T0 %v", c.T0)
	}
	if o.Overlays[0].Mount != "/" || o.Overlays[0].Dev == 0 {
		t.Errorf("root overlay: %+v", o.Overlays[0])
	}
	if s := run(t, o, "true"); s.err != nil || s.ExitCode != 0 {
		t.Errorf("run in the opened copy: %+v, %v", s.Result, s.err)
	}
}

// privateNS marks a test re-run by itself in a mount namespace of its own.
const privateNS = "UNDOSH_FORK_TEST_PRIVATE_NS"

// inPrivateNS reports whether the test runs in a private mount namespace;
// when it does not, it runs the test there (a mount made on the machine
// would break the other tests copying its mounts meanwhile) and says so.
func inPrivateNS(t *testing.T) bool {
	t.Helper()
	if os.Getenv(privateNS) != "" {
		return true
	}
	requireEngine(t)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), privateNS+"=1")
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Fatalf("in a private mount namespace: %v\n%s", err, out)
	case bytes.Contains(out, []byte("--- SKIP")):
		t.Skipf("in a private mount namespace:\n%s", out)
	}
	t.Logf("in a private mount namespace:\n%s", out)
	return false
}

// A mount the machine drops, directory and all, after a copy was planned
// is not in the copy either: the copy still runs.
func TestMountGoneBeforeRun(t *testing.T) {
	if !inPrivateNS(t) {
		return
	}
	dir, err := os.MkdirTemp("/opt", "undosh-fork-gone-")
	if err != nil {
		t.Skipf("no /opt: %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := unix.Mount("undosh-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	c := newCopy(t, Options{})
	if c.OverlayOf(dir+"/x") == nil || c.OverlayOf(dir+"/x").Mount != dir {
		t.Fatalf("the copy has no layer of %s: %+v", dir, c.OverlayOf(dir+"/x"))
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	s := run(t, c, "test -e "+dir+" || echo gone")
	if s.err != nil || s.ExitCode != 0 || s.stdout != "gone\n" {
		t.Fatalf("a copy whose mount went away: %+v, %v, stdout %q, stderr %q", s.Result, s.err, s.stdout, s.stderr)
	}
}

// Cleanup leaves a copy whose creator it cannot see, because that
// creator lives in another pid namespace, as long as the creator holds
// the copy's owner lock; once the lock is free, the copy is gone.
func TestCleanupOtherPidNamespace(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// The pid as seen from here names no live process, as an undosh
	// in a pid namespace of its own would look.
	copyDir := filepath.Join(dir, fmt.Sprintf("%d-1-0000beef", gone.Process.Pid))
	owner, err := holdOwner(copyDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(copyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyDir); err != nil {
		t.Fatalf("a copy whose owner holds its lock was cleaned up: %v", err)
	}
	owner.Close() // the creator ends
	if err := Cleanup(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{copyDir, copyDir + ownerSuffix} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after its creator ended: %v", p, err)
		}
	}
}
