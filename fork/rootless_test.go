package fork

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/pathglob"
	"github.com/undosh/undosh/internal/testuser"
)

// TestRootless runs TestRootlessAsUser as a user it creates: the rootless
// copy is for users who are not root, and CI runs as root.
func TestRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("TestRootlessAsUser runs as this user itself")
	}
	u := testuser.New(t, "undosh-rootless", testuser.Options{Home: true})
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = testuser.Install(t, bin)
	// Root's file in the sticky /tmp: the copy may remove it (the copy's
	// /tmp is the user's), the commit must not.
	theirs := filepath.Join(os.TempDir(), "undosh-rootless-theirs-"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(theirs, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(theirs)
	// A setuid root program, which runs without privilege in the copy.
	id, err := exec.LookPath("id")
	if err != nil {
		t.Fatal(err)
	}
	suid := testuser.Install(t, id)
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	cmd := u.Command(bin, "-test.run", "^TestRootless(AsUser|Setuid)$", "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Env, "UNDOSH_ROOTLESS_THEIRS="+theirs, "UNDOSH_ROOTLESS_SETUID="+suid)
	out, err := cmd.CombinedOutput()
	t.Logf("as %s:\n%s", u.Name, out)
	if err != nil {
		t.Fatalf("TestRootlessAsUser as %s: %v", u.Name, err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("TestRootlessAsUser skipped as %s (see the log)", u.Name)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("root's file in /tmp after the user's commit: %v", err)
	}
}

// TestRootlessAsUser makes a rootless copy, runs a step in it, diffs it,
// commits it and undoes it, as a user who is not root.
func TestRootlessAsUser(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as a user who is not root (TestRootless creates one)")
	}
	if err := Probe(); err != nil {
		t.Skipf("no rootless copy here: %v", err)
	}
	home, _ := os.UserHomeDir()
	if st, err := os.Stat(home); err != nil || !st.IsDir() {
		t.Skipf("no home directory to write to (%s)", home)
	}
	work, err := os.MkdirTemp(home, "rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	for name, data := range map[string]string{"keep": "keep\n", "gone": "gone\n", "edit": "old\n"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The copies where users' copies live (a tmpfs, where there is one:
	// an upper on the target's own filesystem is moved into place, not
	// copied, so a commit killed half-way could not be made again).
	copies, err := os.MkdirTemp(filepath.Dir(RootlessCopiesDir()), "test-")
	if err != nil {
		if err = os.MkdirAll(filepath.Dir(RootlessCopiesDir()), 0o700); err == nil {
			copies, err = os.MkdirTemp(filepath.Dir(RootlessCopiesDir()), "test-")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(copies)
	var copiesSt, workSt unix.Stat_t
	sameFS := unix.Stat(copies, &copiesSt) == nil && unix.Stat(work, &workSt) == nil && copiesSt.Dev == workSt.Dev
	// The files above must be older than the copy: the coarse clock that
	// T0 is read from must pass their ctimes, which a filesystem with
	// fine-grained timestamps may stamp ahead of it.
	for _, name := range []string{"keep", "gone", "edit"} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(work, name), &st); err != nil {
			t.Fatal(err)
		}
		for !coarseNow().After(time.Unix(st.Ctim.Unix())) {
			time.Sleep(time.Millisecond)
		}
	}
	c, err := Create(Options{StateDir: copies})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Discard(); err != nil {
			t.Errorf("discard: %v", err)
		}
		if ents, _ := os.ReadDir(copies); len(ents) > 0 {
			t.Errorf("left in the copies' directory: %v", ents)
		}
	}()
	if !c.Rootless {
		t.Fatal("a copy made by a user who is not root is not rootless")
	}
	theirs := os.Getenv("UNDOSH_ROOTLESS_THEIRS")
	uid := strconv.Itoa(os.Geteuid())
	// /var/tmp is root's and everyone's: overlayfs cannot copy it up in a
	// user namespace, so the copy must have it ready.
	varTmp := ""
	if st, err := os.Stat("/var/tmp"); err == nil && st.Mode()&os.ModeSticky != 0 && st.Mode().Perm() == 0o777 {
		varTmp = "/var/tmp/undosh-rootless-" + uid
		defer os.Remove(varTmp)
	}
	script := `set -e
test "$(id -u)" = ` + uid + `
test "$(cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')" = "` + uid + ` ` + uid + ` 1"
test "$(ls /sys/class/net)" = lo
test ! -e ` + copies + `
cd ` + work + `
echo new > added
echo new > edit
rm gone
mkdir -p dir/sub && echo x > dir/sub/f
if touch /etc/undosh-rootless 2>/dev/null; then echo "wrote /etc" >&2; exit 3; fi
if [ -n "` + theirs + `" ]; then rm -f ` + theirs + `; fi
echo scratch > /tmp/undosh-rootless-` + uid + `
`
	if varTmp != "" {
		script += "echo scratch > " + varTmp + "\n"
	}
	if s := runWith(t, c, RunOptions{Argv: []string{"/bin/sh", "-c", script}, Dir: work}); s.err != nil || s.ExitCode != 0 {
		t.Fatalf("step in the copy: %+v, %v\nstderr: %s", s.Result, s.err, s.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "edit")); string(b) != "old\n" {
		t.Fatalf("the step changed the real tree before any commit: edit is %q", b)
	}

	plans, changed := diffCopy(t, c)
	want := map[string]Kind{
		filepath.Join(work, "added"):     OpAdd,
		filepath.Join(work, "edit"):      OpReplace,
		filepath.Join(work, "gone"):      OpRemove,
		filepath.Join(work, "dir"):       OpMkdir,
		filepath.Join(work, "dir/sub"):   OpMkdir,
		filepath.Join(work, "dir/sub/f"): OpAdd,
		"/tmp/undosh-rootless-" + uid:    OpAdd,
	}
	if theirs != "" {
		want[theirs] = OpRemove
	}
	if varTmp != "" {
		want[varTmp] = OpAdd
	}
	for p, k := range want {
		if changed[p] != k {
			t.Errorf("%s: %q in the plan, want %q", p, changed[p], k)
		}
	}
	for p, k := range changed {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s in the plan, which the step did not change", p, k)
		}
	}

	// What the user could not have done outside the copy stops the
	// commit; the rest goes through, and undo puts it back.
	var mine []Plan
	for _, p := range plans {
		probs := CheckWritable(p)
		if theirs != "" && pathglob.Within(theirs, p.Target) {
			if len(probs) != 1 || probs[0].Path != theirs || !strings.Contains(probs[0].Reason, "sticky") {
				t.Errorf("CheckWritable(%s) = %v, want root's file in the sticky /tmp", p.Target, probs)
			}
			continue
		}
		if len(probs) > 0 {
			t.Errorf("CheckWritable(%s) = %v", p.Target, probs)
		}
		mine = append(mine, p)
	}
	// A commit killed half-way is reversed by the next recovery, as
	// root's is.
	for _, p := range mine {
		if !pathglob.Within(work, p.Target) || sameFS {
			continue
		}
		jd, err := UserJournalDir(p, filepath.Join(work, ".journal"))
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		planFile := filepath.Join(t.TempDir(), "plan.json")
		if err := os.WriteFile(planFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
		child := startCommitChild(t, "commit", planEnv+"="+planFile, journalEnv+"="+jd)
		for applied(t, child.next(t)) < 2 {
			child.proceed(t)
		}
		child.kill(t)
		if did, err := Recover(jd); err != nil || len(did) == 0 {
			t.Fatalf("recover the killed commit: %v, %v", did, err)
		}
		if b, _ := os.ReadFile(filepath.Join(work, "edit")); string(b) != "old\n" {
			t.Errorf("after the recovery, edit is %q", b)
		}
		if _, err := os.Lstat(filepath.Join(work, "added")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the recovery, added: %v", err)
		}
	}
	var done []*Record
	for _, p := range mine {
		jd, err := UserJournalDir(p, filepath.Join(work, ".journal"))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := Commit(p, CommitOptions{JournalDir: jd})
		if err != nil {
			t.Fatalf("commit onto %s: %v", p.Target, err)
		}
		done = append(done, rec)
		t.Cleanup(func() { os.RemoveAll(jd) })
	}
	if b, _ := os.ReadFile(filepath.Join(work, "dir/sub/f")); string(b) != "x\n" {
		t.Errorf("after the commit, dir/sub/f is %q", b)
	}
	if _, err := os.Stat(filepath.Join(work, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the commit, gone: %v", err)
	}
	for i := len(done) - 1; i >= 0; i-- {
		jd, _ := UserJournalDir(mine[i], filepath.Join(work, ".journal"))
		if err := Undo(jd, done[i].ID, false); err != nil {
			t.Fatalf("undo %s: %v", done[i].Target, err)
		}
	}
	for name, data := range map[string]string{"keep": "keep\n", "gone": "gone\n", "edit": "old\n"} {
		if b, err := os.ReadFile(filepath.Join(work, name)); string(b) != data {
			t.Errorf("after the undo, %s is %q (%v)", name, b, err)
		}
	}
	for _, p := range []string{"added", "dir"} {
		if _, err := os.Lstat(filepath.Join(work, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the undo, %s: %v", p, err)
		}
	}
}

// A setuid program runs in a rootless copy, but without privilege.
func TestRootlessSetuid(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as a user who is not root")
	}
	if err := Probe(); err != nil {
		t.Skipf("no rootless copy here: %v", err)
	}
	suid := os.Getenv("UNDOSH_ROOTLESS_SETUID") // a setuid root copy of id
	if suid == "" {
		t.Skip("TestRootless makes the setuid program")
	}
	c, err := Create(Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	s := runWith(t, c, RunOptions{Argv: []string{suid, "-u"}})
	if s.err != nil || s.ExitCode != 0 {
		t.Fatalf("%s in the copy: %+v, %v", suid, s.Result, s.err)
	}
	if got := strings.TrimSpace(s.stdout); got != strconv.Itoa(os.Geteuid()) {
		t.Errorf("a setuid root program in the copy runs as %q, want the user", got)
	}
}

// A user's journal is never put in a directory that another user made
// where both may write (in /tmp, say): it keeps the originals an undo puts
// back.
func TestOwnDir(t *testing.T) {
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if !ownDir(filepath.Join(d, "missing")) || !ownDir(d) {
		t.Error("a missing directory, or one's own, is refused")
	}
	open := filepath.Join(d, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	link := filepath.Join(d, "link")
	os.Symlink(d, link)
	for _, p := range []string{open, link} {
		if ownDir(p) {
			t.Errorf("%s taken for one's own directory", p)
		}
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(d, "theirs")
		os.Mkdir(theirs, 0o700)
		os.Chown(theirs, 65534, 65534)
		if ownDir(theirs) {
			t.Error("another user's directory taken for one's own")
		}
	}
}

// TestRootlessMirrored runs TestRootlessMirroredAsUser as a user it
// creates, in a private mount namespace where the user's directory has a
// mount below it: a rootless copy mirrors such a directory in its
// skeleton, copying the user's files in.
func TestRootlessMirrored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("TestRootlessMirroredAsUser needs a mount that root makes")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	u := testuser.New(t, "undosh-rl-mirror", testuser.Options{Home: true})
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = testuser.Install(t, bin)
	dir := filepath.Join(u.Home, "project")
	for _, d := range []string{"vol", "other/deep"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{"gone": "gone\n", "edit": "old\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exec.Command("chown", "-R", u.Name+":", dir).Run()
	// The mount lives in a namespace of the test's own, gone with it.
	script := `mount -t tmpfs -o mode=0777 undosh-test "$1/vol" && exec setpriv --reuid="$2" --regid="$3" --clear-groups env -i HOME="$4" PATH=/usr/bin:/bin UNDOSH_ROOTLESS_MIRRORED="$1" "$5" -test.run '^TestRootlessMirroredAsUser$' -test.v -test.count=1`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
		dir, strconv.Itoa(u.UID), strconv.Itoa(u.GID), u.Home, bin)
	out, err := cmd.CombinedOutput()
	t.Logf("as %s:\n%s", u.Name, out)
	if err != nil {
		t.Fatalf("TestRootlessMirroredAsUser: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestRootlessMirroredAsUser") {
		t.Errorf("TestRootlessMirroredAsUser did not pass")
	}
}

// TestRootlessMirroredAsUser: in a directory with a mount below it, a
// step's edit and removal of the user's files are committed, and undone.
func TestRootlessMirroredAsUser(t *testing.T) {
	dir := os.Getenv("UNDOSH_ROOTLESS_MIRRORED")
	if os.Geteuid() == 0 || dir == "" {
		t.Skip("TestRootlessMirrored runs it")
	}
	c, err := Create(Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	s := runWith(t, c, RunOptions{Argv: []string{"/bin/sh", "-c", "set -e; cd " + dir + "; rm gone; echo new > edit; echo x > vol/f; echo y > added"}})
	if s.err != nil || s.ExitCode != 0 {
		t.Fatalf("step: %+v, %v, %s", s.Result, s.err, s.stderr)
	}
	// Something else removes a directory the step did not touch: that
	// is no change of the step's, and the commit must not bring it back.
	if err := os.RemoveAll(dir + "/other"); err != nil {
		t.Fatal(err)
	}
	if err := c.Settle(); err != nil {
		t.Fatal(err)
	}
	plans, changed := diffCopy(t, c)
	want := map[string]Kind{dir + "/gone": OpRemove, dir + "/edit": OpReplace, dir + "/vol/f": OpAdd, dir + "/added": OpAdd}
	if len(changed) != len(want) {
		t.Errorf("plan %v, want %v", changed, want)
	}
	for p, k := range want {
		if changed[p] != k {
			t.Errorf("%s: %q in the plan, want %q", p, changed[p], k)
		}
	}
	var recs []*Record
	var jds []string
	for _, p := range plans {
		if probs := CheckWritable(p); len(probs) > 0 {
			t.Fatalf("CheckWritable: %v", probs)
		}
		jd, err := UserJournalDir(p, filepath.Join(t.TempDir(), "journal"))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := Commit(p, CommitOptions{JournalDir: jd})
		if err != nil {
			t.Fatalf("commit onto %s: %v", p.Target, err)
		}
		recs, jds = append(recs, rec), append(jds, jd)
	}
	if _, err := os.Lstat(dir + "/gone"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the commit, gone: %v", err)
	}
	if b, _ := os.ReadFile(dir + "/edit"); string(b) != "new\n" {
		t.Errorf("after the commit, edit is %q", b)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if err := Undo(jds[i], recs[i].ID, false); err != nil {
			t.Fatalf("undo: %v", err)
		}
	}
	if b, _ := os.ReadFile(dir + "/gone"); string(b) != "gone\n" {
		t.Errorf("after the undo, gone is %q", b)
	}
	if b, _ := os.ReadFile(dir + "/edit"); string(b) != "old\n" {
		t.Errorf("after the undo, edit is %q", b)
	}
}

// diffCopy diffs every layer of c, as a commit would: the plans that
// change something, and what each path's operation is.
func diffCopy(t *testing.T, c *Copy) ([]Plan, map[string]Kind) {
	t.Helper()
	var plans []Plan
	changed := map[string]Kind{}
	for _, l := range c.Overlays {
		p, err := Diff(Layer{Target: l.Mount, Upper: l.Upper, T0: c.T0}, DiffOptions{Seeded: c.Seeded, Mirrored: c.Mirrored})
		if err != nil {
			t.Fatalf("diff %s: %v", l.Mount, err)
		}
		for _, op := range p.Ops {
			changed[p.Name(op)] = op.Kind
		}
		if len(p.Ops) > 0 {
			plans = append(plans, p)
		}
	}
	return plans, changed
}

// A copy root makes while a user's rootless copy exists (its tmpfs
// mounted below DefaultCopiesDir after the user's plan) does not stop
// the user's session: the directories above root's copies are mirrored,
// never an overlay's lower directory, so no mount can appear below one.
func TestRootlessRootCopyAppears(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("TestRootlessRootCopyAppearsAsUser runs as this user itself")
	}
	u := testuser.New(t, "undosh-rootless-race", testuser.Options{Home: true})
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin = testuser.Install(t, bin)
	sync := u.Dir(t)
	cmd := u.Command(bin, "-test.run", "^TestRootlessRootCopyAppearsAsUser$", "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Env, "UNDOSH_ROOTLESS_SYNC="+sync)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	planned := filepath.Join(sync, "planned")
	for {
		if _, err := os.Stat(planned); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the user's test ended before its copy was made: %v\n%s", err, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	c, err := Create(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if err := os.WriteFile(filepath.Join(sync, "mounted"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if err != nil || !strings.Contains(out.String(), "--- PASS: TestRootlessRootCopyAppearsAsUser") {
		if strings.Contains(out.String(), "--- SKIP") {
			t.Skipf("skipped as %s:\n%s", u.Name, out.String())
		}
		t.Fatalf("as %s: %v\n%s", u.Name, err, out.String())
	}
}

// TestRootlessRootCopyAppearsAsUser is the user's side: plan a copy,
// wait until root has mounted one of its own, then run a session.
func TestRootlessRootCopyAppearsAsUser(t *testing.T) {
	sync := os.Getenv("UNDOSH_ROOTLESS_SYNC")
	if os.Geteuid() == 0 || sync == "" {
		t.Skip("runs as a user who is not root, for TestRootlessRootCopyAppears")
	}
	if err := Probe(); err != nil {
		t.Skipf("no rootless copy here: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(RootlessCopiesDir()), 0o700); err != nil {
		t.Fatal(err)
	}
	copies, err := os.MkdirTemp(filepath.Dir(RootlessCopiesDir()), "test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(copies)
	c, err := Create(Options{StateDir: copies})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Discard()
	if err := os.WriteFile(filepath.Join(sync, "planned"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(sync, "mounted")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("root's copy never came")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := run(t, c, "true"); s.err != nil || s.ExitCode != 0 {
		t.Fatalf("a session after root's copy appeared: %+v, %v", s.Result, s.err)
	}
}
