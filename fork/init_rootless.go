package fork

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// enterRootless builds a rootless copy's view (rootless.go) and moves
// into it: the skeleton as the root, an overlay on each of its
// directories that has one, the read-only files, then /proc, /sys, /dev
// and /run as for root, where the user namespace lets it. The init is
// the user, with every capability in its own user namespace and none
// outside it; the session it starts is the user, with none.
func enterRootless(s *initSpec) error {
	skel := s.Layers[skeletonLayer].Upper
	if err := unix.Mount(skel, s.Root, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the copy's root: %w", err)
	}
	for _, l := range s.Layers[1:] {
		target := filepath.Join(s.Root, l.Mount)
		// userxattr: overlayfs keeps its marks in user.overlay.*, the
		// only xattrs a user namespace may write; it rules out
		// redirect_dir and metacopy, which a commit refuses anyway.
		data := "lowerdir=" + escapeOverlay(l.Mount) +
			",upperdir=" + escapeOverlay(l.Upper) +
			",workdir=" + escapeOverlay(l.Work) +
			",userxattr,redirect_dir=nofollow,metacopy=off,index=off,xino=off"
		flags := uintptr(unix.MS_NODEV)
		if l.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		if err := unix.Mount(mountSource, target, "overlay", flags, data); err != nil {
			if _, gone := os.Lstat(l.Mount); errors.Is(gone, os.ErrNotExist) {
				continue // removed from the machine since the copy was made
			}
			return fmt.Errorf("mount the overlay of %s in a user namespace: %w (run `undoctl doctor`)", l.Mount, err)
		}
	}
	for _, p := range s.Binds {
		if err := readOnlyFile(p, filepath.Join(s.Root, p)); err != nil {
			return err
		}
	}
	if err := mountProc(s.Root); err != nil {
		// A /proc with something mounted over part of it (a container's
		// masks) may not be mounted again in a user namespace: the
		// host's, whose pids the step then sees.
		if err := rbind("/proc", filepath.Join(s.Root, "proc")); err != nil {
			return err
		}
	}
	sys := filepath.Join(s.Root, "sys")
	if err := mountOn("sysfs", sys, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		if err := rbind("/sys", sys); err != nil {
			return err
		}
	}
	if err := mountDev(s.Root, rootlessPtsOpts); err != nil {
		return err
	}
	if err := mountOn("tmpfs", filepath.Join(s.Root, "run"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return fmt.Errorf("set the host name: %w", err)
	}
	if err := LoopbackUp(); err != nil {
		return err
	}
	if err := pivot(s.Root); err != nil {
		return err
	}
	return dropCaps()
}

// readOnlyFile bind-mounts the real file src on dst, read-only. The
// remount keeps the flags the user namespace may not clear (nosuid,
// nodev, noexec of the real mount).
func readOnlyFile(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(src, &sfs); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for st, ms := range map[int64]uintptr{unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC} {
		if sfs.Flags&st != 0 {
			flags |= ms
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}

// rbind binds the host's tree src on dst, as it is.
func rbind(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}
