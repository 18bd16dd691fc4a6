// Package watch keeps, for one workspace directory tree, the set of paths
// that changed since the last checkpoint, so that a checkpoint can read
// those paths again instead of walking the whole tree.
//
// [Open] watches every directory of the tree with inotify. [Tree.Snapshot]
// first handles every event the kernel has already queued, then returns
// what changed since the tree last [Tree.Recorded]: the base tree id and
// the changed paths, or a reason to walk everything. A checkpoint takes a
// snapshot, reads the paths (or everything), records a tree and hands the
// snapshot's epoch back to Recorded.
//
// Segments. Changes are kept in segments, one per interval between two
// snapshots; each has an epoch, a set of paths and a gap reason. A
// snapshot returns the union of the segments after the base, and the
// first gap among them. Recorded(e, tree) makes tree the base and drops
// the segments up to e, but only when e is newer than the base: two
// checkpoints may finish out of order, and the older one is then
// ignored.
//
// What stays true:
//   - Correctness before speed: whenever an event may have been missed,
//     the snapshot is Full and says why ("event queue overflowed", "watch
//     limit reached (fs.inotify.max_user_watches = N)", "nfs at sub does
//     not report changes", "mounts under the workspace changed",
//     "workspace moved or deleted", "too many changes", "no tree recorded
//     yet", "watch starting", ...). Extra paths are harmless; a missing
//     one is a bug.
//   - A directory that was created, moved in, or watched only after it
//     may have been written is reported as a Tree path, to be read whole.
//     Its watch is added before it is listed, so nothing made in between
//     is missed.
//   - Symlinks are entries, never followed: a symlink loop is harmless.
//   - Excluded directories are not watched, and changes under them are
//     not reported. An excluded path made, removed or moved is reported
//     (as a plain path, never a Tree one): the checkpoint's list of paths
//     left out names it.
//   - After an overflow, or a change of the mounts under the root, every
//     directory is walked again, so that later snapshots can be trusted.
//   - Memory stays bounded: past Options.MaxPaths the set is dropped
//     ("too many changes"), and at most 64 segments are kept (the oldest
//     are merged, which can only add paths).
//   - A watched directory costs about 120 bytes of Go heap (its name
//     and its parent's watch descriptor, not its full path): 50,000
//     directories took 5.9 MB (117 bytes each) on amd64; see
//     TestOpenMemory.
//
// What inotify cannot see, and this package does not claim to: writes
// through a shared mmap, and writes through a hard link from outside the
// tree. A change reported for a file with several hard links, a
// directory with such files found by a walk, or, once the tree is known
// to have them, a change whose file is gone before it could be counted,
// makes the snapshot Full, since other names may have changed too. Network and
// user-space filesystems (NFS, SMB, 9p, FUSE and virtiofs, AFS, Ceph,
// GFS2, OCFS2, Lustre, ...) anywhere in the tree make every snapshot
// Full.
//
// Set-up runs in a goroutine and holds the tree's lock while it walks
// (it lstats every regular file, to learn whether the tree has hard
// links), so a Snapshot taken meanwhile waits for it and is Full "watch
// starting".
//
// Callers must Close a Tree.
package watch
