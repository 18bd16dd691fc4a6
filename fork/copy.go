package fork

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/pathglob"
	"github.com/undosh/undosh/internal/where"
)

// DefaultCopiesDir is where copies live when [Options].StateDir is empty.
const DefaultCopiesDir = where.StateDir + "/fork/copies"

// HiddenName is the engine's directory at the top of each real
// filesystem (on-disk copies, commit journals). Every copy hides it. It
// holds a .gitignore of "*", so that a workspace at a mount's top
// (a project bind-mounted at /work, a home directory) does not show it
// in git status, and it is removed once it holds nothing else.
const HiddenName = ".undosh-fork"

// makeHidden makes dir inside mount's HiddenName directory, with that
// directory's .gitignore.
func makeHidden(mount, dir string) error {
	return makeHiddenIn(filepath.Join(mount, HiddenName), dir)
}

// makeHiddenIn makes dir inside top, an engine's directory (HiddenName,
// or a user's HiddenName-UID), with top's .gitignore.
func makeHiddenIn(top, dir string) error {
	for try := 0; ; try++ {
		err := os.MkdirAll(dir, 0o700)
		if err == nil {
			break
		}
		// tidyHidden, for another copy, removed top meanwhile.
		if !errors.Is(err, fs.ErrNotExist) || try == 3 {
			return err
		}
	}
	ignore := filepath.Join(top, ".gitignore")
	if _, err := os.Lstat(ignore); errors.Is(err, fs.ErrNotExist) {
		return atomicfile.Write(ignore, []byte("# undosh's fork engine: machine steps' copies and undo data\n*\n"), 0o600)
	}
	return nil
}

