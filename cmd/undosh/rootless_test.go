package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undosh/undosh/internal/testuser"
)

// asUser runs argv as u with env added to its own, in dir, and returns
// what it printed and its status.
func asUser(t *testing.T, u testuser.User, dir string, env []string, argv ...string) ran {
	t.Helper()
	cmd := u.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = dir
	return runCmd(t, cmd)
}

// Machine steps of a user who is not root run in a rootless copy: a
// write to ~/.config that fails verify is discarded, one that passes is
// committed and undone by undoctl back; one that changes what the user
// cannot change for real is refused.
func TestRootlessMachineSteps(t *testing.T) {
	u := testuser.New(t, "undosh-rl-steps", testuser.Options{Home: true})
	undosh, undoctl := testuser.Install(t, undoshBin), testuser.Install(t, undoctlBin)
	ws := filepath.Join(u.Home, "project")
	if r := asUser(t, u, u.Home, nil, "mkdir", "-p", ws, u.Home+"/.config"); r.code != 0 {
		t.Fatalf("mkdir: %+v", r)
	}
	pol := filepath.Join(u.Dir(t), "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\nverify: \"grep -qx good ~/.config/app.conf\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"UNDOSH_POLICY=" + pol, "PATH=" + filepath.Dir(undoctl) + ":/usr/bin:/bin"}
	conf := filepath.Join(u.Home, ".config/app.conf")
	// eval: code undosh cannot read ahead, a machine step by default.
	step := func(value string) ran {
		return asUser(t, u, ws, append(env, "V="+value), undosh, "-c", `eval "echo \$V > ~/.config/app.conf"`)
	}
	if r := step("bad"); r.code == 0 || !strings.Contains(r.stderr, "verify") || !strings.Contains(r.stderr, "discarded") {
		t.Errorf("a step that fails verify: %+v", r)
	}
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("after a step that failed verify, %s: %v", conf, err)
	}
	if r := step("good"); r.code != 0 || r.stderr != "" {
		if strings.Contains(r.stderr, "cannot run here") {
			t.Skipf("no rootless copy here: %s", r.stderr)
		}
		t.Fatalf("a step that passes verify: %+v", r)
	}
	if b, _ := os.ReadFile(conf); string(b) != "good\n" {
		t.Fatalf("after the commit, %s is %q", conf, b)
	}
	rec := lastRecord(t, []string{"UNDOSH_STATE_DIR=" + filepath.Join(u.Home, ".local/state/undosh")})
	if rec["class"] != "fork" || rec["outcome"] != "committed" {
		t.Errorf("journal record: %v", rec)
	}
	id := fmt.Sprint(rec["id"])
	if r := asUser(t, u, ws, env, undoctl, "back", id); r.code != 0 {
		t.Fatalf("undoctl back %s: %+v", id, r)
	}
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("after undoctl back, %s: %v", conf, err)
	}
}

