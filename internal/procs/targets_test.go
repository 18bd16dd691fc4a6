package procs

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestKills(t *testing.T) {
	tests := []struct {
		argv []string
		want bool
	}{
		{[]string{"kill", "1"}, true},
		{[]string{"kill", "-9", "1"}, true},
		{[]string{"kill", "-s", "int", "1"}, true},
		{[]string{"kill", "-SIGHUP", "1"}, true},
		{[]string{"kill", "-QUIT", "1"}, true},
		{[]string{"kill", "-ABRT", "1"}, true},
		{[]string{"kill", "-USR1", "1"}, true},
		{[]string{"kill", "-usr2", "1"}, true},
		{[]string{"kill", "-ALRM", "1"}, true},
		{[]string{"kill", "-PIPE", "1"}, true},
		{[]string{"kill", "-SEGV", "1"}, true},
		{[]string{"kill", "-RTMIN+3", "1"}, true},
		{[]string{"kill", "-BOGUS", "1"}, true},
		{[]string{"kill", "%1"}, true},
		{[]string{"kill", "-0", "1"}, false},
		{[]string{"kill", "-CONT", "1"}, false},
		{[]string{"kill", "-STOP", "1"}, false},
		{[]string{"kill", "-19", "1"}, false},
		{[]string{"kill", "-TSTP", "1"}, false},
		{[]string{"kill", "-ttin", "1"}, false},
		{[]string{"kill", "-TTOU", "1"}, false},
		{[]string{"kill", "-WINCH", "1"}, false},
		{[]string{"kill", "-SIGCHLD", "1"}, false},
		{[]string{"kill", "-CLD", "1"}, false},
		{[]string{"kill", "-URG", "1"}, false},
		{[]string{"kill", "-l"}, false},
		{[]string{"kill", "-9"}, false},
		{[]string{"pkill", "-STOP", "x"}, false},
		{[]string{"pkill", "x"}, true},
		{[]string{"pkill", "--signal", "cont", "x"}, false},
		{[]string{"killall", "-CONT", "x"}, false},
		{[]string{"killall", "-s", "KILL", "x"}, true},
		{[]string{"killall", "x"}, true},
		{[]string{"ls"}, false},
	}
	for _, tt := range tests {
		if got := Kills(tt.argv); got != tt.want {
			t.Errorf("Kills(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
}

func TestKillallName(t *testing.T) {
	const long = "abcdefghijklmnopqrst" // 20 bytes: comm keeps 15
	comm := long[:15]
	tests := []struct {
		name, match, comm string
		argv              []string
		c                 call
		want              bool
	}{
		{"short", "nginx", "nginx", []string{"nginx: master"}, call{}, true},
		{"short other", "nginx", "nginx-x", []string{"nginx-x"}, call{}, false},
		{"fold", "NGINX", "nginx", nil, call{fold: true}, true},
		{"no fold", "NGINX", "nginx", nil, call{}, false},
		{"long by argv", long, comm, []string{"/opt/bin/" + long, "-d"}, call{}, true},
		{"long, second argument", long, comm, []string{"python3", "/srv/" + long}, call{}, true},
		{"cut name with argv", comm, comm, []string{"/opt/bin/" + long}, call{}, false},
		{"long without argv", long, comm, []string{"renamed"}, call{}, true},
		{"long without argv -e", long, comm, []string{"renamed"}, call{exact: true}, false},
		{"long other", long[:16] + "x", comm, []string{long}, call{}, false},
		{"long fold", strings.ToUpper(long), comm, []string{long}, call{fold: true}, true},
	}
	for _, tt := range tests {
		if got := killallName(tt.c, tt.match, tt.comm, tt.argv); got != tt.want {
			t.Errorf("%s: killallName(%q, %q, %q) = %v, want %v", tt.name, tt.match, tt.comm, tt.argv, got, tt.want)
		}
	}
}

// unique returns n random lower-case hex digits.
func unique(t *testing.T, n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

// start starts cmd and reads it, once it has run its program. It kills
// it by pid when the test ends.
func start(t *testing.T, cmd *exec.Cmd) Proc {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	p, err := ReadStarted(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sleeper starts sleep with an argument no other process has; it returns
// the process and that argument.
func sleeper(t *testing.T) (Proc, string) {
	t.Helper()
	arg := "1000." + strings.Map(func(r rune) rune {
		if r > '9' {
			return '0' + (r-'a')%10
		}
		return r
	}, unique(t, 12))
	return start(t, exec.Command("sleep", arg)), arg
}

// group starts, in a process group of its own, a shell that starts sleep
// in the background and then runs prog. It returns the two processes.
func group(t *testing.T, prog string) (leader, other Proc) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `sleep 1001 & echo $! > bg.tmp && mv bg.tmp bg; exec "$0" 1002`, prog)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start(t, cmd)
	pid := cmd.Process.Pid
	var bg int
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "bg")); err == nil && bg == 0 {
			if bg, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(bg, syscall.SIGKILL) })
		}
		var err error
		if leader, err = Read(pid); err != nil {
			t.Fatal(err)
		}
		if bg != 0 && slices.Equal(leader.Argv, []string{prog, "1002"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell did not start its two processes: %+v", leader)
		}
		time.Sleep(time.Millisecond)
	}
	other, err := Read(bg)
	if err != nil {
		t.Fatal(err)
	}
	if leader.Group != pid || other.Group != pid {
		t.Fatalf("groups: %d and %d, want %d", leader.Group, other.Group, pid)
	}
	return leader, other
}

