package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/flock"
)

// snapshotFS records what a checkpoint must restore: for each path, its
// kind, its executable bit, its permission bits when they are not the
// default (0644 for a file its owner may not execute, else 0755), and its
// content or symlink target: "file-:text", "filex:text", "file-0600:text",
// "dir", "dir0700", "link:target".
func snapshotFS(t testing.TB, root string, skip func(rel string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link:" + target
		case fi.IsDir():
			out[rel] = "dir" + permSuffix(fi, 0o755)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			x, def := "-", uint32(0o644)
			if fi.Mode()&0o100 != 0 {
				x, def = "x", 0o755
			}
			out[rel] = "file" + x + permSuffix(fi, def) + ":" + string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// permSuffix gives the permission bits of fi (setuid, setgid and sticky
// included) in octal, or "" when they are def.
func permSuffix(fi fs.FileInfo, def uint32) string {
	perm := fi.Sys().(*syscall.Stat_t).Mode & 0o7777
	if perm == def {
		return ""
	}
	return fmt.Sprintf("%04o", perm)
}

func write(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func openStore(t testing.TB, ws string, o Options) *Store {
	t.Helper()
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	s, err := Open(ws, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	write(t, ws, "a.txt", "hello\n")
	write(t, ws, "src/main.go", "package main\n")
	write(t, ws, "src/deep/x/y.txt", "y")
	if err := os.Symlink("a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "empty/dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "run.sh", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(ws, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, ws, Options{})
	before := snapshotFS(t, ws, nil)
	r1, err := s.Checkpoint("first")
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Changed || r1.Files != 5 {
		t.Fatalf("first checkpoint: %+v", r1)
	}
	r2, err := s.Checkpoint("again")
	if err != nil {
		t.Fatal(err)
	}
	if r2.Changed || r2.ID != r1.ID {
		t.Fatalf("a checkpoint with no change wrote %+v, want the id %s again", r2, r1.ID)
	}
	// Damage everything.
	os.RemoveAll(filepath.Join(ws, "src"))
	write(t, ws, "a.txt", "changed")
	write(t, ws, "new/file", "new")
	os.Remove(filepath.Join(ws, "link"))
	write(t, ws, "link", "now a file")
	os.Chmod(filepath.Join(ws, "run.sh"), 0o644)
	os.RemoveAll(filepath.Join(ws, "empty"))
	write(t, ws, "empty", "a file where a directory was")
	res, err := s.Restore(r1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshotFS(t, ws, nil)); diff != "" {
		t.Fatalf("after restore (-want +got):\n%s", diff)
	}
	// The restore itself can be undone.
	if res.Before == r1.ID {
		t.Fatalf("restore did not checkpoint the damaged state first: %+v", res)
	}
	if _, err := s.Restore(res.Before); err != nil {
		t.Fatal(err)
	}
	got := snapshotFS(t, ws, nil)
	if got["a.txt"] != "file-:changed" || got["new/file"] != "file-:new" {
		t.Fatalf("undoing the restore gave %v", got)
	}
}

func TestGCAndCheck(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	s := openStore(t, ws, Options{})
	var ids []string
	for i := range 5 {
		write(t, ws, "f.txt", strings.Repeat("x", i+1))
		write(t, ws, "keep.txt", "same")
		r, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	chk, err := s.Check()
	if err != nil || len(chk.Problems) > 0 || chk.Checkpoints != 5 || chk.Packs != 5 {
		t.Fatalf("check before gc: %+v, %v", chk, err)
	}
	// Everything is younger than a day: gc keeps it all but merges packs.
	g, err := s.GC(GCOptions{})
	if err != nil || g.Kept != 5 || g.Dropped != 0 {
		t.Fatalf("gc: %+v, %v", g, err)
	}
	chk, err = s.Check()
	if err != nil || len(chk.Problems) > 0 || chk.Packs != 1 {
		t.Fatalf("check after merging: %+v, %v", chk, err)
	}
	// A tiny size budget keeps only the newest.
	g, err = s.GC(GCOptions{MaxBytes: 1})
	if err != nil || g.Kept != 1 || g.Dropped != 4 {
		t.Fatalf("gc by size: %+v, %v", g, err)
	}
	log, err := s.Log()
	if err != nil || len(log) != 1 || log[0].ID != ids[4] {
		t.Fatalf("log after gc: %+v, %v", log, err)
	}
	chk, err = s.Check()
	if err != nil || len(chk.Problems) > 0 {
		t.Fatalf("check after gc: %+v, %v", chk, err)
	}
	// The store still takes checkpoints and restores the kept one.
	write(t, ws, "f.txt", "new")
	if _, err := s.Checkpoint(""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ids[4]); err != nil {
		t.Fatal(err)
	}
	if got := snapshotFS(t, ws, nil)["f.txt"]; got != "file-:xxxxx" {
		t.Fatalf("f.txt = %q after restore", got)
	}
	if _, err := s.Restore(ids[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore of a dropped checkpoint: %v, want ErrNotFound", err)
	}
}

// With NoWait, an operation that needs the lock another holds fails at
// once with ErrBusy and writes nothing; once the lock is free it runs.
func TestNoWait(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	write(t, ws, "a.txt", "a\n")
	s := openStore(t, ws, Options{NoWait: true})
	f, err := flock.Lock(filepath.Join(s.Dir(), "lock"), unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint("held"); !errors.Is(err, ErrBusy) {
		t.Errorf("checkpoint of a held store: %v, want ErrBusy", err)
	}
	f.Close()
	res, err := s.Checkpoint("free")
	if err != nil || !res.Changed {
		t.Errorf("checkpoint once free: %+v, %v", res, err)
	}
}
