package fork

// Fixtures of the commit tests: temporary roots, a step that changes them
// (applied to a plain tree, or through a real overlay), hand-built upper
// layers as overlayfs leaves them, and manifests to compare trees.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	tBase = time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	tNew  = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	tOld  = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	// capNetRaw is security.capability for cap_net_raw+ep (VFS revision 2).
	capNetRaw = []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
)

// tb is what the fixtures need of a test: testing.TB, or stepTB on a
// goroutine that is not the test's.
type tb interface {
	Helper()
	Fatal(args ...any)
	Skipf(format string, args ...any)
}

// stepTB panics with a stepFailure where a test would fail or skip.
type stepTB struct{}

type stepFailure string

func (stepTB) Helper()                          {}
func (stepTB) Fatal(args ...any)                { panic(stepFailure(fmt.Sprint(args...))) }
func (stepTB) Skipf(format string, args ...any) { panic(stepFailure(fmt.Sprintf(format, args...))) }

// tree writes entries under a root, failing the test on any error.
type tree struct {
	t    tb
	root string
}

func (w tree) p(rel string) string { return filepath.Join(w.root, rel) }

func (w tree) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w tree) dir(rel string, mode uint32) {
	w.t.Helper()
	if err := os.Mkdir(w.p(rel), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		w.t.Fatal(err)
	}
	w.must(unix.Chmod(w.p(rel), mode))
}

// file writes a new file (replacing any) with mode and owner root, and
// gives it mtime m.
func (w tree) file(rel, data string, mode uint32, m time.Time) {
	w.t.Helper()
	os.Remove(w.p(rel))
	w.must(os.WriteFile(w.p(rel), []byte(data), 0o600))
	w.must(os.Chown(w.p(rel), 0, 0))
	w.must(unix.Chmod(w.p(rel), mode))
	w.times(rel, m)
}

// write rewrites a file in place.
func (w tree) write(rel, data string, m time.Time) {
	w.t.Helper()
	f, err := os.OpenFile(w.p(rel), os.O_WRONLY|os.O_TRUNC, 0)
	w.must(err)
	_, err = f.WriteString(data)
	w.must(err)
	w.must(f.Close())
	w.times(rel, m)
}

func (w tree) symlink(rel, to string, m time.Time) {
	w.t.Helper()
	w.must(os.Symlink(to, w.p(rel)))
	w.times(rel, m)
}

func (w tree) times(rel string, m time.Time) {
	w.t.Helper()
	ts := []unix.Timespec{unix.NsecToTimespec(m.UnixNano()), unix.NsecToTimespec(m.UnixNano())}
	w.must(unix.UtimesNanoAt(unix.AT_FDCWD, w.p(rel), ts, unix.AT_SYMLINK_NOFOLLOW))
}

func (w tree) xattr(rel, name string, v []byte) {
	w.t.Helper()
	if err := unix.Lsetxattr(w.p(rel), name, v, 0); err != nil {
		w.t.Skipf("cannot set xattr %s on %s (%v): this test needs root and a filesystem with xattrs", name, w.p(rel), err)
	}
}

func (w tree) whiteout(rel string) {
	w.t.Helper()
	w.must(unix.Mknod(w.p(rel), unix.S_IFCHR|0o600, 0))
}

func (w tree) opaque(rel string) { w.xattr(rel, "trusted.overlay.opaque", []byte("y")) }

