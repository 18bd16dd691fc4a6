package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"
)

// propMaxSize is the size limit of the property test: small, so that
// files near and over it are cheap to make.
const propMaxSize = 4 << 10

// propExclude are the property test's excludes; propExcluded says which
// paths they leave out, written independently of pathglob.
var propExclude = []string{"**/node_modules/**", "*.log"}

func propExcluded(rel string) bool {
	parts := strings.Split(rel, "/")
	if strings.HasSuffix(parts[0], ".log") {
		return true
	}
	return slices.Contains(parts, "node_modules")
}

// propOversized reports whether a snapshotFS value is a regular file over
// the limit.
func propOversized(v string) bool {
	return propIsFile(v) && len(v)-strings.IndexByte(v, ':')-1 > propMaxSize
}

func propIsFile(v string) bool { return strings.HasPrefix(v, "file") }

func propIsDir(v string) bool { return strings.HasPrefix(v, "dir") }

// propFilePerms and propDirPerms are the modes random files and
// directories get besides the defaults. All of them let the owner read
// (a file or directory it cannot read is left out, which the cases do not
// model) and enter a directory.
var (
	propFilePerms = []uint32{0o600, 0o640, 0o444, 0o400, 0o700, 0o750, 0o555, 0o744, 0o604, 0o664, 0o645, 0o4755, 0o2755, 0o1644}
	propDirPerms  = []uint32{0o700, 0o750, 0o711, 0o500, 0o555, 0o775, 0o2775, 0o2755, 0o1777, 0o1755}
)

// propNames are the path elements random paths are made of: few, so that
// paths collide, and awkward.
var propNames = []string{
	"a", "b", "f.txt", "sp ace", "new\nline", "\xff\xfe\x80", "~", "~t", "~perms", "perms",
	"~.git", ".git", "node_modules", "app.log", "x.log", "-dash",
	strings.Repeat("L", propLongName), // the longest a restore can handle: see TestRestoreLongName
}

// propMutator applies random changes to a workspace and logs them.
type propMutator struct {
	t    testing.TB
	r    *rand.Rand
	root string
	ops  []string
}

func (m *propMutator) abs(rel string) string { return filepath.Join(m.root, filepath.FromSlash(rel)) }

func (m *propMutator) logf(format string, args ...any) {
	m.ops = append(m.ops, fmt.Sprintf(format, args...))
}

func (m *propMutator) randPath() string {
	n := 1 + m.r.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = propNames[m.r.IntN(len(propNames))]
	}
	return strings.Join(parts, "/")
}

// existing lists the workspace's paths of a kind: 'f' regular files, 'd'
// directories, 'l' symlinks, 0 any.
func (m *propMutator) existing(kind byte) []string {
	var out []string
	err := filepath.WalkDir(m.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == m.root {
			return nil
		}
		rel, _ := filepath.Rel(m.root, p)
		k := byte('f')
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			k = 'l'
		case d.IsDir():
			k = 'd'
		}
		if kind == 0 || kind == k {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return out
}

func (m *propMutator) pick(kind byte) (string, bool) {
	l := m.existing(kind)
	if len(l) == 0 {
		return "", false
	}
	return l[m.r.IntN(len(l))], true
}

// ensureParent makes the parent directories of rel, replacing whatever
// non-directory stands in the way (a file↔directory swap).
func (m *propMutator) ensureParent(rel string) {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		q := strings.Join(parts[:i], "/")
		p := m.abs(q)
		fi, err := os.Lstat(p)
		if err == nil && fi.IsDir() {
			continue
		}
		m.open(path.Dir(q))
		if err == nil {
			if err := os.Remove(p); err != nil {
				m.t.Fatal(err)
			}
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			m.t.Fatal(err)
		}
	}
}

