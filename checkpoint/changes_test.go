package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-cmp/cmp"
)

// oracleWatcher hands a store the changes its test computed: the paths
// whose state differs between two snapshots of the workspace, exactly
// what a watcher that missed nothing would report (plus, at random,
// paths that did not change, which must be harmless).
type oracleWatcher struct {
	next  Changes
	epoch uint64
	// base is the checkpoint last Recorded for the newest epoch.
	base string
}

func (w *oracleWatcher) Changes(string) Changes {
	w.epoch++
	c := w.next
	c.Epoch = w.epoch
	if w.base == "" {
		c.Full = "no checkpoint recorded yet"
	}
	c.Base = w.base
	return c
}

func (w *oracleWatcher) Recorded(_ string, epoch uint64, id string) {
	if epoch == w.epoch {
		w.base = id
	}
}

// fsState is a snapshot of the workspace, the root's permissions
// included (snapshotFS leaves the root out).
func fsState(t testing.TB, root string) map[string]string {
	t.Helper()
	out := snapshotFS(t, root, nil)
	fi, err := os.Lstat(root)
	if err != nil {
		t.Fatal(err)
	}
	out["."] = "dir" + permSuffix(fi, 0o755)
	return out
}

// changedPaths lists what differs between two states, and at random a
// few paths that did not, some marked Tree.
func changedPaths(r *rand.Rand, a, b map[string]string) []Changed {
	var out []Changed
	for k, v := range a {
		if b[k] != v {
			out = append(out, Changed{Rel: k})
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, Changed{Rel: k})
		}
	}
	if r.IntN(3) == 0 {
		keys := make([]string, 0, len(b))
		for k := range b {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for range r.IntN(4) {
			if len(keys) == 0 {
				break
			}
			k := keys[r.IntN(len(keys))]
			out = append(out, Changed{Rel: k, Tree: k != "." && strings.HasPrefix(b[k], "dir") && r.IntN(2) == 0})
		}
	}
	return out
}

// TestWatchedCheckpointProperty: a checkpoint that reads only what its
// watcher says changed records, byte for byte, the tree, the list of
// paths left out and the count of files that a walk of everything
// records; and a restore through it gives the workspace a restore must.
func TestWatchedCheckpointProperty(t *testing.T) {
	t.Parallel()
	cases := 300
	if testing.Short() || raceEnabled() {
		cases = 80
	}
	seed := propSeed(t)
	t.Logf("seed %d, %d cases (reproduce with UNDOSH_SEED=%d)", seed, cases, seed)
	read := 0
	for i := range cases {
		name := fmt.Sprintf("case-%04d", i)
		t.Run(name, func(t *testing.T) {
			m := &propMutator{t: t, r: rand.New(rand.NewPCG(seed, uint64(i))), root: t.TempDir()}
			defer func() {
				if t.Failed() {
					t.Logf("reproduce: UNDOSH_SEED=%d go test -run 'TestWatchedCheckpointProperty/%s$' ./checkpoint\nops:\n  %s",
						seed, name, strings.Join(m.ops, "\n  "))
				}
			}()
			t.Cleanup(func() { propRemovable(t, m.root) })
			w := &oracleWatcher{}
			opts := Options{Exclude: propExclude, MaxFileSize: propMaxSize, Workers: 2}
			walked := openStore(t, m.root, opts)
			opts.Watch = w
			watched := openStore(t, m.root, opts)
			for range 1 + m.r.IntN(6) {
				m.step()
			}
			var ids []string
			var states []map[string]string
			seen := fsState(t, m.root) // the state at the last checkpoint recorded
			check := func(what string) {
				t.Helper()
				now := fsState(t, m.root)
				w.next = Changes{Paths: changedPaths(m.r, seen, now)}
				rw, err := watched.Checkpoint(what)
				if err != nil {
					t.Fatalf("watched checkpoint %s: %v", what, err)
				}
				rf, err := walked.Checkpoint(what)
				if err != nil {
					t.Fatalf("checkpoint %s: %v", what, err)
				}
				if rw.Walk == "" {
					read++
				}
				m.logf("checkpoint %s = %s (walk: %q, changes %v)", what, rw.ID[:12], rw.Walk, w.next.Paths)
				compareCheckpoints(t, watched, rw.ID, walked, rf.ID)
				if rw.Files != rf.Files {
					t.Errorf("checkpoint %s: watched records %d files, the walk %d", what, rw.Files, rf.Files)
				}
				if diff := cmp.Diff(rf.LeftOut, rw.LeftOut); diff != "" {
					t.Errorf("checkpoint %s: left out (-walk +watched):\n%s", what, diff)
				}
				seen = now
				ids, states = append(ids, rw.ID), append(states, now)
			}
			check("first")
			for k := range 2 + m.r.IntN(5) {
				for range m.r.IntN(8) {
					m.step()
				}
				check(fmt.Sprintf("c%d", k))
				if m.r.IntN(3) == 0 {
					// A restore through the watcher, then the checkpoint
					// after it compared again.
					j := m.r.IntN(len(ids))
					for range m.r.IntN(4) {
						m.step()
					}
					before := fsState(t, m.root)
					w.next = Changes{Paths: changedPaths(m.r, seen, before)}
					m.logf("restore %s", ids[j][:12])
					if _, err := watched.Restore(ids[j]); err != nil {
						t.Fatalf("restore %s: %v", ids[j][:12], err)
					}
					seen = before
					got := fsState(t, m.root)
					want := propWantAfterRestore(withoutRoot(states[j]), withoutRoot(before))
					want["."] = states[j]["."]
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("restore %s (-want +got):\n%s", ids[j][:12], diff)
					}
					check(fmt.Sprintf("after restore %d", k))
				}
			}
		})
	}
	if read == 0 {
		t.Errorf("no checkpoint read only what changed: the cases never test it")
	}
}

