package testuser

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/flock"
)

// etcLock names the lock by which the test binaries of one
// `go test ./...` keep out of each other's way in /etc.
func etcLock() string { return filepath.Join(os.TempDir(), "undosh-test-etc.lock") }

// ChangingEtc holds, until release, a shared lock that [WatchingEtc]
// waits for: a package whose tests change /etc (users, sudoers, machine
// steps committed there) takes it in TestMain, around m.Run. Without
// root it takes nothing.
func ChangingEtc() (release func()) { return lockEtc(unix.LOCK_SH) }

// WatchingEtc waits until no package that changes /etc runs, and keeps
// them from starting until release: for a test that checks /etc is
// unchanged across a run of its own. It must not be taken by a test
// binary that holds [ChangingEtc].
func WatchingEtc() (release func()) { return lockEtc(unix.LOCK_EX) }

func lockEtc(how int) func() {
	if os.Geteuid() != 0 {
		return func() {}
	}
	f, err := flock.Lock(etcLock(), how)
	if err != nil {
		return func() {} // Best effort: the tests run as before.
	}
	return func() { f.Close() }
}
