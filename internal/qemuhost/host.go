// Package qemuhost is the QEMU provider of undohost: the operations its
// provider command templates run (`undohost qemu OP …`,
// docs/undohost.md, "The QEMU provider"), on VMs that [qemu.Machine]
// forks whole. Every command is a process of its own, so that all it
// knows lives in a state directory and the VMs outlive both it and
// undohost:
//
//	ROOT/sandboxes/NAME.json   the sandbox: its VM now, its listener, its port forwards
//	ROOT/sandboxes/NAME.lock   held by the command that changes the sandbox's VMs
//	ROOT/vms/ID/               one VM: qemu's sockets, its disk layers, owner.json
//	ROOT/snaps/ID/             one checkpoint: its memory (state) and checkpoint.json
//
// A VM's disk is a chain of qcow2 layers over the sandbox's base image:
// each fork and checkpoint freezes the top layer, and the VMs and
// checkpoints standing on a layer keep it. A layer goes once nothing
// stands on it ([Host.collect], a mark and sweep after every change), and
// a chain longer than [Host.MaxChain] is flattened while its VM runs.
package qemuhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/flock"
	"github.com/undosh/undosh/internal/qemu"
	"github.com/undosh/undosh/internal/vmagent"
)

// Host is a state directory of VMs.
type Host struct {
	Root string
	// QEMU is the qemu a fork or restore starts ("": the sandbox's own).
	QEMU string
	// MaxChain is the longest disk chain a sandbox's VM keeps before it
	// is flattened (default 8).
	MaxChain int
	// AgentTimeout bounds how long a VM's guest agent may take to answer
	// (default 30 s): a guest that never answers is an error, not a hang.
	AgentTimeout time.Duration
	Log          *slog.Logger
}

// Sandbox is what ROOT/sandboxes/NAME.json says of a sandbox.
type Sandbox struct {
	Name string `json:"name"`
	// VM is the id of the sandbox's VM now.
	VM string `json:"vm"`
	// Listener is the sandbox's undohost listener (a Unix socket's
	// path): the sandbox's VM reaches it, and no other.
	Listener string `json:"listener"`
	// Forwards are the host port forwards of the sandbox's VM, which
	// move to each VM that replaces it.
	Forwards []string `json:"forwards,omitempty"`
}

// owner is what ROOT/vms/ID/owner.json says of a VM.
type owner struct {
	Sandbox string `json:"sandbox"`
	// Role is "primary" (the sandbox's VM, or one that was), "forking"
	// (a fork or restore under way: its command holds the sandbox's
	// lock), "copy" (a fork's copy, undohost's until it deletes or
	// promotes it), or "ended".
	Role string `json:"role"`
	Op   string `json:"op,omitempty"`
}

// checkpointRecord is ROOT/snaps/ID/checkpoint.json.
type checkpointRecord struct {
	Sandbox    string `json:"sandbox"`
	Checkpoint qemu.Checkpoint
	Size       int64 `json:"size"`
}

func (h *Host) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

func (h *Host) sandboxPath(name string) string {
	return filepath.Join(h.Root, "sandboxes", name+".json")
}
func (h *Host) vmDir(id string) string   { return filepath.Join(h.Root, "vms", id) }
func (h *Host) snapDir(id string) string { return filepath.Join(h.Root, "snaps", id) }

// names are sandbox, VM and checkpoint ids: they become file names.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func checkName(kind, s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%s %q: want letters, digits, '_', '.' and '-' only", kind, s)
	}
	return nil
}

// ReadSandbox returns the sandbox's record.
func (h *Host) ReadSandbox(name string) (Sandbox, error) {
	var sb Sandbox
	if err := checkName("sandbox", name); err != nil {
		return sb, err
	}
	b, err := os.ReadFile(h.sandboxPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return sb, fmt.Errorf("no sandbox %s in %s: boot it first (undohost qemu boot)", name, h.Root)
	}
	if err == nil {
		err = json.Unmarshal(b, &sb)
	}
	if err != nil {
		return sb, fmt.Errorf("sandbox %s: %w", name, err)
	}
	return sb, nil
}

