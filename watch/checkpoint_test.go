package watch

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/internal/pathglob"
)

// These tests take checkpoints of one workspace through two stores: W
// asks a real Tree what changed, F has no watcher and always walks. After
// every change both must record the same tree, the same paths left out
// and the same number of files; W must have walked exactly when its
// watcher had a gap. Restoring W's checkpoints must give back the
// workspace as it was.

// gapExclude and gapMaxSize go to both stores and to the Tree, so that
// the lists of paths left out are never empty.
var gapExclude = []string{"node_modules/**", "**/*.log"}

const gapMaxSize = 4096

// treeWatcher is a [checkpoint.Watcher] over one Tree, as the front end's
// server is; set swaps the Tree, as a restarted server does. It ignores
// root on purpose: a Tree whose workspace moved must say so itself.
type treeWatcher struct {
	mu sync.Mutex
	tr *Tree
}

func (w *treeWatcher) set(tr *Tree) {
	w.mu.Lock()
	w.tr = tr
	w.mu.Unlock()
}

func (w *treeWatcher) tree() *Tree {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tr
}

func (w *treeWatcher) Changes(string) checkpoint.Changes {
	s := w.tree().Snapshot()
	ch := checkpoint.Changes{Epoch: s.Epoch, Base: s.Base, Full: s.Full}
	for _, p := range s.Paths {
		ch.Paths = append(ch.Paths, checkpoint.Changed{Rel: p.Rel, Tree: p.Tree})
	}
	return ch
}

func (w *treeWatcher) Recorded(_ string, epoch uint64, id string) {
	w.tree().Recorded(epoch, id)
}

// openSetUp opens a Tree on root with the stores' exclusions and waits
// until its watches are set up; it records no base.
func openSetUp(t *testing.T, root string, h *hooks) *Tree {
	t.Helper()
	tr, err := Open(root, Options{Exclude: gapExclude, hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	// Set-up ends by clearing walking, under the lock that Snapshot
	// takes next: after this the first snapshot has an epoch.
	for tr.walking.Load() {
		runtime.Gosched()
	}
	return tr
}

// rig is one workspace with its two stores.
type rig struct {
	root  string
	w     *treeWatcher
	W, F  *checkpoint.Store
	r     *rand.Rand
	round int
	// states holds the workspace as each of W's checkpoints has it.
	states map[string]map[string]string
	ids    []string
}

func newRig(t *testing.T, seed uint64, h *hooks) *rig {
	t.Helper()
	g := &rig{root: tempRoot(t), w: &treeWatcher{}, r: rand.New(rand.NewPCG(seed, 16)), states: map[string]map[string]string{}}
	g.populate(t)
	g.w.set(openSetUp(t, g.root, h))
	g.openStores(t)
	return g
}

func (g *rig) openStores(t *testing.T) {
	t.Helper()
	var err error
	g.W, err = checkpoint.Open(g.root, checkpoint.Options{StateDir: t.TempDir(), Exclude: gapExclude, MaxFileSize: gapMaxSize, Watch: g.w})
	if err != nil {
		t.Fatal(err)
	}
	g.F, err = checkpoint.Open(g.root, checkpoint.Options{StateDir: t.TempDir(), Exclude: gapExclude, MaxFileSize: gapMaxSize})
	if err != nil {
		t.Fatal(err)
	}
}

func (g *rig) abs(rel string) string { return g.root + "/" + rel }

func (g *rig) content(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + g.r.IntN(26))
	}
	return b
}

