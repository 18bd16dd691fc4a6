package fork

// The journal of commits. There is one journal directory per mounted
// filesystem ([JournalDir]), mode 0700, because a commit keeps what it
// replaces by link and rename, which cannot cross mounts. It holds:
//
//	.lock              flock'ed by Commit, Undo and Recover: one at a time
//	<id>/              one commit; ids sort in time order (20260102T150405.123456789)
//	  journal.json     the write-ahead record, written (temp, syncfs,
//	                   rename, fsync of the directory) before the real
//	                   tree is touched: version, id, root, target, t0,
//	                   started, dev, locks, ops and dirs (below)
//	  applied          one line per applied operation, `N kind "path"`,
//	                   appended as they are applied (for people: the
//	                   reverse pass does not need it)
//	  stage/N          what operation N puts in place, until it does
//	  orig/N           what operation N replaced (a hard link to it) or
//	                   removed (the entry itself, renamed)
//	  committed        {"time": T}: every operation is applied and
//	                   synced; T is later than every ctime the commit made
//	  undoing          {"time": T, "force": F, "dirs": [...]}: an undo
//	                   began; dirs are the directories whose times it
//	                   puts back, chosen before it moved anything
//	  undone           {"time": T, "left": [...]}: the undo is complete;
//	                   left names what it could not put back, and where
//	                   that is kept
//
// journal.json's ops are the plan's operations, each with "ino" (the
// inode it puts in place, for add, replace and mkdir), "old_ino" (the real
// inode it replaces, removes or changes) and "old" (a meta operation's
// attributes before). Its dirs are the real directories whose times the
// commit changes (the parents of every operation, the directories of
// meta operations, and removed directories), with their inode and their
// atime and mtime before.
//
// A journal with journal.json but no committed mark is a commit cut short:
// [Recover] reverses it. One with undoing but no undone is an undo cut
// short: Recover finishes it. One without journal.json was cut short while
// staging, before anything real changed: Recover deletes it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/flock"
)

// JournalDir names the journal directory of the filesystem mounted at
// target: /var/lib/undosh/fork/journal for "/", and
// <target>/.undosh-fork/journal for any other mount. Commit uses it
// when CommitOptions.JournalDir is empty. A copy must not see it: the
// copy hides /var/lib/undosh (for "/") and <target>/.undosh-fork (for a
// submount) with a whiteout, and [Diff] never commits either.
func JournalDir(target string) string {
	t := filepath.Clean(target)
	if t == "/" {
		return filepath.Join(DefaultStateDir, "fork", "journal")
	}
	return filepath.Join(t, HiddenName, "journal")
}

const journalVersion = 1

// wal is a commit's write-ahead log, kept as journal.json: what it is about
// to do, so that a commit cut short is finished or undone.
type wal struct {
	Version int        `json:"version"`
	ID      string     `json:"id"`
	Root    string     `json:"root"`
	Target  string     `json:"target"`
	T0      time.Time  `json:"t0"`
	Started time.Time  `json:"started"`
	Dev     uint64     `json:"dev"`   // of the target's filesystem
	Locks   bool       `json:"locks"` // the dpkg and apt locks are needed
	Ops     []jop      `json:"ops"`
	Dirs    []dirTimes `json:"dirs"`
}

type jop struct {
	Op
	Ino    uint64 `json:"ino,omitempty"`
	OldIno uint64 `json:"old_ino,omitempty"`
	Old    *Attrs `json:"old,omitempty"`
}

type dirTimes struct {
	Path  string `json:"path"` // relative to the target
	Ino   uint64 `json:"ino"`
	Atime int64  `json:"atime"`
	Mtime int64  `json:"mtime"`
	// Removed says the directory is itself removed by the commit, and so
	// is restored from the journal untouched.
	Removed bool `json:"removed,omitempty"`
}

type mark struct {
	Time  time.Time `json:"time"`
	Force bool      `json:"force,omitempty"`
	Left  []string  `json:"left,omitempty"`
	// Dirs (undoing) are the directories whose times the undo puts
	// back, decided before it moved anything.
	Dirs []dirTimes `json:"dirs,omitempty"`
}

func (j *wal) plan() Plan {
	p := Plan{Root: j.Root, Target: j.Target, T0: j.T0}
	for _, op := range j.Ops {
		p.Ops = append(p.Ops, op.Op)
	}
	return p
}

// Record is one commit in a journal.
type Record struct {
	ID     string `json:"id"`
	Root   string `json:"root"`
	Target string `json:"target"`
	// Started is when the commit began.
	Started time.Time `json:"started"`
	// Time is when it was committed (zero if it never was).
	Time      time.Time `json:"time,omitzero"`
	Committed bool      `json:"committed"`
	// Undone is true once an undo or a recovery has reversed it;
	// UndoneTime says when.
	Undone     bool      `json:"undone"`
	UndoneTime time.Time `json:"undone_time,omitzero"`
	// Ops is the number of operations; Paths the paths they change, from
	// the root, in plan order.
	Ops   int      `json:"ops"`
	Paths []string `json:"paths"`
	// Left names what an undo could not put back, and where it is kept.
	Left []string `json:"left,omitempty"`
}

