package watch

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// tempRoot returns a fresh directory with its symlinks resolved.
func tempRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// openReady opens a Tree on root, waits until its set-up is done and
// records a base, so that the next snapshot is trusted.
func openReady(t *testing.T, root string, o Options) *Tree {
	t.Helper()
	tr, err := Open(root, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	for {
		// Snapshot waits for set-up, which holds the lock; the segment
		// open when set-up ends is still "watch starting".
		s := tr.Snapshot()
		tr.Recorded(s.Epoch, "base")
		if s.Full != reasonStarting {
			return tr
		}
	}
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// joined is rels, on one line.
func joined(ps []Path) string { return strings.Join(rels(ps), " ") }

func rels(ps []Path) []string {
	var out []string
	for _, p := range ps {
		s := p.Rel
		if p.Tree {
			s += "/**"
		}
		out = append(out, s)
	}
	return out
}

func has(s Snapshot, rel string) bool {
	for _, p := range s.Paths {
		if p.Rel == rel || p.Tree && (p.Rel == "." || strings.HasPrefix(rel, p.Rel+"/")) {
			return true
		}
	}
	return false
}

// snapTrusted takes a snapshot that must not be Full.
func snapTrusted(t *testing.T, tr *Tree) Snapshot {
	t.Helper()
	s := tr.Snapshot()
	if s.Full != "" {
		t.Fatalf("snapshot is Full %q, want a trusted set", s.Full)
	}
	return s
}

func TestSnapshotReportsChanges(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	write(t, root+"/a", "1")
	write(t, root+"/d/b", "2")
	tr := openReady(t, root, Options{})

	write(t, root+"/d/b", "3")
	write(t, root+"/new/deep/x", "4")
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	s := snapTrusted(t, tr)
	if s.Base != "base" {
		t.Errorf("Base = %q, want base", s.Base)
	}
	got := joined(s.Paths)
	if want := ". d/b new/**"; got != want {
		t.Errorf("Paths = %s, want %s", got, want)
	}
	// The new directory is watched: a write in it is a plain path.
	tr.Recorded(s.Epoch, "t1")
	write(t, root+"/new/deep/x", "5")
	s = snapTrusted(t, tr)
	if got := joined(s.Paths); got != "new/deep/x" {
		t.Errorf("Paths = %s, want new/deep/x", got)
	}
}

func TestEpochInterleavings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		order []int // indexes into the two snapshots, in Recorded order
	}{
		{"in order", []int{0, 1}},
		{"newer first", []int{1, 0}},
		{"newer only", []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := tempRoot(t)
			tr := openReady(t, root, Options{})
			write(t, root+"/one", "1")
			s1 := snapTrusted(t, tr)
			write(t, root+"/two", "2")
			s2 := snapTrusted(t, tr)
			if !has(s2, "one") || !has(s2, "two") {
				t.Fatalf("second snapshot %v lacks one or two", rels(s2.Paths))
			}
			snaps := []Snapshot{s1, s2}
			for _, i := range tt.order {
				tr.Recorded(snaps[i].Epoch, fmt.Sprint("t", i+1))
			}
			tr.Recorded(s2.Epoch+100, "unknown") // never handed out: ignored
			write(t, root+"/three", "3")
			s3 := snapTrusted(t, tr)
			if s3.Base != "t2" {
				t.Errorf("Base = %q, want t2", s3.Base)
			}
			if got := joined(s3.Paths); got != "three" {
				t.Errorf("Paths = %s, want only three", got)
			}
		})
	}
}

func TestRecordedOlderKeepsNewerChanges(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	tr := openReady(t, root, Options{})
	write(t, root+"/one", "1")
	s1 := snapTrusted(t, tr)
	write(t, root+"/two", "2")
	s2 := snapTrusted(t, tr)
	tr.Recorded(s1.Epoch, "t1")
	s3 := snapTrusted(t, tr)
	if s3.Base != "t1" || has(s3, "one") || !has(s3, "two") {
		t.Errorf("after Recorded(e1): base %q paths %v, want t1 and two only", s3.Base, rels(s3.Paths))
	}
	_ = s2
}

