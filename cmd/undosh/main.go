// Command undosh is a drop-in bash that protects every step an agent runs:
// read-only steps go straight to the real bash, steps that change
// workspace files run after a checkpoint and are rolled back when they
// fail, and steps that reach outside obey the policy. It is called exactly
// as bash is (-c, -lc, -i, -s, a script, a script on stdin, a login argv[0])
// or as sh.
package main

import (
	"os"

	"github.com/undosh/undosh/internal/procstate"
	"github.com/undosh/undosh/shell"
)

func main() {
	procstate.Ignore()
	os.Exit(shell.Main(&shell.Env{
		Argv:    os.Args,
		Environ: procstate.Environ(),
		Getenv:  os.Getenv,
		Stdin:   os.Stdin,
		Stderr:  os.Stderr,
		Closed:  procstate.Closed,
		Files:   procstate.Files(),
		Exec:    procstate.Exec,
		DieBy:   procstate.DieBy,
		Ignored: procstate.Ignored,
	}))
}