// commitEntry is one <id> directory as found.
type commitEntry struct {
	id, dir   string
	j         *wal // nil when journal.json is missing
	committed *mark
	undoing   *mark
	undone    *mark
}

func (e *commitEntry) record() Record {
	r := Record{ID: e.id}
	if e.j != nil {
		r.Root, r.Target, r.Started, r.Ops = e.j.Root, e.j.Target, e.j.Started, len(e.j.Ops)
		r.Paths = e.j.plan().Paths()
	}
	if e.committed != nil {
		r.Committed, r.Time = true, e.committed.Time
	}
	if e.undone != nil {
		r.Undone, r.UndoneTime, r.Left = true, e.undone.Time, e.undone.Left
	}
	return r
}

// List returns the commits in journalDir, oldest first. A commit that is
// neither committed nor undone was cut short (or is running now) and is
// reversed by the next [Recover].
func List(journalDir string) ([]Record, error) {
	es, err := loadEntries(journalDir)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(es))
	for _, e := range es {
		out = append(out, e.record())
	}
	return out, nil
}

// loadEntries reads every commit of the journal, oldest first. A
// missing journal directory has none.
func loadEntries(jd string) ([]*commitEntry, error) {
	ents, err := os.ReadDir(jd)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	var out []*commitEntry
	for _, de := range ents {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		e, err := loadEntry(jd, de.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *commitEntry) int { return strings.Compare(a.id, b.id) })
	return out, nil
}

func loadEntry(jd, id string) (*commitEntry, error) {
	e := &commitEntry{id: id, dir: filepath.Join(jd, id)}
	data, err := os.ReadFile(filepath.Join(e.dir, "journal.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read journal %s: %w", id, err)
	default:
		e.j = new(wal)
		if err := json.Unmarshal(data, e.j); err != nil {
			return nil, fmt.Errorf("read journal %s: %w", id, err)
		}
		if e.j.Version != journalVersion {
			return nil, fmt.Errorf("read journal %s: version %d, want %d", id, e.j.Version, journalVersion)
		}
	}
	for _, m := range []struct {
		name string
		to   **mark
	}{{"committed", &e.committed}, {"undoing", &e.undoing}, {"undone", &e.undone}} {
		data, err := os.ReadFile(filepath.Join(e.dir, m.name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read journal %s: %w", id, err)
		}
		*m.to = new(mark)
		if err := json.Unmarshal(data, *m.to); err != nil {
			return nil, fmt.Errorf("read journal %s %s: %w", id, m.name, err)
		}
	}
	return e, nil
}

// writeMark writes a mark durably.
func writeMark(dir, name string, m mark) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, name), append(data, '\n'), 0o600)
}

// openJournalDir makes the journal directory (root-only) and takes its
// lock. The caller must call the returned function to release it.
func openJournalDir(jd string) (func(), error) {
	mk := os.MkdirAll
	if top := filepath.Dir(jd); strings.HasPrefix(filepath.Base(top), HiddenName) {
		mk = func(dir string, _ fs.FileMode) error { return makeHiddenIn(top, dir) }
	}
	if err := mk(jd, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(jd, &st); err != nil {
		return nil, fmt.Errorf("journal: %w", &os.PathError{Op: "lstat", Path: jd, Err: err})
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("journal: %s is not a directory", jd)
	}
	if st.Mode&0o077 != 0 {
		if err := os.Chmod(jd, 0o700); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	return lockJournal(jd)
}

// lockJournal takes the journal's flock, waiting for a commit, undo or
// recovery that holds it. The kernel drops the lock of a process that
// dies.
func lockJournal(jd string) (func(), error) {
	name := filepath.Join(jd, ".lock")
	f, err := flock.Lock(name, unix.LOCK_EX)
	if err != nil {
		return nil, fmt.Errorf("journal lock %s: %w", name, err)
	}
	return func() { f.Close() }, nil
}

// newCommitDir makes <jd>/<id> with its stage and orig directories.
func newCommitDir(jd string, now time.Time) (id, dir string, err error) {
	base := now.UTC().Format("20060102T150405.000000000")
	for i := 0; ; i++ {
		id = base
		if i > 0 {
			id = fmt.Sprintf("%s-%d", base, i)
		}
		dir = filepath.Join(jd, id)
		err = os.Mkdir(dir, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return "", "", fmt.Errorf("journal: %w", err)
		}
	}
	for _, sub := range []string{"stage", "orig"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return "", "", fmt.Errorf("journal: %w", err)
		}
	}
	return id, dir, nil
}

// syncFS flushes the filesystem that holds name.
func syncFS(name string) error {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return &os.PathError{Op: "syncfs", Path: name, Err: err}
	}
	return nil
}

// overlapping returns the paths of a that are equal to, inside or above
// a path of b.
func overlapping(a, b []string) []string {
	var out []string
	for _, p := range a {
		for _, q := range b {
			if p == q || strings.HasPrefix(q, strings.TrimSuffix(p, "/")+"/") || strings.HasPrefix(p, strings.TrimSuffix(q, "/")+"/") {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// real is the real path of rel in the journal's target.
func (j *wal) real(rel string) string { return filepath.Join(j.Target, rel) }

// name is how a person sees rel: from the root.
func (j *wal) name(rel string) string {
	return Plan{Root: j.Root, Target: j.Target}.Name(Op{Path: rel})
}
