// Package session runs a bash that lives for many command lines and
// hands each line, before any of it runs, to the [Lines] that protect it:
// an interactive bash on a terminal ([Session.Interactive], through pty)
// and a bash fed one command at a time on a pipe ([Session.Pipe]), as
// agent harnesses drive it. docs/interactive.md describes the design.
//
// The session speaks to hooks inside bash over two named pipes in a
// private directory under the state directory: bash's hooks send
// "hello", "begin" (before a line runs: its id, the status before, cwd,
// history settings, the history entry, `export -p`) and "end" (the
// line's status), each field ended by a NUL; the session answers each
// with the line's id and an action ("run", "end", "skip", "exit:N",
// "ret:N", "forget:N", "cd+", "cd", "ok").
//
// What stays true:
//   - A line runs only after [Lines.Begin] said "run"; a line the
//     session cannot read from history (set +o history, HISTCONTROL, …)
//     is still handed over, with why it is unseen.
//   - Lines are handled one at a time: Begin and the end of the line
//     before never overlap.
//   - undosh's notes on a terminal each take a line of their own, after
//     what the shell wrote before them.
//
// Callers must: make a session with [New], run it once (Interactive or
// Pipe), and [Session.Close] it. The session reads nothing of the process
// itself (no environment, no signals): the caller passes in the standard
// files, the environment and how to start bash ([Options]).
package session
