package pty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	creackpty "github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Options says what [Run] runs and which terminal it relays. Path is the
// only required field.
type Options struct {
	Path string   // the program to run, for example "/bin/bash"
	Argv []string // its argv, argv[0] included; empty means []string{Path}
	Env  []string // its environment; nil means the caller's, as in [exec.Cmd]
	Dir  string   // its working directory; empty means the caller's

	// Stdin is relayed to the program. When it is a terminal it is put in
	// raw mode for as long as Run runs. Nil relays no input. At end of
	// input Run types the PTY's end-of-file character (Ctrl-D) once.
	// Run reads it through its descriptor, which [os.File.Fd] leaves in
	// blocking mode.
	Stdin *os.File
	// Stdout receives everything the program writes to the PTY, its
	// standard error included. Nil discards it.
	Stdout *os.File
	// Logger receives debug records. Nil discards them. It must not write
	// to Stdin's terminal, which is raw.
	Logger *slog.Logger
	// Started, when set, is called once the program runs, with the
	// session's [Control]; it may keep it until Run returns.
	Started func(*Control)
}

// Control is what a caller may do with a session while [Run] relays it.
type Control struct {
	tty   string
	ptmx  *os.File
	relay *outputRelay
	pid   int
}

// PID is the process id of the program.
func (c *Control) PID() int { return c.pid }

// TTY is the path of the PTY's terminal end (/dev/pts/N), for a program
// that should write to the session's screen or read its keyboard without
// being part of the session. Open it with O_NOCTTY, and close it soon: the
// end of the session is seen when every holder has closed it.
func (c *Control) TTY() string { return c.tty }

// AtLineStart waits until everything the program has written so far has
// been relayed, for at most max, and reports whether the cursor is on a
// line the output left empty (after a newline, or before any output;
// escape sequences and carriage returns do not count), so that a note
// written next would start on a line of its own.
func (c *Control) AtLineStart(max time.Duration) bool {
	deadline := time.Now().Add(max)
	// The relay may have read a chunk and not yet marked itself busy: the
	// state counts as settled when it is idle twice in a row, a little
	// apart, with no chunk written in between.
	settled := -1
	for {
		queued := 0
		_ = control(c.ptmx, func(fd int) error {
			var err error
			queued, err = unix.IoctlGetInt(fd, unix.TIOCINQ)
			return err
		})
		c.relay.mu.Lock()
		idle, empty, chunks := !c.relay.busy, c.relay.line.empty(), c.relay.chunks
		c.relay.mu.Unlock()
		switch {
		case queued != 0 || !idle:
			settled = -1
		case settled == chunks:
			return empty
		default:
			settled = chunks
		}
		if time.Now().After(deadline) {
			return empty
		}
		time.Sleep(time.Millisecond)
	}
}

const (
	// drainGrace bounds how long Run keeps relaying output after the program
	// has exited, for when a background job still holds the PTY open.
	drainGrace = 200 * time.Millisecond
	// killGrace is how long a program has to exit after a hangup before Run
	// kills it.
	killGrace = 5 * time.Second
)

// eofChar is Ctrl-D, the default VEOF of a new PTY.
const eofChar = 0x04

