// Package procs reads the processes of the machine from /proc and starts
// one again: what undosh records of a process that a step killed or left
// running, so that it can say what happened to it and, where that is
// possible, start it again.
//
// A process is named by its pid and its start time together: a pid alone
// may be reused once its process is gone.
//
// [Targets] tells, before a kill, pkill or killall runs, which processes
// it would signal, without signalling any; [Kills] whether its signal
// ends them, and [Gone] which of them ended once it has run.
package procs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is what undosh keeps of one process: enough to name it, say what
// it was, and start it again.
type Proc struct {
	PID  int `json:"pid"`
	PPID int `json:"ppid"`
	// Start is the process's start time in clock ticks since boot
	// (field 22 of /proc/PID/stat): with PID, it names the process.
	Start uint64   `json:"start"`
	Comm  string   `json:"comm"`
	Argv  []string `json:"argv"`
	// Exe is the program's path, as /proc/PID/exe links it ("" when it
	// cannot be read: another user's process, a kernel thread).
	Exe string   `json:"exe,omitempty"`
	Cwd string   `json:"cwd,omitempty"`
	Env []string `json:"env,omitempty"`
	// UID and GID are its real user and group ids, and Groups its
	// supplementary groups (/proc/PID/status): who it is started again
	// as. A process that started as root and then gave up root is
	// started again as the user it became, never with more privilege
	// than it had.
	UID    int   `json:"uid"`
	GID    int   `json:"gid"`
	Groups []int `json:"groups,omitempty"`
	// Session and Group are its session and process group ids.
	Session int `json:"sid"`
	Group   int `json:"pgid"`
	// Forked: the process was forked and has exec'd no program since
	// (the kernel's PF_FORKNOEXEC): it runs its parent's program from
	// where the fork left it (a shell's subshell, a daemon that forked
	// itself into the background), which Argv alone does not start.
	Forked bool `json:"forked,omitempty"`
}

// Root is where the machine's /proc is; a copy's can be read through its
// own mount.
const Root = "/proc"

// Read reads process pid from /proc.
func Read(pid int) (Proc, error) { return ReadIn(Root, pid) }

// ReadStarted reads process pid just after an exec.Cmd's Start returned:
// Start returns once the exec is past its point of no return, a moment
// before the kernel shows the new argv, so it reads again, for up to
// 200 ms, until the argv is there.
func ReadStarted(pid int) (Proc, error) {
	p, err := Read(pid)
	for i := 0; err == nil && len(p.Argv) == 0 && i < 200; i++ {
		time.Sleep(time.Millisecond)
		p, err = Read(pid)
	}
	return p, err
}