// tidyHidden removes mount's HiddenName directory when it holds nothing
// but empty copies/ and journal/ directories and its .gitignore. Each
// removal is an rmdir, which fails on a directory something is in.
func tidyHidden(mount string) {
	top := filepath.Join(mount, HiddenName)
	for _, d := range []string{"copies", "journal"} {
		if err := os.Remove(filepath.Join(top, d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
	ents, err := os.ReadDir(top)
	if err != nil || len(ents) != 1 || ents[0].Name() != ".gitignore" {
		return
	}
	os.Remove(filepath.Join(top, ".gitignore"))
	if os.Remove(top) != nil {
		// Another copy made something there meanwhile: it keeps the
		// directory, so put the .gitignore back.
		makeHidden(mount, top)
	}
}

// PolicyRCD is the file Create seeds in every copy: a policy-rc.d that
// exits 101, so that package scripts do not start services in the copy.
const PolicyRCD = "/usr/sbin/policy-rc.d"

// GuardTag starts the PEP 668 marker (EXTERNALLY-MANAGED) that undosh's
// pip guard puts in a system Python's standard library (undoctl install):
// Create hides every such marker from the copy, so that pip installs into
// system paths in a machine step. A marker without it (a distribution's
// own) stays.
const GuardTag = "# undosh: pip guard"

// PythonLibs returns where system Pythons keep their standard library, as
// globs: the directories that hold a PEP 668 marker.
func PythonLibs() []string {
	return []string{"/usr/lib/python3.*", "/usr/lib64/python3.*", "/usr/local/lib/python3.*"}
}

// MetaFile is the name of the file, in a copy's directory, that records
// the copy (the JSON encoding of [Copy]).
const MetaFile = "copy.json"

var (
	// ErrBusy is returned by Run when a session is already running in
	// the copy.
	ErrBusy = errors.New("a session is already running in this copy")
	// ErrDiscarded is returned by Run after Discard.
	ErrDiscarded = errors.New("the copy has been discarded")
)

// Options configure [Create]. The zero value is the default: a copy on a
// private tmpfs under [DefaultCopiesDir].
type Options struct {
	// StateDir is the directory the copies live in, one subdirectory
	// each. It is created root-only (0700) and hidden from every copy.
	// Default: DefaultCopiesDir.
	StateDir string
	// OnDisk puts the upper and work directories in the copy's directory
	// on the state directory's filesystem instead of on a tmpfs: for
	// steps too large for memory, and, when that filesystem is the
	// root's, so that commit can rename rather than copy.
	OnDisk bool
	// Size limits the tmpfs, in bytes (0: the kernel's default, half of
	// the memory). A copy that outgrows it gets ENOSPC. Ignored with
	// OnDisk.
	Size int64
	// Hostname is the copy's host name. Default: the host's.
	Hostname string
	// Hide lists more directories or files of the real root to hide from
	// the copy. StateDir, /var/lib/undosh and <mount>/.undosh-fork of
	// every overlay always are, unless they are shared.
	Hide []string
	// Share lists the paths (real ones, without symbolic links) that a
	// copy made for a view (enforce's capture mode) shares with the
	// machine: the view binds them, so they are never hidden. Such a copy also leaves the files bind-mounted on
	// the host to the view ([Copy].Skipped), instead of copying them in.
	Share []string
	// Logger receives debug records of what the engine does. Default:
	// discard.
	Logger *slog.Logger
}

// Copy is a copy of the machine: one [Overlay] per real filesystem, whose
// upper directories hold everything that sessions in the copy changed.
// Its exported fields are recorded in the copy's directory ([MetaFile])
// and are read back by [Open]. A Copy is safe for concurrent use, but
// runs one session at a time. Callers must call [Copy.Discard] when done
// with it (after a commit, too).
type Copy struct {
	// ID names the copy: "PID-START-RANDOM", the creating process's pid
	// and start time (in clock ticks since boot) and a random part.
	ID string `json:"id"`
	// Dir is the copy's directory, under the state directory.
	Dir string `json:"dir"`
	// T0 is when the copy was made, read from CLOCK_REALTIME_COARSE
	// before Create read anything of the real root (and after it made
	// its own directories, which the copy does not see). A file of the real root whose
	// ctime is at or after T0 may have changed under the copy: commit
	// treats it as a conflict.
	T0 time.Time `json:"t0"`
	// OnDisk is Options.OnDisk.
	OnDisk bool `json:"on_disk"`
	// Hostname is the copy's host name.
	Hostname string `json:"hostname"`
	// Overlays are the overlays, the root first, then parents before
	// children.
	Overlays []Overlay `json:"overlays"`
	// Skipped are the visible mounts of the host that no overlay covers,
	// outermost only, outside /proc, /sys, /dev and /run and the hidden
	// directories: a tmpfs on /tmp, and, in a copy with shared paths,
	// the files bind-mounted on the host. A view shows them as they are.
	Skipped []string `json:"skipped"`
	// Seeded are the paths (as the copy sees them, which is also their
	// real path) that Create put in the upper directories, and that a
	// commit must leave out: PolicyRCD, the whiteouts that hide the state
	// directories (Options.StateDir, /var/lib/undosh, <mount>/.undosh-fork
	// of every overlay, and Options.Hide) and the pip guard's markers
	// ([GuardTag]), and copies of files that are bind mounts on the host.
	Seeded []string `json:"seeded"`
	// Mirrored are the directories Create made in the upper directories
	// only to hold the seeded paths (and each overlay's upper directory
	// itself), with the mode, owner, extended attributes and times of the
	// real directory at T0. One whose metadata still matches its record
	// was not changed by the copy.
	Mirrored []Mirror `json:"mirrored"`
	// Rootless: the copy is made in a user namespace, for a user who is
	// not root (rootless.go). Overlays[0] is then the skeleton, the
	// directory the copy's root is, and each other overlay is of a
	// directory with no mount below it.
	Rootless bool `json:"rootless,omitempty"`
	// Binds are the real files a rootless copy shows read-only, on
	// placeholders in the skeleton: the files of other users in a
	// directory with a mount below it.
	Binds []string `json:"binds,omitempty"`
	// CopiedIn are the user's files a rootless copy copied into its
	// skeleton (Settle).
	CopiedIn []string `json:"copied_in,omitempty"`

	log *slog.Logger
	// owner is the lock the creator holds on ID.lock beside Dir for
	// the copy's life: Cleanup takes it to know the creator is gone,
	// which a pid cannot say across pid namespaces.
	owner *os.File

	mu        sync.Mutex
	discarded bool
	proc      *child        // the running session's init
	done      chan struct{} // closed when the running session ends
}

// Overlay is one overlay of a copy: a real filesystem (its mount point is
// the overlay's lower directory) and the upper directory that holds the
// copy's changes to it.
type Overlay struct {
	// Mount is the mount point on the real root ("/", "/home").
	Mount string `json:"mount"`
	// Upper and Work are the overlay's upper and work directories. With
	// Options.OnDisk, they are on the real filesystem itself where it
	// can hold them (in <Mount>/.undosh-fork/copies/<ID>, or in the
	// copy's directory for the state directory's filesystem), so that a
	// commit can rename or link rather than copy.
	Upper string `json:"upper"`
	Work  string `json:"work"`
	// Dev is the st_dev of the real filesystem at Mount.
	Dev uint64 `json:"dev"`
	// MountDev is "major:minor" from mountinfo, FSType and Source the
	// real mount's type and source.
	MountDev string `json:"mount_dev"`
	FSType   string `json:"fstype"`
	Source   string `json:"source"`
	// MountID is the real mount's id in mountinfo.
	MountID int `json:"mount_id"`
	// ReadOnly: the real mount is read-only, and so is the overlay.
	ReadOnly bool `json:"read_only"`
	// SameFS: Upper is on the real filesystem.
	SameFS bool `json:"same_fs"`
}

// Mirror records the metadata Create gave a directory of an upper layer.
type Mirror struct {
	Path  string      `json:"path"` // as the copy sees it
	Mode  fs.FileMode `json:"mode"`
	UID   int         `json:"uid"`
	GID   int         `json:"gid"`
	Mtime time.Time   `json:"mtime"`
}

// Create makes a copy of the machine. It does not enter it: [Copy.Run]
// does, once per session.
func Create(o Options) (*Copy, error) {
	start := time.Now()
	if o.StateDir == "" {
		o.StateDir = defaultCopiesDir()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	stateDir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("create copy: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create copy: %w", err)
	}
	if st, err := os.Stat(stateDir); err != nil {
		return nil, fmt.Errorf("create copy: %w", err)
	} else if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(stateDir, 0o700); err != nil {
			return nil, fmt.Errorf("create copy: %w", err)
		}
	}
	// Hide the real paths (a symlink in the state directory's path would
	// leave the real directory visible).
	if stateDir, err = filepath.EvalSymlinks(stateDir); err != nil {
		return nil, fmt.Errorf("create copy: %w", err)
	}
	var hidden []string
	for _, h := range append([]string{stateDir, where.StateDir}, o.Hide...) { // every copy hides undosh's state as root
		if h, err = filepath.Abs(h); err != nil {
			return nil, fmt.Errorf("create copy: %w", err)
		}
		r, err := filepath.EvalSymlinks(h)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r = h // hidden should it appear
		case err != nil:
			return nil, fmt.Errorf("create copy: hide %s: %w", h, err)
		}
		if !slices.ContainsFunc(o.Share, func(s string) bool { return pathglob.Within(r, s) }) {
			hidden = append(hidden, r)
		}
	}
	hostname := o.Hostname
	if hostname == "" {
		if hostname, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("create copy: %w", err)
		}
	}

	pid := os.Getpid()
	pidStart, err := processStart(pid)
	if err != nil {
		return nil, fmt.Errorf("create copy: %w", err)
	}
	// The random part only tells apart the copies of one process.
	id := fmt.Sprintf("%d-%d-%08x", pid, pidStart, rand.Uint32())
	c := &Copy{
		ID:       id,
		Dir:      filepath.Join(stateDir, id),
		OnDisk:   o.OnDisk,
		Hostname: hostname,
		log:      o.Logger,
	}
	if c.owner, err = holdOwner(c.Dir); err != nil {
		return nil, fmt.Errorf("create copy: %w", err)
	}
	if err := os.Mkdir(c.Dir, 0o700); err != nil {
		c.releaseOwner()
		return nil, fmt.Errorf("create copy: %w", err)
	}
	if err := c.build(o, hidden); err != nil {
		if derr := discardDir(c.Dir); derr != nil {
			err = errors.Join(err, derr)
		} else {
			c.releaseOwner()
		}
		return nil, fmt.Errorf("create copy: %w", err)
	}
	c.log.Debug("fork: created copy", "dir", c.Dir, "layers", len(c.Overlays), "on_disk", c.OnDisk, "took", time.Since(start))
	return c, nil
}

