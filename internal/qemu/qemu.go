// Package qemu runs Linux guests under QEMU and forks them whole,
// memory, processes and disk, as a VM host for undosh does (issue 20;
// docs/undohost.md). A [Machine] is one qemu process with its own
// directory: the top qcow2 layer of its disk, its QMP and console
// sockets. [Machine.Fork] makes a running copy by the live method
// (docs/undohost.md, its fork row): the copy waits for the
// original's memory over a Unix socket, the original stops only for the
// last round of the migration, during which its disk's top layer is
// frozen (each side goes on writing a layer of its own over it), then
// both run.
package qemu

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/shquote"
)

// Config is what boots a guest.
type Config struct {
	// Kernel (an ELF with a PVH entry, or a bzImage), Initrd and Append
	// (the kernel's command line; console=ttyS0 is where the console
	// socket reads).
	Kernel, Initrd, Append string
	// Memory in MiB (default 256) and CPUs (default 2).
	Memory, CPUs int
	// Accel is "tcg" (default) or "kvm".
	Accel string
	// Binary is the qemu to run (default qemu-system-x86_64).
	Binary string `json:",omitempty"`
	// Agent gives the guest a virtio-serial port named "undosh" whose
	// host end is the socket AgentPath (the guest agent of
	// internal/vmagent listens on it).
	Agent bool `json:",omitempty"`
	// HostLink, when set, gives the guest a network: user-mode,
	// restricted (no route out, no listener of the host reachable),
	// where a connection to 10.0.2.100:5757 runs HostLink with the
	// machine's HostLinkPath appended, on the connection's stdin and
	// stdout. That path is a link to the sandbox's undohost listener
	// for the sandbox's VM only: a copy reaches nothing.
	HostLink []string `json:",omitempty"`
	// Forwards are hostfwd rules (tcp:127.0.0.1:8080-:80) of the
	// machine booted; a copy gets none, since its ports would clash
	// ([Machine.AddForwards] gives them to the VM that replaces it).
	Forwards []string `json:",omitempty"`
}

// AgentPort is the name of the guest agent's virtio-serial port.
const AgentPort = "undosh"

// Machine is a running qemu.
type Machine struct {
	// Dir is the machine's own directory.
	Dir string
	// Disk is the top layer of its disk, which it writes.
	Disk string
	// Base is the image the first machine booted over, which every
	// layer of the chain stands on ([Machine.Flatten] keeps it).
	Base string
	// CopyBinary, when set, is the qemu a fork starts for its copy
	// (another build, a wrapper); by default the machine's own.
	CopyBinary string
	cfg        Config
	// node is the block node of the disk's top, which a snapshot
	// replaces.
	node  string
	nodes int
	pid   int
	done  chan struct{}
	err   error
	qmp   *QMP
	// busy is held by a fork or a checkpoint: one at a time.
	busy sync.Mutex
}

// ErrBusy is a fork or checkpoint asked of a machine while another runs.
var ErrBusy = errors.New("a fork or checkpoint of this machine is already under way: one at a time")

// forkHook, when set (tests), is called as a fork passes a stage:
// "migrating" once the migration has started.
var forkHook func(stage string, copy *Machine)

// Paths of a machine's directory.
func (m *Machine) QMPPath() string       { return filepath.Join(m.Dir, "qmp.sock") }
func (m *Machine) ConsolePath() string   { return filepath.Join(m.Dir, "console.sock") }
func (m *Machine) ConsoleLog() string    { return filepath.Join(m.Dir, "console.log") }
func (m *Machine) AgentPath() string     { return AgentPath(m.Dir) }
func (m *Machine) HostLinkPath() string  { return filepath.Join(m.Dir, "hostlink.sock") }
func (m *Machine) migrationPath() string { return filepath.Join(m.Dir, "migrate.sock") }

// AgentPath is where the machine in dir serves its guest agent's port
// (for a command that has only the directory).
func AgentPath(dir string) string { return filepath.Join(dir, "agent.sock") }

