package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/frontend"
	"github.com/undosh/undosh/internal/guard"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/testuser"
)

// undoshBin and undoctlBin are built once for the tests in this package:
// undosh must run as a real process (its cgo constructor records what the
// caller set up before the Go runtime starts). fastBin is undosh-fast, the
// C front end, built with cc next to undosh ("" when there is no cc).
var undoshBin, undoctlBin, fastBin, undohostBin string

// scriptBin holds the commands of the scripts: this test binary as
// undosh, under each of its names.
var scriptBin string

func TestMain(m *testing.M) {
	// The scripts (script_test.go) run this test binary as undosh,
	// under each argv[0] that undosh re-executes itself as.
	cmds := map[string]func(){}
	for _, name := range []string{"undosh", state.ServerName, enforce.Name, enforce.ViewSyncName, enforce.ViewBindName, fork.InitName, guard.Name} {
		cmds[name] = main
	}
	testscript.Main(built{m}, cmds)
}

// built runs the tests with the binaries built.
type built struct{ m *testing.M }

func (b built) Run() int {
	// testscript.Main put the commands' directory first in $PATH. Only
	// the scripts get it: the Go tests run undosh as undoshBin, and
	// an undosh in their steps' $PATH would be this test binary.
	first, rest, _ := strings.Cut(os.Getenv("PATH"), string(filepath.ListSeparator))
	if _, err := os.Stat(filepath.Join(first, "undosh")); err != nil {
		fmt.Fprintf(os.Stderr, "testscript's commands are not first in $PATH (%s): %v\n", first, err)
		return 1
	}
	scriptBin = first
	os.Setenv("PATH", rest)
	dir, err := os.MkdirTemp("", "undosh-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	undoshBin = filepath.Join(dir, "undosh")
	undoctlBin = filepath.Join(dir, "undoctl")
	undohostBin = filepath.Join(dir, "undohost")
	for _, b := range [][2]string{{undoshBin, "."}, {undoctlBin, "../undoctl"}, {undohostBin, "../undohost"}} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b[1], err, out)
			return 1
		}
	}
	fastBin = filepath.Join(dir, "undosh-fast")
	if err := frontend.Build("../../front/undosh-fast.c", fastBin); errors.Is(err, frontend.ErrNoCompiler) {
		fastBin = ""
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "build undosh-fast: %v\n", err)
		return 1
	}
	// Let the binaries be run by other users (tests as nobody).
	os.Chmod(dir, 0o755)
	// Users, sudoers and committed machine steps change /etc, which
	// the harness suite checks.
	release := testuser.ChangingEtc()
	defer release()
	return b.m.Run()
}