// Run starts opts.Path on a new PTY as the session leader, relays Stdin and
// Stdout to it until it exits, and returns its exit status: the status it
// exited with, or 128+n when signal n killed it.
//
// Signals that reach the caller while Run runs: SIGWINCH copies Stdin's new
// window size to the PTY; SIGINT and SIGQUIT go to the PTY's foreground
// process group, as the keystrokes would; SIGTERM and SIGHUP restore the
// terminal at once and hang up the program (SIGHUP, then SIGKILL if it is
// still alive after a few seconds). Cancelling ctx hangs up the program
// the same way. Signals that arrive once the program has exited are
// dropped: its status is returned all the same.
//
// When the program could not be started, err says why and status is 0.
// Once it has run, status is its exit status even if err is not nil; err
// then reports a failure to relay input or output.
func Run(ctx context.Context, opts Options) (status int, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Path == "" {
		return 0, errors.New("run on pty: no program")
	}
	argv := opts.Argv
	if len(argv) == 0 {
		argv = []string{opts.Path}
	}
	term := terminalOf(opts.Stdin)

	ptmx, tty, err := creackpty.Open()
	if err != nil {
		return 0, fmt.Errorf("open pty: %w", err)
	}
	defer func() { _ = ptmx.Close() }() // Best effort: also closed below once output is drained.
	ttyOpen := true
	defer func() {
		if ttyOpen {
			_ = tty.Close() // Best effort.
		}
	}()

	if term != nil {
		// Size the PTY before the program starts, so that its first look
		// at the window is right. Go through the tty: Fd on ptmx would
		// make it blocking, and Close could then no longer interrupt a read.
		if ws, err := term.size(); err != nil {
			log.Debug("initial window size", "err", err)
		} else if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, ws); err != nil {
			log.Debug("initial window size", "err", err)
		}
	}

	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGWINCH, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(sigc)

	restore := func() {}
	if term != nil {
		if err := term.makeRaw(); err != nil {
			return 0, err
		}
		restore = sync.OnceFunc(func() {
			if err := term.restore(); err != nil {
				log.Debug("restore terminal", "err", err)
			}
		})
		// A deferred call runs on return and on panic alike.
		defer restore()
	}

	cmd := &exec.Cmd{
		Path:   opts.Path,
		Args:   argv,
		Env:    opts.Env,
		Dir:    opts.Dir,
		Stdin:  tty,
		Stdout: tty,
		Stderr: tty,
		// A new session whose controlling terminal is the PTY (the child's
		// fd 0): the line discipline then sends the interactive signals to
		// the program's foreground job, and bash can do job control.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true},
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", opts.Path, err)
	}
	// Only the program may hold the PTY's other end, so that its exit
	// shows up as EIO on ptmx.
	ttyOpen = false
	_ = tty.Close() // Best effort.
	log.Debug("started", "path", opts.Path, "pid", cmd.Process.Pid)

	relay := &outputRelay{}
	outDone := make(chan error, 1)
	go func() { outDone <- relay.run(opts.Stdout, ptmx) }()
	if opts.Started != nil {
		opts.Started(&Control{tty: tty.Name(), ptmx: ptmx, relay: relay, pid: cmd.Process.Pid})
	}

	var in *inputRelay
	if opts.Stdin != nil {
		in, err = startInput(opts.Stdin, ptmx)
		if err != nil {
			log.Debug("relay input", "err", err)
		}
	}

	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var killTimer *time.Timer
	hangup := func() {
		if killTimer != nil {
			return
		}
		log.Debug("hang up", "pid", cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGHUP) // Best effort: it may have exited.
		killTimer = time.AfterFunc(killGrace, func() {
			_ = cmd.Process.Kill() // Best effort.
		})
	}
	done := ctx.Done()
	var waitErr error
wait:
	for {
		select {
		case sig := <-sigc:
			switch sig {
			case syscall.SIGWINCH:
				if term != nil {
					if err := resize(term, ptmx); err != nil {
						log.Debug("resize", "err", err)
					}
				}
			case syscall.SIGINT, syscall.SIGQUIT:
				if err := signalForeground(ptmx, sig.(syscall.Signal)); err != nil {
					log.Debug("forward signal", "signal", sig, "err", err)
				}
			case syscall.SIGTERM, syscall.SIGHUP:
				restore()
				hangup()
			}
		case <-done:
			done = nil
			hangup()
		case waitErr = <-waitDone:
			break wait
		}
	}
	if killTimer != nil {
		killTimer.Stop()
	}

	var errs []error
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		errs = append(errs, fmt.Errorf("wait for %s: %w", opts.Path, waitErr))
	}
	status = exitStatus(cmd.ProcessState)
	log.Debug("exited", "status", status)

	// The program's last output is already in the PTY; read it, unless a
	// background job keeps the PTY open, in which case stop soon after.
	var outErr error
	select {
	case outErr = <-outDone:
	case <-time.After(drainGrace):
		_ = ptmx.Close() // Best effort: this ends the blocked read.
		outErr = <-outDone
	}
	restore()
	if outErr != nil {
		errs = append(errs, outErr)
	}
	_ = ptmx.Close() // Best effort: ends a write to the PTY that blocks.
	if in != nil {
		if err := in.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return status, errors.Join(errs...)
}

// exitStatus is bash's convention: the exit status, or 128+n for death by
// signal n.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// resize copies the terminal's window size to the PTY; the kernel then
// sends SIGWINCH to the PTY's foreground job.
func resize(term *terminal, ptmx *os.File) error {
	ws, err := term.size()
	if err != nil {
		return err
	}
	return control(ptmx, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws)
	})
}

// signalForeground sends sig to the PTY's foreground process group, as the
// line discipline would for the matching keystroke.
func signalForeground(ptmx *os.File, sig syscall.Signal) error {
	return control(ptmx, func(fd int) error {
		pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		if err != nil {
			return fmt.Errorf("get foreground process group: %w", err)
		}
		return unix.Kill(-pgrp, sig)
	})
}

// control runs fn on f's descriptor without making f blocking, as Fd would.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := rc.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}