// Config is how m was started.
func (m *Machine) Config() Config { return m.cfg }

// Done is closed once qemu has ended.
func (m *Machine) Done() <-chan struct{} { return m.done }

// PID is qemu's.
func (m *Machine) PID() int { return m.pid }

// Start boots a machine in dir (made if need be) whose disk is a new
// layer over base.
func Start(cfg Config, dir, base string) (*Machine, error) {
	return start(cfg, dir, base, base, "")
}

// start starts qemu over a new layer on backing, whose chain stands on
// base; with incoming (a migration URI) it waits, paused, for a
// machine's state from there.
func start(cfg Config, dir, backing, base, incoming string) (*Machine, error) {
	if cfg.Memory == 0 {
		cfg.Memory = 256
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.Accel == "" {
		cfg.Accel = "tcg"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if cfg.Binary == "" {
		cfg.Binary = "qemu-system-x86_64"
	}
	m := &Machine{Dir: dir, Disk: filepath.Join(dir, "disk.qcow2"), Base: base, cfg: cfg, node: "root0", done: make(chan struct{})}
	size, err := virtualSize(backing)
	if err != nil {
		return nil, err
	}
	// -u: backing may be a running machine's top, locked by its qemu;
	// its size is known, and its content is read once it is frozen.
	if out, err := exec.Command("qemu-img", "create", "-q", "-u", "-f", "qcow2", "-b", backing, "-F", "qcow2", m.Disk, strconv.FormatInt(size, 10)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("qemu-img create %s over %s: %v: %s", m.Disk, backing, err, bytes.TrimSpace(out))
	}
	cpu := "qemu64"
	if cfg.Accel == "kvm" {
		cpu = "host"
	}
	args := []string{
		"-accel", cfg.Accel, "-machine", "pc", "-cpu", cpu, "-smp", strconv.Itoa(cfg.CPUs), "-m", strconv.Itoa(cfg.Memory) + "M",
		"-nographic", "-no-reboot", "-nodefaults", "-no-user-config",
		"-kernel", cfg.Kernel, "-initrd", cfg.Initrd, "-append", cfg.Append,
		"-blockdev", "driver=file,filename=" + m.Disk + ",node-name=f0",
		"-blockdev", "driver=qcow2,file=f0,node-name=root0", "-device", "virtio-blk-pci,drive=root0,id=vblk0",
		"-chardev", "socket,id=ser0,path=" + m.ConsolePath() + ",server=on,wait=off,logfile=" + m.ConsoleLog(),
		"-serial", "chardev:ser0",
		"-qmp", "unix:" + m.QMPPath() + ",server=on,wait=off",
		"-monitor", "none", "-display", "none",
	}
	if cfg.Agent {
		args = append(args, "-chardev", "socket,id=agent0,path="+m.AgentPath()+",server=on,wait=off",
			"-device", "virtio-serial-pci,id=vser0", "-device", "virtserialport,chardev=agent0,name="+AgentPort+",id=vport0")
	}
	if len(cfg.HostLink) > 0 {
		nd := "user,id=n0,restrict=on,net=10.0.2.0/24,guestfwd=tcp:10.0.2.100:5757-cmd:" +
			strings.ReplaceAll(shquote.Join(append(slices.Clone(cfg.HostLink), m.HostLinkPath())), ",", ",,")
		for _, f := range cfg.Forwards {
			nd += ",hostfwd=" + f
		}
		args = append(args, "-netdev", nd, "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,romfile=")
	}
	if incoming != "" {
		// The memory of a machine that a migration fills is touched
		// before it comes. Left to be faulted in as the guest runs, a
		// copy of a guest running the agent came up with corrupt kernel
		// memory in 7 of 78 forks on this project's TCG host (general
		// protection faults, hrtimer lists with NULL functions), though
		// its RAM matched the original's byte for byte at the
		// switchover; with its memory touched first (this, or reading
		// it all over QMP), 0 of 64 (TestForkIntegrity, issue 20).
		args = append(args, "-incoming", incoming, "-S", "-mem-prealloc")
	}
	cmd := exec.Command(cfg.Binary, args...)
	log, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	// A group of its own: a machine outlives the process that started it
	// (a provider's command), and is ended by its group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	m.pid = cmd.Process.Pid
	go func() {
		m.err = cmd.Wait()
		log.Close()
		close(m.done)
	}()
	if err := m.connect(); err != nil {
		m.Kill()
		return nil, err
	}
	if err := m.save(); err != nil {
		m.Kill()
		return nil, err
	}
	return m, nil
}

// record is what a machine's directory says of it (machine.json), for
// Open in another process.
type record struct {
	PID   int    `json:"pid"`
	Disk  string `json:"disk"`
	Base  string `json:"base"`
	Node  string `json:"node"`
	Nodes int    `json:"nodes"`
	Cfg   Config `json:"config"`
}

func (m *Machine) recordPath() string { return filepath.Join(m.Dir, "machine.json") }

// save writes m's record, as it changes (a snapshot moves its top).
func (m *Machine) save() error {
	b, err := json.Marshal(record{PID: m.pid, Disk: m.Disk, Base: m.Base, Node: m.node, Nodes: m.nodes, Cfg: m.cfg})
	if err != nil {
		return err
	}
	return atomicfile.Write(m.recordPath(), b, 0o600)
}

// Info is what a machine's directory records of it.
type Info struct {
	PID int
	// Disk is its top layer, Base the image its chain stands on.
	Disk, Base string
	// Running: its qemu is alive.
	Running bool
}

// Inspect reads the record of the machine in dir and whether its qemu
// still runs, without QMP (which serves one client at a time).
func Inspect(dir string) (Info, error) {
	r, err := readRecord(dir)
	if err != nil {
		return Info{}, err
	}
	_, running := r.process()
	return Info{PID: r.PID, Disk: r.Disk, Base: r.Base, Running: running}, nil
}

// process is the recorded qemu, if it still runs (a pid reused by
// another program is not it).
func (r record) process() (procs.Proc, bool) {
	p, err := procs.Read(r.PID)
	return p, err == nil && p.Alive() && len(p.Argv) > 0 && isQEMU(p.Argv[0], r.Cfg.Binary)
}

func readRecord(dir string) (record, error) {
	var r record
	b, err := os.ReadFile(filepath.Join(dir, "machine.json"))
	if err != nil {
		return r, fmt.Errorf("no machine in %s: %w", dir, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("the machine of %s: %w", dir, err)
	}
	return r, nil
}

// Open attaches to the machine running in dir, which another process
// started (a provider's earlier command, an undohost before a restart).
func Open(dir string) (*Machine, error) {
	r, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	m := &Machine{Dir: dir, Disk: r.Disk, Base: r.Base, cfg: r.Cfg, node: r.Node, nodes: r.Nodes, pid: r.PID, done: make(chan struct{})}
	p, ok := r.process()
	if !ok {
		return nil, fmt.Errorf("the machine of %s (qemu pid %d) is no longer running", dir, r.PID)
	}
	go func() {
		procs.WaitGone([]procs.Proc{p}, 100*365*24*time.Hour)
		close(m.done)
	}()
	q, err := DialQMP(m.QMPPath(), 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("the machine of %s: %w (its QMP serves one client at a time: is another command attached?)", dir, err)
	}
	m.qmp = q
	return m, nil
}

// isQEMU reports whether a process whose argv[0] is arg0 is the qemu
// binary started (or a qemu a wrapper of it ran).
func isQEMU(arg0, binary string) bool {
	b := filepath.Base(arg0)
	return b == filepath.Base(binary) || strings.HasPrefix(b, "qemu-system-")
}

// virtualSize reads the size of the disk image p (which a running qemu
// may hold).
func virtualSize(p string) (int64, error) {
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", p).Output()
	if err != nil {
		return 0, fmt.Errorf("qemu-img info %s: %w", p, err)
	}
	var info struct {
		Size int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Size == 0 {
		return 0, fmt.Errorf("qemu-img info %s: no virtual size in %q", p, out)
	}
	return info.Size, nil
}

// connect dials QMP, which qemu serves once it has started.
func (m *Machine) connect() error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		q, err := DialQMP(m.QMPPath(), 5*time.Second)
		if err == nil {
			m.qmp = q
			return nil
		}
		select {
		case <-m.done:
			b, _ := os.ReadFile(filepath.Join(m.Dir, "qemu.log"))
			return fmt.Errorf("qemu ended as it started (%v): %s", m.err, b)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("qemu's QMP socket: %w", err)
		}
	}
}

// QMP is the machine's monitor connection.
func (m *Machine) QMP() *QMP { return m.qmp }

// Kill ends qemu at once and waits for it.
func (m *Machine) Kill() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = syscall.Kill(-m.pid, syscall.SIGKILL)
	<-m.done
}

// Quit asks qemu to end, and kills it if it has not within timeout, or
// at once when it cannot be asked.
func (m *Machine) Quit(timeout time.Duration) {
	if m.qmp == nil {
		m.Kill()
		return
	}
	_, err := m.qmp.Do("quit", nil, timeout)
	m.qmp.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		m.Kill()
		return
	}
	select {
	case <-m.done:
	case <-time.After(timeout):
		m.Kill()
	}
}