// build fills the copy's directory: the tmpfs, the overlays' upper and
// work directories, the seeded paths and the record.
func (c *Copy) build(o Options, hidden []string) error {
	if Rootless() {
		return c.buildRootless(o, hidden)
	}
	if !o.OnDisk {
		data := "mode=0700"
		if o.Size > 0 {
			data += ",size=" + strconv.FormatInt(o.Size, 10)
		}
		// nodev: nothing in an upper layer is ever opened as a device.
		if err := unix.Mount(mountSource, c.Dir, "tmpfs", unix.MS_NODEV, data); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", c.Dir, err)
		}
		// Private, so that nothing mounted there propagates to other
		// namespaces, whatever the propagation of the state directory.
		if err := unix.Mount("", c.Dir, "", unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make %s private: %w", c.Dir, err)
		}
	}
	if err := os.Mkdir(filepath.Join(c.Dir, "root"), 0o700); err != nil {
		return err
	}
	table, err := mountTable()
	if err != nil {
		return err
	}
	mounts, err := selectMounts(table, hidden)
	if err != nil {
		return err
	}
	c.Skipped = skippedMounts(table, mounts, hidden)
	var dirSX unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, c.Dir, 0, unix.STATX_MNT_ID, &dirSX); err != nil {
		return fmt.Errorf("stat %s: %w", c.Dir, err)
	}
	s := &seeder{c: c}
	var fileBinds []mountEntry
	for _, m := range mounts {
		var st unix.Stat_t
		if err := unix.Stat(m.Point, &st); errors.Is(err, unix.ENOENT) {
			continue // unmounted and removed since the table was read
		} else if err != nil {
			return fmt.Errorf("stat mount point %s: %w", m.Point, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			// A file bind-mounted on the host (a container's
			// /etc/hosts): the copy gets a copy of it, a view the file
			// itself.
			if len(o.Share) > 0 {
				c.Skipped = append(c.Skipped, m.Point)
			} else {
				fileBinds = append(fileBinds, m)
			}
			continue
		}
		n := len(c.Overlays)
		l := Overlay{
			Mount:    m.Point,
			Dev:      st.Dev,
			MountDev: m.Dev,
			FSType:   m.FSType,
			Source:   m.Source,
			MountID:  m.ID,
			ReadOnly: m.readOnly(),
		}
		base := filepath.Join(c.Dir, "layers", strconv.Itoa(n))
		switch {
		case !o.OnDisk || l.ReadOnly:
		case int(dirSX.Mnt_id) == m.ID:
			l.SameFS = true
		case upperFS[m.FSType]:
			base = filepath.Join(m.Point, HiddenName, "copies", c.ID)
			l.SameFS = true
		}
		l.Upper, l.Work = filepath.Join(base, "upper"), filepath.Join(base, "work")
		mk := os.MkdirAll
		if isHiddenCopyDir(base, c.ID) {
			mk = func(dir string, _ fs.FileMode) error { return makeHidden(m.Point, dir) }
		}
		if err := mk(base, 0o700); err != nil {
			return err
		}
		for _, d := range []string{l.Upper, l.Work} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
		}
		c.Overlays = append(c.Overlays, l)
	}
	// Nothing of the real root has been read yet, and what was made is
	// hidden from the copy: from here on, a change on the real root may
	// be one the copy does not see.
	c.T0 = coarseNow()
	// The overlay's root shows the upper directory's metadata.
	if err := s.mirrorRoots(-1); err != nil {
		return err
	}
	if err := s.seedFile(PolicyRCD, []byte("#!/bin/sh\n# Written by undosh: no services start in a copy.\nexit 101\n"), 0o755); err != nil {
		return err
	}
	for _, l := range c.Overlays {
		hidden = append(hidden, filepath.Join(l.Mount, HiddenName))
	}
	hidden = append(hidden, guardMarkers("/")...)
	for _, h := range hidden {
		if err := s.hide(h); err != nil {
			return err
		}
	}
	for _, m := range fileBinds {
		if err := s.copyFile(m.Point); err != nil {
			return err
		}
	}
	if err := s.finish(); err != nil {
		return err
	}
	return writeRecord(c)
}

