// Package flock takes whole-file locks on lock files: the kernel drops the
// lock of a process that dies, so a lock is never left stale.
package flock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Lock opens (creating, 0600; never through a symlink) the lock file name
// and waits for how (unix.LOCK_EX or unix.LOCK_SH) on it; with
// unix.LOCK_NB added it does not wait, and fails with unix.EWOULDBLOCK
// when another holds the lock. Closing the returned file releases the
// lock.
func Lock(name string, how int) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
