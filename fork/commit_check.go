package fork

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// openWriters lists the files of inodes ((dev, ino) → name) that some
// process has open for writing, found through /proc/*/fd and the flags in
// /proc/*/fdinfo. Descriptors are matched by the inode they lead to, not
// by the path readlink shows, so that a process in another mount
// namespace, or one that opened the file by another name, is seen too.
// Writable shared mappings whose descriptor is closed are not seen.
func openWriters(inodes map[[2]uint64]string) ([]Problem, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan open files: %w", err)
	}
	var out []Problem
	seen := map[string]bool{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fdDir := "/proc/" + p.Name() + "/fd/"
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or a kernel thread
		}
		for _, fd := range fds {
			var st unix.Stat_t
			if unix.Stat(fdDir+fd.Name(), &st) != nil {
				continue
			}
			name, ok := inodes[[2]uint64{st.Dev, st.Ino}]
			if !ok || !fdWritable(pid, fd.Name()) {
				continue
			}
			key := name + "\x00" + p.Name()
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, Problem{name, fmt.Sprintf("open for writing by process %d (%s)", pid, procComm(pid))})
		}
	}
	return out, nil
}

// fdWritable reads the access mode of a descriptor from its fdinfo.
func fdWritable(pid int, fd string) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY
		}
	}
	return false
}

func procComm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