func TestNoBase(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	tr, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	s := tr.Snapshot()
	if s.Full != reasonStarting && s.Full != reasonNoBase {
		t.Errorf("first snapshot Full = %q", s.Full)
	}
	for s.Full == reasonStarting {
		s = tr.Snapshot()
	}
	if s.Full != reasonNoBase || s.Base != "" {
		t.Errorf("snapshot before any Recorded: Full %q Base %q, want %q", s.Full, s.Base, reasonNoBase)
	}
}

func TestExclude(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	write(t, root+"/node_modules/x/y", "1")
	write(t, root+"/src/a", "1")
	write(t, root+"/src/b.o", "1")
	tr := openReady(t, root, Options{Exclude: []string{"node_modules/**", "**/*.o"}})
	write(t, root+"/node_modules/x/y", "2")
	write(t, root+"/node_modules/x/z", "2")
	write(t, root+"/src/b.o", "2")
	write(t, root+"/src/a", "2")
	s := snapTrusted(t, tr)
	if got := joined(s.Paths); got != "src/a" {
		t.Errorf("Paths = %s, want src/a", got)
	}
	// An excluded path made or removed changes what a checkpoint leaves
	// out: it is reported, but not what happens under it.
	tr.Recorded(s.Epoch, "t1")
	write(t, root+"/src/a.o", "2")
	if err := os.Remove(root + "/src/b.o"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(root + "/node_modules"); err != nil {
		t.Fatal(err)
	}
	s = snapTrusted(t, tr)
	if got := joined(s.Paths); got != "node_modules src/a.o src/b.o" {
		t.Errorf("Paths = %s, want node_modules src/a.o src/b.o", got)
	}
	for wd := range tr.dirs {
		if rel, _ := tr.relOf(wd); strings.HasPrefix(rel, "node_modules") {
			t.Errorf("excluded %s is watched", rel)
		}
	}
}

func TestSymlinkLoopHarmless(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	if err := os.Symlink(".", root+"/self"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", root+"/a"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", root+"/b"); err != nil {
		t.Fatal(err)
	}
	tr := openReady(t, root, Options{})
	if st := tr.Status(); st.Watches != 1 {
		t.Errorf("Watches = %d, want 1 (symlinks are not followed)", st.Watches)
	}
	if err := os.Symlink("..", root+"/up"); err != nil {
		t.Fatal(err)
	}
	s := snapTrusted(t, tr)
	if got := joined(s.Paths); got != "up" {
		t.Errorf("Paths = %s, want up", got)
	}
}

func TestTooManyChanges(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	tr := openReady(t, root, Options{MaxPaths: 10})
	for i := range 11 {
		write(t, fmt.Sprintf("%s/f%d", root, i), "x")
	}
	if s := tr.Snapshot(); s.Full != reasonTooMany {
		t.Errorf("Full = %q, want %q", s.Full, reasonTooMany)
	}
	if st := tr.Status(); st.Dirty > 10 {
		t.Errorf("Dirty = %d after the set was dropped", st.Dirty)
	}
}

func TestManySnapshotsWithoutRecorded(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	tr := openReady(t, root, Options{})
	write(t, root+"/first", "1")
	var snaps []Snapshot
	for i := range 3 * maxSegments {
		snaps = append(snaps, snapTrusted(t, tr))
		write(t, fmt.Sprintf("%s/f%d", root, i), "x")
	}
	if n := len(tr.segs); n > maxSegments+1 {
		t.Errorf("%d segments kept", n)
	}
	// Recording an early epoch may report more than since it, never less.
	tr.Recorded(snaps[10].Epoch, "t")
	s := snapTrusted(t, tr)
	for i := 10; i < 3*maxSegments; i++ {
		if !has(s, fmt.Sprintf("f%d", i)) {
			t.Fatalf("f%d missing after Recorded of an early epoch", i)
		}
	}
}

func TestDirMovedWithinTree(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	write(t, root+"/a/sub/x", "1")
	write(t, root+"/b/keep", "1")
	tr := openReady(t, root, Options{})
	if err := os.Rename(root+"/a", root+"/b/a2"); err != nil {
		t.Fatal(err)
	}
	s := snapTrusted(t, tr)
	if got := joined(s.Paths); got != "a/** b/a2/**" {
		t.Errorf("Paths = %s, want a/** b/a2/**", got)
	}
	tr.Recorded(s.Epoch, "t1")
	write(t, root+"/b/a2/sub/x", "2")
	s = snapTrusted(t, tr)
	if got := joined(s.Paths); got != "b/a2/sub/x" {
		t.Errorf("after the move, Paths = %s, want b/a2/sub/x", got)
	}
	// Moved out of the tree: its watches go.
	out := t.TempDir()
	tr.Recorded(s.Epoch, "t2")
	if err := os.Rename(root+"/b/a2", out+"/a2"); err != nil {
		t.Fatal(err)
	}
	write(t, out+"/a2/sub/x", "3")
	s = snapTrusted(t, tr)
	if got := joined(s.Paths); got != "b/a2/**" {
		t.Errorf("after moving out, Paths = %s, want b/a2/**", got)
	}
	if st := tr.Status(); st.Watches != 2 {
		t.Errorf("Watches = %d, want 2 (root and b)", st.Watches)
	}
}

func TestOverflow(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	var pause sync.Mutex
	tr := openReady(t, root, Options{hooks: &hooks{beforeRead: func() {
		pause.Lock()
		defer pause.Unlock()
	}}})
	pause.Lock() // the reader now stops before its next read
	if err := os.Mkdir(root+"/late", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		f, err := os.Create(fmt.Sprintf("%s/f%05d", root, i))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := os.Mkdir(root+"/later", 0o755); err != nil {
		t.Fatal(err)
	}
	s := tr.Snapshot()
	pause.Unlock()
	if s.Full != reasonOverflow {
		t.Fatalf("Full = %q, want %q", s.Full, reasonOverflow)
	}
	if st := tr.Status(); st.Overflows == 0 {
		t.Errorf("Overflows = 0")
	}
	// The rescan watched the directories whose events were lost.
	tr.Recorded(s.Epoch, "t1")
	write(t, root+"/later/x", "1")
	s = snapTrusted(t, tr)
	if got := joined(s.Paths); got != "later/x" {
		t.Errorf("after the overflow, Paths = %s, want later/x", got)
	}
}

func TestWatchLimit(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	for i := range 5 {
		write(t, fmt.Sprintf("%s/d%d/x", root, i), "1")
	}
	n := 0
	tr := openReady(t, root, Options{hooks: &hooks{addWatch: func(fd int, p string, mask uint32) (int, error) {
		if n++; n > 3 {
			return -1, unix.ENOSPC
		}
		return unix.InotifyAddWatch(fd, p, mask)
	}}})
	want := "watch limit reached (fs.inotify.max_user_watches = " + strconv.Itoa(MaxUserWatches()) + ")"
	for range 2 {
		s := tr.Snapshot()
		if s.Full != want {
			t.Fatalf("Full = %q, want %q", s.Full, want)
		}
		tr.Recorded(s.Epoch, "t")
	}
}

func TestRootGone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		do   func(root string) error
	}{
		{"deleted", os.RemoveAll},
		{"moved", func(root string) error { return os.Rename(root, root+".moved") }},
		{"parent moved", func(root string) error {
			return os.Rename(filepath.Dir(root), filepath.Dir(root)+".moved")
		}},
		{"replaced", func(root string) error {
			if err := os.Rename(root, root+".old"); err != nil {
				return err
			}
			return os.Mkdir(root, 0o755)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			top := tempRoot(t)
			root := top + "/p/ws"
			write(t, root+"/a", "1")
			tr := openReady(t, root, Options{})
			if err := tt.do(root); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				s := tr.Snapshot()
				if s.Full != reasonRootGone {
					t.Fatalf("Full = %q, want %q", s.Full, reasonRootGone)
				}
				tr.Recorded(s.Epoch, "t")
			}
		})
	}
}

