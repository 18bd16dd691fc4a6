package fork

// The rootless copy (docs/fork.md, "Without root"): for a user who is not
// root, the copy is made in a user namespace that maps the user to
// itself. There overlayfs refuses a lower directory with mounts below it
// ("failed to clone lowerpath": they are locked to the namespace that
// made them), so / cannot be one overlay. Instead the copy's root is a
// skeleton, a directory in the copy's upper layers that the init
// bind-mounts as the root:
//
//   - a directory with no mount below it gets an overlay of its own
//     (lowerdir = that directory, userxattr);
//   - a directory with a mount below it is mirrored in the skeleton and
//     its entries are taken one by one, the same way;
//   - a symbolic link is copied as it is; a file the user owns is copied
//     in (the skeleton is an upper layer too: Diff commits a change to
//     it); any other file is bind-mounted read-only from the real one;
//   - /proc, /sys, /dev and /run are the copy's own, as for root.
//
// Files of other users show as the overflow uid (nobody), and a setuid
// program runs without privilege: only the user is mapped. The commit
// writes back only what the user could have written outside the copy
// ([CheckWritable]), and journals it in a directory the user owns on the
// same filesystem ([UserJournalDir]).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/pathglob"
)

// Rootless reports whether copies made by this process are rootless: it
// does not run as root.
func Rootless() bool { return os.Geteuid() != 0 }

// RootlessCopiesDir is where a user who is not root keeps copies when
// [Options].StateDir is empty. The upper layers want a tmpfs (/dev/shm:
// they cost no disk, and hold user xattrs) or a disk that overlayfs takes
// as an upper, which an overlayfs (a container's root) is not. In order:
// /dev/shm with at least [shmRoom] free (a container's is often 64 MiB,
// which an npm install outgrows); the user's cache directory, unless it is
// on an overlayfs; /dev/shm whatever its size; the cache directory anyway.
// The directory in /dev/shm, which everyone may write, is used only if it
// is the user's own, private directory: another user who made it first
// could change a copy's upper layers before they are committed.
func RootlessCopiesDir() string {
	shm, room := userShm()
	cache := ""
	if d, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(d, "undosh", "fork", "copies")
	}
	switch {
	case shm != "" && room >= shmRoom:
		return shm
	case cache != "" && !onOverlayfs(cache):
		return cache
	case shm != "":
		return shm
	case cache != "":
		return cache
	}
	return filepath.Join(os.TempDir(), "undosh-fork-"+strconv.Itoa(os.Geteuid()), "copies")
}

// shmRoom is the free space on /dev/shm below which a disk is preferred
// for the upper layers.
const shmRoom = 1 << 30

// userShm returns the user's copies directory in /dev/shm, and the free
// space there, or "" when /dev/shm is not a tmpfs the user may write or
// the directory is not the user's own.
func userShm() (string, uint64) {
	var sfs unix.Statfs_t
	if unix.Statfs("/dev/shm", &sfs) != nil || sfs.Type != unix.TMPFS_MAGIC || unix.Access("/dev/shm", unix.W_OK|unix.X_OK) != nil {
		return "", 0
	}
	dir := filepath.Join("/dev/shm", "undosh-fork-"+strconv.Itoa(os.Geteuid()))
	if err := os.Mkdir(dir, 0o700); (err != nil && !errors.Is(err, fs.ErrExist)) || !ownDir(dir) {
		return "", 0
	}
	return filepath.Join(dir, "copies"), sfs.Bavail * uint64(sfs.Bsize)
}

// onOverlayfs reports whether p, or its nearest existing parent, is on an
// overlayfs, which overlayfs refuses as an upper layer.
func onOverlayfs(p string) bool {
	for d := p; ; d = filepath.Dir(d) {
		var sfs unix.Statfs_t
		if err := unix.Statfs(d, &sfs); err == nil {
			return sfs.Type == unix.OVERLAYFS_SUPER_MAGIC
		}
		if d == "/" {
			return false
		}
	}
}

// defaultCopiesDir is DefaultCopiesDir for root, RootlessCopiesDir for
// anyone else.
func defaultCopiesDir() string {
	if Rootless() {
		return RootlessCopiesDir()
	}
	return DefaultCopiesDir
}

// skeletonLayer is the index of the skeleton in a rootless copy's
// Overlays: the directory bind-mounted as the copy's root.
const skeletonLayer = 0