func (g *rig) writeFile(t *testing.T, rel string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(g.abs(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.abs(rel), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// populate makes a few hundred files in nested directories under w/,
// which the random edits change, and around it paths the stores leave
// out (excluded, too large) and a directory to mount on.
func (g *rig) populate(t *testing.T) {
	t.Helper()
	for i := range 6 {
		for j := range 5 {
			for k := range 10 {
				g.writeFile(t, fmt.Sprintf("w/d%d/e%d/f%d", i, j, k), g.content(g.r.IntN(200)))
			}
		}
	}
	g.writeFile(t, "w/d0/e0/g/h/i/j/deep", []byte("deep"))
	for _, l := range [][2]string{{"d0/e0/f0", "w/link"}, {"nowhere", "w/d1/dangling"}} {
		if err := os.Symlink(l[0], g.abs(l[1])); err != nil {
			t.Fatal(err)
		}
	}
	g.writeFile(t, "node_modules/pkg/index.js", []byte("x"))
	g.writeFile(t, "node_modules/pkg/lib/a.js", []byte("y"))
	g.writeFile(t, "logs/a.log", []byte("a"))
	g.writeFile(t, "app.log", []byte("app"))
	g.writeFile(t, "assets/big.bin", g.content(2*gapMaxSize))
	g.writeFile(t, "assets/grow.bin", g.content(gapMaxSize/2))
	g.writeFile(t, "assets/keep.txt", []byte("keep"))
	g.writeFile(t, "mnt/under", []byte("under"))
	g.writeFile(t, "README", []byte("readme"))
}

// skipState says which paths a restore keeps as they are, so the state
// compared after one leaves them out: the excluded ones and the files
// that may be too large.
func skipState(rel string) bool {
	if rel == "assets/big.bin" || rel == "assets/grow.bin" {
		return true
	}
	for _, p := range gapExclude {
		if pathglob.Match(p, rel) {
			return true
		}
	}
	return false
}

// state maps each path of the workspace to its type, permissions and
// content or target.
func (g *rig) state(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(g.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(g.root, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && skipState(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		perm := st.Mode & 0o7777
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			m[rel] = fmt.Sprintf("dir %04o", perm)
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("file %04o %q", perm, b)
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m[rel] = "link " + target
		default:
			m[rel] = fmt.Sprintf("mode %o", st.Mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// What W's checkpoint must have done.
const (
	watched = "watched" // read what the watcher said changed
	walked  = "walked"  // walked everything
	anyWay  = "any way" // either
)

// both checkpoints W then F, and requires that they record the same
// thing and that W read or walked as want says. It returns W's result.
func (g *rig) both(t *testing.T, want string) checkpoint.Result {
	t.Helper()
	g.round++
	msg := fmt.Sprintf("round %d", g.round)
	wr, err := g.W.Checkpoint(msg)
	if err != nil {
		t.Fatalf("%s: W: %v", msg, err)
	}
	fr, err := g.F.Checkpoint(msg)
	if err != nil {
		t.Fatalf("%s: F: %v", msg, err)
	}
	if fr.Walk == "" {
		t.Fatalf("%s: F, which has no watcher, did not walk", msg)
	}
	switch {
	case want == watched && wr.Walk != "":
		t.Errorf("%s: W walked (%q) though its watcher had no gap", msg, wr.Walk)
	case want == walked && wr.Walk == "":
		t.Errorf("%s: W did not walk though its watcher had a gap", msg)
	}
	if wr.Tree != fr.Tree || wr.Files != fr.Files {
		t.Fatalf("%s (W walk %q): W recorded tree %s with %d files, F %s with %d", msg, wr.Walk, wr.Tree, wr.Files, fr.Tree, fr.Files)
	}
	if d := cmp.Diff(fr.LeftOut, wr.LeftOut); d != "" {
		t.Fatalf("%s (W walk %q): left out (-F +W):\n%s", msg, wr.Walk, d)
	}
	if len(wr.LeftOut) == 0 {
		t.Fatalf("%s: nothing left out: the test lost its excluded paths", msg)
	}
	if _, ok := g.states[wr.ID]; !ok {
		g.ids = append(g.ids, wr.ID)
	}
	g.states[wr.ID] = g.state(t)
	return wr
}

// restore puts W back at checkpoint id and requires the workspace to be
// as it was then; the next checkpoints must agree again, read as want.
func (g *rig) restore(t *testing.T, id, want string) {
	t.Helper()
	if _, err := g.W.Restore(id); err != nil {
		t.Fatalf("restore %s: %v", id[:12], err)
	}
	if d := cmp.Diff(g.states[id], g.state(t)); d != "" {
		t.Fatalf("after restoring %s (-then +now):\n%s", id[:12], d)
	}
	g.both(t, want)
}

// restoreSome restores a random earlier checkpoint.
func (g *rig) restoreSome(t *testing.T, want string) {
	t.Helper()
	g.restore(t, g.ids[g.r.IntN(len(g.ids))], want)
}

// area lists the directories, files and symlinks under w/.
type area struct{ dirs, files, links []string }

func (g *rig) area(t *testing.T) area {
	t.Helper()
	var a area
	err := filepath.WalkDir(g.abs("w"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(g.root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			a.dirs = append(a.dirs, rel)
		case d.Type()&fs.ModeSymlink != 0:
			a.links = append(a.links, rel)
		default:
			a.files = append(a.files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (g *rig) pick(s []string) string { return s[g.r.IntN(len(s))] }

// free returns a name in dir that does not exist.
func (g *rig) free(dir, prefix string) string {
	for {
		rel := fmt.Sprintf("%s/%s%d", dir, prefix, g.r.IntN(1000))
		if _, err := os.Lstat(g.abs(rel)); err != nil {
			return rel
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mutate makes n random edits.
func (g *rig) mutate(t *testing.T, n int) {
	t.Helper()
	for range n {
		g.edit(t)
	}
}

func (g *rig) edit(t *testing.T) {
	t.Helper()
	a := g.area(t)
	subdirs := a.dirs[1:] // a.dirs[0] is w itself
	r := g.r
	switch r.IntN(15) {
	case 0, 1: // create a file
		g.writeFile(t, g.free(g.pick(a.dirs), "f"), g.content(r.IntN(300)))
	case 2, 3: // modify a file, often to the same size
		if len(a.files) == 0 {
			return
		}
		p := g.pick(a.files)
		fi, err := os.Stat(g.abs(p))
		must(t, err)
		n := int(fi.Size())
		if r.IntN(2) == 0 {
			n = r.IntN(300)
		}
		must(t, os.WriteFile(g.abs(p), g.content(n), 0))
	case 4: // delete a file or symlink
		if all := append(a.files, a.links...); len(all) > 0 {
			must(t, os.Remove(g.abs(g.pick(all))))
		}
	case 5: // rename a file, maybe to another directory
		if len(a.files) > 0 {
			must(t, os.Rename(g.abs(g.pick(a.files)), g.abs(g.free(g.pick(a.dirs), "r"))))
		}
	case 6: // rename a directory, maybe into another
		if len(subdirs) == 0 {
			return
		}
		d, to := g.pick(subdirs), g.pick(a.dirs)
		if to == d || strings.HasPrefix(to, d+"/") {
			return
		}
		must(t, os.Rename(g.abs(d), g.abs(g.free(to, "m"))))
	case 7: // mkdir -p deep, and write in it at once
		d := g.free(g.pick(a.dirs), "p") + fmt.Sprintf("/q%d/s%d", r.IntN(9), r.IntN(9))
		must(t, os.MkdirAll(g.abs(d), 0o755))
		g.writeFile(t, d+"/x", g.content(r.IntN(100)))
	case 8: // chmod a file or a directory
		if r.IntN(2) == 0 && len(a.files) > 0 {
			perms := []os.FileMode{0o600, 0o644, 0o640, 0o755, 0o700}
			must(t, os.Chmod(g.abs(g.pick(a.files)), perms[r.IntN(len(perms))]))
		} else if len(subdirs) > 0 {
			perms := []os.FileMode{0o755, 0o700, 0o750, 0o775}
			must(t, os.Chmod(g.abs(g.pick(subdirs)), perms[r.IntN(len(perms))]))
		}
	case 9: // a symlink
		targets := []string{"f0", "../e1", "nowhere", "/etc/passwd", "."}
		must(t, os.Symlink(targets[r.IntN(len(targets))], g.abs(g.free(g.pick(a.dirs), "l"))))
	case 10: // rm -rf a directory and make it again
		if len(subdirs) == 0 {
			return
		}
		d := g.pick(subdirs)
		must(t, os.RemoveAll(g.abs(d)))
		for range 1 + r.IntN(4) {
			g.writeFile(t, g.free(d, "n"), g.content(r.IntN(100)))
		}
	case 11: // a file becomes a directory, or a symlink a file
		if r.IntN(2) == 0 && len(a.files) > 0 {
			p := g.pick(a.files)
			must(t, os.Remove(g.abs(p)))
			g.writeFile(t, p+"/inside", []byte("was a file"))
		} else if len(a.links) > 0 {
			p := g.pick(a.links)
			must(t, os.Remove(g.abs(p)))
			g.writeFile(t, p, []byte("was a link"))
		}
	case 12: // paths left out: excluded ones come and go
		switch r.IntN(4) {
		case 0:
			g.writeFile(t, fmt.Sprintf("logs/x%d.log", r.IntN(5)), g.content(10))
		case 1:
			g.writeFile(t, fmt.Sprintf("node_modules/pkg/f%d.js", r.IntN(5)), g.content(10))
		case 2:
			if ents, _ := os.ReadDir(g.abs("logs")); len(ents) > 1 {
				must(t, os.Remove(g.abs("logs/"+ents[r.IntN(len(ents))].Name())))
			}
		case 3:
			must(t, os.RemoveAll(g.abs("node_modules")))
			if r.IntN(3) > 0 {
				g.writeFile(t, "node_modules/pkg/index.js", g.content(5))
			}
		}
	case 13: // a file grows past the size limit, or shrinks below it
		n := gapMaxSize/2 + r.IntN(gapMaxSize)
		must(t, os.WriteFile(g.abs("assets/grow.bin"), g.content(n), 0))
	case 14: // the workspace's own permissions
		perms := []os.FileMode{0o755, 0o750, 0o700}
		must(t, os.Chmod(g.root, perms[r.IntN(len(perms))]))
	}
}

func gapRounds(long, short int) int {
	if testing.Short() {
		return short
	}
	return long
}

func TestCheckpointThroughWatcher(t *testing.T) {
	t.Parallel()

	t.Run("normal", func(t *testing.T) {
		t.Parallel()
		g := newRig(t, 1, nil)
		g.both(t, walked) // no base yet
		for i := range gapRounds(40, 8) {
			g.mutate(t, 1+g.r.IntN(12))
			g.both(t, watched)
			if i%7 == 6 {
				g.restoreSome(t, watched)
			}
		}
		// Nothing changed: W answers from its newest checkpoint.
		g.both(t, watched)
		g.restoreSome(t, watched)
	})

	t.Run("queue overflow", func(t *testing.T) {
		t.Parallel()
		limit := maxQueued(t)
		var pause sync.Mutex
		var armed atomic.Bool
		blocked := make(chan struct{})
		g := newRig(t, 2, &hooks{beforeRead: func() {
			if armed.CompareAndSwap(true, false) {
				blocked <- struct{}{}
			}
			pause.Lock()
			defer pause.Unlock()
		}})
		g.both(t, walked)
		g.mutate(t, 10)
		g.both(t, watched)

		// Stop the reader before its next read.
		armed.Store(true)
		pause.Lock()
		g.writeFile(t, "w/ev0", []byte("0"))
		<-blocked
		f0, err := os.OpenFile(g.abs("w/ev0"), os.O_WRONLY, 0)
		must(t, err)
		f1, err := os.Create(g.abs("w/ev1"))
		must(t, err)
		// Alternate the files, or the kernel merges the events.
		for i := range limit + 1000 {
			f := f0
			if i%2 == 1 {
				f = f1
			}
			if _, err := f.WriteAt([]byte{byte('a' + i%26)}, 0); err != nil {
				t.Fatal(err)
			}
		}
		must(t, f0.Close())
		must(t, f1.Close())
		// The events of these are lost.
		g.mutate(t, 20)
		must(t, os.MkdirAll(g.abs("w/lost/deeper"), 0o755))
		g.writeFile(t, "w/lost/deeper/x", []byte("lost"))
		pause.Unlock()
		if wr := g.both(t, walked); wr.Walk != reasonOverflow {
			t.Errorf("W walked for %q, want %q", wr.Walk, reasonOverflow)
		}
		if st := g.w.tree().Status(); st.Overflows == 0 {
			t.Errorf("the kernel queue did not overflow")
		}
		// The rescan watches what was made meanwhile.
		g.writeFile(t, "w/lost/deeper/x", []byte("seen"))
		g.both(t, watched)
		for range gapRounds(5, 2) {
			g.mutate(t, 8)
			g.both(t, watched)
		}
		g.restoreSome(t, watched)
	})

	t.Run("watch limit", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int32
		g := newRig(t, 3, &hooks{addWatch: func(fd int, p string, mask uint32) (int, error) {
			if n.Add(1) > 10 {
				return -1, unix.ENOSPC
			}
			return unix.InotifyAddWatch(fd, p, mask)
		}})
		g.both(t, walked) // "watch starting" is the first reason
		for range gapRounds(10, 4) {
			g.mutate(t, 8)
			if wr := g.both(t, walked); !strings.HasPrefix(wr.Walk, "watch limit reached") {
				t.Errorf("W walked for %q, want the watch limit", wr.Walk)
			}
		}
		g.restoreSome(t, walked)
	})

	t.Run("daemon restart", func(t *testing.T) {
		t.Parallel()
		g := newRig(t, 4, nil)
		g.both(t, walked)
		g.mutate(t, 10)
		g.both(t, watched)
		must(t, g.w.tree().Close())
		g.mutate(t, 10) // no watcher sees these
		g.w.set(openSetUp(t, g.root, nil))
		g.mutate(t, 5) // the new watcher sees these, but has no base
		g.both(t, walked)
		for range gapRounds(6, 3) {
			g.mutate(t, 8)
			g.both(t, watched)
		}
		g.restoreSome(t, watched)
	})

	t.Run("changes while no watcher ran", func(t *testing.T) {
		t.Parallel()
		g := newRig(t, 5, nil)
		g.both(t, walked)
		g.mutate(t, 10)
		g.both(t, watched)
		must(t, g.w.tree().Close())
		g.mutate(t, 10)
		// A checkpoint through the closed watcher walks, and so does the
		// first through a new one: neither saw these changes.
		if wr := g.both(t, walked); wr.Walk != "watch closed" {
			t.Errorf("W walked for %q, want %q", wr.Walk, "watch closed")
		}
		g.mutate(t, 10)
		g.w.set(openSetUp(t, g.root, nil))
		g.both(t, walked)
		g.mutate(t, 8)
		g.both(t, watched)
		g.restoreSome(t, watched)
	})

	t.Run("unreported mount", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("mounting a tmpfs in the workspace needs root")
		}
		g := newRig(t, 6, nil)
		g.both(t, walked)
		g.mutate(t, 5)
		g.both(t, watched)
		mnt := g.abs("mnt")
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v", err)
		}
		mounted := true
		t.Cleanup(func() {
			if mounted {
				if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
					t.Errorf("unmount %s: %v", mnt, err)
				}
			}
			if mountedUnder(t, g.root) {
				t.Errorf("a mount is left under %s", g.root)
			}
		})
		g.writeFile(t, "mnt/a", []byte("in the tmpfs"))
		g.writeFile(t, "mnt/sub/b", []byte("deeper"))
		if wr := g.both(t, walked); wr.Walk != reasonMounts {
			t.Errorf("W walked for %q, want %q", wr.Walk, reasonMounts)
		}
		g.writeFile(t, "mnt/sub/b", []byte("changed"))
		g.mutate(t, 5)
		g.both(t, watched)
		must(t, unix.Unmount(mnt, 0))
		mounted = false
		if wr := g.both(t, walked); wr.Walk != reasonMounts {
			t.Errorf("after unmount W walked for %q, want %q", wr.Walk, reasonMounts)
		}
		// The unmount also queues IN_UNMOUNT, whose rescan the reader may
		// be doing during that checkpoint: its snapshot then has no epoch
		// and is not kept, so one more checkpoint may walk.
		g.mutate(t, 5)
		if wr := g.both(t, anyWay); wr.Walk != "" && wr.Walk != reasonMounts {
			t.Errorf("W walked for %q, want %q or not at all", wr.Walk, reasonMounts)
		}
		g.mutate(t, 5)
		g.both(t, watched)
	})

	t.Run("workspace moved", func(t *testing.T) {
		t.Parallel()
		g := newRig(t, 7, nil)
		g.both(t, walked)
		g.mutate(t, 5)
		g.both(t, watched)
		// Away and back: the watches followed it, and saw the changes
		// made while it was away, but the Tree cannot know what else.
		home := g.root
		must(t, os.Rename(home, home+".away"))
		g.root = home + ".away"
		g.mutate(t, 5)
		g.root = home
		must(t, os.Rename(home+".away", home))
		for range 2 {
			if wr := g.both(t, walked); wr.Walk != reasonRootGone {
				t.Errorf("W walked for %q, want %q", wr.Walk, reasonRootGone)
			}
			g.mutate(t, 3)
		}
		// To a new name, with stores opened there and the old Tree.
		g.root = home + ".moved"
		must(t, os.Rename(home, g.root))
		g.openStores(t)
		g.ids, g.states = nil, map[string]map[string]string{}
		for range 2 {
			g.both(t, walked)
			g.mutate(t, 3)
		}
		g.restoreSome(t, walked)
	})

	t.Run("racy git", func(t *testing.T) {
		t.Parallel()
		g := newRig(t, 8, nil)
		g.both(t, walked)
		type second struct{ id, data string }
		var seconds []second
		for i := range gapRounds(20, 6) {
			first := fmt.Sprintf("first %04d", i)
			g.writeFile(t, "w/racy", []byte(first))
			fi, err := os.Stat(g.abs("w/racy"))
			must(t, err)
			r1 := g.both(t, watched)
			// The same size, at once: most often in the same mtime tick;
			// every other time the mtime is also set back, as a tool
			// that keeps times would.
			data := fmt.Sprintf("again %04d", i)
			g.writeFile(t, "w/racy", []byte(data))
			if i%2 == 1 {
				must(t, os.Chtimes(g.abs("w/racy"), fi.ModTime(), fi.ModTime()))
			}
			r2 := g.both(t, watched)
			if r2.Tree == r1.Tree {
				t.Fatalf("round %d: the second write is in no checkpoint", i)
			}
			seconds = append(seconds, second{r2.ID, data})
		}
		g.writeFile(t, "w/racy", []byte("third 0000"))
		g.both(t, watched)
		for _, k := range []int{0, 1, len(seconds) - 1} {
			s := seconds[k]
			g.restore(t, s.id, watched)
			got, err := os.ReadFile(g.abs("w/racy"))
			must(t, err)
			if string(got) != s.data {
				t.Errorf("restored w/racy = %q, want %q", got, s.data)
			}
		}
	})
}

// maxQueued reads the kernel's bound on queued inotify events.
func maxQueued(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skipf("cannot read the inotify queue size: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mountedUnder reports whether /proc/self/mountinfo lists a mount point
// under root.
func mountedUnder(t *testing.T, root string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 && (f[4] == root || strings.HasPrefix(f[4], root+"/")) {
			return true
		}
	}
	return false
}
