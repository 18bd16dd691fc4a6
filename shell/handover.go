package shell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/handover"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/procstate"
	"github.com/undosh/undosh/policy"
)

// A workspace step's shell runs in the process the caller started, so
// that $$ and $PPID are bash's own (docs/transparency.md): that undosh
// (the shell-to-be) starts a second undosh, the supervisor, with the same
// command line and one end of a socket pair, and waits. The supervisor
// decides the step again, traces the shell-to-be, checkpoints, and sends
// it what to exec; it relays the shell's stops, and once the shell has
// ended, while it is still a zombie its caller cannot see, it verifies,
// rolls back and journals, then lets it go. Where it cannot trace, it
// says so before anything else, and the step runs as a child as before.

// superviseVar names the supervisor's end of the socket pair (its fd);
// superviseExecVar the file the shell-to-be was run as (Process.Executed).
const (
	superviseVar     = "UNDOSH_SUPERVISE_FD"
	superviseExecVar = "UNDOSH_SUPERVISE_EXECFN"
)

// supervisor is this undosh's part when it supervises a step handed over.
type supervisor struct {
	conn *handover.Conn
	pid  int // the shell-to-be
	t    *handover.Tracee
	// sent: the shell-to-be has its instruction.
	sent bool
	// executed is the file the shell-to-be was run as.
	executed string
}

// takeSupervise removes superviseVar from env, and returns the
// supervisor it names when it is really one: a socket whose other end
// belongs to this process's parent.
func takeSupervise(env []string) ([]string, *supervisor) {
	i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, superviseVar+"=") })
	if i < 0 {
		return env, nil
	}
	v := strings.TrimPrefix(env[i], superviseVar+"=")
	env = append(env[:i:i], env[i+1:]...)
	executed := ""
	if j := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, superviseExecVar+"=") }); j >= 0 {
		executed = strings.TrimPrefix(env[j], superviseExecVar+"=")
		env = append(env[:j:j], env[j+1:]...)
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return env, nil
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || int(cred.Pid) != os.Getppid() {
		return env, nil
	}
	unix.CloseOnExec(fd)
	return env, &supervisor{conn: handover.NewConn(os.NewFile(uintptr(fd), "handover")), pid: int(cred.Pid), executed: executed}
}

// supervise runs main as the supervisor: nothing it runs runs here, and
// the shell-to-be learns how to end.
func (s *supervisor) supervise(p *Process, main func() int) int {
	// The terminal's signals reach the shell directly; this process is
	// in a group of its own, and says its notices even from there.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	p.Exec = s.exec
	p.DieBy = func(syscall.Signal) {} // the shell died by it already
	code := main()
	if !s.sent {
		// When the shell-to-be is gone, no one waits for this.
		_ = s.conn.Send(handover.Instruction{Kind: handover.Exit, Code: code})
	}
	if s.t != nil {
		// Hold none of the caller's files once the shell is gone.
		if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
			for fd := range 3 {
				unix.Dup2(int(null.Fd()), fd)
			}
		}
		s.t.Release()
	}
	return code
}

// errHandedOver is the supervisor's [Process.Exec] succeeding: the
// shell-to-be execs.
var errHandedOver = errors.New("handed over")

// exec has the shell-to-be exec path with this process's standard
// files: what undosh would exec itself.
func (s *supervisor) exec(path string, argv, env []string) error {
	files := make([]*os.File, 3)
	for fd := range files {
		if !procstate.Closed(fd) {
			files[fd] = os.NewFile(uintptr(fd), "std")
		}
	}
	if err := s.send(path, argv, env, files); err != nil {
		return err
	}
	return errHandedOver
}

func (s *supervisor) send(path string, argv, env []string, files []*os.File) error {
	err := s.conn.Send(handover.Instruction{Kind: handover.Exec, Path: path, Argv: argv, Env: env, Files: files})
	if err == nil {
		s.sent = true
	}
	return err
}

// attach traces the shell-to-be. When it cannot, it tells it to run the
// step itself, and the caller stops here: nothing has run.
func (s *supervisor) attach() bool {
	if err := s.conn.AwaitReady(); err != nil {
		return false
	}
	// Every ptrace call must come from this thread (cmd/undosh keeps
	// the main goroutine on it already).
	runtime.LockOSThread()
	t, err := handover.Seize(s.pid)
	if err != nil {
		if s.conn.Send(handover.Instruction{Kind: handover.Fallback}) == nil {
			s.sent = true
		}
		return false
	}
	s.t = t
	return true
}

// run has the traced shell-to-be exec the step, and returns how it
// ended; started is called once it has its files.
func (s *supervisor) run(p stepProc, started func()) (status, error) {
	// The instruction is sent while this thread relays the shell-to-be's
	// stops: a large one (argv, environment) fills the socket, and a
	// signal that stops the shell-to-be before it has read it all would
	// wait for this thread, which would wait for the read.
	sent := make(chan error, 1)
	go func() {
		err := s.send(p.path, p.argv, p.env, p.files)
		if err != nil {
			// The shell-to-be reads the end of the socket, and ends.
			s.conn.Close()
		}
		started()
		sent <- err
	}()
	hs, err := s.t.Wait()
	if serr := <-sent; serr != nil {
		return status{}, serr
	}
	if err != nil {
		return status{}, err
	}
	if why := s.conn.ExecFailure(); why != "" {
		return status{}, errors.New(why)
	}
	return status{code: hs.Code, sig: hs.Signal, lost: hs.Lost}, nil
}