// writeRecord writes the copy's record, MetaFile.
func writeRecord(c *Copy) error {
	return atomicfile.Write(filepath.Join(c.Dir, MetaFile), c.marshal(), 0o600)
}

// upperFS are the filesystem types known to hold an overlay's upper
// directory (whiteouts, trusted xattrs).
var upperFS = map[string]bool{"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "f2fs": true, "tmpfs": true}

// Open returns the copy recorded in dir (a copy's directory, as
// [Copy].Dir names it).
func Open(dir string) (*Copy, error) {
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, fmt.Errorf("open copy: %w", err)
	}
	c := &Copy{log: slog.New(slog.DiscardHandler)}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("open copy %s: %w", dir, err)
	}
	return c, nil
}

// OverlayOf returns the overlay that holds the real path p: the one with the
// longest mount point that p is at or under. It returns nil when p is not
// absolute.
func (c *Copy) OverlayOf(p string) *Overlay {
	if !filepath.IsAbs(p) {
		return nil
	}
	p = filepath.Clean(p)
	var best *Overlay
	for i := range c.Overlays {
		l := &c.Overlays[i]
		if pathglob.Within(p, l.Mount) && (best == nil || len(l.Mount) > len(best.Mount)) {
			best = l
		}
	}
	return best
}

// Discard kills the session running in the copy, if any, unmounts the
// copy and removes its directory and its upper directories. It is
// idempotent.
func (c *Copy) Discard() error {
	c.mu.Lock()
	c.discarded = true
	p, done := c.proc, c.done
	c.mu.Unlock()
	if p != nil {
		p.kill()
	}
	if done != nil {
		<-done // Run kills a session that starts after this
	}
	start := time.Now()
	var errs []error
	for _, l := range c.Overlays {
		if dir := filepath.Dir(l.Upper); isHiddenCopyDir(dir, c.ID) {
			errs = append(errs, removeHiddenCopyDir(dir))
			tidyHidden(l.Mount)
		}
	}
	errs = append(errs, discardDir(c.Dir))
	err := errors.Join(errs...)
	if err == nil {
		c.releaseOwner()
	}
	c.log.Debug("fork: discarded copy", "dir", c.Dir, "took", time.Since(start), "err", err)
	return err
}

