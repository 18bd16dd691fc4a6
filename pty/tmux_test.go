package pty

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/shquote"
)

// A tmux session is a real terminal. Its pane runs a plain sh (no readline
// of its own to tidy up the terminal) that runs the test binary as a proxy
// for an interactive bash, then records the proxy's exit status and
// `stty -a` in files.

const (
	prompt = "PT$ "
	// promptMark is the prompt as capture-pane shows it, which drops
	// trailing spaces.
	promptMark  = "PT$"
	waitTimeout = 15 * time.Second
)

type session struct {
	t    *testing.T
	dir  string // the bash's working directory and HOME
	sock string
}

func startSession(t *testing.T) *session {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &session{t: t, dir: dir, sock: filepath.Join(dir, "tmux.sock")}
	script := strings.Join([]string{
		"cd " + shquote.Word(dir),
		// Under -race a proxy otherwise lingers a second at exit.
		"HOME=" + shquote.Word(dir) + " GORACE=atexit_sleep_ms=0 PS1=" + shquote.Word(prompt) + " HISTFILE=/dev/null INPUTRC=/dev/null " +
			proxyMarker + "=1 " + proxyPIDEnv + "=" + shquote.Word(s.path("proxy.pid")) + " " +
			shquote.Word(exe) + " bash --norc --noprofile -i",
		"st=$?",
		"stty -a > " + shquote.Word(s.path("stty")),
		"echo $st > " + shquote.Word(s.path("status.tmp")),
		"mv " + shquote.Word(s.path("status.tmp")) + " " + shquote.Word(s.path("status")),
	}, "\n")
	if err := os.WriteFile(s.path("run.sh"), []byte(script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.tmux("new-session", "-d", "-s", "t", "-x", "90", "-y", "24", "/bin/sh "+shquote.Word(s.path("run.sh")))
	t.Cleanup(func() {
		// The server is gone already when the pane's shell has exited.
		_ = exec.Command("tmux", "-S", s.sock, "kill-server").Run()
	})
	s.waitFor("the first prompt", func(scr string) bool { return strings.Count(scr, promptMark) >= 1 })
	return s
}

func (s *session) path(name string) string { return filepath.Join(s.dir, name) }

func (s *session) tmux(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", s.sock, "-f", "/dev/null"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// typeLine types text literally, then presses Enter.
func (s *session) typeLine(text string) {
	s.t.Helper()
	s.tmux("send-keys", "-t", "t", "-l", text)
	s.tmux("send-keys", "-t", "t", "Enter")
}

func (s *session) keys(keys ...string) {
	s.t.Helper()
	s.tmux(append([]string{"send-keys", "-t", "t"}, keys...)...)
}

func (s *session) screen() string {
	s.t.Helper()
	return s.tmux("capture-pane", "-p", "-t", "t")
}

func (s *session) prompts() int { return strings.Count(s.screen(), promptMark) }

// waitFor polls the screen until ok holds, and fails the test after
// waitTimeout.
func (s *session) waitFor(what string, ok func(screen string) bool) {
	s.t.Helper()
	if !s.poll(waitTimeout, ok) {
		s.t.Fatalf("timed out waiting for %s; screen:\n%s", what, s.screen())
	}
}

func (s *session) poll(d time.Duration, ok func(screen string) bool) bool {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if ok(s.screen()) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *session) waitLine(line string) {
	s.t.Helper()
	s.waitFor("a line "+strconv.Quote(line), func(scr string) bool { return hasLine(scr, line) })
}

func hasLine(screen, line string) bool {
	for _, l := range strings.Split(screen, "\n") {
		if strings.TrimRight(l, " ") == line {
			return true
		}
	}
	return false
}

func (s *session) morePrompts(n int) func(string) bool {
	return func(scr string) bool { return strings.Count(scr, promptMark) > n }
}

// wantExit waits for the proxy to end and checks its status and that the
// terminal is back in canonical mode with echo.
func (s *session) wantExit(want int) {
	s.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var data []byte
	for {
		var err error
		data, err = os.ReadFile(s.path("status"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the proxy did not exit; screen:\n%s", s.screen())
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		s.t.Fatal(err)
	}
	if got != want {
		s.t.Errorf("exit status = %d, want %d", got, want)
	}
	stty, err := os.ReadFile(s.path("stty"))
	if err != nil {
		s.t.Fatal(err)
	}
	fields := strings.Fields(string(stty))
	for _, flag := range []string{"icanon", "echo", "isig", "opost"} {
		if !contains(fields, flag) {
			s.t.Errorf("terminal not restored: stty -a lacks %s:\n%s", flag, stty)
		}
	}
}

// proc is what the tests need from /proc/<pid>/stat.
type proc struct {
	pid, ppid, pgrp, tpgid int
	comm                   string
	state                  byte
}

func procs(t *testing.T) []proc {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var ps []proc
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // it has exited
		}
		open, end := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
		if open < 0 || end < 0 {
			continue
		}
		f := strings.Fields(string(data[end+1:]))
		if len(f) < 6 {
			continue
		}
		p := proc{pid: pid, comm: string(data[open+1 : end]), state: f[0][0]}
		p.ppid, _ = strconv.Atoi(f[1])
		p.pgrp, _ = strconv.Atoi(f[2])
		p.tpgid, _ = strconv.Atoi(f[5])
		ps = append(ps, p)
	}
	return ps
}

// waitJob waits until the bash under the proxy has a child named comm that
// is stopped (when stopped is true) or is running as the terminal's
// foreground job, so that a key pressed next is meant for it.
func (s *session) waitJob(comm string, stopped bool) {
	s.t.Helper()
	data, err := os.ReadFile(s.path("proxy.pid"))
	if err != nil {
		s.t.Fatal(err)
	}
	proxy, err := strconv.Atoi(string(data))
	if err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		ps := procs(s.t)
		for _, bash := range ps {
			if bash.ppid != proxy {
				continue
			}
			for _, p := range ps {
				if p.ppid != bash.pid || p.comm != comm {
					continue
				}
				if stopped && p.state == 'T' || !stopped && p.state != 'T' && p.pgrp == p.tpgid {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s job (stopped %v); screen:\n%s", comm, stopped, s.screen())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestInteractive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, s *session)
		exit int
	}{
		{"exit status", func(t *testing.T, s *session) { s.typeLine("exit 3") }, 3},
		{"killed by signal", func(t *testing.T, s *session) { s.typeLine("kill -KILL $$") }, 128 + 9},
		{"line editing", func(t *testing.T, s *session) {
			s.tmux("send-keys", "-t", "t", "-l", "echo ab")
			s.keys("Left", "X", "Enter")
			s.waitLine("aXb")
			s.typeLine("exit")
		}, 0},
		{"tab completion", func(t *testing.T, s *session) {
			if err := os.WriteFile(s.path("zebra_unique.txt"), []byte("tabbed_ok\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s.tmux("send-keys", "-t", "t", "-l", "cat zebra_u")
			s.keys("Tab")
			s.waitFor("the completion", func(scr string) bool { return strings.Contains(scr, "cat zebra_unique.txt") })
			s.keys("Enter")
			s.waitLine("tabbed_ok")
			s.typeLine("exit")
		}, 0},
		{"ctrl-c", func(t *testing.T, s *session) {
			s.typeLine("sleep 100")
			s.waitJob("sleep", false)
			s.keys("C-c")
			s.waitFor("a prompt after Ctrl-C", s.morePrompts(1))
			s.typeLine("echo alive_$?")
			s.waitLine("alive_130")
			s.typeLine("exit")
		}, 0},
		{"ctrl-z fg ctrl-c", func(t *testing.T, s *session) {
			s.typeLine("sleep 100")
			s.waitJob("sleep", false)
			s.keys("C-z")
			s.waitJob("sleep", true)
			s.waitFor("the prompt after Stopped", s.morePrompts(1))
			s.typeLine("fg")
			s.waitJob("sleep", false)
			n := s.prompts()
			s.keys("C-c")
			s.waitFor("a prompt after Ctrl-C", s.morePrompts(n))
			s.typeLine("echo done_$?; jobs")
			s.waitLine("done_130")
			if scr := s.screen(); strings.Count(scr, "Stopped") != 1 {
				t.Errorf("the job is still there:\n%s", scr)
			}
			s.typeLine("exit")
		}, 0},
		{"resize", func(t *testing.T, s *session) {
			// The PTY starts at the terminal's size (tput alone would fall
			// back to terminfo's 80 columns on a PTY of size 0).
			s.typeLine("stty size")
			s.waitLine("24 90")
			s.tmux("resize-window", "-t", "t", "-x", "100")
			// The resize reaches the PTY asynchronously: ask until it shows.
			for i := 0; ; i++ {
				s.typeLine("clear; tput cols")
				if s.poll(time.Second, func(scr string) bool { return hasLine(scr, "100") }) {
					break
				}
				if i == 10 {
					t.Fatalf("tput cols never printed 100; screen:\n%s", s.screen())
				}
			}
			s.typeLine("exit")
		}, 0},
		{"vim", func(t *testing.T, s *session) {
			if _, err := exec.LookPath("vim"); err != nil {
				t.Skip("vim not installed")
			}
			s.typeLine("vim -u NONE -N -i NONE notes.txt")
			s.waitFor("vim's empty buffer", func(scr string) bool {
				return strings.Count(scr, "\n~") >= 10 && strings.Contains(scr, "notes.txt")
			})
			s.typeLine(":q!")
			s.typeLine("echo back_$((1+1))")
			s.waitLine("back_2")
			s.typeLine("exit")
		}, 0},
		{"python3", func(t *testing.T, s *session) {
			if _, err := exec.LookPath("python3"); err != nil {
				t.Skip("python3 not installed")
			}
			s.typeLine("python3 -q")
			s.waitFor("python's prompt", func(scr string) bool { return hasLine(scr, ">>>") })
			s.typeLine("print(6*7)")
			s.waitLine("42")
			s.typeLine("exit()")
			s.typeLine("echo py_$((3+4))")
			s.waitLine("py_7")
			s.typeLine("exit")
		}, 0},
		{"sigterm to the proxy", func(t *testing.T, s *session) {
			data, err := os.ReadFile(s.path("proxy.pid"))
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(string(data))
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}, 128 + 1},
	}
	for _, tt := range tests {
		// Not parallel: tmux servers started side by side slow each
		// other down, and in sequence the cases take about a second.
		t.Run(tt.name, func(t *testing.T) {
			s := startSession(t)
			tt.run(t, s)
			s.wantExit(tt.exit)
		})
	}
}
