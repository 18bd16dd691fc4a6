// Package undohost is the logic of undohost, the host daemon of the hostlink
// protocol (docs/hostlink.md, docs/undohost.md): it reads the
// configuration, opens one listener per sandbox, serves them with a
// [hostlink.Server], and carries operations out through a backend, either
// the local fork engine on this same machine ([Local]) or a provider's
// commands ([Provider]).
//
// What stays true inside it: a sandbox is known only by the listener that
// accepted the connection; every file it writes goes to the state
// directory, by temp file, fsync and rename; it writes nothing to the
// standard streams (logs go to <state>/undohost.log); commands are argv
// arrays rendered field by field, never shell strings.
//
// Callers must run [Run] until its context is cancelled (SIGTERM), and, in
// a binary that uses the local backend, dispatch argv[0] ==
// fork.InitName to fork.Init first thing in main.
package undohost
