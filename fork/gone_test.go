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

// A mount point removed between the reading of the mount table and the
// making of the copy (another process's tmpfs) drops its layer: the copy
// is made, without it.
func TestMirrorRootsGone(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	real := filepath.Join(base, "real")
	layer := func(n, mount string) Overlay {
		up := filepath.Join(base, "layers", n, "upper")
		if err := os.MkdirAll(up, 0o700); err != nil {
			t.Fatal(err)
		}
		return Overlay{Mount: mount, Upper: up, Work: filepath.Join(base, "layers", n, "work")}
	}
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Copy{Rootless: os.Geteuid() != 0, Overlays: []Overlay{layer("0", real), layer("1", filepath.Join(base, "gone")), layer("2", real)}}
	s := &seeder{c: c}
	if err := s.mirrorRoots(-1); err != nil {
		t.Fatalf("mirrorRoots with a mount point gone: %v", err)
	}
	if len(c.Overlays) != 2 || c.Overlays[0].Upper != filepath.Join(base, "layers", "0", "upper") || c.Overlays[1].Upper != filepath.Join(base, "layers", "2", "upper") {
		t.Errorf("layers %+v, want 0 and 2", c.Overlays)
	}
	if _, err := os.Stat(filepath.Join(base, "layers", "1")); !os.IsNotExist(err) {
		t.Errorf("the dropped layer's directory: %v", err)
	}
	if len(c.Mirrored) != 2 {
		t.Errorf("mirrored %+v, want the two layers left", c.Mirrored)
	}
}
