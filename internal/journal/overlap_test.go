package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRefusalsDoNotOverlap: a step overlaps another that begins while it
// runs, and a restore journaled meanwhile, but not a refusal (NewQuietID).
func TestRefusalsDoNotOverlap(t *testing.T) {
	t.Parallel()
	begin := func(j *Journal) error {
		s, err := j.Begin()
		if err == nil {
			s.Abandon()
		}
		return err
	}
	quiet := func(j *Journal) error { _, err := j.NewQuietID(); return err }
	tests := []struct {
		name    string
		between []func(j *Journal) error
		want    bool
	}{
		{"alone", nil, false},
		{"refusal", []func(*Journal) error{quiet}, false},
		{"two refusals", []func(*Journal) error{quiet, quiet}, false},
		{"restore", []func(*Journal) error{func(j *Journal) error { _, err := j.NewID(); return err }}, true},
		{"step", []func(*Journal) error{begin}, true},
		{"refusal then step", []func(*Journal) error{quiet, begin}, true},
		{"step then refusal", []func(*Journal) error{begin, quiet}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			s, err := j.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.between {
				if err := f(j); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.Overlapped(); got != tt.want {
				t.Errorf("Overlapped() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestIDsAreUniqueWhicheverWay: ids are never given twice, whichever way they are
// taken, after a seq file of the old form ("N"); a corrupt one gives none.
func TestIDsAreUniqueWhicheverWay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "seq"), []byte("5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		var id int
		switch i % 3 {
		case 0:
			id, err = j.NewQuietID()
		case 1:
			id, err = j.NewID()
		case 2:
			var s *Step
			s, err = j.Begin()
			if err == nil {
				id = s.ID
				s.Abandon()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if id != 6+i {
			t.Fatalf("id %d, want %d", id, 6+i)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "seq"), []byte("x y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := j.NewQuietID(); err == nil {
		t.Errorf("a corrupt seq file gave an id")
	}
}

// TestOverlapIsPerWorkspace: steps overlap only when their workspaces share
// a path; a step of unknown workspaces (nil) overlaps every one.
func TestOverlapIsPerWorkspace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		a, b  []string
		share bool
	}{
		{"same", []string{"/w/a"}, []string{"/w/a"}, true},
		{"other", []string{"/w/a"}, []string{"/w/b"}, false},
		{"prefix is not a parent", []string{"/w/a"}, []string{"/w/ab"}, false},
		{"nested", []string{"/w/a"}, []string{"/w/a/sub"}, true},
		{"one of several", []string{"/w/a", "/w/c"}, []string{"/w/b", "/w/c"}, true},
		{"unknown", nil, []string{"/w/b"}, true},
		{"none", []string{}, []string{"/w/b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			// a runs while b begins and ends.
			a, err := j.BeginIn(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			b, err := j.BeginIn(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			bOver := b.Overlapped()
			b.Abandon()
			if got := a.Overlapped(); got != tt.share {
				t.Errorf("a.Overlapped() = %v, want %v", got, tt.share)
			}
			if bOver != tt.share {
				t.Errorf("b.Overlapped() = %v, want %v", bOver, tt.share)
			}
			a.Abandon()
			// Neither leaves anything behind for the next step.
			c, err := j.BeginIn(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			if c.Overlapped() {
				t.Errorf("a step after both ended overlapped")
			}
			c.Abandon()
			if ents, _ := os.ReadDir(filepath.Join(j.dir, "active")); len(ents) != 0 {
				t.Errorf("active/ holds %v after every step ended", ents)
			}
		})
	}
}

// TestBeginLeavesMarksBeingWritten: Begin never removes another step's mark
// while it is being written (N.tmp), which would make that step fail.
func TestBeginLeavesMarksBeingWritten(t *testing.T) {
	t.Parallel()
	j, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(j.dir, "active", "41.tmp")
	if err := os.WriteFile(tmp, []byte(`{"proc":`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := j.Begin()
	if err != nil {
		t.Fatal(err)
	}
	s.Abandon()
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("Begin removed a mark being written: %v", err)
	}
}
