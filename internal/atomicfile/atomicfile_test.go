package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leftovers are the temporary files left in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	return m
}

func TestWrite(t *testing.T) {
	t.Parallel()
	for name, write := range map[string]func(string, []byte, os.FileMode) error{"Write": Write, "Replace": Replace} {
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte("old content, longer than the new"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := write(p, []byte("new"), 0o600); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(p)
		st, _ := os.Stat(p)
		if err != nil || string(b) != "new" || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %q %v, mode %v", name, b, err, st.Mode())
		}
		if l := leftovers(t, dir); len(l) != 0 {
			t.Errorf("%s left %v", name, l)
		}
		// A directory that is not there: an error that names the file.
		if err := write(filepath.Join(dir, "no", "f"), nil, 0o600); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "no", "f")) {
			t.Errorf("%s into a missing directory: %v", name, err)
		}
	}
}

// WriteFrom gives the file its owner, its mode (setuid kept after the
// chown, which clears it) and its times, and leaves nothing behind when
// the reader fails.
func TestWriteFrom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 65534, 65534
	}
	a := Attrs{Perm: 0o750 | os.ModeSetuid, UID: uid, GID: gid, ModTime: when}
	if err := WriteFrom(p, strings.NewReader("data"), a); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, err := os.Stat(p)
	if err != nil || string(b) != "data" || st.Mode() != 0o750|os.ModeSetuid || !st.ModTime().Equal(when) {
		t.Errorf("%q, mode %v, time %v (%v)", b, st.Mode(), st.ModTime(), err)
	}
	if sys := st.Sys().(*syscall.Stat_t); uid >= 0 && (int(sys.Uid) != uid || int(sys.Gid) != gid) {
		t.Errorf("owner %d:%d, want %d:%d", sys.Uid, sys.Gid, uid, gid)
	}
	if err := WriteFrom(p, failing{}, a); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("a reader that fails: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "data" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("left %v", l)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("the reader failed") }

func TestSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "l")
	for _, old := range []func() error{
		func() error { return nil },                                 // nothing there
		func() error { return os.WriteFile(p, []byte("x"), 0o600) }, // a file
		func() error { return os.Symlink("/elsewhere", p) },         // another link
	} {
		os.Remove(p)
		if err := old(); err != nil {
			t.Fatal(err)
		}
		if err := Symlink("/target", p); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(p); err != nil || got != "/target" {
			t.Errorf("Readlink: %q %v", got, err)
		}
	}
	if l := leftovers(t, dir); len(l) != 0 {
		t.Errorf("Symlink left %v", l)
	}
}
