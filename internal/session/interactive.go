package session

import (
	"context"
	"strconv"
	"strings"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/pty"
)

// Interactive runs an interactive session: the real bash (o.Argv, as
// o.Lines contain it) on a PTY, with hooks that hand each command line to
// o.Lines before any of it runs, and its exit status after. It returns
// bash's status, and an error when bash could not be run.
func (s *Session) Interactive(o Options) (int, error) {
	s.o = o
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serve()
	}()
	path, argv, env := o.Lines.Contain(o.Argv, s.env(o.Environ))
	defer o.Lines.Release()
	status, err := pty.Run(context.Background(), pty.Options{
		Path:   path,
		Argv:   argv,
		Env:    env,
		Stdin:  o.Stdin,
		Stdout: o.Stdout,
		Started: func(c *pty.Control) {
			s.ctl = c
			o.Lines.Started(c.PID())
			close(s.ready)
		},
	})
	if err != nil && status == 0 {
		return 0, err // serve waits for a bash that never started: Close ends it
	}
	s.req.Close() // ends serve
	<-served
	// A line that changed files and ended the session (`rm f; exit 1`)
	// gets the session's status. Its terminal is gone: its note goes to
	// undosh's own standard error, where the caller sees it.
	s.notes.end(o.Stderr)
	s.endLine(status)
	return status, nil
}

// serve answers an interactive bash's hooks until req is closed.
func (s *Session) serve() {
	<-s.ready
	d := newDecoder(s.req)
	for {
		m, err := d.next()
		if err != nil {
			return
		}
		switch m.kind {
		case "hello":
			s.histNum = m.hist
		case "begin":
			s.reply(m.id, s.beginInteractive(m.status, m.begin))
		case "end":
			action := "ok"
			if n := s.endLine(m.status); n > 0 {
				action = "forget:" + strconv.Itoa(n)
				// The entries after it move up: the next line takes its
				// number.
				s.mu.Lock()
				s.histNum = n - 1
				s.mu.Unlock()
			}
			s.reply(m.id, s.followCwd()+action)
		}
	}
}

// beginInteractive reads a line from the history entry m carries, then
// protects it as [session.begin] does. prev is the status of the line
// before. It returns "run" when bash should run the line, "end" when it
// should and report its end too, and "skip" when it must not (refused,
// or run in a copy of the machine).
func (s *Session) beginInteractive(prev int, m beginMsg) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		// The line before never reported its end (PROMPT_COMMAND was
		// replaced): its status is the one this line starts with.
		s.finishLocked(prev)
	}
	num, text := parseHistoryEntry(m.entry)
	hc := ":" + m.histControl + ":"
	space := strings.Contains(hc, ":ignorespace:") || strings.Contains(hc, ":ignoreboth:")
	dups := strings.Contains(hc, ":ignoredups:") || strings.Contains(hc, ":ignoreboth:")
	// Before the hooks are installed, a setting may have kept the line
	// out of history; `history 1` then shows the line before.
	hiding := space || dups || m.histIgnore != "" || !m.history || m.histSize == "0"
	unseen := ""
	if text == "" || !m.history || !m.forced && (num == s.histNum || s.histNum < 0) && hiding {
		text, unseen = "", "the line is not in the shell's history (set +o history, or before undosh's hooks were in place HISTCONTROL, HISTIGNORE or HISTSIZE=0), so undosh cannot read it"
	}
	cur := &line{}
	if m.forced && unseen == "" && num != s.histNum {
		// The line reached history because undosh kept the user's
		// settings out of the way: it applies them now.
		switch {
		case m.histSize == "0", space && strings.HasPrefix(text, " "),
			dups && text == s.lastKept, histIgnored(m.histIgnore, text, s.lastKept):
			cur.forget = num
		default:
			s.lastKept = text
		}
	}
	s.histNum = num
	s.cur = cur
	action, _ := s.begin(cur, text, unseen, m)
	// bash ends the line of the last note when it drops a line, unless
	// it was interrupted already (its hook is gone), and ended it first.
	s.notes.settle((action == "skip" || strings.HasPrefix(action, "exit:")) && procs.Alive(m.pid))
	if action == "run" && (cur.mustEnd || cur.forget > 0) {
		return "end" // the line's end must be reported
	}
	if action == "run" {
		s.cur = nil
	}
	return action
}