// isHiddenCopyDir reports whether dir is <mount>/.undosh-fork/copies/<id>.
func isHiddenCopyDir(dir, id string) bool {
	return filepath.Base(dir) == id && filepath.Base(filepath.Dir(dir)) == "copies" &&
		filepath.Base(filepath.Dir(filepath.Dir(dir))) == HiddenName
}

// removeHiddenCopyDir removes an on-disk copy's directory on a real
// filesystem.
func removeHiddenCopyDir(dir string) error {
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("discard copy: %w", err)
	}
	return nil
}

// discardDir unmounts the tmpfs on dir, if one is mounted, and removes
// dir. A missing dir is not an error.
func discardDir(dir string) error {
	err := unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
	switch {
	case err == nil, errors.Is(err, unix.EINVAL): // EINVAL: not a mount point
	case errors.Is(err, unix.EPERM) && Rootless(): // a rootless copy mounts nothing here
	case errors.Is(err, unix.ENOENT):
		return nil
	default:
		return fmt.Errorf("discard copy: unmount %s: %w", dir, err)
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		if err == nil {
			err = fmt.Errorf("still a mount point")
		}
		return fmt.Errorf("discard copy %s: %w", dir, err)
	}
	// A tmpfs copy leaves an empty directory.
	if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("discard copy: %w", err)
	}
	return nil
}

// removeAll removes the tree at dir, making its directories writable
// first where it must: a rootless copy's directories may have no write
// bits (rootlessMode), and overlayfs leaves its work/work with none, which
// only root gets past.
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		if err != nil && d != nil && d.IsDir() {
			// Unreadable until the chmod above: walk it again.
			filepath.WalkDir(p, func(q string, e fs.DirEntry, _ error) error {
				if e != nil && e.IsDir() {
					os.Chmod(q, 0o700)
				}
				return nil
			})
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// isMountPoint reports whether something is mounted on dir (stacked
// mounts included: unmounting the top one leaves the next).
func isMountPoint(dir string) (bool, error) {
	var st, pst unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &pst); err != nil {
		return false, err
	}
	if st.Dev != pst.Dev {
		return true, nil
	}
	var sx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sx); err == nil && sx.Mask&unix.STATX_MNT_ID != 0 {
		var px unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, filepath.Dir(dir), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &px); err == nil {
			return sx.Mnt_id != px.Mnt_id, nil
		}
	}
	return false, nil
}

