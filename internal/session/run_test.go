package session

import (
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// recorder is a Lines that protects nothing: it records each line it is
// given and how each ended, and skips the lines named in skip, with
// their status.
type recorder struct {
	bash string
	skip map[string]int

	mu    sync.Mutex
	begun []string
	ended []string // "TEXT=STATUS"
}

func (r *recorder) Contain(argv, env []string) (string, []string, []string) { return r.bash, argv, env }
func (r *recorder) Started(pid int)                                         {}
func (r *recorder) Release()                                                {}
func (r *recorder) Follow() (bool, error)                                   { return false, nil }

func (r *recorder) Begin(l Line) Begun {
	r.mu.Lock()
	defer r.mu.Unlock()
	text := strings.TrimSpace(l.Text)
	r.begun = append(r.begun, text)
	if code, ok := r.skip[text]; ok {
		return Begun{Action: "skip", Code: code, End: func(int) {}}
	}
	return Begun{Action: "run", MustEnd: true, End: func(status int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ended = append(r.ended, text+"="+strconv.Itoa(status))
	}}
}

func realBash(t *testing.T) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	return bash
}

// pipe is os.Pipe, failing the test when it fails.
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return r, w
}

// check fails t unless the lines begun and those ended (TEXT=STATUS)
// are the ones wanted, in order.
func (r *recorder) check(t *testing.T, begun, ended []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Equal(r.begun, begun) {
		t.Errorf("begun %q, want %q", r.begun, begun)
	}
	if !slices.Equal(r.ended, ended) {
		t.Errorf("ended %q, want %q", r.ended, ended)
	}
}

// readAll reads r to its end in the background.
func readAll(r io.Reader) <-chan string {
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	return out
}

// TestPipe feeds a real bash one command at a time on a pipe: each
// command is handed to the Lines before it runs, a skipped one does not
// run, each run reports its end with its status, and the session ends
// with bash's exit status.
func TestPipe(t *testing.T) {
	t.Parallel()
	bash := realBash(t)
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, feed := pipe(t)         // bash's standard input, which only the session writes
	callerR, callerW := pipe(t) // the caller's commands, still coming
	defer callerR.Close()
	outR, outW := pipe(t)
	defer outR.Close()
	out := readAll(outR)
	if _, err := io.WriteString(callerW, "echo two\nfalse\necho skipped\nexit 3\n"); err != nil {
		t.Fatal(err)
	}
	callerW.Close()
	lines := &recorder{bash: bash, skip: map[string]int{"echo skipped": 5}}
	start := func(path string, argv, env []string, files []*os.File) (int, <-chan Status, error) {
		p, err := os.StartProcess(path, argv, &os.ProcAttr{Env: env, Files: files})
		if err != nil {
			return 0, nil, err
		}
		done := make(chan Status, 1)
		go func() {
			st, _ := p.Wait()
			done <- Status{Code: st.ExitCode()}
		}()
		return p.Pid, done, nil
	}
	st, err := s.Pipe(Options{Lines: lines, Argv: []string{"bash"}, Environ: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()},
		Files: []*os.File{nil, outW, outW}, Input: in, Feed: feed, First: "echo one\n", InputFd: int(callerR.Fd()), Start: start,
		Say: func(line string) { t.Errorf("the session said %q", line) }})
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != 3 {
		t.Errorf("status %d, want 3", st.Code)
	}
	if got := <-out; got != "one\ntwo\n" {
		t.Errorf("bash wrote %q, want %q", got, "one\ntwo\n")
	}
	wantBegun := []string{"echo one", "echo two", "false", "echo skipped", "exit 3"}
	wantEnded := []string{"echo one=0", "echo two=0", "false=1", "exit 3=3"}
	lines.check(t, wantBegun, wantEnded)
}

// TestInteractive runs a real interactive bash on a PTY, typed to from a
// pipe: its hooks hand each line to the Lines before it runs and report
// its end, and the session ends with bash's exit status.
func TestInteractive(t *testing.T) {
	t.Parallel()
	bash := realBash(t)
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	typed, typing := pipe(t)
	defer typed.Close()
	outR, outW := pipe(t)
	defer outR.Close()
	out := readAll(outR)
	if _, err := io.WriteString(typing, "echo hi\nfalse\necho skipped\nexit 4\n"); err != nil {
		t.Fatal(err)
	}
	typing.Close()
	lines := &recorder{bash: bash, skip: map[string]int{"echo skipped": 5}}
	home := t.TempDir()
	var stderr strings.Builder
	status, err := s.Interactive(Options{Lines: lines, Argv: []string{"bash", "--norc", "--noprofile", "-i"},
		Environ: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HISTFILE=/dev/null", "PS1=$ ", "TERM=dumb"},
		Stdin:   typed, Stdout: outW, Stderr: &stderr, Say: func(line string) { t.Errorf("the session said %q", line) }})
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := <-out
	if status != 4 {
		t.Errorf("status %d, want 4; the terminal showed:\n%s", status, got)
	}
	if !strings.Contains(got, "hi\r\n") {
		t.Errorf("the terminal does not show the output of echo hi:\n%s", got)
	}
	// The line typed is echoed; its output would be a line of its own.
	if strings.Contains(got, "\r\nskipped\r\n") {
		t.Errorf("a skipped line ran:\n%s", got)
	}
	wantBegun := []string{"echo hi", "false", "echo skipped", "exit 4"}
	wantEnded := []string{"echo hi=0", "false=1", "exit 4=4"}
	lines.check(t, wantBegun, wantEnded)
}
