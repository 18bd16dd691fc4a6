// Package vmtest boots real Linux guests under QEMU for tests: [Build]
// makes a guest from Debian's packages (build-guest.sh: Debian's kernel,
// busybox, bash, git and the binaries asked for), once per set of
// inputs, and [Boot] starts it (TCG: no KVM is needed), waits until it
// says it is ready, and stops it when the test ends, whatever its
// outcome. A test whose machine lacks QEMU or the packages is skipped,
// saying what to install.
//
// Only tests import it.
package vmtest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/flock"
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
	for _, tool := range []struct{ name, pkg string }{
		{"qemu-system-x86_64", "qemu-system-x86"}, {"qemu-img", "qemu-utils"}, {"busybox", "busybox-static"},
		{"depmod", "kmod"}, {"mkfs.ext4", "e2fsprogs"}, {"apt-get", "apt"}, {"dpkg-deb", "dpkg"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			if _, err := os.Stat(filepath.Join("/usr/sbin", tool.name)); err != nil {
				t.Skipf("no %s here (apt-get install %s)", tool.name, tool.pkg)
			}
		}
	}
	h := sha256.New()
	h.Write(buildScript)
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
	cmd := exec.Command("bash", append([]string{script, tmp}, binaries...)...)
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
	// Older builds of other inputs go: each holds a 40 MB disk.
	if old, _ := filepath.Glob(filepath.Join(base, "*")); len(old) > 0 {
		for _, o := range old {
			if fi, err := os.Stat(o); err == nil && fi.IsDir() && o != tmp {
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

// Options shape a boot.
type Options struct {
	// Memory in MiB; default 256.
	Memory int
}

// VM is a running guest.
type VM struct {
	Dir string // its own: disk overlay, sockets, console log
	cmd *exec.Cmd
	// done is closed once qemu has ended; err is its end.
	done chan struct{}
	err  error

	mu      sync.Mutex
	console net.Conn
	r       *bufio.Reader
	seq     int
}

// Boot starts g with a disk of its own (a qcow2 overlay over g's root),
// its serial console on a Unix socket (and logged to console.log), and
// QMP on qmp.sock, and waits until it is ready. The end of t stops it.
func Boot(t testing.TB, g Guest, o Options) *VM {
	t.Helper()
	if o.Memory == 0 {
		o.Memory = 256
	}
	dir, err := os.MkdirTemp("", "undosh-vm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	disk := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", g.Root, "-F", "qcow2", disk).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	v := &VM{Dir: dir, done: make(chan struct{})}
	v.cmd = exec.Command("qemu-system-x86_64",
		"-accel", "tcg", "-machine", "pc", "-cpu", "qemu64", "-smp", "2", "-m", strconv.Itoa(o.Memory)+"M",
		"-nographic", "-no-reboot", "-nodefaults", "-no-user-config",
		"-kernel", g.Kernel, "-initrd", g.Initrd, "-append", "console=ttyS0 panic=-1 quiet",
		"-blockdev", "driver=file,filename="+disk+",node-name=f0",
		"-blockdev", "driver=qcow2,file=f0,node-name=root0", "-device", "virtio-blk-pci,drive=root0",
		"-chardev", "socket,id=ser0,path="+filepath.Join(dir, "console.sock")+",server=on,wait=off,logfile="+filepath.Join(dir, "console.log"),
		"-serial", "chardev:ser0",
		"-qmp", "unix:"+filepath.Join(dir, "qmp.sock")+",server=on,wait=off",
		"-monitor", "none", "-display", "none")
	log, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		t.Fatal(err)
	}
	v.cmd.Stdout, v.cmd.Stderr = log, log
	// qemu dies with the test binary, should it be killed before its
	// cleanup runs.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := v.cmd.Start(); err != nil {
		log.Close()
		t.Fatal(err)
	}
	go func() {
		v.err = v.cmd.Wait()
		log.Close()
		close(v.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "console.log"))
			t.Logf("the guest's console:\n%s", tail(b, 4000))
		}
		v.stop()
	})
	if err := v.connect(); err != nil {
		t.Fatalf("boot: %v\nqemu: %s", err, readFile(filepath.Join(dir, "qemu.log")))
	}
	if err := v.waitFor("undosh-guest: ready", BootTimeout); err != nil {
		t.Fatalf("boot: %v", err)
	}
	return v
}

// connect dials the console, which qemu listens on once it has started.
func (v *VM) connect() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", filepath.Join(v.Dir, "console.sock"))
		if err == nil {
			v.console, v.r = c, bufio.NewReader(c)
			return nil
		}
		select {
		case <-v.done:
			return fmt.Errorf("qemu ended: %v", v.err)
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
			case <-v.done:
				return fmt.Errorf("qemu ended before %q: %v", marker, v.err)
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

// cleanConsole drops the CRs a serial console may add.
func cleanConsole(s string) string { return strings.ReplaceAll(s, "\r", "") }

// QMP sends one QMP command and returns its return value.
func (v *VM) QMP(command string, args any) (json.RawMessage, error) {
	c, err := net.Dial("unix", filepath.Join(v.Dir, "qmp.sock"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	dec := json.NewDecoder(c)
	var greeting map[string]any
	if err := dec.Decode(&greeting); err != nil {
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	call := func(cmd string, args any) (json.RawMessage, error) {
		req := map[string]any{"execute": cmd}
		if args != nil {
			req["arguments"] = args
		}
		if err := json.NewEncoder(c).Encode(req); err != nil {
			return nil, err
		}
		for {
			var resp struct {
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Class, Desc string
				} `json:"error"`
				Event string `json:"event"`
			}
			if err := dec.Decode(&resp); err != nil {
				return nil, err
			}
			switch {
			case resp.Event != "":
				continue
			case resp.Error != nil:
				return nil, fmt.Errorf("qmp %s: %s: %s", cmd, resp.Error.Class, resp.Error.Desc)
			}
			return resp.Return, nil
		}
	}
	if _, err := call("qmp_capabilities", nil); err != nil {
		return nil, err
	}
	return call(command, args)
}

// stop ends qemu: quit over QMP, then SIGKILL of its process group.
func (v *VM) stop() {
	select {
	case <-v.done:
		return
	default:
	}
	_, _ = v.QMP("quit", nil)
	select {
	case <-v.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		<-v.done
	}
	if v.console != nil {
		v.console.Close()
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