// open lets the owner write in the directory rel, as an agent would with
// chmod u+w before changing what is in a read-only directory. (Only root
// could do without.)
func (m *propMutator) open(rel string) {
	var st unix.Stat_t
	if err := unix.Lstat(m.abs(rel), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o700 == 0o700 {
		return
	}
	m.logf("chmod u+rwx %q", rel)
	if err := unix.Chmod(m.abs(rel), st.Mode&0o7777|0o700); err != nil {
		m.t.Fatal(err)
	}
}

// clear removes whatever is at rel.
func (m *propMutator) clear(rel string) {
	m.open(path.Dir(rel))
	propRemovable(m.t, m.abs(rel))
	if err := os.RemoveAll(m.abs(rel)); err != nil {
		m.t.Fatal(err)
	}
}

// propRemovable lets the owner write in every directory under root, so
// that it can be removed.
func propRemovable(t testing.TB, root string) {
	t.Helper()
	if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
		return // WalkDir would follow a symlink
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o700)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// filePerm and dirPerm pick a random mode, the default most often.
func (m *propMutator) filePerm(exec bool) uint32 {
	switch {
	case m.r.IntN(3) == 0:
		return propFilePerms[m.r.IntN(len(propFilePerms))]
	case exec:
		return 0o755
	}
	return 0o644
}

func (m *propMutator) dirPerm() uint32 {
	if m.r.IntN(3) == 0 {
		return propDirPerms[m.r.IntN(len(propDirPerms))]
	}
	return 0o755
}

// chmod sets the mode of rel, setuid, setgid and sticky included.
func (m *propMutator) chmod(rel string, perm uint32) {
	if err := unix.Chmod(m.abs(rel), perm); err != nil {
		m.t.Fatal(err)
	}
}

func (m *propMutator) content() string {
	var n int
	switch m.r.IntN(12) {
	case 0:
		n = propMaxSize - 2 + m.r.IntN(5) // just under, at and just over
	case 1:
		n = 2*propMaxSize + m.r.IntN(100)
	case 2:
		return ""
	default:
		n = m.r.IntN(40)
	}
	b := []byte(strconv.FormatUint(m.r.Uint64(), 36) + ":")
	for len(b) < n {
		b = append(b, "abc\n\x00\xff"[m.r.IntN(6)])
	}
	return string(b[:min(len(b), max(n, 1))])
}

// writeFile writes rel with mode perm.
func (m *propMutator) writeFile(rel, content string, perm uint32) {
	m.ensureParent(rel)
	m.open(path.Dir(rel))
	p := m.abs(rel)
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		m.clear(rel)
	} else if err == nil && fi.Mode()&0o200 == 0 {
		m.chmod(rel, 0o600) // read-only: the owner makes it writable first
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
	m.chmod(rel, perm) // an existing file keeps its mode; a write drops setuid
}

// step applies one random change.
func (m *propMutator) step() {
	switch op := m.r.IntN(13); op {
	case 0, 1: // create
		p, c, perm := m.randPath(), m.content(), m.filePerm(m.r.IntN(4) == 0)
		m.logf("create %q (%d bytes, mode %04o)", p, len(c), perm)
		m.writeFile(p, c, perm)
	case 2: // modify
		p, ok := m.pick('f')
		if !ok {
			return
		}
		fi, err := os.Lstat(m.abs(p))
		if err != nil {
			m.t.Fatal(err)
		}
		c := m.content()
		if m.r.IntN(3) == 0 { // same size, other bytes: only the stat cache can miss it
			b, err := os.ReadFile(m.abs(p))
			if err != nil {
				m.t.Fatal(err)
			}
			for i := range b {
				b[i] ^= 1
			}
			c = string(b)
		}
		m.logf("modify %q (%d bytes)", p, len(c))
		m.writeFile(p, c, uint32(fi.Sys().(*syscall.Stat_t).Mode&0o7777))
	case 3: // delete
		p, ok := m.pick(0)
		if !ok {
			return
		}
		m.logf("delete %q", p)
		m.clear(p)
	case 4: // chmod: the executable bit, or any mode
		kind := byte('f')
		if m.r.IntN(3) == 0 {
			kind = 'd'
		}
		p, ok := m.pick(kind)
		if !ok {
			return
		}
		fi, err := os.Lstat(m.abs(p))
		if err != nil {
			m.t.Fatal(err)
		}
		var perm uint32
		switch {
		case kind == 'd':
			perm = m.dirPerm()
		case m.r.IntN(2) == 0:
			perm = m.filePerm(fi.Mode()&0o100 == 0)
		case fi.Mode()&0o100 != 0:
			perm = 0o644
		default:
			perm = 0o755
		}
		m.logf("chmod %04o %q", perm, p)
		m.chmod(p, perm)
	case 5: // symlink to a file, a directory, or nothing
		p := m.randPath()
		var target string
		switch m.r.IntN(3) {
		case 0:
			target, _ = m.pick('f')
		case 1:
			target, _ = m.pick('d')
		}
		if target == "" || target == p || strings.HasPrefix(target, p+"/") {
			target = "nowhere/" + propNames[m.r.IntN(len(propNames))]
		} else {
			target = strings.Repeat("../", strings.Count(p, "/")) + target
		}
		m.logf("symlink %q -> %q", p, target)
		m.ensureParent(p)
		m.clear(p) // and opens its directory
		if err := os.Symlink(target, m.abs(p)); err != nil {
			m.t.Fatal(err)
		}
	case 6, 7: // rename
		src, ok := m.pick(0)
		if !ok {
			return
		}
		dst := m.randPath()
		if dst == src || strings.HasPrefix(dst, src+"/") || strings.HasPrefix(src, dst+"/") {
			return
		}
		m.logf("rename %q %q", src, dst)
		m.ensureParent(dst)
		if _, err := os.Lstat(m.abs(src)); err != nil {
			return // ensureParent replaced it
		}
		m.clear(dst)
		m.open(path.Dir(src))
		m.open(src) // a directory moved elsewhere has its ".." rewritten
		if err := os.Rename(m.abs(src), m.abs(dst)); err != nil {
			m.t.Fatal(err)
		}
	case 8: // file -> directory
		p, ok := m.pick('f')
		if !ok {
			return
		}
		m.logf("file to directory %q", p)
		m.clear(p)
		if m.r.IntN(2) == 0 {
			m.writeFile(p+"/"+propNames[m.r.IntN(len(propNames))], m.content(), m.filePerm(false))
		} else if err := os.Mkdir(m.abs(p), 0o755); err != nil {
			m.t.Fatal(err)
		}
		if perm := m.dirPerm(); perm != 0o755 {
			m.logf("chmod %04o %q", perm, p)
			m.chmod(p, perm)
		}
	case 9: // directory -> file
		p, ok := m.pick('d')
		if !ok {
			return
		}
		m.logf("directory to file %q", p)
		m.clear(p)
		m.writeFile(p, m.content(), m.filePerm(false))
	case 10: // empty, maybe nested, directories
		p := m.randPath()
		m.logf("mkdir %q", p)
		m.ensureParent(p + "/x")
		if perm := m.dirPerm(); perm != 0o755 {
			m.logf("chmod %04o %q", perm, p)
			m.chmod(p, perm)
		}
	case 11: // a file near or over the limit
		p := m.randPath()
		n := propMaxSize - 1 + m.r.IntN(3)
		if m.r.IntN(2) == 0 {
			n = 3 * propMaxSize
		}
		c := strconv.FormatUint(m.r.Uint64(), 36) + strings.Repeat("B", n)
		m.logf("large %q (%d bytes)", p, n)
		m.writeFile(p, c[:n], m.filePerm(false))
	case 12: // an excluded path
		p := m.randPath()
		if m.r.IntN(2) == 0 {
			p = "node_modules/" + p
			if i := strings.LastIndex(p, "/"); m.r.IntN(2) == 0 && i > 0 {
				p = p[:i] + "/node_modules" + p[i:]
			}
		} else {
			p = "x.log/" + p
			if m.r.IntN(2) == 0 {
				p = "app.log"
			}
		}
		c := m.content()
		m.logf("excluded %q (%d bytes)", p, len(c))
		m.writeFile(p, c, m.filePerm(false))
	}
}

// propWantAfterRestore is the workspace a restore of a checkpoint whose
// workspace was target must give, from the workspace just before it:
// target, permissions included, except that every path left out
// (excluded, or a file over the limit) is as it was just before, with its
// directories kept (with the permissions target gives them, or else those
// they had), and a file left out of the checkpoint is never deleted.
func propWantAfterRestore(target, before map[string]string) map[string]string {
	want := map[string]string{}
	for p, v := range target {
		if !propExcluded(p) && !propOversized(v) {
			want[p] = v
		}
	}
	for p, v := range before {
		pinned := propExcluded(p) || propOversized(v)
		if tv, ok := target[p]; ok && propOversized(tv) && propIsFile(v) {
			pinned = true // it existed then: never delete it
		}
		if !pinned {
			continue
		}
		want[p] = v
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if !propIsDir(want[d]) {
				want[d] = before[d]
			}
		}
	}
	for p := range want {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if v, ok := want[d]; ok && !propIsDir(v) {
				delete(want, p)
				break
			}
		}
	}
	return want
}

