package journal

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestIDsAreUniqueAcrossConcurrentSteps(t *testing.T) {
	t.Parallel()
	j, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	ids := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := j.Begin()
			if err != nil {
				t.Error(err)
				return
			}
			ids <- s.ID
			if err := s.Finish(Record{Time: time.Now(), Outcome: Kept}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[int]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("id %d given twice", id)
		}
		seen[id] = true
	}
	recs, err := j.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Errorf("%d records, want %d", len(recs), n)
	}
}

func TestOverlap(t *testing.T) {
	t.Parallel()
	j, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	alone, _ := j.Begin()
	if alone.Overlapped() {
		t.Error("a step alone overlapped")
	}
	alone.Abandon()

	// b begins while a runs: both overlapped.
	a, _ := j.Begin()
	b, _ := j.Begin()
	if !b.Overlapped() {
		t.Error("b began while a ran, but did not overlap")
	}
	b.Abandon()
	if !a.Overlapped() {
		t.Error("b began while a ran, but a did not overlap")
	}
	a.Abandon()

	c, _ := j.Begin()
	if c.Overlapped() {
		t.Error("c began after a and b ended, but overlapped")
	}
	c.Abandon()
}

// A step whose undosh died is journalled as killed, with its checkpoints,
// by the next Begin, and no longer counts as running.
func TestKilledStepIsRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A process that has exited stands for the killed undosh.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	s, _ := j.Begin()
	mark := running{Proc: strconv.Itoa(dead) + " 1", Record: Record{ID: s.ID, Command: "rm -rf src", Points: []Checkpoint{{Root: "/w", Before: "abc"}}}}
	writeMark(t, dir, s.ID, mark)

	next, err := j.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if next.Overlapped() {
		t.Error("a dead step counted as running")
	}
	next.Abandon()
	r, err := j.Find(s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != Killed || len(r.Points) != 1 || r.Points[0].Before != "abc" {
		t.Errorf("killed step recorded as %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "active", strconv.Itoa(s.ID))); !os.IsNotExist(err) {
		t.Errorf("mark of the dead step still there: %v", err)
	}
}

func writeMark(t *testing.T, dir string, id int, m running) {
	t.Helper()
	s := &Step{j: &Journal{dir: dir}, ID: id}
	if err := s.Running(m.Record); err != nil {
		t.Fatal(err)
	}
	// Rewrite the owner to the dead process.
	data := []byte(`{"proc":"` + m.Proc + `","record":{"id":` + strconv.Itoa(id) +
		`,"time":"2026-01-01T00:00:00Z","command":"rm -rf src","class":"git","verdict":"run","checkpoints":[{"root":"/w","before":"abc"}],"exit":0,"outcome":""}}`)
	if err := os.WriteFile(filepath.Join(dir, "active", strconv.Itoa(id)), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTornLastLineIsSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := Open(dir)
	if err := j.Append(Record{ID: 1, Outcome: Kept}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(j.Path(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":2,"outc`)
	f.Close()
	recs, err := j.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ID != 1 {
		t.Errorf("records %+v, want only step 1", recs)
	}
	// With no counter, the next step continues after the last whole record.
	s, _ := j.Begin()
	if s.ID != 2 {
		t.Errorf("next id %d, want 2", s.ID)
	}
	s.Abandon()
}

func TestSeqLostContinuesAfterJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := Open(dir)
	j.Append(Record{ID: 7, Outcome: Kept})
	s, err := j.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != 8 {
		t.Errorf("id %d after a journal ending at 7 with no counter, want 8", s.ID)
	}
	s.Abandon()
}

func TestUnfinishedRollbacks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, _ := Open(dir)
	done, err := j.MarkRollback(Rollback{Step: 3, Root: "/w", Target: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	// This process is alive: its rollback is in progress, not unfinished.
	if got, _, _ := j.Unfinished(); len(got) != 0 {
		t.Errorf("a live rollback listed as unfinished: %+v", got)
	}
	done()
	if _, err := os.Stat(PendingDir(dir)); !os.IsNotExist(err) {
		t.Errorf("pending directory left after the last rollback: %v", err)
	}
	// A mark whose process is gone is unfinished.
	os.MkdirAll(PendingDir(dir), 0o700)
	os.WriteFile(filepath.Join(PendingDir(dir), "3-1.json"), []byte(`{"step":3,"root":"/w","target":"abc","proc":"999999999 1"}`), 0o600)
	got, fin, err := j.Unfinished()
	if err != nil || len(got) != 1 || got[0].Target != "abc" || got[0].Step != 3 {
		t.Fatalf("Unfinished = %+v, %v", got, err)
	}
	fin[0]()
	if _, err := os.Stat(PendingDir(dir)); !os.IsNotExist(err) {
		t.Errorf("pending directory left after finishing: %v", err)
	}
}

// A process that has ended but is not yet reaped (a zombie) is not alive:
// a killed supervisor may stay one a while, its parent gone.
func TestAliveZombie(t *testing.T) {
	t.Parallel()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Skip(err)
	}
	defer p.Wait()
	id := procID(p.Pid)
	for range 1000 {
		if _, state := procStat(p.Pid); state == "Z" {
			if alive(id) {
				t.Errorf("zombie %d is alive", p.Pid)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Skip("the child never became a zombie")
}
