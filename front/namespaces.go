package front

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/enforce"
)

// A read-only step as root runs in a mount namespace in which only its
// writable paths can be written. Making one (unshare, a clone of each
// writable path, a read-only tree, the clones back on top) and tearing
// it down when the step ends cost the front end about a quarter of a
// millisecond, which is a tenth of bash's own start. So the server
// keeps such namespaces made, one per set of writable paths, and hands
// the front end an fd on one with the answer 'N': setns(2) into it costs
// ~25 µs, and no teardown falls on the step.
//
// A step whose workspace lies in a writable path (a project in /tmp) gets
// a namespace of its own, which holds that workspace read-only.
//
// A namespace is made by a holder: undosh-enforce under the plan, with
// /bin/sh waiting on a pipe as its shell, so that it stays as the step's
// would. It is dropped, and made again on the next answer, as soon as
// the mount table changes, either the machine's (a namespace is private:
// a mount made after it would not show in it) or its own (a step that
// mounted or remounted something in it), or when its writable paths are
// no longer the directories they were (the fingerprint).

// tableRecheck is how often, in ms, a kept namespace's watch reads the
// machine's mount table without an event.
const tableRecheck = 500

// maxNamespaces bounds the namespaces kept; the least recently made goes
// first.
const maxNamespaces = 4

// roNS is one kept namespace.
type roNS struct {
	key    string // the plan and the writable paths' inodes
	fd     *os.File
	holder *exec.Cmd
	stop   *os.File // the holder's stdin: closing it ends the holder
	stale  atomic.Bool
}

// namespaces keeps the read-only namespaces of one server.
type namespaces struct {
	self string // undosh's executable, which links the constructor
	mu   sync.Mutex
	list []*roNS
}

// inodes fingerprints the directories paths are: a namespace binds
// them, and a path removed and made again is another directory.
func inodes(paths []string) string {
	var b strings.Builder
	for _, w := range paths {
		var st unix.Stat_t
		if unix.Stat(w, &st) == nil {
			fmt.Fprintf(&b, "%d:%d ", st.Dev, st.Ino)
		}
	}
	return b.String()
}

// get returns an fd on the namespace of a read-only step's plan
// (writable are its writable paths, held the workspace roots it holds
// read-only among them, and inodes the fingerprint of both), making it
// if need be; nil when it cannot be made (the front end then applies
// the plan itself).
func (n *namespaces) get(plan string, writable, held []string, inodes string) *os.File {
	key := plan + "\x00" + inodes
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = slices.DeleteFunc(n.list, func(ns *roNS) bool {
		if ns.stale.Load() {
			ns.close()
			return true
		}
		return false
	})
	for _, ns := range n.list {
		if ns.key == key {
			return ns.fd
		}
	}
	ns, err := n.make(writable, held)
	if err != nil {
		return nil
	}
	ns.key = key
	if len(n.list) == maxNamespaces {
		n.list[0].close()
		n.list = n.list[1:]
	}
	n.list = append(n.list, ns)
	return ns.fd
}

// holding returns the fd of the kept namespace that is the mount
// namespace ns (its stat); nil when none is (or n is nil).
func (n *namespaces) holding(ns *unix.Stat_t) *os.File {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range n.list {
		var st unix.Stat_t
		if !k.stale.Load() && unix.Fstat(int(k.fd.Fd()), &st) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino {
			return k.fd
		}
	}
	return nil
}

// make starts a holder for a namespace in which writable can be written,
// but held.
func (n *namespaces) make(writable, held []string) (*roNS, error) {
	path, argv, env, err := enforce.Command(n.self, enforce.Plan{Class: "none", Shell: "/bin/sh", Writable: writable, Held: held, Mode: enforce.MountNS},
		[]string{"/bin/sh", "-c", "echo ready; read _"}, []string{"PATH=/usr/bin:/bin"})
	if err != nil {
		return nil, err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: "/", Stdin: stdinR, Stdout: outW,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	err = cmd.Start()
	stdinR.Close()
	outW.Close()
	defer outR.Close()
	if err != nil {
		stdinW.Close()
		return nil, err
	}
	ns := &roNS{holder: cmd, stop: stdinW}
	// The shell runs once the plan is in place.
	if line, err := bufio.NewReader(outR).ReadString('\n'); err != nil || line != "ready\n" {
		ns.close()
		return nil, errors.New("the namespace's holder did not start")
	}
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	if ns.fd, err = os.Open(proc + "/ns/mnt"); err != nil {
		ns.close()
		return nil, err
	}
	own, err1 := os.Open(proc + "/mountinfo")
	host, err2 := os.Open("/proc/self/mountinfo")
	pidfd, err3 := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err1 != nil || err2 != nil || err3 != nil {
		own.Close()
		host.Close()
		if err3 == nil {
			unix.Close(pidfd)
		}
		ns.close()
		return nil, errors.Join(err1, err2, err3)
	}
	go ns.watch(own, host, pidfd, machineTable())
	return ns, nil
}

// watch marks ns stale when its own mount table changes (poll(2) reports
// POLLPRI on a mountinfo file then), when the machine's does other than
// by undosh's own copies of the machine (machineTable), or when its
// holder goes.
func (ns *roNS) watch(own, host *os.File, pidfd int, table string) {
	defer own.Close()
	defer host.Close()
	defer unix.Close(pidfd)
	fds := []unix.PollFd{{Fd: int32(own.Fd()), Events: unix.POLLPRI}, {Fd: int32(pidfd), Events: unix.POLLIN},
		{Fd: int32(host.Fd()), Events: unix.POLLPRI}}
	for {
		n, err := unix.Poll(fds, tableRecheck)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || fds[0].Revents != 0 || fds[1].Revents != 0 {
			break
		}
		// The machine's table is read again on its event, and also now
		// and then: under load (views mounted and unmounted beside it)
		// the event of a mount has been seen not to come.
		if (n == 0 || fds[2].Revents != 0) && machineTable() != table {
			break
		}
		fds[2].Revents = 0
	}
	ns.stale.Store(true)
}

// machineTable is this process's mount table without the mounts of
// undosh's copies and views of the machine, which every workspace step
// makes and which a read-only step does not need to see.
func machineTable() string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || strings.HasPrefix(f[4], fork.DefaultCopiesDir+"/") || strings.Contains(line, " - tmpfs undosh-fork ") || strings.Contains(line, " - overlay undosh-fork ") {
			continue
		}
		// The ids and peer groups change with every mount: compare what
		// is mounted where.
		kept = append(kept, strings.Join(f[2:], " "))
	}
	return strings.Join(kept, "\n")
}

// close ends the holder; steps still in the namespace keep it.
func (ns *roNS) close() {
	ns.stop.Close()
	if ns.fd != nil {
		ns.fd.Close()
	}
	if ns.holder.Process != nil {
		ns.holder.Process.Kill()
		ns.holder.Wait()
	}
}

// closeAll ends every holder, when the server exits.
func (n *namespaces) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ns := range n.list {
		ns.close()
	}
	n.list = nil
}
