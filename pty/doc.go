// Package pty runs a program, normally the real bash, on a new
// pseudo-terminal and relays the caller's terminal to it, so that an
// interactive session through undosh feels exactly like one without it.
//
// [Run] is the whole API. What stays true while it runs:
//
//   - The program is the session leader of the new PTY, with the PTY as its
//     controlling terminal. Ctrl-C, Ctrl-Z and the other interactive signals
//     are plain bytes that the PTY's line discipline turns into signals for
//     the program's foreground process group; the proxy never simulates them.
//     Job control (Ctrl-Z, fg, bg) therefore works as it does in bash.
//   - When [Options].Stdin is a terminal it is put in raw mode, and its
//     original settings are restored exactly once: when Run returns, when Run
//     panics, and as soon as SIGTERM or SIGHUP arrives. Nothing is logged to
//     the terminal; the logger is the caller's, and discards by default.
//   - The PTY starts with the size of Stdin, and every SIGWINCH copies the new
//     size across.
//   - EIO on the PTY master (what Linux reports once the last holder of the
//     PTY's other end has gone) is the end of output, not an error.
//   - The program's exit status passes through; death by signal n becomes
//     128+n, as in bash.
//
// Callers must not read Stdin or write Stdout while Run is in progress, and
// must not install their own handlers for SIGWINCH, SIGTERM, SIGHUP, SIGINT
// or SIGQUIT for the same period: Run registers them with [signal.Notify]
// and unregisters them before it returns.
package pty
