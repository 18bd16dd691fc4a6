package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/scripttest"
	"github.com/undosh/undosh/internal/testuser"
	place "github.com/undosh/undosh/internal/where"
)

func TestMain(m *testing.M) {
	testscript.Main(changingEtc{m}, map[string]func(){
		"undoctl": main,
		// pid 1 of a copy of the machine (undoctl run --fork, try):
		// fork re-executes this binary under that name.
		fork.InitName: main,
	})
}

// changingEtc runs the tests holding testuser.ChangingEtc: machine steps
// commit to /etc, and test users are made there.
type changingEtc struct{ m *testing.M }

func (c changingEtc) Run() int {
	release := testuser.ChangingEtc()
	defer release()
	return c.m.Run()
}

// TestScript runs the end-to-end scripts in testdata/script. Besides
// scripttest's commands, the scripts have $HARMLESS, a path under /etc
// that no one else uses, removed when the script ends, and the conditions
// incopy, root and overlay.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:  "testdata/script",
		Cmds: scripttest.Cmds(),
		Setup: func(env *testscript.Env) error {
			// Examples are cached in the state directory: keep it in
			// the test's own work directory.
			env.Setenv("UNDOSH_STATE_DIR", env.WorkDir+"/state")
			env.Setenv("HOME", env.WorkDir+"/home")
			harmless := "/etc/undosh-test-" + rand.Text()
			env.Setenv("HARMLESS", harmless)
			env.Defer(func() { os.Remove(harmless) })
			return os.MkdirAll(env.WorkDir+"/home", 0o755)
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "incopy":
				// A copy of the machine made for a machine step, where
				// the guards let everything through.
				return place.InCopy("") || place.InHostCopy(fork.DefaultStateDir), nil
			case "root":
				return os.Getuid() == 0, nil
			case "overlay":
				// The local fork engine's copies are overlays.
				if data, err := os.ReadFile("/proc/filesystems"); err == nil && bytes.Contains(data, []byte("overlay")) {
					return true, nil
				}
				return exec.Command("modprobe", "overlay").Run() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}