func (w tree) sparse(rel string, size, at int64, m time.Time) {
	w.t.Helper()
	f, err := os.OpenFile(w.p(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	w.must(err)
	_, err = f.WriteAt([]byte(strings.Repeat("sparse data ", 400)), at)
	w.must(err)
	w.must(f.Truncate(size))
	w.must(f.Close())
	w.must(unix.Chmod(w.p(rel), 0o644))
	w.times(rel, m)
}

// mirror makes rel in an upper with the attributes of the real one, as
// overlayfs's copy-up of a directory does (with an origin xattr).
func (w tree) mirror(real, rel string) {
	w.t.Helper()
	var st unix.Stat_t
	w.must(unix.Lstat(filepath.Join(real, rel), &st))
	w.dir(rel, st.Mode&0o7777)
	w.must(os.Lchown(w.p(rel), int(st.Uid), int(st.Gid)))
	x, _, err := readXattrs(filepath.Join(real, rel))
	w.must(err)
	for k, v := range x {
		w.xattr(rel, k, v)
	}
	if rel != "." {
		w.xattr(rel, "trusted.overlay.origin", []byte{0, 0xfb, 0x21})
	}
}

// copyUp copies a real file into an upper unchanged, as overlayfs does
// when a file is opened for writing and not written.
func (w tree) copyUp(real, rel string) {
	w.t.Helper()
	var st unix.Stat_t
	w.must(unix.Lstat(filepath.Join(real, rel), &st))
	data, err := os.ReadFile(filepath.Join(real, rel))
	w.must(err)
	w.file(rel, string(data), st.Mode&0o7777, time.Unix(0, st.Mtim.Nano()))
	w.xattr(rel, "trusted.overlay.origin", []byte{0, 0xfb, 0x22})
}

// buildOriginal makes the real tree of the round trip.
func buildOriginal(t tb, root string) {
	w := tree{t, root}
	w.dir(".", 0o755)
	for _, d := range []string{"etc", "srv", "usr", "usr/share", "usr/share/doc", "usr/share/doc/pkg",
		"usr/lib", "usr/bin", "usr/sbin", "var", "var/www", "var/cache", "var/cache/thing", "var/lib",
		"var/lib/dpkg", "var/spool"} {
		w.dir(d, 0o755)
	}
	w.dir("srv/gone", 0o750)
	w.dir("srv/gone/sub", 0o755)
	w.dir("run", 0o755)
	w.file("etc/app.conf", "old app\n", 0o644, tBase)
	w.file("etc/old.conf", "old\n", 0o644, tBase)
	w.file("etc/same.conf", "same\n", 0o644, tBase)
	w.file("etc/thing", "a file, then a directory\n", 0o644, tBase)
	w.symlink("etc/link", "app.conf", tBase)
	w.file("etc/capfile", "cap\n", 0o755, tBase)
	w.xattr("etc/capfile", "security.capability", capNetRaw)
	w.file("srv/gone/a", "a\n", 0o644, tBase)
	w.file("srv/gone/sub/b", "b\n", 0o644, tBase)
	w.file("usr/share/doc/pkg/a", "doc a\n", 0o644, tBase)
	w.file("usr/share/doc/pkg/b", "doc b\n", 0o644, tBase)
	w.file("usr/lib/pair1", "pair\n", 0o644, tBase)
	w.must(os.Link(w.p("usr/lib/pair1"), w.p("usr/lib/pair2")))
	w.file("var/www/index.html", "<p>hi</p>\n", 0o644, tBase)
	w.file("var/cache/thing/x", "x\n", 0o644, tBase)
	w.file("var/lib/dpkg/lock", "", 0o640, tBase)
	w.file("var/lib/dpkg/lock-frontend", "", 0o640, tBase)
	w.file("var/lib/dpkg/status", "Package: a\n", 0o644, tBase)
	w.xattr("var/www", "user.site", []byte("www"))
}

// step is the step of the round trip: every kind of change, made with
// ordinary calls, on a plain tree (the expected result) or through an
// overlay (a real copy).
func step(t tb, root string) {
	w := tree{t, root}
	w.file("etc/new.conf", "new\n", 0o640, tNew)
	w.xattr("etc/new.conf", "user.origin", []byte("copy"))
	w.write("etc/app.conf", "new app\n", tNew)
	w.must(os.Remove(w.p("etc/old.conf")))
	f, err := os.OpenFile(w.p("etc/same.conf"), os.O_RDWR, 0) // a copy-up, unchanged
	w.must(err)
	w.must(f.Close())
	w.must(os.Remove(w.p("etc/thing")))
	w.dir("etc/thing", 0o755)
	w.file("etc/thing/inner", "inner\n", 0o600, tNew)
	w.must(os.Remove(w.p("etc/link")))
	w.symlink("etc/link", "new.conf", tNew)
	w.dir("etc/alternatives", 0o755)
	w.symlink("etc/alternatives/x", "/usr/bin/nowhere", tNew)
	w.file("etc/ancient", "ancient\n", 0o644, tOld)

	w.dir("opt", 0o755)
	w.dir("opt/newdir", 0o2775)
	w.file("opt/newdir/f", "f\n", 0o644, tNew)
	w.dir("opt/ro", 0o755)
	w.dir("opt/ro/sub", 0o700)
	w.file("opt/ro/sub/file", "deep\n", 0o644, tNew)
	w.must(unix.Chmod(w.p("opt/ro"), 0o555))
	w.sparse("opt/sparse", 8<<20, 4<<20, tNew)

	w.must(os.RemoveAll(w.p("srv/gone")))
	w.must(unix.Mkfifo(w.p("srv/fifo"), 0o600))
	w.must(unix.Chmod(w.p("srv/fifo"), 0o620))
	w.times("srv/fifo", tNew)

	w.must(os.RemoveAll(w.p("usr/share/doc/pkg")))
	w.dir("usr/share/doc/pkg", 0o755)
	w.file("usr/share/doc/pkg/c", "doc c\n", 0o644, tNew)
	// A new file in place of one of a pair of links: the pair is broken.
	w.file("usr/lib/pair1.new", "pair, changed\n", 0o644, tNew)
	w.must(os.Rename(w.p("usr/lib/pair1.new"), w.p("usr/lib/pair1")))
	w.file("usr/bin/tool", "tool\n", 0o755, tNew)
	w.must(os.Link(w.p("usr/bin/tool"), w.p("usr/bin/tool2")))
	w.file("usr/bin/suid", "suid\n", 0o4755, tNew)
	w.file("usr/bin/ping", "ping\n", 0o755, tNew)
	w.xattr("usr/bin/ping", "security.capability", capNetRaw)

	w.must(os.Chown(w.p("var/www"), 33, 33))
	w.must(unix.Chmod(w.p("var/www"), 0o700))
	w.xattr("var/www", "user.comment", []byte("changed in the copy"))
	w.must(os.RemoveAll(w.p("var/cache/thing")))
	w.symlink("var/cache/thing", "../elsewhere", tNew)
	w.dir("var/spool/sticky", 0o1777)
	w.write("var/lib/dpkg/status", "Package: a\n\nPackage: b\n", tNew)
}

// stepExcluded makes the changes a commit must leave out.
func stepExcluded(t tb, root string) {
	w := tree{t, root}
	w.file("run/junk", "junk\n", 0o644, tNew)
	w.times("var/lib/dpkg/lock", tNew)
	w.file("usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755, tNew)
	w.must(unix.Mknod(w.p("srv/sock"), unix.S_IFSOCK|0o755, 0))
}

// buildUpper makes by hand the upper layer that overlayfs leaves after
// step and stepExcluded on real.
func buildUpper(t testing.TB, upper, real string) {
	w := tree{t, upper}
	w.mirror(real, ".")
	for _, d := range []string{"etc", "srv", "usr", "usr/share", "usr/share/doc", "usr/lib", "usr/bin",
		"usr/sbin", "var", "var/cache", "var/spool", "var/lib", "var/lib/dpkg", "run"} {
		w.mirror(real, d)
	}
	w.file("etc/new.conf", "new\n", 0o640, tNew)
	w.xattr("etc/new.conf", "user.origin", []byte("copy"))
	w.file("etc/app.conf", "new app\n", 0o644, tNew)
	w.xattr("etc/app.conf", "trusted.overlay.origin", []byte{0, 0xfb, 0x23})
	w.whiteout("etc/old.conf")
	w.copyUp(real, "etc/same.conf")
	w.dir("etc/thing", 0o755)
	w.opaque("etc/thing")
	w.file("etc/thing/inner", "inner\n", 0o600, tNew)
	w.symlink("etc/link", "new.conf", tNew)
	w.dir("etc/alternatives", 0o755)
	w.symlink("etc/alternatives/x", "/usr/bin/nowhere", tNew)
	w.file("etc/ancient", "ancient\n", 0o644, tOld)

	w.dir("opt", 0o755)
	w.dir("opt/newdir", 0o2775)
	w.file("opt/newdir/f", "f\n", 0o644, tNew)
	w.dir("opt/ro", 0o755)
	w.dir("opt/ro/sub", 0o700)
	w.file("opt/ro/sub/file", "deep\n", 0o644, tNew)
	w.must(unix.Chmod(w.p("opt/ro"), 0o555))
	w.sparse("opt/sparse", 8<<20, 4<<20, tNew)

	w.whiteout("srv/gone")
	w.must(unix.Mkfifo(w.p("srv/fifo"), 0o620))
	w.must(unix.Chmod(w.p("srv/fifo"), 0o620))
	w.times("srv/fifo", tNew)

	w.dir("usr/share/doc/pkg", 0o755)
	w.opaque("usr/share/doc/pkg")
	w.file("usr/share/doc/pkg/c", "doc c\n", 0o644, tNew)
	w.file("usr/lib/pair1", "pair, changed\n", 0o644, tNew)
	w.file("usr/bin/tool", "tool\n", 0o755, tNew)
	w.must(os.Link(w.p("usr/bin/tool"), w.p("usr/bin/tool2")))
	w.file("usr/bin/suid", "suid\n", 0o4755, tNew)
	w.file("usr/bin/ping", "ping\n", 0o755, tNew)
	w.xattr("usr/bin/ping", "security.capability", capNetRaw)

	w.mirror(real, "var/www")
	w.must(os.Chown(w.p("var/www"), 33, 33))
	w.must(unix.Chmod(w.p("var/www"), 0o700))
	w.xattr("var/www", "user.comment", []byte("changed in the copy"))
	w.symlink("var/cache/thing", "../elsewhere", tNew)
	w.dir("var/spool/sticky", 0o1777)
	w.file("var/lib/dpkg/status", "Package: a\n\nPackage: b\n", 0o644, tNew)

	w.file("run/junk", "junk\n", 0o644, tNew)
	w.file("var/lib/dpkg/lock", "", 0o640, tNew)
	w.file("usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755, tNew)
	w.must(unix.Mknod(w.p("srv/sock"), unix.S_IFSOCK|0o755, 0))
}

// wantOps is the plan of the round trip, as "kind path" lines.
var wantOps = []string{
	"mkdir etc/alternatives", "add etc/alternatives/x", "add etc/ancient", "replace etc/app.conf",
	"replace etc/link", "add etc/new.conf", "remove etc/old.conf", "remove etc/thing", "mkdir etc/thing",
	"add etc/thing/inner",
	"mkdir opt", "mkdir opt/newdir", "add opt/newdir/f", "mkdir opt/ro", "mkdir opt/ro/sub",
	"add opt/ro/sub/file", "add opt/sparse",
	"add srv/fifo", "remove srv/gone",
	"add usr/bin/ping", "add usr/bin/suid", "add usr/bin/tool", "add usr/bin/tool2",
	"replace usr/lib/pair1",
	"remove usr/share/doc/pkg", "mkdir usr/share/doc/pkg", "add usr/share/doc/pkg/c",
	"remove var/cache/thing", "add var/cache/thing",
	"replace var/lib/dpkg/status", "mkdir var/spool/sticky", "meta var/www",
}

func opLines(p Plan) []string {
	var out []string
	for _, op := range p.Ops {
		out = append(out, string(op.Kind)+" "+op.Path)
	}
	return out
}

// manifestOpts says what a manifest records beyond type, mode, owner,
// size, content (or link target), xattrs, the mtime of non-directories
// and hard links within the tree.
type manifestOpts struct {
	inodes   bool     // inode numbers and link counts
	dirTimes bool     // directories' mtimes
	skip     []string // paths (relative) left out, with what is under them
}

// manifest describes every entry under root, by relative path.
func manifest(t tb, root string, o manifestOpts) map[string]string {
	t.Helper()
	out := map[string]string{}
	byIno := map[uint64][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(o.skip, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		var b strings.Builder
		typ := st.Mode & unix.S_IFMT
		fmt.Fprintf(&b, "%s %04o %d:%d", typeName(typ), st.Mode&0o7777, st.Uid, st.Gid)
		switch typ {
		case unix.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			fmt.Fprintf(&b, " size=%d sha=%s", st.Size, hex.EncodeToString(sum[:8]))
			byIno[st.Ino] = append(byIno[st.Ino], rel)
		case unix.S_IFLNK:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " -> %s", l)
		}
		if typ != unix.S_IFDIR || o.dirTimes {
			fmt.Fprintf(&b, " mtime=%s", time.Unix(0, st.Mtim.Nano()).UTC().Format(time.RFC3339Nano))
		}
		names, err := listXattrs(p)
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, n := range names {
			v, err := getXattr(p, n)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %s=%q", n, v)
		}
		if o.inodes {
			fmt.Fprintf(&b, " ino=%d nlink=%d", st.Ino, st.Nlink)
		}
		out[rel] = b.String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range byIno {
		if len(names) > 1 {
			for _, n := range names {
				out[n] += " links=" + strings.Join(names, ",")
			}
		}
	}
	return out
}

func typeName(typ uint32) string {
	switch typ {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	}
	return fmt.Sprintf("type%o", typ)
}

// requireRoot skips a test that needs root.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown, trusted.* xattrs, whiteouts)")
	}
}

// shmDir makes a directory on a tmpfs (/dev/shm), for an upper layer on
// another filesystem than the target, as a copy's default tmpfs is.
func shmDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "undosh-fork-test-")
	if err != nil {
		t.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fixture is a target root, an upper layer for it, and a journal.
type fixture struct {
	base, target, upper, journal string
	t0                           time.Time
}

// newFixture builds the original tree, takes T0, and builds the upper
// (on a tmpfs when shm, else on the target's filesystem).
func newFixture(t testing.TB, shm bool) *fixture {
	t.Helper()
	requireRoot(t)
	base := t.TempDir()
	f := &fixture{base: base, target: filepath.Join(base, "root"), journal: filepath.Join(base, "journal")}
	tree{t, base}.dir("root", 0o755)
	buildOriginal(t, f.target)
	f.t0 = time.Now()
	if shm {
		f.upper = filepath.Join(shmDir(t), "upper")
	} else {
		f.upper = filepath.Join(base, "upper")
	}
	tree{t, filepath.Dir(f.upper)}.dir(filepath.Base(f.upper), 0o755)
	buildUpper(t, f.upper, f.target)
	return f
}

func (f *fixture) layer() Layer { return Layer{Target: f.target, Upper: f.upper, T0: f.t0} }

func (f *fixture) diffOptions() DiffOptions {
	return DiffOptions{Root: f.target, Seeded: []string{"/usr/sbin/policy-rc.d"}}
}

func (f *fixture) diff(t testing.TB) Plan {
	t.Helper()
	p, err := Diff(f.layer(), f.diffOptions())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// expected builds the original tree elsewhere and applies the step to it
// with ordinary calls, returning its manifest.
func expected(t testing.TB) map[string]string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "expected")
	tree{t, filepath.Dir(d)}.dir("expected", 0o755)
	buildOriginal(t, d)
	step(t, d)
	return manifest(t, d, manifestOpts{})
}

// waitCoarsePast waits until the coarse clock, which stamps ctimes, is
// past t, so that a change made next has a ctime after t.
func waitCoarsePast(t time.Time) {
	for !coarseClock().After(t) {
		time.Sleep(time.Millisecond)
	}
}