// buildRootless fills a rootless copy's directory (see the top of this
// file): the skeleton, one overlay per directory with no mount below it,
// the seeded paths and the record.
func (c *Copy) buildRootless(o Options, hidden []string) error {
	c.Rootless = true
	table, err := mountTable()
	if err != nil {
		return err
	}
	// Every visible mount point but the root: a directory with one of
	// these below it cannot be an overlay's lower directory.
	top := map[string]int{}
	for i, m := range table {
		top[m.Point] = i
	}
	var points []string
	for p := range top {
		if p != "/" {
			points = append(points, p)
		}
	}
	// Root's copies come and go below DefaultCopiesDir, each on a
	// tmpfs of its own: one mounted after this plan would sit below an
	// overlay's lower directory in the session's namespace, which the
	// kernel refuses (EINVAL). So the directories above it are
	// mirrored as if a mount were there, and it shows empty.
	if _, ok := top[DefaultCopiesDir]; !ok {
		points = append(points, DefaultCopiesDir)
	}
	sort.Strings(points)
	skel := filepath.Join(c.Dir, "layers", "0", "upper")
	for _, d := range []string{filepath.Join(c.Dir, "root"), skel} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	c.Overlays = append(c.Overlays, Overlay{Mount: "/", Upper: skel})
	s := &seeder{c: c}
	w := &skeleton{c: c, s: s, skel: skel, points: points, hidden: hidden, table: table, top: top, uid: os.Geteuid()}
	// T0 before anything of the real root is read.
	c.T0 = coarseNow()
	var rst unix.Stat_t
	if err := unix.Stat("/", &rst); err != nil {
		return err
	}
	if err := w.mountPoint("/", skel, rst); err != nil {
		return err
	}
	if err := w.dir("/"); err != nil {
		return err
	}
	if err := s.mirrorRoots(skeletonLayer); err != nil {
		return err
	}
	if err := w.sharedDirs(s); err != nil {
		return err
	}
	if err := s.seedFile(PolicyRCD, []byte("#!/bin/sh\n# Written by undosh: no services start in a copy.\nexit 101\n"), 0o755); err != nil {
		return err
	}
	hidden = append(hidden, guardMarkers("/")...)
	for _, h := range hidden {
		if err := s.hide(h); err != nil {
			return err
		}
	}
	if err := s.finish(); err != nil {
		return err
	}
	return writeRecord(c)
}

// Settle marks, in a rootless copy's skeleton, the files copied in that
// the sessions removed, with the whiteout overlayfs would have left: the
// skeleton is no overlay, so a removal there leaves no trace for Diff to
// commit. Call it after the last session and before Diff.
func (c *Copy) Settle() error {
	if !c.Rootless {
		return nil
	}
	skel := c.Overlays[skeletonLayer].Upper
	for _, p := range c.CopiedIn {
		up := filepath.Join(skel, p)
		if _, err := os.Lstat(up); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if _, err := os.Lstat(filepath.Dir(up)); err != nil {
			continue // its directory went too: Diff sees that
		}
		if err := unix.Mknod(up, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("mark %s removed: %w", p, err)
		}
	}
	return nil
}

// maxCopiedIn is the largest file of the user's that a rootless copy
// copies into its skeleton.
const maxCopiedIn = 4 << 20

// skeleton walks the real tree for buildRootless.
type skeleton struct {
	c      *Copy
	s      *seeder // mirrors the directories
	skel   string
	points []string // mount points, sorted
	hidden []string
	table  []mountEntry
	top    map[string]int
	uid    int
}

// mountBelow reports whether a mount point is strictly below dir.
func (w *skeleton) mountBelow(dir string) bool {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	i := sort.SearchStrings(w.points, prefix)
	return i < len(w.points) && strings.HasPrefix(w.points[i], prefix)
}