// stepProc is the process a protected step runs in.
type stepProc struct {
	path      string
	argv, env []string
	files     []*os.File
}

// runStep runs the step's process and returns how it ended: as a child,
// or, when this undosh supervises a step handed over, in the process
// the caller started. started is called once the process has its files.
func (r *run) runStep(p stepProc, started func()) (status, error) {
	if r.sup != nil && r.sup.t != nil {
		return r.sup.run(p, started)
	}
	c, err := startChild(p.path, p.argv, p.env, p.files, r.proc.Ignored)
	started()
	if err != nil {
		return status{}, err
	}
	st := <-c.done
	return st, c.err
}

// handOverOK reports whether the step may run in this process, its
// supervisor in another: a one-shot -c string or script file whose
// status undosh will not change after it ends (no verify, no escalation
// of what a view caught, no rerun), whose shell a tracer cannot spoil.
func (r *run) handOverOK() bool {
	d := r.dec
	switch {
	case r.sup != nil, r.proc.Getenv("UNDOSH_HANDOVER") == "0", os.Getpid() == 1:
		// pid 1's end would take its supervisor with it.
		return false
	case r.src.session, r.src.interactive, r.src.stdin != nil, r.src.unseen != "":
		return false
	case d.Class != policy.Git, d.Verdict != policy.Run:
		return false
	case d.Verify != "" && d.Rollback == policy.RollbackOnFailure:
		// A verify that fails changes the status, which the shell's
		// own exit has fixed by then.
		return false
	case r.enforcing() && r.inCaptureView() && (r.escalation() != policy.EscalateCommit || !d.WritesSeen()):
		// What a step's view caught beyond its workspace is settled
		// after bash has ended: refuse, rerun, and a commit refused
		// (undosh's own files, a conflict) end with undosh's status.
		// A step whose every write the parser saw in its workspace
		// leaves its view nothing to catch (docs/transparency.md).
		return false
	}
	switch r.inv.Mode {
	case modeCommand:
	case modeScript:
		// The supervisor reads the script again, with only fds 0, 1
		// and 2 of this process: not through /dev/fd/N.
		p := filepath.Clean(r.src.script)
		if strings.HasPrefix(p, "/dev/") || strings.HasPrefix(p, "/proc/") {
			return false
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return false
		}
	default:
		return false
	}
	if os.Geteuid() != 0 && (r.runsAsRoot || len(setuidPrograms(r.facts, r.env["PATH"])) > 0) {
		// A traced process runs a setuid program without its privilege.
		return false
	}
	return !traced()
}

// inCaptureView reports whether an enforced workspace step would run in
// a view of the machine (contain), not under a hard limit.
func (r *run) inCaptureView() bool {
	mode, ok, _ := machine.Containment(r.proc.Getenv)
	return ok && mode == enforce.Capture && r.cwd != ""
}

// traced reports whether a tracer (strace, gdb) holds this process: no
// other can then.
func traced() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), "\nTracerPid:")
	v, _, _ := strings.Cut(rest, "\n")
	return strings.TrimSpace(v) != "0"
}

// handOver starts the supervisor and does as it says: it returns only
// when the step is over without running here (handed, with the status
// to end with), or when the supervisor cannot hold this process (the
// caller then runs the step as a child).
func (r *run) handOver() (code int, handed bool) {
	self, err := os.Executable()
	if err != nil {
		return 0, false
	}
	ours, theirs, err := handover.Pair()
	if err != nil {
		return 0, false
	}
	files := append(slices.Clone(r.proc.Files), theirs)
	env := append(slices.Clone(r.environ0), superviseVar+"=3", superviseExecVar+"="+r.executed)
	p, err := procstate.StartProcess(self, r.proc.Argv, &os.ProcAttr{Env: env, Files: files, Sys: &syscall.SysProcAttr{Setpgid: true}})
	theirs.Close()
	if err != nil {
		ours.Close()
		return 0, false
	}
	conn := handover.NewConn(ours)
	// Yama's ptrace_scope 1 lets only an ancestor trace, unless told.
	_ = unix.Prctl(unix.PR_SET_PTRACER, uintptr(p.Pid), 0, 0, 0)
	var in handover.Instruction
	if err = conn.Ready(); err == nil {
		in, err = conn.Receive()
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) {
			err = errors.New("undosh's supervisor of this step ended before the step could start")
		}
		r.proc.errorf(err, "nothing ran; run the step again")
		return exit.Failure, true
	}
	switch in.Kind {
	case handover.Fallback:
		conn.Close()
		go p.Wait()
		return 0, false
	case handover.Exit:
		return in.Code, true
	}
	for fd, f := range in.Files {
		if f == nil {
			unix.Close(fd)
			continue
		}
		err = unix.Dup2(int(f.Fd()), fd)
		f.Close()
		if err != nil {
			break
		}
	}
	if err == nil {
		// This is the main thread (cmd/undosh locks the main goroutine
		// to it): an exec from another would leave the tracer holding
		// a thread that is gone.
		err = r.proc.Exec(in.Path, in.Argv, in.Env)
	}
	_ = conn.Failed(fmt.Sprintf("exec %s: %v", in.Path, err))
	return exit.NotRun, true
}
