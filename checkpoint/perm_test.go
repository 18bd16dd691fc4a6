package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"
)

// permFile writes rel with mode perm (setuid, setgid and sticky included).
func permFile(t testing.TB, ws, rel, content string, perm uint32) {
	t.Helper()
	write(t, ws, rel, content)
	permChmod(t, ws, rel, perm)
}

func permDir(t testing.TB, ws, rel string, perm uint32) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(ws, rel), 0o755); err != nil {
		t.Fatal(err)
	}
	permChmod(t, ws, rel, perm)
}

func permChmod(t testing.TB, ws, rel string, perm uint32) {
	t.Helper()
	if err := unix.Chmod(filepath.Join(ws, rel), perm); err != nil {
		t.Fatal(err)
	}
}

func permRemove(t testing.TB, ws, rel string) {
	t.Helper()
	propRemovable(t, filepath.Join(ws, rel))
	if err := os.RemoveAll(filepath.Join(ws, rel)); err != nil {
		t.Fatal(err)
	}
}

// permSnapshot is snapshotFS with the workspace's own mode as ".".
func permSnapshot(t testing.TB, ws string) map[string]string {
	t.Helper()
	m := snapshotFS(t, ws, nil)
	fi, err := os.Lstat(ws)
	if err != nil {
		t.Fatal(err)
	}
	m["."] = "dir" + permSuffix(fi, 0o755)
	return m
}

// TestPermissions: a checkpoint records every permission bit of files and
// directories, a step that only changes them makes a new checkpoint, and a
// restore gives them back exactly, whatever the step did.
func TestPermissions(t *testing.T) {
	t.Parallel()
	// Root may write in a read-only directory: run as nobody too, where
	// the restore must open one to fill it.
	if os.Geteuid() == 0 || os.Getenv(crashNobodyEnv) != "" {
		t.Run("nobody", func(t *testing.T) {
			t.Parallel()
			if crashAsNobody(t) {
				testPermissions(t)
			}
		})
	}
	testPermissions(t)
}

