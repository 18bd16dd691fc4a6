package procs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Targets returns the processes that argv, the words of a kill, pkill or
// killall command (argv[0] may be a path), would signal if it ran now. It
// reads them from /proc and signals nothing.
//
// ok is false when that cannot be told before the command runs: a job
// spec (kill %1), kill -1 (every process) or 0 (the caller's group),
// killall -r or -i, an age or namespace filter, a signal or an option it
// does not know. A command that signals nothing (kill -l, signal 0, a
// usage error) has no targets and ok true. err is set when /proc or pgrep
// cannot be read.
//
// A bare kill is bash's builtin; a kill named by a path is procps'
// program, which reads a negative pid before "--" as options (ok false).
// pkill's targets are what the pgrep beside it, or on PATH, selects with
// the same options. pkill and killall leave out the calling process and
// its ancestors, which a pattern may match: the caller is not among what
// a step of its own ends. A process that is a zombie already is left out.
func Targets(argv []string) (ps []Proc, ok bool, err error) {
	c := parseKill(argv)
	switch {
	case c.why != "":
		return nil, false, nil
	case c.none:
		return nil, true, nil
	}
	switch c.tool {
	case "kill":
		return killTargets(c)
	case "pkill":
		return pkillTargets(argv[0], c)
	default:
		return killallTargets(c)
	}
}

// Kills reports whether the signal that argv, a kill, pkill or killall
// command, sends ends a process that does not handle it: TERM (the
// default), KILL, INT, HUP and the other signals whose default action is
// to terminate, with or without a core. 0, CONT, STOP, TSTP, TTIN, TTOU,
// CHLD, URG and WINCH do not, and neither does a command that sends no
// signal (kill -l). A signal it cannot name counts as one that ends.
func Kills(argv []string) bool {
	c := parseKill(argv)
	switch {
	case c.tool == "" || c.none && c.sig != 0:
		return false
	case c.sig < 0:
		return true
	}
	return killsByDefault(c.sig)
}

// Gone returns those of before that are no longer running: their pid is
// gone, or names another process started since, or a zombie.
func Gone(before []Proc) []Proc {
	var out []Proc
	for _, p := range before {
		if !p.Alive() {
			out = append(out, p)
		}
	}
	return out
}

// killTargets reads the processes and groups kill names.
func killTargets(c call) ([]Proc, bool, error) {
	var out []Proc
	for _, pid := range c.pids {
		// kill(2) takes a thread's id for its process.
		tg, err := tgid(pid)
		if gone(err) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		p, err := Read(tg)
		if gone(err) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		out = append(out, p)
	}
	if len(c.groups) > 0 {
		all, err := List()
		if err != nil {
			return nil, false, err
		}
		for _, p := range all {
			if slices.Contains(c.groups, p.Group) {
				out = append(out, p)
			}
		}
	}
	return living(out, nil), true, nil
}

