package fork

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/undosh/undosh/internal/pathglob"
)

// mountSource is the source of every mount the engine makes: the copies'
// tmpfs and, inside a copy, its overlays.
const mountSource = "undosh-fork"

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	ID, Parent int
	Dev        string // "major:minor"
	Root       string // the root of the mount within its filesystem
	Point      string // the mount point
	Opts       string // per-mount options
	FSType     string
	Source     string
}

// readOnly reports whether the mount is read-only.
func (m mountEntry) readOnly() bool {
	return slices.Contains(strings.Split(m.Opts, ","), "ro")
}

// mountTable reads this thread's mount table, the one statx sees: another
// thread may be in a mount namespace of its own (the main thread stays in
// the namespace of a goroutine that unshared and exited locked).
func mountTable() ([]mountEntry, error) {
	info, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountinfo(string(info))
}

// parseMountinfo parses the text of /proc/PID/mountinfo.
func parseMountinfo(text string) ([]mountEntry, error) {
	var out []mountEntry
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 7 || sep < 6 || sep+2 >= len(f) {
			return nil, fmt.Errorf("parse mountinfo line %q", line)
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("parse mountinfo line %q", line)
		}
		out = append(out, mountEntry{
			ID:     id,
			Parent: parent,
			Dev:    f[2],
			Root:   unescapeMount(f[3]),
			Point:  unescapeMount(f[4]),
			Opts:   f[5],
			FSType: f[sep+1],
			Source: unescapeMount(f[sep+2]),
		})
	}
	return out, nil
}

// unescapeMount undoes the octal escapes (\040 for a space, ...) of
// mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pseudoFS are the filesystem types that hold no files of the machine:
// a copy never overlays them.
var pseudoFS = map[string]bool{
	"proc": true, "sysfs": true, "devtmpfs": true, "devpts": true,
	"cgroup": true, "cgroup2": true, "mqueue": true, "debugfs": true,
	"tracefs": true, "securityfs": true, "bpf": true, "fusectl": true,
	"configfs": true, "pstore": true, "binfmt_misc": true, "autofs": true,
	"nsfs": true, "hugetlbfs": true, "rpc_pipefs": true, "efivarfs": true,
	"selinuxfs": true, "nfsd": true,
	// A desktop's per-user FUSE services.
	"fuse.portal": true, "fuse.gvfsd-fuse": true,
}

// pseudoTrees are the directories whose mounts a copy never overlays: it
// gets its own /proc, /sys and /dev, and /run is the copy's own.
var pseudoTrees = []string{"/proc", "/sys", "/dev", "/run"}

// selectMounts picks, from the mount table, the mounts a copy overlays:
// the root, and every real filesystem below it that is visible (not
// covered by a later mount on the same point) and not pseudo, not a
// mount of the engine (source mountSource), not in
// /proc, /sys, /dev or /run, and not at or under any of the hidden
// directories (the state directory, where the
// copies' own mounts live). A mount below a skipped mount is skipped too.
// The result keeps the table's order, root first.
func selectMounts(table []mountEntry, hidden []string) ([]mountEntry, error) {
	// The visible mount at each point is the last one mounted there.
	top := map[string]int{}
	for i, m := range table {
		top[m.Point] = i
	}
	byID := map[int]int{}
	for i, m := range table {
		byID[m.ID] = i
	}
	skipped := make([]bool, len(table))
	var decided = make([]bool, len(table))
	var skip func(i int) bool
	skip = func(i int) bool {
		if decided[i] {
			return skipped[i]
		}
		decided[i] = true
		m := table[i]
		s := top[m.Point] != i
		switch {
		case s:
		case m.Point == "/":
			s = false
		case pseudoFS[m.FSType]:
			s = true
		case m.Source == mountSource:
			// Another copy's tmpfs (of another state directory), or
			// an overlay of a copy this one is nested in.
			s = true
		case slices.ContainsFunc(pseudoTrees, func(d string) bool { return pathglob.Within(m.Point, d) }):
			s = true
		case slices.ContainsFunc(hidden, func(d string) bool { return pathglob.Within(m.Point, d) }):
			s = true
		default:
			// Below a skipped mount (a mount on a path that the copy
			// does not show from the host) is skipped too. A mount on
			// the same point as its parent (autofs then the real
			// filesystem) does not inherit the parent's verdict.
			if p, ok := byID[m.Parent]; ok && p != i && table[p].Point != m.Point {
				s = skip(p)
			}
		}
		skipped[i] = s
		return s
	}
	var out []mountEntry
	root := -1
	for i, m := range table {
		if skip(i) {
			continue
		}
		if m.Point == "/" {
			root = len(out)
		}
		out = append(out, m)
	}
	if root < 0 {
		return nil, fmt.Errorf("no root mount in the mount table")
	}
	if root > 0 {
		r := out[root]
		out = append(out[:root], out[root+1:]...)
		out = append([]mountEntry{r}, out...)
	}
	// Parents before children: the copy mounts them in this order.
	slices.SortStableFunc(out[1:], func(a, b mountEntry) int {
		return depth(a.Point) - depth(b.Point)
	})
	return out, nil
}

// skippedMounts lists the visible mounts of table that selected (the
// copy's overlays) does not hold, outermost only, leaving out the pseudo
// trees, the engine's own mounts and the hidden directories.
func skippedMounts(table, selected []mountEntry, hidden []string) []string {
	layered := map[int]bool{}
	for _, m := range selected {
		layered[m.ID] = true
	}
	top := map[string]int{}
	for i, m := range table {
		top[m.Point] = i
	}
	var out []string
	for i, m := range table {
		switch {
		case top[m.Point] != i, layered[m.ID], m.Source == mountSource,
			slices.ContainsFunc(pseudoTrees, func(d string) bool { return pathglob.Within(m.Point, d) }),
			slices.ContainsFunc(hidden, func(d string) bool { return pathglob.Within(m.Point, d) }):
			continue
		}
		out = append(out, m.Point)
	}
	// Outermost only: a view binds each recursively.
	slices.SortFunc(out, func(a, b string) int { return depth(a) - depth(b) })
	var kept []string
	for _, p := range out {
		if !slices.ContainsFunc(kept, func(k string) bool { return pathglob.Within(p, k) }) {
			kept = append(kept, p)
		}
	}
	return kept
}

func depth(p string) int {
	p = path.Clean(p)
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}