// ForkTimes say how long a fork took.
type ForkTimes struct {
	// Paused is how long the original's vCPUs were stopped.
	Paused time.Duration
	// Running is how long from the start of the fork until the copy
	// ran.
	Running time.Duration
	// RAM is what the migration sent.
	RAM int64
}

// migrationTimeout bounds a fork's migration.
const migrationTimeout = 2 * time.Minute

// Fork makes a running copy of m in dir by live migration: the copy is
// started waiting for m's state; m migrates to it, pausing only for the
// last round, during which m's disk top is frozen and m goes on over a
// new layer; the copy's own layer is over the frozen one. On an error
// the copy is gone and m runs on as it was.
func (m *Machine) Fork(ctx context.Context, dir string) (_ *Machine, t ForkTimes, err error) {
	if !m.busy.TryLock() {
		return nil, t, ErrBusy
	}
	defer m.busy.Unlock()
	began := time.Now()
	cc := m.cfg
	cc.Forwards = nil
	if m.CopyBinary != "" {
		cc.Binary = m.CopyBinary
	}
	c, err := start(cc, dir, m.Disk, m.Base, "unix:"+filepath.Join(dir, "migrate.sock"))
	if err != nil {
		return nil, t, fmt.Errorf("fork: start the copy: %w", err)
	}
	defer func() {
		if err != nil {
			c.Kill()
			// m must run whatever happened.
			if st, serr := m.qmp.Status(5 * time.Second); serr == nil && st != "running" {
				_, _ = m.qmp.Do("cont", nil, 5*time.Second)
			}
		}
	}()
	q := m.qmp
	if _, err := q.Do("migrate-set-capabilities", map[string]any{"capabilities": []map[string]any{
		{"capability": "pause-before-switchover", "state": true}, {"capability": "events", "state": true}}}, 10*time.Second); err != nil {
		return nil, t, fmt.Errorf("fork: %w", err)
	}
	if _, err := q.Do("migrate-set-parameters", map[string]any{"max-bandwidth": int64(64) << 30, "downtime-limit": 50}, 10*time.Second); err != nil {
		return nil, t, fmt.Errorf("fork: %w", err)
	}
	if _, err := q.Do("migrate", map[string]any{"uri": "unix:" + c.migrationPath()}, 10*time.Second); err != nil {
		return nil, t, fmt.Errorf("fork: %w", err)
	}
	if forkHook != nil {
		forkHook("migrating", c)
	}
	status := func(want string) func(json.RawMessage) bool {
		return func(d json.RawMessage) bool {
			var s struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(d, &s)
			return s.Status == want || s.Status == "failed" || s.Status == "cancelled"
		}
	}
	deadline := migrationTimeout
	if dl, ok := ctx.Deadline(); ok {
		deadline = time.Until(dl)
	}
	ev, err := q.WaitEvent("MIGRATION", status("pre-switchover"), deadline)
	if err != nil {
		_, _ = q.Do("migrate_cancel", nil, 5*time.Second)
		return nil, t, fmt.Errorf("fork: %w", err)
	}
	if !statusIs(ev.Data, "pre-switchover") {
		return nil, t, fmt.Errorf("fork: the migration ended: %s", ev.Data)
	}
	paused := time.Now()
	// m's vCPUs are stopped from here: freeze its top, go on over a new
	// one.
	if err := m.freezeDisk(); err != nil {
		_, _ = q.Do("migrate_cancel", nil, 5*time.Second)
		return nil, t, fmt.Errorf("fork: %w", err)
	}
	if _, err := q.Do("migrate-continue", map[string]any{"state": "pre-switchover"}, 10*time.Second); err != nil {
		return nil, t, fmt.Errorf("fork: %w", err)
	}
	if ev, err = q.WaitEvent("MIGRATION", status("completed"), deadline); err != nil || !statusIs(ev.Data, "completed") {
		return nil, t, fmt.Errorf("fork: the migration did not complete: %v %s", err, ev.Data)
	}
	if err := m.cont(); err != nil {
		return nil, t, fmt.Errorf("fork: the original goes on: %w", err)
	}
	t.Paused = time.Since(paused)
	if info, err := q.Do("query-migrate", nil, 10*time.Second); err == nil {
		var mi struct {
			RAM struct {
				Transferred int64 `json:"transferred"`
			} `json:"ram"`
		}
		_ = json.Unmarshal(info, &mi)
		t.RAM = mi.RAM.Transferred
	}
	if err := c.resume(ctx); err != nil {
		return nil, t, fmt.Errorf("fork: the copy: %w", err)
	}
	t.Running = time.Since(began)
	return c, t, nil
}