// outputRelay copies the PTY's output to the caller, and keeps what
// [Control.AtLineStart] needs: whether a chunk read is still being written,
// and the state of the line the output ends on.
type outputRelay struct {
	mu     sync.Mutex
	busy   bool
	line   lineState
	chunks int // chunks written so far
}

// lineState follows whether the cursor's line holds any text, skipping
// escape sequences (CSI, OSC and two-byte ones) and control characters.
type lineState struct {
	text bool // something printable since the last newline
	esc  int  // where in an escape sequence the last byte left off
}

const (
	escNone = iota
	escStart
	escCSI
	escOSC
	escOSCEnd // an ESC inside an OSC, which may start its terminator
)

func (l *lineState) empty() bool { return !l.text }

func (l *lineState) write(p []byte) {
	for _, c := range p {
		switch l.esc {
		case escStart:
			switch c {
			case '[':
				l.esc = escCSI
			case ']':
				l.esc = escOSC
			default:
				l.esc = escNone
			}
		case escCSI:
			if c >= 0x40 && c <= 0x7e {
				l.esc = escNone
			}
		case escOSC:
			switch c {
			case 0x07:
				l.esc = escNone
			case 0x1b:
				l.esc = escOSCEnd
			}
		case escOSCEnd:
			l.esc = escOSC
			if c == '\\' {
				l.esc = escNone
			}
		default:
			switch {
			case c == '\n':
				l.text = false
			case c == 0x1b:
				l.esc = escStart
			case c >= 0x20 && c != 0x7f:
				l.text = true
			}
		}
	}
}

// run copies the PTY's output to dst until the PTY reports EIO (every
// holder of its other end has gone) or is closed. After a write to dst
// fails, the output is still read, and dropped, so that the program never
// blocks on a full PTY; the first such error is returned.
func (o *outputRelay) run(dst io.Writer, ptmx *os.File) error {
	if dst == nil {
		dst = io.Discard
	}
	var werr error
	buf := make([]byte, 32*1024)
	for {
		n, err := ptmx.Read(buf)
		if n > 0 {
			o.mu.Lock()
			o.busy = true
			o.mu.Unlock()
			if werr == nil {
				if _, err := dst.Write(buf[:n]); err != nil {
					werr = fmt.Errorf("write output: %w", err)
				}
			}
			o.mu.Lock()
			o.busy = false
			o.line.write(buf[:n])
			o.chunks++
			o.mu.Unlock()
		}
		switch {
		case err == nil:
		case errors.Is(err, syscall.EIO), errors.Is(err, io.EOF), errors.Is(err, os.ErrClosed):
			return werr
		default:
			return errors.Join(werr, fmt.Errorf("read pty: %w", err))
		}
	}
}

// inputRelay copies the caller's input to the PTY. It polls a pipe beside
// the input, so that stop ends it at once: a relay blocked in read would
// otherwise swallow the next keystroke meant for whoever reads the terminal
// after Run.
type inputRelay struct {
	wakeR, wakeW int
	done         chan error
}

func startInput(src, ptmx *os.File) (*inputRelay, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	in := &inputRelay{wakeR: p[0], wakeW: p[1], done: make(chan error, 1)}
	fd := int(src.Fd())
	go func() { in.done <- in.run(fd, ptmx) }()
	return in, nil
}

func (in *inputRelay) run(fd int, ptmx *os.File) error {
	fds := []unix.PollFd{
		{Fd: int32(fd), Events: unix.POLLIN},
		{Fd: int32(in.wakeR), Events: unix.POLLIN},
	}
	buf := make([]byte, 32*1024)
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("poll input: %w", err)
		}
		if fds[1].Revents != 0 {
			return nil
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if n > 0 {
			if _, err := ptmx.Write(buf[:n]); err != nil {
				if errors.Is(err, os.ErrClosed) {
					return nil
				}
				return fmt.Errorf("write pty: %w", err)
			}
			continue
		}
		// End of input, or a terminal that hung up (EIO): tell the
		// program, once, the way a user would.
		if _, werr := ptmx.Write([]byte{eofChar}); werr != nil && !errors.Is(werr, os.ErrClosed) {
			return fmt.Errorf("write pty: %w", werr)
		}
		if err != nil && !errors.Is(err, unix.EIO) {
			return fmt.Errorf("read input: %w", err)
		}
		return nil
	}
}

// stop ends the relay and waits for it.
func (in *inputRelay) stop() error {
	_ = unix.Close(in.wakeW) // Best effort: poll sees the hangup.
	err := <-in.done
	_ = unix.Close(in.wakeR) // Best effort.
	return err
}
