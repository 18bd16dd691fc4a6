// Package state finds undosh's state directory: the shadow repositories,
// the journal, caches and logs. It is outside every workspace.
package state

import "path/filepath"

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
