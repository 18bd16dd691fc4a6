package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/session"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// interactive runs an interactive session (package session): the real
// bash on a PTY, each line protected as a step of its own before any of
// it runs. docs/interactive.md describes the design.
func (r *run) interactive() int {
	p := r.proc
	s, err := session.New(r.stateDir)
	if err != nil {
		p.errorf(fmt.Errorf("start an interactive session: %w", err), "check the state directory "+r.stateDir+"; the session runs unprotected")
		return p.exec(r.real, r.src)
	}
	defer s.Close()
	status, err := s.Interactive(session.Options{Lines: r.sessionLines(), Argv: p.Argv, Environ: p.Environ,
		Stdin: p.Stdin, Stdout: os.Stdout, Stderr: p.Stderr, Say: p.say})
	if err != nil {
		p.errorf(err, "check UNDOSH_REAL_BASH and "+ConfigFile)
		return exit.Failure
	}
	return status
}

// protectPipe runs a session fed one command at a time on a pipe (as agent
// harnesses drive bash; package session): the shell reads its commands
// from undosh, which hands it each command only once it has been
// classified and protected, and rolls back a command that fails. undosh
// reads the caller's input as it comes and never waits for its end.
func (r *run) protectPipe() int {
	p := r.proc
	s, err := session.New(r.stateDir)
	if err != nil {
		p.errorf(fmt.Errorf("start a session on standard input: %w", err), "check the state directory "+r.stateDir)
		return exit.Usage
	}
	defer s.Close()
	st, err := s.Pipe(session.Options{Lines: r.sessionLines(), Argv: p.Argv, Environ: p.Environ, Stderr: p.Stderr, Say: p.say,
		Files: p.Files, Input: r.src.stdin, Feed: r.src.feed, First: r.src.text, InputFd: 0, Start: r.startSessionShell})
	if err != nil {
		p.errorf(fmt.Errorf("run %s: %w", r.real, err), "check UNDOSH_REAL_BASH and "+ConfigFile)
		return exit.NotRun
	}
	// undosh ends as the shell ended.
	if st.Sig != 0 {
		p.DieBy(st.Sig)
	}
	return st.Code
}

// startSessionShell starts a session's bash as undosh's child, which
// gets every signal undosh gets.
func (r *run) startSessionShell(path string, argv, env []string, files []*os.File) (int, <-chan session.Status, error) {
	c, err := startChild(path, argv, env, files, r.proc.Ignored)
	if err != nil {
		return 0, nil, err
	}
	done := make(chan session.Status, 1)
	go func() {
		st := <-c.done
		done <- session.Status{Code: st.code, Sig: st.sig}
	}()
	return c.p.Pid, done, nil
}

// sessionLines protect the lines of one session ([session.Lines]): each
// line is a step of its own, of the session's run r.
type sessionLines struct {
	r *run
	// view is the view of the machine the session's bash runs in, or nil
	// (sessionView).
	view *sessionView
	// parsed keeps the parse of large sources the session's lines read
	// (a sourced rc file or snapshot).
	parsed     *parser.Cache
	comm       string // undosh's process name between lines
	saidUnseen bool
}

func (r *run) sessionLines() *sessionLines {
	comm, _ := os.ReadFile("/proc/self/comm")
	return &sessionLines{r: r, parsed: parser.NewCache(16), comm: strings.TrimSpace(string(comm))}
}

// line is a command line between its begin and its end.
type line struct {
	git   *gitStep
	run   *run
	start time.Time
	// action and code are how it began (see [sessionLines.begin]).
	action string
	code   int
}

// Started records the session's bash, once it runs.
func (l *sessionLines) Started(pid int) { l.view.started(pid) }

// Release discards the session's view, once the session is over.
func (l *sessionLines) Release() { l.view.release() }

// Follow shares the workspace the shell is in now with its view, once a
// line has ended, and reports whether the shell must enter its directory
// again.
func (l *sessionLines) Follow() (bool, error) { return l.view.follow(l.r.proc.Getenv("HOME")) }

// Begin classifies the line and protects it before it runs, as a step of
// its own; see [session.Lines].
func (l *sessionLines) Begin(ln session.Line) session.Begun {
	cur := l.begin(ln)
	return session.Begun{Action: cur.action, Code: cur.code, End: func(code int) { l.end(cur, code) },
		MustEnd: cur.git != nil || l.view != nil}
}

