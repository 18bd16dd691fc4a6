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
