// Command undoctl is undosh's control CLI: it explains how undosh would
// protect a command, checks policy files, walks the journal of steps and
// the chain of checkpoints, runs machine steps in a copy of the machine,
// and installs undosh.
package main

import (
	"os"
	"path/filepath"

	"github.com/undosh/undosh/fork"
)

func main() {
	if filepath.Base(os.Args[0]) == fork.InitName {
		// pid 1 of a copy of the machine: fork.Copy.Run re-executes the
		// program that asked for the copy (undoctl run --fork, try).
		os.Exit(fork.Init())
	}
	os.Exit(run(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Getenv))
}
