// Package enforce makes the kernel hold a step to its class: a "none"
// step writes nothing but its scratch paths, a "git" step nothing but its
// workspace roots and scratch paths. The classifier's verdict is a
// prediction; enforcement turns a wrong prediction (an unknown program
// that writes /etc, a read-only command that is not) into a refused write,
// or, in a view ([Capture]), a write the caller sees and settles, instead
// of an unrecorded change to the machine.
//
// docs/enforce.md has the design: why a view and not a refusal, how each
// mechanism is applied step by step, what escalate does with a step that
// wrote beyond its class, and what it costs.
//
// The mechanisms live in C (limit.c, limit.h): the constructor of this
// package applies them, and the front end (front/undosh-fast.c) includes
// limit.c to apply a read-only plan itself. Plans are version 2
// (Plan.encode, undosh_plan_parse; FuzzPlan and FuzzDecodePlan check that
// the two agree).
//
// # How a step is enforced
//
// [Command] rewrites the exec of a step's shell: instead of the real
// shell, the caller execs (or starts) undosh's own executable under
// argv[0] [Name], with the shell's argv after it and the [Plan] in the
// environment variable UNDOSH_ENFORCE_PLAN. A C constructor in this
// package runs before the Go runtime starts, while the process is still
// single-threaded, which unshare(CLONE_NEWNS) and Landlock need. When it
// sees argv[0] == Name it reads the plan, removes every copy of the
// variable from the environment, applies the plan, and execve()s the real
// shell with the original argv and the rest of the environment.
//
// # What always holds
//
// Nothing else changes on the way: fds, signal dispositions and mask,
// umask, rlimits and the working directory reach the shell as the caller
// set them, and the constructor's own fds are close-on-exec. The plan
// leaves no trace the step can see, neither in its environment nor in its
// argv.
//
// It fails closed. When the plan is missing or malformed, or any step of
// applying it fails, the shell does not run: the process prints
//
//	undosh: error: enforce: WHAT (WHERE)
//	undosh: hint: …
//
// on stderr and exits 126, the status of a refused step. It never falls
// back to running the shell unprotected.
//
// # The mechanisms
//
//   - [MountNS], with CAP_SYS_ADMIN (root, the usual case in a sandbox
//     VM): a mount namespace of the step's own in which every mount but
//     the writable paths is read-only. It refuses every change, metadata
//     (chmod, chown, utimes, xattrs) included, and needs no no_new_privs,
//     so sudo and other setuid programs keep working in the step. Nothing
//     propagates back to the host, and the namespace goes when the last of
//     the step's processes ends.
//   - [Landlock], without CAP_SYS_ADMIN or when a seccomp filter refuses
//     unshare: a ruleset over every write-type right, then no_new_privs.
//     It cannot stop chmod, chown, utimes or xattr changes; setuid
//     programs (sudo, su, fusermount) run without their privileges and
//     fail; writes to devices other than the usual ones (a GPU's, /dev/kvm)
//     are refused.
//   - [Capture]: the plan carries a [View], a mount namespace whose root
//     is an overlay per layer of the machine, with the shared paths, the
//     machine's own trees and its listening Unix sockets bound from the
//     machine. What the step writes beyond the shared paths lands in the
//     upper directories, where the caller reads it once the step ended.
//     [SyncCommand] puts paths of a session's view back as the machine
//     has them, and [BindCommand] shares more paths with it, both from
//     outside the view.
//
// [Auto], the zero [Mode], picks the mount namespace when the process
// that applies the plan has CAP_SYS_ADMIN, and Landlock otherwise; with
// neither, [Command] returns an error wrapping [ErrUnavailable] and the
// caller decides (refuse the step, or run it in a copy). [Probe] says
// which mode would be used.
//
// # What neither mode stops
//
// Enforcement guards against accidents, not against a hostile step: in
// the mount-namespace mode root keeps its capabilities and could remount
// or reach the host's tree through /proc/PID/root or setns. In both
// modes: writes through fds opened before the step started; changes made
// by a daemon on the step's behalf over a socket; the network; signals;
// and the kernel's state outside the file system. A writable path that
// does not exist when the plan is applied is skipped: nothing can be
// created there. docs/enforce.md lists the differences between the modes.
//
// # What callers must do
//
// The binary self names must link this package (cmd/undosh does; a test
// binary of a package that imports it does), and its main should send
// argv[0] == [Name] to [Main], which only runs if the constructor did
// not. After a failed enforced step, [Blocked] finds the refused paths in
// the tail of its stderr, for a hint that names them.
package enforce
