package vmagent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/agent"
)

// Agent is the guest agent: the state it keeps across host sessions. Its
// zero value with StateDir set is ready to use.
type Agent struct {
	// StateDir is undosh's state directory, where a notify's WHO_YOU_ARE
	// is kept (host.json, see [agent.Apply]).
	StateDir string
	// Sys and Dev are where sysfs and the device files are mounted: /sys
	// and /dev when empty.
	Sys, Dev string
	// Log hears what goes wrong with nobody to tell: a session that ends
	// in an error, a relay that cannot reach its target. Nil discards it.
	Log *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{} // the relays' live connections, both ends
}

func (a *Agent) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

// waitDelay is how long an exec waits, once its command has exited, for
// the command's output pipes to close: a process it left running may hold
// them open for good.
const waitDelay = time.Second

// msgHungUp is logged when the host hangs up during an exec.
const msgHungUp = "the host hung up during an exec: its process group is killed"

// errGone is a reply to a host that hung up.
var errGone = errors.New("the host hung up")

// ServeSession handles requests from one host connection, one at a time
// and in order, until reading rw gives io.EOF (the host hung up; the
// result is then nil) or fails. An exec that runs when the host hangs up
// is killed, with its process group, and waited for before ServeSession
// returns.
func ServeSession(rw io.ReadWriter, a *Agent) error {
	r := newReader(rw, false)
	err := a.session(r.lines, rw)
	// The reader ends with the connection.
	for range r.lines {
	}
	if err != nil {
		return err
	}
	return r.err
}

// inLine is a line read from the host, or the end of its connection.
type inLine struct {
	b      []byte
	long   bool // longer than MaxLine, and dropped
	hungUp bool // the host hung up: no b
}

// reader reads lines from a host's stream into lines, which it closes
// when reading fails, with err set (nil at the end of a connection), done
// closed just before.
// On a device (the virtio-serial port) the end is not for good: it reads
// as at its end while no host is connected, and tells of no host that
// connects. There one reader serves one host after another, marking each
// end it reads after a line, and looks again every idle: no session
// ends by reading what the next host sends.
type reader struct {
	lines chan inLine
	done  chan struct{} // closed when the reader has ended, just before lines
	err   error         // set before done is closed
}

func newReader(r io.Reader, device bool) *reader {
	rd := &reader{lines: make(chan inLine), done: make(chan struct{})}
	go func() {
		// done first: a session that finds lines closed finds the
		// reader ended.
		defer close(rd.lines)
		defer close(rd.done)
		br := bufio.NewReader(r)
		read := false // a line since the last end
		for {
			b, long, err := readLine(br)
			switch {
			case err == nil:
				read = true
				rd.lines <- inLine{b: b, long: long}
			case !errors.Is(err, io.EOF):
				rd.err = fmt.Errorf("read from the host: %w", err)
				return
			case !device:
				return
			default:
				if read {
					read = false
					rd.lines <- inLine{hungUp: true}
				}
				time.Sleep(idle)
			}
		}
	}()
	return rd
}

// session handles the requests of one host from lines until it hangs up
// (an inLine that says so, or lines closed) or a reply cannot be written.
func (a *Agent) session(lines <-chan inLine, w io.Writer) error {
	s := &session{a: a, w: w, lines: lines}
	for !s.hungUp && s.werr() == nil {
		l, ok := s.next()
		if !ok {
			break
		}
		s.handle(l)
	}
	if err := s.werr(); err != nil && !errors.Is(err, errGone) {
		return err
	}
	return nil
}

type session struct {
	a       *Agent
	w       io.Writer
	lines   <-chan inLine
	pending []inLine // read while an exec ran, not handled yet
	hungUp  bool     // the host hung up

	gone   atomic.Bool // the host hung up: drop what is left to send
	wmu    sync.Mutex
	failed error // the first write's error, under wmu
}

// next is the next line to handle; false once the host hung up.
func (s *session) next() (inLine, bool) {
	if len(s.pending) > 0 {
		l := s.pending[0]
		s.pending = s.pending[1:]
		return l, true
	}
	l, ok := <-s.lines
	if !ok || l.hungUp {
		s.hungUp = true
		return l, false
	}
	return l, true
}

func (s *session) werr() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.failed
}

