// Package sudo lets a user whose sudo needs no password enter undosh's
// root fork engine for a machine step that runs sudo: the user's undosh
// runs `sudo -n -- UNDOSH` [Entry] PID START SPEC RESULT, and the root
// undosh reads the step from the caller and writes back how it ended.
//
// # The hand-over
//
// Nothing of the step travels as a string that a shell parses again, nor
// as a file descriptor sudo would pass: sudo closes every fd above 2
// (closefrom), and -C needs closefrom_override in sudoers. Instead:
//
//   - the caller writes the step, as JSON ([Spec]), into a memory file
//     (memfd) that it seals against every change, and makes a second,
//     empty one for the answer ([NewOffer]); both stay open in the caller,
//     at the fd numbers given on the command line with its pid and its
//     start time (field 22 of /proc/PID/stat);
//   - the root side ([Accept]) walks its own ancestors (sudo, and sudo's
//     monitor under use_pty) until it finds that pid, and checks that the
//     process started at that time and that its real, effective, saved
//     and filesystem uids are all SUDO_UID, as sudo set it. Only then does
//     it open /proc/PID/fd/SPEC and /proc/PID/fd/RESULT, and it checks
//     what it opened: memory files owned by SUDO_UID, the step's sealed
//     against writing, the answer's not. It checks the caller again after
//     opening, so that a pid reused meanwhile cannot pass;
//   - the root side marks the answer as soon as it has taken the step
//     ([Handover.Taken]), then writes [Result] after the mark when the
//     step is over; the caller reads it once sudo has exited. No mark
//     means the root side never took the step (sudo refused to run
//     undosh), so nothing ran and the caller may run it otherwise; a mark
//     with no answer, that the root side was cut short.
//
// The answer is a memory file because it is not a pipe the root side
// could block on, and not a path: a user's fd that names a file the user
// may only read (say /etc/passwd) is refused, since only a memory file
// passes the check.
//
// # The entry
//
// [Entry] is a first argument that no bash accepts (bash rejects an
// unknown long option with status 2), and undosh stands in for bash, so
// it cannot take a real invocation away. An argv[0] name, as the fork
// engine's init and the guard use, cannot be given through sudo, which
// runs the path it is given; an environment variable would be reset by
// sudo's env_reset. The main takes [Entry] only when it runs as root with
// SUDO_UID set; anything else goes on to the shell, which hands it to
// bash, whose error it is.
//
// What stays true: the package reads no password and stores none; [Probe]
// runs `sudo -n true` with standard input from /dev/null and its output
// discarded, so it never prompts. It reads no environment of its own:
// callers pass SUDO_UID and SUDO_GID.
package sudo