// compareCheckpoints fails unless two checkpoints record the same tree
// and the same list of paths left out.
func compareCheckpoints(t *testing.T, a *Store, idA string, b *Store, idB string) {
	t.Helper()
	ca, err := a.commit(plumbing.NewHash(idA))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.commit(plumbing.NewHash(idB))
	if err != nil {
		t.Fatal(err)
	}
	if ca.TreeHash == cb.TreeHash && leftListOf(ca) == leftListOf(cb) {
		return
	}
	var changes []Change
	if err := diff("", cb.TreeHash, ca.TreeHash, storeSide{b.objects()}, storeSide{a.objects()}, &changes); err != nil {
		t.Fatalf("trees differ (%s, %s) and cannot be compared: %v", short(ca.TreeHash), short(cb.TreeHash), err)
	}
	var lines []string
	for _, c := range changes {
		lines = append(lines, c.Kind+" "+path.Clean(c.Path))
	}
	t.Fatalf("the watched checkpoint differs from a walk: tree %s vs %s, left-out list %s vs %s; from the walk's to the watched:\n  %s",
		short(ca.TreeHash), short(cb.TreeHash), leftListOf(ca), leftListOf(cb), strings.Join(lines, "\n  "))
}

func withoutRoot(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != "." {
			out[k] = v
		}
	}
	return out
}

// TestPacksStayFew: every checkpoint writes a pack, and every read looks
// in each, so a long chain merges its small packs: their number stays
// bounded, and every checkpoint stays whole.
func TestPacksStayFew(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	w := &oracleWatcher{}
	s := openStore(t, ws, Options{Watch: w})
	var ids []string
	for i := range 3 * maxPacks {
		name := fmt.Sprintf("f%d.txt", i%7)
		if err := os.WriteFile(filepath.Join(ws, name), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		w.next = Changes{Paths: []Changed{{Rel: name}}}
		r, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	packs, err := filepath.Glob(filepath.Join(s.git, "objects", "pack", "pack-*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	if len(packs) > maxPacks+1 {
		t.Errorf("%d packs after %d checkpoints: the small ones were not merged", len(packs), len(ids))
	}
	r, err := s.Check()
	if err != nil || len(r.Problems) > 0 {
		t.Fatalf("check: %v %v", err, r.Problems)
	}
	if r.Checkpoints != len(ids) {
		t.Errorf("check counts %d checkpoints, want %d", r.Checkpoints, len(ids))
	}
	if _, err := s.Restore(ids[0]); err != nil {
		t.Fatalf("restore the first checkpoint: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f0.txt")); string(b) != "0" {
		t.Errorf("f0.txt after restoring the first checkpoint: %q", b)
	}
}

// TestCurrent: the newest checkpoint stands for the workspace only while
// the watcher saw nothing change since it.
func TestCurrent(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	w := &oracleWatcher{}
	s := openStore(t, ws, Options{Watch: w})
	if _, ok := s.Current(); ok {
		t.Fatal("Current with no checkpoint yet")
	}
	r, err := s.Checkpoint("")
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := s.Current(); !ok || id != r.ID {
		t.Errorf("Current = %s, %v; want %s", id, ok, r.ID)
	}
	w.next = Changes{Paths: []Changed{{Rel: "a"}}}
	if _, ok := s.Current(); ok {
		t.Error("Current although the watcher saw a change")
	}
	w.next = Changes{Full: "event queue overflowed"}
	if _, ok := s.Current(); ok {
		t.Error("Current although the watcher cannot tell")
	}
	if _, ok := openStore(t, ws, Options{}).Current(); ok {
		t.Error("Current with no watcher")
	}
}
