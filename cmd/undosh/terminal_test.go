package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxSession runs command in a detached tmux session on its own server
// and returns a function that captures the screen.
type tmuxSession struct {
	t      *testing.T
	socket string
	name   string
	status string // file the program's exit status is written to
}

func newTmux(t *testing.T, env []string, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: terminal tests need a real terminal")
	}
	dir := t.TempDir()
	s := &tmuxSession{t: t, socket: filepath.Join(dir, "tmux.sock"), name: "undosh", status: filepath.Join(dir, "status")}
	// The pane's shell writes the status where the test can wait for it.
	command = fmt.Sprintf("%s; echo $? > %s.tmp && mv %s.tmp %s", command, s.status, s.status, s.status)
	// remain-on-exit is set before the program starts, so that a program
	// that ends at once still leaves its status.
	args := []string{"-f", "/dev/null", "start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
		"new-session", "-d", "-s", s.name, "-x", "150", "-y", "30"}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	s.run(append(args, command)...)
	t.Cleanup(func() { exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (s *tmuxSession) screen() string {
	return s.run("capture-pane", "-p", "-J", "-S", "-", "-t", s.name)
}

// waitFor waits until the screen shows want: the terminal's own event.
func (s *tmuxSession) waitFor(want string) string {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		scr := s.screen()
		if strings.Contains(scr, want) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the terminal never showed %q; it shows:\n%s", want, scr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deadStatus waits for the program to end and returns its exit status.
func (s *tmuxSession) deadStatus() string {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(s.status); err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the program in the terminal never ended; screen:\n%s", s.screen())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// On a terminal, -i -c (Aider's form) and an interactive session behave as
// bash's: the same flags, the same tty, and the session's exit status.
func TestTerminal(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"/bin/bash", undoshBin} {
		t.Run(filepath.Base(shell), func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			env := []string{"UNDOSH_STATE_DIR=" + t.TempDir(), "HOME=" + t.TempDir()}
			s := newTmux(t, env, fmt.Sprintf("cd %s && PS1='prompt$ ' %s --norc --noprofile -i", ws, shell))
			s.waitFor("prompt$ ")
			s.run("send-keys", "-t", s.name, `echo "flags=$- tty=$([ -t 0 ] && echo yes) sum=$((6*7))"`, "Enter")
			scr := s.waitFor("sum=42")
			if !strings.Contains(scr, "flags=himBHs tty=yes sum=42") {
				t.Errorf("%s: interactive flags or tty differ:\n%s", shell, scr)
			}
			s.run("send-keys", "-t", s.name, "exit 3", "Enter")
			if st := s.deadStatus(); st != "3" {
				t.Errorf("%s: session ended with %s, want 3", shell, st)
			}
		})
	}
}

// Aider's `$SHELL -i -c` on a terminal: a failing step that writes is
// rolled back, with its notice on the terminal, and its status passes
// through.
func TestTerminalInteractiveCommandRollsBack(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"UNDOSH_STATE_DIR=" + t.TempDir(), "HOME=" + t.TempDir()}
	// Builtins only: an interactive bash started as a child in its
	// parent's process group (under plain bash as under undosh) loses the
	// output of its first external command on a terminal.
	s := newTmux(t, env, fmt.Sprintf(`cd %s && %s -i -c 'echo "flags=$-" > f; read -r l < f; echo "$l"; exit 4'`, ws, undoshBin))
	if st := s.deadStatus(); st != "4" {
		t.Errorf("status %s, want 4", st)
	}
	scr := s.screen()
	if !strings.Contains(scr, "flags=himBHc") || !strings.Contains(scr, "undosh: step 1 failed (exit 4): rolled back 1 file") {
		t.Errorf("screen:\n%s", scr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f")); string(b) != "before\n" {
		t.Errorf("f = %q after the rollback", b)
	}
}
