package session

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"

	"github.com/undosh/undosh/internal/shquote"
)

// fedHooks are written to the fed shell's input before anything else: the
// functions that report to undosh between commands (docs/interactive.md,
// "Sessions on a pipe"). They keep $? and $_ as the command before left
// them; the braces and 2>/dev/null keep them out of an xtrace.
const fedHooks = `__undosh_pre() {
	local s=$? n a id=p$BASHPID
	{
		builtin printf 'begin\0%s\0%s\0%s\0\0\0\0\0\0\0' "$id" "$s" "$PWD"
		builtin export -p
		builtin printf '\0'
	} >"$__undosh_dir/req"
	while IFS= builtin read -r -d '' n && IFS= builtin read -r -d '' a; do
		[[ $n == "$id" ]] && break
	done <"$__undosh_dir/rep"
	case $a in ret:*) return "${a#ret:}" ;; esac
	return $s
}
__undosh_end() {
	local s=$? n a o
	builtin printf 'end\0e\0%s\0' "$s" >"$__undosh_dir/req"
	while IFS= builtin read -r -d '' n && IFS= builtin read -r -d '' a; do
		[[ $n == e ]] && break
	done <"$__undosh_dir/rep"
	if [[ $a == cd ]]; then
		o=${OLDPWD-}
		builtin cd -- "$PWD" 2>/dev/null
		OLDPWD=$o
	fi
	return $s
}
`

const (
	preHook = "{ __undosh_pre \"$_\"; } 2>/dev/null\n"
	endHook = "{ __undosh_end \"$_\"; } 2>/dev/null\n"
)

// incompleteWait is how long an incomplete command may wait for the rest
// of its lines before undosh hands it to the shell as it is: the shell's
// parser and undosh's may disagree on where a command ends, and the
// harness waits for output.
const incompleteWait = time.Second

// Pipe runs a session fed one command at a time on a pipe (as agent
// harnesses drive bash): the shell reads its commands from the session,
// which hands it each command only once o.Lines have begun it, and ends
// it when it ran. It reads the caller's input (o.First, then o.InputFd)
// as it comes and never waits for its end. It returns how bash ended, or
// an error when it could not be started.
func (s *Session) Pipe(o Options) (Status, error) {
	s.o = o
	s.files = o.Files
	msgs := s.messages()

	// The shell reads a pipe that only the session writes.
	in, feed := o.Input, o.Feed
	defer feed.Close()
	files := append([]*os.File(nil), o.Files...)
	files[0] = in
	path, argv, env := o.Lines.Contain(o.Argv, o.Environ)
	defer o.Lines.Release()
	pid, done, err := o.Start(path, argv, env, files)
	in.Close()
	if err != nil {
		return Status{}, err
	}
	o.Lines.Started(pid)
	f := &feeder{s: s, feed: feed}
	f.write("__undosh_dir=" + shquote.Word(s.dir) + "\n" + fedHooks)
	f.buf.WriteString(o.First)
	input := readInput(o.InputFd)
	var timer <-chan time.Time
	for {
		f.next()
		if f.waiting {
			timer = nil
		} else if f.buf.Len() > 0 && f.eof {
			f.partial()
			continue
		} else if f.buf.Len() > 0 && timer == nil {
			timer = time.After(incompleteWait)
		}
		if f.eof && f.buf.Len() == 0 && !f.waiting && !f.closed {
			feed.Close()
			f.closed = true
		}
		select {
		case data, ok := <-input:
			if !ok {
				f.eof, input = true, nil
				continue
			}
			f.buf.Write(data)
			timer = nil
		case <-timer:
			timer = nil
			if !f.waiting {
				f.partial()
			}
		case m := <-msgs:
			f.handle(m)
		case st := <-done:
			// The shell is gone (exit, the end of its input, a signal):
			// the command it ran last ends with its status.
			s.endLine(st.Code)
			return st, nil
		}
	}
}

// feeder hands the shell one command at a time.
type feeder struct {
	s       *Session
	feed    *os.File
	buf     strings.Builder // what came that the shell has not been given
	waiting bool            // a command was announced; its begin is due
	pending string          // the command announced
	eof     bool            // the caller's input has ended
	closed  bool            // the shell's input is closed
}

func (f *feeder) write(s string) {
	_, _ = io.WriteString(f.feed, s) // Best effort: a shell that is gone is seen by its exit.
}

// next announces the next complete command, if one has come whole and no
// other is being announced: the shell runs the pre hook, which reports and
// waits for undosh's answer.
func (f *feeder) next() {
	if f.waiting {
		return
	}
	if cmd, ok := completeCommand(f.buf.String()); ok {
		f.take(cmd)
	}
}

// partial announces what came as a command of its own, complete or not.
func (f *feeder) partial() {
	f.take(f.buf.String())
}

func (f *feeder) take(cmd string) {
	rest := strings.TrimPrefix(f.buf.String(), cmd)
	f.buf.Reset()
	f.buf.WriteString(rest)
	f.pending, f.waiting = cmd, true
	f.write(preHook)
}

// handle answers a message from the hooks.
func (f *feeder) handle(m message) {
	s := f.s
	switch m.kind {
	case "end":
		s.endLine(m.status)
		// In a view, the next line runs where this one left the shell.
		a := "ok"
		if s.followCwd() != "" {
			a = "cd"
		}
		s.reply("e", a)
	case "begin":
		if !f.waiting {
			s.reply(m.id, "ret:"+strconv.Itoa(m.status))
			return
		}
		f.waiting = false
		s.mu.Lock()
		s.finishLocked(m.status)
		cur := &line{}
		s.cur = cur
		action, code := s.begin(cur, f.pending, "", m.begin)
		if action == "skip" {
			s.cur = nil
			s.mu.Unlock()
			s.reply(m.id, "ret:"+strconv.Itoa(code))
			return
		}
		git := cur.mustEnd // the line's end must be reported
		if !git {
			s.cur = nil
		}
		s.mu.Unlock()
		cmd := f.pending
		if !strings.HasSuffix(cmd, "\n") {
			cmd += "\n"
		}
		if git {
			cmd += endHook
		}
		f.write(cmd)
		s.reply(m.id, "run")
	}
}

// completeCommand returns the shortest run of whole lines at the start of
// text that makes complete commands, as undosh's parser reads them.
func completeCommand(text string) (string, bool) {
	end := 0
	for {
		i := strings.IndexByte(text[end:], '\n')
		if i < 0 {
			return "", false
		}
		end += i + 1
		f, err := parse(text[:end])
		if err != nil && syntax.IsIncomplete(err) {
			continue
		}
		if err == nil && strings.HasSuffix(text[:end], "\\\n") {
			// The parser takes a backslash-newline at the end for the end
			// of the text, bash for a line that goes on: it does when a
			// word after it joins the last command.
			if g, err := parse(text[:end] + "__undosh_next\n"); err == nil && len(g.Stmts) == len(f.Stmts) {
				continue
			}
		}
		return text[:end], true
	}
}

func parse(text string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(text), "")
}

// readInput reads fd as it comes, a chunk at a time, until its end.
func readInput(fd int) <-chan []byte {
	out := make(chan []byte)
	go func() {
		defer close(out)
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EAGAIN) {
				unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
				continue
			}
			if err != nil || n == 0 {
				return
			}
			out <- append([]byte(nil), buf[:n]...)
		}
	}()
	return out
}
