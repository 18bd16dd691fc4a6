package fork

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// pkgLocks are the lock files of dpkg and apt, from the root, in the
// order apt takes them.
var pkgLocks = []string{
	"var/lib/dpkg/lock-frontend",
	"var/lib/dpkg/lock",
	"var/cache/apt/archives/lock",
	"var/lib/apt/lists/lock",
}

// touchesDpkg reports whether the plan changes /var/lib/dpkg, something
// in it, or a directory above it.
func touchesDpkg(p Plan) bool {
	for _, n := range p.Paths() {
		if n == "/var/lib/dpkg" || strings.HasPrefix(n, "/var/lib/dpkg/") ||
			strings.HasPrefix("/var/lib/dpkg/", strings.TrimSuffix(n, "/")+"/") {
			return true
		}
	}
	return false
}

// takePkgLocks takes write locks (fcntl F_SETLK, as dpkg and apt do) on
// the dpkg and apt lock files under root, without waiting: a package
// manager that holds one makes it fail with [ErrLocked]. A lock file is
// created, as dpkg and apt would, where its directory exists. The
// returned function releases them all.
//
// The locks are the process's: closing any other descriptor of a lock
// file in this process would drop them, so nothing else here opens them.
func takePkgLocks(root string) (func(), error) {
	var fds []int
	release := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	for _, rel := range pkgLocks {
		name := filepath.Join(root, rel)
		if _, err := os.Stat(filepath.Dir(name)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
		if err != nil {
			release()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		fds = append(fds, fd)
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
		err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			held := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
			pid := "another process"
			if unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &held) == nil && held.Type != unix.F_UNLCK && held.Pid > 0 {
				pid = fmt.Sprintf("process %d", held.Pid)
			}
			release()
			return nil, fmt.Errorf("%s is held by %s: %w", name, pid, ErrLocked)
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
	}
	return release, nil
}
