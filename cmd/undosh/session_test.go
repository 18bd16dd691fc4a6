package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ptylib "github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The tests in this file drive an interactive session on a real terminal
// (tmux) as a person would: they type keys and wait for what the screen,
// the process table or the workspace shows. Each session has its own
// HOME with a .bashrc, its own state directory and its own git workspace.

// sessPS1 is the prompt of every session here. A session's lines are
// counted by the prompts on its screen: the lines read so far, plus the
// one the shell waits at.
const sessPS1 = "prompt$"

// sessWait bounds every wait for the screen: a line that runs in a copy of
// the machine under -race on a busy machine takes a few seconds.
const sessWait = 30 * time.Second

// term is an interactive shell on a terminal in tmux.
type term struct {
	*tmuxSession
	home, state, ws string
	pane            int // the pid of the pane's process, which runs the shell
}

// newTerm starts command (for example undoshBin+" -i") in a new git
// workspace, with a .bashrc that sets PS1 and then runs rc, and waits for
// its first prompt. The variables name the real bash and the state
// directory for undosh; plain bash ignores them.
func newTerm(t *testing.T, command, rc string) *term {
	t.Helper()
	tm := &term{home: t.TempDir(), state: t.TempDir(), ws: sessWorkspace(t)}
	sessWrite(t, filepath.Join(tm.home, ".bashrc"), "PS1='"+sessPS1+" '\n"+rc)
	env := []string{"HOME=" + tm.home, "UNDOSH_STATE_DIR=" + tm.state, "UNDOSH_REAL_BASH=/bin/bash", "UNDOSH_POLICY=-"}
	tm.tmuxSession = newTmux(t, env, fmt.Sprintf("cd '%s' && %s", tm.ws, command))
	pane, err := strconv.Atoi(strings.TrimSpace(tm.run("display-message", "-p", "-t", tm.name, "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	tm.pane = pane
	// Runs before newTmux's own kill-server and the removal of the temporary
	// directories: a shell that tmux hangs up on still writes its history,
	// and undosh its state, while they are being removed.
	t.Cleanup(func() {
		procs := append(procsBelow(pane), pane)
		exec.Command("tmux", "-S", tm.socket, "kill-server").Run()
		deadline := time.Now().Add(sessWait)
		for _, pid := range procs {
			for procAlive(pid) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
	tm.waitPrompts(1)
	return tm
}

// sessWorkspace makes a git repository with one committed file.
func sessWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sessWrite(t, filepath.Join(dir, "README"), "committed\n")
	dGitInit(t, dir)
	return dir
}

func sessWrite(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// typeText types text as it is: tmux reads no key names in it.
func (tm *term) typeText(text string) {
	tm.t.Helper()
	tm.run("send-keys", "-t", tm.name, "-l", text)
}

// press presses keys by their tmux names (Enter, Left, C-c, Escape).
func (tm *term) press(keys ...string) {
	tm.t.Helper()
	tm.run(append([]string{"send-keys", "-t", tm.name}, keys...)...)
}

// waitUntil waits until the screen satisfies ok, and returns it.
func (tm *term) waitUntil(what string, ok func(screen string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(sessWait)
	for {
		scr := tm.screen()
		if ok(scr) {
			return scr
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the terminal never showed %s; it shows:\n%s", what, scr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (tm *term) prompts() int { return strings.Count(tm.screen(), sessPS1) }

// waitPrompts waits until the screen shows n prompts.
func (tm *term) waitPrompts(n int) string {
	tm.t.Helper()
	return tm.waitUntil(fmt.Sprintf("%d prompts", n), func(scr string) bool { return strings.Count(scr, sessPS1) >= n })
}

// line types lines at the prompt, each followed by Enter (more than one
// for a command that continues on the next line), waits for the next
// prompt, and returns what the shell and undosh printed in between.
func (tm *term) line(lines ...string) string {
	tm.t.Helper()
	n := tm.prompts()
	for i, l := range lines {
		if i > 0 {
			// Typed ahead, a line may be echoed before the shell has
			// drawn its continuation prompt, at a time that varies from
			// one shell (and one machine's load) to another.
			tm.waitUntil("the continuation prompt", func(scr string) bool {
				last := scr[strings.LastIndexByte(strings.TrimRight(scr, "\n"), '\n')+1:]
				return strings.TrimRight(last, " \n") == ">"
			})
		}
		tm.typeText(l)
		tm.press("Enter")
	}
	return afterPrompt(tm.waitPrompts(n+1), n, len(lines))
}

// afterPrompt returns what follows the n-th prompt on screen, after the
// lines typed there, up to the next prompt.
func afterPrompt(scr string, n, typed int) string {
	parts := strings.Split(scr, sessPS1)
	if len(parts) <= n {
		return ""
	}
	out := parts[n]
	for range typed {
		_, out, _ = strings.Cut(out, "\n")
	}
	return out
}

// waitProcess waits until a process named comm runs below the pane (the
// shell's foreground job) in a state ok accepts.
func (tm *term) waitProcess(comm string, ok func(state byte) bool) proc {
	tm.t.Helper()
	deadline := time.Now().Add(sessWait)
	for {
		for _, pid := range procsBelow(tm.pane) {
			if p, found := procStat(pid); found && p.comm == comm && ok(p.state) {
				return p
			}
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("no %s in the expected state ran in the terminal; it shows:\n%s", comm, tm.screen())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// proc is a process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid int
	comm      string
	state     byte // R running, S sleeping, T stopped, Z zombie, …
}

// procStat reads process pid; found is false when it is gone.
func procStat(pid int) (p proc, found bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return proc{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 2 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return proc{pid: pid, ppid: ppid, comm: string(b[open+1 : end]), state: f[0][0]}, true
}

// procAlive reports whether pid runs (a zombie's work is over).
func procAlive(pid int) bool {
	p, found := procStat(pid)
	return found && p.state != 'Z'
}

// procsBelow lists the processes below process root.
func procsBelow(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if p, found := procStat(pid); found {
				parent[pid] = p.ppid
			}
		}
	}
	var out []int
	for pid := range parent {
		for a := parent[pid]; a > 1; a = parent[a] {
			if a == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

var rollbackNotice = regexp.MustCompile(`^undosh: step \d+ failed \(exit 1\): rolled back 1 file`)

// Editing a line with the cursor keys before Enter runs the edited line.
func TestSessionLineEditing(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	n := tm.prompts()
	tm.typeText("echo helo")
	tm.press("Left", "Left")
	tm.typeText("l")
	tm.press("Enter")
	scr := tm.waitPrompts(n + 1)
	if out := afterPrompt(scr, n, 1); out != "hello\n" {
		t.Errorf("the edited line printed %q, want %q; screen:\n%s", out, "hello\n", scr)
	}
	if !strings.Contains(scr, sessPS1+" echo hello\n") {
		t.Errorf("the screen does not show the edited line:\n%s", scr)
	}
}

// Tab completes a file name as readline does.
func TestSessionTabCompletion(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	sessWrite(t, filepath.Join(tm.ws, "uniq-name.txt"), "contents of the unique file\n")
	n := tm.prompts()
	tm.typeText("cat uniq")
	tm.press("Tab", "Enter")
	scr := tm.waitPrompts(n + 1)
	if !strings.Contains(scr, sessPS1+" cat uniq-name.txt \n") && !strings.Contains(scr, sessPS1+" cat uniq-name.txt\n") {
		t.Errorf("Tab did not complete the name:\n%s", scr)
	}
	if out := afterPrompt(scr, n, 1); out != "contents of the unique file\n" {
		t.Errorf("cat printed %q; screen:\n%s", out, scr)
	}
}

// Ctrl-C ends the foreground command, not the session, which reports 130.
func TestSessionCtrlC(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	n := tm.prompts()
	tm.typeText("sleep 100")
	tm.press("Enter")
	tm.waitProcess("sleep", func(s byte) bool { return s != 'T' })
	tm.press("C-c")
	tm.waitPrompts(n + 1)
	if out := tm.line("echo alive-$?"); out != "alive-130\n" {
		t.Errorf("after Ctrl-C the session printed %q, want alive-130; screen:\n%s", out, tm.screen())
	}
}

// Ctrl-Z stops the foreground job and fg resumes it, under the session's
// job control.
func TestSessionCtrlZ(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	n := tm.prompts()
	tm.typeText("sleep 100")
	tm.press("Enter")
	sleep := tm.waitProcess("sleep", func(s byte) bool { return s != 'T' })
	tm.press("C-z")
	scr := tm.waitPrompts(n + 1)
	if !strings.Contains(afterPrompt(scr, n, 1), "Stopped") {
		t.Fatalf("Ctrl-Z did not stop the job:\n%s", scr)
	}
	tm.waitProcess("sleep", func(s byte) bool { return s == 'T' })
	tm.typeText("fg")
	tm.press("Enter")
	resumed := tm.waitProcess("sleep", func(s byte) bool { return s != 'T' })
	if resumed.pid != sleep.pid {
		t.Errorf("fg ran a new sleep (pid %d), not the stopped one (pid %d)", resumed.pid, sleep.pid)
	}
	tm.press("C-c")
	tm.waitPrompts(n + 2)
	if out := tm.line("echo still-works"); out != "still-works\n" {
		t.Errorf("after fg and Ctrl-C the session printed %q; screen:\n%s", out, tm.screen())
	}
}

// A command sees the terminal's size, before and after the window is
// resized.
func TestSessionResize(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	tty := strings.TrimSpace(tm.line("tty"))
	if !strings.HasPrefix(tty, "/dev/pts/") {
		t.Fatalf("tty printed %q", tty)
	}
	if out := tm.line("tput cols"); out != "150\n" {
		t.Errorf("tput cols printed %q before the resize, want 150", out)
	}
	tm.run("resize-window", "-t", tm.name, "-x", "80")
	// The resize reaches the shell's terminal through undosh: wait for it
	// there, as the shell would see it.
	deadline := time.Now().Add(sessWait)
	for cols := ttyCols(t, tty); cols != 80; cols = ttyCols(t, tty) {
		if time.Now().After(deadline) {
			t.Fatalf("the shell's terminal %s stayed %d columns wide after the window was resized to 80", tty, cols)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if out := tm.line("tput cols"); out != "80\n" {
		t.Errorf("tput cols printed %q after the resize, want 80", out)
	}
}

// ttyCols is the width of terminal tty.
func ttyCols(t *testing.T, tty string) int {
	t.Helper()
	f, err := os.OpenFile(tty, os.O_RDONLY|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		t.Fatal(err)
	}
	return int(ws.Col)
}

// Full-screen programs and REPLs own the terminal while they run, and the
// prompt comes back after them.
func TestSessionFullScreen(t *testing.T) {
	t.Parallel()
	t.Run("vim", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("vim"); err != nil {
			t.Skip("vim is not installed")
		}
		tm := newTerm(t, undoshBin+" -i", "")
		n := tm.prompts()
		tm.typeText("vim x.txt")
		tm.press("Enter")
		tm.waitUntil(`vim's screen`, func(scr string) bool { return strings.Contains(scr, `"x.txt"`) })
		tm.press("i")
		tm.waitUntil("insert mode", func(scr string) bool { return strings.Contains(scr, "-- INSERT --") })
		tm.typeText("typed in vim")
		tm.press("Escape")
		// A colon right behind Escape would read as Alt-colon.
		tm.waitUntil("the end of insert mode", func(scr string) bool { return !strings.Contains(scr, "-- INSERT --") })
		tm.typeText(":wq")
		tm.press("Enter")
		scr := tm.waitPrompts(n + 1)
		if b, err := os.ReadFile(filepath.Join(tm.ws, "x.txt")); err != nil || string(b) != "typed in vim\n" {
			t.Errorf("x.txt = %q (%v), want what was typed in vim; screen:\n%s", b, err, scr)
		}
		if out := tm.line("echo back"); out != "back\n" {
			t.Errorf("after vim the session printed %q", out)
		}
	})
	t.Run("python3", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("python3 is not installed")
		}
		tm := newTerm(t, undoshBin+" -i", "")
		n := tm.prompts()
		tm.typeText("python3")
		tm.press("Enter")
		scr := tm.waitUntil("python's prompt", func(scr string) bool {
			return strings.Contains(scr, ">>> ") || strings.Contains(scr, "undosh: refused:")
		})
		if strings.Contains(scr, "undosh: refused:") {
			// Running code is a machine step; without the fork engine
			// (not root) the default policy refuses it.
			t.Skipf("undosh refused python3 here (no fork engine?):\n%s", scr)
		}
		tm.typeText("print(6*7)")
		tm.press("Enter")
		tm.waitUntil("42", func(scr string) bool { return regexp.MustCompile(`(?m)^42$`).MatchString(scr) })
		tm.typeText("exit()")
		tm.press("Enter")
		scr = tm.waitPrompts(n + 1)
		if out := tm.line("echo back"); out != "back\n" {
			t.Errorf("after python3 the session printed %q; screen:\n%s", out, scr)
		}
	})
}

// A failing line that wrote is rolled back: its notice on a line of its
// own, the file gone, the status kept.
func TestSessionRollback(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	out := tm.line("echo x > f; false")
	if !rollbackNotice.MatchString(out) || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("want the rollback notice alone on the line after the command; got %q; screen:\n%s", out, tm.screen())
	}
	if _, err := os.Lstat(filepath.Join(tm.ws, "f")); err == nil {
		t.Errorf("f exists after the rollback")
	}
	if out := tm.line("echo $?"); out != "1\n" {
		t.Errorf("echo $? printed %q after the rolled-back line, want 1", out)
	}
	// Output that leaves the cursor mid-line: the notice starts a line.
	out = tm.line("printf no-newline; echo x > f2; false")
	first, rest, _ := strings.Cut(out, "\n")
	if first != "no-newline" || !rollbackNotice.MatchString(rest) {
		t.Errorf("want the notice on the line after the output; got %q", out)
	}
	if _, err := os.Lstat(filepath.Join(tm.ws, "f2")); err == nil {
		t.Errorf("f2 exists after the rollback")
	}
}

// A for loop typed over several lines is one line of history, and one
// protected step.
func TestSessionMultiLineLoop(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	n := tm.prompts()
	tm.typeText("for i in 1 2 3; do")
	tm.press("Enter")
	tm.waitUntil("the continuation prompt", func(scr string) bool { return strings.HasSuffix(strings.TrimRight(scr, " \n"), "do\n>") })
	tm.typeText("echo $i > n$i")
	tm.press("Enter")
	tm.waitUntil("the continuation prompt", func(scr string) bool { return strings.HasSuffix(strings.TrimRight(scr, " \n"), "n$i\n>") })
	tm.typeText("done")
	tm.press("Enter")
	scr := tm.waitPrompts(n + 1)
	out := afterPrompt(scr, n, 3)
	var loop []journalRecord
	recs := readJournal(t, tm.state)
	for _, r := range recs {
		if strings.Contains(r.Command, "for i in 1 2 3") {
			loop = append(loop, r)
		}
	}
	if len(recs) != 1 || len(loop) != 1 {
		t.Fatalf("the loop made %d journal records (%d in all), want one: %+v\nscreen:\n%s", len(loop), len(recs), recs, scr)
	}
	for _, part := range []string{"for i in 1 2 3", "do", "echo $i > n$i", "done"} {
		if !strings.Contains(loop[0].Command, part) {
			t.Errorf("the step's command %q lacks %q", loop[0].Command, part)
		}
	}
	if strings.Contains(out, "ran in a copy of the machine") || strings.Contains(out, "undosh: refused:") {
		// A machine step did not run in the shell: in a copy (whose files
		// stay out of a workspace under /tmp, see
		// TestSessionCopyKeepsWorkspaceWrites), or refused when there is no
		// fork engine (not root). One record is all that holds then.
		return
	}
	for i := 1; i <= 3; i++ {
		if b, err := os.ReadFile(filepath.Join(tm.ws, fmt.Sprintf("n%d", i))); err != nil || string(b) != fmt.Sprintf("%d\n", i) {
			t.Errorf("n%d = %q (%v) after the loop; screen:\n%s", i, b, err, scr)
		}
	}
}

// A line that runs in a copy of the machine, and whose copy is kept, leaves
// its writes in the workspace.
func TestSessionCopyKeepsWorkspaceWrites(t *testing.T) {
	t.Parallel()
	needForkEngine(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	tm := newTerm(t, undoshBin+" -i", "")
	// Code run by an interpreter makes the line a machine step.
	out := tm.line(`python3 -c 'open("from-copy", "w").write("kept\n")'`)
	if !strings.Contains(out, "the copy was kept") {
		t.Fatalf("the line did not run in a copy of the machine, or its copy was not kept:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(tm.ws, "from-copy")); err != nil || string(b) != "kept\n" {
		t.Errorf("from-copy = %q (%v) after %q", b, err, out)
	}
}

// exit N ends the session with status N, on its own or after a line that
// wrote (which is then rolled back: it failed).
func TestSessionExit(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		// undosh on a terminal, without -i: interactive as bash would be.
		tm := newTerm(t, undoshBin, "")
		tm.typeText("exit 3")
		tm.press("Enter")
		if st := tm.deadStatus(); st != "3" {
			t.Errorf("the session ended with %s, want 3", st)
		}
	})
	t.Run("after a write", func(t *testing.T) {
		t.Parallel()
		tm := newTerm(t, undoshBin+" -i", "")
		tm.typeText("echo x > f; exit 3")
		tm.press("Enter")
		if st := tm.deadStatus(); st != "3" {
			t.Errorf("the session ended with %s, want 3", st)
		}
		if _, err := os.Lstat(filepath.Join(tm.ws, "f")); err == nil {
			t.Errorf("f exists: the line that ended the session with 3 was not rolled back")
		}
	})
}

// A refused line does not run; the session goes on.
func TestSessionRefused(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	out := tm.line("npm publish")
	if !strings.HasPrefix(out, "undosh: refused:") {
		t.Errorf("npm publish printed %q, want the refusal on the line after it", out)
	}
	if out := tm.line("echo next-ran"); out != "next-ran\n" {
		t.Errorf("the line after the refusal printed %q; screen:\n%s", out, tm.screen())
	}
	// The read-only line after it has its checkpoint: in a session the
	// kernel does not keep a line off the workspace.
	recs := readJournal(t, tm.state)
	if len(recs) != 2 || recs[0].Command != "npm publish" || recs[0].Outcome != "refused" ||
		recs[1].Command != "echo next-ran" || recs[1].Outcome != "passed through" || len(recs[1].Checkpoints) != 1 {
		t.Errorf("journal: %+v, want a refused npm publish, then the read-only line with its checkpoint", recs)
	}
}

// HISTCONTROL=ignoreboth keeps a line with a leading space out of history
// as bash does, while undosh still reads and protects it.
func TestSessionHistory(t *testing.T) {
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "HISTCONTROL=ignoreboth\n")
	tm.line("echo first")
	if out := tm.line(" echo hidden-by-space"); out != "hidden-by-space\n" {
		t.Errorf("a leading-space line printed %q", out)
	}
	tm.line("echo second")
	out := tm.line("  echo y > g; false")
	if !rollbackNotice.MatchString(out) {
		t.Errorf("the failing leading-space line printed %q, want the rollback notice", out)
	}
	if _, err := os.Lstat(filepath.Join(tm.ws, "g")); err == nil {
		t.Errorf("g exists: the failing leading-space line was not rolled back")
	}
	want := []string{"echo first", "echo second", "history"}
	if diff := cmp.Diff(want, tm.history()); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// history returns the session's history, without the entries' numbers.
func (tm *term) history() []string {
	tm.t.Helper()
	var got []string
	for l := range strings.SplitSeq(strings.TrimSuffix(tm.line("history"), "\n"), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			got = append(got, strings.Join(f[1:], " "))
		}
	}
	return got
}

// The line after one that HISTCONTROL keeps out of history is read and
// kept or forgotten as bash would.
func TestSessionHistoryAfterForgottenLine(t *testing.T) {
	t.Parallel()
	// undosh deletes a forgotten entry (history -d N), so the next line
	// gets the same number N: it must not be taken for the entry undosh
	// has already seen.
	t.Run("ignoreboth", func(t *testing.T) {
		t.Parallel()
		tm := newTerm(t, undoshBin+" -i", "HISTCONTROL=ignoreboth\n")
		for _, l := range []string{"echo first", " echo hidden-1", " echo hidden-2", "echo second", "echo second"} {
			tm.line(l)
		}
		want := []string{"echo first", "echo second", "history"} // as /bin/bash keeps it
		if diff := cmp.Diff(want, tm.history()); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})
	t.Run("HISTIGNORE", func(t *testing.T) {
		t.Parallel()
		tm := newTerm(t, undoshBin+" -i", "HISTCONTROL=ignoreboth\nHISTIGNORE=pwd\n")
		tm.line("echo first")
		tm.line(" echo hidden")
		out := tm.line("echo x > f; false")
		if !rollbackNotice.MatchString(out) {
			t.Errorf("the failing line printed %q, want the rollback notice", out)
		}
		if out := tm.line("echo ran > f; echo $?"); out != "0\n" {
			t.Errorf("echo ran > f; echo $? printed %q", out)
		}
		if b, err := os.ReadFile(filepath.Join(tm.ws, "f")); err != nil || string(b) != "ran\n" {
			t.Errorf("f = %q (%v), want the second line's write", b, err)
		}
	})
}

// A session fed one command at a time on a pipe: each command runs as it
// comes, a failing one is rolled back before the next runs, and undosh
// never waits for the end of its input.
func TestSessionPipeFed(t *testing.T) {
	t.Parallel()
	ws := sessWorkspace(t)
	cmd := exec.Command(undoshBin)
	cmd.Args = []string{"bash"}
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "UNDOSH_STATE_DIR=" + t.TempDir(),
		"UNDOSH_REAL_BASH=/bin/bash", "UNDOSH_POLICY=-"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, lines := startPiped(t, cmd)
	// Each step prints its marker last, but the third: it fails after it.
	steps := []struct {
		cmd  string
		want []string
	}{
		{`x=1; echo "first $x"; echo end-0`, []string{"first 1\n"}},
		{`echo old > f; echo end-1`, nil},
		{`echo new > f; echo end-2; false`, nil},
		{`echo "status $?"; cat f; echo end-3`, []string{"status 1\n", "old\n"}},
		{`echo "x is $x"; echo end-4`, []string{"x is 1\n"}},
	}
	for n, step := range steps {
		fmt.Fprintln(in, step.cmd)
		var got []string
		for {
			var l string
			var ok bool
			select {
			case l, ok = <-lines:
			case <-time.After(sessWait):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no answer to %q while its input is open: undosh waits for the end of its input; stderr:\n%s", step.cmd, stderr.String())
			}
			if !ok {
				cmd.Wait()
				t.Fatalf("the session ended before %q answered; stderr:\n%s", step.cmd, stderr.String())
			}
			if l == fmt.Sprintf("end-%d\n", n) {
				break
			}
			got = append(got, l)
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%q printed (-want +got):\n%s", step.cmd, diff)
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the session: %v; stderr:\n%s", err, stderr.String())
	}
	var notices []string
	for l := range strings.SplitSeq(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
		if rollbackNotice.MatchString(l) {
			notices = append(notices, l)
		}
	}
	if len(notices) != 1 {
		t.Errorf("stderr has %d rollback notices, want the third command's; stderr:\n%s", len(notices), stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(b) != "old\n" {
		t.Errorf("f = %q (%v) at the end, want the content before the rolled-back command", b, err)
	}
}

// In a session fed on a pipe, as agent harnesses drive one, the shell
// may write its workspace whatever a line is: a line the policy wrongly
// calls read-only has a checkpoint all the same, and undoctl back undoes
// what it wrote.
func TestSessionReadOnlyLineCheckpointed(t *testing.T) {
	t.Parallel()
	ws := sessWorkspace(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "undosh-report"), []byte("#!/bin/sh\necho changed > kept.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "UNDOSH_STATE_DIR=" + t.TempDir(), "UNDOSH_REAL_BASH=/bin/bash",
		writePolicy(t, "version: 1\ntrusted_dirs: ["+bin+"]\nrules:\n  - name: report-is-read-only\n    programs: [undosh-report]\n    class: none\n")}
	cmd := exec.Command(undoshBin)
	cmd.Args = []string{"bash"}
	cmd.Dir, cmd.Env = ws, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// One line at a time, each answered before the next: a session, not
	// a script read whole.
	in, lines := startPiped(t, cmd)
	fmt.Fprintln(in, "undosh-report; echo end-0")
	select {
	case l := <-lines:
		if l != "end-0\n" {
			t.Errorf("the line printed %q", l)
		}
	case <-time.After(sessWait):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no answer to the line; stderr:\n%s", stderr.String())
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the session: %v; stderr:\n%s", err, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "changed\n" {
		t.Fatalf("kept.txt = %q: the line did not write it (stderr %q); the test has nothing to undo", b, stderr.String())
	}
	recs := journalRecords(t, env)
	if len(recs) < 1 || recs[0]["class"] != "none" || !strings.HasPrefix(fmt.Sprint(recs[0]["command"]), "undosh-report; echo end-0") {
		t.Fatalf("journal %q: want the read-only line first, with its checkpoint", recs)
	}
	if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", "1"); back.code != 0 {
		t.Fatalf("undoctl back 1: %+v", back)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "kept.txt")); string(b) != "before\n" {
		t.Errorf("kept.txt = %q after undoctl back 1", b)
	}
}

// The same session typed into plain bash and into undosh shows the same
// screen, but for the shell's name in its own messages.
func TestSessionDifferential(t *testing.T) {
	t.Parallel()
	script := [][]string{
		{"echo hello world"},
		{"printf 'no newline'"},
		{`v=42; echo "v is $v"`},
		{`greet() { echo "hi $1"; }`},
		{"greet there"},
		{"cat > note.txt <<EOF", "dear $v", "EOF"},
		{"cat note.txt | tr a-z A-Z | sed 's/^/> /'"},
		{"mkdir sub && cd sub && echo inside > in.txt"},
		{"ls; cd ..; ls"},
		{`no-such-command-x; echo "status $?"`},
	}
	shells := []struct{ name, command string }{{"bash", "/bin/bash -i"}, {"undosh", undoshBin + " -i"}}
	screens := make([]string, len(shells))
	for i, sh := range shells {
		tm := newTerm(t, sh.command, "")
		for _, lines := range script {
			tm.line(lines...)
		}
		scr := strings.TrimRight(tm.screen(), "\n")
		screens[i] = regexp.MustCompile(`(?m)^`+sh.name+`: `).ReplaceAllString(scr, "SHELL: ")
		if !strings.Contains(screens[i], "SHELL: no-such-command-x: command not found") {
			t.Errorf("%s: the screen lacks the shell's command-not-found message:\n%s", sh.name, scr)
		}
		if b, err := os.ReadFile(filepath.Join(tm.ws, "sub", "in.txt")); err != nil || string(b) != "inside\n" {
			t.Errorf("%s: sub/in.txt = %q (%v)", sh.name, b, err)
		}
	}
	if diff := cmp.Diff(screens[0], screens[1]); diff != "" {
		t.Errorf("the screens differ (-bash +undosh):\n%s", diff)
	}
}

// startPiped starts cmd with its standard input a pipe the test writes,
// as a harness feeds a shell one command at a time, and returns that pipe
// and cmd's standard output line by line.
func startPiped(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, <-chan string) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		br := bufio.NewReader(out)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- l
		}
	}()
	return in, lines
}

// As root, a session's bash runs in a view of the machine: what a line
// writes beyond its workspace is kept when the line passes, and put back
// (in the session too) when it fails.
func TestSessionViewPipeFed(t *testing.T) {
	needForkEngine(t)
	t.Parallel()
	ws := sessWorkspace(t)
	kept, dropped := harmless(t), harmless(t)
	// The tool reads where it writes from a file: a path named on the
	// command line would make the line a machine step.
	sessWrite(t, filepath.Join(ws, "tool.py"), "import sys\nopen(open(sys.argv[1]).read(), 'w').write('x\\n')\nsys.exit(int(sys.argv[2]))\n")
	sessWrite(t, filepath.Join(ws, "kept.path"), kept)
	sessWrite(t, filepath.Join(ws, "dropped.path"), dropped)
	state := t.TempDir()
	cmd := exec.Command(undoshBin)
	cmd.Args = []string{"bash"}
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "UNDOSH_STATE_DIR=" + state,
		"UNDOSH_REAL_BASH=/bin/bash", "UNDOSH_POLICY=-"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, lines := startPiped(t, cmd)
	// ask runs line, then prints the marker it waits for, and ends with
	// status (the line's status, which decides).
	ask := func(line string, status int) string {
		t.Helper()
		fmt.Fprintf(in, "%s; echo end; (exit %d)\n", line, status)
		var got string
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the session ended at %q; stderr:\n%s", line, stderr.String())
				}
				if l == "end\n" {
					return got
				}
				got += l
			case <-time.After(sessWait):
				cmd.Process.Kill()
				t.Fatalf("no answer to %q; stderr:\n%s", line, stderr.String())
			}
		}
	}
	host, _ := os.Readlink("/proc/self/ns/mnt")
	if ns := ask("readlink /proc/self/ns/mnt", 0); ns == host+"\n" {
		t.Errorf("the session's bash runs in the machine's mount namespace")
	}
	ask("python3 tool.py kept.path 0", 0)
	ask("python3 tool.py dropped.path 0", 3)
	if got := ask(fmt.Sprintf("cat %s; test -e %s || echo gone", kept, dropped), 0); got != "x\ngone\n" {
		t.Errorf("the session sees %q, want the kept file and not the dropped one", got)
	}
	in.Close()
	cmd.Wait()
	if b, err := os.ReadFile(kept); err != nil || string(b) != "x\n" {
		t.Errorf("%s on the machine: %q, %v", kept, b, err)
	}
	if _, err := os.Stat(dropped); err == nil {
		t.Errorf("%s reached the machine", dropped)
	}
	for _, want := range []string{"wrote " + kept + ": kept as a machine step would be", "what it wrote beyond its workspace (" + dropped + ") was dropped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// A session that goes to another project: the view shares that one too,
// from the line after the cd on, and the shell keeps its OLDPWD.
func TestSessionViewFollowsCd(t *testing.T) {
	needForkEngine(t)
	t.Parallel()
	a, b := sessWorkspace(t), sessWorkspace(t)
	state := t.TempDir()
	cmd := exec.Command(undoshBin)
	cmd.Args = []string{"bash"}
	cmd.Dir = a
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "UNDOSH_STATE_DIR=" + state,
		"UNDOSH_REAL_BASH=/bin/bash", "UNDOSH_POLICY=-"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, lines := startPiped(t, cmd)
	ask := func(line string) string {
		t.Helper()
		fmt.Fprintf(in, "%s; echo end\n", line)
		var got string
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the session ended at %q; stderr:\n%s", line, stderr.String())
				}
				if l == "end\n" {
					return got
				}
				got += l
			case <-time.After(sessWait):
				cmd.Process.Kill()
				t.Fatalf("no answer to %q; stderr:\n%s", line, stderr.String())
			}
		}
	}
	ask("cd " + b)
	ask("echo b > g")
	if got := ask(`cd - >/dev/null; pwd; cat "$OLDPWD/g"`); got != a+"\nb\n" {
		t.Errorf("after cd -: %q, want %s and b", got, a)
	}
	in.Close()
	cmd.Wait()
	if strings.Contains(stderr.String(), "kept as a machine step") {
		t.Errorf("the write in the second project was taken for a write beyond the workspace:\n%s", stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(b, "g")); err != nil || string(b) != "b\n" {
		t.Errorf("g: %q, %v", b, err)
	}
}

// The same on a terminal: a failing line's write beyond the workspace is
// gone from the session and the machine.
func TestSessionViewInteractive(t *testing.T) {
	needForkEngine(t)
	t.Parallel()
	tm := newTerm(t, undoshBin+" -i", "")
	p := harmless(t)
	sessWrite(t, filepath.Join(tm.ws, "tool.py"), "import sys\nopen(open(sys.argv[1]).read(), 'w').write('x\\n')\nsys.exit(1)\n")
	sessWrite(t, filepath.Join(tm.ws, "p.path"), p)
	if out := tm.line("python3 tool.py p.path"); !strings.Contains(out, "was dropped") {
		t.Errorf("want the notice that the write was dropped; got %q", out)
	}
	if out := tm.line("test -e " + p + " || echo gone"); out != "gone\n" {
		t.Errorf("the session still sees %s: %q", p, out)
	}
	if _, err := os.Stat(p); err == nil {
		t.Errorf("%s reached the machine", p)
	}
}

// A mount the machine drops while a session runs in a view (another
// process unmounts a tmpfs) leaves the lines after it as they were: the
// view's layer over it holds nothing, and nothing is settled there.
func TestSessionViewMountGone(t *testing.T) {
	needForkEngine(t)
	_, unmount := machineTmpfs(t, "undosh-mount-gone-")
	tm := newTerm(t, undoshBin+" -i", "")
	if out := tm.line("echo before"); out != "before\n" {
		t.Fatalf("first line printed %q", out)
	}
	unmount()
	if out := tm.line("echo after"); out != "after\n" {
		t.Errorf("the line after the unmount printed %q; screen:\n%s", out, tm.screen())
	}
	if out := tm.line("echo y > f; cat f"); out != "y\n" {
		t.Errorf("a workspace line after the unmount printed %q; screen:\n%s", out, tm.screen())
	}
}

// machineTmpfs mounts a tmpfs on a new directory of the machine, not
// under a scratch path (which a view binds whole from the machine): a
// mount of its own, which a view overlays. unmount takes it away; what
// is left is undone when the test ends.
func machineTmpfs(t *testing.T, prefix string) (dir string, unmount func()) {
	t.Helper()
	dir, err := os.MkdirTemp("/opt", prefix)
	if err != nil {
		t.Skipf("no /opt: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := unix.Mount("undosh-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir, func() {
		t.Helper()
		if err := unix.Unmount(dir, 0); err != nil {
			t.Fatal(err)
		}
		mounted = false
	}
}

// A mount the session wrote in through its view, which the machine then
// drops directory and all, leaves the lines after it as they were: what
// the view holds over it has nowhere to go.
func TestSessionViewMountRemoved(t *testing.T) {
	needForkEngine(t)
	dir, unmount := machineTmpfs(t, "undosh-mount-removed-")
	tm := newTerm(t, undoshBin+" -i", "")
	tm.line("echo z > " + dir + "/z") // beyond the workspace: settled after the line
	unmount()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if out := tm.line("echo y > f; cat f"); out != "y\n" {
		t.Errorf("a workspace line after the mount was removed printed %q; screen:\n%s", out, tm.screen())
	}
}

// A line already typed when the session starts, which ends the session
// with `exit N`: the session's status is N, and the line is protected as
// any other. Rolled back (it failed), its notice reaches the caller's
// terminal although the session's own terminal is gone; kept under
// rollback: never, its file stays.
func TestSessionTypedAheadExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy, input string
		kept          bool
	}{
		{"version: 1\n", "echo x > f; exit 3\n", false},
		{"version: 1\nrollback: never\n", "echo x > f; exit 3\n", true},
		// Several lines typed ahead: the first passes and is kept either
		// way, the last ends the session.
		{"version: 1\n", "echo a > a\nmkdir d; echo b > d/b\necho x > f; exit 3\n", false},
		{"version: 1\nrollback: never\n", "echo a > a\nmkdir d; echo b > d/b\necho x > f; exit 3\n", true},
	} {
		ws := t.TempDir()
		master, slave, err := ptylib.Open()
		if err != nil {
			t.Fatal(err)
		}
		// In the terminal's input before the shell reads anything.
		if _, err := master.Write([]byte(tc.input)); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(undoshBin, "-i")
		cmd.Args[0] = "bash"
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "UNDOSH_STATE_DIR="+t.TempDir(), "HOME="+t.TempDir(), writePolicy(t, tc.policy), "PS1=$ ")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		out, _ := io.ReadAll(master) // EIO once every process let go of the terminal
		master.Close()
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("%q: the session ended with %v, want exit status 3; output:\n%s", tc.policy, err, out)
		}
		if strings.Contains(tc.input, "d/b") {
			for _, p := range []string{"a", "d/b"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
					t.Errorf("%q: %s, written by a line that passed: %v; output:\n%s", tc.policy, p, err, out)
				}
			}
		}
		_, ferr := os.Lstat(filepath.Join(ws, "f"))
		switch {
		case tc.kept && ferr != nil:
			t.Errorf("%q: f after the session: %v; output:\n%s", tc.policy, ferr, out)
		case !tc.kept && ferr == nil:
			t.Errorf("%q: f kept although the line failed; output:\n%s", tc.policy, out)
		case !tc.kept && !bytes.Contains(out, []byte("failed (exit 3): rolled back 1 file")):
			t.Errorf("%q: no rollback notice; output:\n%s", tc.policy, out)
		}
	}
}

// TestSessionMachineLineExit: a line run in a copy of the machine that
// ends with exit ends the session there, with its status, as it would
// in bash; its copy is discarded (it failed), or kept under rollback:
// never. Typed ahead, before the shell reads anything.
func TestSessionMachineLineExit(t *testing.T) {
	needForkEngine(t)
	for _, tc := range []struct {
		policy string
		kept   bool
	}{{"version: 1\n", false}, {"version: 1\nrollback: never\n", true}} {
		p := harmless(t)
		master, slave, err := ptylib.Open()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := master.Write([]byte("echo y > " + p + "; exit 4\n")); err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		cmd := exec.Command(undoshBin, "-i")
		cmd.Args[0] = "bash"
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), writePolicy(t, tc.policy), "PS1=$ ")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		// A session that goes on after the line would wait for input
		// for ever: end it, and fail.
		watchdog := time.AfterFunc(30*time.Second, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		out, _ := io.ReadAll(master)
		watchdog.Stop()
		master.Close()
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 {
			t.Errorf("%q: the session ended with %v, want exit status 4; output:\n%s", tc.policy, err, out)
		}
		_, ferr := os.Lstat(p)
		if kept := ferr == nil; kept != tc.kept {
			t.Errorf("%q: %s kept %v, want %v; output:\n%s", tc.policy, p, kept, tc.kept, out)
		}
		if tc.kept {
			undoCommitOf(t, strings.TrimPrefix(p, "/"))
		}
	}
}
