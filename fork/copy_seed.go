package fork

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/unixmode"
)

// errNotInLower means a path (or one of its parents) is not a directory
// of the layer's own filesystem, so there is nothing to hide or nowhere
// to seed.
var errNotInLower = errors.New("not in the layer")

// seeder puts paths in a copy's upper directories before any overlay is
// mounted. A parent directory it has to make mirrors the real directory
// (mode, owner, extended attributes, times), so that the copy sees it
// unchanged; times are set last, deepest first, once the children exist.
type seeder struct {
	c       *Copy
	made    map[string]bool // upper directories made
	pending []pendingDir    // directories whose times are set by finish
}

type pendingDir struct {
	upper string
	st    unix.Stat_t
	mirr  int // index in c.Mirrored
	// mode, when set, is given to the directory last: a rootless copy's
	// mode without write bits would stop the seeding of what is in it.
	mode uint32
}

// lower lstats the real path p of layer l, and reports whether it belongs
// to the layer's own filesystem (is in the overlay's lower layer), rather
// than to a mount the copy does not show.
func lower(l *Overlay, p string) (unix.Stat_t, bool, error) {
	var st unix.Stat_t
	var sx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &sx)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("stat %s: %w", p, err)
	}
	st = unix.Stat_t{
		Dev:  unix.Mkdev(sx.Dev_major, sx.Dev_minor),
		Ino:  sx.Ino,
		Mode: uint32(sx.Mode),
		Uid:  sx.Uid,
		Gid:  sx.Gid,
		Atim: unix.Timespec{Sec: sx.Atime.Sec, Nsec: int64(sx.Atime.Nsec)},
		Mtim: unix.Timespec{Sec: sx.Mtime.Sec, Nsec: int64(sx.Mtime.Nsec)},
	}
	if sx.Mask&unix.STATX_MNT_ID != 0 {
		return st, int(sx.Mnt_id) == l.MountID, nil
	}
	return st, st.Dev == l.Dev, nil
}

// rel returns the layer of the real path p and p relative to its mount
// point.
func (s *seeder) rel(p string) (*Overlay, string, error) {
	l := s.c.OverlayOf(p)
	if l != nil && s.c.Rootless && l == &s.c.Overlays[skeletonLayer] {
		// The skeleton holds only what buildRootless put there.
		return nil, "", errNotInLower
	}
	if l == nil {
		return nil, "", fmt.Errorf("seed %s: no layer", p)
	}
	r, err := filepath.Rel(l.Mount, filepath.Clean(p))
	if err != nil || r == "." || strings.HasPrefix(r, "..") {
		return nil, "", fmt.Errorf("seed %s: is the root of layer %s", p, l.Mount)
	}
	return l, r, nil
}

// mirror gives the upper directory dir the metadata of the real
// directory whose stat is st, at real path p, except its times.
func (s *seeder) mirror(dir, p string, st unix.Stat_t) error {
	if s.c.Rootless {
		// The user cannot give the directory the real owner: it stays
		// the user's, with the real mode less what the user could not
		// do (rootlessMode).
		mode := rootlessMode(p, st)
		copyXattrs(p, dir)
		s.c.Mirrored = append(s.c.Mirrored, Mirror{Path: p, Mode: fileMode(unix.S_IFDIR | mode), UID: os.Geteuid(), GID: os.Getegid(), Mtime: time.Unix(st.Mtim.Unix())})
		s.pending = append(s.pending, pendingDir{upper: dir, st: st, mirr: len(s.c.Mirrored) - 1, mode: mode | unix.S_IFDIR})
		return nil
	}
	if err := unix.Lchown(dir, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	if err := unix.Chmod(dir, st.Mode&0o7777); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	if err := copyXattrs(p, dir); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	s.c.Mirrored = append(s.c.Mirrored, Mirror{
		Path:  p,
		Mode:  fileMode(st.Mode),
		UID:   int(st.Uid),
		GID:   int(st.Gid),
		Mtime: time.Unix(st.Mtim.Unix()),
	})
	s.pending = append(s.pending, pendingDir{upper: dir, st: st, mirr: len(s.c.Mirrored) - 1})
	return nil
}

// mirrorRoots gives every layer but skip (-1: none) the metadata of its
// real mount point's root (mirrorRoot). A layer whose mount point is gone
// since the mount table was read (another process's tmpfs, unmounted and
// removed) is dropped: there is nothing left of it to show, and an
// overlay cannot be mounted over it.
func (s *seeder) mirrorRoots(skip int) error {
	var gone []int
	for i := range s.c.Overlays {
		if i == skip {
			continue
		}
		err := s.mirrorRoot(i)
		if errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, i)
			continue
		}
		if err != nil {
			return err
		}
	}
	for _, i := range slices.Backward(gone) {
		os.RemoveAll(filepath.Dir(s.c.Overlays[i].Upper))
		s.c.Overlays = slices.Delete(s.c.Overlays, i, i+1)
	}
	return nil
}

// mirrorRoot gives layer i's upper directory the metadata of the real
// mount point's root, which the overlay's root shows.
func (s *seeder) mirrorRoot(i int) error {
	l := &s.c.Overlays[i]
	var st unix.Stat_t
	if err := unix.Stat(l.Mount, &st); err != nil {
		return fmt.Errorf("stat %s: %w", l.Mount, err)
	}
	return s.mirror(l.Upper, l.Mount, st)
}

