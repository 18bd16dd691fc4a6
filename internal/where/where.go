package where

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// StateDir is undosh's state directory when it runs as root, unless it
// is told another.
const StateDir = "/var/lib/undosh"

// InitName is the argv[0] of pid 1 of a copy of the machine that the
// local fork engine made (fork.InitName).
const InitName = "undosh-fork-init"

// HostFile is where undoctl agent keeps, in stateDir, the last
// WHO_YOU_ARE the sandbox host sent (read by internal/agent).
func HostFile(stateDir string) string { return filepath.Join(stateDir, "host.json") }

// roleCopy is hostlink.RoleCopy, the role of a VM running a machine step
// (where is a leaf: its test holds the two equal).
const roleCopy = "copy"

// InCopy reports whether this process runs in a copy of the machine made
// by the local fork engine, whose pid 1 is the engine's init
// ([InitName]): a command there is part of the machine step that
// made the copy. proc is the proc filesystem to read; "" means /proc.
func InCopy(proc string) bool {
	if proc == "" {
		proc = "/proc"
	}
	data, err := os.ReadFile(filepath.Join(proc, "1", "cmdline"))
	return err == nil && string(data) == InitName+"\x00"
}

// InHostCopy reports whether the sandbox host told this VM that it is a
// copy running a machine step (WHO_YOU_ARE, kept in stateDir by undoctl
// agent, which runs as root). A file anyone but root could have written
// is not believed: it would turn protection off.
func InHostCopy(stateDir string) bool {
	if stateDir == "" {
		return false
	}
	var st syscall.Stat_t
	if syscall.Stat(HostFile(stateDir), &st) != nil || st.Uid != 0 || st.Mode&0o022 != 0 {
		return false
	}
	data, err := os.ReadFile(HostFile(stateDir))
	var w struct {
		Role string `json:"role"`
	}
	return err == nil && json.Unmarshal(data, &w) == nil && w.Role == roleCopy
}

// Parent returns the parent of process pid, read from proc/PID/stat (proc
// is the proc filesystem; "" means /proc), or 0 when it cannot be read.
func Parent(proc string, pid int) int {
	if proc == "" {
		proc = "/proc"
	}
	data, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The name, in parentheses, may hold anything: the fields follow the
	// last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}
