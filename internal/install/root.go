package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/undosh/undosh/internal/atomicfile"
)

// fsRoot is the tree undoctl acts on: / or the directory given by --root.
// Paths inside it are absolute as the machine will see them ("/bin/bash");
// every symlink is followed inside the root, the way chroot would, so an
// absolute link in an image (/bin -> /usr/bin) never reaches the files of
// the machine undoctl runs on.
type fsRoot struct {
	dir string // absolute and clean; "/" for this machine
}

func newRoot(dir string) (fsRoot, error) {
	if dir == "" {
		dir = "/"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fsRoot{}, fmt.Errorf("root %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(real); err == nil && !st.IsDir() {
			err = syscall.ENOTDIR
		}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fsRoot{}, &Error{Msg: fmt.Sprintf("root %s: %v", dir, err),
			Fix: "--root names the directory of the tree to act on (an image, a chroot)", Err: err}
	}
	return fsRoot{dir: real}, nil
}

// live reports whether the root is this machine's own /.
func (r fsRoot) live() bool { return r.dir == "/" }

// host returns the path, on this machine, of p inside the root, without
// following any symlink.
func (r fsRoot) host(p string) string {
	return filepath.Join(r.dir, filepath.Clean("/"+p))
}

// resolve returns the path inside the root that p names once symlinks are
// followed inside the root: those of its directories, and the last
// element's too when follow is set. A missing element ends the walk: the
// rest is returned as it is.
func (r fsRoot) resolve(p string, follow bool) (string, error) {
	todo := splitPath(p)
	cur := "/"
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		if len(todo) == 0 && !follow {
			return next, nil
		}
		st, err := os.Lstat(r.host(next))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return filepath.Join(append([]string{next}, todo...)...), nil
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", p, err)
		}
		if st.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("resolve %s: %w", p, syscall.ELOOP)
		}
		target, err := os.Readlink(r.host(next))
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", p, err)
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(splitPath(target), todo...)
	}
	return cur, nil
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// at returns the host path of p with its directories resolved inside the
// root (the last element is not followed), ready for Lstat, Rename and
// friends.
func (r fsRoot) at(p string) (string, error) {
	q, err := r.resolve(p, false)
	if err != nil {
		return "", err
	}
	return r.host(q), nil
}

// target returns the host path of what p finally names.
func (r fsRoot) target(p string) (string, error) {
	q, err := r.resolve(p, true)
	if err != nil {
		return "", err
	}
	return r.host(q), nil
}

// lstat is os.Lstat of p inside the root.
func (r fsRoot) lstat(p string) (os.FileInfo, error) {
	h, err := r.at(p)
	if err != nil {
		return nil, err
	}
	return os.Lstat(h)
}

// readlink returns p's link target, or "" when p is not a symlink.
func (r fsRoot) readlink(p string) string {
	h, err := r.at(p)
	if err != nil {
		return ""
	}
	t, err := os.Readlink(h)
	if err != nil {
		return ""
	}
	return t
}

// entry names one directory entry: two paths with the same entry are one
// name (as /bin/bash and /usr/bin/bash are when /bin links to usr/bin).
type entry struct {
	dev, ino uint64
	name     string
}

// entryOf returns the entry p names, and whether its directory exists.
func (r fsRoot) entryOf(p string) (entry, bool) {
	h, err := r.at(p)
	if err != nil {
		return entry{}, false
	}
	st, err := os.Stat(filepath.Dir(h))
	if err != nil {
		return entry{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return entry{}, false
	}
	return entry{dev: uint64(sys.Dev), ino: sys.Ino, name: filepath.Base(h)}, true
}

// sameFile reports whether a and b (host paths) are the same file.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(sa, sb)
}

// tempName returns an unused name in dir for a file about to become base.
func tempName(dir, base string) (string, error) {
	f, err := os.CreateTemp(dir, ".undoctl-"+base+"-")
	if err != nil {
		return "", fmt.Errorf("temporary file in %s: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return "", fmt.Errorf("temporary file in %s: %w", dir, err)
	}
	return name, nil
}

// moveFile moves the file at host path from to host path to, replacing
// what is there in one rename. It renames when it can, else copies
// (content, mode, owner, times) and then removes from.
func moveFile(from, to string) error {
	err := os.Rename(from, to)
	if err == nil {
		return syncDirs(from, to)
	}
	if !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("move %s to %s: %w", from, to, err)
	}
	if err := copyFile(from, to); err != nil {
		return err
	}
	if err := os.Remove(from); err != nil {
		return fmt.Errorf("move %s to %s: %w", from, to, err)
	}
	return syncDirs(from, to)
}

// keepFile puts a second name for the file at host path from at host path
// to (a hard link, or a copy across file systems), durably. The original
// name stays, so the file is never missing.
func keepFile(from, to string) error {
	tmp, err := tempName(filepath.Dir(to), filepath.Base(to))
	if err != nil {
		return err
	}
	if err := os.Link(from, tmp); err != nil {
		if !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("link %s to %s: %w", from, to, err)
		}
		if err := copyFile(from, tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, to); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("link %s to %s: %w", from, to, err)
	}
	return atomicfile.SyncDir(filepath.Dir(to))
}

// copyFile copies a regular file with its mode, owner and times; to is
// written in full before it appears.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	a := attrsOf(st)
	a.Perm = st.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	a.ModTime = st.ModTime()
	if err := atomicfile.WriteFrom(to, in, a); err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return nil
}

// attrsOf are the permissions of st, and, as root, its owner.
func attrsOf(st fs.FileInfo) atomicfile.Attrs {
	a := atomicfile.Attrs{Perm: st.Mode().Perm(), UID: -1, GID: -1}
	if sys, isUnix := st.Sys().(*syscall.Stat_t); isUnix && os.Geteuid() == 0 {
		a.UID, a.GID = int(sys.Uid), int(sys.Gid)
	}
	return a
}

func syncDirs(a, b string) error {
	if err := atomicfile.SyncDir(filepath.Dir(a)); err != nil {
		return err
	}
	if filepath.Dir(a) == filepath.Dir(b) {
		return nil
	}
	return atomicfile.SyncDir(filepath.Dir(b))
}

// writeLike writes data to host path name durably (temp file, fsync,
// rename, fsync of the directory), keeping the mode and owner of the file
// it replaces.
func writeLike(name string, data []byte) error {
	st, err := os.Stat(name)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return atomicfile.WriteFrom(name, bytes.NewReader(data), attrsOf(st))
}
