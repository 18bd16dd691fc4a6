package scripttest

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// Cmds returns the shared commands, to merge into a script's Params.Cmds.
func Cmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"status": Status,
	}
}

// Status is the command `status N PROG [ARGS...]`; N may also be a
// signal's name (SIGKILL), for death by that signal.
func Status(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N|SIGNAME program [args...]")
	}
	want := args[0]
	if n, err := strconv.Atoi(want); (err != nil || n < 0) && unix.SignalNum(want) == 0 {
		ts.Fatalf("status: %q is neither an exit status nor a signal", want)
	}
	err := ts.Exec(args[1], args[2:]...)
	got := "0"
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		got = strconv.Itoa(ee.ExitCode())
	case errors.As(err, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		got = unix.SignalName(ws.Signal())
	default:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		what := "exited with status"
		if strings.HasPrefix(got, "SIG") {
			what = "died of"
		}
		ts.Fatalf("%s %s %s, want %s", args[1], what, got, want)
	}
}