func testPermissions(t *testing.T) {
	tests := []struct {
		name   string
		before func(t *testing.T, ws string) // the workspace at the checkpoint
		step   func(t *testing.T, ws string) // what a failed step did
		want   map[string]string             // some paths of the checkpoint, in snapshotFS's format
		kinds  map[string]string             // path → Change.Kind the step makes
	}{
		{
			name:   "0600 file deleted",
			before: func(t *testing.T, ws string) { permFile(t, ws, ".env", "TOKEN=x\n", 0o600) },
			step:   func(t *testing.T, ws string) { permRemove(t, ws, ".env") },
			want:   map[string]string{".env": "file-0600:TOKEN=x\n"},
			kinds:  map[string]string{".env": "removed"},
		},
		{
			name:   "0600 file made readable",
			before: func(t *testing.T, ws string) { permFile(t, ws, "id_ed25519", "key", 0o600) },
			step:   func(t *testing.T, ws string) { permChmod(t, ws, "id_ed25519", 0o644) },
			want:   map[string]string{"id_ed25519": "file-0600:key"},
			kinds:  map[string]string{"id_ed25519": "perm"},
		},
		{
			name:   "chmod 600 of a 0644 file",
			before: func(t *testing.T, ws string) { write(t, ws, "f", "f") },
			step:   func(t *testing.T, ws string) { permChmod(t, ws, "f", 0o600) },
			want:   map[string]string{"f": "file-:f"},
			kinds:  map[string]string{"f": "perm"},
		},
		{
			name:   "0444 file rewritten",
			before: func(t *testing.T, ws string) { permFile(t, ws, "ro.txt", "read only", 0o444) },
			step: func(t *testing.T, ws string) {
				permChmod(t, ws, "ro.txt", 0o644)
				write(t, ws, "ro.txt", "changed")
			},
			want:  map[string]string{"ro.txt": "file-0444:read only"},
			kinds: map[string]string{"ro.txt": "modified"},
		},
		{
			name:   "0750 file loses its executable bit",
			before: func(t *testing.T, ws string) { permFile(t, ws, "run", "#!/bin/sh\n", 0o750) },
			step:   func(t *testing.T, ws string) { permChmod(t, ws, "run", 0o640) },
			want:   map[string]string{"run": "filex0750:#!/bin/sh\n"},
			kinds:  map[string]string{"run": "mode"},
		},
		{
			name:   "setuid file",
			before: func(t *testing.T, ws string) { permFile(t, ws, "tool", "#!/bin/sh\n", 0o4755) },
			step:   func(t *testing.T, ws string) { permChmod(t, ws, "tool", 0o755) },
			want:   map[string]string{"tool": "filex4755:#!/bin/sh\n"},
			kinds:  map[string]string{"tool": "perm"},
		},
		{
			name: "0700 directory opened",
			before: func(t *testing.T, ws string) {
				write(t, ws, "private/a", "a")
				permChmod(t, ws, "private", 0o700)
			},
			step:  func(t *testing.T, ws string) { permChmod(t, ws, "private", 0o755) },
			want:  map[string]string{"private": "dir0700", "private/a": "file-:a"},
			kinds: map[string]string{"private": "perm"},
		},
		{
			name: "0700 directory deleted",
			before: func(t *testing.T, ws string) {
				permFile(t, ws, "private/key", "k", 0o600)
				permDir(t, ws, "private/empty", 0o700)
				permChmod(t, ws, "private", 0o700)
			},
			step: func(t *testing.T, ws string) { permRemove(t, ws, "private") },
			want: map[string]string{"private": "dir0700", "private/key": "file-0600:k", "private/empty": "dir0700"},
			kinds: map[string]string{
				"private": "dir removed", "private/key": "removed", "private/empty": "dir removed",
			},
		},
		{
			name: "0500 directory with files deleted",
			before: func(t *testing.T, ws string) {
				write(t, ws, "ro/a", "a")
				permFile(t, ws, "ro/sub/b", "b", 0o400)
				permChmod(t, ws, "ro/sub", 0o500)
				permChmod(t, ws, "ro", 0o500)
			},
			step: func(t *testing.T, ws string) { permRemove(t, ws, "ro") },
			want: map[string]string{"ro": "dir0500", "ro/a": "file-:a", "ro/sub": "dir0500", "ro/sub/b": "file-0400:b"},
			kinds: map[string]string{
				"ro": "dir removed", "ro/a": "removed", "ro/sub": "dir removed", "ro/sub/b": "removed",
			},
		},
		{
			name: "0500 directory with files changed",
			before: func(t *testing.T, ws string) {
				write(t, ws, "ro/a", "a")
				write(t, ws, "ro/b", "b")
				permChmod(t, ws, "ro", 0o500)
			},
			step: func(t *testing.T, ws string) {
				permChmod(t, ws, "ro", 0o700)
				write(t, ws, "ro/a", "changed")
				permRemove(t, ws, "ro/b")
				write(t, ws, "ro/c", "new")
				permChmod(t, ws, "ro", 0o500)
			},
			want:  map[string]string{"ro": "dir0500", "ro/a": "file-:a", "ro/b": "file-:b"},
			kinds: map[string]string{"ro/a": "modified", "ro/b": "removed", "ro/c": "added"},
		},
		{
			name: "setgid directory",
			before: func(t *testing.T, ws string) {
				write(t, ws, "shared/f", "f")
				permChmod(t, ws, "shared", 0o2775)
			},
			step:  func(t *testing.T, ws string) { permChmod(t, ws, "shared", 0o775) },
			want:  map[string]string{"shared": "dir2775"},
			kinds: map[string]string{"shared": "perm"},
		},
		{
			name: "setgid directory deleted",
			before: func(t *testing.T, ws string) {
				write(t, ws, "shared/f", "f")
				permChmod(t, ws, "shared", 0o2775)
			},
			step:  func(t *testing.T, ws string) { permRemove(t, ws, "shared") },
			want:  map[string]string{"shared": "dir2775"},
			kinds: map[string]string{"shared": "dir removed", "shared/f": "removed"},
		},
		{
			name:   "sticky directory deleted",
			before: func(t *testing.T, ws string) { permDir(t, ws, "tmp", 0o1777) },
			step:   func(t *testing.T, ws string) { permRemove(t, ws, "tmp") },
			want:   map[string]string{"tmp": "dir1777"},
			kinds:  map[string]string{"tmp": "dir removed"},
		},
		{
			name: "directory made a file, file made a directory",
			before: func(t *testing.T, ws string) {
				permDir(t, ws, "d", 0o711)
				permFile(t, ws, "f", "f", 0o640)
			},
			step: func(t *testing.T, ws string) {
				permRemove(t, ws, "d")
				permFile(t, ws, "d", "now a file", 0o600)
				permRemove(t, ws, "f")
				permDir(t, ws, "f", 0o700)
			},
			want:  map[string]string{"d": "dir0711", "f": "file-0640:f"},
			kinds: map[string]string{"d": "dir removed", "f": "dir added"},
		},
		{
			name:   "the workspace itself",
			before: func(t *testing.T, ws string) { permChmod(t, ws, ".", 0o750) },
			step:   func(t *testing.T, ws string) { permChmod(t, ws, ".", 0o777) },
			want:   map[string]string{".": "dir0750"},
			kinds:  map[string]string{".": "perm"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			t.Cleanup(func() { propRemovable(t, ws) })
			permChmod(t, ws, ".", 0o755)
			write(t, ws, "other.txt", "untouched")
			tt.before(t, ws)
			want := permSnapshot(t, ws)
			for p, v := range tt.want {
				if want[p] != v {
					t.Fatalf("the test's setup: %s is %q, want %q", p, want[p], v)
				}
			}
			s := openStore(t, ws, Options{})
			cp, err := s.Checkpoint("before")
			if err != nil {
				t.Fatal(err)
			}
			if again, err := s.Checkpoint("again"); err != nil || again.Changed {
				t.Fatalf("a checkpoint of the same workspace: %+v, %v; want no change", again, err)
			}
			tt.step(t, ws)
			after := permSnapshot(t, ws)
			changes, err := s.Diff(cp.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.kinds, kinds(changes)); d != "" {
				t.Errorf("diff with the workspace (-want +got):\n%s", d)
			}
			cp2, err := s.Checkpoint("after the step")
			if err != nil {
				t.Fatal(err)
			}
			if !cp2.Changed || cp2.ID == cp.ID {
				t.Fatalf("the step's checkpoint: %+v; want a new one", cp2)
			}
			changes, err = s.Diff(cp.ID, cp2.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.kinds, kinds(changes)); d != "" {
				t.Errorf("diff of the checkpoints (-want +got):\n%s", d)
			}
			res, err := s.Restore(cp.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, permSnapshot(t, ws)); d != "" {
				t.Fatalf("after restore (-want +got):\n%s", d)
			}
			if changes, err := s.Diff(cp.ID, ""); err != nil || len(changes) != 0 {
				t.Errorf("diff with the restored workspace: %+v, %v", changes, err)
			}
			if _, err := s.Restore(res.Before); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(after, permSnapshot(t, ws)); d != "" {
				t.Fatalf("after undoing the restore (-want +got):\n%s", d)
			}
			if chk, err := s.Check(); err != nil || len(chk.Problems) != 0 {
				t.Errorf("check: %+v, %v", chk, err)
			}
		})
	}
}

