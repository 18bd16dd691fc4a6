// Command undosh is a drop-in bash that protects every step an agent runs:
// read-only steps go straight to the real bash, steps that change
// workspace files run after a checkpoint and are rolled back when they
// fail, and steps that reach outside obey the policy. It is called exactly
// as bash is (-c, -lc, -i, -s, a script, a script on stdin, a login argv[0])
// or as sh.
//
// Started with argv[0] "undosh-classifier", it is instead the front
// end's resident server, which undosh-fast asks (front/, docs/front.md); with argv[0]
// "undosh-fork-init", pid 1 of a copy of the machine (fork/); with argv[0]
// "undosh-enforce", the step's shell under its class's isolation
// (internal/enforce, whose C constructor does the work before main); with
// argv[0] "undosh-guard", the guard dpkg's pre-invoke hook runs
// (internal/guard). Run by sudo as root with the first argument
// "--undosh-sudo-step", it is the root side of a machine step that a
// user's undosh handed over (internal/sudo): a distinct argv[0] cannot
// pass through sudo, and no bash accepts that argument. With the first
// argument "--undosh-exec-as" (hostlink.ExecAs), it execs the program
// named next under the argv that follows, for a host's backend that
// cannot set argv[0] itself.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/front"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/guard"
	"github.com/undosh/undosh/internal/procstate"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/sudo"
	"github.com/undosh/undosh/shell"
)

// init keeps the main goroutine on the main thread: a step handed over
// (shell/handover.go) is exec'd from it, so that the thread its
// supervisor traces is the one that execs.
func init() { runtime.LockOSThread() }

func main() {
	switch filepath.Base(os.Args[0]) {
	case state.ServerName:
		if len(os.Args) == 1 {
			os.Exit(serveFront())
		}
	case enforce.Name, enforce.ViewSyncName, enforce.ViewBindName: // its C constructor took over already; see enforce.Main
		os.Exit(enforce.Main(os.Stderr))
	case fork.InitName:
		// pid 1 of a copy of the machine (fork.Copy.Run re-executes undosh).
		os.Exit(fork.Init())
	case guard.Name:
		// dpkg's pre-invoke hook (/usr/lib/undosh/undosh-guard, a link
		// to undosh): refuse outside a machine step.
		os.Exit(guard.Main(os.Args[1:], os.Stderr, os.Getenv))
	}
	if len(os.Args) > 1 && os.Args[1] == sudo.Entry && os.Geteuid() == 0 && os.Getenv("SUDO_UID") != "" {
		// The root side of a machine step that a user's undosh handed
		// over through sudo -n (internal/sudo). Anything else with this
		// argument goes to bash, which rejects it as it always has.
		os.Exit(shell.SudoStep(os.Args[2:], os.Getenv, os.Stderr))
	}
	procstate.Ignore()
	if len(os.Args) > 3 && os.Args[1] == hostlink.ExecAs {
		// A host's backend that cannot set argv[0] runs a machine
		// step's real shell through undosh in the copy:
		// undosh --undosh-exec-as PATH ARGV0 ARGS...
		err := procstate.Exec(os.Args[2], os.Args[3:], procstate.Environ())
		fmt.Fprintf(os.Stderr, "undosh: error: exec %s: %v\n", os.Args[2], err)
		os.Exit(exit.NotRun)
	}
	os.Exit(shell.Main(&shell.Process{
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
		// Executed decides the personality: the file run, not argv[0].
		Executed: procstate.Executed(),
	}))
}

// serveFront serves the front end (undosh-fast) until it has been idle
// for $UNDOSH_CLASSIFIER_IDLE (default 15m).
func serveFront() int {
	sd := state.Dir("", os.Getenv, os.Getuid())
	if sd == "" {
		return exit.Usage
	}
	o := front.Options{StateDir: sd}
	if d, err := time.ParseDuration(os.Getenv("UNDOSH_CLASSIFIER_IDLE")); err == nil && d > 0 {
		o.Idle = d
	}
	if err := os.MkdirAll(filepath.Join(sd, "run"), 0o700); err == nil {
		if f, err := os.OpenFile(state.ServerFile(sd, "log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			defer f.Close()
			level := slog.LevelInfo
			if os.Getenv("UNDOSH_CLASSIFIER_DEBUG") != "" {
				level = slog.LevelDebug
			}
			o.Logger = slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: level}))
		}
	}
	if err := front.Serve(o); err != nil {
		if o.Logger != nil {
			o.Logger.Error("front end's server stopped", "err", err)
		}
		return exit.Failure
	}
	return 0
}
