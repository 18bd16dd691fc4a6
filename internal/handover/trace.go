package handover

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Tracee is the shell held by the supervisor.
type Tracee struct {
	pid    int
	reaped bool
}

// Status is how the tracee ended.
type Status struct {
	Code   int            // its exit status, or 128+n for death by signal n
	Signal syscall.Signal // the signal that killed it, or 0
	// Lost: the trace ended before the tracee did (a thread other
	// than its first one ran execve, and the kernel dropped the trace
	// with the first thread); Code and Signal are unknown.
	Lost bool
}

// Seize traces pid with PTRACE_SEIZE, without stopping it and with no
// option: the tracer sees its signals and stops, and its death. The
// tracee must have allowed it (prctl PR_SET_PTRACER where Yama asks).
func Seize(pid int) (*Tracee, error) {
	if err := seize(pid); err != nil {
		return nil, err
	}
	return &Tracee{pid: pid}, nil
}

func seize(pid int) error {
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("ptrace seize %d: %w", pid, e)
	}
	return nil
}

// si_code of a child's end (linux/signal.h).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// siginfo's fields that waitid fills, as the kernel lays them out.
type siginfo struct {
	signo, errno, code, _ int32
	pid, uid, status      int32
	_                     [100]byte
}

// Wait relays the tracee's stops until it has ended, and returns how it
// ended. The tracee stays a zombie that its parent cannot see until
// [Tracee.Release]: the caller may still act before anyone learns of
// the exit. A signal it is to be delivered is delivered; a group stop
// (SIGSTOP, SIGTSTP, …) is left to hold it, with PTRACE_LISTEN, until
// SIGCONT, and its parent is told of the stop as without a tracer.
func (t *Tracee) Wait() (Status, error) {
	for {
		var si siginfo
		_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_PID, uintptr(t.pid), uintptr(unsafe.Pointer(&si)),
			unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, 0, 0)
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.ECHILD:
			// execve from another thread replaced the traced one: the
			// process goes on under the same pid, untraced. Take it
			// again.
			if seize(t.pid) == nil {
				continue
			}
			return Status{Lost: true}, nil
		default:
			return Status{}, fmt.Errorf("waitid %d: %w", t.pid, e)
		}
		switch si.code {
		case cldExited:
			return Status{Code: int(si.status)}, nil
		case cldKilled, cldDumped:
			return Status{Code: 128 + int(si.status), Signal: syscall.Signal(si.status)}, nil
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(t.pid, &ws, unix.WALL, nil); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return Status{}, fmt.Errorf("wait4 %d: %w", t.pid, err)
		}
		switch {
		case ws.Exited():
			t.reaped = true
			return Status{Code: ws.ExitStatus()}, nil
		case ws.Signaled():
			t.reaped = true
			return Status{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}, nil
		case !ws.Stopped():
			continue
		}
		sig := ws.StopSignal()
		if int(ws)>>16 == unix.PTRACE_EVENT_STOP {
			switch sig {
			case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
				// A group stop: keep it stopped without holding it in
				// a ptrace stop, so that SIGCONT wakes it.
				_, _, e = unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_LISTEN, uintptr(t.pid), 0, 0, 0, 0)
			default:
				e = errnoOf(unix.PtraceCont(t.pid, 0))
			}
		} else {
			// A signal about to be delivered: deliver it.
			e = errnoOf(unix.PtraceCont(t.pid, int(sig)))
		}
		if e != 0 && e != unix.ESRCH {
			return Status{}, fmt.Errorf("ptrace restart %d: %w", t.pid, e)
		}
	}
}

// Release reaps the ended tracee, so that its parent learns of its end.
func (t *Tracee) Release() {
	if t.reaped {
		return
	}
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(t.pid, &ws, unix.WALL, nil); err != unix.EINTR {
			break
		}
	}
	t.reaped = true
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}