func (h *Host) writeSandbox(sb Sandbox) error {
	b, err := json.Marshal(sb)
	if err != nil {
		return err
	}
	return atomicfile.Write(h.sandboxPath(sb.Name), b, 0o600)
}

func (h *Host) readOwner(id string) (owner, bool) {
	var o owner
	b, err := os.ReadFile(filepath.Join(h.vmDir(id), "owner.json"))
	return o, err == nil && json.Unmarshal(b, &o) == nil
}

func (h *Host) writeOwner(id string, o owner) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(h.vmDir(id), "owner.json"), b, 0o600)
}

// errBusy is a fork or checkpoint of a sandbox asked while another of
// its commands changes its VMs.
var errBusy = errors.New("another fork, checkpoint or restore of this sandbox is under way: one at a time")

// lock takes the sandbox's lock: at once (wait false: a second fork is
// refused), or waiting up to a minute.
func (h *Host) lock(name string, wait bool) (*os.File, error) {
	if err := os.MkdirAll(filepath.Join(h.Root, "sandboxes"), 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(h.Root, "sandboxes", name+".lock")
	deadline := time.Now().Add(time.Minute)
	for {
		f, err := flock.Lock(path, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, err
		}
		if !wait {
			return nil, fmt.Errorf("sandbox %s: %w", name, errBusy)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("sandbox %s: still locked by another command after a minute", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newID(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// BootOptions are a sandbox's first VM.
type BootOptions struct {
	Config qemu.Config
	// Base is the disk image it boots over (kept: every layer stands on
	// it).
	Base string
	// Listener is the sandbox's undohost listener socket.
	Listener string
}

// Boot starts the sandbox's first VM and prints nothing; the VM's id is
// returned.
func (h *Host) Boot(name string, o BootOptions) (string, error) {
	if err := checkName("sandbox", name); err != nil {
		return "", err
	}
	l, err := h.lock(name, true)
	if err != nil {
		return "", err
	}
	defer l.Close()
	if sb, err := h.ReadSandbox(name); err == nil {
		if m, err := qemu.Open(h.vmDir(sb.VM)); err == nil {
			m.QMP().Close()
			return "", fmt.Errorf("sandbox %s runs already (VM %s): stop it first (undohost qemu stop %s)", name, sb.VM, name)
		}
	}
	if o.Listener == "" {
		return "", errors.New("boot: no listener: give the sandbox's undohost listener socket (--listener)")
	}
	o.Config.Agent = true
	id := newID("vm-")
	dir := h.vmDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := h.writeOwner(id, owner{Sandbox: name, Role: "primary"}); err != nil {
		return "", err
	}
	m, err := qemu.Start(o.Config, dir, o.Base)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	defer m.QMP().Close()
	if err := linkListener(m, o.Listener); err != nil {
		m.Kill()
		os.RemoveAll(dir)
		return "", err
	}
	return id, h.writeSandbox(Sandbox{Name: name, VM: id, Listener: o.Listener, Forwards: o.Config.Forwards})
}

// linkListener makes the VM's host link reach the sandbox's listener.
func linkListener(m *qemu.Machine, listener string) error {
	return atomicfile.Symlink(listener, m.HostLinkPath())
}

// open attaches to a VM of the state directory.
func (h *Host) open(id string) (*qemu.Machine, error) {
	if err := checkName("VM", id); err != nil {
		return nil, err
	}
	return qemu.Open(h.vmDir(id))
}

// capture takes the sandbox's lock at once (a second fork or
// checkpoint is refused) and attaches to its VM, for a command that
// captures it; unlock lets both go. A VM that QEMU stopped when its disk
// was full goes on first, if there is room again: a copy or a checkpoint
// of a stopped VM would be stopped too.
func (h *Host) capture(name string) (_ *qemu.Machine, unlock func(), _ error) {
	l, err := h.lock(name, false)
	if err != nil {
		return nil, nil, err
	}
	sb, err := h.ReadSandbox(name)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	m, err := h.open(sb.VM)
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("sandbox %s: %w", name, err)
	}
	if err := m.Unstall(); err != nil {
		m.QMP().Close()
		l.Close()
		return nil, nil, fmt.Errorf("sandbox %s: its VM %s: %w%s", name, sb.VM, err, diskHint(err, h.Root))
	}
	return m, func() { m.QMP().Close(); l.Close() }, nil
}

// Fork makes a running copy of the sandbox's VM (the live method:
// the sandbox's VM pauses for the last round only) and returns its id.
// The copy's network is cut from the start: it has no link to the
// listener, and no port forwards.
func (h *Host) Fork(ctx context.Context, name, op string) (string, error) {
	if err := checkName("operation", op); err != nil {
		return "", err
	}
	m, unlock, err := h.capture(name)
	if err != nil {
		return "", err
	}
	defer unlock()
	h.collect(name)
	m.CopyBinary = h.QEMU
	id := "copy-" + op
	dir := h.vmDir(id)
	// A fork that fails at any point, its own state file included,
	// leaves no directory behind.
	fail := func(err error) (string, error) {
		os.RemoveAll(dir)
		h.collect(name)
		return "", fmt.Errorf("sandbox %s: %w%s", name, err, diskHint(err, h.Root))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	if err := h.writeOwner(id, owner{Sandbox: name, Role: "forking", Op: op}); err != nil {
		return fail(err)
	}
	c, t, err := m.Fork(ctx, dir)
	if err != nil {
		return fail(err)
	}
	c.QMP().Close()
	h.log().Info("fork", "sandbox", name, "copy", id, "paused", t.Paused.String(), "running", t.Running.String(), "ram", t.RAM)
	if err := h.writeOwner(id, owner{Sandbox: name, Role: "copy", Op: op}); err != nil {
		h.end(id)
		return fail(err)
	}
	return id, nil
}

// diskHint says what to do when err came of a full disk: qemu's own
// messages say so, or the migration to a state file just failed, in
// which case the free space tells.
func diskHint(err error, root string) string {
	full := errors.Is(err, unix.ENOSPC) || strings.Contains(err.Error(), "No space left on device")
	var st unix.Statfs_t
	if !full && unix.Statfs(root, &st) == nil {
		full = int64(st.Bavail)*int64(st.Bsize) < 64<<20
	}
	if full {
		return fmt.Sprintf(" (the disk of %s is full of layers and state files: drop old checkpoints with undoctl gc, or give it room)", root)
	}
	return ""
}

// ErrAllowlist is a copy's network asked to reach an allowlist, which
// slirp cannot filter.
var ErrAllowlist = errors.New("the qemu provider cannot narrow a copy's network to an allowlist: its user-mode network has no filter. " +
	"Run the step with network off, or give the host a tap in a network namespace of its own with nftables rules (docs/undohost.md)")

// Network sets a copy's network: "off" is how a copy starts (nothing
// to do); "allow" is refused.
func (h *Host) Network(id, mode string, allow []string) error {
	if _, ok := h.readOwner(id); !ok {
		return fmt.Errorf("no VM %s", id)
	}
	switch mode {
	case "off", "":
		return nil
	case "allow":
		return fmt.Errorf("network allow %s: %w", strings.Join(allow, ","), ErrAllowlist)
	}
	return fmt.Errorf("network mode %q: want off or allow", mode)
}

// Exec runs argv in the VM through its guest agent, streaming its
// output, and returns its status.
func (h *Host) Exec(ctx context.Context, id, cwd string, env, argv []string, stdout, stderr io.Writer) (int, error) {
	if err := checkName("VM", id); err != nil {
		return -1, err
	}
	c, err := h.agent(ctx, id)
	if err != nil {
		return -1, err
	}
	defer c.Close()
	return c.Exec(ctx, argv, cwd, env, stdout, stderr)
}

// agent dials the VM's guest agent and waits until it answers a ping
// within AgentTimeout. A ping not answered soon is asked again on a new
// connection: hanging up is the one sign a guest reads from its
// virtio-serial port, and it ends whatever its agent still served (a
// session of the VM's original, in a copy or a restored VM), and QEMU
// drops what the guest wrote that no host read.
func (h *Host) agent(ctx context.Context, id string) (*vmagent.Client, error) {
	timeout := h.AgentTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	path := qemu.AgentPath(h.vmDir(id))
	deadline := time.Now().Add(timeout)
	try := 2 * time.Second
	for n := 1; ; n++ {
		c, err := vmagent.Dial(path, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("VM %s: %w", id, err)
		}
		pctx, cancel := context.WithTimeout(ctx, min(time.Until(deadline), try))
		err = c.Ping(pctx)
		cancel()
		if err == nil {
			if n > 1 {
				h.log().Info("the guest agent answered on a new connection", "vm", id, "tries", n)
			}
			return c, nil
		}
		c.Close()
		if ctx.Err() != nil {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("VM %s: %w (is `undoctl agent --serial %s` running in its guest?)", id, err, qemu.AgentPort)
		}
		try *= 2
	}
}

// Notify gives the VM (the copy id, or the sandbox's VM when id is "")
// the WHO_YOU_ARE JSON who.
func (h *Host) Notify(ctx context.Context, name, id string, who []byte) error {
	if id == "" {
		sb, err := h.ReadSandbox(name)
		if err != nil {
			return err
		}
		id = sb.VM
	}
	c, err := h.agent(ctx, id)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Notify(ctx, who)
	return err
}

// Promote makes the copy the sandbox's VM: the link to the listener
// and the port forwards move to it, and the VM it replaces quits.
func (h *Host) Promote(ctx context.Context, name, id string) error {
	l, err := h.lock(name, true)
	if err != nil {
		return err
	}
	defer l.Close()
	return h.replace(ctx, name, id)
}

// replace makes VM id the sandbox's; the sandbox's lock is held.
func (h *Host) replace(ctx context.Context, name, id string) error {
	sb, err := h.ReadSandbox(name)
	if err != nil {
		return err
	}
	if o, ok := h.readOwner(id); !ok || o.Sandbox != name {
		return fmt.Errorf("VM %s is not a copy of sandbox %s", id, name)
	}
	m, err := h.open(id)
	if err != nil {
		return err
	}
	defer m.QMP().Close()
	old := sb.VM
	// The old VM loses the listener first: from here only the new one
	// can reach it.
	os.Remove(filepath.Join(h.vmDir(old), "hostlink.sock"))
	if err := linkListener(m, sb.Listener); err != nil {
		return err
	}
	if err := h.writeOwner(id, owner{Sandbox: name, Role: "primary"}); err != nil {
		return err
	}
	sb.VM = id
	if err := h.writeSandbox(sb); err != nil {
		return err
	}
	h.end(old)
	// Its ports are free now.
	if err := m.AddForwards(sb.Forwards); err != nil {
		h.log().Error("port forwards", "sandbox", name, "vm", id, "err", err)
	}
	h.flatten(ctx, name, m)
	h.collect(name)
	return nil
}

// flatten streams a long chain into the top of m, the sandbox's VM.
func (h *Host) flatten(ctx context.Context, name string, m *qemu.Machine) {
	max := h.MaxChain
	if max <= 0 {
		max = 8
	}
	chain, err := qemu.Chain(m.Disk)
	if err != nil || len(chain) <= max {
		return
	}
	began := time.Now()
	if err := m.Flatten(ctx); err != nil {
		h.log().Warn("flatten", "sandbox", name, "err", err)
		return
	}
	h.log().Info("flatten", "sandbox", name, "layers", len(chain), "took", time.Since(began).String())
}

// Delete ends a copy; its layers go unless a checkpoint stands on them.
func (h *Host) Delete(ctx context.Context, id string) error {
	o, ok := h.readOwner(id)
	if !ok || o.Role == roleEnded {
		// Gone already: delete is asked again after a restart.
		return nil
	}
	l, err := h.lock(o.Sandbox, true)
	if err != nil {
		return err
	}
	defer l.Close()
	if sb, err := h.ReadSandbox(o.Sandbox); err == nil && sb.VM == id {
		return fmt.Errorf("VM %s is sandbox %s's VM, not a copy: not deleted", id, o.Sandbox)
	}
	h.end(id)
	h.collect(o.Sandbox)
	return nil
}

// end stops a VM and drops its record: its layers are the collector's.
func (h *Host) end(id string) {
	if m, err := h.open(id); err == nil {
		m.Quit(10 * time.Second)
	} else if info, err := qemu.Inspect(h.vmDir(id)); err == nil && info.Running {
		// A qemu that does not answer QMP: by the pid it recorded,
		// which is still a qemu's.
		_ = unix.Kill(-info.PID, unix.SIGKILL)
	}
	os.Remove(filepath.Join(h.vmDir(id), "machine.json"))
	if o, ok := h.readOwner(id); ok {
		o.Role = roleEnded
		_ = h.writeOwner(id, o)
	}
}

// roleEnded is a VM that has quit, whose layers may still hold up others.
const roleEnded = "ended"

// Snapshot checkpoints the sandbox's VM as checkpoint id: its memory to
// a state file, and its disk's top frozen. It returns the bytes the
// checkpoint holds.
func (h *Host) Snapshot(ctx context.Context, name, id string) (int64, error) {
	if err := checkName("checkpoint", id); err != nil {
		return 0, err
	}
	m, unlock, err := h.capture(name)
	if err != nil {
		return 0, err
	}
	defer unlock()
	dir := h.snapDir(id)
	cp, err := m.Checkpoint(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return 0, fmt.Errorf("sandbox %s: %w%s", name, err, diskHint(err, h.Root))
	}
	size := fileBytes(cp.State) + fileBytes(cp.Frozen)
	b, err := json.Marshal(checkpointRecord{Sandbox: name, Checkpoint: cp, Size: size})
	if err == nil {
		err = atomicfile.Write(filepath.Join(dir, "checkpoint.json"), b, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return 0, err
	}
	h.log().Info("checkpoint", "sandbox", name, "checkpoint", id, "paused", cp.Paused.String(), "bytes", size)
	h.flatten(ctx, name, m)
	return size, nil
}

// fileBytes is the disk a file takes.
func fileBytes(p string) int64 {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return 0
	}
	return st.Blocks * 512
}

// Restore starts a VM from checkpoint id, memory and disk, and makes it
// the sandbox's VM in place of the one running.
func (h *Host) Restore(ctx context.Context, name, id string) error {
	if err := checkName("checkpoint", id); err != nil {
		return err
	}
	l, err := h.lock(name, true)
	if err != nil {
		return err
	}
	defer l.Close()
	var rec checkpointRecord
	b, err := os.ReadFile(filepath.Join(h.snapDir(id), "checkpoint.json"))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.Sandbox != name {
		return fmt.Errorf("no checkpoint %s of sandbox %s in %s", id, name, h.Root)
	}
	if h.QEMU != "" {
		rec.Checkpoint.Config.Binary = h.QEMU
	}
	vm := newID("vm-")
	dir := h.vmDir(vm)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := h.writeOwner(vm, owner{Sandbox: name, Role: "forking"}); err != nil {
		return err
	}
	m, err := qemu.Restore(ctx, rec.Checkpoint, dir)
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("sandbox %s: %w%s", name, err, diskHint(err, h.Root))
	}
	m.QMP().Close()
	return h.replace(ctx, name, vm)
}

// DeleteSnapshot drops checkpoint id; the layers only it stood on go.
func (h *Host) DeleteSnapshot(name, id string) error {
	if err := checkName("checkpoint", id); err != nil {
		return err
	}
	l, err := h.lock(name, true)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := os.RemoveAll(h.snapDir(id)); err != nil {
		return err
	}
	h.collect(name)
	return nil
}

// Stop ends every VM of the sandbox and drops its record (its
// checkpoints stay until collected with it: gone too).
func (h *Host) Stop(name string) error {
	l, err := h.lock(name, true)
	if err != nil {
		return err
	}
	defer l.Close()
	for _, id := range h.vmsOf(name) {
		h.end(id)
	}
	snaps, _ := os.ReadDir(filepath.Join(h.Root, "snaps"))
	for _, s := range snaps {
		if rec, ok := h.readCheckpoint(s.Name()); ok && rec.Sandbox == name {
			os.RemoveAll(h.snapDir(s.Name()))
		}
	}
	os.Remove(h.sandboxPath(name))
	h.collect(name)
	return nil
}

func (h *Host) readCheckpoint(id string) (checkpointRecord, bool) {
	var rec checkpointRecord
	b, err := os.ReadFile(filepath.Join(h.snapDir(id), "checkpoint.json"))
	return rec, err == nil && json.Unmarshal(b, &rec) == nil
}

// vmsOf lists the VMs of the sandbox.
func (h *Host) vmsOf(name string) []string {
	ents, _ := os.ReadDir(filepath.Join(h.Root, "vms"))
	var ids []string
	for _, e := range ents {
		if o, ok := h.readOwner(e.Name()); ok && o.Sandbox == name {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// collect ends what commands that died left of the sandbox (a VM of a
// fork or restore cut short, a VM a promotion replaced but did not
// stop, a copy whose qemu died), then drops every disk layer of its VMs
// that no VM and no checkpoint of it stands on, and the directories of
// ended VMs left with none. The sandbox's lock is held.
func (h *Host) collect(name string) {
	sb, _ := h.ReadSandbox(name)
	live := map[string]bool{}
	known := true
	mark := func(top string) {
		chain, err := qemu.Chain(top)
		if err != nil {
			h.log().Warn("read a disk chain: all layers are kept", "disk", top, "err", err)
			known = false
			return
		}
		for _, f := range chain {
			live[f] = true
		}
	}
	ents, _ := os.ReadDir(filepath.Join(h.Root, "vms"))
	ended := map[string]bool{}
	var ours []string
	for _, e := range ents {
		id := e.Name()
		o, ok := h.readOwner(id)
		if !ok || o.Sandbox != name {
			continue
		}
		ours = append(ours, id)
		if o.Role == "forking" || o.Role == "primary" && id != sb.VM {
			h.log().Info("end a VM a command left", "sandbox", name, "vm", id, "role", o.Role)
			h.end(id)
			o.Role = roleEnded
		}
		if o.Role != roleEnded {
			if info, err := qemu.Inspect(h.vmDir(id)); err == nil && info.Running {
				mark(info.Disk)
				continue
			}
			h.log().Info("end a VM whose qemu died", "sandbox", name, "vm", id, "role", o.Role)
			h.end(id)
		}
		ended[id] = true
	}
	snaps, _ := os.ReadDir(filepath.Join(h.Root, "snaps"))
	for _, s := range snaps {
		if rec, ok := h.readCheckpoint(s.Name()); ok && rec.Sandbox == name {
			mark(rec.Checkpoint.Frozen)
		}
	}
	if !known {
		return
	}
	for _, id := range ours {
		layers, _ := filepath.Glob(filepath.Join(h.vmDir(id), "disk*.qcow2"))
		left := 0
		for _, f := range layers {
			if live[f] {
				left++
			} else {
				os.Remove(f)
			}
		}
		if left == 0 && ended[id] {
			h.keepLog(id)
			os.RemoveAll(h.vmDir(id))
		}
	}
}

// keepLog keeps the last 64 KiB of what qemu and the console said of a
// VM whose directory goes, in ROOT/logs/ID.log and ID.console.log (the
// newest 32 VMs'): the last words of a copy that died.
func (h *Host) keepLog(id string) {
	dir := filepath.Join(h.Root, "logs")
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	for from, to := range map[string]string{"qemu.log": id + ".log", "console.log": id + ".console.log"} {
		b, err := os.ReadFile(filepath.Join(h.vmDir(id), from))
		if err != nil || len(b) == 0 {
			continue
		}
		_ = os.WriteFile(filepath.Join(dir, to), b[max(0, len(b)-64<<10):], 0o600)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) <= 2*32 {
		return
	}
	slices.SortFunc(logs, func(a, b string) int {
		ai, _ := os.Stat(a)
		bi, _ := os.Stat(b)
		if ai == nil || bi == nil {
			return 0
		}
		return ai.ModTime().Compare(bi.ModTime())
	})
	for _, f := range logs[:len(logs)-2*32] {
		os.Remove(f)
	}
}