// send writes r as one line. Lines are written whole and one at a time:
// exec's two streams send from two goroutines.
func (s *session) send(r Reply) error {
	b, err := encodeLine(r)
	if err != nil {
		return fmt.Errorf("reply: %w", err)
	}
	if s.gone.Load() {
		return errGone
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if s.gone.Load() {
		return errGone
	}
	if _, err := s.w.Write(b); err != nil {
		s.failed = fmt.Errorf("write to the host: %w", err)
	}
	return s.failed
}

func (s *session) handle(l inLine) {
	if l.long {
		s.send(Reply{Error: fmt.Sprintf("a request longer than %d bytes: send less (exec's env and argv, notify's who)", MaxLine)})
		return
	}
	if blank(l.b) {
		return
	}
	req, err := parseRequest(l.b)
	if err != nil {
		s.send(Reply{ID: req.ID, Error: fmt.Sprintf("a request that does not decode: %v", err)})
		return
	}
	switch req.Op {
	case OpPing:
		s.send(Reply{ID: req.ID, Pong: true})
	case OpExec:
		s.exec(req)
	case OpNotify:
		s.notify(req)
	case OpReset:
		s.a.resetRelays()
		s.send(Reply{ID: req.ID, Done: true})
	default:
		s.send(Reply{ID: req.ID, Error: fmt.Sprintf("unknown op %q: this agent knows %s, %s, %s and %s", req.Op, OpPing, OpExec, OpNotify, OpReset)})
	}
}

// exec runs req's command and streams its output. Lines that come while
// it runs wait in pending, and the end of them (the host hung up) kills
// the command's process group.
func (s *session) exec(req Request) {
	if len(req.Argv) == 0 {
		s.send(Reply{ID: req.ID, Error: "exec without argv: name the command to run"})
		return
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Dir = req.Cwd
	if cmd.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.Env = append(cmd.Environ(), req.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = &stream{s, req.ID, StreamOut}
	cmd.Stderr = &stream{s, req.ID, StreamErr}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		s.send(Reply{ID: req.ID, Error: err.Error()})
		return
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			st := status(cmd.ProcessState)
			s.send(Reply{ID: req.ID, Exit: &st})
			return
		case l, ok := <-s.lines:
			if ok && !l.hungUp {
				s.pending = append(s.pending, l)
				continue
			}
			s.hungUp = true
			s.gone.Store(true)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			s.a.log().Info(msgHungUp, "argv0", req.Argv[0], "pgid", cmd.Process.Pid)
			<-done
			return
		}
	}
}

// status is a command's exit status, 128+n for death by signal n.
func status(ps *os.ProcessState) int {
	ws, _ := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// stream sends what an exec writes to one of its streams as it comes.
type stream struct {
	s      *session
	id     string
	stream string
}

func (w *stream) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := p[:min(len(p), Chunk)]
		if err := w.s.send(Reply{ID: w.id, Stream: w.stream, Data: c}); err != nil {
			return n, err
		}
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

// notify applies req's WHO_YOU_ARE. A VM told it is a copy or restored
// was loaded from a capture: its relayed connections are dead.
func (s *session) notify(req Request) {
	if len(req.Who) == 0 {
		s.send(Reply{ID: req.ID, Error: "notify without who: send the WHO_YOU_ARE"})
		return
	}
	if s.a.StateDir == "" {
		s.send(Reply{ID: req.ID, Error: "this agent has no state directory to keep it in: start it with one (undoctl agent --state DIR)"})
		return
	}
	var w hostlink.WhoYouAre
	if err := json.Unmarshal(req.Who, &w); err != nil {
		s.send(Reply{ID: req.ID, Error: fmt.Sprintf("notify: who: %v", err)})
		return
	}
	n, err := agent.Apply(s.a.StateDir, w)
	var re *agent.RefusedError
	switch {
	case errors.As(err, &re):
		s.send(Reply{ID: req.ID, Noted: &n, Error: err.Error()})
		return
	case err != nil:
		s.a.log().Warn("notify", "err", err)
		s.send(Reply{ID: req.ID, Error: err.Error()})
		return
	}
	if w.Role == hostlink.RoleCopy || w.Role == hostlink.RoleRestored {
		s.a.resetRelays()
	}
	s.send(Reply{ID: req.ID, Noted: &n})
}
