// Package atomicfile writes files so that a crash leaves either the old
// content or the new, never a torn file: temp file, fsync, rename, fsync
// of the directory.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Write replaces name with data, durably.
func Write(name string, data []byte, perm os.FileMode) error {
	return write(name, bytes.NewReader(data), Attrs{Perm: perm, UID: -1, GID: -1}, true)
}

// Replace replaces name with data whole (temp file and rename) but
// without fsync: after a crash the file holds the old data or the new,
// never a mix. For records whose loss recovery tolerates.
func Replace(name string, data []byte, perm os.FileMode) error {
	return write(name, bytes.NewReader(data), Attrs{Perm: perm, UID: -1, GID: -1}, false)
}

// Attrs are what [WriteFrom] gives the file besides its content.
type Attrs struct {
	// Perm is its mode: the permissions, with setuid, setgid and
	// sticky, set after the owner (a chown clears setuid).
	Perm os.FileMode
	// UID and GID own it; -1 leaves the writer's.
	UID, GID int
	// ModTime, when set, is its access and modification time.
	ModTime time.Time
}

// WriteFrom replaces name, durably, with what r reads, with the
// attributes a: the file that keeps a replaced file's owner and mode, or
// a copy of another.
func WriteFrom(name string, r io.Reader, a Attrs) error {
	return write(name, r, a, true)
}

func write(name string, r io.Reader, a Attrs, durable bool) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(name)+"-")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if a.UID >= 0 || a.GID >= 0 {
		if err := f.Chown(a.UID, a.GID); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := f.Chmod(a.Perm); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if !a.ModTime.IsZero() {
		if err := os.Chtimes(tmp, a.ModTime, a.ModTime); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	ok = true
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// Symlink makes name a symlink to target, replacing what is there in one
// rename (name never goes missing), durably.
func Symlink(target, name string) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(name)+"-")
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	tmp := f.Name()
	f.Close()
	// The name is ours until the rename: a link is made where the
	// temporary file was.
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("link %s: %w", name, err)
	}
	return SyncDir(dir)
}

// SyncDir makes the entries of dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
