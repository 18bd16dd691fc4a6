package watch

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Magic numbers of network and user-space filesystems that golang.org/x/sys
// does not name.
const (
	gfs2Magic     = 0x01161970
	ocfs2Magic    = 0x7461636f
	lustreMagic   = 0x0bd00bd0
	orangefsMagic = 0x20030528
	gpfsMagic     = 0x47504653
)

// unreporting returns the name of the filesystem with statfs magic number
// magic when changes to it can be made where this kernel cannot see them
// (another machine, a user-space server, a host sharing a directory with
// a guest), so inotify does not report them; "" otherwise.
func unreporting(magic int64) string {
	switch uint32(magic) {
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC:
		return "smb"
	case unix.CIFS_SUPER_MAGIC:
		return "cifs"
	case unix.V9FS_MAGIC:
		return "9p"
	case unix.FUSE_SUPER_MAGIC:
		return "fuse" // virtiofs too
	case unix.AFS_SUPER_MAGIC, unix.AFS_FS_MAGIC:
		return "afs"
	case unix.CEPH_SUPER_MAGIC:
		return "ceph"
	case unix.CODA_SUPER_MAGIC:
		return "coda"
	case unix.NCP_SUPER_MAGIC:
		return "ncp"
	case gfs2Magic:
		return "gfs2"
	case ocfs2Magic:
		return "ocfs2"
	case lustreMagic:
		return "lustre"
	case orangefsMagic:
		return "orangefs"
	case gpfsMagic:
		return "gpfs"
	}
	return ""
}

// MaxUserWatches reads fs.inotify.max_user_watches: how many directories
// one user's watchers may watch, over every workspace; 0 when unknown.
func MaxUserWatches() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// mountTable is /proc/self/mountinfo held open: poll reports POLLPRI or
// POLLERR on it when the mount table of this namespace changes.
type mountTable struct {
	fd int
}

func openMountTable() (*mountTable, error) {
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open mountinfo: %w", err)
	}
	return &mountTable{fd: fd}, nil
}

// changed reports, without blocking, whether the mount table changed
// since it was last read.
func (m *mountTable) changed() bool {
	fds := []unix.PollFd{{Fd: int32(m.fd), Events: unix.POLLPRI}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		// An error polling means we cannot tell: say it changed.
		return err != nil || (n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0)
	}
}

// under reads the table again (which also rearms changed) and returns the
// mounts at or under root, each as "mount point device root-in-fs",
// sorted.
func (m *mountTable) under(root string) ([]string, error) {
	if _, err := unix.Seek(m.fd, 0, 0); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var all []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(m.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read mountinfo: %w", err)
		}
		if n == 0 {
			break
		}
		all = append(all, buf[:n]...)
	}
	return mountsUnder(all, root), nil
}

// mountsUnder parses mountinfo text and returns the mounts at or under
// root.
func mountsUnder(info []byte, root string) []string {
	var out []string
	for line := range bytes.SplitSeq(info, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == root || strings.HasPrefix(mp, strings.TrimSuffix(root, "/")+"/") {
			out = append(out, mp+" "+f[2]+" "+unescapeMount(f[3]))
		}
	}
	slices.Sort(out)
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (m *mountTable) close() error { return unix.Close(m.fd) }