// A rootless step that removes what the user could not remove for real
// (another user's file in the sticky /tmp, which the copy's /tmp lets it)
// passes in the copy but is refused, and the file stays; a failing one
// that ran a setuid program says that it ran without privilege.
func TestRootlessRefusedAndSetuid(t *testing.T) {
	u := testuser.New(t, "undosh-rl-refuse", testuser.Options{Home: true})
	undosh := testuser.Install(t, undoshBin)
	theirs := filepath.Join(os.TempDir(), fmt.Sprintf("undosh-rl-theirs-%d", os.Getpid()))
	if err := os.WriteFile(theirs, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(theirs)
	// The command is known only when it runs: a machine step.
	env := []string{"UNDOSH_POLICY=-", "F=" + theirs}
	r := asUser(t, u, u.Home, env, undosh, "-c", `eval "$(printf 'rm -f %s' "$F")"`)
	if strings.Contains(r.stderr, "cannot run here") {
		t.Skipf("no rootless copy here: %s", r.stderr)
	}
	if r.code != 126 || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, theirs) {
		t.Errorf("removing root's file in /tmp: %+v", r)
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Errorf("root's file after the refused step: %v", err)
	}
	// A setuid root program that fails for want of privilege.
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	// Under a name the policy does not know (cat is read-only).
	suid := filepath.Join(filepath.Dir(testuser.Install(t, cat)), "suid-tool")
	if err := os.Rename(filepath.Join(filepath.Dir(suid), "cat"), suid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	r = asUser(t, u, u.Home, []string{"UNDOSH_POLICY=-"}, undosh, "-c", suid+" /etc/shadow")
	if r.code == 0 || !strings.Contains(r.stderr, "setuid programs run without privilege: suid-tool") {
		t.Errorf("a setuid program in a rootless copy: %+v", r)
	}
}

// Where no copy can be made for a user who is not root, the default
// fallback (auto) is git for it: the machine step runs with a workspace
// checkpoint, rolled back on failure, and one note says so, the first
// time in a state directory only.
func TestRootlessFallback(t *testing.T) {
	u := testuser.New(t, "undosh-rl-fallback", testuser.Options{Home: true})
	undosh := testuser.Install(t, undoshBin)
	ws := filepath.Join(u.Home, "project")
	if r := asUser(t, u, u.Home, nil, "sh", "-c", "mkdir -p "+ws+" && cd "+ws+" && echo one > a.txt"); r.code != 0 {
		t.Fatalf("set up: %+v", r)
	}
	env := []string{"UNDOSH_POLICY=-", "UNDOSH_NO_FORK_ENGINE=1"}
	r := asUser(t, u, ws, env, undosh, "-c", `eval "$(echo echo two) > a.txt"; false`)
	if r.code != 1 || strings.Count(r.stderr, "note: ") != 1 || !strings.Contains(r.stderr, "host.fallback: git") || !strings.Contains(r.stderr, "rolled back") {
		t.Errorf("first machine step with the fallback: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\n" {
		t.Errorf("a.txt after the rollback: %q", b)
	}
	r = asUser(t, u, ws, env, undosh, "-c", `eval "$(echo echo three) > a.txt"`)
	if r.code != 0 || strings.Contains(r.stderr, "note: ") {
		t.Errorf("second machine step with the fallback: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "three\n" {
		t.Errorf("a.txt after the kept step: %q", b)
	}
}

// Two users' machine steps at once: each in its own rootless copy, with
// its own lock and journal, and both committed.
func TestRootlessTwoUsers(t *testing.T) {
	undosh := testuser.Install(t, undoshBin)
	users := []testuser.User{
		testuser.New(t, "undosh-rl-one", testuser.Options{Home: true}),
		testuser.New(t, "undosh-rl-two", testuser.Options{Home: true}),
	}
	results := make(chan error, len(users))
	for _, u := range users {
		go func() {
			// Started together; nothing makes them overlap for sure, but
			// neither may wait for, or see, the other's.
			r := asUser(t, u, u.Home, []string{"UNDOSH_POLICY=-"}, undosh, "-c",
				`eval "$(echo 'for i in 1 2 3 4 5; do echo $i >> ~/steps.log; done')"`)
			if r.code != 0 || r.stderr != "" {
				results <- fmt.Errorf("%s: %+v", u.Name, r)
				return
			}
			results <- nil
		}()
	}
	for range users {
		if err := <-results; err != nil {
			if strings.Contains(err.Error(), "cannot run here") {
				t.Skip(err)
			}
			t.Error(err)
		}
	}
	for _, u := range users {
		if b, _ := os.ReadFile(filepath.Join(u.Home, "steps.log")); string(b) != "1\n2\n3\n4\n5\n" {
			t.Errorf("%s: steps.log is %q", u.Name, b)
		}
		rec := lastRecord(t, []string{"UNDOSH_STATE_DIR=" + filepath.Join(u.Home, ".local/state/undosh")})
		if rec["class"] != "fork" || rec["outcome"] != "committed" {
			t.Errorf("%s: journal record %v", u.Name, rec)
		}
	}
}
