package watch

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPropertyCovers runs random file-system operations in a watched tree
// and checks, after each round, that every path whose lstat (but atime),
// content or listing changed is covered by the snapshot, or that the
// snapshot is Full for a reason the round earned.
func TestPropertyCovers(t *testing.T) {
	t.Parallel()
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			runProperty(t, uint64(seed))
		})
	}
}

func runProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	root := tempRoot(t)
	outside := t.TempDir()
	write(t, root+"/a/b/f", "f")
	write(t, root+"/g", "g")
	tr := openReady(t, root, Options{})
	full := 0
	for round := range 12 {
		before := record(t, root)
		var done []string
		for range 1 + rng.IntN(8) {
			op, _ := randomOp(t, rng, root, outside)
			done = append(done, op)
		}
		s := tr.Snapshot()
		after := record(t, root)
		if s.Full != "" {
			// A change in a tree with hard links is the only reason
			// these operations may earn.
			if !strings.Contains(s.Full, "hard-linked") && !strings.Contains(s.Full, "hard links") {
				t.Fatalf("round %d: Full %q after %v", round, s.Full, done)
			}
			full++
		} else if miss := uncovered(before, after, s); len(miss) > 0 {
			slices.Sort(miss)
			t.Fatalf("round %d: after %v\nsnapshot %v\nmisses:\n%s", round, done, rels(s.Paths), strings.Join(miss, "\n"))
		}
		tr.Recorded(s.Epoch, fmt.Sprint("t", round))
	}
	t.Logf("%d of 12 snapshots Full", full)
}

// randomOp does one random operation and says what it did, and whether
// it changed a file through a hard link.
func randomOp(t *testing.T, rng *rand.Rand, root, outside string) (string, bool) {
	var files, dirs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type().IsRegular():
			files = append(files, p)
		}
		return nil
	})
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	name := func() string { return fmt.Sprintf("n%d", rng.IntN(1000)) }
	relOf := func(p string) string { r, _ := filepath.Rel(root, p); return r }
	try := func(err error) {
		// Random operations may collide (a name already there, a
		// directory not empty); that is fine, as long as nothing panics.
		_ = err
	}
	subdirs := dirs[1:]
	switch rng.IntN(17) {
	case 0:
		p := pick(dirs) + "/" + name()
		try(os.WriteFile(p, []byte(name()), 0o644))
		return "create " + relOf(p), false
	case 1:
		if len(files) == 0 {
			return "nothing", false
		}
		p := pick(files)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			f.WriteString("more")
			f.Close()
		}
		return "append " + relOf(p), isLinked(p)
	case 2:
		if len(files) == 0 {
			return "nothing", false
		}
		p := pick(files)
		try(os.Truncate(p, 1))
		return "truncate " + relOf(p), isLinked(p)
	case 3:
		if len(files) == 0 {
			return "nothing", false
		}
		p := pick(files)
		try(os.Remove(p))
		return "rm " + relOf(p), false
	case 4:
		p := pick(dirs) + "/" + name() + "/" + name() + "/" + name()
		try(os.MkdirAll(p, 0o755))
		try(os.WriteFile(p+"/inside", []byte("x"), 0o644))
		return "mkdir -p and write " + relOf(p), false
	case 5:
		if len(subdirs) == 0 {
			return "nothing", false
		}
		p := pick(subdirs)
		try(os.Remove(p))
		return "rmdir " + relOf(p), false
	case 6:
		if len(subdirs) == 0 {
			return "nothing", false
		}
		p := pick(subdirs)
		try(os.RemoveAll(p))
		try(os.MkdirAll(p, 0o755))
		try(os.WriteFile(p+"/again", []byte("x"), 0o644))
		return "rm -rf and recreate " + relOf(p), false
	case 7:
		if len(files) == 0 {
			return "nothing", false
		}
		p, q := pick(files), pick(dirs)+"/"+name()
		try(os.Rename(p, q))
		return "mv " + relOf(p) + " " + relOf(q), false
	case 8:
		if len(subdirs) == 0 {
			return "nothing", false
		}
		p, q := pick(subdirs), pick(dirs)+"/"+name()
		if strings.HasPrefix(q, p+"/") {
			return "nothing", false
		}
		try(os.Rename(p, q))
		return "mv dir " + relOf(p) + " " + relOf(q), false
	case 9:
		if len(subdirs) == 0 {
			return "nothing", false
		}
		p, q := pick(subdirs), pick(dirs)+"/"+name()
		if strings.HasPrefix(q, p+"/") || q == p {
			return "nothing", false
		}
		o := outside + "/" + name()
		try(os.Rename(p, o))
		try(os.WriteFile(o+"/while-out", []byte("x"), 0o644))
		try(os.Rename(o, q))
		return "mv dir out " + relOf(p) + " and back as " + relOf(q), false
	case 10:
		if len(files) == 0 {
			return "nothing", false
		}
		p := pick(files)
		try(os.Chmod(p, fs.FileMode(0o600+rng.IntN(0o100))))
		return "chmod " + relOf(p), isLinked(p)
	case 11:
		p := pick(dirs)
		try(os.Chmod(p, fs.FileMode(0o700+rng.IntN(0o77))))
		return "chmod dir " + relOf(p), false
	case 12:
		try(os.Chmod(root, fs.FileMode(0o750+rng.IntN(0o7))))
		return "chmod root", false
	case 13:
		d := pick(dirs)
		a, b := d+"/"+name(), d+"/"+name()
		try(os.Symlink(path.Base(b), a))
		try(os.Symlink(path.Base(a), b))
		try(os.Symlink("..", d+"/"+name()))
		return "symlink loop in " + relOf(d), false
	case 14:
		if len(files) == 0 {
			return "nothing", false
		}
		p, q := pick(files), pick(dirs)+"/"+name()
		try(os.Link(p, q))
		return "ln " + relOf(p) + " " + relOf(q), false
	case 15:
		p := pick(dirs) + "/" + name()
		try(os.Mkdir(p, 0o755))
		return "mkdir " + relOf(p), false
	default:
		if len(files) == 0 {
			return "nothing", false
		}
		p := pick(files)
		try(os.WriteFile(p, []byte(name()), 0o644))
		return "rewrite " + relOf(p), isLinked(p)
	}
}

func isLinked(p string) bool {
	st, err := os.Lstat(p)
	if err != nil {
		return false
	}
	n, ok := nlink(st)
	return ok && n > 1
}
