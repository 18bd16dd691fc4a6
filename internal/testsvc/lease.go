package testsvc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/procs"
)

// A lease is the record of what one server made that outlives a killed
// test binary: a file that lists the directories and the user, locked
// for as long as the binary runs. The kernel drops the lock of a process
// that dies, so an unlocked lease is one whose maker is gone and whose
// cleanups never ran: [sweep] removes what it lists.
type lease struct{ f *os.File }

// leaseDir is where this user's leases are, made 0700 and checked to be
// this user's own directory (it is under the shared temporary one).
func leaseDir() (string, error) {
	d := filepath.Join(os.TempDir(), "undosh-testsvc-"+strconv.Itoa(os.Geteuid()))
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("lease directory %s is not a private directory of this user", d)
	}
	return d, nil
}

// newLease sweeps what killed runs left, then takes a lease that the end
// of t gives back.
func newLease(t testing.TB) *lease {
	t.Helper()
	dir, err := leaseDir()
	if err != nil {
		t.Fatal(err)
	}
	sweep(t, dir)
	// Locked before it gets a name that sweep looks at: sweep never sees
	// a lease that is not locked yet.
	f, err := os.CreateTemp(dir, ".new-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		t.Fatalf("lock lease %s: %v", f.Name(), err)
	}
	name := strings.TrimPrefix(filepath.Base(f.Name()), ".new-") + ".lease"
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		f.Close()
		os.Remove(f.Name())
		t.Fatal(err)
	}
	l := &lease{f: f}
	t.Cleanup(func() {
		// Everything it lists is gone by now: the cleanups that remove
		// them were registered after this one.
		os.Remove(filepath.Join(dir, name))
		f.Close()
	})
	return l
}

// note records that what, of kind "dir" or "user", is about to be made.
func (l *lease) note(t testing.TB, kind, what string) {
	t.Helper()
	if strings.ContainsAny(what, "\n") {
		t.Fatalf("lease: %s %q has a newline", kind, what)
	}
	if _, err := fmt.Fprintf(l.f, "%s %s\n", kind, what); err != nil {
		t.Fatalf("lease: %v", err)
	}
}

// sweep removes what the unlocked leases in dir list, and the leases.
// It is best effort: a lease whose user cannot be removed yet stays, for
// the next sweep.
func sweep(t testing.TB, dir string) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.lease"))
	for _, name := range names {
		f, err := os.OpenFile(name, os.O_RDWR|unix.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // its maker runs
			continue
		}
		var dirs, users []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			kind, what, _ := strings.Cut(sc.Text(), " ")
			switch kind {
			case "dir":
				dirs = append(dirs, what)
			case "user":
				users = append(users, what)
			}
		}
		ok := sc.Err() == nil
		for _, d := range dirs {
			if err := os.RemoveAll(d); err != nil {
				ok = false
			}
		}
		for _, u := range users {
			if err := removeUser(u); err != nil {
				t.Logf("left by a killed run: %v", err)
				ok = false
			}
		}
		if ok {
			t.Logf("removed what a killed run left: %s", strings.Join(append(dirs, users...), ", "))
			os.Remove(name)
		}
		f.Close()
	}
}

// removeUser kills what user name still runs and removes the user, if
// it is there.
func removeUser(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return nil
		}
		return err
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil || uid == 0 {
		return fmt.Errorf("user %s has uid %s", name, u.Uid)
	}
	ps, err := procs.List()
	if err != nil {
		return err
	}
	var left []procs.Proc
	for _, p := range ps {
		if p.UID == uid {
			left = append(left, p)
		}
	}
	procs.Signal(left, syscall.SIGKILL)
	procs.WaitGone(left, 5*time.Second)
	if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
		return fmt.Errorf("userdel %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
