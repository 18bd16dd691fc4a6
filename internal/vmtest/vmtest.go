// Package vmtest boots real Linux guests under QEMU for tests: [Build]
// makes a guest from Debian's packages (build-guest.sh: Debian's kernel,
// busybox, bash, git and the binaries asked for), once per set of
// inputs, [BuildDebian] one whose root is Debian itself (debootstrap),
// with real apt and dpkg, and [Boot] starts either (TCG: no KVM is
// needed), waits until it says it is ready, and stops it when the test
// ends, whatever its outcome. A test whose machine lacks QEMU or the
// packages is skipped, saying what to install.
//
// Only tests import it.
package vmtest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/flock"
	"github.com/undosh/undosh/internal/qemu"
)

//go:embed build-guest.sh
var buildScript []byte

// Guest is a built guest: its kernel, initramfs and root disk.
type Guest struct {
	Dir                  string
	Kernel, Initrd, Root string
	KernelVersion        string
}

// BootTimeout bounds a boot under TCG, which takes 3 to 8 s here.
const BootTimeout = 90 * time.Second

// Build makes (or finds, made earlier with the same script and
// binaries) a guest with binaries in /usr/local/bin. It skips t when
// the tools are missing.
func Build(t testing.TB, binaries ...string) Guest {
	t.Helper()
	return build(t, nil, binaries)
}

// BuildDebian is [Build] for a guest whose root is Debian bookworm
// (debootstrap --variant=minbase, with git), for tests of real apt and
// dpkg: apt works offline there, and /root/debs holds hello, a package
// that is not installed. The binaries must run on bookworm's libraries.
// Building needs root and the network to the host's Debian mirror, and
// takes about a minute; it skips t without root or debootstrap.
func BuildDebian(t testing.TB, binaries ...string) Guest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a Debian guest needs root to build (debootstrap): run the test as root")
	}
	if !haveTool("debootstrap") {
		t.Skip("no debootstrap here (apt-get install debootstrap)")
	}
	return build(t, []string{"--debootstrap"}, binaries)
}

// haveTool says whether name is on $PATH or in /usr/sbin, where
// Debian keeps the tools root runs.
func haveTool(name string) bool {
	if _, err := exec.LookPath(name); err == nil {
		return true
	}
	_, err := os.Stat(filepath.Join("/usr/sbin", name))
	return err == nil
}

// build runs build-guest.sh with flags and binaries, or finds what it
// made before from the same inputs.
func build(t testing.TB, flags, binaries []string) Guest {
	t.Helper()
	for _, tool := range []struct{ name, pkg string }{
		{"qemu-system-x86_64", "qemu-system-x86"}, {"qemu-img", "qemu-utils"}, {"busybox", "busybox-static"},
		{"depmod", "kmod"}, {"mkfs.ext4", "e2fsprogs"}, {"apt-get", "apt"}, {"dpkg-deb", "dpkg"},
	} {
		if !haveTool(tool.name) {
			t.Skipf("no %s here (apt-get install %s)", tool.name, tool.pkg)
		}
	}
	h := sha256.New()
	h.Write(buildScript)
	for _, f := range flags {
		fmt.Fprintf(h, "\x00flag %s", f)
	}
	for _, b := range binaries {
		f, err := os.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "\x00%s\x00", filepath.Base(b))
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Join(os.TempDir(), "undosh-vmtest-"+strconv.Itoa(os.Geteuid()))
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	// One build at a time; the others wait, then find it made.
	lock, err := flock.Lock(filepath.Join(base, "build.lock"), syscall.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	dir := filepath.Join(base, hex.EncodeToString(h.Sum(nil))[:16])
	g := Guest{Dir: dir, Kernel: filepath.Join(dir, "vmlinux"), Initrd: filepath.Join(dir, "initrd"), Root: filepath.Join(dir, "root.qcow2")}
	if b, err := os.ReadFile(filepath.Join(dir, "kernel-version")); err == nil {
		g.KernelVersion = strings.TrimSpace(string(b))
		return g
	}
	tmp := dir + ".building"
	os.RemoveAll(tmp)
	script := filepath.Join(base, "build-guest.sh")
	if err := os.WriteFile(script, buildScript, 0o700); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{script}, flags...), tmp)
	cmd := exec.Command("bash", append(args, binaries...)...)
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		os.RemoveAll(tmp)
		t.Skipf("cannot build a guest here: %s", bytes.TrimSpace(out))
	}
	if err != nil {
		os.RemoveAll(tmp)
		t.Fatalf("build-guest.sh: %v\n%s", err, out)
	}
	// Builds of other inputs a day old go (each holds a disk of 40 MB,
	// 450 MB for a Debian one); a newer one may be another test
	// binary's, booting now.
	if old, _ := filepath.Glob(filepath.Join(base, "*")); len(old) > 0 {
		for _, o := range old {
			if fi, err := os.Stat(o); err == nil && fi.IsDir() && o != tmp && time.Since(fi.ModTime()) > 24*time.Hour {
				os.RemoveAll(o)
			}
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "kernel-version"))
	g.KernelVersion = strings.TrimSpace(string(b))
	return g
}