// ErrStalled is a machine that QEMU stopped because a write to its disk
// failed (status io-error): QEMU stops a guest rather than lose the
// write, typically when the disk that holds the layers is full.
var ErrStalled = errors.New("QEMU stopped it when a write to its disk failed (io-error)")

// Unstall lets m go on if QEMU stopped it on a failed disk write; QEMU
// retries the write. It returns [ErrStalled] when the write fails again
// (the disk is still full), and nil when m runs or was never stalled.
func (m *Machine) Unstall() error {
	st, err := m.qmp.Status(10 * time.Second)
	if err != nil || st != "io-error" {
		return err
	}
	if _, err := m.qmp.Do("cont", nil, 10*time.Second); err != nil {
		return fmt.Errorf("%w: go on: %w", ErrStalled, err)
	}
	// A retried write that fails again stops it again, as a rule before
	// QEMU answers the next command; when later, what the caller does
	// next (a migration) fails on the stopped machine instead.
	if st, err = m.qmp.Status(10 * time.Second); err == nil && st == "io-error" {
		err = ErrStalled
	}
	return err
}

// cont lets m run again after a migration from it: once QEMU has left
// finish-migrate (the COMPLETED event comes a moment before), which
// refuses cont.
func (m *Machine) cont() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := m.qmp.Status(10 * time.Second)
		if err != nil {
			return err
		}
		if st == "running" {
			return nil
		}
		if st != "finish-migrate" {
			_, err := m.qmp.Do("cont", nil, 10*time.Second)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still %s after 30 s", st)
		}
		time.Sleep(time.Millisecond)
	}
}

