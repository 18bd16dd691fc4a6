package fork

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoCommit is returned by [Undo] for an id that is not a commit of the
// journal: none was made, or [Prune] dropped its record.
var ErrNoCommit = errors.New("no such commit: it was never made, or undoctl gc dropped its record")

// OrderError is returned by [Undo] when a later commit that is not undone
// changed some of the same paths: commits are undone last first.
type OrderError struct {
	ID    string   // the commit to undo
	Later string   // the later commit to undo first
	Paths []string // the paths both change (from the root)
}

func (e *OrderError) Error() string {
	return fmt.Sprintf("undo %s refused: the later commit %s also changed %s; undo it first",
		e.ID, e.Later, strings.Join(e.Paths, ", "))
}

// Undo reverses commit id of journalDir: a replaced entry gets its
// original back (rename), a removed one is renamed back, an added entry or
// directory is deleted if it is still the inode the commit put there,
// changed directory attributes get their old values, and the directories
// the commit changed get their times back (unless something else changed
// them since). It copies no data. Undoing an undone commit does nothing.
//
// It refuses with an *[OrderError] when a later commit on an overlapping
// path is not undone, and, unless force, with a *[ConflictError] listing
// every path the commit put in place that changed since (its ctime is
// later than the commit). With force those changes are lost: each
// original is put back over them; but an entry that is not the commit's
// own (a new file where one was added, a new entry in a directory the
// commit made, a new entry where one was removed) is never deleted, and
// the record's Left lists it (an original that could not be put back
// stays in the journal, and Left says where).
//
// An undo cut short by a crash is finished by [Recover].
func Undo(journalDir, id string, force bool) error {
	if _, err := os.Stat(journalDir); err != nil {
		return fmt.Errorf("undo %s: %w", id, ErrNoCommit)
	}
	unlock, err := lockJournal(journalDir)
	if err != nil {
		return fmt.Errorf("undo %s: %w", id, err)
	}
	defer unlock()
	if _, err := recoverLocked(journalDir); err != nil {
		return fmt.Errorf("undo %s: a commit cut short could not be reversed: %w", id, err)
	}
	es, err := loadEntries(journalDir)
	if err != nil {
		return fmt.Errorf("undo %s: %w", id, err)
	}
	i := slices.IndexFunc(es, func(e *commitEntry) bool { return e.id == id })
	if i < 0 || es[i].j == nil || es[i].committed == nil {
		return fmt.Errorf("undo %s: %w", id, ErrNoCommit)
	}
	e := es[i]
	if e.undone != nil {
		return nil
	}
	paths := e.j.plan().Paths()
	for _, later := range es[i+1:] {
		if later.j == nil || later.committed == nil || later.undone != nil {
			continue
		}
		if ov := overlapping(paths, later.j.plan().Paths()); len(ov) > 0 {
			return &OrderError{ID: id, Later: later.id, Paths: ov}
		}
	}
	since := e.committed.Time.UnixNano()
	if !force {
		if ps := changedSince(e.j, since, es[i+1:]); len(ps) > 0 {
			return &ConflictError{Undo: true, Problems: ps}
		}
	}
	if e.j.Locks {
		release, err := takePkgLocks(e.j.Root)
		if err != nil {
			return fmt.Errorf("undo %s: %w", id, err)
		}
		defer release()
	}
	e.undoing = &mark{Time: time.Now(), Force: force, Dirs: dirsToRestore(e.j, since, es[i+1:])}
	if err := writeMark(e.dir, "undoing", *e.undoing); err != nil {
		return fmt.Errorf("undo %s: %w", id, err)
	}
	if err := finishUndo(e); err != nil {
		return fmt.Errorf("undo %s: %w", id, err)
	}
	return nil
}

// finishUndo runs the reverse pass of a committed journal, as the undoing
// mark says, and marks it undone.
func finishUndo(e *commitEntry) error {
	left, err := reverseOps(e.j, e.dir, e.committed.Time.UnixNano(), e.undoing.Dirs, e.undoing.Force, nil)
	if err != nil {
		return err
	}
	if err := syncFS(e.dir); err != nil {
		return err
	}
	when := time.Now()
	if err := writeMark(e.dir, "undone", mark{Time: when, Force: e.undoing.Force, Left: left}); err != nil {
		return err
	}
	// As after a commit: a change made after the undo gets a later ctime.
	for !coarseClock().After(when) {
		time.Sleep(time.Millisecond)
	}
	os.RemoveAll(filepath.Join(e.dir, "stage"))
	os.Remove(filepath.Join(e.dir, "orig")) // only when nothing is left in it
	return nil
}

