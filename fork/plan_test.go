package fork

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestDiffRefuses checks that Diff refuses what a commit must not put on
// the real root, listing every such path at once.
func TestDiffRefuses(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := t.TempDir()
	w := tree{t, base}
	w.dir("root", 0o755)
	w.dir("upper", 0o755)
	r := tree{t, filepath.Join(base, "root")}
	r.dir("srv", 0o755)
	r.dir("srv/moved", 0o755)
	r.dir("var", 0o755)
	r.dir("var/lib", 0o755)
	r.dir("var/lib/undosh", 0o700)
	r.file("srv/meta", "lower\n", 0o644, tBase)
	t0 := time.Now()
	u := tree{t, filepath.Join(base, "upper")}
	u.mirror(r.root, "srv")
	w.must(unix.Mknod(u.p("srv/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	w.must(unix.Mknod(u.p("srv/disk"), unix.S_IFBLK|0o660, int(unix.Mkdev(8, 0))))
	u.mirror(r.root, "srv/moved")
	u.xattr("srv/moved", "trusted.overlay.redirect", []byte("/srv/elsewhere"))
	u.file("srv/meta", "", 0o644, tBase)
	u.xattr("srv/meta", "trusted.overlay.metacopy", nil)
	u.file("srv/fine", "fine\n", 0o644, tNew)
	u.whiteout("var") // would take the state directory with it

	_, err := Diff(Layer{Target: r.root, Upper: u.root, T0: t0}, DiffOptions{Root: r.root})
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("Diff = %v, want a *RefusedError", err)
	}
	var got []string
	for _, p := range re.Problems {
		got = append(got, p.Path+": "+strings.Fields(p.Reason)[0])
	}
	want := []string{
		"/srv/disk: device", "/srv/meta: overlayfs", "/srv/moved: overlayfs", "/srv/null: device",
		"/var: removing",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused (-want +got):\n%s\n%v", diff, re)
	}
}

// TestDiffExcludes checks the paths a commit always leaves out, and that
// they are found from the root for a submount's layer.
func TestDiffExcludes(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := t.TempDir()
	w := tree{t, base}
	w.dir("root", 0o755)
	w.dir("upper", 0o755)
	r := tree{t, filepath.Join(base, "root")}
	for _, d := range []string{"var", "var/lib", "var/lib/undosh", "var/lib/dpkg", "var/lib/dpkg/triggers", "var/lib/apt",
		"var/lib/apt/lists", "var/cache", "var/cache/apt", "var/cache/apt/archives", "var/tmp", "var/log"} {
		r.dir(d, 0o755)
	}
	// The layer of a /var mount.
	target := r.p("var")
	t0 := time.Now()
	u := tree{t, filepath.Join(base, "upper")}
	for _, d := range []string{"lib", "lib/dpkg", "lib/dpkg/triggers", "lib/apt", "lib/apt/lists", "cache", "cache/apt",
		"cache/apt/archives", "log"} {
		u.mirror(target, d)
	}
	for _, f := range []string{"lib/dpkg/lock", "lib/dpkg/lock-frontend", "lib/dpkg/triggers/Lock", "lib/apt/lists/lock",
		"cache/apt/archives/lock", "log/mine", "log/seeded"} {
		u.file(f, "", 0o640, tNew)
	}
	u.whiteout("lib/undosh") // the state directory, hidden from the copy
	u.dir("tmp", 0o1777)
	u.whiteout(HiddenName)

	p, err := Diff(Layer{Target: target, Upper: u.root, T0: t0}, DiffOptions{Root: r.root, Seeded: []string{"/var/log/seeded"}})
	if err != nil {
		t.Fatal(err)
	}
	// /var/tmp is kept, its attributes too: scratch is not excluded.
	if diff := cmp.Diff([]string{"add log/mine", "meta tmp"}, opLines(p)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	var excluded []string
	for _, s := range p.Skipped {
		excluded = append(excluded, s.Path)
	}
	want := []string{"/var/.undosh-fork", "/var/cache/apt/archives/lock", "/var/lib/apt/lists/lock", "/var/lib/dpkg/lock",
		"/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/triggers/Lock", "/var/lib/undosh", "/var/log/seeded"}
	if diff := cmp.Diff(want, excluded); diff != "" {
		t.Errorf("excluded (-want +got):\n%s", diff)
	}
	if got := p.Name(p.Ops[0]); got != "/var/log/mine" {
		t.Errorf("Name = %s, want /var/log/mine", got)
	}
	if _, err := Diff(Layer{Target: "/etc", Upper: u.root, T0: t0}, DiffOptions{Root: r.root}); err == nil {
		t.Errorf("Diff of a target outside the root succeeded")
	}
}

// TestDiffKeepsScratch: what a copy wrote under /tmp is committed, all
// of it (a harness's cwd file, a build's output): a kept step keeps
// everything it wrote. A workspace under an excluded tree (/run) is
// committed through Include, and nothing else of that tree is.
func TestDiffKeepsScratch(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := t.TempDir()
	w := tree{t, base}
	w.dir("root", 0o755)
	w.dir("upper", 0o755)
	r := tree{t, filepath.Join(base, "root")}
	r.dir("tmp", 0o1777)
	r.dir("run", 0o755)
	r.dir("run/ws", 0o755)
	t0 := time.Now()
	u := tree{t, filepath.Join(base, "upper")}
	u.mirror(r.root, "tmp")
	u.file("tmp/claude-abcd-cwd", "/proj/src\n", 0o644, tNew)
	u.dir("tmp/build", 0o755)
	u.file("tmp/build/out", "x", 0o644, tNew)
	u.mirror(r.root, "run")
	u.mirror(r.root, "run/ws")
	u.file("run/ws/new.go", "package x\n", 0o644, tNew)
	u.file("run/other", "x", 0o644, tNew)
	u.whiteout(HiddenName)

	p, err := Diff(Layer{Target: r.root, Upper: u.root, T0: t0}, DiffOptions{Root: r.root, Include: []string{"/run/ws"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"add run/ws/new.go", "mkdir tmp/build", "add tmp/build/out", "add tmp/claude-abcd-cwd"}
	if diff := cmp.Diff(want, opLines(p)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestSummary checks the plan's account for people, and that a plan
// survives JSON (the form the copy half and undoctl try --json use).
func TestSummary(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	p := f.diff(t)
	s := p.Summary()
	for _, want := range []string{
		"32 changes to " + f.target + ": 14 added, 4 replaced, 5 removed, 8 directories made, 1 with new attributes; 8.0 MiB of new data; 1 copied up unchanged\n",
		"  remove   /srv/gone\n",
		"  mkdir    /opt/ro/ (0555 0:0)\n",
		"  attrs    /var/www (0700 33:33)\n",
		"  add      /usr/bin/tool2 (hard link to /usr/bin/tool)\n",
		"  add      /usr/bin/suid (5 B, 4755 0:0)\n",
		"  replace  /etc/link (-> new.conf)\n",
		"  add      /srv/fifo (fifo, 0620 0:0)\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "\n"); n != 33 {
		t.Errorf("Summary has %d lines, want 33", n)
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Plan
	if err := json.Unmarshal(data, &q); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, q); diff != "" {
		t.Errorf("plan after JSON (-want +got):\n%s", diff)
	}
	if !slices.Contains(p.Paths(), "/usr/share/doc/pkg/c") || len(p.Paths()) != 32-3 {
		t.Errorf("Paths = %v", p.Paths())
	}
}

// TestDiffMirrored: a directory the copy only mirrored (to hold a seeded
// path) is not committed when the real one changed since T0; without the
// record, its old attributes would be.
func TestDiffMirrored(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := t.TempDir()
	w := tree{t, base}
	w.dir("root", 0o755)
	w.dir("upper", 0o755)
	r := tree{t, filepath.Join(base, "root")}
	r.dir("usr", 0o755)
	r.dir("usr/sbin", 0o2755)
	t0 := time.Now()
	u := tree{t, filepath.Join(base, "upper")}
	u.mirror(r.root, "usr")
	u.mirror(r.root, "usr/sbin")
	u.file("usr/sbin/policy-rc.d", "exit 101\n", 0o755, tNew)
	w.must(unix.Chmod(r.p("usr/sbin"), 0o750)) // on the host, after T0
	o := DiffOptions{Root: r.root, Seeded: []string{"/usr/sbin/policy-rc.d"}}
	p, err := Diff(Layer{Target: r.root, Upper: u.root, T0: t0}, o)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"meta usr/sbin"}, opLines(p)); diff != "" {
		t.Errorf("without the record (-want +got):\n%s", diff)
	}
	o.Mirrored = []Mirror{
		{Path: "/usr", Mode: fs.ModeDir | 0o755},
		{Path: "/usr/sbin", Mode: fs.ModeDir | fs.ModeSetgid | 0o755},
	}
	if p, err = Diff(Layer{Target: r.root, Upper: u.root, T0: t0}, o); err != nil {
		t.Fatal(err)
	}
	if len(p.Ops) != 0 {
		t.Errorf("with the record: %v, want no operation", opLines(p))
	}
	// The step changed the mirrored directory itself: that is committed.
	w.must(unix.Chmod(u.p("usr/sbin"), 0o700))
	if p, err = Diff(Layer{Target: r.root, Upper: u.root, T0: t0}, o); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"meta usr/sbin"}, opLines(p)); diff != "" {
		t.Errorf("after a chmod in the copy (-want +got):\n%s", diff)
	}
}

// TestDiffTargetGone checks a layer whose real directory (a mount point)
// was removed by something else while the step ran: no change of the
// step's when its upper holds only what the copy put there (the hidden
// engine directory of another engine's copies, directories it mirrored),
// refused, naming the directory, when the step wrote there.
func TestDiffTargetGone(t *testing.T) {
	t.Parallel()
	requireRoot(t) // tree.file makes root-owned files
	base := t.TempDir()
	w := tree{t, base}
	w.dir("root", 0o755)
	w.dir("upper", 0o755)
	target := filepath.Join(base, "root", "gone")
	layer := Layer{Target: target, Upper: w.p("upper"), T0: time.Now()}
	p, err := Diff(layer, DiffOptions{Root: w.p("root")})
	if err != nil || len(p.Ops) != 0 {
		t.Errorf("untouched, gone: %v, %v; want no ops and no error", p.Ops, err)
	}
	w.dir("upper/"+HiddenName, 0o700)
	w.dir("upper/"+HiddenName+"/copies", 0o700)
	w.dir("upper/sub", 0o750)
	o := DiffOptions{Root: w.p("root"), Mirrored: []Mirror{{Path: "/gone/sub", Mode: fs.ModeDir | 0o750, UID: os.Geteuid(), GID: os.Getegid()}}}
	p, err = Diff(layer, o)
	if err != nil || len(p.Ops) != 0 {
		t.Errorf("only the copy's own, gone: %v, %v; want no ops and no error", opLines(p), err)
	}
	var refused *RefusedError
	if _, err := Diff(layer, DiffOptions{Root: w.p("root")}); !errors.As(err, &refused) || refused.Problems[len(refused.Problems)-1].Path != "/gone" {
		t.Errorf("a directory of the step's own, gone: %v; want /gone refused", err)
	}
	w.file("upper/sub/new", "new\n", 0o644, tNew)
	if _, err := Diff(layer, o); !errors.As(err, &refused) || len(refused.Problems) != 1 || refused.Problems[0].Path != "/gone" {
		t.Errorf("written, gone: %v; want /gone refused", err)
	}
}

// TestDiffMirrorGone checks a directory the copy only mirrored whose
// real one something else removed while the step ran (a rootless copy's
// skeleton, where another process's directory came and went): no
// change of the step's when it wrote nothing there, refused when it did.
func TestDiffMirrorGone(t *testing.T) {
	t.Parallel()
	requireRoot(t) // tree.file makes root-owned files
	base := t.TempDir()
	w := tree{t, base}
	w.dir("root", 0o755)
	w.dir("upper", 0o755)
	w.dir("upper/gone", 0o750)
	w.dir("upper/gone/sub", 0o700)
	w.file("upper/gone/seeded", "", 0o400, tNew)
	uid, gid := os.Geteuid(), os.Getegid()
	o := DiffOptions{
		Root:   w.p("root"),
		Seeded: []string{"/gone/seeded"},
		Mirrored: []Mirror{
			{Path: "/gone", Mode: fs.ModeDir | 0o750, UID: uid, GID: gid},
			{Path: "/gone/sub", Mode: fs.ModeDir | 0o700, UID: uid, GID: gid},
		},
	}
	layer := Layer{Target: w.p("root"), Upper: w.p("upper"), T0: time.Now()}
	p, err := Diff(layer, o)
	if err != nil || len(p.Ops) != 0 {
		t.Errorf("untouched, gone: %v, %v; want no operation", opLines(p), err)
	}
	// Without the record, the directories are the step's own: made.
	p, err = Diff(layer, DiffOptions{Root: o.Root, Seeded: o.Seeded})
	if diff := cmp.Diff([]string{"mkdir gone", "mkdir gone/sub"}, opLines(p)); err != nil || diff != "" {
		t.Errorf("without the record: %v (-want +got):\n%s", err, diff)
	}
	// The step changed a mirrored directory: refused, naming it.
	w.must(unix.Chmod(w.p("upper/gone/sub"), 0o755))
	var refused *RefusedError
	if _, err := Diff(layer, o); !errors.As(err, &refused) || len(refused.Problems) != 1 || refused.Problems[0].Path != "/gone" {
		t.Errorf("chmod in the copy, gone: %v; want /gone refused", err)
	}
	w.must(unix.Chmod(w.p("upper/gone/sub"), 0o700))
	// The step wrote a file below it: refused too.
	w.file("upper/gone/sub/new", "new\n", 0o644, tNew)
	if _, err := Diff(layer, o); !errors.As(err, &refused) || refused.Problems[0].Path != "/gone" {
		t.Errorf("written, gone: %v; want /gone refused", err)
	}
}