func TestMountsChanged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs under the tree needs root")
	}
	root := tempRoot(t)
	write(t, root+"/m/under", "1")
	tr := openReady(t, root, Options{})
	if err := unix.Mount("tmpfs", root+"/m", "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(root+"/m", unix.MNT_DETACH)
		}
	})
	s := tr.Snapshot()
	if s.Full != reasonMounts {
		t.Fatalf("after mount, Full = %q, want %q", s.Full, reasonMounts)
	}
	tr.Recorded(s.Epoch, "t1")
	write(t, root+"/m/x", "1")
	s = snapTrusted(t, tr)
	if got := joined(s.Paths); got != "m/x" {
		t.Errorf("in the new mount, Paths = %s, want m/x", got)
	}
	tr.Recorded(s.Epoch, "t2")
	if err := unix.Unmount(root+"/m", 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	if s := tr.Snapshot(); s.Full != reasonMounts {
		t.Fatalf("after unmount, Full = %q, want %q", s.Full, reasonMounts)
	}
}

func TestUnreporting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		magic int64
		want  string
	}{
		{unix.NFS_SUPER_MAGIC, "nfs"},
		{unix.SMB2_SUPER_MAGIC, "smb"},
		{-0xacb2be, "cifs"}, // 0xff534d42 as a signed 32-bit f_type
		{unix.CIFS_SUPER_MAGIC, "cifs"},
		{unix.V9FS_MAGIC, "9p"},
		{unix.FUSE_SUPER_MAGIC, "fuse"},
		{unix.CEPH_SUPER_MAGIC, "ceph"},
		{unix.AFS_SUPER_MAGIC, "afs"},
		{gfs2Magic, "gfs2"},
		{unix.EXT4_SUPER_MAGIC, ""},
		{unix.TMPFS_MAGIC, ""},
		{unix.BTRFS_SUPER_MAGIC, ""},
		{unix.XFS_SUPER_MAGIC, ""},
		{unix.OVERLAYFS_SUPER_MAGIC, ""},
	}
	for _, tt := range tests {
		if got := unreporting(tt.magic); got != tt.want {
			t.Errorf("unreporting(%#x) = %q, want %q", tt.magic, got, tt.want)
		}
	}
}