// rollBack reverses a commit cut short, then deletes its journal, or
// marks it undone when something could not be put back.
func rollBack(j *wal, dir string) ([]string, error) {
	left, err := reverseOps(j, dir, 0, dirsToRestore(j, 0, nil), false, readApplied(dir))
	if err != nil {
		return left, err
	}
	if err := syncFS(dir); err != nil {
		return left, err
	}
	if len(left) == 0 {
		return nil, os.RemoveAll(dir)
	}
	return left, writeMark(dir, "undone", mark{Time: time.Now(), Left: left})
}

// readApplied reads the applied log: which operations ran.
func readApplied(dir string) map[int]bool {
	out := map[int]bool{}
	f, err := os.Open(filepath.Join(dir, "applied"))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n, _, _ := strings.Cut(sc.Text(), " ")
		if i, err := strconv.Atoi(n); err == nil {
			out[i] = true
		}
	}
	return out
}

// changedSince lists the paths a commit put in place or changed that
// changed after it (since, in ns), or that something now occupies where
// it removed an entry. A later commit that changed a path too, and was
// undone, moved it (its link and renames change ctimes): for that path,
// the time of that undo counts instead.
func changedSince(j *wal, since int64, later []*commitEntry) []Problem {
	var ps []Problem
	seen := map[string]bool{}
	report := func(rel, why string) {
		if !seen[rel] {
			seen[rel] = true
			ps = append(ps, Problem{j.name(rel), why})
		}
	}
	dirs := newRealDirs(j.Target)
	for i, op := range j.Ops {
		if parent := path.Dir(op.Path); op.Path != "." && !dirs.is(parent) {
			report(parent, "no longer a directory")
			continue
		}
		since := sinceFor(j, op.Path, since, later)
		var st unix.Stat_t
		err := unix.Lstat(j.real(op.Path), &st)
		switch op.Kind {
		case OpRemove:
			replaced := slices.ContainsFunc(j.Ops[i+1:], func(o jop) bool { return o.Path == op.Path })
			if err == nil && !replaced {
				report(op.Path, "created since the commit")
			}
			continue
		case OpMeta:
			if err == nil && st.Ino != op.OldIno {
				err = errors.New("replaced")
			}
		default:
			if err == nil && st.Ino != op.Ino {
				err = errors.New("replaced")
			}
		}
		switch {
		case errors.Is(err, unix.ENOENT):
			report(op.Path, "removed since the commit")
		case err != nil:
			report(op.Path, "replaced since the commit")
		case st.Ctim.Nano() > since:
			report(op.Path, "changed since the commit")
		}
	}
	return ps
}

// sinceFor is when rel was last changed by a commit or an undo of this
// journal: since (the commit's time), or the time of the undo of a later
// commit that changed it too, or something in it or above it.
func sinceFor(j *wal, rel string, since int64, later []*commitEntry) int64 {
	name := []string{j.name(rel)}
	for _, l := range later {
		if l.j != nil && l.undone != nil && l.undone.Time.UnixNano() > since &&
			len(overlapping(name, l.j.plan().Paths())) > 0 {
			since = l.undone.Time.UnixNano()
		}
	}
	return since
}

// reverser is the reverse pass, shared by Undo, Recover and a commit that
// fails: idempotent, it can be cut short and run again.
type reverser struct {
	j       *wal
	dir     string
	since   int64        // the commit's time in ns; 0 for a commit cut short
	force   bool         // put originals back over later changes
	applied map[int]bool // nil: every operation was applied
	left    []string
}

// dirsToRestore lists the directories whose times a reverse pass puts
// back. It is decided before anything moves: not one that someone else
// changed since the commit (since, in ns; 0 for a commit cut short).
func dirsToRestore(j *wal, since int64, later []*commitEntry) []dirTimes {
	var restore []dirTimes
	for _, d := range j.Dirs {
		if !d.Removed {
			var st unix.Stat_t
			if unix.Lstat(j.real(d.Path), &st) != nil || st.Ino != d.Ino ||
				(since != 0 && st.Ctim.Nano() > sinceFor(j, d.Path, since, later)) {
				continue
			}
		}
		restore = append(restore, d)
	}
	return restore
}