// GoBuild builds the named commands of this module (cmd/NAME) into a
// directory of t's and returns their paths: the binaries a guest runs,
// or a host's undohost.
func GoBuild(t testing.TB, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir}
	var paths []string
	for _, n := range names {
		args = append(args, "github.com/undosh/undosh/cmd/"+n)
		paths = append(paths, filepath.Join(dir, n))
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return paths
}

// Median is the median of d, for a benchmark's report.
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// MS is d in milliseconds, for b.ReportMetric.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Options shape a boot.
type Options struct {
	// Memory in MiB; default 256.
	Memory int
}

// VM is a running guest and its console.
type VM struct {
	*qemu.Machine
	mu      sync.Mutex
	console net.Conn
	r       *bufio.Reader
	seq     int
}

// Config is how g boots with o.
func (g Guest) Config(o Options) qemu.Config {
	return qemu.Config{Kernel: g.Kernel, Initrd: g.Initrd, Append: "console=ttyS0 panic=-1 quiet", Memory: o.Memory}
}

// Boot starts g with a disk of its own (a qcow2 layer over g's root),
// and waits until it is ready. The end of t stops it.
func Boot(t testing.TB, g Guest, o Options) *VM {
	t.Helper()
	m, err := qemu.Start(g.Config(o), tempDir(t), g.Root)
	if err != nil {
		t.Fatalf("boot: %v", err)
	}
	v := Attach(t, m)
	if err := v.waitFor("undosh-guest: ready", BootTimeout); err != nil {
		t.Fatalf("boot: %v", err)
	}
	return v
}

// WaitReady waits until the guest has said it is ready, for a machine
// attached while it boots (one another process started). The console
// log holds what was said before the console was connected.
func (v *VM) WaitReady() error {
	deadline := time.Now().Add(BootTimeout)
	for {
		if b, err := os.ReadFile(v.ConsoleLog()); err == nil && bytes.Contains(b, []byte("undosh-guest: ready")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never said it was ready", v.Dir)
		}
		select {
		case <-v.Done():
			return fmt.Errorf("qemu of %s ended", v.Dir)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Attach takes m (a machine started, or forked, by the test) and its
// console, and stops it when t ends.
func Attach(t testing.TB, m *qemu.Machine) *VM {
	t.Helper()
	v := &VM{Machine: m}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(m.ConsoleLog())
			t.Logf("the console of %s:\n%s", m.Dir, Tail(b, 4000))
		}
		m.Quit(10 * time.Second)
		if v.console != nil {
			v.console.Close()
		}
	})
	if err := v.connect(); err != nil {
		t.Fatalf("console of %s: %v", m.Dir, err)
	}
	return v
}