// resume waits until a machine started with -incoming has the state
// (it is paused then: -S), and lets it run.
func (c *Machine) resume(ctx context.Context) error {
	for {
		st, err := c.qmp.Status(10 * time.Second)
		if err != nil {
			return err
		}
		if st == "paused" || st == "postmigrate" {
			break
		}
		if st != "inmigrate" {
			return fmt.Errorf("it is %s after the migration", st)
		}
		select {
		case <-c.done:
			b, _ := os.ReadFile(filepath.Join(c.Dir, "qemu.log"))
			return fmt.Errorf("its qemu ended: %s", b)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	if _, err := c.qmp.Do("cont", nil, 10*time.Second); err != nil {
		return fmt.Errorf("go on: %w", err)
	}
	return nil
}

// Checkpoint is a machine's state saved: its memory and devices (State)
// and the frozen top of its disk at that moment (Frozen), over which a
// restore runs.
type Checkpoint struct {
	State  string `json:"state"`
	Frozen string `json:"frozen"`
	// Base is the image the chain stands on.
	Base string `json:"base"`
	// Config is how the machine ran (without its forwards: a restore
	// runs beside it until it replaces it).
	Config Config `json:"config"`
	// Paused is how long the machine was stopped.
	Paused time.Duration `json:"paused"`
}

// Checkpoint saves m's state into dir: m stops, its disk's top is
// frozen (m goes on over a new layer), its memory is written to
// dir/state, and it goes on.
func (m *Machine) Checkpoint(ctx context.Context, dir string) (cp Checkpoint, err error) {
	if !m.busy.TryLock() {
		return cp, ErrBusy
	}
	defer m.busy.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return cp, err
	}
	q := m.qmp
	began := time.Now()
	if _, err := q.Do("stop", nil, 10*time.Second); err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if cerr := m.cont(); cerr != nil && err == nil {
			err = fmt.Errorf("checkpoint: the machine goes on: %w", cerr)
		}
		cp.Paused = time.Since(began)
	}()
	frozen := m.Disk
	if err := m.freezeDisk(); err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	state := filepath.Join(dir, "state")
	if _, err := q.Do("migrate-set-capabilities", map[string]any{"capabilities": []map[string]any{
		{"capability": "pause-before-switchover", "state": false}, {"capability": "events", "state": true}}}, 10*time.Second); err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	if _, err := q.Do("migrate-set-parameters", map[string]any{"max-bandwidth": int64(64) << 30}, 10*time.Second); err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	if _, err := q.Do("migrate", map[string]any{"uri": "exec:cat > " + shquote.Word(state)}, 10*time.Second); err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	timeout := migrationTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	ev, err := q.WaitEvent("MIGRATION", func(d json.RawMessage) bool {
		return statusIs(d, "completed") || statusIs(d, "failed") || statusIs(d, "cancelled")
	}, timeout)
	if err != nil || !statusIs(ev.Data, "completed") {
		return cp, fmt.Errorf("checkpoint: saving the state did not complete: %v %s", err, ev.Data)
	}
	cc := m.cfg
	cc.Forwards = nil
	return Checkpoint{State: state, Frozen: frozen, Base: m.Base, Config: cc}, nil
}

