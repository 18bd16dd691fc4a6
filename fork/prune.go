package fork

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// PruneResult is what [Prune] dropped.
type PruneResult struct {
	// Dropped are the ids of the commits whose records went, oldest
	// first.
	Dropped []string
	// Bytes is what their records held: mostly the originals of what
	// the commits replaced.
	Bytes int64
}

// Prune drops from the journal directory jd the records of the commits
// among ids that ended before cutoff: those committed, and those undone
// whole. A commit so dropped can no longer be undone ([Undo] answers
// [ErrNoCommit]). Prune never drops a commit cut short or an undo cut
// short, which [Recover] needs, nor an undo that left things it could not
// put back, which its record keeps; and it changes nothing outside jd.
// The commits of other callers (other state directories share the
// machine's journal) are not among ids, and stay.
func Prune(jd string, ids []string, cutoff time.Time) (PruneResult, error) {
	var r PruneResult
	if _, err := os.Stat(jd); err != nil {
		if os.IsNotExist(err) {
			return r, nil
		}
		return r, fmt.Errorf("prune %s: %w", jd, err)
	}
	unlock, err := lockJournal(jd)
	if err != nil {
		return r, fmt.Errorf("prune %s: %w", jd, err)
	}
	defer unlock()
	es, err := loadEntries(jd)
	if err != nil {
		return r, fmt.Errorf("prune %s: %w", jd, err)
	}
	for _, e := range es {
		ended := e.committed
		switch {
		case !slices.Contains(ids, e.id):
			continue
		case e.j == nil || e.committed == nil:
			continue // cut short, or running now
		case e.undoing != nil && e.undone == nil:
			continue // an undo cut short
		case e.undone != nil && len(e.undone.Left) > 0:
			continue // it keeps what the undo could not put back
		case e.undone != nil:
			ended = e.undone
		}
		if !ended.Time.Before(cutoff) {
			continue
		}
		size := dirBytes(e.dir)
		if err := os.RemoveAll(e.dir); err != nil {
			return r, fmt.Errorf("prune %s: %w", jd, err)
		}
		r.Dropped = append(r.Dropped, e.id)
		r.Bytes += size
	}
	return r, nil
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
