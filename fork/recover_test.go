package fork

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRecoverNothing: no journal, or an empty one, has nothing to do.
func TestRecoverNothing(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, jd := range []string{filepath.Join(base, "missing"), base} {
		if did, err := Recover(jd); err != nil || len(did) != 0 {
			t.Errorf("Recover(%s) = %q, %v", jd, did, err)
		}
		if recs, err := List(jd); err != nil || len(recs) != 0 {
			t.Errorf("List(%s) = %v, %v", jd, recs, err)
		}
	}
}

// TestRecoverStaging: a commit killed while staging, before its journal
// was written, changed nothing real; its staging is deleted.
func TestRecoverStaging(t *testing.T) {
	t.Parallel()
	jd := t.TempDir()
	id, dir, err := newCommitDir(jd, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stage", "0"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "journal.json.tmp"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	did, err := Recover(jd)
	if err != nil || len(did) != 1 || !strings.Contains(did[0], id) {
		t.Errorf("Recover = %q, %v", did, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the staging is still there: %v", err)
	}
}

// TestRecoverUndo: an undo killed halfway is finished by Recover.
func TestRecoverUndo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	before := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
	rec, err := Commit(f.diff(t), CommitOptions{JournalDir: f.journal})
	if err != nil {
		t.Fatal(err)
	}
	// What Undo does up to a kill after a few operations.
	e, err := loadEntry(f.journal, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeMark(e.dir, "undoing", mark{Time: time.Now(), Dirs: dirsToRestore(e.j, e.committed.Time.UnixNano(), nil)}); err != nil {
		t.Fatal(err)
	}
	waitCoarsePast(time.Now()) // the undo's own changes come after its start
	r := &reverser{j: e.j, dir: e.dir, since: e.committed.Time.UnixNano()}
	for i := len(e.j.Ops) - 1; i >= len(e.j.Ops)-5; i-- {
		if err := r.op(i); err != nil {
			t.Fatal(err)
		}
	}
	did, err := Recover(f.journal)
	if err != nil || len(did) != 1 || !strings.Contains(did[0], "finished the undo of commit "+rec.ID) {
		t.Errorf("Recover = %q, %v", did, err)
	}
	after := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("after the recovered undo (-want +got):\n%s", diff)
	}
	recs, err := List(f.journal)
	if err != nil || len(recs) != 1 || !recs[0].Undone {
		t.Errorf("List = %+v, %v", recs, err)
	}
}