// check runs Targets(argv) and compares what it found with want (by pid
// and start time), and ok with wantOK.
func check(t *testing.T, argv []string, wantOK bool, want ...Proc) {
	t.Helper()
	ps, ok, err := Targets(argv)
	if err != nil {
		t.Fatalf("Targets(%q): %v", argv, err)
	}
	if ok != wantOK {
		t.Fatalf("Targets(%q): ok = %v, want %v", argv, ok, wantOK)
	}
	slices.SortFunc(want, func(a, b Proc) int { return a.PID - b.PID })
	type id struct {
		PID   int
		Start uint64
	}
	ids := func(ps []Proc) (out []id) {
		for _, p := range ps {
			out = append(out, id{p.PID, p.Start})
		}
		return out
	}
	if diff := cmp.Diff(ids(want), ids(ps), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Targets(%q) (-want +got):\n%s", argv, diff)
	}
}

func TestTargetsKill(t *testing.T) {
	t.Parallel()
	p, _ := sleeper(t)
	pid := strconv.Itoa(p.PID)
	for _, argv := range [][]string{
		{"kill", pid}, {"kill", "-9", pid}, {"kill", "-s", "HUP", pid}, {"kill", "-STOP", pid},
		{"kill", "--", pid}, {"kill", pid, "99999999"}, {"/bin/kill", "-KILL", pid}, {"/usr/bin/kill", pid, "-TERM"},
	} {
		check(t, argv, true, p)
	}
	for _, argv := range [][]string{{"kill", "-0", pid}, {"kill", "-s", "0", pid}, {"kill", "-l"}, {"/bin/kill", "-L"}, {"kill", "99999999"}, {"kill"}} {
		check(t, argv, true)
	}
	for _, argv := range [][]string{{"kill", "%1"}, {"kill", "--", "-1"}, {"kill", "-9", "-1"}, {"kill", "0"}, {"kill", "-BOGUS", pid}, {"kill", pid, "%2"}, {"ls"}} {
		check(t, argv, false)
	}
}

func TestTargetsKillGroup(t *testing.T) {
	t.Parallel()
	leader, other := group(t, "sleep")
	g := strconv.Itoa(leader.Group)
	for _, argv := range [][]string{{"kill", "--", "-" + g}, {"kill", "-9", "-" + g}, {"kill", "-s", "TERM", "-" + g}, {"/bin/kill", "-9", "--", "-" + g}} {
		check(t, argv, true, leader, other)
	}
	check(t, []string{"kill", strconv.Itoa(leader.PID)}, true, leader)
	// procps' kill reads -PGID before "--" as options, and each version
	// differently.
	check(t, []string{"/bin/kill", "-9", "-" + g}, false)
}

func TestTargetsPkill(t *testing.T) {
	t.Parallel()
	p, arg := sleeper(t)
	pat := "sleep " + regexp.QuoteMeta(arg)
	for _, argv := range [][]string{
		{"pkill", "-f", pat}, {"pkill", "-9", "-f", pat}, {"pkill", "--signal", "HUP", "-e", "-f", pat},
		{"pkill", "-f", "-n", pat}, {"pkill", "-fo", pat}, {"/usr/bin/pkill", pat, "-f", "-KILL"},
		{"pkill", "-f", "-x", pat}, {"pkill", "-P", strconv.Itoa(os.Getpid()), "-f", pat},
	} {
		check(t, argv, true, p)
	}
	check(t, []string{"pkill", "-0", "-f", pat}, true)
	check(t, []string{"pkill", "-f", "no such process " + unique(t, 16)}, true)
	check(t, []string{"pkill", "-v", "sleep"}, false)
	check(t, []string{"pkill", "-u", "no-such-user-" + unique(t, 8), "x"}, false) // pgrep refuses it
	check(t, []string{"pkill", "-f"}, false)                                      // pgrep: no criteria
	check(t, []string{"pkill", "-9"}, true)                                       // no options

	// A pattern in the caller's own command line does not name the caller.
	ps, ok, err := Targets([]string{"pkill", "-f", regexp.QuoteMeta(os.Args[0])})
	if err != nil || !ok || slices.ContainsFunc(ps, func(q Proc) bool { return q.PID == os.Getpid() }) {
		t.Errorf("Targets(pkill -f %s) = %v, %v, %v: names the caller", os.Args[0], ps, ok, err)
	}
}

