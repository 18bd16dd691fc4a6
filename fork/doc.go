// Package fork is the local fork engine: it runs a machine-changing step
// in a copy of the machine, offline, and keeps the copy's changes only if
// verify passes (docs/design.md has the engine's place in undosh and the
// pitfalls it is built around).
//
// It is not a snapshot and not a security boundary. Files the copy has
// not written are read live from the real root, so a change made on the
// host during the step shows in the copy (commit refuses what changed
// after [Copy].T0). Root in the copy is root on the kernel, with fewer
// capabilities: the engine guards against accidents, not against a
// hostile step. Steps that need the network, the kernel, boot files or a
// live database server belong to a VM host.
//
// # The copy half
//
// [Probe] checks that the engine can run here (root with CAP_SYS_ADMIN,
// or, for anyone else, user namespaces that work; overlayfs, the six
// namespaces) and names what is missing. A user who is not root gets a
// rootless copy (rootless.go): the same, in a user namespace that maps
// the user to itself, with an overlay per directory that has no mount
// below it; its commit takes only what the user could have written
// ([CheckWritable]), journaled where it can write ([UserJournalDir]).
//
// [Create] makes a copy: a directory under [Options].StateDir
// (default [DefaultCopiesDir], root-only) named PID-START-RANDOM after
// the creating process, which holds NAME.lock beside it locked while the
// copy lives (so that [Cleanup] knows a copy made in another pid
// namespace for one whose creator is gone), holding
//
//	copy.json         the record ([MetaFile]: the JSON of [Copy])
//	root/             where each session mounts the copy's root
//	layers/N/upper    the upper and work directories of overlay N
//	layers/N/work
//
// on a private tmpfs (the default; [Options].Size bounds it), or, with
// [Options].OnDisk, on disk: the overlay of the state directory's own
// filesystem keeps its layers in the copy's directory, and every other
// writable overlay of a filesystem that can hold an upper layer keeps
// them on that filesystem, in <mount>/.undosh-fork/copies/<ID>, so that
// a commit can rename rather than copy. There is one overlay for the root
// and one per real submount in /proc/self/mountinfo: pseudo filesystems,
// /proc, /sys, /dev and /run, the state
// directory and the engine's own mounts (source "undosh-fork") are left
// out; a file bind-mounted on the host (a container's
// /etc/hosts) is copied in. Create seeds the upper layers, before any
// session, with a policy-rc.d that exits 101 ([PolicyRCD]) and with
// whiteouts that hide the state directory, /var/lib/undosh and
// <mount>/.undosh-fork from the copy (a lower layer that holds its own
// upper gives ELOOP), and the PEP 668 markers of undosh's pip guard
// ([GuardTag]), so that pip may install into system paths in the copy. [Copy].Seeded lists these paths and [Copy].Mirrored
// the directories made to hold them, with the real directories' metadata:
// a commit leaves the first out and treats the second as unchanged while
// their metadata match. [Copy].T0 is read from the kernel's coarse clock,
// which stamps ctimes, before Create reads anything of the real root.
//
// [Copy.Run] runs one session: it re-executes /proc/self/exe with argv[0]
// [InitName] in new mount, pid, network, ipc, uts and cgroup namespaces.
// The re-executed process must call [Init]: the main of every binary
// that calls Run must dispatch that name to it first thing (tests: from
// TestMain). The init reads its
// instructions from fd 3 until EOF (NUL-separated fields, enter_wire.go),
// and then:
//
//  1. makes / rprivate, so that nothing propagates to the host;
//  2. mounts each overlay (lowerdir = the real mount point) with
//     redirect_dir, metacopy, index and xino off, nodev, read-only where
//     the real mount is;
//  3. mounts a fresh proc, with /proc/sys, /proc/irq, /proc/bus and
//     /proc/sysrq-trigger read-only and /proc/kcore and /proc/timer_list
//     masked by /dev/null; a read-only sysfs (it shows the copy's own
//     network namespace); a nodev tmpfs /dev holding null, zero, full,
//     random, urandom and tty bind-mounted from the host, its own devpts
//     (newinstance, ptmxmode=0666), shm, mqueue and the ptmx, fd, stdin,
//     stdout and stderr links;
//  4. sets the host name (the host's, or [Options].Hostname) and brings
//     lo up, the only interface;
//  5. pivot_root(".", ".") into the copy and detaches the old root: no
//     path of the real root is reachable after this;
//  6. drops CAP_SYS_ADMIN, SYS_MODULE, SYS_RAWIO, SYS_BOOT, SYS_TIME,
//     SYSLOG, MAC_ADMIN, MAC_OVERRIDE, AUDIT_CONTROL, BPF, PERFMON,
//     SYS_PACCT, LINUX_IMMUTABLE, WAKE_ALARM and BLOCK_SUSPEND from its
//     bounding, permitted, effective and inheritable sets, and clears the
//     ambient set;
//  7. runs the session as its child, reaps every process, writes a report
//     (exit status, signal, set-up time) to fd 4 and exits with the
//     session's status (128+n for signal n). Its exit kills whatever the
//     session left running: daemons do not outlive a session.
//
// # Processes a session leaves running
//
// A step that starts a daemon (`redis-server --daemonize yes`, `pg_ctl
// start`, `nohup server &`, `(setsid cmd &)`, `service x start`) leaves
// it in the copy's pid namespace, which ends with the session: the files
// the step wrote can be committed, the process cannot. Killing it
// silently would be wrong, so with [RunOptions].Leftovers the init, once
// the session leader has exited and some process is still left (a
// non-blocking wait4 tells, so a session that leaves nothing pays
// nothing), waits [LeftoverSettle], reads every process left from the
// copy's /proc (package internal/procs: argv, cwd, environment, exe, real
// uid, gid and groups, and whether it was forked without an exec since),
// writes them in its report and closes it, and then ends them: SIGTERM
// and SIGCONT to all (kill(-1) from the namespace's init), SIGKILL to
// those left after [LeftoverGrace], reaping until none is left. Run takes
// the report as soon as it is closed and stops counting the session's
// timeout, and returns once the init is gone: what the processes wrote
// as they stopped (a clean shutdown of a database, a removed pid file) is
// in the copy, so a commit takes a state they can start from. The list
// is [Result].Leftovers; starting them again on the machine after a
// commit is internal/machine's (detect, then start again: memory and pids
// are not carried over, see there). Verify runs without Leftovers: its
// processes are only killed, and it does not see the step's, which have
// ended before it starts.
//
// The timeout, a cancelled context and [Copy.Discard] kill the init,
// which kills every process of the copy. The step and verify are two
// sessions over the same upper layers: verify sees the step's files, not
// its processes. A copy runs one session at a time ([ErrBusy]).
//
// [Copy.Discard] kills a running session, unmounts the tmpfs and removes
// the copy's directories; it is idempotent. [Cleanup] discards the copies
// whose creating process has died: the recovery to run when undosh
// starts. [Open] reads a copy's record back (for the commit half, or
// another process).
//
// # The network
//
// A copy is offline: its network namespace has only lo, so a server on
// the host's loopback, an abstract Unix socket and any remote address are
// unreachable; a Unix socket file on the real root is reachable by path,
// but connecting through the overlay gives ECONNREFUSED (the overlay's
// inode is not the socket's). The engine never moves an interface into a
// copy.
//
// An allowlist (the policy naming hosts a step may reach) would be
// enforced from the host side, not by anything the copy runs: before the
// session starts, a veth pair with one end in the copy's namespace and
// the other in a host-side namespace (or bridge) owned by the engine; in
// that namespace, nftables rules that forward only to the addresses the
// allowlisted names resolved to at entry, on the allowed ports, and drop
// everything else (other addresses, other protocols, the host's own
// addresses and 169.254.0.0/16); and DNS answered by a resolver in that
// namespace that serves only the allowlisted names (the copy's
// resolv.conf, seeded like policy-rc.d, points at it). The copy keeps no
// CAP_NET_ADMIN that matters there: the rules live outside its namespace.
// This is not built yet.
//
// # What callers must do
//
//   - Call [Probe] before offering the engine, and refuse machine-changing
//     steps (or apply the policy's fallback) when it fails.
//   - Dispatch argv[0] == [InitName] to [Init] at the top of main.
//   - Call [Copy.Discard] on every copy, after a commit too, and [Cleanup]
//     at start.
//   - Never write to a copy's upper layers while a session runs.
package fork
