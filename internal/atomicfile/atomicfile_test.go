package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
