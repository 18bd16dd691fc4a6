// Package scripttest holds the testscript commands that the binaries'
// scripts (cmd/*/testdata/script/*.txtar) share, so that each is written
// once. It is imported by tests only.
//
// [Cmds] returns them for [testscript.Params.Cmds]:
//
//	status N PROG [ARGS...]
//	status SIGNAME PROG [ARGS...]
//
// runs PROG as exec does (its stdout and stderr are then what the stdout
// and stderr commands check) and fails unless it exits with status N, or
// dies of the signal SIGNAME (SIGKILL).
// testscript's own `! exec` only tells zero from nonzero, and an exit
// status is part of what undosh and undohost promise.
package scripttest
