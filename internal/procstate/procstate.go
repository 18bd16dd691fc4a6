// Package procstate keeps for the real shell what the caller set up for
// undosh and the Go runtime changes before main runs:
//
//   - ignored signals: the runtime installs its own handlers (and execve
//     resets a handled signal to the default); [Ignore] ignores them again;
//   - the signal mask: the runtime unblocks on its threads the signals it
//     needs (SIGINT, SIGTERM, SIGHUP, …); [Exec] and [StartProcess] give
//     the child the caller's mask;
//   - closed standard fds: the runtime opens /dev/null on them
//     (golang/go#60641); [Exec] closes them again, [Files] gives nil for
//     them.
//
// A C constructor records that state before the runtime starts, and
// [Ignored], [Blocked] and [Closed] report it. The contract: a shell
// started with Exec, or with StartProcess and Files, after Ignore, sees
// the signal dispositions, signal mask and standard fds that it would see
// if the caller had run it directly; syscall.Exec, os.StartProcess and
// os/exec give it the Go runtime's instead.
//
// The package also gives the environment exactly as received
// ([Environ]: duplicates and entries without "=" kept), the path the
// kernel was asked to run ([Executed]), and a death by a signal that the
// runtime would otherwise catch ([DieBy]).
//
// Importing this package makes the binary use cgo. Callers must call
// Ignore early in main, before any signal.Notify, so that a signal the
// caller ignored stays ignored by undosh and by every child.
package procstate

// #include "record.h"
import "C"

import (
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Recorded reports whether the constructor ran (it always does in a
// binary that links this package).
func Recorded() bool { return C.undosh_state.recorded != 0 }

// Ignored reports whether the caller left sig ignored.
func Ignored(sig syscall.Signal) bool {
	return sig >= 1 && sig <= 64 && uint64(C.undosh_state.ignored)&(1<<(uint(sig)-1)) != 0
}

// Blocked reports whether the caller had sig blocked.
func Blocked(sig syscall.Signal) bool {
	return sig >= 1 && sig <= 64 && uint64(C.undosh_state.blocked)&(1<<(uint(sig)-1)) != 0
}

// Closed reports whether fd (0, 1 or 2) was closed when undosh started.
func Closed(fd int) bool {
	return fd >= 0 && fd < 3 && int(C.undosh_state.closed)&(1<<fd) != 0
}

// Ignore ignores again every signal the caller ignored, so that undosh
// and its children keep the caller's dispositions.
func Ignore() {
	for s := syscall.Signal(1); s <= 64; s++ {
		if Ignored(s) && s != syscall.SIGKILL && s != syscall.SIGSTOP {
			signal.Ignore(s)
		}
	}
}

// Files returns the standard files for a child: nil (closed in the child)
// where the caller had closed the fd.
func Files() []*os.File {
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	for fd := range files {
		if Closed(fd) {
			files[fd] = nil
		}
	}
	return files
}

// Exec replaces undosh with path, after closing the standard fds the
// caller had closed and restoring the caller's signal mask. It returns
// only on failure.
func Exec(path string, argv, env []string) error {
	runtime.LockOSThread()
	mask := callerMask()
	for fd := range 3 {
		if Closed(fd) {
			unix.Close(fd)
		}
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &mask, nil); err != nil {
		return err
	}
	err := syscall.Exec(path, argv, env)
	var empty unix.Sigset_t
	unix.PthreadSigmask(unix.SIG_SETMASK, &empty, nil)
	runtime.UnlockOSThread()
	return err
}

// StartProcess starts a child as [os.StartProcess] does, with the
// caller's signal mask. The Go runtime unblocks the signals it needs on
// its threads (SIGTERM, SIGINT, SIGHUP, …), and a child starts with the
// mask of the thread that forked it: without this, a signal the caller
// blocked would arrive unblocked in the child.
func StartProcess(name string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mask := callerMask()
	var old unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &mask, &old); err != nil {
		return nil, err
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return os.StartProcess(name, argv, attr)
}

// callerMask is the signal mask the caller gave undosh.
func callerMask() unix.Sigset_t {
	var mask unix.Sigset_t
	for s := 1; s <= 64; s++ {
		if Blocked(syscall.Signal(s)) {
			mask.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
		}
	}
	return mask
}

// DieBy ends the process by sig, with the signal's default action, so that
// the caller sees a death by that signal. It returns only if sig did not
// end the process.
func DieBy(sig syscall.Signal) {
	C.undosh_die_by(C.int(sig))
}

// Environ returns the environment exactly as the process received it,
// duplicates and entries without "=" included (os.Environ drops
// duplicate names).
func Environ() []string {
	n := int(C.undosh_environ_len())
	env := make([]string, 0, n)
	for i := range n {
		env = append(env, C.GoString(C.undosh_environ_at(C.int(i))))
	}
	return env
}

// Executed is the file the kernel was asked to run for this process: the
// path given to execve (AT_EXECFN), as given (relative to the working
// directory at the time, when it is relative), or "".
func Executed() string {
	p := C.undosh_execfn()
	if p == nil {
		return ""
	}
	return C.GoString(p)
}
