package fork

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestRoundTrip commits a hand-built upper covering every kind of change
// onto a temporary root, checks the root against the same step made with
// ordinary calls, undoes the commit and checks the root against the
// original, inode numbers and directory times included. The upper is on a
// tmpfs (staged by copy) or on the target's filesystem (staged by move).
func TestRoundTrip(t *testing.T) {
	for _, shm := range []bool{true, false} {
		name := "same-fs"
		if shm {
			name = "tmpfs"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, shm)
			roundTrip(t, f, expected(t))
		})
	}
}

func roundTrip(t *testing.T, f *fixture, want map[string]string) {
	t.Helper()
	exact := manifestOpts{inodes: true, dirTimes: true}
	before := manifest(t, f.target, exact)
	var lockBefore unix.Stat_t
	if err := unix.Lstat(filepath.Join(f.target, "var/lib/dpkg/lock"), &lockBefore); err != nil {
		t.Fatal(err)
	}

	plan := f.diff(t)
	if diff := cmp.Diff(wantOps, opLines(plan)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	for _, s := range []Skip{
		{"/etc/same.conf", "unchanged"}, {"/srv/sock", "socket"}, {"/run", "excluded"},
		{"/usr/sbin/policy-rc.d", "excluded"}, {"/var/lib/dpkg/lock", "excluded"},
	} {
		if !slices.Contains(plan.Skipped, s) {
			t.Errorf("plan.Skipped lacks %v: %v", s, plan.Skipped)
		}
	}
	if i := slices.IndexFunc(plan.Ops, func(op Op) bool { return op.Path == "usr/bin/tool2" }); plan.Ops[i].LinkOf != "usr/bin/tool" {
		t.Errorf("usr/bin/tool2 LinkOf = %q, want usr/bin/tool", plan.Ops[i].LinkOf)
	}

	rec, err := Commit(plan, CommitOptions{JournalDir: f.journal})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Committed || rec.Ops != len(plan.Ops) || rec.ID == "" {
		t.Errorf("record = %+v", rec)
	}
	got := manifest(t, f.target, manifestOpts{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after commit, the root differs from the copy (-want +got):\n%s", diff)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(f.target, "opt/sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<20 {
		t.Errorf("opt/sparse takes %d bytes on disk: its holes were filled", st.Blocks*512)
	}
	if err := unix.Lstat(filepath.Join(f.target, "var/lib/dpkg/lock"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino != lockBefore.Ino || st.Mtim != lockBefore.Mtim {
		t.Errorf("the dpkg lock file was replaced or touched")
	}
	if err := unix.Lstat(filepath.Join(f.target, "etc/new.conf"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 1 {
		t.Errorf("etc/new.conf has %d links: it shares its inode with the upper", st.Nlink)
	}
	if fi, err := os.Stat(f.journal); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("journal directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	// The caller discards the copy after a commit; that must not look like
	// a later change to what the commit put in place.
	if err := os.RemoveAll(f.upper); err != nil {
		t.Fatal(err)
	}

	if err := Undo(f.journal, rec.ID, false); err != nil {
		t.Fatal(err)
	}
	after := manifest(t, f.target, exact)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("after undo, the root differs from the original (-want +got):\n%s", diff)
	}
	recs, err := List(f.journal)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !recs[0].Committed || !recs[0].Undone || len(recs[0].Left) > 0 {
		t.Errorf("List after undo = %+v", recs)
	}
	// Undo again: nothing to do.
	if err := Undo(f.journal, rec.ID, false); err != nil {
		t.Errorf("second undo: %v", err)
	}
	if diff := cmp.Diff(before, manifest(t, f.target, exact)); diff != "" {
		t.Errorf("after a second undo (-want +got):\n%s", diff)
	}
}

// TestRoundTripOverlay makes the step through a real overlay (in a mount
// namespace of its own thread), so that the upper is what overlayfs
// writes, not what this package's author believes it writes; then it
// commits it and undoes it like TestRoundTrip.
func TestRoundTripOverlay(t *testing.T) {
	for _, shm := range []bool{true, false} {
		name := "same-fs"
		if shm {
			name = "tmpfs"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			requireRoot(t)
			base := t.TempDir()
			f := &fixture{base: base, target: filepath.Join(base, "root"), journal: filepath.Join(base, "journal")}
			w := tree{t, base}
			w.dir("root", 0o755)
			buildOriginal(t, f.target)
			f.t0 = time.Now()
			ubase := base
			if shm {
				ubase = shmDir(t)
			}
			f.upper = filepath.Join(ubase, "upper")
			tree{t, ubase}.dir("upper", 0o755)
			tree{t, ubase}.dir("work", 0o700)
			w.dir("merged", 0o755)

			want, err := inOverlay(t, f.target, f.upper, filepath.Join(ubase, "work"), filepath.Join(base, "merged"))
			if err != nil {
				t.Skipf("cannot mount an overlay here: %v", err)
			}
			roundTrip(t, f, want)
		})
	}
}

var errStepFailed = errors.New("the step failed in the overlay")

// inOverlay mounts an overlay in a new mount namespace of a thread of its
// own, makes the step through it, and returns the merged view's
// manifest. The thread exits locked, so that the namespace and its mount
// die with it whatever happens.
func inOverlay(t *testing.T, lower, upper, work, merged string) (map[string]string, error) {
	type result struct {
		m   map[string]string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			ch <- result{err: err}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			ch <- result{err: err}
			return
		}
		opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work +
			",redirect_dir=off,metacopy=off,index=off,xino=off"
		if err := unix.Mount("overlay", merged, "overlay", unix.MS_NODEV, opts); err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Unmount(merged, unix.MNT_DETACH)
		defer func() {
			if e := recover(); e != nil {
				msg, ok := e.(stepFailure)
				if !ok {
					panic(e)
				}
				ch <- result{err: fmt.Errorf("%w: %s", errStepFailed, msg)}
			}
		}()
		step(stepTB{}, merged)
		m := manifest(stepTB{}, merged, manifestOpts{})
		stepExcluded(stepTB{}, merged)
		ch <- result{m: m}
	}()
	r := <-ch
	if errors.Is(r.err, errStepFailed) {
		t.Fatal(r.err)
	}
	return r.m, r.err
}

// TestConflict checks that a commit is refused, changing nothing, when
// the real tree changed after T0 in any of the ways that matter.
func TestConflict(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, w tree) func()
		path   string
		reason string
	}{
		{"replaced file changed", func(t *testing.T, w tree) func() {
			w.write("etc/app.conf", "edited on the host\n", tBase)
			return nil
		}, "/etc/app.conf", "changed"},
		{"file under a removed tree changed", func(t *testing.T, w tree) func() {
			w.write("srv/gone/sub/b", "edited on the host\n", tBase)
			return nil
		}, "/srv/gone/sub/b", "changed"},
		{"added path created", func(t *testing.T, w tree) func() {
			w.file("etc/new.conf", "made on the host\n", 0o644, tBase)
			return nil
		}, "/etc/new.conf", "created on the real root"},
		{"directory's attributes changed", func(t *testing.T, w tree) func() {
			w.must(unix.Chmod(w.p("var/www"), 0o750))
			return nil
		}, "/var/www", "changed"},
		{"directory on the way now a symlink", func(t *testing.T, w tree) func() {
			w.must(os.Rename(w.p("usr/share/doc"), w.p("usr/share/doc.real")))
			w.must(os.Symlink("doc.real", w.p("usr/share/doc")))
			return nil
		}, "/usr/share/doc", "no longer a directory"},
		{"open for writing", func(t *testing.T, w tree) func() {
			fd, err := os.OpenFile(w.p("etc/app.conf"), os.O_WRONLY, 0)
			w.must(err)
			return func() { fd.Close() }
		}, "/etc/app.conf", "open for writing by process"},
		{"removed file open for writing", func(t *testing.T, w tree) func() {
			fd, err := os.OpenFile(w.p("srv/gone/a"), os.O_RDWR, 0)
			w.must(err)
			return func() { fd.Close() }
		}, "/srv/gone/a", "open for writing by process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, false)
			plan := f.diff(t)
			waitCoarsePast(f.t0)
			done := tt.change(t, tree{t, f.target})
			if done != nil {
				defer done()
			}
			before := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
			upperBefore := manifest(t, f.upper, manifestOpts{inodes: true})
			_, err := Commit(plan, CommitOptions{JournalDir: f.journal})
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("Commit = %v, want a *ConflictError", err)
			}
			if !slices.ContainsFunc(ce.Problems, func(p Problem) bool {
				return p.Path == tt.path && strings.HasPrefix(p.Reason, tt.reason)
			}) {
				t.Errorf("problems = %v, want %s: %s…", ce.Problems, tt.path, tt.reason)
			}
			if diff := cmp.Diff(before, manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})); diff != "" {
				t.Errorf("a refused commit changed the root (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(upperBefore, manifest(t, f.upper, manifestOpts{inodes: true})); diff != "" {
				t.Errorf("a refused commit changed the upper (-before +after):\n%s", diff)
			}
			if recs, err := List(f.journal); err != nil || len(recs) != 0 {
				t.Errorf("journal after a refused commit: %v, %v", recs, err)
			}
		})
	}
}