// begin classifies the line ln and protects it before it runs: its
// action is "run" when the shell should run it, "skip" when it must not
// (refused, or run in a copy of the machine), with the status it ended
// with.
func (l *sessionLines) begin(ln session.Line) *line {
	start := time.Now()
	text, unseen, envMap := ln.Text, ln.Unseen, ln.EnvMap
	lr := l.lineRun(ln)
	cur := &line{run: lr, start: start, action: "run"}
	res := classify.Decide(text, classify.Options{Policy: lr.pol, Cwd: ln.Cwd, Env: envMap, Unseen: unseen, Terminal: ln.Terminal, Cache: l.parsed, StateDir: lr.stateDir})
	lr.dec, lr.viaSudo = res.Decision, viaSudo(res.Facts)
	if unseen != "" && lr.dec.Class == policy.Fork {
		// A line undosh cannot read cannot run anywhere but in the
		// shell: it runs there, after a checkpoint of the workspace.
		lr.dec.Class = policy.Git
		lr.dec.Roots = classify.WorkspaceRoots(ln.Cwd, envMap["HOME"])
		if !l.saidUnseen {
			l.saidUnseen = true
			lr.proc.say("note: " + unseen + "; such lines run here with a checkpoint of the workspace only (said once)")
		}
	}
	if lr.dec.Class == policy.None && lr.dec.Verdict == policy.Run {
		// The session's shell may write its workspace whatever a line
		// is (a view shares it; Landlock grants it to the shell): a
		// read-only line's checkpoint is all that undoes a wrong guess.
		lr.beforePlain(resolvedRoots(nil, ln.Cwd, envMap["HOME"]))
		return cur
	}
	if lr.dec.Class == policy.Fork {
		// The line runs in a copy of the machine, on this terminal; if
		// the user gives up on it (Ctrl-C ends the hook), so does undosh.
		if files, err := ln.Files(); err == nil {
			defer files[0].Close()
			lr.proc.Files = files
		}
		ctx, stop := watchProcess(ln.PID)
		defer stop()
		lr.ctx = ctx
	}
	action := "run"
	p, code, rec := lr.routeProtected(start)
	switch p {
	case routeDone:
		action = "skip"
		if ln.Terminal && lr.dec.Class == policy.Fork && lr.dec.Verdict != policy.Deny && code != exit.Refused {
			// The shell will report 130 for a line it did not run: say
			// what became of it.
			switch {
			case lr.ctx.Err() != nil:
				lr.proc.say("the line was interrupted in a copy of the machine: the copy was discarded; the machine is unchanged")
			case session.EndsShell(text):
				// It ended its shell there, as it would have here.
				action = "exit:" + strconv.Itoa(code)
				if code != 0 && !lr.keepsFailure() {
					lr.proc.say(fmt.Sprintf("the line ran in a copy of the machine and exited %d: the copy was discarded; the machine is unchanged", code))
				}
			case code == 0 || lr.keepsFailure() && code != exit.Usage:
				// rollback: never keeps a failing line's copy too.
				lr.proc.say(fmt.Sprintf("the line ran in a copy of the machine and exited %d: the copy was kept ($? reads 130 here, where it did not run)", code))
			default:
				lr.proc.say(fmt.Sprintf("the line ran in a copy of the machine and exited %d: the copy was discarded; the machine is unchanged ($? reads 130 here)", code))
			}
		}
	case routeGit:
		if err := l.view.share(lr.dec.Roots); err != nil {
			lr.proc.say("note: " + err.Error())
		}
		g, c, ok := lr.startGit(rec, start)
		if ok {
			cur.git = g
		} else {
			action, code = "skip", c
		}
	}
	cur.action, cur.code = action, code
	return cur
}

// end ends the line cur that ran with status code: verify, rollback and
// the journal for a checkpointed line, and what a line wrote beyond the
// view's shared paths.
func (l *sessionLines) end(cur *line, code int) {
	var b *beyond
	if l.view != nil && cur.run != nil {
		b = l.view.caught(cur.roots(), cur.start)
	}
	if cur.git != nil {
		cur.git.view, cur.git.viewCaught = l.view, b
		cur.git.finish(status{code: code}) // 128+n for a signal: a failure like any other
		cur.git.close()
		_ = os.WriteFile("/proc/self/comm", []byte(l.comm), 0)
	} else if b != nil {
		l.settleLine(cur, b, code)
	}
}

// lineRun is the run of one command line: the session's, with the line as
// the command, the shell's exported variables as the environment, and
// undosh's notes written to the terminal.
func (l *sessionLines) lineRun(ln session.Line) *run {
	text, cwd, env, envMap := ln.Text, ln.Cwd, ln.Env, ln.EnvMap
	base := l.r
	p := *base.proc
	p.Argv = []string{base.real, "-c", text}
	p.Environ = env
	p.Getenv = func(k string) string { return envMap[k] }
	if ln.Notes != nil {
		p.Stderr = ln.Notes
	}
	p.Closed = func(int) bool { return false }
	p.Files = []*os.File{nil, nil, nil}
	p.DieBy = func(syscall.Signal) {} // a line's death is not the session's
	p.Exec = func(string, []string, []string) error { return errors.New("a session line is not exec'd") }
	return &run{proc: &p, beforeStep: ln.Settle, real: base.real, stateDir: base.stateDir, pol: base.pol, cwd: cwd, env: envMap, uid: base.uid, inView: l.view != nil,
		inv: invocation{Argv: p.Argv, Personality: "bash", Mode: modeCommand, Command: text}, src: source{text: text}}
}

// watchProcess returns a context that ends when process pid does.
func watchProcess(pid int) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	fd, err := unix.PidfdOpen(pid, 0)
	if pid <= 0 || err != nil {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			select {
			case <-done:
				return
			default:
			}
			n, err := unix.Poll(fds, 100)
			if err == nil && n > 0 {
				cancel()
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel() }
}