// ReadIn reads process pid from the proc filesystem mounted at root.
// What a caller may not read of another user's process (its environment,
// cwd and exe) is left empty; a process that is gone is an error that
// wraps os.ErrNotExist.
func ReadIn(root string, pid int) (Proc, error) {
	dir := filepath.Join(root, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Proc{}, fmt.Errorf("process %d: %w", pid, err)
	}
	p, err := parseStat(stat)
	if err != nil {
		return Proc{}, fmt.Errorf("process %d: %w", pid, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		p.UID, p.GID, p.Groups = parseStatus(b)
	} else if st, err := os.Stat(dir); err == nil {
		if s, ok := st.Sys().(*syscall.Stat_t); ok {
			p.UID, p.GID = int(s.Uid), int(s.Gid)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		p.Argv = splitNul(b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
		p.Env = splitNul(b)
	}
	p.Exe, _ = os.Readlink(filepath.Join(dir, "exe"))
	p.Exe = strings.TrimSuffix(p.Exe, " (deleted)")
	p.Cwd, _ = os.Readlink(filepath.Join(dir, "cwd"))
	return p, nil
}

// pfForkNoExec is the kernel's PF_FORKNOEXEC, in the flags of
// /proc/PID/stat: forked, and no exec since.
const pfForkNoExec = 0x40

// parseStatus reads the real uid and gid and the supplementary groups
// from the text of /proc/PID/status.
func parseStatus(b []byte) (uid, gid int, groups []int) {
	for line := range strings.SplitSeq(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid":
			if len(f) > 0 {
				uid, _ = strconv.Atoi(f[0])
			}
		case "Gid":
			if len(f) > 0 {
				gid, _ = strconv.Atoi(f[0])
			}
		case "Groups":
			for _, g := range f {
				if n, err := strconv.Atoi(g); err == nil {
					groups = append(groups, n)
				}
			}
		}
	}
	return uid, gid, groups
}

// parseStat reads pid, comm, ppid, pgrp, session, flags and starttime
// from the text of /proc/PID/stat. comm is in parentheses and may hold any byte,
// parentheses and spaces included: it ends at the last ')'.
func parseStat(b []byte) (Proc, error) {
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || close < open {
		return Proc{}, errors.New("malformed stat")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Proc{}, errors.New("malformed stat: pid")
	}
	f := strings.Fields(string(b[close+1:]))
	// f[0] is the state, field 3; starttime is field 22.
	if len(f) < 20 {
		return Proc{}, errors.New("malformed stat: too few fields")
	}
	p := Proc{PID: pid, Comm: string(b[open+1 : close])}
	ints := []*int{&p.PPID, &p.Group, &p.Session}
	for i, dst := range ints {
		if *dst, err = strconv.Atoi(f[1+i]); err != nil {
			return Proc{}, errors.New("malformed stat: ppid, pgrp or session")
		}
	}
	if p.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Proc{}, errors.New("malformed stat: starttime")
	}
	p.Forked = statFlags(f)&pfForkNoExec != 0
	return p, nil
}

// statFlags returns the kernel's flags of a process (field 9 of
// /proc/PID/stat) from the fields after its comm, or 0.
func statFlags(f []string) uint64 {
	if len(f) <= 6 {
		return 0
	}
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	return flags
}

func splitNul(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// List reads every process in /proc, kernel threads left out (they have
// no command line). Processes that end while it reads are left out.
func List() ([]Proc, error) { return ListIn(Root) }

// ListIn is List for the proc filesystem mounted at root.
func ListIn(root string) ([]Proc, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		p, err := ReadIn(root, pid)
		if err != nil || len(p.Argv) == 0 {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Same reports whether q is the process p: the same pid, started at the
// same time.
func (p Proc) Same(q Proc) bool { return p.PID == q.PID && p.Start == q.Start }

// Alive reports whether p is still running: a process with its pid and
// start time exists and is not a zombie.
func (p Proc) Alive() bool {
	b, err := os.ReadFile(filepath.Join(Root, strconv.Itoa(p.PID), "stat"))
	if err != nil {
		return false
	}
	q, err := parseStat(b)
	if err != nil || !p.Same(q) {
		return false
	}
	_, rest, _ := bytes.Cut(b[bytes.LastIndexByte(b, ')'):], []byte(" "))
	return len(rest) > 0 && rest[0] != 'Z' && rest[0] != 'X'
}

// Tree returns root and every process below it in ps, parents first.
func Tree(ps []Proc, root int) []Proc {
	var out []Proc
	for i := range ps {
		if ps[i].PID == root {
			out = append(out, ps[i])
		}
	}
	for i := 0; i < len(out); i++ {
		for _, p := range ps {
			if p.PPID == out[i].PID && p.PID != out[i].PID {
				out = append(out, p)
			}
		}
	}
	return out
}

// Command is p's command line as one line of text, for notices and the
// journal.
func (p Proc) Command() string {
	if len(p.Argv) == 0 {
		return "[" + p.Comm + "]"
	}
	return strings.Join(p.Argv, " ")
}

// Startable reports whether p can be started again from what was read of
// it: a program path and a working directory.
func (p Proc) Startable() bool { return p.program() != "" && p.Cwd != "" && len(p.Argv) > 0 }

// program is the path to start p with: its exe, or argv[0] when that is
// a path (a program started through a link keeps its name in argv[0]).
func (p Proc) program() string {
	if len(p.Argv) == 0 {
		return p.Exe
	}
	if strings.HasPrefix(p.Argv[0], "/") {
		if _, err := os.Stat(p.Argv[0]); err == nil {
			return p.Argv[0]
		}
	}
	// A name on PATH that is the exe under another name (Debian's
	// redis-server, a link to redis-check-rdb): its name is what the
	// program goes by, and the kernel's comm.
	if path, err := exec.LookPath(p.Argv[0]); err == nil && p.Exe != "" && !strings.Contains(p.Argv[0], "/") {
		a, errA := os.Stat(path)
		b, errB := os.Stat(p.Exe)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return path
		}
	}
	return p.Exe
}

// Start starts p again, detached: a new session, standard input from
// /dev/null, output appended to logPath, as p's user, group and
// supplementary groups when the caller is root, in p's working
// directory with p's environment. It
// returns the new process without waiting for it; the caller's process
// never waits for it either, so it is reaped by init once it ends.
func Start(p Proc, logPath string) (Proc, error) {
	if !p.Startable() {
		return Proc{}, fmt.Errorf("cannot start %q again: its program or working directory could not be read", p.Command())
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return Proc{}, err
	}
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return Proc{}, err
	}
	defer log.Close()
	cmd := exec.Command(p.program(), p.Argv[1:]...)
	cmd.Args[0] = p.Argv[0]
	cmd.Dir, cmd.Env = p.Cwd, p.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if os.Geteuid() == 0 {
		cred := &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.GID), Groups: []uint32{}}
		for _, g := range p.Groups {
			cred.Groups = append(cred.Groups, uint32(g))
		}
		cmd.SysProcAttr.Credential = cred
		_ = log.Chown(p.UID, p.GID)
	}
	if err := cmd.Start(); err != nil {
		return Proc{}, fmt.Errorf("start %s again: %w", p.Command(), err)
	}
	q, err := ReadStarted(cmd.Process.Pid)
	// Reap it in the background should it end while undosh still runs.
	go func() { _ = cmd.Wait() }()
	if err != nil {
		return Proc{PID: cmd.Process.Pid, Argv: p.Argv}, nil
	}
	return q, nil
}

