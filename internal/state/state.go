// Package state finds undosh's state directory: the shadow repositories,
// the journal, caches and logs. It is outside every workspace.
package state

import (
	"path/filepath"
	"slices"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/policy"
)

// Dir returns the state directory: the flag, then $UNDOSH_STATE_DIR, then
// /var/lib/undosh for root, else $XDG_STATE_HOME/undosh or
// ~/.local/state/undosh. It returns "" when none can be named.
func Dir(flag string, getenv func(string) string, uid int) string {
	switch {
	case flag != "":
		return flag
	case getenv("UNDOSH_STATE_DIR") != "":
		return getenv("UNDOSH_STATE_DIR")
	case uid == 0:
		return "/var/lib/undosh"
	case getenv("XDG_STATE_HOME") != "":
		return filepath.Join(getenv("XDG_STATE_HOME"), "undosh")
	case getenv("HOME") != "":
		return filepath.Join(getenv("HOME"), ".local", "state", "undosh")
	}
	return ""
}

// StoreOptions are the checkpoint options for stores in dir under pol.
// The fork engine's own directory at the top of a mount (.undosh-fork,
// undo data of machine steps) is never part of a workspace's checkpoint,
// whatever the policy says: a rollback must not take it away.
//
// Their checkpoints ask the classifier of dir, when one runs, what changed
// since the last one (watchd): then they read only that.
func StoreOptions(dir string, pol *policy.Policy, home string) checkpoint.Options {
	exclude := append(slices.Clip(pol.Exclude), "**/"+fork.HiddenName+"/**")
	return checkpoint.Options{StateDir: dir, Exclude: exclude, MaxFileSize: pol.MaxFileSize, Home: home,
		Watch: watchd.Client(SocketPath(dir), exclude, pol.MaxFileSize)}
}

// SocketPath is where the classifier of state directory dir listens.
func SocketPath(dir string) string { return filepath.Join(dir, "run", "classify.sock") }
