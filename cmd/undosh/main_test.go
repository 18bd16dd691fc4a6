package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/undosh/undosh/internal/frontend"
	"github.com/undosh/undosh/internal/testuser"
)

// undoshBin and undoctlBin are built once for the tests in this package:
// undosh must run as a real process (its cgo constructor records what the
// caller set up before the Go runtime starts). fastBin is undosh-fast, the
// C front end, built with cc next to undosh ("" when there is no cc).
var undoshBin, undoctlBin, fastBin, undohostBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "undosh-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	undoshBin = filepath.Join(dir, "undosh")
	undoctlBin = filepath.Join(dir, "undoctl")
	undohostBin = filepath.Join(dir, "undohost")
	for _, b := range [][2]string{{undoshBin, "."}, {undoctlBin, "../undoctl"}, {undohostBin, "../undohost"}} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b[1], err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	fastBin = filepath.Join(dir, "undosh-fast")
	if err := frontend.Build("../../front/undosh-fast.c", fastBin); errors.Is(err, frontend.ErrNoCompiler) {
		fastBin = ""
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "build undosh-fast: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// Let the binaries be run by other users (tests as nobody).
	os.Chmod(dir, 0o755)
	// Users, sudoers and committed machine steps change /etc, which
	// the harness suite checks.
	release := testuser.ChangingEtc()
	code := m.Run()
	release()
	os.RemoveAll(dir)
	os.Exit(code)
}
