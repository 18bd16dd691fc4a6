// Package handover lets an undosh run a protected step's shell in the
// process its caller started, so that $$ and $PPID are what the caller
// expects, while another undosh, the supervisor, keeps the step's
// checkpoint and rolls it back before the caller sees the exit
// (docs/transparency.md).
//
// The process the caller started (the shell-to-be) and the supervisor
// talk over a Unix stream socket pair: the shell-to-be says it may be
// traced ([Conn.Ready]); the supervisor answers with one instruction
// ([Instruction]: exec a program with these standard files, exit with a
// code, or fall back to running the step as a child). The supervisor
// holds the shell with ptrace ([Tracee]) from before the exec to its
// death, relaying every stop, and learns how it ended while it is still
// a zombie that its real parent cannot see.
//
// What stays true: an instruction is read whole or not at all; a
// shell-to-be whose supervisor went away before an instruction came runs
// nothing. Callers must call every [Tracee] method from the thread that
// called [Seize] (runtime.LockOSThread).
package handover