// Stop sends sig to p, then waits until p is gone or timeout passes, and
// sends SIGKILL when it has passed. It reports whether p ended before the
// timeout.
func Stop(p Proc, sig syscall.Signal, timeout time.Duration) bool {
	if !p.Alive() {
		return true
	}
	_ = syscall.Kill(p.PID, sig)
	if WaitGone([]Proc{p}, timeout) {
		return true
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	WaitGone([]Proc{p}, 5*time.Second)
	return false
}

// WaitGone waits until none of ps is alive, or timeout passes; it reports
// whether they all ended. It waits on a pidfd for each process (its end
// is an event even for a process that is not undosh's child).
func WaitGone(ps []Proc, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for _, p := range ps {
		fd, err := unix.PidfdOpen(p.PID, 0)
		if err != nil {
			continue // gone already
		}
		for p.Alive() {
			left := time.Until(deadline)
			if left <= 0 {
				unix.Close(fd)
				return false
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			// A zombie makes the pidfd readable but stays in /proc until
			// its parent reaps it; Alive counts it as gone, so poll at
			// most a little while before looking again.
			if n, err := unix.Poll(fds, int(min(left, 20*time.Millisecond)/time.Millisecond)+1); err != nil && err != unix.EINTR {
				break
			} else if n > 0 && !p.Alive() {
				break
			}
		}
		unix.Close(fd)
	}
	return !slices.ContainsFunc(ps, Proc.Alive)
}

// Signal sends sig to every process of ps that is still itself.
func Signal(ps []Proc, sig syscall.Signal) {
	for _, p := range ps {
		if p.Alive() {
			_ = syscall.Kill(p.PID, sig)
		}
	}
}

// Alive reports whether process pid runs (or is a zombie not yet reaped).
func Alive(pid int) bool {
	return pid > 0 && unix.Kill(pid, 0) == nil
}

// pfExiting is the kernel's PF_EXITING, in the flags of /proc/PID/stat:
// the process has begun to exit.
const pfExiting = 0x4

// Dying reports whether p is about to end: it has begun to exit, or a
// signal waits for it that it neither blocks, catches nor ignores and
// whose default action ends it. A kill has returned once the signal is
// sent; this tells a process it has doomed from one that lives on,
// before the process has run its exit.
func (p Proc) Dying() bool {
	dir := filepath.Join(Root, strconv.Itoa(p.PID))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return false
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return false
	}
	q, err := parseStat(stat)
	return err == nil && p.Same(q) && dying(stat, status)
}

// fatalByDefault is the set of signals (bit n-1 for signal n) whose
// default action ends the process: all but SIGCHLD, SIGCONT, SIGSTOP,
// SIGTSTP, SIGTTIN, SIGTTOU, SIGURG and SIGWINCH (signal(7)); real-time
// signals end it too.
const fatalByDefault = ^uint64(1<<(syscall.SIGCHLD-1) | 1<<(syscall.SIGCONT-1) | 1<<(syscall.SIGSTOP-1) |
	1<<(syscall.SIGTSTP-1) | 1<<(syscall.SIGTTIN-1) | 1<<(syscall.SIGTTOU-1) | 1<<(syscall.SIGURG-1) |
	1<<(syscall.SIGWINCH-1))

// dying is Dying's rule, from the text of /proc/PID/stat and
// /proc/PID/status. A fatal signal the kernel has delivered shows as a
// SIGKILL pending in the thread's own set.
func dying(stat, status []byte) bool {
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && statFlags(strings.Fields(string(stat[i+1:])))&pfExiting != 0 {
		return true
	}
	sets := map[string]uint64{}
	for line := range strings.SplitSeq(string(status), "\n") {
		key, val, ok := strings.Cut(line, ":")
		switch key {
		case "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt":
			if n, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64); ok && err == nil {
				sets[key] = n
			}
		}
	}
	pending := sets["SigPnd"] | sets["ShdPnd"]
	if pending&(1<<(syscall.SIGKILL-1)) != 0 {
		return true
	}
	return pending&^(sets["SigBlk"]|sets["SigIgn"]|sets["SigCgt"])&fatalByDefault != 0
}