// dir mirrors the real directory p (which has a mount below it) in the
// skeleton and takes its entries one by one.
func (w *skeleton) dir(p string) error {
	ents, err := os.ReadDir(p)
	if err != nil {
		// A directory the user cannot list shows empty in the copy.
		w.c.log.Debug("fork: rootless: cannot list", "dir", p, "err", err)
		return nil
	}
	for _, e := range ents {
		if err := w.entry(filepath.Join(p, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// entry puts the real path p in the skeleton.
func (w *skeleton) entry(p string) error {
	up := filepath.Join(w.skel, p)
	if slices.Contains(w.hidden, p) {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return nil // gone meanwhile
	}
	if slices.Contains(pseudoTrees, p) {
		// The copy's own /proc, /sys, /dev and /run are mounted here.
		return w.mountPoint(p, up, st)
	}
	if p == DefaultCopiesDir && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return w.mountPoint(p, up, st) // root's copies: empty here
	}
	if i, ok := w.top[p]; ok && (pseudoFS[w.table[i].FSType] || w.table[i].Source == mountSource) {
		// A pseudo filesystem, or another copy's mount: the copy shows
		// an empty directory.
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return w.mountPoint(p, up, st)
		}
		return nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return nil
		}
		if err := os.Symlink(target, up); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		w.c.Seeded = append(w.c.Seeded, p)
		return nil
	case unix.S_IFDIR:
		if w.mountBelow(p) {
			if err := w.mountPoint(p, up, st); err != nil {
				return err
			}
			return w.dir(p)
		}
		if err := w.mountPoint(p, up, st); err != nil {
			return err
		}
		return w.overlay(p, st)
	case unix.S_IFREG:
		if int(st.Uid) == w.uid && st.Size <= maxCopiedIn {
			// The user's own file: copied in, so that the step can change
			// it and a commit take the change. A larger one (a data file at
			// the top of a project with a volume mounted in it) is shown
			// read-only instead: every copy would read it whole.
			copied, err := w.s.copyInto(p, up, st)
			if copied {
				w.c.CopiedIn = append(w.c.CopiedIn, p)
			}
			if copied || err != nil {
				return err
			}
		}
	}
	// Anyone else's file, or a device, fifo or socket: the real one,
	// read-only, on a placeholder.
	if err := writeNew(up, nil, 0o400); err != nil {
		return fmt.Errorf("copy %s: %w", p, err)
	}
	w.c.Binds = append(w.c.Binds, p)
	w.c.Seeded = append(w.c.Seeded, p)
	return nil
}

// sharedDirs makes, in the upper layers, the directories of the system's
// trees that the user may write but does not own (/var/tmp): overlayfs
// copies a directory up with its owner, which a user namespace that maps
// only the user cannot give it (EOVERFLOW), so a write there would fail in
// the copy and not for real. Made beforehand, they are the user's, with
// the real mode. Only the entries at the top of each tree the user cannot
// write are looked at: the user's own trees (/home, /tmp) need none.
func (w *skeleton) sharedDirs(s *seeder) error {
	for _, l := range w.c.Overlays[1:] {
		if unix.Access(l.Mount, unix.W_OK) == nil {
			continue
		}
		ents, err := os.ReadDir(l.Mount)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			p := filepath.Join(l.Mount, e.Name())
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil || int(st.Uid) == w.uid || unix.Access(p, unix.W_OK|unix.X_OK) != nil {
				continue
			}
			if _, err := s.parents(filepath.Join(p, "-")); err != nil && !errors.Is(err, errNotInLower) {
				return err
			}
		}
	}
	return nil
}

// mountPoint makes the skeleton's directory for the real directory p,
// mirrored as a seeded directory is (seeder.mirror): the real one's
// xattrs and mode, less the write bits where the user could not write it.
func (w *skeleton) mountPoint(p, up string, st unix.Stat_t) error {
	if p != "/" {
		if err := os.Mkdir(up, 0o700); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
	}
	return w.s.mirror(up, p, st)
}