// propSeed is the seed of the whole run: UNDOSH_SEED, or a random one.
func propSeed(t *testing.T) uint64 {
	if s := os.Getenv("UNDOSH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("UNDOSH_SEED=%q: %v", s, err)
		}
		return v
	}
	return rand.Uint64()
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// propLongName is a long name that leaves room for a few more bytes.
const propLongName = 230

func TestRoundTripProperty(t *testing.T) {
	t.Parallel()
	cases := 1100
	switch {
	case testing.Short():
		cases = 100
	case raceEnabled():
		cases = 300
	}
	if s := os.Getenv("UNDOSH_CASES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("UNDOSH_CASES=%q: %v", s, err)
		}
		cases = n
	}
	seed := propSeed(t)
	t.Logf("seed %d, %d cases (reproduce with UNDOSH_SEED=%d)", seed, cases, seed)
	var stats propStats
	// Cases wait mostly on fsync, so more of them run at once than
	// -parallel (GOMAXPROCS) would allow, by calling t.Run from several
	// goroutines.
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("case-%04d", i)
				t.Run(name, func(t *testing.T) {
					m := &propMutator{t: t, r: rand.New(rand.NewPCG(seed, uint64(i))), root: t.TempDir()}
					defer func() {
						switch {
						case t.Failed():
							t.Logf("reproduce: UNDOSH_SEED=%d go test -run 'TestRoundTripProperty/%s$' ./checkpoint\nops:\n  %s",
								seed, name, strings.Join(m.ops, "\n  "))
						default:
							stats.checked.Add(1)
						}
					}()
					propCase(t, m, &stats)
				})
			}
		}()
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Logf("%d cases checked; %d waited out the racy window, and in %d of them checkpoint A took hashes from the stat cache",
		stats.checked.Load(), stats.aged.Load(), stats.cacheHits.Load())
	if stats.aged.Load() >= 10 && stats.cacheHits.Load() == 0 {
		t.Errorf("no checkpoint took a hash from the stat cache: the cases never test it")
	}
}

