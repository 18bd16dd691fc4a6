// Package checkpoint keeps undo points of a workspace in a shadow git
// repository outside it.
//
// [Open] opens (or creates) the store of one workspace under the state
// directory. [Store.Checkpoint] records the workspace as a commit: tracked,
// untracked and ignored files, symlinks, the executable bit, empty
// directories, and the workspace's own .git and every nested repository's
// .git, stored under the escaped name "~.git" because git trees cannot hold
// ".git". Paths the options exclude, files over the size limit, special
// files and unreadable files are left out, and every one is reported.
// [Store.Restore] puts back exactly what differs from a checkpoint, after
// first checkpointing the current state so that the restore can be undone.
//
// What stays true:
//   - Nothing is ever written into the workspace or any .git in it, except
//     by Restore.
//   - Objects are written as one pack per checkpoint (pack, then index),
//     then the checkpoint ref by temp file, fsync and rename: a kill at any
//     instant leaves a store that opens, checks clean and takes the next
//     checkpoint. Orphaned packs are harmless and [Store.GC] removes them.
//   - The stat cache is an optimisation: a missing or corrupt cache means
//     "hash again", never an error. Entries modified within the cache's
//     timestamp granularity (the racy-git rule) are always hashed again.
//   - Writers are serialised by an flock on the store; the kernel releases
//     the lock of a process that dies, so a stale lock is taken over.
//
// Callers must Close a Store.
package checkpoint
