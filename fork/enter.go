package fork

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/where"
)

// InitName is the argv[0] with which Run re-executes the current
// executable as the copy's pid 1. A main that sees it must call [Init]
// and exit with its result, before doing anything else.
const InitName = where.InitName

// The file descriptors the init gets besides the standard ones: it reads
// its instructions ([initSpec], in the wire format of enter_wire.go) from
// specFD until EOF, and writes its report ([initReport]) to reportFD
// before it exits.
const (
	specFD   = 3
	reportFD = 4
)

// DefaultEnv is the environment of a session whose RunOptions.Env is nil.
var DefaultEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"DEBIAN_FRONTEND=noninteractive",
}

// cloneFlags are the namespaces a session runs in.
const cloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// RunOptions describe one session in a copy.
type RunOptions struct {
	// Argv is the command; Argv[0] is looked up in the session's PATH
	// inside the copy unless it holds a slash, or Path is set. Required.
	Argv []string
	// Path, when set, is the program run, with Argv as its argv: the
	// real bash under the caller's argv[0], so that $0 and $BASH stay
	// what they would be.
	Path string
	// Dir is the working directory inside the copy. Default: "/".
	Dir string
	// Env is the session's environment. Default (nil): DefaultEnv.
	Env []string
	// Stdin, Stdout and Stderr are the session's standard files. A nil
	// one is /dev/null.
	Stdin, Stdout, Stderr *os.File
	// Timeout kills the session, and everything it started, after this
	// long (0: no limit besides the context).
	Timeout time.Duration
	// User, when set, is who the session runs as (root when nil): the
	// user a step entered the engine for through sudo, so that only what
	// it runs through sudo is root. The copy and its commit stay root's.
	User *User
	// Leftovers asks for the processes the session leaves running when
	// it ends (daemons, `cmd &`) in Result.Leftovers, ended gracefully:
	// see [Result].Leftovers. Without it they are killed (SIGKILL) with
	// the copy's pid namespace, and not listed: for verify, whose
	// processes nobody starts again.
	Leftovers bool
}

// User is a user a session runs as: its uid, gid and supplementary
// groups.
type User struct {
	UID, GID int
	Groups   []int
}

// Result is how a session ended.
type Result struct {
	// ExitCode is the session's exit status, or 128+n when signal n
	// killed it.
	ExitCode int
	// Signal is the signal that killed the session, or 0.
	Signal syscall.Signal
	// TimedOut: RunOptions.Timeout expired and the copy's processes were
	// killed (ExitCode is then 137, Signal SIGKILL).
	TimedOut bool
	// Setup is how long the init took, from its start, to build the
	// copy's view (mounts, network, pivot, capabilities) and start the
	// session.
	Setup time.Duration
	// Duration is the session's wall time, from the re-exec to the end
	// of its last process.
	Duration time.Duration
	// Leftovers, with RunOptions.Leftovers, are the processes of the
	// session still running in the copy after its own process (the
	// session leader) exited, parents first: a daemon, a server started
	// with &, setsid or nohup. The init lets them settle for
	// [LeftoverSettle] (a daemon that forks twice finishes forking),
	// reads each from the copy's /proc (argv, cwd, environment, exe,
	// credentials; pids are the copy's), and ends them: SIGTERM (and
	// SIGCONT), then SIGKILL for those still running after
	// [LeftoverGrace]. They have ended before Run returns, so what they
	// write as they stop (a database's shutdown checkpoint, a removed
	// pid file) is in the copy. Starting them again on the machine,
	// after a commit, is the caller's (internal/machine).
	Leftovers []procs.Proc
	// LeftoversUnread counts the processes left out of Leftovers, past
	// [MaxLeftovers] (or a report too long): ended all the same.
	LeftoversUnread int
}

// MaxLeftovers is how many of the processes a session leaves running
// the init reads, parents first.
const MaxLeftovers = 256

// LeftoverSettle is how long the init waits, once the session leader has
// exited and some of its processes still run, before it reads them; a
// session that leaves nothing running does not wait.
const LeftoverSettle = 20 * time.Millisecond

// LeftoverGrace is how long the init waits for the processes a session
// left to end on SIGTERM before it kills them. RunOptions.Timeout does
// not count it: it bounds the session, which has ended by then.
const LeftoverGrace = 10 * time.Second

// initSpec is what Run tells the init.
type initSpec struct {
	Root string // the directory the copy's root is mounted on
	// HostMountNS is the mount namespace Run was called in
	// (/proc/self/ns/mnt): the init must be in another.
	HostMountNS string
	Hostname    string
	Dir         string
	Path        string // "" looks Argv[0] up
	Argv        []string
	Env         []string
	// Rootless: the init is in a user namespace of its own
	// (rootless.go); Layers[0] is the skeleton, and Binds the real files
	// it shows read-only.
	Rootless bool
	Binds    []string
	Layers   []specLayer
	User     *User // nil: root
	// Leftovers: list the processes the session leaves, in the report,
	// and end them gracefully (RunOptions.Leftovers).
	Leftovers bool
}

