package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/undosh/undosh/fork"
	place "github.com/undosh/undosh/internal/where"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"undoctl": main,
	})
}

// TestScript runs the end-to-end scripts in testdata/script.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// Examples are cached in the state directory: keep it in
			// the test's own work directory.
			env.Setenv("UNDOSH_STATE_DIR", env.WorkDir+"/state")
			env.Setenv("HOME", env.WorkDir+"/home")
			return os.MkdirAll(env.WorkDir+"/home", 0o755)
		},
		Condition: func(cond string) (bool, error) {
			if cond == "incopy" {
				// A copy of the machine made for a machine step, where
				// the guards let everything through.
				return place.InCopy("") || place.InHostCopy(fork.DefaultStateDir), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}