// propStats counts what the cases exercised.
type propStats struct {
	checked, aged, cacheHits atomic.Int64
}

func propCase(t *testing.T, m *propMutator, stats *propStats) {
	t.Cleanup(func() { propRemovable(t, m.root) }) // before t.TempDir's removal
	s := openStore(t, m.root, Options{Exclude: propExclude, MaxFileSize: propMaxSize, Workers: 2})
	var last Result
	checkpoint := func(what string) string {
		t.Helper()
		before := snapshotFS(t, m.root, nil)
		r, err := s.Checkpoint(what)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", what, err)
		}
		last = r
		if diff := cmp.Diff(before, snapshotFS(t, m.root, nil)); diff != "" {
			t.Fatalf("checkpoint %s changed the workspace (-before +after):\n%s", what, diff)
		}
		m.logf("checkpoint %s = %s", what, r.ID[:12])
		return r.ID
	}
	n := 3 + m.r.IntN(20)
	early := -1
	if m.r.IntN(2) == 0 {
		early = m.r.IntN(n) // a checkpoint before A, so that A uses the stat cache
	}
	// The cache trusts only files older than the racy window, which
	// nothing but time can make: now and then, let it pass.
	aged := early >= 0 && m.r.IntN(32) == 0
	for i := range n {
		if i == early {
			if aged {
				m.logf("wait out the racy window")
				time.Sleep(time.Duration(racyWindow) + 100*time.Millisecond)
			}
			checkpoint("early")
		}
		m.step()
	}
	atA := snapshotFS(t, m.root, nil)
	idA := checkpoint("A")
	if aged {
		stats.aged.Add(1)
		if last.Hashed < last.Files {
			stats.cacheHits.Add(1)
		}
	}

	n = 1 + m.r.IntN(12)
	later := -1
	if m.r.IntN(2) == 0 {
		later = m.r.IntN(n + 1)
	}
	for i := range n {
		if i == later {
			checkpoint("later")
		}
		m.step()
	}
	if later == n {
		checkpoint("later")
	}

	mutated := snapshotFS(t, m.root, nil)
	m.logf("restore A")
	res, err := s.Restore(idA)
	if err != nil {
		t.Fatalf("restore A: %v", err)
	}
	if res.Target != idA {
		t.Errorf("restore A: target %s, want %s", res.Target, idA)
	}
	restored := snapshotFS(t, m.root, nil)
	if diff := cmp.Diff(propWantAfterRestore(atA, mutated), restored); diff != "" {
		t.Fatalf("restore A (-want +got):\n%s", diff)
	}
	for _, k := range res.Kept {
		// Kept paths are left as they were: a directory A did not have
		// that holds left-out paths, or a path left out now or at A.
		if restored[k] != mutated[k] && !(propIsDir(restored[k]) && !propIsDir(atA[k])) {
			t.Errorf("restore A kept %q, which is %q now, was %q before and %q at A", k, restored[k], mutated[k], atA[k])
		}
	}
	m.logf("restore Before = %s", res.Before[:12])
	if _, err := s.Restore(res.Before); err != nil {
		t.Fatalf("undo the restore: %v", err)
	}
	if diff := cmp.Diff(propWantAfterRestore(mutated, restored), snapshotFS(t, m.root, nil)); diff != "" {
		t.Fatalf("undo the restore (-want +got):\n%s", diff)
	}
}