type specLayer struct {
	Mount    string // the real mount point, which is also the lower directory
	Upper    string
	Work     string
	ReadOnly bool
}

// initReport is what the init tells Run.
type initReport struct {
	Status  int
	Signal  int
	SetupNS int64
	// NotFound: the command is not in the copy; Error: the init could
	// not build the copy or start the session.
	NotFound bool
	Error    string
	// Leftovers are the processes the session left running, as the
	// init read them before it ended them (initSpec.Leftovers), and
	// Unread counts those left out, past MaxLeftovers or maxReport.
	Leftovers []procs.Proc
	Unread    int
}

// Run runs one session in the copy: it re-executes the current
// executable, as [InitName], as pid 1 of new mount, pid, network, ipc,
// uts and cgroup namespaces, which mounts the copy's overlays, a fresh
// /proc, /sys and /dev, brings up lo (the only network), pivots into the
// copy, drops the risky capabilities and runs o.Argv. When the session
// ends, every process it left is killed; with o.Leftovers, they are
// listed in Result.Leftovers and ended gracefully first (docs/fork.md,
// "Processes a session leaves running"). Sessions in the same copy see
// each other's files (the step, then verify), one at a time: Run returns
// ErrBusy while another session runs.
//
// The error is non-nil when the session could not run (the result is
// then zero), or when ctx or Discard ended it (the result then says how
// it ended, and the error is ctx's or ErrDiscarded). A command that is
// not found gives an error that matches exec.ErrNotFound. A session that
// fails or times out is a Result, not an error.
func (c *Copy) Run(ctx context.Context, o RunOptions) (Result, error) {
	if len(o.Argv) == 0 {
		return Result{}, errors.New("run in copy: no command")
	}
	if slices.ContainsFunc(append(slices.Clone(o.Argv), o.Env...), func(s string) bool { return strings.IndexByte(s, 0) >= 0 }) {
		return Result{}, errors.New("run in copy: a NUL byte in the command or the environment")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	lock, err := c.begin()
	if err != nil {
		return Result{}, err
	}
	defer c.end(lock)

	hostNS, err := os.Readlink("/proc/thread-self/ns/mnt")
	if err != nil {
		return Result{}, fmt.Errorf("run in copy: %w", err)
	}
	spec := initSpec{
		Root:        filepath.Join(c.Dir, "root"),
		HostMountNS: hostNS,
		Hostname:    c.Hostname,
		Dir:         o.Dir,
		Path:        o.Path,
		Argv:        o.Argv,
		Env:         o.Env,
		Rootless:    c.Rootless,
		Binds:       c.Binds,
		User:        o.User,
		Leftovers:   o.Leftovers,
	}
	if spec.Dir == "" {
		spec.Dir = "/"
	}
	if spec.Env == nil {
		spec.Env = DefaultEnv
	}
	for _, l := range c.Overlays {
		spec.Layers = append(spec.Layers, specLayer{Mount: l.Mount, Upper: l.Upper, Work: l.Work, ReadOnly: l.ReadOnly})
	}
	data := spec.encode()

	var stdio [3]*os.File
	for i, f := range []*os.File{o.Stdin, o.Stdout, o.Stderr} {
		if f == nil {
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				return Result{}, fmt.Errorf("run in copy: %w", err)
			}
			defer null.Close()
			f = null
		}
		stdio[i] = f
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("run in copy: %w", err)
	}
	defer specR.Close()
	defer specW.Close()
	repR, repW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("run in copy: %w", err)
	}
	defer repR.Close()
	defer repW.Close()
	// A pipe holds 64 KiB: write a larger spec while the init reads.
	if len(data) < 60<<10 {
		if _, err := specW.Write(data); err != nil {
			return Result{}, fmt.Errorf("run in copy: %w", err)
		}
		specW.Close()
	} else {
		go func() {
			_, _ = specW.Write(data)
			specW.Close()
		}()
	}

	start := time.Now()
	// syscall.ForkExec rather than os/exec: os.StartProcess probes pidfd
	// support with an extra fork in every new process, a tenth of the
	// whole entry's cost.
	pid, err := syscall.ForkExec("/proc/self/exe", []string{InitName}, &syscall.ProcAttr{
		Dir: "/",
		// The init needs no environment. A race-enabled build (go test
		// -race) would sleep a second at exit without this.
		Env:   []string{"GORACE=atexit_sleep_ms=0"},
		Files: []uintptr{stdio[0].Fd(), stdio[1].Fd(), stdio[2].Fd(), specR.Fd(), repW.Fd()},
		Sys:   c.sysProcAttr(),
	})
	if err != nil {
		return Result{}, fmt.Errorf("run in copy: start %s: %w", InitName, err)
	}
	specR.Close()
	repW.Close()
	p := newChild(pid)
	c.started(p)

	var timeout <-chan time.Time
	var timer *time.Timer
	if o.Timeout > 0 {
		timer = time.NewTimer(o.Timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	waited := make(chan error, 1)
	go func() { waited <- p.wait() }()
	// The init closes the report as soon as the session is over, before
	// it ends what the session left running (LeftoverGrace): from then
	// on the session's timeout no longer applies, only a bound on that
	// grace.
	type reportRead struct {
		rep initReport
		err error
	}
	reported := make(chan reportRead, 1)
	go func() {
		rep, err := readReport(repR)
		reported <- reportRead{rep, err}
	}()
	var res Result
	var ctxErr error
	var got *reportRead
	for done := false; !done; {
		select {
		case err = <-waited:
			done = true
		case r := <-reported:
			got, reported = &r, nil
			if r.err == nil && timer != nil {
				timer.Stop()
				grace := time.NewTimer(LeftoverGrace + 5*time.Second)
				defer grace.Stop()
				timeout = grace.C
			}
		case <-timeout:
			// Killing pid 1 kills every process of its namespace.
			p.kill()
			res.TimedOut = got == nil || got.err != nil
			err = <-waited
			done = true
		case <-ctx.Done():
			p.kill()
			ctxErr = ctx.Err()
			err = <-waited
			done = true
		}
	}
	res.Duration = time.Since(start)
	if err != nil {
		return Result{}, fmt.Errorf("run in copy: wait for %s: %w", InitName, err)
	}
	if got == nil {
		r := <-reported // at EOF: the init has exited
		got = &r
	}
	rep, rerr := got.rep, got.err
	c.mu.Lock()
	discarded := c.discarded
	c.mu.Unlock()
	if discarded && rerr != nil {
		ctxErr = ErrDiscarded // Discard killed the session
	}
	if res.TimedOut || ctxErr != nil {
		res.ExitCode = 128 + int(syscall.SIGKILL)
		res.Signal = syscall.SIGKILL
		res.Setup = time.Duration(rep.SetupNS)
		return res, ctxErr
	}
	switch {
	case rerr != nil:
		return Result{}, fmt.Errorf("run in copy: %s ended (%s) with no report: %w", InitName, describe(p.status), rerr)
	case rep.NotFound:
		return Result{}, fmt.Errorf("run in copy: %s: %w", o.Argv[0], exec.ErrNotFound)
	case rep.Error != "":
		return Result{}, fmt.Errorf("run in copy: %s", rep.Error)
	}
	res.ExitCode = rep.Status
	res.Signal = syscall.Signal(rep.Signal)
	res.Setup = time.Duration(rep.SetupNS)
	res.Leftovers, res.LeftoversUnread = rep.Leftovers, rep.Unread
	c.log.Debug("fork: session ended", "argv", o.Argv, "status", res.ExitCode, "setup", res.Setup, "took", res.Duration, "leftovers", len(res.Leftovers))
	return res, nil
}

// sysProcAttr is how the init is started: in the copy's namespaces, and
// for a rootless copy in a user namespace of its own that maps the user,
// and only the user, to itself.
func (c *Copy) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{
		Cloneflags: cloneFlags,
		// The copy dies with the process that runs it.
		Pdeathsig: syscall.SIGKILL,
	}
	if c.Rootless {
		a.Cloneflags |= unix.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
		// The init is the user, not root, in its namespace: exec would
		// clear the capabilities it has there, but for these, ambient.
		// It clears them before it starts the session (dropCaps).
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE}
	}
	return a
}

