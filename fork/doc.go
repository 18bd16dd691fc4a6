// Package fork is the local fork engine: it runs a machine-changing step
// in a copy of the machine, offline, and commits the copy's changes onto
// the machine when the caller asks, journaled so that they can be undone.
//
// docs/fork.md has the design: how a copy is made and entered, the
// rootless copy, the processes a session leaves running and the network.
// docs/design.md has the engine's place in undosh and the pitfalls it is
// built around.
//
// # The copy half
//
//   - [Probe] says whether the engine can run here, and names what is
//     missing.
//   - [Create] makes a [Copy]: one overlay over the root and one per real
//     submount, with the upper layers on a private tmpfs or, with
//     [Options].OnDisk, on disk. [Open] reads a copy's record back
//     ([MetaFile]).
//   - [Copy.Run] runs one session in the copy: /proc/self/exe, re-executed
//     as [InitName], is pid 1 of new mount, pid, network, ipc, uts and
//     cgroup namespaces and runs the session as its child.
//   - [Copy.Discard] kills a running session and removes the copy; it is
//     idempotent. [Cleanup] discards the copies whose creating process
//     has died.
//   - For a user who is not root ([Rootless]) the copy is made in a user
//     namespace that maps the user to itself (rootless.go).
//
// # The commit half
//
// [Diff] plans the commit of one of a copy's layers and changes nothing.
// [Commit] applies a [Plan] and returns its [Record]; [Undo] reverses a
// commit; [Recover] reverses what a crash cut short; [List] reads the
// journal of commits ([JournalDir], wal.go). plan.go has the commit half
// in brief.
//
// # What always holds
//
//   - A copy is not a snapshot. Files it has not written are read live
//     from the real root, so a change made on the host during the step
//     shows in the copy; [Commit] refuses, with a *[ConflictError], a path
//     that changed on the real tree after [Copy].T0.
//   - A copy is not a security boundary. Root in the copy is root on the
//     kernel, with fewer capabilities: the engine guards against
//     accidents, not against a hostile step. Steps that need the network,
//     the kernel, boot files or a live database server belong to a VM
//     host.
//   - A session is offline (its network namespace has only lo), nothing
//     it mounts propagates to the host, and after its set-up no path of
//     the real root is reachable from it.
//   - No process outlives its session: the init's exit kills them. With
//     [RunOptions].Leftovers they are listed in [Result].Leftovers and
//     ended gracefully first.
//   - Sessions in one copy run one at a time ([ErrBusy]) over the same
//     upper layers: verify sees the step's files, not its processes.
//   - What Create seeds into the upper layers ([PolicyRCD], which keeps
//     package scripts from starting services; whiteouts that hide the
//     state directory; the pip guard's markers, [GuardTag]) is listed in
//     [Copy].Seeded and never committed.
//   - The real tree changes only while [Commit] applies a plan and while
//     [Undo] or [Recover] reverses one, and only after the journal that
//     can reverse the change is durable. A commit deletes nothing that
//     was on the real tree: what it replaces or removes is kept in the
//     journal. Undo copies no data, and goes last first ([OrderError]).
//   - A commit that changes /var/lib/dpkg holds the dpkg and apt locks,
//     or fails with [ErrLocked].
//   - A rootless copy's commit takes only what the user could have
//     written outside the copy ([CheckWritable]), journaled where the
//     user can write ([UserJournalDir]).
//
// # What callers must do
//
//   - Call [Probe] before offering the engine, and refuse machine-changing
//     steps (or apply the policy's fallback) when it fails.
//   - Dispatch argv[0] == [InitName] to [Init] at the top of main (tests:
//     from TestMain).
//   - Call [Copy.Discard] on every copy, after a commit too, and [Cleanup]
//     at start.
//   - Never write to a copy's upper layers while a session runs.
package fork