// reverseOps is the reverse pass: the operations last first, then the
// times of the directories in restore, deepest first.
func reverseOps(j *wal, dir string, since int64, restore []dirTimes, force bool, applied map[int]bool) ([]string, error) {
	r := &reverser{j: j, dir: dir, since: since, force: force, applied: applied}
	for i := len(j.Ops) - 1; i >= 0; i-- {
		if err := r.op(i); err != nil {
			return r.left, err
		}
	}
	restore = slices.Clone(restore)
	slices.SortStableFunc(restore, func(a, b dirTimes) int {
		return strings.Count(b.Path, "/") - strings.Count(a.Path, "/")
	})
	for _, d := range restore {
		var st unix.Stat_t
		if unix.Lstat(j.real(d.Path), &st) == nil && st.Ino == d.Ino {
			err := setTimes(j.real(d.Path), d.Atime, d.Mtime)
			if errors.Is(err, unix.EPERM) && int(st.Uid) != os.Geteuid() {
				// Only its owner (or root) sets a directory's times: a
				// user's undo leaves those of a shared one (/tmp) as
				// the entries it put back left them.
				continue
			}
			if err != nil {
				return r.left, err
			}
		}
	}
	return r.left, nil
}

func (r *reverser) wasApplied(i int) bool { return r.applied == nil || r.applied[i] }

func (r *reverser) leave(i int, why string) {
	r.left = append(r.left, r.j.name(r.j.Ops[i].Path)+": "+why)
}

func (r *reverser) op(i int) error {
	op := &r.j.Ops[i]
	dst := r.j.real(op.Path)
	orig := filepath.Join(r.dir, "orig", strconv.Itoa(i))
	var st unix.Stat_t
	err := unix.Lstat(dst, &st)
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
		return &os.PathError{Op: "lstat", Path: dst, Err: err}
	}
	exists := err == nil
	ours := exists && st.Ino == op.Ino && st.Dev == r.j.Dev

	switch op.Kind {
	case OpAdd, OpMkdir:
		switch {
		case ours && op.Kind == OpMkdir:
			err := unix.Rmdir(dst)
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				r.leave(i, "a directory the commit made, not empty: left in place")
				return nil
			}
			if err != nil {
				return &os.PathError{Op: "rmdir", Path: dst, Err: err}
			}
		case ours:
			if err := unix.Unlink(dst); err != nil {
				return &os.PathError{Op: "unlink", Path: dst, Err: err}
			}
		case exists && r.wasApplied(i) && r.since != 0:
			r.leave(i, "replaced since the commit: left in place")
		}
	case OpReplace:
		var ost unix.Stat_t
		if err := unix.Lstat(orig, &ost); errors.Is(err, unix.ENOENT) {
			return nil // not applied, or already put back
		} else if err != nil {
			return &os.PathError{Op: "lstat", Path: orig, Err: err}
		}
		switch {
		case exists && st.Ino == ost.Ino:
			// Linked but not yet replaced: drop the journal's link.
			if err := unix.Unlink(orig); err != nil {
				return &os.PathError{Op: "unlink", Path: orig, Err: err}
			}
		case ours || !exists || r.force:
			if err := unix.Rename(orig, dst); err != nil {
				if r.force && exists {
					r.leave(i, fmt.Sprintf("cannot put the original back (%v); it is kept at %s", err, orig))
					return nil
				}
				return &os.PathError{Op: "rename", Path: orig, Err: err}
			}
		default:
			r.leave(i, "replaced since the commit; the original is kept at "+orig)
		}
	case OpRemove:
		if _, err := os.Lstat(orig); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		err := unix.Renameat2(unix.AT_FDCWD, orig, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			r.leave(i, "created since the commit; the original is kept at "+orig)
			return nil
		}
		if err != nil {
			return &os.PathError{Op: "rename", Path: orig, Err: err}
		}
	case OpMeta:
		if !exists || st.Ino != op.OldIno || op.Old == nil {
			if r.wasApplied(i) && r.since != 0 {
				r.leave(i, "replaced since the commit: attributes not put back")
			}
			return nil
		}
		cur, _, err := attrsAt(dst)
		if err != nil {
			return err
		}
		if cur.Mode != op.Old.Mode || cur.UID != op.Old.UID || cur.GID != op.Old.GID || !sameXattrs(cur.Xattrs, op.Old.Xattrs) {
			if err := setAttrs(dst, TypeDir, op.Old, false); err != nil {
				return err
			}
		}
	}
	return nil
}