// TestConflictDuringApply changes a path between the check and its
// operation: the operation's own check refuses it, and what was applied
// is reversed.
func TestConflictDuringApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	plan := f.diff(t)
	before := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
	victim := filepath.Join(f.target, "var/lib/dpkg/status") // a late operation
	_, err := Commit(plan, CommitOptions{JournalDir: f.journal, Progress: func(applied, total int) {
		if applied == 3 {
			waitCoarsePast(time.Now())
			if err := os.WriteFile(victim, []byte("Package: a\n"), 0o644); err != nil {
				t.Error(err)
			}
		}
	}})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != "/var/lib/dpkg/status" {
		t.Fatalf("Commit = %v, want a conflict on /var/lib/dpkg/status", err)
	}
	after := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
	// The victim's content is the same; only its times moved.
	delete(before, "var/lib/dpkg/status")
	delete(after, "var/lib/dpkg/status")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("after a conflict during apply (-before +after):\n%s", diff)
	}
	if recs, err := List(f.journal); err != nil || len(recs) != 0 {
		t.Errorf("journal after a reversed commit: %v, %v", recs, err)
	}
}

// TestUndoAfterChange checks that undo refuses when a committed path
// changed since the commit, changing nothing, and that force puts the
// original back.
func TestUndoAfterChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	before := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
	rec, err := Commit(f.diff(t), CommitOptions{JournalDir: f.journal})
	if err != nil {
		t.Fatal(err)
	}
	w := tree{t, f.target}
	w.write("etc/app.conf", "edited after the commit\n", tNew)
	w.file("opt/newdir/g", "new in a new directory\n", 0o644, tNew)
	mid := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})

	err = Undo(f.journal, rec.ID, false)
	var ce *ConflictError
	if !errors.As(err, &ce) || !ce.Undo {
		t.Fatalf("Undo = %v, want a *ConflictError", err)
	}
	var paths []string
	for _, p := range ce.Problems {
		paths = append(paths, p.Path)
	}
	if diff := cmp.Diff([]string{"/etc/app.conf", "/opt/newdir"}, paths); diff != "" {
		t.Errorf("conflicting paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mid, manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})); diff != "" {
		t.Errorf("a refused undo changed the root (-before +after):\n%s", diff)
	}

	if err := Undo(f.journal, rec.ID, true); err != nil {
		t.Fatal(err)
	}
	after := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true, skip: []string{"opt"}})
	delete(before, ".") // opt, left, adds a link to it
	delete(after, ".")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("after a forced undo (-want +got):\n%s", diff)
	}
	// The file made in the commit's directory is not the commit's: it
	// stays, and so does its directory.
	if _, err := os.Stat(w.p("opt/newdir/g")); err != nil {
		t.Errorf("a forced undo deleted a file the commit did not make: %v", err)
	}
	recs, err := List(f.journal)
	if err != nil || len(recs) != 1 || !recs[0].Undone {
		t.Fatalf("List = %+v, %v", recs, err)
	}
	if len(recs[0].Left) != 2 || !strings.HasPrefix(recs[0].Left[0], "/opt/newdir: ") || !strings.HasPrefix(recs[0].Left[1], "/opt: ") {
		t.Errorf("Left = %q, want /opt/newdir and /opt", recs[0].Left)
	}
}