// AttachResumed is Attach for a machine resumed from a capture (a
// fork's copy, a restore) while a test may have been running a script
// on its console: the console's shell may be in the middle of it, so a
// line that ends any here-document and a marker to wait for put it back
// in step first.
func AttachResumed(t testing.TB, m *qemu.Machine) *VM {
	t.Helper()
	v := Attach(t, m)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	marker := fmt.Sprintf("__undosh_vmtest_sync_%d__", v.seq)
	if _, err := fmt.Fprintf(v.console, "\n__UNDOSH_EOF__\necho __undosh_vmtest_sync_\"%d\"__\n", v.seq); err != nil {
		t.Fatalf("console of %s: %v", m.Dir, err)
	}
	if err := v.waitFor(marker, time.Minute); err != nil {
		t.Fatalf("console of %s: %v", m.Dir, err)
	}
	return v
}

// tempDir is a directory for a machine, removed when t ends.
func tempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "undosh-vm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TempDir is a directory for a machine a test forks, removed when t
// ends.
func TempDir(t testing.TB) string { return tempDir(t) }

// connect dials the console, which qemu listens on once it has started.
func (v *VM) connect() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", v.ConsolePath())
		if err == nil {
			v.console, v.r = c, bufio.NewReader(c)
			return nil
		}
		select {
		case <-v.Done():
			return errors.New("qemu ended")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no console socket: %w", err)
		}
	}
}

// waitFor reads the console until a line holds marker.
func (v *VM) waitFor(marker string, timeout time.Duration) error {
	_ = v.console.SetReadDeadline(time.Now().Add(timeout))
	defer v.console.SetReadDeadline(time.Time{})
	for {
		line, err := v.r.ReadString('\n')
		if strings.Contains(line, marker) {
			return nil
		}
		if err != nil {
			select {
			case <-v.Done():
				return fmt.Errorf("qemu ended before %q", marker)
			default:
			}
			return fmt.Errorf("no %q on the console: %w", marker, err)
		}
	}
}

// Run runs script in the guest's shell on its console and returns what
// it printed (standard output and error together) and its status.
func (v *VM) Run(script string, timeout time.Duration) (string, int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	end := fmt.Sprintf("__undosh_vmtest_end_%d__", v.seq)
	// The script goes in as a here-document to a shell of its own, so
	// that its exit ends only it; the console echoes nothing (the
	// guest's init), and the marker is written quoted so that even an
	// echo would not end the read.
	in := fmt.Sprintf("bash <<'__UNDOSH_EOF__' 2>&1; echo __undosh_vmtest_end_\"%d\"__ $?\n%s\n__UNDOSH_EOF__\n", v.seq, script)
	if strings.Contains(script, "__UNDOSH_EOF__") {
		return "", -1, errors.New("the script holds the here-document's end marker")
	}
	// What the console said before (boot messages not read yet) is not
	// this script's.
	v.drain()
	if _, err := io.WriteString(v.console, in); err != nil {
		return "", -1, err
	}
	_ = v.console.SetReadDeadline(time.Now().Add(timeout))
	defer v.console.SetReadDeadline(time.Time{})
	var out strings.Builder
	for {
		line, err := v.r.ReadString('\n')
		if i := strings.Index(line, end+" "); i >= 0 {
			out.WriteString(line[:i])
			code, _ := strconv.Atoi(strings.TrimSpace(line[i+len(end)+1:]))
			return cleanConsole(out.String()), code, nil
		}
		out.WriteString(line)
		if err != nil {
			return cleanConsole(out.String()), -1, fmt.Errorf("the guest did not finish %q: %w", script, err)
		}
	}
}

// drain reads and drops what the console has sent so far.
func (v *VM) drain() {
	_ = v.console.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	for {
		if _, err := v.r.ReadString('\n'); err != nil {
			break
		}
	}
	_ = v.console.SetReadDeadline(time.Time{})
}

// cleanConsole drops the CRs a serial console may add.
func cleanConsole(s string) string { return strings.ReplaceAll(s, "\r", "") }

// Tail is the last n bytes of b, for a log in a failure's message.
func Tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