// pkillTargets runs pgrep with the options of pkill that select, and
// reads the processes it prints.
func pkillTargets(argv0 string, c call) ([]Proc, bool, error) {
	prog := "pgrep"
	if strings.Contains(argv0, "/") {
		// The pgrep of the same procps as the pkill named.
		if p := filepath.Join(filepath.Dir(argv0), "pgrep"); isExecutable(p) {
			prog = p
		}
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		return nil, false, fmt.Errorf("pgrep: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(path, c.pgrep...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return nil, true, nil // none matched
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		// A usage error: pkill fails the same way, or it is another
		// version than this pgrep.
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("pgrep %s: %w: %s", strings.Join(c.pgrep, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	var ps []Proc
	for _, f := range strings.Fields(stdout.String()) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, false, fmt.Errorf("pgrep printed %q, not a pid", f)
		}
		p, err := Read(pid)
		if gone(err) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		ps = append(ps, p)
	}
	skip, err := lineage()
	if err != nil {
		return nil, false, err
	}
	return living(ps, skip), true, nil
}

// killallTargets matches the processes as killall does.
func killallTargets(c call) ([]Proc, bool, error) {
	uid := -1
	if c.user != "" {
		u, err := user.Lookup(c.user)
		if err != nil {
			return nil, false, nil // killall fails, or sees users undosh does not
		}
		if uid, err = strconv.Atoi(u.Uid); err != nil {
			return nil, false, nil
		}
	}
	// A name with a slash is a program file, matched by inode.
	files := map[string]os.FileInfo{}
	for _, n := range c.names {
		if strings.Contains(n, "/") {
			st, err := os.Stat(n)
			if err != nil {
				return nil, false, nil // killall fails, or the step makes it
			}
			files[n] = st
		}
	}
	all, err := List()
	if err != nil {
		return nil, false, err
	}
	skip, err := lineage()
	if err != nil {
		return nil, false, err
	}
	var matched []Proc
	for _, p := range all {
		if skip[p.PID] {
			continue
		}
		if uid >= 0 {
			ruid, err := realUID(p.PID)
			if err != nil || ruid != uid {
				continue
			}
		}
		if len(c.names) == 0 || slices.ContainsFunc(c.names, func(n string) bool { return killallMatch(c, n, files[n], p) }) {
			matched = append(matched, p)
		}
	}
	if c.pgid {
		var groups []int
		for _, p := range matched {
			groups = append(groups, p.Group)
		}
		matched = matched[:0]
		for _, p := range all {
			if slices.Contains(groups, p.Group) {
				matched = append(matched, p)
			}
		}
	}
	return living(matched, skip), true, nil
}

// killallMatch reports whether process p is one killall's name matches:
// st is the program file a name with a slash names.
func killallMatch(c call, name string, st os.FileInfo, p Proc) bool {
	if st != nil {
		return sameExe(p.PID, name, st)
	}
	return killallName(c, name, p.Comm, p.Argv)
}

// killallName reports whether killall's name matches a process with comm
// and argv (psmisc's match_process_name). The kernel cuts comm to 15
// bytes: for a comm that long, killall compares name with the base name
// of the first argument that starts with comm, when there is one, and
// with -e skips a process that has none.
func killallName(c call, name, comm string, argv []string) bool {
	eq := func(a, b string) bool { return a == b || c.fold && strings.EqualFold(a, b) }
	n := min(len(comm), 63)
	comm = comm[:n]
	if n != 15 && n != 63 {
		return eq(name, comm)
	}
	var long string
	got := false
	for _, a := range argv {
		if a == "" {
			break
		}
		if b := a[strings.LastIndexByte(a, '/')+1:]; strings.HasPrefix(b, comm) {
			long, got = b, true
			break
		}
	}
	switch {
	case !got && c.exact:
		return false
	case got:
		return eq(name, long)
	case len(name) >= n:
		return eq(name[:n], comm)
	}
	return eq(name, comm)
}

// sameExe reports whether process pid runs the program file st, which
// killall was given as path.
func sameExe(pid int, path string, st os.FileInfo) bool {
	exe := filepath.Join(Root, strconv.Itoa(pid), "exe")
	if pst, err := os.Stat(exe); err == nil && os.SameFile(st, pst) {
		return true
	}
	link, err := os.Readlink(exe)
	return err == nil && link == path
}

// living returns ps without those in skip and those that are no longer
// running, each once, in pid order.
func living(ps []Proc, skip map[int]bool) []Proc {
	slices.SortFunc(ps, func(a, b Proc) int { return a.PID - b.PID })
	ps = slices.CompactFunc(ps, func(a, b Proc) bool { return a.PID == b.PID })
	return slices.DeleteFunc(ps, func(p Proc) bool { return skip[p.PID] || !p.Alive() })
}

// lineage returns the calling process and its ancestors.
func lineage() (map[int]bool, error) {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 0 && !out[pid]; {
		out[pid] = true
		b, err := os.ReadFile(filepath.Join(Root, strconv.Itoa(pid), "stat"))
		if gone(err) && pid != os.Getpid() {
			break // an ancestor ended while it read
		}
		if err != nil {
			return nil, err
		}
		p, err := parseStat(b)
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		pid = p.PPID
	}
	return out, nil
}

// tgid returns the process of thread id pid.
func tgid(pid int) (int, error) {
	v, err := status(pid, "Tgid")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// realUID returns the real user id of process pid, which killall -u
// matches.
func realUID(pid int) (int, error) {
	v, err := status(pid, "Uid")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, fmt.Errorf("process %d: malformed status: Uid", pid)
	}
	return strconv.Atoi(f[0])
}

// status returns field key of /proc/PID/status.
func status(pid int, key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(Root, strconv.Itoa(pid), "status"))
	if err != nil {
		return "", fmt.Errorf("process %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("process %d: no %s in status", pid, key)
}

// gone reports whether err says a process does not exist (any more).
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
