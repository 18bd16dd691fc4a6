package procs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadSelf(t *testing.T) {
	p, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if p.PID != os.Getpid() || p.PPID != os.Getppid() || p.Cwd != wd || p.UID != os.Getuid() || p.Start == 0 {
		t.Fatalf("Read(self) = %+v", p)
	}
	if !p.Alive() || !p.Startable() {
		t.Fatalf("self not alive or not startable: %+v", p)
	}
	if _, err := Read(1 << 30); !os.IsNotExist(errUnwrap(err)) {
		t.Fatalf("Read of no process: %v, want not exist", err)
	}
}

func errUnwrap(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestParseStatComm(t *testing.T) {
	p, err := parseStat([]byte("42 (a) b (c)) S 7 8 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0"))
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != 42 || p.Comm != "a) b (c)" || p.PPID != 7 || p.Group != 8 || p.Session != 9 || p.Start != 12345 {
		t.Fatalf("got %+v", p)
	}
	for _, bad := range []string{"", "42", "x (a) S 1 2 3", "42 (a) S 1 2", "42 (a"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) took it", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (a) S 7 8 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0"))
	f.Add([]byte("1 (()) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseStat(b)
		if err == nil && p.PID < 0 && !strings.Contains(string(b), "-") {
			t.Fatalf("negative pid from %q", b)
		}
	})
}

// TestStartAgain starts a process, reads it, stops it, and starts it again
// from what was read: same program, arguments, directory and environment.
func TestStartAgain(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `echo "$MARK" > started.$$; exec sleep 300`, "name")
	cmd.Dir = dir
	cmd.Env = []string{"MARK=hello", "PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	var p Proc
	for { // the shell execs sleep: wait for that event in /proc
		q, err := ReadStarted(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if q.Comm == "sleep" {
			p = q
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !slices.Equal(p.Argv, []string{"sleep", "300"}) || p.Cwd != dir || !slices.Contains(p.Env, "MARK=hello") {
		t.Fatalf("read %+v", p)
	}
	if !Stop(p, syscall.SIGTERM, 10*time.Second) {
		t.Fatal("sleep did not end on SIGTERM")
	}
	if p.Alive() {
		t.Fatal("alive after Stop")
	}
	q, err := Start(p, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer Stop(q, syscall.SIGKILL, 5*time.Second)
	if q.PID == p.PID || !q.Alive() || !slices.Equal(q.Argv, p.Argv) || q.Cwd != dir || q.Session != q.PID {
		t.Fatalf("started again: %+v", q)
	}
	if tree := Tree([]Proc{p, q, {PID: 99, PPID: q.PID}}, q.PID); len(tree) != 2 || tree[1].PID != 99 {
		t.Fatalf("Tree = %+v", tree)
	}
}

func TestStartNotStartable(t *testing.T) {
	if _, err := Start(Proc{Comm: "kworker"}, filepath.Join(t.TempDir(), "log")); err == nil || !strings.Contains(err.Error(), "cannot start") {
		t.Fatalf("Start of a kernel thread: %v", err)
	}
}

func TestParseStatus(t *testing.T) {
	uid, gid, groups := parseStatus([]byte("Name:\tsleep\nUid:\t1000\t0\t0\t0\nGid:\t100\t100\t100\t100\nGroups:\t27 100 1000 \nNSpid:\t5\n"))
	if uid != 1000 || gid != 100 || !slices.Equal(groups, []int{27, 100, 1000}) {
		t.Fatalf("parseStatus: uid %d, gid %d, groups %v", uid, gid, groups)
	}
	if _, _, groups := parseStatus([]byte("Uid:\t0\t0\t0\t0\nGroups:\t\n")); groups != nil {
		t.Fatalf("no groups: %v", groups)
	}
}

// A subshell is forked and execs nothing: Forked. The program it starts
// is not.
func TestForked(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "(sleep 300; exit 0) & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var sub, sleep Proc
	for sleep.PID == 0 { // wait for the subshell and its sleep to show
		ps, err := List()
		if err != nil {
			t.Fatal(err)
		}
		tree := Tree(ps, cmd.Process.Pid)
		for _, p := range tree[min(1, len(tree)):] {
			if p.Comm == "sleep" {
				sleep = p
			} else if p.PPID == cmd.Process.Pid {
				sub = p
			}
		}
		time.Sleep(time.Millisecond)
	}
	defer Stop(sleep, syscall.SIGKILL, 5*time.Second)
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Forked || sleep.Forked || self.Forked {
		t.Fatalf("forked: subshell %v (%+v), sleep %v, self %v", sub.Forked, sub, sleep.Forked, self.Forked)
	}
}

// As root, Start gives the process the user, group and supplementary
// groups it had.
func TestStartAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	p := Proc{Argv: []string{"sleep", "300"}, Exe: "/bin/sleep", Cwd: "/", Env: []string{"PATH=/usr/bin:/bin"},
		UID: 65534, GID: 65534, Groups: []int{100, 65534}}
	if _, err := os.Stat(p.Exe); err != nil {
		p.Exe = "/usr/bin/sleep"
	}
	q, err := Start(p, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer Stop(q, syscall.SIGKILL, 5*time.Second)
	if q.UID != 65534 || q.GID != 65534 || !slices.Equal(q.Groups, []int{100, 65534}) {
		t.Fatalf("started as uid %d, gid %d, groups %v", q.UID, q.GID, q.Groups)
	}
}

func TestDyingRule(t *testing.T) {
	const stat = "9 (a) b) S 1 9 9 0 -1 %s 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0"
	status := func(pnd, shd, blk, ign, cgt string) []byte {
		return []byte("Name:\tx\nSigQ:\t0/1\nSigPnd:\t" + pnd + "\nShdPnd:\t" + shd + "\nSigBlk:\t" + blk +
			"\nSigIgn:\t" + ign + "\nSigCgt:\t" + cgt + "\n")
	}
	const none, term, kill, chld = "0000000000000000", "0000000000004000", "0000000000000100", "0000000000010000"
	for _, c := range []struct {
		name   string
		flags  string
		status []byte
		want   bool
	}{
		{"running", "4194304", status(none, none, none, none, none), false},
		{"exiting", "4194308", status(none, none, none, none, none), true},
		{"SIGKILL delivered", "4194304", status(kill, none, none, none, none), true},
		{"SIGTERM pending", "4194304", status(none, term, none, none, none), true},
		{"SIGTERM caught", "4194304", status(none, term, none, none, term), false},
		{"SIGTERM blocked", "4194304", status(none, term, term, none, none), false},
		{"SIGCHLD pending", "4194304", status(chld, none, none, none, none), false},
		{"no status", "4194304", nil, false},
	} {
		if got := dying([]byte(strings.Replace(stat, "%s", c.flags, 1)), c.status); got != c.want {
			t.Errorf("%s: dying = %v, want %v", c.name, got, c.want)
		}
	}
}

// A process that runs is not dying; one that has exited and waits to be
// reaped has begun to exit.
func TestDying(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	p, err := ReadStarted(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.Dying() {
		t.Fatal("a sleep that runs is dying")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Not reaped: it stays a zombie, which has begun to exit.
	fd, err := unix.PidfdOpen(p.PID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10000); err != nil {
		t.Fatal(err)
	}
	if !p.Dying() {
		t.Fatal("a zombie is not dying")
	}
	if (Proc{PID: p.PID, Start: p.Start + 1}).Dying() {
		t.Fatal("another process of the same pid is dying")
	}
}
