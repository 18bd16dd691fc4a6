package testsvc

import (
	"errors"
	"syscall"
)

// gone reports whether no process has pid: what a test checks once a
// server it started has been stopped and reaped.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
