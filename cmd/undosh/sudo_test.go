package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/undosh/undosh/internal/sudo"
	"github.com/undosh/undosh/internal/testuser"
)

// needSudo skips unless machine steps can run here as root and a user
// the test makes can be given sudo: root, the fork engine, sudo reading
// /etc/sudoers.d, setpriv. It returns sudo's path.
func needSudo(t *testing.T) string {
	t.Helper()
	needForkEngine(t)
	path, err := exec.LookPath("sudo")
	if err != nil {
		t.Skip("no sudo here (.ci/run installs it)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv here (util-linux)")
	}
	if data, err := os.ReadFile("/etc/sudoers"); err != nil || !regexp.MustCompile(`(?m)^[@#]includedir /etc/sudoers.d`).Match(data) {
		t.Skip("/etc/sudoers does not include /etc/sudoers.d")
	}
	return path
}

// sudoUser is a temporary user with a home, a workspace in it, its own
// state directory and a rule in /etc/sudoers.d; the user, its home and
// the rule go when the test ends.
type sudoUser struct {
	testuser.User
	ws, state, sudoers string
}

func makeSudoUser(t *testing.T, name, rule string) *sudoUser {
	t.Helper()
	tu, why := testuser.Make(t, name, testuser.Options{Home: true})
	if why != "" {
		t.Skip(why)
	}
	u := &sudoUser{User: tu, ws: filepath.Join(tu.Home, "ws"), state: filepath.Join(tu.Home, ".local", "state", "undosh"),
		sudoers: "/etc/sudoers.d/undosh-test-" + name}
	for _, d := range []string{u.ws, u.state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exec.Command("chown", "-R", name+":"+name, tu.Home).Run()
	t.Cleanup(func() { os.Remove(u.sudoers) })
	u.setRule(t, rule)
	return u
}

// setRule puts rule (for this user) in its sudoers file: NOPASSWD: ALL,
// or ALL (a password is needed).
func (u *sudoUser) setRule(t *testing.T, rule string) {
	t.Helper()
	// sudo skips a file whose name holds a dot: the temporary one.
	tmp := u.sudoers + ".tmp"
	if err := os.WriteFile(tmp, []byte(u.Name+" ALL=(ALL) "+rule+"\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, u.sudoers); err != nil {
		os.Remove(tmp)
		t.Fatal(err)
	}
}

// env is the environment the user's programs get, plus more.
func (u *sudoUser) env(more ...string) []string {
	return append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.Home,
		"UNDOSH_STATE_DIR=" + u.state, "UNDOSH_POLICY=-", "UNDOSH_REAL_BASH=/bin/bash", "UNDOSH_NO_CLASSIFIER=1"}, more...)
}

// run runs argv (argv[0] is the program) as the user, in its workspace,
// with env.
func (u *sudoUser) run(t *testing.T, env []string, argv ...string) ran {
	t.Helper()
	args := append([]string{"setpriv", "--reuid", strconv.Itoa(u.UID), "--regid", strconv.Itoa(u.GID), "--init-groups", "env", "-i"}, env...)
	return runWith(t, "/usr/bin/setpriv", u.ws, nil, append(args, argv...)...)
}

// steps normalises step numbers, to compare notices.
var steps = regexp.MustCompile(`step \d+`)

func sameNotice(t *testing.T, what, root, viaSudo string) {
	t.Helper()
	if a, b := steps.ReplaceAllString(root, "step N"), steps.ReplaceAllString(viaSudo, "step N"); a != b || a == "" {
		t.Errorf("%s: the notice through sudo is not the root engine's:\n root: %q\n sudo: %q", what, root, viaSudo)
	}
}

func ownedBy(t *testing.T, p string, uid int) {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := int(st.Sys().(*syscall.Stat_t).Uid); got != uid {
		t.Errorf("%s is owned by uid %d, want %d", p, got, uid)
	}
}

