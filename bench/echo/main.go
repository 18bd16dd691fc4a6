// Command echo times keystrokes at an interactive prompt, side by side in
// one run: for each shell it starts a session on a new PTY and measures
//
//   - the echo round trip: from writing one printable byte to the PTY
//     master until readline's echo of it is read back, then the same for a
//     backspace (DEL, 0x7f) and the erase sequence it echoes, so that every
//     round starts at an empty prompt (only the printable byte is timed);
//   - the cost of a line: from writing "true\r" until the next prompt.
//
// Each round does one measurement per shell, in an order that rotates each
// round and is reversed every other cycle (as bench/sidebyside does), so
// that drift in the machine's load falls on all shells alike. It prints,
// per shell, the median with p25, p75 and min, in microseconds, then for
// every shell after the first its difference from the first: of the
// medians, and the median (p25, p75) of the per-round differences, and the
// ratio of the medians. A target applies to the difference of the medians
// of the echo round trip.
//
//	echo [flags] -shell NAME=PATH -shell NAME=PATH ...
//
// Flags:
//
//	-shell NAME=PATH  a shell to time (repeatable; the first is the baseline)
//	-rounds N         recorded echo rounds (default 300)
//	-warmup N         echo rounds and lines run first and not recorded (default 20)
//	-lines N          recorded lines (default 50)
//	-target D         the most the echo may add over the baseline (default 1ms)
//	-raw FILE         write every timing as CSV (what,round,position,name,us)
//
// Every shell is started as `PROG --norc --noprofile -i`; one not named
// bash (undosh) with UNDOSH_STATE_DIR in a temporary directory and
// UNDOSH_REAL_BASH=/bin/bash. Every session has TERM=xterm,
// a 24x80 window, HOME in an empty temporary directory (so no user rc
// runs) and a minimal environment. The prompt is set by typing
//
//	PS1='REA''DY> '
//
// whose echo cannot be mistaken for the prompt it sets. Every wait is for
// output, never a sleep.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	creackpty "github.com/creack/pty"

	"github.com/undosh/undosh/bench/internal/stats"
)

