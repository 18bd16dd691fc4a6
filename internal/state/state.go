// Package state finds undosh's state directory: the shadow repositories,
// the journal, caches and logs. It is outside every workspace.
package state

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/internal/where"
	"github.com/undosh/undosh/policy"
)

// Dir returns the state directory: the flag, then $UNDOSH_STATE_DIR, then
// /var/lib/undosh for root, else $XDG_STATE_HOME/undosh or
// ~/.local/state/undosh, else, for a user with no home directory (nobody's
// is /nonexistent), undosh-UID in the temporary directory. It returns ""
// when none can be named, or when that temporary one is another user's.
func Dir(flag string, getenv func(string) string, uid int) string {
	switch {
	case flag != "":
		return flag
	case getenv("UNDOSH_STATE_DIR") != "":
		return getenv("UNDOSH_STATE_DIR")
	case uid == 0:
		return Home(0, "")
	case getenv("XDG_STATE_HOME") != "":
		return filepath.Join(getenv("XDG_STATE_HOME"), "undosh")
	case getenv("HOME") != "" && exists(getenv("HOME")):
		return Home(uid, getenv("HOME"))
	}
	return homeless(uid)
}

// Home is the state directory that undosh gives a user by default, from
// the user's id and home directory alone: /var/lib/undosh for root,
// HOME/.local/state/undosh for anyone else, "" for a user without a home.
// [Dir] adds the flag, the environment and the homeless case; doctor reads
// it for a login user of an image, whose environment it does not have.
func Home(uid int, home string) string {
	switch {
	case uid == 0:
		return where.StateDir
	case home != "":
		return filepath.Join(home, ".local", "state", "undosh")
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// homeless is the state directory of a user with no home directory:
// undosh-UID in the temporary directory, unless something else is there
// already (a link, another user's directory, one that others may write);
// one of the user's own that others may read is made private.
func homeless(uid int) string {
	p := filepath.Join(os.TempDir(), "undosh-"+strconv.Itoa(uid))
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return p
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != uid || st.Mode&0o022 != 0 {
		return ""
	}
	if st.Mode&0o077 != 0 && unix.Chmod(p, 0o700) != nil {
		// Ours and written by no one else, but readable by others (an
		// undosh before 2026-12 made it so): made private again.
		return ""
	}
	return p
}

// StoreOptions are the checkpoint options for stores in dir under pol.
// The fork engine's own directory at the top of a mount (.undosh-fork,
// undo data of machine steps) is never part of a workspace's checkpoint,
// whatever the policy says: a rollback must not take it away.
//
// Their checkpoints ask the front end's server of dir, when one runs,
// what changed since the last one (watchd): then they read only that.
func StoreOptions(dir string, pol *policy.Policy, home string) checkpoint.Options {
	exclude := append(slices.Clip(pol.Exclude), "**/"+fork.HiddenName+"/**")
	return checkpoint.Options{StateDir: dir, Exclude: exclude, MaxFileSize: pol.MaxFileSize, Home: home,
		Watch: watchd.Client(SocketPath(dir), exclude, pol.MaxFileSize)}
}

// ServerFile is a file of the front end's server (package front) of
// state directory dir: ext is "sock" (where it listens), "lock", "pid" or
// "log". The names ("classify") are the front end's names kept for
// installed systems (docs/front.md).
func ServerFile(dir, ext string) string { return filepath.Join(dir, "run", "classify."+ext) }

// SocketPath is where the front end's server of state directory dir
// listens.
func SocketPath(dir string) string { return ServerFile(dir, "sock") }

// ServerName is the argv[0] that starts undosh as the front end's server
// (package front), kept for installed systems (docs/front.md).
const ServerName = "undosh-classifier"