// TestUndoOrder checks that commits are undone last first where they
// overlap, and in any order where they do not.
// commitUpper commits the upper directory base/name, which build fills,
// onto root, journaled in jd, and returns the commit's id.
func commitUpper(t *testing.T, base, root, jd, name string, build func(u tree)) string {
	t.Helper()
	t0 := time.Now()
	u := tree{t, filepath.Join(base, name)}
	tree{t, base}.dir(name, 0o755)
	build(u)
	p, err := Diff(Layer{Target: root, Upper: u.root, T0: t0}, DiffOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Commit(p, CommitOptions{JournalDir: jd})
	if err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

func TestUndoOrder(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	base := t.TempDir()
	root := filepath.Join(base, "root")
	jd := filepath.Join(base, "journal")
	w := tree{t, base}
	w.dir("root", 0o755)
	r := tree{t, root}
	r.dir("etc", 0o755)
	r.dir("srv", 0o755)
	r.file("etc/app.conf", "v1\n", 0o644, tBase)
	before := manifest(t, root, manifestOpts{inodes: true, dirTimes: true})

	commit := func(name string, build func(u tree)) string {
		t.Helper()
		return commitUpper(t, base, root, jd, name, build)
	}
	a := commit("a", func(u tree) {
		u.mirror(root, ".")
		u.mirror(root, "etc")
		u.file("etc/app.conf", "v2\n", 0o644, tNew)
		u.file("etc/a", "a\n", 0o644, tNew)
	})
	b := commit("b", func(u tree) {
		u.mirror(root, ".")
		u.mirror(root, "etc")
		u.file("etc/app.conf", "v3\n", 0o644, tNew)
	})
	c := commit("c", func(u tree) {
		u.mirror(root, ".")
		u.mirror(root, "srv")
		u.file("srv/c", "c\n", 0o644, tNew)
	})

	err := Undo(jd, a, false)
	var oe *OrderError
	if !errors.As(err, &oe) || oe.Later != b || !slices.Equal(oe.Paths, []string{"/etc/app.conf"}) {
		t.Fatalf("Undo(a) = %v, want an *OrderError naming %s and /etc/app.conf", err, b)
	}
	for _, id := range []string{c, b, a} {
		if err := Undo(jd, id, false); err != nil {
			t.Fatalf("Undo(%s): %v", id, err)
		}
	}
	if diff := cmp.Diff(before, manifest(t, root, manifestOpts{inodes: true, dirTimes: true})); diff != "" {
		t.Errorf("after undoing all three (-want +got):\n%s", diff)
	}
	if err := Undo(jd, "20000101T000000.000000000", false); !errors.Is(err, ErrNoCommit) {
		t.Errorf("Undo of an unknown id = %v, want ErrNoCommit", err)
	}
}

// TestDefaultJournalDir checks the journal's place and that a copy's
// hidden directory is never committed.
func TestDefaultJournalDir(t *testing.T) {
	t.Parallel()
	if got := JournalDir("/"); got != "/var/lib/undosh/fork/journal" {
		t.Errorf("JournalDir(/) = %s", got)
	}
	if got := JournalDir("/home/"); got != "/home/.undosh-fork/journal" {
		t.Errorf("JournalDir(/home/) = %s", got)
	}
	requireRoot(t)
	base := t.TempDir()
	w := tree{t, base}
	w.dir("root", 0o755)
	w.dir("upper", 0o755)
	root := filepath.Join(base, "root")
	tree{t, root}.dir("srv", 0o755)
	t0 := time.Now()
	u := tree{t, filepath.Join(base, "upper")}
	u.whiteout(HiddenName) // as the copy hides it
	u.mirror(root, "srv")
	u.file("srv/x", "x\n", 0o644, tNew)
	p, err := Diff(Layer{Target: root, Upper: u.root, T0: t0}, DiffOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"add srv/x"}, opLines(p)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	rec, err := Commit(p, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, HiddenName, "journal", rec.ID))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the commit is not journaled in the default place: %v", err)
	}
	// A workspace at the mount's top does not show the journal.
	if _, err := exec.LookPath("git"); err == nil {
		git := exec.Command("sh", "-c", "git init -q && git status --porcelain --untracked-files=all")
		git.Dir = root
		if out, err := git.CombinedOutput(); err != nil || string(out) != "?? srv/x\n" {
			t.Errorf("git status at the mount's top: %q, %v", out, err)
		}
	}
	if err := Undo(JournalDir(root), rec.ID, false); err != nil {
		t.Fatal(err)
	}
}

