package main

import (
	"errors"
	"fmt"

	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/guard"
)

const guardUsage = `usage: undoctl guard dpkg|pip|npm [-- COMMAND…]

The guard at the actors that change the machine: exit 0 inside a machine
step (a copy of the machine made by the local fork engine, or a sandbox VM
its host says is a copy); anywhere else, say so on stderr and exit 126.
dpkg's pre-invoke hook runs the same check (/usr/lib/undosh/undosh-guard,
set up by undoctl install); this command is for wrappers and for a look.
COMMAND, when given, is the command to name in the refusal's hint;
otherwise it is found among the ancestors (for dpkg: dpkg, or the apt
that runs it). See docs/guards.md.
`

// guardCmd is `undoctl guard ACTOR [-- COMMAND…]`; it returns the exit
// status.
func guardCmd(args []string, io stdio, getenv func(string) string) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(io.out, guardUsage)
		return exit.OK
	}
	if len(args) == 0 || (len(args) > 1 && args[1] != "--") {
		fmt.Fprint(io.err, guardUsage)
		report(io.err, &exit.UsageError{Msg: "guard: name one program, then optionally -- and its command"})
		return exit.Usage
	}
	var cmd []string
	if len(args) > 2 {
		cmd = args[2:]
	}
	err := guard.Check(args[0], cmd, guard.Options{Getenv: getenv})
	var re *guard.RefusedError
	switch {
	case err == nil:
		return exit.OK
	case errors.As(err, &re):
		fmt.Fprintf(io.err, "undosh: refused: %s\nundosh: hint: %s\n", re.Error(), re.Hint())
		return exit.Refused
	}
	report(io.err, fmt.Errorf("guard: %w", err))
	return exit.Usage
}