// copySleep copies sleep to dir as name.
func copySleep(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	// cp writes it in a process of its own: a file this process held open
	// for writing would be inherited by a test forking meanwhile, and its
	// exec would fail with "text file busy".
	if out, err := exec.Command("cp", "/bin/sleep", path).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return path
}

// startCopy copies sleep to dir as name and starts it, with argv0 as its
// argv[0] when that is not "".
func startCopy(t *testing.T, dir, name, argv0 string) (Proc, string) {
	t.Helper()
	path := copySleep(t, dir, name)
	cmd := exec.Command(path, "1003")
	if argv0 != "" {
		cmd.Args[0] = argv0
	}
	return start(t, cmd), path
}

func TestTargetsKillall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := "u" + unique(t, 10)
	p, path := startCopy(t, dir, name, "")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"killall", name}, {"killall", "-9", name}, {"killall", "-KILL", name}, {"killall", "-INT", name},
		{"killall", "-s", "HUP", name}, {"killall", "--signal=TERM", name}, {"killall", "-I", strings.ToUpper(name)},
		{"killall", "-u", me.Username, name}, {"killall", "-e", "-w", "-q", name}, {"killall", name, "no-such-" + unique(t, 6)},
		{"killall", path}, {"/usr/bin/killall", "-v", name},
	} {
		check(t, argv, true, p)
	}
	for _, argv := range [][]string{{"killall", strings.ToUpper(name)}, {"killall", name[:len(name)-1]}, {"killall", "-0", name}, {"killall", "-l"}} {
		check(t, argv, true)
	}
	for _, argv := range [][]string{
		{"killall", "-r", name}, {"killall", "-i", name}, {"killall", "-y", "1h", name}, {"killall", "-hup", name},
		{"killall", "-u", "no-such-user-" + unique(t, 8), name}, {"killall", filepath.Join(dir, "no-such-file")},
	} {
		check(t, argv, false)
	}

	// The kernel cuts comm to 15 bytes; killall matches the name in argv.
	long := "v" + unique(t, 19)
	q, _ := startCopy(t, dir, long, "")
	if q.Comm != long[:15] {
		t.Fatalf("comm %q, want %q", q.Comm, long[:15])
	}
	check(t, []string{"killall", long}, true, q)
	check(t, []string{"killall", "-e", long}, true, q)
	check(t, []string{"killall", long[:15]}, true)
	// With no argument that starts with comm, killall compares comm, and
	// -e skips the process.
	r, _ := startCopy(t, dir, "w"+unique(t, 19), "renamed")
	check(t, []string{"killall", r.Comm + "zzz"}, true, r)
	check(t, []string{"killall", "-e", r.Comm + "zzz"}, true)
}

func TestTargetsKillallGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := "g" + unique(t, 10)
	path := copySleep(t, dir, name)
	leader, other := group(t, path)
	if leader.Comm != name {
		t.Fatalf("leader runs %q, want %q", leader.Comm, name)
	}
	check(t, []string{"killall", "-g", name}, true, leader, other)
	check(t, []string{"killall", name}, true, leader)
}

func TestGone(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "1004")
	p := start(t, cmd)
	q, _ := sleeper(t)
	before, ok, err := Targets([]string{"kill", strconv.Itoa(p.PID), strconv.Itoa(q.PID)})
	if err != nil || !ok || len(before) != 2 {
		t.Fatalf("Targets = %v, %v, %v", before, ok, err)
	}
	if g := Gone(before); len(g) != 0 {
		t.Fatalf("Gone before any ended = %v", g)
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if g := Gone(before); len(g) != 1 || !g[0].Same(p) {
		t.Errorf("Gone = %v, want only %d", g, p.PID)
	}
	// The same pid, started at another time, is another process.
	reused := q
	reused.Start++
	if g := Gone([]Proc{q, reused}); len(g) != 1 || g[0].Start != reused.Start {
		t.Errorf("Gone of a reused pid = %v", g)
	}
}