const (
	prompt        = "READY> "
	setPrompt     = "PS1='REA''DY> '\r"
	promptTimeout = 10 * time.Second
	// roundTimeout bounds every later wait, so that a shell that stops
	// echoing fails the run instead of hanging it.
	roundTimeout = 10 * time.Second
	del          = 0x7f
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

type options struct {
	shells []string
	rounds int
	warmup int
	lines  int
	target time.Duration
	raw    string
}

func main() {
	var o options
	var shells multi
	flag.Var(&shells, "shell", "NAME=PATH: a shell to time (repeatable; the first is the baseline)")
	flag.IntVar(&o.rounds, "rounds", 300, "recorded echo rounds")
	flag.IntVar(&o.warmup, "warmup", 20, "echo rounds and lines run first and not recorded")
	flag.IntVar(&o.lines, "lines", 50, "recorded lines (true, then the next prompt)")
	flag.DurationVar(&o.target, "target", time.Millisecond, "the most the echo round trip may add over the baseline, median")
	flag.StringVar(&o.raw, "raw", "", "write every timing to this CSV file")
	flag.Parse()
	o.shells = shells
	if len(o.shells) == 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: echo [-rounds N] [-warmup N] [-lines N] -shell NAME=PATH [-shell NAME=PATH ...]")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	tmp, err := os.MkdirTemp("", "undosh-bench-echo.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var sessions []*session
	defer func() {
		for _, s := range sessions {
			s.close()
		}
	}()
	names := map[string]bool{}
	for i, spec := range o.shells {
		name, path, ok := strings.Cut(spec, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("bad -shell %q: want NAME=PATH", spec)
		}
		if names[name] {
			return fmt.Errorf("two shells named %s", name)
		}
		names[name] = true
		s, err := start(name, path, filepath.Join(tmp, fmt.Sprint(i)))
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
		if err := s.ready(); err != nil {
			return err
		}
	}
	var raw *os.File
	if o.raw != "" {
		if raw, err = os.Create(o.raw); err != nil {
			return err
		}
		defer raw.Close()
		fmt.Fprintln(raw, "what,round,position,name,us")
	}

	fmt.Printf("%s, %d CPUs, load %s; %d echo rounds and %d lines after %d warm-up each, order rotated each round\n",
		time.Now().Format("2006-01-02 15:04"), runtime.NumCPU(), stats.Loadavg(), o.rounds, o.lines, o.warmup)
	for _, s := range sessions {
		fmt.Printf("  %-10s %s: %s; erase echo %q\n", s.name, strings.Join(s.argv, " "), s.processes(), s.erase)
	}

	for r := -o.warmup; r < o.rounds; r++ {
		for pos, s := range stats.Order(sessions, r+o.warmup) {
			d, err := s.key(byte('a' + (r+o.warmup)%26))
			if err != nil {
				return err
			}
			if r >= 0 {
				s.echoes = append(s.echoes, us(d))
				if raw != nil {
					fmt.Fprintf(raw, "echo,%d,%d,%s,%.1f\n", r, pos, s.name, us(d))
				}
			}
		}
	}
	for r := -o.warmup; r < o.lines; r++ {
		for pos, s := range stats.Order(sessions, r+o.warmup) {
			d, err := s.line("true\r")
			if err != nil {
				return err
			}
			if r >= 0 {
				s.lines = append(s.lines, us(d))
				if raw != nil {
					fmt.Fprintf(raw, "line,%d,%d,%s,%.1f\n", r, pos, s.name, us(d))
				}
			}
		}
	}
	fmt.Printf("load at the end %s\n", stats.Loadavg())
	for _, s := range sessions {
		if s.odd > 0 {
			fmt.Printf("  %s: %d waits saw output besides the echo, first: %q\n", s.name, s.odd, s.oddFirst)
		}
	}

	fmt.Println()
	report("echo round trip, µs", sessions, func(s *session) []float64 { return s.echoes }, o.target)
	fmt.Println()
	report("`true` to the next prompt, µs", sessions, func(s *session) []float64 { return s.lines }, 0)

	for _, s := range sessions {
		if err := s.exit(); err != nil {
			return err
		}
	}
	return nil
}

// report prints the quantiles of each shell, then each shell against the
// first. A target above zero applies to the difference of the medians.
func report(title string, sessions []*session, get func(*session) []float64, target time.Duration) {
	fmt.Printf("%-32s %9s %9s %9s %9s\n", title, "median", "p25", "p75", "min")
	for _, s := range sessions {
		v := get(s)
		fmt.Printf("%-32s %9.1f %9.1f %9.1f %9.1f\n", s.name,
			stats.Quantile(v, .5), stats.Quantile(v, .25), stats.Quantile(v, .75), stats.Quantile(v, 0))
	}
	if len(sessions) < 2 {
		return
	}
	base := sessions[0]
	fmt.Printf("%-32s %10s %16s %9s %9s %10s\n", "difference, µs", "of medians", "median of rounds", "p25", "p75", "ratio")
	for _, s := range sessions[1:] {
		a, b := get(s), get(base)
		per := make([]float64, len(a))
		for i := range per {
			per[i] = a[i] - b[i]
		}
		diff := stats.Quantile(a, .5) - stats.Quantile(b, .5)
		line := fmt.Sprintf("%-32s %10.1f %16.1f %9.1f %9.1f %10.3f", s.name+" - "+base.name,
			diff, stats.Quantile(per, .5), stats.Quantile(per, .25), stats.Quantile(per, .75), stats.Quantile(a, .5)/stats.Quantile(b, .5))
		if target > 0 {
			verdict := "met"
			if diff > us(target) {
				verdict = "MISSED"
			}
			line += fmt.Sprintf("   target <= %v: %s", target, verdict)
		}
		fmt.Println(line)
	}
}

// chunk is one read from a PTY master, stamped as soon as the read returned.
type chunk struct {
	b   []byte
	t   time.Time
	err error
}

// session is one shell on its own PTY. A reader goroutine does blocking
// reads of the master and sends every chunk on out; pending holds what
// has been read and not yet matched.
type session struct {
	name    string
	argv    []string
	cmd     *exec.Cmd
	exited  chan error // cmd.Wait's error, once the shell has ended
	ptmx    *os.File
	fd      int
	out     chan chunk
	pending []byte
	done    bool // the reader has seen the end of output
	erase   []byte

	echoes, lines []float64 // µs
	odd           int       // waits that saw more than what they waited for
	oddFirst      []byte
}

// start starts the shell at path on a new PTY, with dir as its home.
func start(name, path, dir string) (*session, error) {
	abs, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if abs, err = filepath.Abs(abs); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	home, state := filepath.Join(dir, "home"), filepath.Join(dir, "state")
	for _, d := range []string{home, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm"}
	// undosh passes its command line to the bash behind it, which then
	// reads no start-up file either.
	argv := []string{abs, "--norc", "--noprofile", "-i"}
	if !isBash(abs) {
		env = append(env, "UNDOSH_STATE_DIR="+state, "UNDOSH_REAL_BASH=/bin/bash")
	}
	cmd := &exec.Cmd{Path: abs, Args: argv, Env: env, Dir: home}
	ptmx, err := creackpty.StartWithSize(cmd, &creackpty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// Fd puts the master in blocking mode: the reader then wakes straight
	// from read(2) rather than through the netpoller, which takes less
	// time and less of it at random.
	s := &session{name: name, argv: argv, cmd: cmd, ptmx: ptmx, fd: int(ptmx.Fd()),
		out: make(chan chunk, 64), exited: make(chan error, 1)}
	go s.read()
	go func() { s.exited <- cmd.Wait() }()
	return s, nil
}

// isBash reports whether path is the real bash rather than a stand-in.
func isBash(path string) bool {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return filepath.Base(path) == "bash"
}

// read sends every chunk of output on s.out, then a chunk with the error
// that ended the output, and closes s.out.
func (s *session) read() {
	defer close(s.out)
	runtime.LockOSThread()
	for {
		buf := make([]byte, 4096)
		n, err := syscall.Read(s.fd, buf)
		t := time.Now()
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if n > 0 {
			s.out <- chunk{b: buf[:n], t: t}
		}
		if err != nil || n == 0 {
			// EIO: the last holder of the terminal end has gone.
			s.out <- chunk{t: t, err: err}
			return
		}
	}
}

// wait reads until pending holds want, drops pending up to the end of
// want, and returns when the chunk that completed it was read and what
// came before want.
func (s *session) wait(want []byte, timeout time.Duration) (time.Time, []byte, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if i := bytes.Index(s.pending, want); i >= 0 {
			before := slices.Clone(s.pending[:i])
			s.pending = s.pending[i+len(want):]
			return time.Time{}, before, nil
		}
		if s.done {
			return time.Time{}, nil, fmt.Errorf("the session ended waiting for %q; output: %q", want, s.pending)
		}
		select {
		case c := <-s.out:
			if c.err != nil || c.b == nil {
				s.done = true
				continue
			}
			s.pending = append(s.pending, c.b...)
			if i := bytes.Index(s.pending, want); i >= 0 {
				before := slices.Clone(s.pending[:i])
				s.pending = s.pending[i+len(want):]
				return c.t, before, nil
			}
		case <-deadline.C:
			return time.Time{}, nil, fmt.Errorf("nothing matched %q within %v; output: %q", want, timeout, s.pending)
		}
	}
}

func (s *session) write(b []byte) (time.Time, error) {
	t := time.Now()
	if _, err := s.ptmx.Write(b); err != nil {
		return t, fmt.Errorf("%s: write: %w", s.name, err)
	}
	return t, nil
}

// expect writes b and waits for want; it returns the time from the
// write to the read that completed want, and the output before want.
// Output left over from before the write counts as odd.
func (s *session) expect(b, want []byte) (time.Duration, []byte, error) {
	if len(s.pending) > 0 {
		s.noteOdd(s.pending)
		s.pending = nil
	}
	t0, err := s.write(b)
	if err != nil {
		return 0, nil, err
	}
	t1, before, err := s.wait(want, roundTimeout)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return t1.Sub(t0), before, nil
}

// echo is expect for a key whose echo must be want and nothing else:
// output before want counts as odd.
func (s *session) echo(b, want []byte) (time.Duration, error) {
	d, before, err := s.expect(b, want)
	if len(before) > 0 {
		s.noteOdd(before)
	}
	return d, err
}

func (s *session) noteOdd(b []byte) {
	if s.odd == 0 {
		s.oddFirst = slices.Clone(b)
	}
	s.odd++
}

// ready sets the prompt, waits for it, checks that an empty line gives it
// back once, and learns the erase sequence that readline echoes for DEL.
func (s *session) ready() error {
	if _, err := s.write([]byte(setPrompt)); err != nil {
		return err
	}
	if _, _, err := s.wait([]byte(prompt), promptTimeout); err != nil {
		return fmt.Errorf("%s: no prompt: %w", s.name, err)
	}
	// Output before the first timed round is not odd: drop it.
	s.pending = nil
	if _, err := s.write([]byte("\r")); err != nil {
		return err
	}
	if _, _, err := s.wait([]byte(prompt), promptTimeout); err != nil {
		return fmt.Errorf("%s: no prompt after an empty line: %w", s.name, err)
	}
	if _, err := s.echo([]byte("x"), []byte("x")); err != nil {
		return err
	}
	// The erase echo is what comes between DEL and the echo of the next
	// key; the next key is typed only once the erase has begun to show, so
	// that readline cannot fold the two into one redisplay.
	if _, err := s.write([]byte{del}); err != nil {
		return err
	}
	c, err := s.next(promptTimeout)
	if err != nil {
		return err
	}
	s.pending = append(s.pending, c.b...)
	if _, err := s.write([]byte("y")); err != nil {
		return err
	}
	_, before, err := s.wait([]byte("y"), promptTimeout)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if len(before) == 0 || bytes.IndexByte(before, 'x') >= 0 {
		return fmt.Errorf("%s: unexpected erase echo %q", s.name, before)
	}
	s.erase = before
	if _, err := s.echo([]byte{del}, s.erase); err != nil {
		return err
	}
	s.odd, s.oddFirst = 0, nil
	return nil
}

// next returns the next chunk of output.
func (s *session) next(timeout time.Duration) (chunk, error) {
	select {
	case c := <-s.out:
		if c.err != nil || c.b == nil {
			s.done = true
			return c, fmt.Errorf("%s: the session ended (%v); output: %q", s.name, c.err, s.pending)
		}
		return c, nil
	case <-time.After(timeout):
		return chunk{}, fmt.Errorf("%s: no output within %v", s.name, timeout)
	}
}

// key types k at an empty prompt and times its echo, then erases it and
// waits for the erase echo, untimed.
func (s *session) key(k byte) (time.Duration, error) {
	d, err := s.echo([]byte{k}, []byte{k})
	if err != nil {
		return 0, err
	}
	if _, err := s.echo([]byte{del}, s.erase); err != nil {
		return 0, err
	}
	return d, nil
}

// line types line at an empty prompt and times it until the next prompt.
func (s *session) line(line string) (time.Duration, error) {
	d, _, err := s.expect([]byte(line), []byte(prompt))
	return d, err
}

// exit ends the session with the exit builtin and checks its status.
func (s *session) exit() error {
	if _, err := s.write([]byte("exit\r")); err != nil {
		return err
	}
	// Keep reading, so that the shell never blocks on a full PTY.
	go func() {
		for range s.out {
		}
	}()
	select {
	case err := <-s.exited:
		s.exited = nil
		if err != nil {
			return fmt.Errorf("%s: exit: %w", s.name, err)
		}
		return nil
	case <-time.After(promptTimeout):
		return fmt.Errorf("%s: still running %v after exit", s.name, promptTimeout)
	}
}

// close kills the shell if it still runs and closes the master.
func (s *session) close() {
	if s.exited != nil {
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.ptmx.Close()
}

// processes says what the started process runs now and how many
// children it has: a shell that execs bash shows bash and no child, a
// proxy itself and one child, so that a run shows which it timed.
func (s *session) processes() string {
	pid := s.cmd.Process.Pid
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		exe = "?"
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err == nil {
			n += len(strings.Fields(string(b)))
		}
	}
	children := "children"
	if n == 1 {
		children = "child"
	}
	return fmt.Sprintf("pid %d runs %s, %d %s", pid, exe, n, children)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
