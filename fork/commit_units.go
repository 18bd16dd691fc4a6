package fork

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// unitDirs are where systemd finds unit files, from the root.
var unitDirs = []string{
	"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
	"/lib/systemd/system", "/usr/lib/systemd/system",
}

var unitSuffixes = []string{
	".service", ".socket", ".timer", ".path", ".mount", ".automount",
	".swap", ".target", ".slice", ".scope",
}

func isUnitName(n string) bool {
	return slices.ContainsFunc(unitSuffixes, func(s string) bool { return strings.HasSuffix(n, s) })
}

// ChangedUnits lists, sorted, the systemd units a committed plan changed:
// those whose unit file or drop-in (foo.service.d/*.conf) it adds,
// replaces or removes, and the installed services whose ExecStart= runs a
// file it adds, replaces or removes. Unit files are read from the plan's
// root; /bin, /sbin and /lib are taken as /usr/… where they link there.
// It only reports: restarting (systemctl daemon-reload, then
// try-restart) is the caller's choice, on the real host.
func ChangedUnits(plan Plan) ([]string, error) {
	norm := usrMerge(plan.Root)
	changed := map[string]bool{}
	var removedDirs []string
	units := map[string]bool{}
	dirs := map[string]bool{}
	for _, d := range unitDirs {
		dirs[norm(d)] = true
	}
	for _, op := range plan.Ops {
		if op.Kind == OpMeta || op.Kind == OpMkdir {
			continue
		}
		n := norm(plan.Name(op))
		changed[n] = true
		if op.Kind == OpRemove {
			removedDirs = append(removedDirs, n+"/")
		}
		dir, base := path.Split(n)
		dir = path.Clean(dir)
		switch {
		case dirs[dir] && isUnitName(base):
			units[base] = true
		case dirs[dir] && strings.HasSuffix(base, ".d") && isUnitName(strings.TrimSuffix(base, ".d")):
			units[strings.TrimSuffix(base, ".d")] = true // a whole drop-in directory
		case dirs[path.Dir(dir)] && strings.HasSuffix(dir, ".d") && isUnitName(strings.TrimSuffix(path.Base(dir), ".d")):
			units[strings.TrimSuffix(path.Base(dir), ".d")] = true
		}
	}
	isChanged := func(bin string) bool {
		bin = norm(bin)
		return changed[bin] || slices.ContainsFunc(removedDirs, func(d string) bool { return strings.HasPrefix(bin, d) })
	}
	for _, d := range unitDirs {
		ents, err := os.ReadDir(filepath.Join(plan.Root, d))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("changed units: %w", err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".service") || units[e.Name()] {
				continue
			}
			bins, err := execStarts(filepath.Join(plan.Root, d, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("changed units: %w", err)
			}
			if slices.ContainsFunc(bins, isChanged) {
				units[e.Name()] = true
			}
		}
	}
	out := make([]string, 0, len(units))
	for u := range units {
		out = append(out, u)
	}
	slices.Sort(out)
	return out, nil
}

// execStarts returns the programs of a unit file's ExecStart= lines.
func execStarts(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "ExecStart=")
		if !ok {
			continue
		}
		v = strings.TrimLeft(strings.TrimSpace(v), "@-:+!")
		if f := strings.Fields(v); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			out = append(out, path.Clean(f[0]))
		}
	}
	return out, sc.Err()
}

// usrMerge returns a function that writes /bin/x as /usr/bin/x (and so
// on) where root's /bin is a link to usr/bin.
func usrMerge(root string) func(string) string {
	var merged []string
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		if l, err := os.Readlink(filepath.Join(root, d)); err == nil && path.Clean("/"+l) == "/usr/"+d {
			merged = append(merged, d)
		}
	}
	return func(p string) string {
		for _, d := range merged {
			if p == "/"+d || strings.HasPrefix(p, "/"+d+"/") {
				return "/usr" + p
			}
		}
		return p
	}
}

// Mapping is a process that still maps files that are deleted, as after
// a commit replaced a library or program it uses.
type Mapping struct {
	PID   int      `json:"pid"`
	Comm  string   `json:"comm"`
	Files []string `json:"files"`
}

// MappedDeleted lists, by pid, the processes whose /proc/PID/maps show
// deleted files (memfd, SysV shared memory and /dev are left out). It
// only reports: restarting them is the caller's choice.
func MappedDeleted() ([]Mapping, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("mapped deleted: %w", err)
	}
	var out []Mapping
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		files, err := deletedMaps("/proc/" + p.Name() + "/maps")
		if err != nil || len(files) == 0 {
			continue // gone, or nothing
		}
		out = append(out, Mapping{PID: pid, Comm: procComm(pid), Files: files})
	}
	slices.SortFunc(out, func(a, b Mapping) int { return a.PID - b.PID })
	return out, nil
}

func deletedMaps(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		file, ok := strings.CutSuffix(line, " (deleted)")
		if !ok {
			continue
		}
		// address perms offset dev inode path: the path starts at the
		// first "/" after the five fields.
		fields := strings.Fields(file)
		if len(fields) < 6 || fields[4] == "0" {
			continue
		}
		i := strings.Index(file, " /")
		if i < 0 {
			continue
		}
		file = strings.TrimSpace(file[i:])
		if strings.HasPrefix(file, "/memfd:") || strings.HasPrefix(file, "/SYSV") || strings.HasPrefix(file, "/dev/") || seen[file] {
			continue
		}
		seen[file] = true
		out = append(out, file)
	}
	return out, sc.Err()
}
