package fork

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Recover puts journalDir's filesystem back in a state a person can
// reason about, after a crash: it reverses every commit that has no
// committed mark (with the same reverse pass as [Undo], without its
// conflict check), finishes every undo that has no undone mark, and
// deletes the staging of commits cut short before their journal was
// written. It returns one line for each thing it did. undosh calls it at
// start, for the journal of every filesystem; a missing journal directory
// has nothing to recover.
//
// It waits for a commit or undo that is running, since those hold the
// journal's lock.
func Recover(journalDir string) ([]string, error) {
	if _, err := os.Stat(journalDir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	unlock, err := lockJournal(journalDir)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	defer unlock()
	return recoverLocked(journalDir)
}

// recoverLocked is Recover with the journal's lock held.
func recoverLocked(jd string) ([]string, error) {
	es, err := loadEntries(jd)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	var did []string
	for i := len(es) - 1; i >= 0; i-- { // last first
		e := es[i]
		switch {
		case e.j == nil:
			if ents, _ := os.ReadDir(filepath.Join(e.dir, "orig")); len(ents) > 0 {
				return did, fmt.Errorf("recover %s: no journal.json, but originals are kept in %s", e.id, filepath.Join(e.dir, "orig"))
			}
			if err := os.RemoveAll(e.dir); err != nil {
				return did, fmt.Errorf("recover %s: %w", e.id, err)
			}
			did = append(did, fmt.Sprintf("deleted the staging of commit %s, cut short before it changed anything", e.id))
		case e.committed == nil:
			n := len(readApplied(e.dir))
			left, err := withPkgLocks(e.j, func() ([]string, error) { return rollBack(e.j, e.dir) })
			if err != nil {
				return did, fmt.Errorf("recover %s: %w", e.id, err)
			}
			msg := fmt.Sprintf("reversed commit %s to %s, cut short after %d of %d operations", e.id, e.j.Target, n, len(e.j.Ops))
			if len(left) > 0 {
				msg += fmt.Sprintf("; left: %v", left)
			}
			did = append(did, msg)
		case e.undoing != nil && e.undone == nil:
			_, err := withPkgLocks(e.j, func() ([]string, error) { return nil, finishUndo(e) })
			if err != nil {
				return did, fmt.Errorf("recover %s: %w", e.id, err)
			}
			did = append(did, fmt.Sprintf("finished the undo of commit %s to %s", e.id, e.j.Target))
		}
	}
	return did, nil
}

// withPkgLocks runs f holding the dpkg and apt locks when j needs them.
func withPkgLocks(j *wal, f func() ([]string, error)) ([]string, error) {
	if j.Locks {
		release, err := takePkgLocks(j.Root)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return f()
}