// freezeDisk makes m's disk top read-only and has m write a new layer
// over it.
func (m *Machine) freezeDisk() error {
	m.nodes++
	next := filepath.Join(m.Dir, fmt.Sprintf("disk-%d.qcow2", m.nodes))
	node := fmt.Sprintf("root%d", m.nodes)
	if _, err := m.qmp.Do("blockdev-snapshot-sync", map[string]any{"node-name": m.node, "snapshot-file": next,
		"snapshot-node-name": node, "format": "qcow2"}, 30*time.Second); err != nil {
		return fmt.Errorf("freeze the disk: %w", err)
	}
	m.node, m.Disk = node, next
	return m.save()
}

// Restore starts, in dir, the machine cp saved, as it was then: memory,
// processes and disk.
func Restore(ctx context.Context, cp Checkpoint, dir string) (*Machine, error) {
	m, err := start(cp.Config, dir, cp.Frozen, cp.Base, "exec:cat "+shquote.Word(cp.State))
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if err := m.resume(ctx); err != nil {
		m.Kill()
		return nil, fmt.Errorf("restore: %w", err)
	}
	return m, nil
}

func statusIs(d json.RawMessage, want string) bool {
	var s struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(d, &s) == nil && s.Status == want
}

// AddForwards gives m the host port forwards rules (hostfwd), as a VM
// that replaces the sandbox's VM takes over its ports once that one has
// quit.
func (m *Machine) AddForwards(rules []string) error {
	for _, r := range rules {
		out, err := m.qmp.Do("human-monitor-command", map[string]any{"command-line": "hostfwd_add n0 " + r}, 10*time.Second)
		if err != nil {
			return fmt.Errorf("forward %s: %w", r, err)
		}
		// HMP answers errors as text.
		var said string
		if json.Unmarshal(out, &said) == nil && strings.TrimSpace(said) != "" {
			return fmt.Errorf("forward %s: %s", r, strings.TrimSpace(said))
		}
	}
	return nil
}