// kinds maps each changed path to its kind.
func kinds(l []Change) map[string]string {
	out := map[string]string{}
	for _, c := range l {
		if c.Kind == "type" {
			continue // comes with "dir added" or "dir removed"
		}
		out[c.Path] = c.Kind
	}
	return out
}

// TestPermissionsStatCache: with every file trusted from the stat cache,
// a chmod of a file or of a directory alone still makes a new checkpoint,
// and a checkpoint with nothing changed writes nothing and hashes nothing.
// A workspace with default permissions only stores no record.
func TestPermissionsStatCache(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	permChmod(t, ws, ".", 0o755)
	write(t, ws, "a", "a")
	write(t, ws, "d/b", "b")
	s := openStore(t, ws, Options{})
	first, err := s.Checkpoint("")
	if err != nil {
		t.Fatal(err)
	}
	if n := permsBlobs(t, s, first.ID); n != 0 {
		t.Errorf("a workspace with default permissions: %d permission records, want none", n)
	}
	// Let the files age out of the racy window, so that the cache is
	// trusted: only the stat modes can tell the changes below.
	time.Sleep(time.Duration(racyWindow) + 50*time.Millisecond)
	steps := []struct {
		name    string
		do      func()
		changed bool
		hashed  int // at most
		records int
	}{
		{"nothing (the cache is made)", func() {}, false, 2, 0},
		{"nothing", func() {}, false, 0, 0},
		{"chmod 700 d", func() { permChmod(t, ws, "d", 0o700) }, true, 0, 1},
		{"nothing after a directory chmod", func() {}, false, 0, 1},
		{"chmod 600 a", func() { permChmod(t, ws, "a", 0o600) }, true, 1, 1},
		{"chmod 600 d/b", func() { permChmod(t, ws, "d/b", 0o600) }, true, 1, 2},
		{"chmod 644 a", func() { permChmod(t, ws, "a", 0o644) }, true, 1, 2},
		{"chmod 2755 d", func() { permChmod(t, ws, "d", 0o2755) }, true, 0, 2},
		{"chmod 755 d, 644 d/b", func() { permChmod(t, ws, "d", 0o755); permChmod(t, ws, "d/b", 0o644) }, true, 1, 0},
		{"chmod 711 the workspace", func() { permChmod(t, ws, ".", 0o711) }, true, 0, 1},
	}
	last := first.ID
	for _, st := range steps {
		st.do()
		r, err := s.Checkpoint(st.name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Changed != st.changed || r.Changed == (r.ID == last) || r.Hashed > st.hashed {
			t.Errorf("%s: changed %v, hashed %d, id %.12s after %.12s; want changed %v, hashed at most %d",
				st.name, r.Changed, r.Hashed, r.ID, last, st.changed, st.hashed)
		}
		if n := permsBlobs(t, s, r.ID); n != st.records {
			t.Errorf("%s: %d permission records, want %d", st.name, n, st.records)
		}
		last = r.ID
		if st.changed {
			time.Sleep(time.Duration(racyWindow) + 50*time.Millisecond)
			// The cache is trusted again only after a checkpoint that
			// sees the files out of the window.
			if r, err := s.Checkpoint(st.name + ", again"); err != nil || r.Changed {
				t.Fatalf("%s, again: %+v, %v; want no change", st.name, r, err)
			}
		}
	}
}

// permsBlobs counts the trees of checkpoint id that hold a permission
// record.
func permsBlobs(t *testing.T, s *Store, id string) int {
	t.Helper()
	st := s.objects()
	c, err := object.GetCommit(st, plumbing.NewHash(id))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(h plumbing.Hash)
	walk = func(h plumbing.Hash) {
		if h == emptyTree {
			return
		}
		tr, err := object.GetTree(st, h)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tr.Entries {
			switch {
			case e.Name == permsName:
				n++
			case e.Mode == filemode.Dir:
				walk(e.Hash)
			}
		}
	}
	walk(c.TreeHash)
	return n
}

// TestPermsEncoding: a permission record gives back the names and bits it
// was made from, whatever bytes the names hold, and refuses what it could
// not have made.
func TestPermsEncoding(t *testing.T) {
	t.Parallel()
	in := []permRecord{
		{name: "b", perm: 0o600}, {name: ".", perm: 0o700}, {name: "tab\there", perm: 0o4755},
		{name: "new\nline", perm: 0}, {name: "\xff\xfe", perm: 0o7777}, {name: `"q"`, perm: 0o444},
	}
	want := map[string]uint32{}
	for _, r := range in {
		want[r.name] = r.perm
	}
	data := encodePerms(in)
	got, err := decodePerms(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if again := encodePerms(in); string(again) != string(data) {
		t.Errorf("encoding is not stable:\n%q\n%q", data, again)
	}
	for _, bad := range []string{"a\t0644\n", "\"a\"\t10000\n", "\"a\"\t0x1\n", "\"a\" 0644\n", "\"a\"\t\n"} {
		if _, err := decodePerms([]byte(bad)); err == nil {
			t.Errorf("%q decodes", bad)
		}
	}
	if escape("perms") == permsName || escape("~perms") == permsName {
		t.Error("a workspace path escapes to the record's name")
	}
}
