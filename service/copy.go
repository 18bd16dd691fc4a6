package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// margin is how much earlier than a time T a file's ctime must be for
// the file to be known unchanged since T: the kernel stamps ctimes with
// a coarse clock, up to a tick (at most 10 ms) behind.
const margin = 50 * time.Millisecond

// syncOpts says which files syncTree may skip or link.
type syncOpts struct {
	// stable: a file of dst with src's type, size, mode, owner and mtime
	// is src's copy already if src's ctime is before stable (src has not
	// changed since a time at which dst was made from it).
	stable time.Time
	// dstStable: it is dst's ctime that must be before stable (dst is the
	// live tree, src a point's copy made from it after stable).
	dstStable bool
	// link is a tree (an earlier point's) from which a file unchanged
	// since linkStable is hard-linked rather than copied.
	link       string
	linkStable time.Time
}

// syncer copies trees. It walks a tree in order, and copies the files
// that need it on copiers goroutines once the walk is done (a copy is
// the kernel's work, and two cores copy faster than one); directories
// get their attributes last, since a copy into one changes its mtime.
type syncer struct {
	root bool
	// files are the copies the walk found to make; dirs the
	// directories made or updated, children first.
	files, dirs []entry
}

// entry is a file or directory for the syncer to finish: dst is made
// from src, whose attributes fi holds.
type entry struct {
	src, dst string
	fi       fs.FileInfo
}

// copiers is how many files are copied at once.
const copiers = 4

func newSyncer() *syncer { return &syncer{root: os.Geteuid() == 0} }

// syncTree makes dst what src is: a file or a directory tree with its
// modes, owners (when root) and mtimes; what dst holds that src does not
// is removed. Sockets, fifos and devices are left out: a server makes
// its own again.
func (c *syncer) syncTree(src, dst string, o syncOpts) error {
	c.files, c.dirs = nil, nil
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := c.sync(src, dst, fi, o); err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(copiers)
	for _, f := range c.files {
		g.Go(func() error {
			err := c.copyFile(f.src, f.dst)
			if errors.Is(err, fs.ErrNotExist) && !exists(f.src) {
				return nil // removed since the walk saw it
			}
			if err != nil {
				return err
			}
			return c.attrs(f.dst, f.fi)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, d := range c.dirs {
		if err := c.attrs(d.dst, d.fi); err != nil {
			return err
		}
	}
	return nil
}

func (c *syncer) sync(src, dst string, fi fs.FileInfo, o syncOpts) error {
	di, derr := os.Lstat(dst)
	if derr == nil && !sameType(fi, di) {
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		derr = fs.ErrNotExist
	}
	switch {
	case fi.IsDir():
		if derr != nil {
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		keep := make(map[string]bool, len(entries))
		for _, e := range entries {
			efi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while it was read
			}
			if err != nil {
				return err
			}
			if !copied(efi) {
				continue
			}
			keep[e.Name()] = true
			if err := c.sync(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), efi, o.under(e.Name())); err != nil {
				if errors.Is(err, fs.ErrNotExist) && !exists(filepath.Join(src, e.Name())) {
					delete(keep, e.Name())
					continue // removed while it was copied
				}
				return err
			}
		}
		if derr == nil {
			have, err := os.ReadDir(dst)
			if err != nil {
				return err
			}
			for _, e := range have {
				if !keep[e.Name()] {
					if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
						return err
					}
				}
			}
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if derr == nil {
			if t, err := os.Readlink(dst); err == nil && t == target {
				return c.attrs(dst, fi)
			}
			if err := os.Remove(dst); err != nil {
				return err
			}
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	default:
		if derr == nil && sameFile(fi, di) && (!o.dstStable && before(fi, o.stable) || o.dstStable && before(di, o.stable)) {
			return nil
		}
		if derr == nil {
			if err := os.Remove(dst); err != nil {
				return err
			}
		}
		if o.link != "" {
			if li, err := os.Lstat(o.link); err == nil && sameFile(fi, li) && before(fi, o.linkStable) {
				if err := os.Link(o.link, dst); err == nil {
					return nil
				}
			}
		}
		c.files = append(c.files, entry{src, dst, fi})
		return nil
	}
	if fi.IsDir() {
		c.dirs = append(c.dirs, entry{src, dst, fi})
		return nil
	}
	return c.attrs(dst, fi)
}

// under is o for the entry name of the directory o is for.
func (o syncOpts) under(name string) syncOpts {
	if o.link != "" {
		o.link = filepath.Join(o.link, name)
	}
	return o
}

// copyFile copies src's data to the new file dst: a clone where the
// filesystem shares blocks (btrfs, XFS), else the bytes.
func (c *syncer) copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) != nil {
		if _, err := out.ReadFrom(in); err != nil {
			out.Close()
			return fmt.Errorf("copy %s: %w", src, err)
		}
	}
	return out.Close()
}

// attrs gives dst src's mode, owner (when root) and times.
func (c *syncer) attrs(dst string, fi fs.FileInfo) error {
	st := fi.Sys().(*syscall.Stat_t)
	if c.root {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		if err := os.Chmod(dst, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(st.Atim.Nano()), unix.NsecToTimespec(st.Mtim.Nano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// copied reports whether a file of this type is part of a copy.
func copied(fi fs.FileInfo) bool {
	return fi.Mode().IsRegular() || fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0
}

func sameType(a, b fs.FileInfo) bool { return a.Mode().Type() == b.Mode().Type() }

// sameFile reports whether b looks like a's copy: type, size, mode,
// owner and mtime.
func sameFile(a, b fs.FileInfo) bool {
	sa, sb := a.Sys().(*syscall.Stat_t), b.Sys().(*syscall.Stat_t)
	return sameType(a, b) && a.Size() == b.Size() && a.Mode() == b.Mode() &&
		sa.Uid == sb.Uid && sa.Gid == sb.Gid && sa.Mtim == sb.Mtim
}

// before reports whether fi's ctime is before t.
func before(fi fs.FileInfo, t time.Time) bool {
	if t.IsZero() {
		return false
	}
	c := fi.Sys().(*syscall.Stat_t).Ctim
	return time.Unix(c.Sec, c.Nsec).Before(t)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// ownBytes adds up the sizes of the regular files under p that are
// linked nowhere else: what a new point adds to its store.
func ownBytes(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Sys().(*syscall.Stat_t).Nlink == 1 {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// treeSize adds up the sizes of the regular files under p, each inode
// once.
func treeSize(p string, seen map[uint64]bool) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if !seen[ino] {
			seen[ino] = true
			n += fi.Size()
		}
		return nil
	})
	return n
}