// A user with passwordless sudo: a machine step that runs sudo runs in
// root's engine, entered through sudo -n, with the step's bash as the
// user; it is committed as root when it passes (and undoctl back undoes
// it through sudo -n), discarded when it or verify fails, with the root
// engine's notices. The hand-over refuses an offer from a process that
// is not the user's.
func TestSudoMachineSteps(t *testing.T) {
	sudoPath := needSudo(t)
	u := makeSudoUser(t, "undosh-sudo", "NOPASSWD: ALL")
	rootEnv, rootWS := machineEnv(t)

	t.Run("committed, then undone", func(t *testing.T) {
		p := harmless(t)
		r := u.run(t, u.env(), undoshBin, "-c", "sudo sh -c 'echo x > "+p+"'; id -u")
		if r.code != 0 || r.stdout != strconv.Itoa(u.UID)+"\n" || r.stderr != "" {
			t.Fatalf("a passing step through sudo: %+v (want the user's uid: only sudo is root)", r)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "x\n" {
			t.Fatalf("%s after the commit: %q, %v", p, b, err)
		}
		ownedBy(t, p, 0)
		rec := lastRecord(t, u.env())
		if rec["class"] != "fork" || rec["outcome"] != "committed" || rec["sudo"] != true || rec["machine"] == nil {
			t.Fatalf("journal: %v", rec)
		}
		id := fmt.Sprint(rec["id"])
		back := u.run(t, u.env(), undoctlBin, "back", id)
		if back.code != 0 || !strings.Contains(back.stderr, "undoctl: step "+id+" ran as root through sudo: undoing it as root with sudo -n") ||
			!strings.Contains(back.stdout, "step "+id+" undone: 1 path put back") {
			t.Fatalf("undoctl back %s: %+v", id, back)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after undoctl back: %v", p, err)
		}
		if rec := lastRecord(t, u.env()); rec["outcome"] != "restored" || fmt.Sprint(rec["parent"]) != id {
			t.Errorf("journal after the undo: %v", rec)
		}
		// root wrote the user's journal: what it wrote is the user's.
		for _, f := range []string{"journal.jsonl", "seq"} {
			ownedBy(t, filepath.Join(u.state, f), u.UID)
		}
	})

	t.Run("discarded", func(t *testing.T) {
		for _, tc := range []struct {
			name, script string
			env          []string
			code         int
		}{
			{"exit 3", "; exit 3", nil, 3},
			{"verify fails", "", []string{"UNDOSH_VERIFY=false"}, 1},
		} {
			p := harmless(t)
			cmd := "sudo sh -c 'echo x > " + p + "'" + tc.script
			r := u.run(t, u.env(tc.env...), undoshBin, "-c", cmd)
			if r.code != tc.code || r.stdout != "" {
				t.Errorf("%s, through sudo: %+v", tc.name, r)
			}
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("%s: %s reached the machine: %v", tc.name, p, err)
			}
			if rec := lastRecord(t, u.env()); rec["outcome"] != "discarded" || rec["sudo"] != true {
				t.Errorf("%s: journal: %v", tc.name, rec)
			}
			root := runWith(t, undoshBin, rootWS, append(rootEnv, tc.env...), "bash", "-c", cmd)
			if root.code != tc.code {
				t.Errorf("%s, as root: %+v", tc.name, root)
			}
			sameNotice(t, tc.name, root.stderr, r.stderr)
		}
	})

	t.Run("a package installed with sudo dpkg -i", func(t *testing.T) {
		if _, err := exec.LookPath("dpkg-deb"); err != nil {
			t.Skip("dpkg-deb is not installed")
		}
		name, deb := buildDeb(t, u.Home)
		r := u.run(t, u.env("UNDOSH_VERIFY=dpkg -s "+name), undoshBin, "-c", "sudo dpkg -i "+deb)
		if r.code != 0 {
			t.Fatalf("sudo dpkg -i as a machine step: %+v", r)
		}
		if out, err := exec.Command("dpkg", "-s", name).CombinedOutput(); err != nil || !strings.Contains(string(out), "install ok installed") {
			t.Fatalf("after the commit, dpkg -s: %v\n%s", err, out)
		}
		id := fmt.Sprint(lastRecord(t, u.env())["id"])
		if back := u.run(t, u.env(), undoctlBin, "back", id); back.code != 0 {
			t.Fatalf("undoctl back %s: %+v", id, back)
		}
		debUndone(t, name)
	})

	t.Run("undo when sudo needs a password", func(t *testing.T) {
		p := harmless(t)
		if r := u.run(t, u.env(), undoshBin, "-c", "sudo sh -c 'echo x > "+p+"'"); r.code != 0 {
			t.Fatalf("a passing step through sudo: %+v", r)
		}
		id := fmt.Sprint(lastRecord(t, u.env())["id"])
		u.setRule(t, "ALL")
		defer u.setRule(t, "NOPASSWD: ALL")
		back := u.run(t, u.env(), undoctlBin, "back", id)
		hint := "undoctl: hint: run: sudo " + undoctlBin + " back --state " + u.state + " " + id + "\n"
		if back.code != 1 || !strings.Contains(back.stderr, "sudo needs a password here") || !strings.HasSuffix(back.stderr, hint) {
			t.Fatalf("undoctl back %s when sudo needs a password: %+v, want the hint %q", id, back, hint)
		}
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s went, though nothing was undone: %v", p, err)
		}
		// The command the hint names, as sudo would run it.
		cmd := exec.Command(undoctlBin, "back", "--state", u.state, id)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "SUDO_UID=" + strconv.Itoa(u.UID), "SUDO_GID=" + strconv.Itoa(u.GID)}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the command the hint names: %v", p, err)
		}
		ownedBy(t, filepath.Join(u.state, "seq"), u.UID)
	})

	t.Run("the hand-over refuses another uid", func(t *testing.T) {
		// An offer made by this test's process, which runs as root, taken
		// by a root side sudo started for the user: its SUDO_UID is not
		// the offer's uid.
		o, err := sudo.NewOffer([]byte(`{"version":1,"argv":["true"]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		r := u.run(t, u.env(), append([]string{sudoPath, "-n", "--", undoshBin}, o.Args()...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "runs as uid 0/0/0/0, not SUDO_UID "+strconv.Itoa(u.UID)) {
			t.Errorf("a root side taking root's offer for %s: %+v", u.Name, r)
		}
		if taken, _, err := o.Result(); taken || err != nil {
			t.Errorf("the offer was taken: %v, %v", taken, err)
		}
	})
}

// A user whose sudo needs a password: the step runs as it would without
// undosh's sudo path (here with host.fallback: git, so sudo's own prompt
// reads the password from standard input), after one line saying it was
// not protected in a copy; under the default policy it is refused.
func TestSudoNeedsPassword(t *testing.T) {
	needSudo(t)
	u := makeSudoUser(t, "undosh-sudo-pw", "ALL")
	const password = "undosh-test-Pw-8c1"
	if _, err := exec.LookPath("chpasswd"); err != nil {
		t.Skip("no chpasswd here (passwd)")
	}
	set := exec.Command("chpasswd")
	set.Stdin = strings.NewReader(u.Name + ":" + password + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v: %s", err, out)
	}
	pol := filepath.Join(u.Home, "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\nhost:\n  fallback: git\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p := harmless(t)
	step := "echo " + password + " | sudo -S -p '' sh -c 'echo x > " + p + "'"
	r := u.run(t, u.env("UNDOSH_POLICY="+pol), undoshBin, "-c", step)
	if r.code != 0 || strings.Count(r.stderr, "\n") != 1 ||
		!strings.HasPrefix(r.stderr, "undosh: note: this step runs sudo, but sudo needs a password here (sudo -n true: ") ||
		!strings.HasSuffix(r.stderr, "so it was not protected in a copy of the machine; only the workspace is checkpointed (policy host.fallback: git)\n") {
		t.Fatalf("a step with sudo that needs a password: %+v", r)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "x\n" {
		t.Errorf("%s: %q, %v (the step runs on the machine, its password read by sudo)", p, b, err)
	}
	if rec := lastRecord(t, u.env()); rec["class"] != "fork" || rec["sudo"] != nil {
		t.Errorf("journal: %v", rec)
	}

	// Under host.fallback: deny (the default, auto, is git for a user who
	// is not root), refused.
	deny := filepath.Join(filepath.Dir(pol), "deny.yaml")
	if err := os.WriteFile(deny, []byte("version: 1\nhost:\n  fallback: deny\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	q := harmless(t)
	r = u.run(t, u.env("UNDOSH_POLICY="+deny), undoshBin, "-c", "echo "+password+" | sudo -S -p '' sh -c 'echo x > "+q+"'")
	if r.code != 126 || !strings.Contains(r.stderr, "runs sudo, but sudo needs a password here") {
		t.Errorf("the same under host.fallback: deny: %+v", r)
	}
	if _, err := os.Lstat(q); !os.IsNotExist(err) {
		t.Errorf("%s reached the machine: %v", q, err)
	}
}
