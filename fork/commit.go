package fork

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
)

// CommitOptions are the settings of [Commit]. The zero value is right for
// a copy of the machine.
type CommitOptions struct {
	// JournalDir is where the commit is journaled; it must be on the
	// target's mount. Default [JournalDir](plan.Target).
	JournalDir string
	// Logger gets the phases and their times. Default: discard.
	Logger *slog.Logger
	// Progress, when set, is called once with applied 0 when the journal
	// is durable and the real tree is about to change, then after each
	// operation is applied and logged, with applied 1 to total.
	Progress func(applied, total int)
}

// ConflictError is returned by [Commit] and [Undo] when real paths
// changed behind their back: since the copy was made, or since the
// commit. Nothing was changed.
type ConflictError struct {
	// Undo says that an undo, not a commit, was refused.
	Undo     bool
	Problems []Problem
}

func (e *ConflictError) Error() string {
	if e.Undo {
		return "undo refused, changed since the commit: " + listProblems(e.Problems)
	}
	return "commit refused, changed on the real root since the copy was made: " + listProblems(e.Problems)
}

// ErrLocked is returned (wrapped, with the lock file and the process that
// holds it) when a package manager holds the dpkg or apt locks.
var ErrLocked = errors.New("locked by a package manager")

// Commit applies plan to the real tree, journaled so that [Undo] can
// reverse it and [Recover] can reverse it after a crash. It returns the
// commit's [Record]; a plan with no operations commits nothing and
// writes no journal.
//
// In order: it takes the journal's lock (one commit, undo or recovery at
// a time) and first reverses any commit a crash cut short; takes the dpkg
// and apt locks when the plan touches /var/lib/dpkg; refuses with a
// *[ConflictError] when a path it would replace, remove or change was
// changed on the real tree after the plan's T0, is open for writing, or
// is a new path that now exists; stages every new entry in the journal
// (moved from an upper on the same mount, otherwise copied, holes kept),
// with its attributes; writes the journal; then applies the operations
// in plan order, checking each path again just before; syncs; and writes
// the committed mark. If an operation fails, the operations already
// applied are reversed before Commit returns.
//
// The upper must not change while Commit runs (unmount the copy or stop
// its processes first). An upper on the target's own mount is consumed:
// its new files are moved into place (if the commit fails before it
// applies anything, they are moved back; after, they are gone with the
// reversed commit).
func Commit(plan Plan, o CommitOptions) (*Record, error) {
	if len(plan.Ops) == 0 {
		now := time.Now()
		return &Record{Root: plan.Root, Target: plan.Target, Started: now, Time: now, Committed: true}, nil
	}
	if err := validPlan(plan); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	c := &committer{plan: plan, o: o, log: o.Logger, jd: o.JournalDir}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.jd == "" {
		c.jd = JournalDir(plan.Target)
	}
	unlock, err := openJournalDir(c.jd)
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	defer unlock()
	did, err := recoverLocked(c.jd)
	for _, d := range did {
		c.log.Info("recovered before commit", "what", d)
	}
	if err != nil {
		return nil, fmt.Errorf("commit: a commit cut short could not be reversed: %w", err)
	}
	if err := sameMount(c.jd, plan.Target); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	// Ids, from this time, sort in the order commits hold the lock.
	c.started = time.Now()
	return c.run()
}

type committer struct {
	plan    Plan
	o       CommitOptions
	log     *slog.Logger
	jd      string
	started time.Time
	j       *wal
	dir     string   // <jd>/<id>
	logf    *os.File // the applied log
	moved   []int    // operations whose file was moved from the upper
}

func (c *committer) stagePath(i int) string { return filepath.Join(c.dir, "stage", strconv.Itoa(i)) }
func (c *committer) origPath(i int) string  { return filepath.Join(c.dir, "orig", strconv.Itoa(i)) }