// Chain returns the files of the disk whose top is top: top first, then
// each backing file down to the base (an image that has none, or is not
// qcow2). It reads the qcow2 headers itself: qemu-img would cost a
// process per call, and every provider command walks the chains.
func Chain(top string) ([]string, error) {
	var files []string
	for f := top; f != ""; {
		if len(files) == 64 {
			return nil, fmt.Errorf("the disk chain of %s is longer than 64 layers (a loop?)", top)
		}
		files = append(files, f)
		backing, err := backingFile(f)
		if err != nil {
			return nil, err
		}
		if backing != "" && !filepath.IsAbs(backing) {
			backing = filepath.Join(filepath.Dir(f), backing)
		}
		f = backing
	}
	return files, nil
}

// backingFile reads the backing file's name from the qcow2 header of
// path: "" when it has none or is not qcow2.
func backingFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return "", nil // shorter than a qcow2 header: a raw image
	}
	return parseBacking(hdr, f, path)
}

// parseBacking decodes the backing file name of a qcow2 header (hdr, its
// first 20 bytes; r reads the rest).
func parseBacking(hdr []byte, r io.ReaderAt, path string) (string, error) {
	if string(hdr[:4]) != "QFI\xfb" {
		return "", nil
	}
	off := binary.BigEndian.Uint64(hdr[8:16])
	size := binary.BigEndian.Uint32(hdr[16:20])
	if off == 0 || size == 0 {
		return "", nil
	}
	if size > 1023 {
		return "", fmt.Errorf("%s: a backing file name of %d bytes (qcow2 allows 1023)", path, size)
	}
	name := make([]byte, size)
	if _, err := r.ReadAt(name, int64(off)); err != nil {
		return "", fmt.Errorf("%s: its backing file name: %w", path, err)
	}
	return string(name), nil
}

// Flatten copies the layers between m's top and its base into the top
// (block-stream, while m runs), so that its chain is two files long
// again: every fork and checkpoint adds a layer, and a long chain slows
// every read that misses the top. The layers it no longer needs are
// left for the caller, since checkpoints and copies may stand on them.
func (m *Machine) Flatten(ctx context.Context) error {
	if !m.busy.TryLock() {
		return ErrBusy
	}
	defer m.busy.Unlock()
	job := "flatten-" + m.node
	if _, err := m.qmp.Do("block-stream", map[string]any{"job-id": job, "device": m.node, "base": m.Base}, 30*time.Second); err != nil {
		return fmt.Errorf("flatten: %w", err)
	}
	timeout := migrationTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	ev, err := m.qmp.WaitEvent("BLOCK_JOB_COMPLETED", func(d json.RawMessage) bool {
		var e struct {
			Device string `json:"device"`
		}
		return json.Unmarshal(d, &e) == nil && e.Device == job
	}, timeout)
	if err != nil {
		_, _ = m.qmp.Do("block-job-cancel", map[string]any{"device": job}, 10*time.Second)
		return fmt.Errorf("flatten: %w", err)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(ev.Data, &e) == nil && e.Error != "" {
		return fmt.Errorf("flatten: %s", e.Error)
	}
	return nil
}