// Cleanup discards the copies whose creating process has died: those in
// stateDir ("" for DefaultCopiesDir) and the on-disk upper directories
// they left on real filesystems (<mount>/.undosh-fork/copies). It is the
// recovery to run when undosh starts. Copies of live processes are left
// alone, and so is anything that is not a copy.
func Cleanup(stateDir string) error {
	if stateDir == "" {
		stateDir = defaultCopiesDir()
	}
	var errs []error
	entries, err := os.ReadDir(stateDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("clean up copies: %w", err))
	}
	for _, e := range entries {
		if !e.IsDir() || !ownerGone(stateDir, e.Name()) {
			continue
		}
		dir := filepath.Join(stateDir, e.Name())
		if err := discardDir(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		_ = os.Remove(dir + ownerSuffix)
	}
	table, err := mountTable()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("clean up copies: %w", err))...)
	}
	mounts, err := selectMounts(table, []string{stateDir})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("clean up copies: %w", err))...)
	}
	for _, m := range mounts {
		copies := filepath.Join(m.Point, HiddenName, "copies")
		entries, err := os.ReadDir(copies)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !ownerGone(stateDir, e.Name()) {
				continue
			}
			if err := removeHiddenCopyDir(filepath.Join(copies, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ownerSuffix names, beside a copy's directory, the file its creator
// holds locked while the copy lives.
const ownerSuffix = ".lock"

// holdOwner creates and locks dir's owner file. The lock lasts as long
// as this process does (the descriptor is not inherited), in every pid
// namespace at once.
func holdOwner(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir+ownerSuffix, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return f, nil
}

// releaseOwner removes and unlocks the copy's owner file, once its
// directory is gone.
func (c *Copy) releaseOwner() {
	if c.owner != nil {
		os.Remove(c.owner.Name())
		c.owner.Close()
		c.owner = nil
	}
}

// ownerGone reports whether the process that made copy id (a directory
// of stateDir) has ended. Its owner file says, if it is there: a lock
// this process can take is one nobody holds. A copy made before owner
// files, or whose file is gone, is judged by its creator's pid and
// start time, which only mean something in the creator's pid namespace:
// a copy made by undosh in another one keeps its owner file.
func ownerGone(stateDir, id string) bool {
	pid, start, ok := parseID(id)
	if !ok {
		return false
	}
	f, err := os.OpenFile(filepath.Join(stateDir, id)+ownerSuffix, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) && !processAlive(pid, start)
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// parseID splits a copy's id into the creator's pid and start time.
func parseID(id string) (pid int, start uint64, ok bool) {
	f := strings.Split(id, "-")
	if len(f) != 3 || len(f[2]) != 8 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	_, err3 := strconv.ParseUint(f[2], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return 0, 0, false
	}
	return pid, start, true
}

// processStart returns the start time of process pid, in clock ticks
// after boot (field 22 of /proc/PID/stat): with the pid, it names the
// process across pid reuse.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); the start time is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func processAlive(pid int, start uint64) bool {
	s, err := processStart(pid)
	return err == nil && s == start
}

// coarseNow reads CLOCK_REALTIME_COARSE, the clock the kernel stamps
// ctimes with, so that a change made after it has a ctime at or after
// it.
// NextTick waits until the coarse clock that stamps file times has moved
// on: a copy made after it has a T0 later than the ctime of every change
// made before, so a commit does not take a change the caller made just
// before the copy (a rollback before a rerun) for one made meanwhile.
// It waits a clock tick at most (1 to 10 ms).
func NextTick() {
	t := coarseNow()
	for !coarseNow().After(t) {
		time.Sleep(time.Millisecond)
	}
}

func coarseNow() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		// The coarse clock never runs ahead of the fine one; back off
		// by a tick's worth to keep the guarantee.
		return time.Now().Add(-10 * time.Millisecond)
	}
	return time.Unix(ts.Unix())
}