func (c *committer) run() (*Record, error) {
	p := c.plan
	var tst unix.Stat_t
	if err := unix.Stat(p.Target, &tst); err != nil {
		return nil, fmt.Errorf("commit: %w", &os.PathError{Op: "stat", Path: p.Target, Err: err})
	}
	c.j = &wal{
		Version: journalVersion, Root: p.Root, Target: p.Target, T0: p.T0,
		Started: c.started, Dev: tst.Dev, Locks: touchesDpkg(p),
	}
	for _, op := range p.Ops {
		c.j.Ops = append(c.j.Ops, jop{Op: op})
	}
	if c.j.Locks {
		release, err := takePkgLocks(p.Root)
		if err != nil {
			return nil, fmt.Errorf("commit: %w", err)
		}
		defer release()
	}
	t := time.Now()
	problems, err := c.check()
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	if len(problems) > 0 {
		return nil, &ConflictError{Problems: problems}
	}
	c.log.Debug("checked", "ms", msSince(t))

	id, dir, err := newCommitDir(c.jd, c.started)
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	c.j.ID, c.dir = id, dir
	applying := false
	defer func() {
		if !applying {
			c.unstage()
			os.RemoveAll(dir)
		}
	}()

	t = time.Now()
	if err := c.stage(); err != nil {
		return nil, fmt.Errorf("commit: stage: %w", err)
	}
	c.log.Debug("staged", "ms", msSince(t))
	t = time.Now()
	if err := c.dirTimes(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	if err := c.writeJournal(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	c.log.Debug("journal written", "ms", msSince(t))
	c.logf, err = os.OpenFile(filepath.Join(dir, "applied"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	defer c.logf.Close()

	// From here on the journal must stay: it is what reverses the apply.
	applying = true
	if c.o.Progress != nil {
		c.o.Progress(0, len(c.j.Ops))
	}
	t = time.Now()
	touched := map[uint64]bool{}
	for i := range c.j.Ops {
		if err := c.apply(i, touched); err != nil {
			return nil, c.rollback(err)
		}
		if c.o.Progress != nil {
			c.o.Progress(i+1, len(c.j.Ops))
		}
	}
	c.newDirTimes()
	c.log.Debug("applied", "ops", len(c.j.Ops), "ms", msSince(t))
	t = time.Now()
	if err := syncFS(p.Target); err != nil {
		return nil, c.rollback(err)
	}
	when := time.Now()
	if err := writeMark(dir, "committed", mark{Time: when}); err != nil {
		return nil, c.rollback(err)
	}
	c.log.Debug("committed", "id", id, "ms", msSince(t))
	// Any change made after Commit returns gets a ctime later than the
	// commit's time, which is how Undo sees it: the kernel stamps ctimes
	// from the coarse clock, up to a tick behind.
	for !coarseClock().After(when) {
		time.Sleep(time.Millisecond)
	}
	os.RemoveAll(filepath.Join(dir, "stage"))
	e := &commitEntry{id: id, dir: dir, j: c.j, committed: &mark{Time: when}}
	r := e.record()
	return &r, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// validPlan checks what Diff guarantees, for a plan that came from
// elsewhere (JSON): a T0, clean relative paths, known kinds and types,
// and attributes for whatever is put in place.
func validPlan(p Plan) error {
	if p.T0.IsZero() {
		return errors.New("the plan has no T0")
	}
	if !filepath.IsAbs(p.Target) || !filepath.IsAbs(p.Root) {
		return errors.New("the plan's root and target must be absolute")
	}
	for _, op := range p.Ops {
		if op.Path == "" || path.Clean(op.Path) != op.Path || path.IsAbs(op.Path) ||
			op.Path == ".." || strings.HasPrefix(op.Path, "../") {
			return fmt.Errorf("bad path %q in the plan", op.Path)
		}
		if op.Path == "." && op.Kind != OpMeta {
			return fmt.Errorf("the target itself cannot be the object of %s", op.Kind)
		}
		switch op.Kind {
		case OpRemove:
			continue
		case OpAdd, OpReplace, OpMkdir, OpMeta:
		default:
			return fmt.Errorf("%s: unknown operation %q", op.Path, op.Kind)
		}
		if op.Attrs == nil {
			return fmt.Errorf("%s: %s without attributes", op.Path, op.Kind)
		}
		if (op.Kind == OpMkdir || op.Kind == OpMeta) != (op.Type == TypeDir) ||
			!slices.Contains([]Type{TypeFile, TypeDir, TypeSymlink, TypeFifo}, op.Type) {
			return fmt.Errorf("%s: %s of a %q", op.Path, op.Kind, op.Type)
		}
	}
	return nil
}

// check is the conflict check before anything is staged. It records
// what the journal needs of the real entries (inodes, old attributes).
func (c *committer) check() ([]Problem, error) {
	var problems []Problem
	t0 := c.j.T0.UnixNano()
	removed := map[string]bool{}
	made := map[string]bool{}
	writers := map[[2]uint64]string{}
	dirs := newRealDirs(c.j.Target)
	for i := range c.j.Ops {
		op := &c.j.Ops[i]
		dst := c.j.real(op.Path)
		name := c.j.name(op.Path)
		if parent := path.Dir(op.Path); op.Path != "." && !made[parent] && (removed[parent] || !dirs.is(parent)) {
			problems = append(problems, Problem{c.j.name(parent), "no longer a directory"})
			continue
		}
		var st unix.Stat_t
		err := unix.Lstat(dst, &st)
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
			return nil, &os.PathError{Op: "lstat", Path: dst, Err: err}
		}
		exists := err == nil
		switch op.Kind {
		case OpRemove, OpReplace, OpMeta:
			if !exists {
				problems = append(problems, Problem{name, "removed"})
				continue
			}
			if st.Ctim.Nano() >= t0 {
				problems = append(problems, Problem{name, "changed"})
				continue
			}
			if st.Dev != c.j.Dev {
				problems = append(problems, Problem{name, "a mount point"})
				continue
			}
			op.OldIno = st.Ino
			if st.Mode&unix.S_IFMT == unix.S_IFREG {
				writers[[2]uint64{st.Dev, st.Ino}] = name
			}
			switch op.Kind {
			case OpMeta:
				a, _, err := attrsAt(dst)
				if err != nil {
					return nil, err
				}
				op.Old = a
			case OpRemove:
				removed[op.Path] = true
				if st.Mode&unix.S_IFMT == unix.S_IFDIR {
					ps, err := c.checkTree(dst, name, t0, writers)
					if err != nil {
						return nil, err
					}
					problems = append(problems, ps...)
				}
			}
		case OpAdd, OpMkdir:
			if op.Kind == OpMkdir {
				made[op.Path] = true
			}
			parent := path.Dir(op.Path)
			if made[parent] {
				continue // in a new directory: nothing can be there
			}
			if exists && !removed[op.Path] {
				problems = append(problems, Problem{name, "created on the real root"})
			}
		}
	}
	if len(writers) > 0 {
		ps, err := openWriters(writers)
		if err != nil {
			return nil, err
		}
		problems = append(problems, ps...)
	}
	return problems, nil
}

// realDirs tells whether every directory on the way to a path under root
// is a real directory: a symlink put there since would lead a commit or
// an undo elsewhere.
type realDirs struct {
	root string
	ok   map[string]bool
}

func newRealDirs(root string) *realDirs {
	return &realDirs{root: root, ok: map[string]bool{".": true}}
}

// is reports whether rel (relative to the root) and every directory
// above it are real directories.
func (r *realDirs) is(rel string) bool {
	ok, seen := r.ok[rel]
	if !seen {
		var st unix.Stat_t
		ok = r.is(path.Dir(rel)) && unix.Lstat(filepath.Join(r.root, rel), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
		r.ok[rel] = ok
	}
	return ok
}

// checkTree checks everything under a directory the commit removes.
func (c *committer) checkTree(dir, name string, t0 int64, writers map[[2]uint64]string) ([]Problem, error) {
	var problems []Problem
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		rel, _ := filepath.Rel(dir, p)
		n := path.Join(name, filepath.ToSlash(rel))
		switch {
		case st.Dev != c.j.Dev:
			problems = append(problems, Problem{n, "a mount point"})
			return filepath.SkipDir
		case st.Ctim.Nano() >= t0:
			problems = append(problems, Problem{n, "changed"})
		case st.Mode&unix.S_IFMT == unix.S_IFREG:
			writers[[2]uint64{st.Dev, st.Ino}] = n
		}
		return nil
	})
	return problems, err
}

// stage puts every new entry in stage/N with its attributes.
func (c *committer) stage() error {
	move := true // the upper may be on this mount
	for i := range c.j.Ops {
		op := &c.j.Ops[i]
		if op.Kind == OpRemove || op.Kind == OpMeta {
			continue
		}
		s := c.stagePath(i)
		switch op.Type {
		case TypeDir:
			if err := os.Mkdir(s, 0o700); err != nil {
				return err
			}
			if err := setAttrs(s, TypeDir, op.Attrs, true); err != nil {
				return err
			}
		case TypeSymlink:
			if err := os.Symlink(op.Link, s); err != nil {
				return err
			}
			if err := setAttrs(s, TypeSymlink, op.Attrs, true); err != nil {
				return err
			}
		case TypeFifo:
			if err := unix.Mknod(s, unix.S_IFIFO|0o600, 0); err != nil {
				return &os.PathError{Op: "mknod", Path: s, Err: err}
			}
			if err := setAttrs(s, TypeFifo, op.Attrs, true); err != nil {
				return err
			}
		case TypeFile:
			if err := c.stageFile(i, s, &move); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: cannot stage a %s", op.Path, op.Type)
		}
		var st unix.Stat_t
		if err := unix.Lstat(s, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: s, Err: err}
		}
		op.Ino = st.Ino
	}
	return nil
}

// stageFile stages a new file: moved from an upper on this mount (a
// link would leave the inode shared with the upper, and discarding the
// copy would then change its ctime, which Undo reads as a later change),
// else linked to the file staged for LinkOf, else copied.
func (c *committer) stageFile(i int, s string, move *bool) error {
	op := &c.j.Ops[i]
	if *move {
		err := unix.Rename(op.Src, s)
		if err == nil {
			c.moved = append(c.moved, i)
			return setXattrs(s, op.Attrs.Xattrs) // drops overlayfs's own
		}
		if !errors.Is(err, unix.EXDEV) {
			return &os.PathError{Op: "rename", Path: op.Src, Err: err}
		}
		*move = false
	}
	if op.LinkOf != "" {
		for k := range i {
			if c.j.Ops[k].Path == op.LinkOf && c.j.Ops[k].Ino != 0 {
				return os.Link(c.stagePath(k), s)
			}
		}
	}
	if err := copyFile(op.Src, s); err != nil {
		return err
	}
	return setAttrs(s, TypeFile, op.Attrs, true)
}

// unstage puts the files moved from the upper back, when the commit
// stops before it applies anything. (Their overlayfs xattrs are gone:
// the copy is only good for discarding, or for another commit.)
func (c *committer) unstage() {
	for _, i := range c.moved {
		if err := unix.Rename(c.stagePath(i), c.j.Ops[i].Src); err != nil {
			c.log.Warn("put a staged file back in the upper", "err", err)
		}
	}
}

// copyFile copies src's data to a new file dst, keeping holes.
func copyFile(src, dst string) error {
	in, err := openNoatime(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	fi, err := in.Stat()
	if err != nil {
		out.Close()
		return err
	}
	size := fi.Size()
	if err := copyData(out, in, size); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

func copyData(out, in *os.File, size int64) error {
	for off := int64(0); off < size; {
		data, err := in.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		hole := size
		if errors.Is(err, unix.EINVAL) { // no SEEK_DATA here: copy it all
			data = off
		} else if err != nil {
			return err
		} else if hole, err = in.Seek(data, unix.SEEK_HOLE); err != nil {
			return err
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}

// dirTimes records the times of every real directory the commit changes.
func (c *committer) dirTimes() error {
	seen := map[string]bool{}
	made := map[string]bool{}
	add := func(rel string, removed bool) error {
		if seen[rel] || made[rel] {
			return nil
		}
		seen[rel] = true
		var st unix.Stat_t
		if err := unix.Lstat(c.j.real(rel), &st); err != nil {
			return &os.PathError{Op: "lstat", Path: c.j.real(rel), Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil
		}
		c.j.Dirs = append(c.j.Dirs, dirTimes{Path: rel, Ino: st.Ino, Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(), Removed: removed})
		return nil
	}
	for _, op := range c.j.Ops {
		if op.Path != "." {
			if err := add(path.Dir(op.Path), false); err != nil {
				return err
			}
		}
		switch op.Kind {
		case OpMeta:
			if err := add(op.Path, false); err != nil {
				return err
			}
		case OpRemove:
			if err := add(op.Path, true); err != nil {
				return err
			}
		case OpMkdir:
			made[op.Path] = true
		}
	}
	return nil
}

// writeJournal makes journal.json durable, together with everything
// staged: temp file, syncfs, rename, fsync of the directory.
func (c *committer) writeJournal() error {
	data, err := json.Marshal(c.j)
	if err != nil {
		return err
	}
	// What the record names is on the disk before the record is.
	if err := syncFS(c.dir); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(c.dir, "journal.json"), data, 0o600)
}

// apply applies operation i, after checking its path once more.
func (c *committer) apply(i int, touched map[uint64]bool) error {
	op := &c.j.Ops[i]
	dst := c.j.real(op.Path)
	name := c.j.name(op.Path)
	switch op.Kind {
	case OpRemove, OpReplace, OpMeta:
		var st unix.Stat_t
		if err := unix.Lstat(dst, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return &ConflictError{Problems: []Problem{{name, "removed"}}}
			}
			return &os.PathError{Op: "lstat", Path: dst, Err: err}
		}
		if st.Ino != op.OldIno || (st.Ctim.Nano() >= c.j.T0.UnixNano() && !touched[st.Ino]) {
			return &ConflictError{Problems: []Problem{{name, "changed"}}}
		}
		touched[st.Ino] = true
	}
	switch op.Kind {
	case OpRemove:
		if err := unix.Rename(dst, c.origPath(i)); err != nil {
			return &os.PathError{Op: "rename", Path: dst, Err: err}
		}
	case OpReplace:
		if err := unix.Link(dst, c.origPath(i)); err != nil {
			return &os.PathError{Op: "link", Path: dst, Err: err}
		}
		if err := unix.Rename(c.stagePath(i), dst); err != nil {
			return &os.PathError{Op: "rename", Path: dst, Err: err}
		}
	case OpAdd, OpMkdir:
		err := unix.Renameat2(unix.AT_FDCWD, c.stagePath(i), unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			return &ConflictError{Problems: []Problem{{name, "created on the real root"}}}
		}
		if err != nil {
			return &os.PathError{Op: "rename", Path: dst, Err: err}
		}
	case OpMeta:
		if err := setAttrs(dst, TypeDir, op.Attrs, false); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(c.logf, "%d %s %s\n", i, op.Kind, strconv.Quote(op.Path))
	return err
}

// newDirTimes gives the new directories their times from the copy, now
// that nothing more goes into them.
func (c *committer) newDirTimes() {
	for i := len(c.j.Ops) - 1; i >= 0; i-- {
		op := c.j.Ops[i]
		if op.Kind != OpMkdir {
			continue
		}
		dst := c.j.real(op.Path)
		var st unix.Stat_t
		if unix.Lstat(dst, &st) == nil && st.Ino == op.Ino {
			if err := setTimes(dst, op.Attrs.Atime, op.Attrs.Mtime); err != nil {
				c.log.Warn("new directory times", "err", err)
			}
		}
	}
}

// rollback reverses what the commit applied, after err stopped it.
func (c *committer) rollback(err error) error {
	c.log.Warn("commit failed, reversing it", "id", c.j.ID, "err", err)
	left, rerr := rollBack(c.j, c.dir)
	if rerr != nil {
		return fmt.Errorf("commit: %w; reversing it failed too, the next recovery retries: %v", err, rerr)
	}
	if len(left) > 0 {
		return fmt.Errorf("commit: %w; reversed, but left: %v", err, left)
	}
	var ce *ConflictError
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("commit: %w (reversed)", err)
}

// sameMount checks that a and b are on the same mount: rename and link
// cannot cross mounts.
func sameMount(a, b string) error {
	var sa, sb unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, a, 0, unix.STATX_MNT_ID, &sa); err != nil {
		return &os.PathError{Op: "statx", Path: a, Err: err}
	}
	if err := unix.Statx(unix.AT_FDCWD, b, 0, unix.STATX_MNT_ID, &sb); err != nil {
		return &os.PathError{Op: "statx", Path: b, Err: err}
	}
	if sa.Dev_major != sb.Dev_major || sa.Dev_minor != sb.Dev_minor ||
		(sa.Mask&sb.Mask&unix.STATX_MNT_ID != 0 && sa.Mnt_id != sb.Mnt_id) {
		return fmt.Errorf("the journal %s is not on the mount of %s", a, b)
	}
	return nil
}

// coarseClock reads CLOCK_REALTIME_COARSE, the clock ctimes come from.
func coarseClock() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return time.Now().Add(-10 * time.Millisecond)
	}
	return time.Unix(ts.Unix())
}
