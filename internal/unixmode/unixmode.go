// Package unixmode converts between stat's st_mode bits and Go's
// fs.FileMode, which keeps setuid, setgid and sticky in bits of its own.
package unixmode

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// Perm turns permission bits as stat gives them (with setuid, setgid and
// sticky) into a FileMode.
func Perm(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// Bits is the st_mode permission bits (with setuid, setgid and sticky) of
// a FileMode.
func Bits(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}