// TestRestoreKeepsLeftOut: a directory the checkpoint does not have, but
// that holds a path checkpoints leave out, stays, and that path is not
// touched; nor is a file left out of the checkpoint or of the workspace as
// it is.
func TestRestoreKeepsLeftOut(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("B", 200) // over the limit of 100
	tests := []struct {
		name      string
		before    map[string]string // the workspace at the checkpoint
		remove    []string          // then removed
		after     map[string]string // then written
		untouched []string          // paths of after the restore must not touch
		kept      []string          // nil: not checked
		bug       string
	}{
		{
			name:      "excluded file in a new directory",
			before:    map[string]string{"a.txt": "a"},
			after:     map[string]string{"new/node_modules/pkg/index.js": "js", "new/other.txt": "other"},
			untouched: []string{"new/node_modules/pkg/index.js"},
			kept:      []string{"new"},
		},
		{
			name:      "excluded file two new directories down",
			before:    map[string]string{"a.txt": "a"},
			after:     map[string]string{"p/q/node_modules/x": "x", "p/q/r.txt": "r", "p/s.txt": "s"},
			untouched: []string{"p/q/node_modules/x"},
			kept:      []string{"p", "p/q"},
		},
		{
			name:      "excluded file where the checkpoint has a file",
			before:    map[string]string{"a.txt": "a", "build": "a file then"},
			remove:    []string{"build"},
			after:     map[string]string{"build/debug.log": "log", "build/out.o": "o"},
			untouched: []string{"build/debug.log"},
			kept:      []string{"build"},
		},
		{
			name:      "oversized file in a new directory",
			before:    map[string]string{"a.txt": "a"},
			after:     map[string]string{"data/big.bin": big, "data/small": "s"},
			untouched: []string{"data/big.bin"},
			kept:      []string{"data"},
		},
		{
			name:      "file grown over the limit since the checkpoint",
			before:    map[string]string{"a.txt": "a", "data.bin": "small then"},
			after:     map[string]string{"data.bin": big},
			untouched: []string{"data.bin"},
			kept:      []string{"data.bin"},
		},
		{
			name:      "oversized file where the checkpoint has a directory",
			before:    map[string]string{"a.txt": "a", "d/f": "f"},
			remove:    []string{"d"},
			after:     map[string]string{"d": big, "b.txt": "b"},
			untouched: []string{"d"},
		},
		{
			name:      "file over the limit at the checkpoint, under it now",
			before:    map[string]string{"a.txt": "a", "grows.bin": big},
			after:     map[string]string{"grows.bin": "small now"},
			untouched: []string{"grows.bin"},
			kept:      []string{"grows.bin"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.bug != "" {
				t.Skip("BUG: " + tt.bug)
			}
			ws := t.TempDir()
			for p, c := range tt.before {
				write(t, ws, p, c)
			}
			s := openStore(t, ws, Options{Exclude: []string{"**/node_modules/**", "**/*.log"}, MaxFileSize: 100})
			cp, err := s.Checkpoint("")
			if err != nil {
				t.Fatal(err)
			}
			atCheckpoint := snapshotFS(t, ws, nil)
			for _, p := range tt.remove {
				if err := os.RemoveAll(filepath.Join(ws, p)); err != nil {
					t.Fatal(err)
				}
			}
			for p, c := range tt.after {
				write(t, ws, p, c)
			}
			// Age the untouchable files, so that a rewrite shows in mtime.
			old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			stamps := map[string]propFileStamp{}
			for _, p := range tt.untouched {
				full := filepath.Join(ws, p)
				if err := os.Chtimes(full, old, old); err != nil {
					t.Fatal(err)
				}
				stamps[p] = propStamp(t, full)
			}
			res, err := s.Restore(cp.ID)
			if err != nil {
				t.Fatal(err)
			}
			if tt.kept != nil {
				if diff := cmp.Diff(tt.kept, sortedCopy(res.Kept), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Kept (-want +got):\n%s", diff)
				}
			}
			want := map[string]string{}
			for p, v := range atCheckpoint {
				want[p] = v
			}
			for _, p := range tt.remove {
				for q := range want {
					if q == p || strings.HasPrefix(q, p+"/") {
						delete(want, q)
					}
				}
			}
			for _, p := range tt.untouched {
				want[p] = "file-:" + tt.after[p]
				for d := path.Dir(p); d != "."; d = path.Dir(d) {
					want[d] = "dir"
				}
			}
			if diff := cmp.Diff(want, snapshotFS(t, ws, nil)); diff != "" {
				t.Errorf("after restore (-want +got):\n%s", diff)
			}
			for _, p := range tt.untouched {
				if got := propStamp(t, filepath.Join(ws, p)); got != stamps[p] {
					t.Errorf("%s was touched: %+v, want %+v", p, got, stamps[p])
				}
			}
		})
	}
}

