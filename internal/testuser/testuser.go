// Package testuser makes the temporary users that tests run undosh as,
// for what must hold for an agent that is not root. It is for tests
// only: it runs useradd and userdel.
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

// User is a temporary user.
type User struct {
	Name     string
	UID, GID int
	// Home is its home directory, made by New ("" with NoHome).
	Home string
}

// Options say what New makes.
type Options struct {
	// NoHome: the user has /nonexistent as its home, as nobody does.
	NoHome bool
}

// New creates the user name (a left-over one of a killed run is taken
// over) and removes it, with its home, when the test ends. It skips the
// test, saying why, when this process is not root or useradd is missing.
func New(t testing.TB, name string, o Options) User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to create the test user %s", name)
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skipf("no useradd here to create the test user %s", name)
	}
	if _, err := user.Lookup(name); err == nil {
		exec.Command("userdel", "--remove", name).Run()
	}
	home := "/home/" + name
	args := []string{"--create-home", "--home-dir", home}
	if o.NoHome {
		home = ""
		args = []string{"--no-create-home", "--home-dir", "/nonexistent"}
	}
	args = append(args, "--shell", "/bin/bash", "--user-group", "--comment", "undosh test, removed after the test", name)
	if out, err := exec.Command("useradd", args...).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil && !strings.Contains(string(out), "not found") {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
		// Its copies, should a test have left one.
		os.RemoveAll("/dev/shm/undosh-fork-" + strconv.Itoa(uidOf(name)))
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("look up %s: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return User{Name: name, UID: uid, GID: gid, Home: home}
}

func uidOf(name string) int {
	u, err := user.Lookup(name)
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(u.Uid)
	return n
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
	d, err := os.MkdirTemp("", "undosh-testuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
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
	d, err := os.MkdirTemp("", "undosh-testbin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
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