func TestMountsUnder(t *testing.T) {
	t.Parallel()
	info := `22 1 8:1 / / rw - ext4 /dev/sda1 rw
30 22 0:40 / /w/ws\040x/m rw - tmpfs tmpfs rw
31 22 0:41 / /w/ws\040xy rw - tmpfs tmpfs rw
32 22 0:42 /sub /w/ws\040x rw - tmpfs tmpfs rw
`
	got := strings.Join(mountsUnder([]byte(info), "/w/ws x"), "|")
	want := "/w/ws x 0:42 /sub|/w/ws x/m 0:40 /"
	if got != want {
		t.Errorf("mountsUnder = %q, want %q", got, want)
	}
}

// entry is what the checker compares of one path: its lstat (but atime)
// and its content or link target.
type entry struct {
	mode  uint32 // st_mode, type included
	size  int64
	mtime int64
	ino   uint64
	data  string
}

// record maps every path under root, relative, to its entry.
func record(t *testing.T, root string) map[string]entry {
	t.Helper()
	m := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		e := entry{mode: st.Mode, size: st.Size, mtime: st.Mtim.Nano(), ino: st.Ino}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.data = fmt.Sprintf("%x", sha256.Sum256(b))
		case unix.S_IFLNK:
			e.data, _ = os.Readlink(p)
		}
		m[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// uncovered returns the paths that differ between before and after and
// that s does not cover: by the path itself, a Tree path above it, or,
// for a directory whose listing (and so mtime) changed, a changed entry
// in it.
func uncovered(before, after map[string]entry, s Snapshot) []string {
	marked := map[string]bool{}
	for _, p := range s.Paths {
		marked[p.Rel] = p.Tree
	}
	covered := func(rel string) bool {
		if _, ok := marked[rel]; ok {
			return true
		}
		if marked["."] {
			return true
		}
		for p := rel; strings.Contains(p, "/"); {
			p = path.Dir(p)
			if marked[p] {
				return true
			}
		}
		return false
	}
	childMarked := func(dir string) bool {
		for rel := range marked {
			parent := path.Dir(rel)
			if rel != "." && parent == dir {
				return true
			}
		}
		return false
	}
	var out []string
	all := map[string]bool{}
	for p := range before {
		all[p] = true
	}
	for p := range after {
		all[p] = true
	}
	for p := range all {
		b, inB := before[p]
		a, inA := after[p]
		if inA && inB && a == b {
			continue
		}
		if covered(p) {
			continue
		}
		if inA && inB && a.mode&unix.S_IFMT == unix.S_IFDIR && a.mode == b.mode && a.ino == b.ino && childMarked(p) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %+v -> %+v", p, b, a))
	}
	return out
}

func nlink(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Nlink, true
}