// TestRestoreLongName: names up to the 255 bytes Linux allows come back,
// whatever they are.
func TestRestoreLongName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n    int
		link bool
		bug  string
	}{
		{name: "file 255", n: 255},
		{name: "symlink 230", n: 230, link: true},
		{name: "symlink 231", n: 231, link: true},
		{name: "symlink 255", n: 255, link: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.bug != "" {
				t.Skip("BUG: " + tt.bug)
			}
			ws := t.TempDir()
			name := strings.Repeat("n", tt.n)
			write(t, ws, "target.txt", "t")
			if tt.link {
				if err := os.Symlink("target.txt", filepath.Join(ws, name)); err != nil {
					t.Fatal(err)
				}
			} else {
				write(t, ws, name, "long")
			}
			s := openStore(t, ws, Options{})
			want := snapshotFS(t, ws, nil)
			cp, err := s.Checkpoint("")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(ws, name)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Restore(cp.ID); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, snapshotFS(t, ws, nil)); diff != "" {
				t.Errorf("after restore (-want +got):\n%s", diff)
			}
		})
	}
}

func sortedCopy(l []string) []string {
	out := slices.Clone(l)
	sort.Strings(out)
	return out
}

// propFileStamp changes when a file is rewritten, replaced or chmodded.
type propFileStamp struct {
	Ino          uint64
	Mtime, Ctime int64
}