// overlay adds the overlay of the real directory p, which has no mount
// below it.
func (w *skeleton) overlay(p string, st unix.Stat_t) error {
	n := len(w.c.Overlays)
	base := filepath.Join(w.c.Dir, "layers", strconv.Itoa(n))
	l := Overlay{Mount: p, Upper: filepath.Join(base, "upper"), Work: filepath.Join(base, "work"), Dev: st.Dev}
	if i, ok := w.top[p]; ok {
		m := w.table[i]
		l.MountDev, l.FSType, l.Source, l.MountID, l.ReadOnly = m.Dev, m.FSType, m.Source, m.ID, m.readOnly()
	} else if m, ok := w.mountOf(p); ok {
		l.MountDev, l.FSType, l.Source, l.MountID, l.ReadOnly = m.Dev, m.FSType, m.Source, m.ID, m.readOnly()
	}
	for _, d := range []string{base, l.Upper, l.Work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	w.c.Overlays = append(w.c.Overlays, l)
	return nil
}

// mountOf returns the visible mount that holds p.
func (w *skeleton) mountOf(p string) (mountEntry, bool) {
	best := -1
	for pt, i := range w.top {
		if pathglob.Within(p, pt) && (best < 0 || len(pt) > len(w.table[best].Point)) {
			best = i
		}
	}
	if best < 0 {
		return mountEntry{}, false
	}
	return w.table[best], true
}

// rootlessMode is the mode a rootless copy gives its own directory for
// the real directory p: the real mode, less the write bits when the user
// cannot write p (the directory is the user's in the copy, so that its
// mode is all that keeps the step from writing where it could not).
func rootlessMode(p string, st unix.Stat_t) uint32 {
	mode := st.Mode & 0o7777
	if unix.Access(p, unix.W_OK) != nil {
		mode &^= 0o222
	}
	return mode
}

// copyInto copies the user's own real file p (lstat st) to up, with its
// mode and times: an upper file that Diff finds identical to the real one
// until the step changes it.
// It reports false, copying nothing, when the user cannot read p.
func (s *seeder) copyInto(p, up string, st unix.Stat_t) (bool, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return false, nil
	}
	if err := writeNew(up, data, fileMode(st.Mode).Perm()); err != nil {
		return false, fmt.Errorf("copy %s: %w", p, err)
	}
	if err := unix.Chmod(up, st.Mode&0o7777); err != nil {
		return false, fmt.Errorf("copy %s: %w", p, err)
	}
	if err := copyXattrs(p, up); err != nil {
		return false, fmt.Errorf("copy %s: %w", p, err)
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, up, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, fmt.Errorf("copy %s: %w", p, err)
	}
	return true, nil
}

// CheckWritable lists what plan changes that the user running this
// process could not have changed outside the copy: an entry added to or
// removed from a directory it cannot write (or a sticky one, of an entry
// it does not own), the attributes of an entry it does not own, an owner
// other than itself. Root may change anything: the list is then empty.
// A rootless commit is refused when it is not: the step would behave
// differently for real.
func CheckWritable(plan Plan) []Problem {
	uid := os.Geteuid()
	if uid == 0 {
		return nil
	}
	made := map[string]bool{}
	var out []Problem
	name := func(rel string) string { return filepath.Join(plan.Target, rel) }
	for _, op := range plan.Ops {
		dst := name(op.Path)
		var st unix.Stat_t
		exists := unix.Lstat(dst, &st) == nil
		if op.Attrs != nil && (op.Attrs.UID != uid || !inGroup(op.Attrs.GID)) {
			out = append(out, Problem{dst, fmt.Sprintf("would be owned by %d:%d, not by you", op.Attrs.UID, op.Attrs.GID)})
			continue
		}
		if op.Kind == OpMeta {
			if exists && int(st.Uid) != uid {
				out = append(out, Problem{dst, "not yours: you cannot change its mode or owner"})
			}
			continue
		}
		parent := filepath.Dir(op.Path)
		if op.Kind == OpMkdir {
			made[op.Path] = true
		}
		if made[parent] || op.Path == "." {
			continue
		}
		pdir := name(parent)
		if err := unix.Access(pdir, unix.W_OK|unix.X_OK); err != nil {
			out = append(out, Problem{dst, "in " + pdir + ", which you cannot write"})
			continue
		}
		var pst unix.Stat_t
		if exists && op.Kind != OpAdd && unix.Stat(pdir, &pst) == nil && pst.Mode&unix.S_ISVTX != 0 &&
			int(st.Uid) != uid && int(pst.Uid) != uid {
			out = append(out, Problem{dst, "not yours, in the sticky directory " + pdir})
		}
	}
	return out
}

// inGroup reports whether gid is this process's group or one of its
// supplementary groups: a file the user can give.
func inGroup(gid int) bool {
	if gid == os.Getegid() {
		return true
	}
	groups, _ := os.Getgroups()
	return slices.Contains(groups, gid)
}

// userHiddenName is the name of the directory in which a user who is not
// root journals commits, where its state directory cannot hold them: the
// HiddenName of that user. A copy's diff never commits one.
func userHiddenName() string { return HiddenName + "-" + strconv.Itoa(os.Geteuid()) }

