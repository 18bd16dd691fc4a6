package machine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/testuser"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == fork.InitName {
		os.Exit(fork.Init())
	}
	// Machine steps commit to /etc.
	release := testuser.ChangingEtc()
	code := m.Run()
	release()
	os.Exit(code)
}

// uniqueSleep is a duration no other process sleeps for: its argv names
// it.
func uniqueSleep() string { return fmt.Sprintf("1234.%d%d", time.Now().UnixNano()%1e6, rand.IntN(1e6)) }

// running returns the processes of this machine whose argv is argv, and
// kills them when the test ends.
func running(t *testing.T, argv ...string) []procs.Proc {
	t.Helper()
	all, err := procs.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []procs.Proc
	for _, p := range all {
		if slices.Equal(p.Argv, argv) {
			out = append(out, p)
			t.Cleanup(func() { procs.Stop(p, syscall.SIGKILL, 5*time.Second) })
		}
	}
	return out
}

func sleepExe(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	p, _ = filepath.EvalSymlinks(p)
	return p
}

// A kept copy's leftovers are started again, but a child whose parent is
// started again, and a subshell (whose own children are started
// instead); the summary and the journal say so.
func TestRestart(t *testing.T) {
	sleep, secs := sleepExe(t), uniqueSleep()
	env := []string{"PATH=/usr/bin:/bin", "MARK=restarted"}
	script := []string{"bash", "-c", "cd /tmp && setsid sleep " + secs + " &"}
	ls := stopped([]procs.Proc{
		{PID: 10, PPID: 1, Comm: "bash", Argv: script, Exe: "/usr/bin/bash", Cwd: "/tmp", Forked: true, UID: os.Getuid(), GID: os.Getgid()},
		{PID: 11, PPID: 1, Comm: "sh", Argv: []string{"sh", "-c", "exec sleep " + secs + "1"}, Exe: "/usr/bin/dash", Cwd: "/", Env: env, UID: os.Getuid(), GID: os.Getgid()},
		{PID: 12, PPID: 10, Comm: "sleep", Argv: []string{"sleep", secs}, Exe: sleep, Cwd: "/tmp", Env: env, UID: os.Getuid(), GID: os.Getgid()},
		{PID: 13, PPID: 11, Comm: "sleep", Argv: []string{"sleep", secs + "2"}, Exe: sleep, Cwd: "/", Env: env, UID: os.Getuid(), GID: os.Getgid()},
		{PID: 14, PPID: 1, Comm: "gone", Argv: []string{"/no/such/program"}, Exe: "/no/such/program", Cwd: "/"},
		{PID: 15, PPID: 1, Comm: "sh", Argv: []string{"sh", "-c", "echo cannot bind; exit 1"}, Exe: "/usr/bin/dash", Cwd: "/", Env: env, UID: os.Getuid(), GID: os.Getgid()},
	})
	dir := t.TempDir()
	restart(ls, Step{StateDir: dir, ID: 7, Argv: script})
	var states []LeftoverState
	for _, l := range ls {
		states = append(states, l.State)
	}
	if want := []LeftoverState{LeftSubshell, LeftStarted, LeftStarted, LeftChild, LeftFailed, LeftStarted}; !slices.Equal(states, want) {
		t.Fatalf("states %v, want %v: %+v", states, want, ls)
	}
	if got := running(t, "sleep", secs); len(got) != 1 || got[0].Cwd != "/tmp" || !slices.Contains(got[0].Env, "MARK=restarted") || got[0].Session != got[0].PID {
		t.Errorf("the sleep started again: %+v", got)
	}
	waitFor(t, func() bool { return len(running(t, "sleep", secs+"1")) == 1 }) // sh execs it
	if got := running(t, "sleep", secs+"2"); len(got) != 0 {
		t.Errorf("a child was started apart from its parent: %+v", got)
	}
	if ls[1].Log != filepath.Join(dir, "started", "7-1.log") || ls[2].Log != filepath.Join(dir, "started", "7-2.log") {
		t.Errorf("logs: %q, %q", ls[1].Log, ls[2].Log)
	}
	line := Outcome{Leftovers: ls}.LeftoverSummary()
	for _, want := range []string{"left 6 processes running in its copy of the machine; started again on this machine after the commit (new processes: memory and pids are not carried over): sh -c exec sleep " + secs + "1 (pid ",
		"sleep " + secs + " (pid ", "log " + dir + "/started/7-1.log", "could not start again: /no/such/program (", "not started again (a subshell", "1 started by its parent",
		"sh -c echo cannot bind; exit 1 (pid " + fmt.Sprint(ls[5].Started.PID) + ", log " + dir + "/started/7-4.log; it ended at once: it forked into the background, or failed (its log says which))"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary %q lacks %q", line, want)
		}
	}
	if ls[1].Ended || ls[2].Ended || !ls[5].Ended {
		t.Errorf("ended: %v %v %v", ls[1].Ended, ls[2].Ended, ls[5].Ended)
	}
	if b, err := os.ReadFile(ls[5].Log); err != nil || string(b) != "cannot bind\n" {
		t.Errorf("log: %q, %v", b, err)
	}
	started, stoppedCmds := journalLeftovers(ls)
	if len(started) != 5 || !started[4].Ended || stoppedCmds != nil || started[1].PID != ls[1].Started.PID || started[1].Start == 0 || started[3].Error == "" || started[0].Error == "" {
		t.Errorf("journal: %+v, %v", started, stoppedCmds)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the event never came")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A daemon that rewrote its command line is started with it, and the
// summary says so.
func TestSummaryRenamed(t *testing.T) {
	o := Outcome{Leftovers: []Leftover{{Proc: procs.Proc{PID: 5, PPID: 1, Argv: []string{"mydaemon: worker 1"}, Forked: true}, State: LeftStarted,
		Started: procs.Proc{PID: 99}, Log: "/l"}}}
	if got := o.LeftoverSummary(); !strings.HasSuffix(got, ": mydaemon: worker 1 (pid 99, log /l; it had rewritten its command line, so it runs with what /proc showed, not the step's arguments: check it)") {
		t.Errorf("summary: %s", got)
	}
	for _, p := range []procs.Proc{{Argv: []string{"redis-server *:6399"}}, {Argv: []string{"sleep", "1 2"}, Forked: true}} {
		if renamed(p) {
			t.Errorf("renamed(%+v)", p)
		}
	}
}

// A Redis server that rewrote its command line is started again on its
// address, in its directory, in the foreground; its summary has no
// warning.
func TestUnrenamedRedis(t *testing.T) {
	for _, c := range []struct {
		argv string
		want []string
	}{
		{"redis-server *:6399", []string{"redis-server", "--port", "6399", "--dir", "/srv/r", "--daemonize", "no"}},
		{"/usr/bin/redis-server 127.0.0.1:6400", []string{"/usr/bin/redis-server", "--port", "6400", "--dir", "/srv/r", "--daemonize", "no", "--bind", "127.0.0.1"}},
		{"mydaemon: worker 1", []string{"mydaemon: worker 1"}},
	} {
		p := procs.Proc{Argv: []string{c.argv}, Forked: true, Cwd: "/srv/r"}
		if got := unrenamed(p).Argv; !slices.Equal(got, c.want) {
			t.Errorf("unrenamed(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
	o := Outcome{Leftovers: []Leftover{{Proc: procs.Proc{PID: 5, Argv: []string{"redis-server *:6399"}, Forked: true, Cwd: "/"}, State: LeftStarted, Started: procs.Proc{PID: 99}, Log: "/l"}}}
	if got := o.LeftoverSummary(); strings.Contains(got, "rewritten") {
		t.Errorf("summary: %s", got)
	}
}

// undosh's own daemons and their children are not the step's.
func TestNotOwn(t *testing.T) {
	ps := []procs.Proc{{PID: 2, PPID: 1, Argv: []string{"undosh-classifier"}}, {PID: 3, PPID: 2, Argv: []string{"sh"}}, {PID: 4, PPID: 1, Argv: []string{"sleep", "1"}}}
	if got := notOwn(ps, []string{"undosh-classifier"}); len(got) != 1 || got[0].PID != 4 {
		t.Errorf("notOwn: %+v", got)
	}
	if got := notOwn(ps, nil); len(got) != 3 {
		t.Errorf("notOwn with none: %+v", got)
	}
}

func TestSummaryStopped(t *testing.T) {
	o := Outcome{Leftovers: stopped([]procs.Proc{{PID: 5, Argv: []string{"sleep", "300"}}, {PID: 6, PPID: 5, Comm: "kid"}})}
	if got, want := o.LeftoverSummary(), "left 2 processes running in its copy of the machine, stopped with the copy, which was not kept: sleep 300 (pid 5 in the copy), [kid] (pid 6 in the copy)"; got != want {
		t.Errorf("summary:\n got %q\nwant %q", got, want)
	}
	if got := (Outcome{LeftoversUnread: 3}).LeftoverSummary(); got != "left 3 processes running in its copy of the machine, stopped with the copy, which was not kept; 3 more, past the first 256, were not read and were stopped with the copy" {
		t.Errorf("only unread: %q", got)
	}
	if (Outcome{}).LeftoverSummary() != "" {
		t.Error("a summary with no leftovers")
	}
	var rec journal.Record
	Report(1, Outcome{Status: 1, Leftovers: o.Leftovers}, "", &rec)
	if len(rec.Started) != 0 || !slices.Equal(rec.Stopped, []string{"sleep 300", "[kid]"}) {
		t.Errorf("journal: started %+v, stopped %v", rec.Started, rec.Stopped)
	}
}

// A machine step that writes /etc and leaves a process running: kept, the
// file is on the machine and the process runs on it; failing, nothing
// is started and the outcome says the process was stopped.
func TestRunLeftovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if err := fork.Probe(); err != nil {
		t.Skipf("no fork engine: %v", err)
	}
	state := t.TempDir()
	name := fmt.Sprintf("/etc/undosh-test-left-%d-%x", os.Getpid(), rand.Uint64())
	t.Cleanup(func() { os.Remove(name) })
	secs := uniqueSleep()
	step := func(script string) Outcome {
		t.Helper()
		out, err := Run(context.Background(), Step{Argv: []string{"bash", "-c", script}, Dir: "/", Env: fork.DefaultEnv,
			StateDir: state, ID: 3, Leftovers: true, Timeout: time.Minute}, true)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := step("echo x > " + name + "; (setsid sleep " + secs + " &)")
	if !out.Passed() || len(out.Commits) == 0 {
		t.Fatalf("step: %+v", out)
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != "x\n" {
		t.Errorf("%s: %q, %v", name, b, err)
	}
	got := running(t, "sleep", secs)
	if len(got) != 1 || len(out.Leftovers) != 1 || out.Leftovers[0].State != LeftStarted || !got[0].Same(out.Leftovers[0].Started) {
		t.Fatalf("on the machine %+v; leftovers %+v", got, out.Leftovers)
	}
	if line := out.LeftoverSummary(); !strings.Contains(line, "started again on this machine after the commit (new processes: memory and pids are not carried over): sleep "+secs+" (pid "+fmt.Sprint(got[0].PID)+", log "+state+"/started/3-1.log)") {
		t.Errorf("summary: %s", line)
	}
	if out.Phases["restart"] <= 0 {
		t.Errorf("phases: %v", out.Phases)
	}

	secs = uniqueSleep()
	out = step("echo y > " + name + "; (setsid sleep " + secs + " &); exit 4")
	if out.Status != 4 || len(out.Commits) != 0 || len(out.Leftovers) != 1 || out.Leftovers[0].State != LeftStopped {
		t.Fatalf("failing step: %+v", out)
	}
	if got := running(t, "sleep", secs); len(got) != 0 {
		t.Errorf("a failing step's process runs on the machine: %+v", got)
	}
	if !strings.Contains(out.LeftoverSummary(), "stopped with the copy, which was not kept: sleep "+secs) {
		t.Errorf("summary: %s", out.LeftoverSummary())
	}
	if b, _ := os.ReadFile(name); string(b) != "x\n" {
		t.Errorf("%s after the failing step: %q", name, b)
	}
}
