package flock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// tryLock asks for how on name without waiting, through a file of its
// own: flock locks belong to open files, so this stands for another
// process.
func tryLock(t *testing.T, name string, how int) error {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
}

func TestLockExclusive(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "x.lock")
	f, err := Lock(name, unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file: %v, %v; want mode 0600", fi, err)
	}
	if err := tryLock(t, name, unix.LOCK_SH); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("a shared lock while held exclusively: %v, want EWOULDBLOCK", err)
	}
	f.Close()
	if err := tryLock(t, name, unix.LOCK_EX); err != nil {
		t.Errorf("an exclusive lock after Close: %v", err)
	}
}

func TestLockShared(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "x.lock")
	a, err := Lock(name, unix.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Lock(name, unix.LOCK_SH)
	if err != nil {
		t.Fatalf("a second shared lock: %v", err)
	}
	defer b.Close()
	if err := tryLock(t, name, unix.LOCK_EX); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("an exclusive lock while shared: %v, want EWOULDBLOCK", err)
	}
}

// TestLockWaits: a second exclusive Lock returns only once the first is
// released.
func TestLockWaits(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "x.lock")
	a, err := Lock(name, unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *os.File)
	go func() {
		b, err := Lock(name, unix.LOCK_EX)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	// The waiter cannot have the lock while a holds it, however long it
	// has had: the check is the lock itself, not a sleep.
	if err := tryLock(t, name, unix.LOCK_EX); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("lock free while held: %v", err)
	}
	a.Close()
	b := <-got
	if b == nil {
		return
	}
	defer b.Close()
	if err := tryLock(t, name, unix.LOCK_EX); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("the waiter returned without the lock: %v", err)
	}
}

// TestLockNoSymlink: a lock file is never opened through a symbolic link,
// which could point at a file the caller does not mean to create or lock.
func TestLockNoSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "x.lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if f, err := Lock(link, unix.LOCK_EX); err == nil {
		f.Close()
		t.Fatal("Lock followed a symbolic link")
	} else if !errors.Is(err, unix.ELOOP) {
		t.Errorf("Lock through a symbolic link: %v, want ELOOP", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target was created: %v", err)
	}
}

func TestLockMissingDir(t *testing.T) {
	t.Parallel()
	if f, err := Lock(filepath.Join(t.TempDir(), "no", "x.lock"), unix.LOCK_EX); err == nil {
		f.Close()
		t.Error("Lock in a directory that does not exist succeeded")
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Lock in a missing directory: %v", err)
	}
}
