package fork

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPrune makes real commits and checks which records Prune drops: the
// commits asked for that ended before the cutoff, committed or undone;
// never one cut short, one not asked for, nor the machine's files. A
// dropped commit can no longer be undone, and says why.
func TestPrune(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := t.TempDir()
	root := filepath.Join(base, "root")
	jd := filepath.Join(base, "journal")
	tree{t, base}.dir("root", 0o755)
	r := tree{t, root}
	r.dir("etc", 0o755)
	r.file("etc/app.conf", "v1\n", 0o644, tBase)
	commit := func(name, rel, data string) string {
		t.Helper()
		return commitUpper(t, base, root, jd, name, func(u tree) {
			u.mirror(root, ".")
			u.mirror(root, "etc")
			u.file(rel, data, 0o644, tNew)
		})
	}
	old := commit("a", "etc/app.conf", "v2\n")
	undone := commit("b", "etc/b", "b\n")
	if err := Undo(jd, undone, false); err != nil {
		t.Fatal(err)
	}
	other := commit("d", "etc/d", "d\n") // another state directory's
	cutoff := time.Now()
	recent := commit("c", "etc/c", "c\n")
	// A commit cut short: its record without the committed mark.
	short := filepath.Join(jd, "20000101T000000.000000000")
	if err := os.MkdirAll(short, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(jd, old, "journal.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(short, "journal.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}

	res, err := Prune(jd, []string{old, undone, recent, filepath.Base(short)}, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Dropped, []string{old, undone}) || res.Bytes <= 0 {
		t.Errorf("Prune dropped %v (%d bytes), want %v and %v with the original of etc/app.conf", res.Dropped, res.Bytes, old, undone)
	}
	for _, id := range []string{recent, other, filepath.Base(short)} {
		if _, err := os.Stat(filepath.Join(jd, id, "journal.json")); err != nil {
			t.Errorf("the record of %s went: %v", id, err)
		}
	}
	for rel, want := range map[string]string{"etc/app.conf": "v2\n", "etc/c": "c\n", "etc/d": "d\n"} {
		if b, err := os.ReadFile(filepath.Join(root, rel)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q: Prune changed the machine", rel, b, err, want)
		}
	}
	// Undo would first reverse the commit cut short, which is only a copy.
	if err := os.RemoveAll(short); err != nil {
		t.Fatal(err)
	}
	if err := Undo(jd, old, false); !errors.Is(err, ErrNoCommit) {
		t.Errorf("Undo of a dropped commit: %v, want ErrNoCommit", err)
	}
	if err := Undo(jd, recent, false); err != nil {
		t.Errorf("Undo of the commit kept: %v", err)
	}
	if res, err := Prune(filepath.Join(base, "none"), []string{old}, time.Now()); err != nil || len(res.Dropped) != 0 {
		t.Errorf("Prune of a journal directory that does not exist: %+v, %v", res, err)
	}
}
