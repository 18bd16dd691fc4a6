// Package enforce makes the kernel hold a step to its class: a "none"
// step writes nothing but its scratch paths, a "git" step nothing but its
// workspace roots and scratch paths. The classifier's verdict is a
// prediction; enforcement turns a wrong prediction (an unknown program
// that writes /etc, a read-only command that is not) into a refused write,
// or, in a view ([Capture]), a write the caller sees and settles, instead
// of an unrecorded change to the machine.
//
// The mechanisms live in C (limit.c, limit.h): the constructor of this
// package applies them, and the front end (front/undosh-fast.c) includes
// limit.c to apply a read-only plan itself. Plans are version 2
// (Plan.encode, undosh_plan_parse; FuzzPlan and FuzzDecodePlan check the
// two agree).
//
// # Views
//
// With [Capture], the plan carries a [View]: the constructor makes a
// mount namespace, mounts an overlay per layer at Root (the machine's
// mount point as the lower directory, the caller's upper and work
// directories), binds the machine's own trees (/proc, /dev, /run, /sys
// and the mounts no layer covers), the shared paths and the listening
// Unix sockets on layers from the machine, makes /proc/sys, /sys and /dev
// read-only, and pivot_roots into Root. What the step writes beyond the
// shared paths lands in the upper directories, where the caller reads it
// once the step ended; see docs/enforce.md. Two more programs of the
// constructor edit a session's view from outside, entering its mount
// namespace: [SyncCommand] puts paths back as the machine has them,
// [BindCommand] shares more paths with it.
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
// shell with the original argv and the rest of the environment. Nothing
// else changes on the way: fds, signal dispositions and mask, umask,
// rlimits and the working directory reach the shell as the caller set
// them, and the constructor's own fds are close-on-exec. The plan leaves
// no trace the step can see (neither in its environment nor in its argv).
//
// When the plan is missing or malformed, or any step of applying it
// fails, the shell does not run: the process prints
//
//	undosh: error: enforce: WHAT (WHERE)
//	undosh: hint: …
//
// on stderr and exits 126, the status of a refused step. It never falls
// back to running the shell unprotected.
//
// # The two mechanisms, and why
//
// With CAP_SYS_ADMIN (root, the usual case in a sandbox VM) the plan is
// applied in a mount namespace of the step's own ([MountNS]). It is
// complete, because a read-only mount refuses every change to what is on
// it: contents, creation, removal, renames, and also metadata (chmod,
// chown, utimes, xattrs), which Landlock cannot restrict. It needs no
// no_new_privs either, so sudo and other setuid programs keep working in
// the step. The sequence:
//
//  1. unshare(CLONE_NEWNS), then make / recursively private: nothing
//     propagates back to the host, and a mount the host makes during the
//     step does not appear (writable) in it;
//  2. bind each writable path onto itself, recursively (mounts beneath a
//     workspace stay visible), and each regular file a standard stream
//     was redirected to (so that >/dev/stdout still works);
//  3. bind /proc/sys onto itself;
//  4. remount every other mount in /proc/self/mountinfo read-only with
//     MS_REMOUNT|MS_BIND|MS_RDONLY, keeping its nosuid, nodev, noexec and
//     nosymfollow (dropping a locked flag is EPERM) and, by the kernel's
//     rule for a remount that names none, its atime flags. Left as they
//     are: the writable binds, /proc (a process's own files) but not
//     /proc/sys, /dev/pts (terminals), and /dev/shm and /dev/mqueue,
//     which are scratch: POSIX shared memory and semaphores (Python's
//     multiprocessing) live there and vanish at reboot. /dev itself is
//     read-only, which stops creating or removing nodes in it but not
//     writing to devices: the kernel refuses writes on a read-only mount
//     only for regular files, directories and links, so /dev/null, the
//     terminal and /dev/tty keep working. /sys and its submounts (cgroup)
//     are read-only;
//  5. chdir to the working directory again: it still pointed into the
//     mount beneath the binds, where relative writes would be refused.
//
// The step's children inherit the namespace, and it goes when the last of
// them ends: nothing is left on the host.
//
// Without CAP_SYS_ADMIN (an unprivileged user, a container), or when a
// seccomp filter refuses unshare, the plan is applied with Landlock
// ([Landlock]): a ruleset that handles every write-type right of the
// kernel's ABI (WRITE_FILE, REMOVE_DIR, REMOVE_FILE, the MAKE_* rights;
// REFER from ABI 2, TRUNCATE from 3, IOCTL_DEV from 5), full rights beneath
// each writable path and /dev/shm, and write, truncate and device-ioctl
// rights on /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom,
// /dev/tty, /dev/ptmx, /dev/pts and on the terminal or file each standard
// stream was opened for writing on; then PR_SET_NO_NEW_PRIVS and
// landlock_restrict_self. A Landlock-restricted process cannot mount or
// remount either. Landlock cannot stop chmod, chown, utimes or xattr
// changes, and no_new_privs makes setuid programs (sudo, su, fusermount)
// run without their privileges in the step: they fail. Writing to other
// devices (a GPU's /dev/nvidia*, /dev/dri, /dev/kvm) is refused; a step
// that needs them must not be enforced this way.
//
// [Auto], the zero [Mode], picks the mount namespace when the process
// that applies the plan has CAP_SYS_ADMIN, and Landlock otherwise; with
// neither, [Command] returns an error wrapping [ErrUnavailable] and the
// caller decides (refuse the step, or run it in a copy). Both modes cost
// about a millisecond or two per step here (BenchmarkEnforcedStep).
//
// # What neither mode stops
//
// Enforcement guards against accidents, not against a hostile step: in
// the mount-namespace mode root keeps its capabilities and could remount
// or reach the host's tree through /proc/PID/root or setns. In both
// modes: writes through fds opened before the step started; changes made
// by a daemon on the step's behalf over a socket (systemctl, docker, a
// database server: connecting to a Unix socket is not a write to the
// file system); the network; signals; and the kernel's state outside the
// file system (sysctls are refused in both modes). Writes to block
// devices are refused only by Landlock, which also refuses every write
// under /proc (a process's own oom_score_adj included), where the mount
// namespace refuses only /proc/sys. A writable path that does not exist
// when the plan is applied is skipped: nothing can be created there,
// since its parent is read-only.
//
// # Callers
//
// The binary self names must link this package (cmd/undosh does; a test
// binary of a package that imports it does), and its main should send
// argv[0] == [Name] to [Main], which only runs if the constructor did
// not. After a failed enforced step, [Blocked] finds the refused paths in
// the tail of its stderr, for a hint that names them.
package enforce