// parents makes, in the upper directory of p's layer, the directories
// that lead to p, mirroring the real ones. It returns the upper path of p.
func (s *seeder) parents(p string) (string, error) {
	l, r, err := s.rel(p)
	if err != nil {
		return "", err
	}
	if s.made == nil {
		s.made = map[string]bool{}
	}
	parts := strings.Split(r, "/")
	for i := 1; i < len(parts); i++ {
		sub := strings.Join(parts[:i], "/")
		dir := filepath.Join(l.Upper, sub)
		if s.made[dir] {
			continue
		}
		real := filepath.Join(l.Mount, sub)
		st, ok, err := lower(l, real)
		if err != nil {
			return "", err
		}
		if !ok || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return "", errNotInLower
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", fmt.Errorf("seed %s: %w", p, err)
		}
		s.made[dir] = true
		if err := s.mirror(dir, real, st); err != nil {
			return "", err
		}
	}
	return filepath.Join(l.Upper, r), nil
}

// seedFile writes a root-owned file at real path p in the copy. It does
// nothing when p's directory does not exist.
func (s *seeder) seedFile(p string, data []byte, perm os.FileMode) error {
	up, err := s.parents(p)
	if errors.Is(err, errNotInLower) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := writeNew(up, data, perm); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	s.c.Seeded = append(s.c.Seeded, p)
	return nil
}

// hide puts a whiteout on real path p, so that the copy does not see
// it, even if it appears later. It does nothing when p's parent is not a
// directory of p's overlay.
func (s *seeder) hide(p string) error {
	up, err := s.parents(p)
	if errors.Is(err, errNotInLower) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := unix.Mknod(up, unix.S_IFCHR, 0); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil // hidden twice
		}
		return fmt.Errorf("hide %s: %w", p, err)
	}
	s.c.Seeded = append(s.c.Seeded, p)
	return nil
}

// copyFile copies the real file p (a file bind-mounted on the host, which
// the overlay of the filesystem below would not show) into the copy, with
// its mode, owner and times.
func (s *seeder) copyFile(p string) error {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil // not a regular file: the copy shows what is below
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	up, err := s.parents(p)
	if errors.Is(err, errNotInLower) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := writeNew(up, data, fileMode(st.Mode).Perm()); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	if err := unix.Lchown(up, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	if err := unix.Chmod(up, st.Mode&0o7777); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, up, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("seed %s: %w", p, err)
	}
	s.c.Seeded = append(s.c.Seeded, p)
	return nil
}

// guardMarkers returns the PEP 668 markers under root that undosh's pip
// guard wrote (they start with [GuardTag]), as paths from root.
func guardMarkers(root string) []string {
	var out []string
	for _, g := range PythonLibs() {
		dirs, _ := filepath.Glob(filepath.Join(root, g))
		for _, d := range dirs {
			name := filepath.Join(d, "EXTERNALLY-MANAGED")
			f, err := os.Open(name)
			if err != nil {
				continue
			}
			head := make([]byte, len(GuardTag))
			n, _ := io.ReadFull(f, head)
			f.Close()
			if string(head[:n]) == GuardTag {
				rel, _ := filepath.Rel(root, name)
				out = append(out, "/"+rel)
			}
		}
	}
	return out
}

// finish sets the times of the mirrored directories, deepest first, now
// that their children are in place.
func (s *seeder) finish() error {
	slices.SortStableFunc(s.pending, func(a, b pendingDir) int {
		return strings.Count(b.upper, "/") - strings.Count(a.upper, "/")
	})
	for _, d := range s.pending {
		if d.mode != 0 {
			if err := unix.Chmod(d.upper, d.mode&0o7777); err != nil {
				return fmt.Errorf("seed %s: %w", s.c.Mirrored[d.mirr].Path, err)
			}
		}
		ts := []unix.Timespec{d.st.Atim, d.st.Mtim}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, d.upper, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("seed %s: %w", s.c.Mirrored[d.mirr].Path, err)
		}
	}
	return nil
}

func writeNew(name string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil { // past the umask
		f.Close()
		return err
	}
	return f.Close()
}

// copyXattrs copies the extended attributes of real path src to dst,
// except overlayfs's own. Attributes the upper filesystem does not
// support are left out.
func copyXattrs(src, dst string) error {
	size, err := unix.Llistxattr(src, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return err
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(src, buf)
	if err != nil {
		return err
	}
	for name := range strings.SplitSeq(string(buf[:size]), "\x00") {
		if name == "" || strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.overlay.") {
			continue
		}
		n, err := unix.Lgetxattr(src, name, nil)
		if err != nil {
			return fmt.Errorf("get xattr %s: %w", name, err)
		}
		val := make([]byte, n)
		if n, err = unix.Lgetxattr(src, name, val); err != nil {
			return fmt.Errorf("get xattr %s: %w", name, err)
		}
		err = unix.Lsetxattr(dst, name, val[:n], 0)
		if errors.Is(err, unix.EPERM) && Rootless() {
			continue // security.* and trusted.* are root's to set
		}
		if err != nil && !errors.Is(err, unix.ENOTSUP) {
			return fmt.Errorf("set xattr %s: %w", name, err)
		}
	}
	return nil
}

// fileMode converts a stat mode to an fs.FileMode.
func fileMode(m uint32) os.FileMode {
	mode := unixmode.Perm(m)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= os.ModeDir
	case unix.S_IFLNK:
		mode |= os.ModeSymlink
	case unix.S_IFCHR:
		mode |= os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		mode |= os.ModeDevice
	case unix.S_IFIFO:
		mode |= os.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= os.ModeSocket
	}
	return mode
}