// child is a started init. A pidfd, where the kernel has them, keeps a
// kill from reaching another process that reuses the pid once it is
// reaped.
type child struct {
	pid    int
	mu     sync.Mutex
	pidfd  int // -1: none
	reaped bool
	status unix.WaitStatus
}

func newChild(pid int) *child {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		fd = -1
	}
	return &child{pid: pid, pidfd: fd}
}

// kill sends SIGKILL to the init, unless it has been reaped.
func (p *child) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.pidfd >= 0:
		_ = unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
	case !p.reaped:
		_ = unix.Kill(p.pid, unix.SIGKILL)
	}
}

// wait reaps the init.
func (p *child) wait() error {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(p.pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.reaped, p.status = true, ws
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
			p.pidfd = -1
		}
		return err
	}
}

// begin claims the copy for one session: in this process (a mutex-guarded
// flag) and across processes (flock on the copy's directory).
func (c *Copy) begin() (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.discarded {
		return nil, ErrDiscarded
	}
	if c.done != nil {
		return nil, ErrBusy
	}
	lock, err := os.Open(c.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrDiscarded
	}
	if err != nil {
		return nil, fmt.Errorf("run in copy: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrBusy
		}
		return nil, fmt.Errorf("run in copy: lock %s: %w", c.Dir, err)
	}
	c.done = make(chan struct{})
	return lock, nil
}

// started records the running init, so that Discard can kill it, and
// kills it if Discard came first.
func (c *Copy) started(p *child) {
	c.mu.Lock()
	c.proc = p
	if c.discarded {
		p.kill()
	}
	c.mu.Unlock()
}

func (c *Copy) end(lock *os.File) {
	lock.Close()
	c.mu.Lock()
	close(c.done)
	c.done, c.proc = nil, nil
	c.mu.Unlock()
}

// describe says how a process ended.
func describe(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}
