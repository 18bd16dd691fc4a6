package fork

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/pathglob"
)

// A filesystem mounted on the real machine when the copy was made, which
// something else unmounts and removes while the step runs (another
// test's small tmpfs, holding the hidden directory of the engine that
// made its own copies there), is no change of the step's: the commit's
// diff plans nothing there, and the step's own change is planned.
func TestMountGoneDuringStep(t *testing.T) {
	requireEngine(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "state")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	if err := makeHidden(mnt, filepath.Join(mnt, HiddenName, "copies")); err != nil {
		t.Fatal(err)
	}
	c := newCopy(t, Options{})
	if s := run(t, c, "ls "+mnt+" >/dev/null && echo x > /etc/undosh-fork-gone-test"); s.err != nil || s.ExitCode != 0 {
		t.Fatalf("step: %+v, %v, %s", s.Result, s.err, s.stderr)
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	if err := os.Remove(mnt); err != nil {
		t.Fatal(err)
	}
	if err := c.Settle(); err != nil {
		t.Fatal(err)
	}
	_, changed := diffCopy(t, c)
	for p, k := range changed {
		if pathglob.Within(p, mnt) {
			t.Errorf("%s: %q planned below the removed mount", p, k)
		}
	}
	if changed["/etc/undosh-fork-gone-test"] != OpAdd {
		t.Errorf("the step's own file is not planned: %v", changed)
	}
}
