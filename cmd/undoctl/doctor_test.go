package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/undosh/undosh/internal/testuser"
)

// TestRootlessDoctor: for a user who is not root, undoctl doctor says
// that machine steps run in a rootless copy, or, with the engine turned
// off, that no copy can be made and what host.fallback does instead.
func TestRootlessDoctor(t *testing.T) {
	u := testuser.New(t, "undosh-rl-doctor", testuser.Options{Home: true})
	// This test binary as undoctl (TestMain), where the user can run it.
	self, err := exec.LookPath("undoctl")
	if err != nil {
		t.Fatal(err)
	}
	undoctl := testuser.Install(t, self)
	doctor := func(env ...string) string {
		t.Helper()
		cmd := u.Command(undoctl, "doctor")
		cmd.Env = append(cmd.Env, env...)
		cmd.Dir = u.Home
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		var ee *exec.ExitError
		if err := cmd.Run(); err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return out.String()
	}
	out := doctor("UNDOSH_POLICY=-")
	if !strings.Contains(out, "machine steps:  in a rootless copy (a user namespace that maps uid "+fmt.Sprint(u.UID)+" to itself") {
		if strings.Contains(out, "no copy can be made here") {
			t.Skipf("no rootless copy here:\n%s", out)
		}
		t.Errorf("doctor as %s:\n%s", u.Name, out)
	}
	out = doctor("UNDOSH_POLICY=-", "UNDOSH_NO_FORK_ENGINE=1")
	if !strings.Contains(out, "machine steps:  no copy can be made here: the local fork engine is turned off (UNDOSH_NO_FORK_ENGINE); host.fallback: git") {
		t.Errorf("doctor as %s with the engine off:\n%s", u.Name, out)
	}
}
