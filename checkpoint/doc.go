// Package checkpoint keeps undo points of a workspace in a shadow git
// repository outside it.
//
// [Open] opens (or creates) the store of one workspace under the state
// directory. [Store.Checkpoint] records the workspace as a commit: tracked,
// untracked and ignored files, symlinks, permissions, empty directories,
// and the workspace's own .git and every nested repository's .git, stored
// under the escaped name "~.git" because git trees cannot hold ".git".
// Paths the options exclude, files over the size limit, special files and
// unreadable files are left out, and every one is reported.
// [Store.Restore] puts back exactly what differs from a checkpoint, after
// first checkpointing the current state so that the restore can be undone.
//
// Watched checkpoints. With [Options.Watch], a checkpoint asks a
// [Watcher] what changed since a base checkpoint and reads only that: the
// directories that hold a changed path, the files named and the subtrees
// that appeared; every other directory keeps the base's tree, and those
// that only lead to a change are made from the base without being read
// (changes.go). When the watcher cannot tell, or the base cannot be read,
// it walks everything; [Result.Walk] says why. Objects are read from the
// packs in place (packread.go), and the small packs are merged once there
// are more than 32, so that the cost follows the change, not the tree or
// the length of the chain.
//
// Permissions. A git tree holds only whether a file is executable (mode
// 100644 or 100755), so the rest is recorded beside it. A tree whose
// entries have permission bits (mode & 07777: setuid, setgid and sticky
// included) other than the defaults their git mode implies (0644 for
// 100644; 0755 for 100755 and for a directory) holds a blob under the
// reserved name "~perms" that lists them, one line each of a Go-quoted
// name, a tab and the bits in octal, sorted by name. The root tree's blob
// also lists the workspace directory itself, as ".". escape never makes
// that name (a real name starting with "~" gets a second "~"), so it
// cannot collide with a workspace path. Keeping the record in each
// directory's own tree, rather than in one list per commit, means a chmod
// changes the tree and so the checkpoint's id, a workspace with default
// permissions only stores nothing more, and only the changed directories'
// records are encoded again, with their trees. A tree without the blob,
// such as every tree from before permissions were recorded, means the
// defaults. Symlinks have no permissions of their own on Linux, and
// owners are not recorded.
//
// What stays true:
//   - Nothing is ever written into the workspace or any .git in it, except
//     by Restore.
//   - Objects are written as one pack per checkpoint (pack, then index),
//     then the checkpoint ref by temp file, fsync and rename: a kill at any
//     instant leaves a store that opens, checks clean and takes the next
//     checkpoint. Orphaned packs are harmless and [Store.GC] removes them.
//   - A watched checkpoint records the tree a walk would: the same ids,
//     byte for byte. It trusts the watcher for every path it does not
//     read, and never writes the stat cache (a walk's cache stays as the
//     last walk left it: older, so a walk hashes more, never less).
//   - The stat cache is an optimisation: a missing or corrupt cache means
//     "hash again", never an error. Entries modified within the cache's
//     timestamp granularity (the racy-git rule) are always hashed again.
//     It keeps the whole stat mode of every file and directory, so a chmod
//     alone, which changes no content, still makes a new checkpoint.
//   - A restore never makes a file's content readable by anyone but its
//     owner before the file has its recorded permissions, and creates a
//     directory with its recorded permissions. A directory its owner may
//     not write in (0500) is filled first, with its owner's bits raised,
//     and gets its permissions after its contents.
//   - Writers are serialised by an flock on the store; the kernel releases
//     the lock of a process that dies, so a stale lock is taken over.
//
// Callers must Close a Store.
package checkpoint