// ownDir reports whether dir is free for this user's own directory: it
// does not exist, or it is a private directory of the user's (0700 at
// most, as the engine makes them). A journal keeps the originals an undo
// puts back, and a copy's upper layers are committed as they are, so
// neither may be in a directory another user made first (in /tmp or
// /dev/shm, which everyone may write).
func ownDir(dir string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return errors.Is(err, unix.ENOENT)
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Geteuid() && st.Mode&0o077 == 0
}

// UserJournalDir returns where a user who is not root journals a commit
// onto target: the first of candidates (directories the user owns, such
// as its state directory) on target's filesystem, else
// <target>/.undosh-fork-UID/journal where the user can write target,
// else next to the first directory the plan writes in. Root uses
// [JournalDir].
func UserJournalDir(plan Plan, candidates ...string) (string, error) {
	if !Rootless() {
		return JournalDir(plan.Target), nil
	}
	var tst unix.Stat_t
	if err := unix.Stat(plan.Target, &tst); err != nil {
		return "", fmt.Errorf("journal for %s: %w", plan.Target, err)
	}
	onTarget := func(dir string) bool {
		// The nearest existing directory decides: the journal is made
		// below it.
		for d := dir; ; d = filepath.Dir(d) {
			var st unix.Stat_t
			if err := unix.Stat(d, &st); err == nil {
				return st.Dev == tst.Dev && sameMount(d, plan.Target) == nil && unix.Access(d, unix.W_OK|unix.X_OK) == nil
			} else if !errors.Is(err, fs.ErrNotExist) || d == "/" {
				return false
			}
		}
	}
	for _, c := range candidates {
		if c != "" && onTarget(c) {
			return c, nil
		}
	}
	own := userHiddenName()
	if unix.Access(plan.Target, unix.W_OK|unix.X_OK) == nil && ownDir(filepath.Join(plan.Target, own)) {
		return filepath.Join(plan.Target, own, "journal"), nil
	}
	for _, op := range plan.Ops {
		if d := filepath.Join(plan.Target, filepath.Dir(op.Path)); onTarget(d) && ownDir(filepath.Join(d, own)) {
			return filepath.Join(d, own, "journal"), nil
		}
	}
	return "", fmt.Errorf("no directory you can write on the filesystem of %s to journal the commit in", plan.Target)
}

// probeRetry is how long probeTrial trusts a failed trial.
const probeRetry = 10 * time.Minute

// probeTrial makes a rootless copy, runs true in it and discards it, once
// per boot, kernel and user (a failure again after probeRetry): what the
// sysctls do not tell (a container's seccomp filter, an overlayfs that
// refuses a user namespace, a /dev/shm that refuses user xattrs). The
// answer is kept next to the copies.
func probeTrial() error {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	key := strings.TrimSpace(string(boot)) + " " + kernelRelease()
	dir := filepath.Dir(RootlessCopiesDir())
	file := filepath.Join(dir, "probe")
	if b, err := os.ReadFile(file); err == nil {
		if line, rest, _ := strings.Cut(string(b), "\n"); line == key {
			if rest == "" {
				return nil
			}
			// A failure is tried again after a while: it may have been
			// passing (a full /dev/shm).
			if st, err := os.Stat(file); err == nil && time.Since(st.ModTime()) < probeRetry {
				return &MissingError{Missing: []Missing{{"a rootless copy that runs", rest}}}
			}
		}
	}
	result := ""
	if err := tryRootless(); err != nil {
		result = err.Error() + "; user namespaces or overlayfs refuse here (a container's seccomp filter or a sysctl): run undosh as root, or configure a sandbox host"
	}
	if err := os.MkdirAll(dir, 0o700); err == nil {
		os.WriteFile(file, []byte(key+"\n"+result), 0o600)
	}
	if result != "" {
		return &MissingError{Missing: []Missing{{"a rootless copy that runs", result}}}
	}
	return nil
}

// tryRootless makes a rootless copy and runs true in it.
func tryRootless() error {
	c, err := Create(Options{})
	if err != nil {
		return err
	}
	defer c.Discard()
	res, err := c.Run(context.Background(), RunOptions{Argv: []string{"/bin/sh", "-c", "true"}, Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("true in a rootless copy exited %d", res.ExitCode)
	}
	return nil
}
