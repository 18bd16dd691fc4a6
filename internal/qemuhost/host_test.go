package qemuhost

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/flock"
	"github.com/undosh/undosh/internal/qemu"
	"github.com/undosh/undosh/internal/vmtest"
)

func bootHost(t *testing.T, max int) (*Host, vmtest.Guest) {
	t.Helper()
	g := vmtest.Build(t)
	h := &Host{Root: filepath.Join(vmtest.TempDir(t), "qemu"), MaxChain: max, AgentTimeout: 2 * time.Second,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	if _, err := h.Boot("sb", BootOptions{Config: g.Config(vmtest.Options{}), Base: g.Root, Listener: filepath.Join(h.Root, "none.sock")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop("sb") })
	return h, g
}

// console attaches to the sandbox's VM now (booted: waits until it is
// ready).
func console(t *testing.T, h *Host, booted bool) *vmtest.VM {
	t.Helper()
	sb, err := h.ReadSandbox("sb")
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.open(sb.VM)
	if err != nil {
		t.Fatal(err)
	}
	if !booted {
		v := vmtest.AttachResumed(t, m)
		m.QMP().Close()
		return v
	}
	v := vmtest.Attach(t, m)
	// QMP serves one client: the commands under test need it.
	m.QMP().Close()
	if err := v.WaitReady(); err != nil {
		t.Fatal(err)
	}
	return v
}

// layers lists the disk layers in the state directory, relative to it.
func layers(h *Host) []string {
	all, _ := filepath.Glob(filepath.Join(h.Root, "vms", "*", "disk*.qcow2"))
	var rel []string
	for _, f := range all {
		r, _ := filepath.Rel(filepath.Join(h.Root, "vms"), f)
		rel = append(rel, r)
	}
	sort.Strings(rel)
	return rel
}

// A layer stays while a VM or a checkpoint stands on it, and goes with
// the last of them; a chain longer than MaxChain is flattened while its
// VM runs, and the guest's disk is the same after it.
func TestLayers(t *testing.T) {
	h, _ := bootHost(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	v := console(t, h, true)
	if out, code, err := v.Run("echo kept > /root/f; sync", time.Minute); err != nil || code != 0 {
		t.Fatalf("%q %d %v", out, code, err)
	}
	sb, _ := h.ReadSandbox("sb")
	first := sb.VM

	c1, err := h.Fork(ctx, "sb", "op1")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.vmDir(c1)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a deleted copy's directory: %v", err)
	}
	want := []string{first + "/disk-1.qcow2", first + "/disk.qcow2"}
	if got := layers(h); !equal(got, want) {
		t.Errorf("after a discarded fork: %v, want %v", got, want)
	}
	// The checkpoint freezes the top: four files in the chain, one more
	// than MaxChain, so the sandbox's VM is flattened onto the base.
	if _, err := h.Snapshot(ctx, "sb", "s1"); err != nil {
		t.Fatal(err)
	}
	if chain := chainOf(t, h, first); len(chain) != 2 || chain[0] != h.vmDir(first)+"/disk-2.qcow2" {
		t.Errorf("the chain after a checkpoint made it long: %v", chain)
	}
	c2, err := h.Fork(ctx, "sb", "op2")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Promote(ctx, "sb", c2); err != nil {
		t.Fatal(err)
	}
	// The promoted copy stands on the frozen top of the VM it replaced;
	// the checkpoint on the two layers under its own frozen one.
	if chain := chainOf(t, h, c2); len(chain) != 3 {
		t.Errorf("the promoted VM's chain: %v", chain)
	}
	want = []string{c2 + "/disk.qcow2", first + "/disk-1.qcow2", first + "/disk-2.qcow2", first + "/disk.qcow2"}
	sort.Strings(want)
	if got := layers(h); !equal(got, want) {
		t.Errorf("after a promotion, with a checkpoint: %v, want %v", got, want)
	}
	v = console(t, h, false)
	if out, code, err := v.Run("cat /root/f", time.Minute); err != nil || code != 0 || strings.TrimSpace(out) != "kept" {
		t.Errorf("the file after the flatten and the promotion: %q %d %v", out, code, err)
	}
	if err := h.DeleteSnapshot("sb", "s1"); err != nil {
		t.Fatal(err)
	}
	want = []string{c2 + "/disk.qcow2", first + "/disk-2.qcow2"}
	sort.Strings(want)
	if got := layers(h); !equal(got, want) {
		t.Errorf("after the checkpoint went: %v, want %v", got, want)
	}
}

// chainOf is the disk chain of VM id.
func chainOf(t *testing.T, h *Host, id string) []string {
	t.Helper()
	info, err := qemu.Inspect(h.vmDir(id))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := qemu.Chain(info.Disk)
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// A fork while another command holds the sandbox (another fork, a
// checkpoint) is refused at once; a guest agent that never answers is an
// error within the agent timeout, not a hang; an allowlist is refused
// with what to do instead.
func TestRefusals(t *testing.T) {
	h, _ := bootHost(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := flock.Lock(filepath.Join(h.Root, "sandboxes", "sb.lock"), unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Fork(ctx, "sb", "op1"); !errors.Is(err, errBusy) {
		t.Errorf("a fork while the sandbox is locked: %v", err)
	}
	if _, err := h.Snapshot(ctx, "sb", "s1"); !errors.Is(err, errBusy) {
		t.Errorf("a checkpoint while the sandbox is locked: %v", err)
	}
	l.Close()
	began := time.Now()
	err = h.Notify(ctx, "sb", "", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "undoctl agent") || time.Since(began) > 20*time.Second {
		t.Errorf("notify to a guest without an agent: %v after %s", err, time.Since(began))
	}
	c, err := h.Fork(ctx, "sb", "op2")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Network(c, "allow", []string{"deb.debian.org:443"}); !errors.Is(err, ErrAllowlist) {
		t.Errorf("network allow: %v", err)
	}
	if err := h.Network(c, "off", nil); err != nil {
		t.Errorf("network off: %v", err)
	}
	sb, _ := h.ReadSandbox("sb")
	if err := h.Delete(ctx, sb.VM); err == nil {
		t.Errorf("deleting the sandbox's own VM was not refused")
	}
}

// The disk of the state directory fills: a fork and a checkpoint each
// fail saying so and what to do, leave nothing behind, and the
// sandbox's VM runs on. The test runs itself again in a mount namespace
// of its own (unshare), where its small tmpfs lives and dies.
func TestDiskFull(t *testing.T) {
	if os.Getenv("UNDOSH_TEST_DISK_FULL") == "" {
		if os.Geteuid() != 0 {
			t.Skip("mounting a small tmpfs needs root")
		}
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("unshare (util-linux) is not installed")
		}
		vmtest.Build(t) // skips here, not in the namespace, without QEMU
		cmd := exec.Command(unshare, "--mount", "--propagation", "private", os.Args[0], "-test.run=^TestDiskFull$", "-test.v")
		cmd.Env = append(os.Environ(), "UNDOSH_TEST_DISK_FULL=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestDiskFull")) {
			t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
		}
		return
	}
	g := vmtest.Build(t)
	small := vmtest.TempDir(t)
	if err := unix.Mount("tmpfs", small, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(small, unix.MNT_DETACH) })
	h := &Host{Root: filepath.Join(small, "qemu")}
	if _, err := h.Boot("sb", BootOptions{Config: g.Config(vmtest.Options{}), Base: g.Root, Listener: filepath.Join(small, "none.sock")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop("sb") })
	v := console(t, h, true)
	sb, _ := h.ReadSandbox("sb")
	// All but a little of the disk; the VM's console log grows
	// meanwhile, so a fill that finds the disk full already has done
	// its job.
	var st unix.Statfs_t
	unix.Statfs(small, &st)
	fill := int64(st.Bavail)*int64(st.Bsize) - 32<<10
	if err := os.WriteFile(filepath.Join(small, "fill"), make([]byte, fill), 0o600); err != nil && !errors.Is(err, unix.ENOSPC) {
		t.Fatal(err)
	}
	// The guest writes to its disk meanwhile: QEMU stops it rather than
	// lose the write (io-error), and the write must land once there is
	// room.
	m, err := h.open(sb.VM)
	if err != nil {
		t.Fatal(err)
	}
	status, err := m.QMP().Status(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wrote := status != "io-error" // or the guest's own writes stopped it already
	if wrote {
		if out, code, err := v.Run("(dd if=/dev/urandom of=/root/big bs=1M count=8 conv=fsync && touch /root/big.done) </dev/null >/dev/null 2>&1 &", time.Minute); err != nil || code != 0 {
			t.Fatalf("a write in the guest: %q %d %v", out, code, err)
		}
		if _, err := m.QMP().WaitEvent("BLOCK_IO_ERROR", nil, time.Minute); err != nil {
			t.Fatalf("the guest's write onto a full disk: %v", err)
		}
	}
	m.QMP().Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := h.Fork(ctx, "sb", "op1"); err == nil || !strings.Contains(err.Error(), "is full") {
		t.Errorf("a fork onto a full disk: %v", err)
	}
	if _, err := h.Snapshot(ctx, "sb", "s1"); err == nil || !strings.Contains(err.Error(), "is full") {
		t.Errorf("a checkpoint onto a full disk: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(h.Root, "vms"))
	snaps, _ := os.ReadDir(filepath.Join(h.Root, "snaps"))
	if len(ents) != 1 || len(snaps) != 0 {
		t.Errorf("left after the failures: %d VMs, %d checkpoints", len(ents), len(snaps))
	}
	os.Remove(filepath.Join(small, "fill"))
	if now, _ := h.ReadSandbox("sb"); now.VM != sb.VM {
		t.Errorf("the sandbox's VM changed: %s, was %s", now.VM, sb.VM)
	}
	// With room again, a fork works; the sandbox's VM goes on first, and
	// the write it stopped on lands.
	if _, err := h.Fork(ctx, "sb", "op2"); err != nil {
		t.Errorf("a fork once there is room: %v", err)
	}
	if out, code, err := v.Run("echo alive", time.Minute); err != nil || code != 0 || strings.TrimSpace(out) != "alive" {
		t.Errorf("the sandbox's VM after the failures: %q %d %v", out, code, err)
	}
	if out, code, err := v.Run("while [ ! -e /root/big.done ]; do sleep 0.1; done; stat -c %s /root/big", time.Minute); wrote && (err != nil || code != 0 || strings.TrimSpace(out) != "8388608") {
		t.Errorf("the guest's write after the disk had room: %q %d %v", out, code, err)
	}
}