func propStamp(t testing.TB, p string) propFileStamp {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return propFileStamp{Ino: st.Ino, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// gitRun runs git in dir with no user or system configuration, and
// returns its standard output.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	full := append([]string{
		"-c", "user.name=undosh test", "-c", "user.email=test@undosh.invalid",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false",
		// No background gc or maintenance that could write while we hash.
		"-c", "gc.auto=0", "-c", "maintenance.auto=false",
		"-c", "protocol.file.allow=always",
	}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_DATE=2024-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// gitDirs records every path under every .git of the workspace (and every
// .git file): its type, its mode, its modification time when strict, and
// a hash of its content or target.
func gitDirs(t testing.TB, root string, strict bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel != ".git" && !strings.HasPrefix(rel, ".git/") && !strings.Contains(rel, "/.git/") && !strings.HasSuffix(rel, "/.git") {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var sum string
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			sum = "link:" + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(data)
			sum = hex.EncodeToString(h[:])
		}
		mode := fi.Mode().Type().String()
		if fi.Mode().IsRegular() {
			mode = strconv.FormatBool(fi.Mode()&0o100 != 0)
		}
		if strict {
			mode = fmt.Sprintf("%v %d", fi.Mode(), fi.ModTime().UnixNano())
		}
		out[rel] = mode + " " + sum
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUserGitRepository: the user's repositories are never written by
// reading or checkpointing, and come back exactly after git commands that
// lose history.
func TestUserGitRepository(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary")
	}
	upstream := t.TempDir()
	gitRun(t, upstream, "init", "-q")
	write(t, upstream, "lib.go", "package lib\n")
	gitRun(t, upstream, "add", "-A")
	gitRun(t, upstream, "commit", "-q", "-m", "upstream")

	ws := t.TempDir()
	gitRun(t, ws, "init", "-q")
	write(t, ws, "README", "readme 1\n")
	write(t, ws, ".gitignore", "node_modules/\n*.log\n")
	gitRun(t, ws, "add", "-A")
	gitRun(t, ws, "commit", "-q", "-m", "first")
	gitRun(t, ws, "submodule", "add", "-q", upstream, "sub")
	gitRun(t, ws, "commit", "-q", "-m", "submodule")
	gitRun(t, ws, "checkout", "-q", "-b", "feature")
	write(t, ws, "feature.txt", "feature\n")
	gitRun(t, ws, "add", "-A")
	gitRun(t, ws, "commit", "-q", "-m", "feature")
	gitRun(t, ws, "checkout", "-q", "main")
	write(t, ws, "src/main.go", "package main\n")
	gitRun(t, ws, "add", "-A")
	gitRun(t, ws, "commit", "-q", "-m", "source")
	gitRun(t, ws, "tag", "v1")
	write(t, ws, "README", "readme 2\n")
	gitRun(t, ws, "commit", "-q", "-am", "readme")
	write(t, ws, "README", "readme 3, stashed\n")
	gitRun(t, ws, "stash", "-q")
	// A dirty work tree: modified, staged, untracked and ignored files.
	write(t, ws, "src/main.go", "package main // edited\n")
	write(t, ws, "staged.txt", "staged\n")
	gitRun(t, ws, "add", "staged.txt")
	write(t, ws, "untracked.txt", "untracked\n")
	write(t, ws, "node_modules/x", "ignored\n")
	write(t, ws, "debug.log", "ignored log\n")
	// A nested repository that the outer one does not track.
	nested := filepath.Join(ws, "vendor", "lib")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	gitRun(t, nested, "init", "-q")
	write(t, nested, "nested.txt", "nested\n")
	gitRun(t, nested, "add", "-A")
	gitRun(t, nested, "commit", "-q", "-m", "nested")

	strict := gitDirs(t, ws, true)
	for _, p := range []string{".git/HEAD", ".git/refs/stash", ".git/refs/heads/feature", ".git/modules/sub/HEAD", "sub/.git", "vendor/lib/.git/HEAD"} {
		if _, ok := strict[p]; !ok {
			t.Fatalf("the test repository has no %s: %v", p, slices.Sorted(maps.Keys(strict)))
		}
	}

	s := openStore(t, ws, Options{})
	t.Run("nothing writes into .git", func(t *testing.T) {
		cp, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		if cp.Files < len(strict)/2 {
			t.Errorf("the checkpoint holds %d files, fewer than the %d paths under .git alone", cp.Files, len(strict))
		}
		if _, err := s.Log(); err != nil {
			t.Fatal(err)
		}
		changes, err := s.Diff(cp.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 0 {
			t.Errorf("diff against an unchanged workspace: %+v", changes)
		}
		if _, err := s.Status(); err != nil {
			t.Fatal(err)
		}
		chk, err := s.Check()
		if err != nil || len(chk.Problems) != 0 {
			t.Errorf("check: %+v, %v", chk, err)
		}
		if again, err := s.Checkpoint(""); err != nil || again.Changed {
			t.Errorf("a second checkpoint: %+v, %v; want no change", again, err)
		}
		if diff := cmp.Diff(strict, gitDirs(t, ws, true)); diff != "" {
			t.Errorf("a .git changed (-before +after):\n%s", diff)
		}
	})

	ops := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"reset --hard HEAD~1", func(t *testing.T) { gitRun(t, ws, "reset", "-q", "--hard", "HEAD~1") }},
		{"commit --amend", func(t *testing.T) { gitRun(t, ws, "commit", "-q", "--amend", "-m", "x") }},
		{"branch -D feature", func(t *testing.T) { gitRun(t, ws, "branch", "-q", "-D", "feature") }},
		{"stash drop", func(t *testing.T) { gitRun(t, ws, "stash", "drop", "-q") }},
		{"rm -rf .git", func(t *testing.T) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
		}},
		{"gc --prune=now", func(t *testing.T) { gitRun(t, ws, "gc", "-q", "--prune=now") }},
		{"clean -fdx", func(t *testing.T) { gitRun(t, ws, "clean", "-q", "-fdx") }},
	}
	for _, op := range ops {
		// In order: each one starts from the state the last one restored.
		t.Run(op.name, func(t *testing.T) {
			status := gitRun(t, ws, "status", "--porcelain=v1", "-uall", "--ignored")
			log := gitRun(t, ws, "log", "--all", "--format=%H%d")
			before := snapshotFS(t, ws, nil)
			loose := gitDirs(t, ws, false)
			cp, err := s.Checkpoint(op.name)
			if err != nil {
				t.Fatal(err)
			}
			op.run(t)
			if diff := cmp.Diff(before, snapshotFS(t, ws, nil)); diff == "" {
				t.Fatalf("git %s changed nothing: the test proves nothing", op.name)
			}
			if _, err := s.Restore(cp.ID); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(loose, gitDirs(t, ws, false)); diff != "" {
				t.Errorf(".git after restore (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, snapshotFS(t, ws, nil)); diff != "" {
				t.Errorf("workspace after restore (-want +got):\n%s", diff)
			}
			if got := gitRun(t, ws, "status", "--porcelain=v1", "-uall", "--ignored"); got != status {
				t.Errorf("git status after restore:\n%s\nwant:\n%s", got, status)
			}
			if got := gitRun(t, ws, "log", "--all", "--format=%H%d"); got != log {
				t.Errorf("git log --all after restore:\n%s\nwant:\n%s", got, log)
			}
			for p, want := range map[string]string{"node_modules/x": "ignored\n", "debug.log": "ignored log\n"} {
				if got, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(got) != want {
					t.Errorf("ignored %s after restore: %q, %v; want %q", p, got, err, want)
				}
			}
		})
	}
}
