// Package testuser makes a temporary user for tests that must run
// something as a user who is not root, on a machine where the tests run
// as root (CI): useradd when the test starts, userdel when it ends,
// whatever its outcome. A user left by a run that was killed is taken
// over (removed, then made again).
//
// Only tests import it.
package testuser

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// User is a user [Make] made.
type User struct {
	Name     string
	UID, GID int
	// Home is its home directory, made for it ("" without Options.Home).
	Home string
}

// Options say what [Make] makes besides the user.
type Options struct {
	// Home makes /home/NAME, owned by the user and removed with it
	// (userdel -r); without it, the home is /nonexistent.
	Home bool
	// Comment is the passwd comment (GECOS).
	Comment string
}

// Make creates user name (and a group of the same name) and removes it
// when t ends. It returns why not, for t.Skip, when it cannot: not
// root, no useradd.
func Make(t testing.TB, name string, o Options) (User, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return User{}, "making a user needs root"
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		return User{}, "no useradd here (passwd)"
	}
	if _, err := user.Lookup(name); err == nil {
		// Left by a run that was killed: take it over.
		exec.Command("userdel", "-r", name).Run()
	}
	if o.Comment == "" {
		o.Comment = "undosh test, removed after the test"
	}
	args := []string{"--shell", "/bin/bash", "--user-group", "--comment", o.Comment}
	if o.Home {
		args = append(args, "--create-home", "--home-dir", "/home/"+name)
	} else {
		args = append(args, "--no-create-home", "--home-dir", "/nonexistent")
	}
	out, err := exec.Command("useradd", append(args, name)...).CombinedOutput()
	if err != nil {
		return User{}, fmt.Sprintf("useradd %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		del := []string{name}
		if o.Home {
			del = []string{"-r", name}
		}
		if out, err := exec.Command("userdel", del...).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		return User{}, fmt.Sprintf("look up %s: %v", name, err)
	}
	r := User{Name: name}
	r.UID, _ = strconv.Atoi(u.Uid)
	r.GID, _ = strconv.Atoi(u.Gid)
	if o.Home {
		r.Home = u.HomeDir
	}
	return r, ""
}

// New is Make for a test that cannot go on without the user: it skips the
// test, saying why, when the user cannot be made.
func New(t testing.TB, name string, o Options) User {
	t.Helper()
	u, why := Make(t, name, o)
	if why != "" {
		t.Skip(why)
	}
	t.Cleanup(func() {
		// Its rootless copies, should a test have left one.
		os.RemoveAll("/dev/shm/undosh-fork-" + strconv.Itoa(u.UID))
	})
	return u
}

// Command is exec.Command run as u, in its home (or /), with HOME, USER,
// LOGNAME and a PATH set and nothing else of this process's environment.
func (u User) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
	home := u.Home
	if home == "" {
		home = "/nonexistent"
	}
	cmd.Dir = u.Home
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Env = []string{"HOME=" + home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	return cmd
}

// Dir makes a directory that u owns and everyone can search, outside
// the test's own temporary directories (Go makes them 0700, out of the
// user's reach), removed when the test ends.
func (u User) Dir(t testing.TB) string {
	t.Helper()
	d := openDir(t, "undosh-testuser-")
	if err := os.Chown(d, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	return d
}

// Install copies the executable src into a directory everyone can read,
// removed when the test ends, and returns the copy's path: a test binary
// built in Go's 0700 build directory is out of u's reach.
func Install(t testing.TB, src string) string {
	t.Helper()
	d := openDir(t, "undosh-testbin-")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := d + "/" + src[strings.LastIndexByte(src, '/')+1:]
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(fmt.Errorf("install %s: %w", src, err))
	}
	return dst
}

// openDir makes a temporary directory that everyone can search, named
// from prefix, removed when the test ends.
func openDir(t testing.TB, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
