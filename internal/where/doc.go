// Package where says where undosh's things are (its state directory as
// root, the sandbox host's word in it) and tells a process whether it
// runs in a copy of the machine made for a machine step: a copy made by the local fork engine (fork/),
// whose pid 1 is the engine's init, or a sandbox VM that its host told it
// is a copy (WHO_YOU_ARE with role copy, kept by undoctl agent in the
// state directory, see internal/agent).
//
// Both answers come from places an unprivileged process cannot forge: the
// command line of pid 1 of the process's own pid namespace, and a file
// only root may have written. Callers decide what to do with the answer:
// undosh treats every command in a copy as part of the machine step that
// made it, and the guards at the actors (internal/guard) let dpkg change
// the machine only there. It is a leaf, so that a guard links nothing
// else.
package where
