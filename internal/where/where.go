package where

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/guest"
)

// InCopy reports whether this process runs in a copy of the machine made
// by the local fork engine, whose pid 1 is the engine's init
// ([fork.InitName]): a command there is part of the machine step that
// made the copy. proc is the proc filesystem to read; "" means /proc.
func InCopy(proc string) bool {
	if proc == "" {
		proc = "/proc"
	}
	data, err := os.ReadFile(filepath.Join(proc, "1", "cmdline"))
	return err == nil && string(data) == fork.InitName+"\x00"
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
	if syscall.Stat(guest.Path(stateDir), &st) != nil || st.Uid != 0 || st.Mode&0o022 != 0 {
		return false
	}
	w, ok := guest.Read(stateDir)
	return ok && w.Role == hostlink.RoleCopy
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
