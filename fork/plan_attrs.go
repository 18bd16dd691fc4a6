package fork

import (
	"bytes"
	"errors"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// overlayXattr reports whether an xattr belongs to overlayfs itself:
// never committed, never compared.
func overlayXattr(name string) bool {
	return strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.overlay.")
}

// readXattrs returns the xattrs of name (not following a symlink): the
// ones to keep, and overlayfs's own, keyed by the part after
// "trusted.overlay." or "user.overlay." (such as "opaque").
func readXattrs(name string) (keep, ovl map[string][]byte, err error) {
	names, err := listXattrs(name)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		v, err := getXattr(name, n)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if overlayXattr(n) {
			if ovl == nil {
				ovl = map[string][]byte{}
			}
			ovl[n[strings.Index(n, ".overlay.")+len(".overlay."):]] = v
			continue
		}
		if keep == nil {
			keep = map[string][]byte{}
		}
		keep[n] = v
	}
	return keep, ovl, nil
}

func listXattrs(name string) ([]string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Llistxattr(name, buf)
		switch {
		case errors.Is(err, unix.ERANGE):
			sz, err := unix.Llistxattr(name, nil)
			if err != nil {
				return nil, &os.PathError{Op: "llistxattr", Path: name, Err: err}
			}
			buf = make([]byte, sz+64)
			continue
		case errors.Is(err, unix.ENOTSUP):
			return nil, nil
		case err != nil:
			return nil, &os.PathError{Op: "llistxattr", Path: name, Err: err}
		}
		var out []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	}
}

func getXattr(name, attr string) ([]byte, error) {
	buf := make([]byte, 128)
	for {
		n, err := unix.Lgetxattr(name, attr, buf)
		switch {
		case errors.Is(err, unix.ERANGE):
			sz, err := unix.Lgetxattr(name, attr, nil)
			if err != nil {
				return nil, &os.PathError{Op: "lgetxattr " + attr, Path: name, Err: err}
			}
			buf = make([]byte, sz+64)
			continue
		case err != nil:
			return nil, &os.PathError{Op: "lgetxattr " + attr, Path: name, Err: err}
		}
		return buf[:n], nil
	}
}

func sameXattrs(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// setAttrs gives name the attributes a, in the order that keeps them:
// owner first (chown clears setuid, setgid and security.capability),
// then the mode, then the xattrs (overlayfs's own are removed, as are
// any a lacks), then the times when withTimes.
func setAttrs(name string, typ Type, a *Attrs, withTimes bool) error {
	if err := unix.Lchown(name, a.UID, a.GID); err != nil {
		return &os.PathError{Op: "lchown", Path: name, Err: err}
	}
	if typ != TypeSymlink {
		if err := unix.Fchmodat(unix.AT_FDCWD, name, a.Mode, 0); err != nil {
			return &os.PathError{Op: "chmod", Path: name, Err: err}
		}
	}
	if err := setXattrs(name, a.Xattrs); err != nil {
		return err
	}
	if withTimes {
		return setTimes(name, a.Atime, a.Mtime)
	}
	return nil
}

// setXattrs makes name's xattrs exactly want.
func setXattrs(name string, want map[string][]byte) error {
	names, err := listXattrs(name)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, n := range names {
		if _, ok := want[n]; ok {
			have[n] = true
			continue
		}
		if err := unix.Lremovexattr(name, n); err != nil && !errors.Is(err, unix.ENODATA) {
			return &os.PathError{Op: "lremovexattr " + n, Path: name, Err: err}
		}
	}
	for n, v := range want {
		if have[n] {
			cur, err := getXattr(name, n)
			if err == nil && bytes.Equal(cur, v) {
				continue
			}
		}
		if err := unix.Lsetxattr(name, n, v, 0); err != nil {
			return &os.PathError{Op: "lsetxattr " + n, Path: name, Err: err}
		}
	}
	return nil
}

func setTimes(name string, atime, mtime int64) error {
	ts := []unix.Timespec{unix.NsecToTimespec(atime), unix.NsecToTimespec(mtime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: name, Err: err}
	}
	return nil
}

// attrsAt reads the attributes of the real entry name.
func attrsAt(name string) (*Attrs, *unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		return nil, nil, &os.PathError{Op: "lstat", Path: name, Err: err}
	}
	x, _, err := readXattrs(name)
	if err != nil {
		return nil, nil, err
	}
	return attrsOf(&st, x), &st, nil
}