// TestCommitEmpty: nothing to commit writes nothing.
func TestCommitEmpty(t *testing.T) {
	t.Parallel()
	jd := filepath.Join(t.TempDir(), "journal")
	rec, err := Commit(Plan{Root: "/", Target: "/"}, CommitOptions{JournalDir: jd})
	if err != nil || !rec.Committed || rec.ID != "" {
		t.Errorf("Commit(empty) = %+v, %v", rec, err)
	}
	if _, err := os.Stat(jd); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an empty commit made its journal directory: %v", err)
	}
}

// TestCommitBadPlan: a plan that did not come from Diff is checked first.
func TestCommitBadPlan(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	jd := filepath.Join(base, "journal")
	attrs := &Attrs{Mode: 0o644}
	for _, op := range []Op{
		{Kind: OpAdd, Path: "../escape", Type: TypeFile, Attrs: attrs},
		{Kind: OpAdd, Path: "/abs", Type: TypeFile, Attrs: attrs},
		{Kind: OpAdd, Path: "a//b", Type: TypeFile, Attrs: attrs},
		{Kind: OpAdd, Path: "a", Type: TypeFile},
		{Kind: OpMkdir, Path: "a", Type: TypeFile, Attrs: attrs},
		{Kind: "chmod", Path: "a", Type: TypeFile, Attrs: attrs},
		{Kind: OpRemove, Path: "."},
	} {
		_, err := Commit(Plan{Root: base, Target: base, T0: time.Now(), Ops: []Op{op}}, CommitOptions{JournalDir: jd})
		if err == nil {
			t.Errorf("Commit of %+v succeeded", op)
		}
	}
	if _, err := os.Stat(jd); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a bad plan made the journal directory: %v", err)
	}
}

// TestCommitCrossMount: the journal must be on the target's mount, where
// rename and link reach.
func TestCommitCrossMount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	before := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
	_, err := Commit(f.diff(t), CommitOptions{JournalDir: filepath.Join(shmDir(t), "journal")})
	if err == nil || !strings.Contains(err.Error(), "is not on the mount of") {
		t.Errorf("Commit with the journal on a tmpfs = %v, want a refusal", err)
	}
	if diff := cmp.Diff(before, manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})); diff != "" {
		t.Errorf("the refused commit changed the root (-before +after):\n%s", diff)
	}
}
