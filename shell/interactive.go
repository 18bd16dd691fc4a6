package shell

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/shquote"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
	"github.com/undosh/undosh/pty"
)

// hooks is the init file of an interactive session's bash, after the
// lines that name its session (see [writeInit]).
//
//go:embed hooks.bash
var hooks string

// interactive runs an interactive session: the real bash on a PTY, with
// hooks that hand undosh each command line before any of it runs, and its
// exit status after. docs/interactive.md describes the design.
func (r *run) interactive() int {
	e := r.e
	s, err := newSession(r)
	if err != nil {
		e.errorf(fmt.Errorf("start an interactive session: %w", err), "check the state directory "+r.stateDir+"; the session runs unprotected")
		return e.exec(r.real, r.src)
	}
	defer s.close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serve()
	}()
	path, argv, env := s.containSession(e.Argv, s.env())
	defer s.view.release()
	status, err := pty.Run(context.Background(), pty.Options{
		Path:   path,
		Argv:   argv,
		Env:    env,
		Stdin:  e.Stdin,
		Stdout: os.Stdout,
		Started: func(c *pty.Control) {
			s.ctl = c
			s.view.started(c.PID())
			close(s.ready)
		},
	})
	if err != nil && status == 0 {
		e.errorf(err, "check UNDOSH_REAL_BASH and "+ConfigFile)
		return exit.Failure
	}
	s.req.Close() // ends serve
	<-served
	// A line that changed files and ended the session (`rm f; exit 1`)
	// gets the session's status. Its terminal is gone: its note goes to
	// undosh's own standard error, where the caller sees it.
	s.notes.end(e.Stderr)
	s.endLine(status)
	return status
}

// session is an interactive session being served.
type session struct {
	r        *run
	dir      string
	req, rep *os.File
	ctl      *pty.Control
	ready    chan struct{}
	comm     string // undosh's process name between lines
	notes    *noteWriter
	// parsed keeps the parse of large sources the session's lines read
	// (a sourced rc file or snapshot).
	parsed *parser.Cache

	mu sync.Mutex // serializes lines: serve, and the end of the session
	// histNum is the number of the newest history entry seen; lastKept
	// the text of the newest one bash's own settings would have kept.
	histNum    int
	lastKept   string
	cur        *line
	saidUnseen bool
	// view is the view of the machine the session's bash runs in, or nil
	// (sessionView).
	view *sessionView
}

// line is the command line between its begin and its end.
type line struct {
	git    *gitStep
	forget int // the history entry to delete once it ends, or 0
	run    *run
	start  time.Time
}

// newSession makes the session's private directory, its two named pipes
// and bash's init file.
func newSession(r *run) (*session, error) {
	if r.stateDir == "" {
		return nil, errors.New("no state directory")
	}
	base := filepath.Join(r.stateDir, "run", "sessions")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, err
	}
	removeStaleSessions(base)
	dir, err := os.MkdirTemp(base, strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	s := &session{r: r, dir: dir, ready: make(chan struct{}), histNum: -1, parsed: parser.NewCache(16)}
	s.notes = &noteWriter{s: s}
	comm, _ := os.ReadFile("/proc/self/comm")
	s.comm = strings.TrimSpace(string(comm))
	fail := func(err error) (*session, error) {
		s.close()
		return nil, err
	}
	for _, name := range []string{"req", "rep"} {
		if err := unix.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			return fail(fmt.Errorf("make %s: %w", name, err))
		}
	}
	// Read and write ends both, so that neither undosh nor bash ever
	// blocks opening them, and undosh never sees the end of req.
	if s.req, err = os.OpenFile(filepath.Join(dir, "req"), os.O_RDWR, 0); err != nil {
		return fail(err)
	}
	if s.rep, err = os.OpenFile(filepath.Join(dir, "rep"), os.O_RDWR, 0); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "init"), []byte(s.init()), 0o600); err != nil {
		return fail(err)
	}
	return s, nil
}

// removeStaleSessions removes the directories of sessions whose undosh
// is gone (killed before it could clean up): they hold only named pipes
// and the init file.
func removeStaleSessions(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, _, ok := strings.Cut(e.Name(), "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 {
			continue
		}
		if err := unix.Kill(n, 0); errors.Is(err, unix.ESRCH) {
			os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}

func (s *session) close() {
	if s.req != nil {
		s.req.Close()
	}
	if s.rep != nil {
		s.rep.Close()
	}
	os.RemoveAll(s.dir)
}

// bootPS0 is the PS0 undosh puts in bash's environment, in case a
// start-up file replaces PROMPT_COMMAND: it protects the first line and
// arms PROMPT_COMMAND to install the hooks (see hooks.bash).
const bootPS0 = `${__undosh_n[${PROMPT_COMMAND[99]:=__undosh_boot}]-}${__undosh_n[${__undosh_line:=$(__undosh_boot pre "$?")}0]-}`

// init is the file the boot function sources: the session's directory,
// then [hooks].
func (s *session) init() string {
	return "__undosh_dir=" + shquote.Word(s.dir) + "\n" + hooks
}

// env is bash's environment: the caller's, with the boot that installs
// the hooks at the first prompt, after bash has read its start-up files
// as it always does. The caller's own PROMPT_COMMAND and PS0 are kept for
// the boot to put back.
func (s *session) env() []string {
	var out []string
	var pc, ps0 *string
	for _, kv := range s.r.e.Environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PROMPT_COMMAND":
			pc = &v
			continue
		case "PS0":
			ps0 = &v
			continue
		case "__undosh_boot", "__undosh_boot_ps0", "__undosh_env_pc", "__undosh_env_ps0", "BASH_FUNC___undosh_boot%%":
			continue
		}
		out = append(out, kv)
	}
	boot := "__undosh_boot"
	if pc != nil {
		out = append(out, "__undosh_env_pc="+*pc)
		if *pc != "" {
			boot += ";" + *pc
		}
	}
	userPS0 := ""
	if ps0 != nil {
		out = append(out, "__undosh_env_ps0="+*ps0)
		userPS0 = *ps0
	}
	return append(out, "PROMPT_COMMAND="+boot, "PS0="+bootPS0+userPS0, "__undosh_boot_ps0="+bootPS0, "__undosh_boot=0",
		"BASH_FUNC___undosh_boot%%=() {  local __undosh_s=$?;\n . "+shquote.Word(filepath.Join(s.dir, "init"))+` "$@"`+"\n}")
}

// message is one message from the hooks: "hello", "begin" or "end".
type message struct {
	kind   string
	id     string
	status int // end: the line's status; begin: the status of the one before
	begin  beginMsg
	hist   int // hello: the newest history entry
}

// messages reads the hooks' messages from req until it is closed.
func (s *session) messages() <-chan message {
	out := make(chan message)
	go func() {
		defer close(out)
		d := newDecoder(s.req)
		for {
			m, err := d.next()
			if err != nil {
				return
			}
			out <- m
		}
	}()
	return out
}

// decoder reads the hooks' messages: a kind and its fields, each ended by
// a NUL.
type decoder struct{ br *bufio.Reader }

func newDecoder(r io.Reader) *decoder { return &decoder{bufio.NewReader(r)} }

// maxField bounds a field: a line or `export -p` larger than this is cut
// (the rest is read and dropped), so that a runaway writer cannot make
// undosh hold it all.
const maxField = 4 << 20

func (d *decoder) fields(n int) ([]string, error) {
	f := make([]string, n)
	for i := range f {
		var b []byte
		for {
			chunk, err := d.br.ReadSlice(0)
			if len(b) < maxField {
				b = append(b, chunk[:min(len(chunk), maxField-len(b))]...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				return nil, err
			}
			break
		}
		f[i] = strings.TrimSuffix(string(b), "\x00")
	}
	return f, nil
}

// next returns the next message. A kind it does not know is skipped: the
// next field is taken for the next kind.
func (d *decoder) next() (message, error) {
	for {
		k, err := d.fields(1)
		if err != nil {
			return message{}, err
		}
		m := message{kind: k[0]}
		switch m.kind {
		case "hello":
			f, err := d.fields(1)
			if err != nil {
				return message{}, err
			}
			m.hist, _ = strconv.Atoi(f[0])
		case "begin":
			f, err := d.fields(10)
			if err != nil {
				return message{}, err
			}
			m.id = f[0]
			m.status, _ = strconv.Atoi(f[1])
			m.begin = beginMsg{pid: pidOf(f[0]), cwd: f[2], histControl: f[3], histIgnore: f[4],
				history: f[5] != "0", histSize: f[6], forced: f[7] == "1", entry: f[8], exports: f[9]}
		case "end":
			f, err := d.fields(2)
			if err != nil {
				return message{}, err
			}
			m.id = f[0]
			m.status, _ = strconv.Atoi(f[1])
		default:
			continue
		}
		return m, nil
	}
}

// serve answers an interactive bash's hooks until req is closed.
func (s *session) serve() {
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

// followCwd shares the workspace the shell is in now with its view, once
// a line has ended: "cd+" when the shell must enter its directory again
// (the hook does, keeping OLDPWD), else "".
func (s *session) followCwd() string {
	bound, err := s.view.follow(s.r.e.Getenv("HOME"))
	if err != nil {
		s.r.e.say("note: " + err.Error())
	}
	if bound {
		return "cd+"
	}
	return ""
}

func pidOf(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "p"))
	return n
}

func (s *session) reply(id, action string) {
	_, _ = s.rep.WriteString(id + "\x00" + action + "\x00") // Best effort: bash is gone if it fails.
}

// beginMsg is what PS0's hook sends before a line runs.
type beginMsg struct {
	pid int // the hook's process, which ends if the line is given up
	cwd string
	// The user's history settings; forced says undosh kept those that
	// hide a line out of the way while bash read it (the hooks are
	// installed), so that the line is in history whatever they say.
	histControl string
	histIgnore  string
	history     bool // set -o history
	histSize    string
	forced      bool
	entry       string // `history 1`
	exports     string // `export -p`
}

// beginInteractive reads a line from the history entry m carries, then
// protects it as [session.begin] does. prev is the status of the line
// before. It returns "run" when bash should run the line, "end" when it
// should and report its end too, and "skip" when it must not (refused,
// or run in a copy of the machine).
func (s *session) beginInteractive(prev int, m beginMsg) string {
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
	s.notes.settle((action == "skip" || strings.HasPrefix(action, "exit:")) && alive(m.pid))
	if action == "run" && (cur.git != nil || cur.forget > 0 || s.view != nil) {
		return "end" // the line's end must be reported
	}
	if action == "run" {
		s.cur = nil
	}
	return action
}

// histIgnored reports whether HISTIGNORE's patterns match line, as bash
// matches them: colon-separated, each against the whole line, with & for
// the previous history entry.
func histIgnored(ignore, line, prev string) bool {
	if ignore == "" {
		return false
	}
	var pats []string
	var cur strings.Builder
	for i := 0; i < len(ignore); i++ {
		switch c := ignore[i]; {
		case c == '\\' && i+1 < len(ignore):
			cur.WriteByte(c)
			cur.WriteByte(ignore[i+1])
			i++
		case c == ':':
			pats = append(pats, cur.String())
			cur.Reset()
		case c == '&':
			cur.WriteString(pattern.QuoteMeta(prev, 0))
		default:
			cur.WriteByte(c)
		}
	}
	pats = append(pats, cur.String())
	for _, p := range pats {
		if p == "" {
			continue
		}
		expr, err := pattern.Regexp(p, pattern.EntireString|pattern.ExtendedOperators)
		if err != nil {
			continue
		}
		if re, err := regexp.Compile(expr); err == nil && re.MatchString(line) {
			return true
		}
	}
	return false
}

// endsSession reports whether a line ends its shell once it runs to its
// end: its last command is an unconditional exit (`…; exit 3`, not
// `… || exit 1`). Run in a copy of the machine, it ended the copy's
// shell; the session's ends after it, with its status.
func endsSession(text string) bool {
	f, err := parse(text)
	if err != nil || len(f.Stmts) == 0 {
		return false
	}
	st := f.Stmts[len(f.Stmts)-1]
	ce, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Background || st.Coprocess || st.Negated || len(ce.Args) == 0 {
		return false
	}
	return ce.Args[0].Lit() == "exit"
}

// alive reports whether process pid still runs.
func alive(pid int) bool {
	return pid > 0 && unix.Kill(pid, 0) == nil
}

// begin classifies the line text and protects it before it runs, as
// cur: it returns "run" when the shell should run it, "skip" when it must
// not (refused, or run in a copy of the machine), and then the status it
// ended with. unseen, when not "", says why the text is not the line's.
func (s *session) begin(cur *line, text, unseen string, m beginMsg) (string, int) {
	start := time.Now()
	env, envMap := parseExports(m.exports)
	lr := s.lineRun(text, m.cwd, env, envMap)
	cur.run, cur.start = lr, start
	res := classify.Decide(text, classify.Options{Policy: lr.pol, Cwd: m.cwd, Env: envMap, Unseen: unseen, Terminal: s.ctl != nil, Cache: s.parsed, StateDir: lr.stateDir})
	lr.dec, lr.viaSudo = res.Decision, viaSudo(res.Facts)
	if unseen != "" && lr.dec.Class == policy.Fork {
		// A line undosh cannot read cannot run anywhere but in the
		// shell: it runs there, after a checkpoint of the workspace.
		lr.dec.Class = policy.Git
		lr.dec.Roots = classify.WorkspaceRoots(m.cwd, envMap["HOME"])
		if !s.saidUnseen {
			s.saidUnseen = true
			lr.e.say("note: " + unseen + "; such lines run here with a checkpoint of the workspace only (said once)")
		}
	}
	if lr.dec.Class == policy.None && lr.dec.Verdict == policy.Run {
		return "run", 0
	}
	if lr.dec.Class == policy.Fork {
		// The line runs in a copy of the machine, on this terminal; if
		// the user gives up on it (Ctrl-C ends the hook), so does undosh.
		if files, err := s.stepFiles(); err == nil {
			defer files[0].Close()
			lr.e.Files = files
		}
		ctx, stop := watchProcess(m.pid)
		defer stop()
		lr.ctx = ctx
	}
	action := "run"
	p, code, rec := lr.routeProtected(start)
	switch p {
	case routeDone:
		action = "skip"
		if s.ctl != nil && lr.dec.Class == policy.Fork && lr.dec.Verdict != policy.Deny && code != exit.Refused {
			// The shell will report 130 for a line it did not run: say
			// what became of it.
			switch {
			case lr.ctx.Err() != nil:
				lr.e.say("the line was interrupted in a copy of the machine: the copy was discarded; the machine is unchanged")
			case endsSession(text):
				// It ended its shell there, as it would have here.
				action = "exit:" + strconv.Itoa(code)
				if code != 0 && !lr.keepsFailure() {
					lr.e.say(fmt.Sprintf("the line ran in a copy of the machine and exited %d: the copy was discarded; the machine is unchanged", code))
				}
			case code == 0 || lr.keepsFailure() && code != exit.Usage:
				// rollback: never keeps a failing line's copy too.
				lr.e.say(fmt.Sprintf("the line ran in a copy of the machine and exited %d: the copy was kept ($? reads 130 here, where it did not run)", code))
			default:
				lr.e.say(fmt.Sprintf("the line ran in a copy of the machine and exited %d: the copy was discarded; the machine is unchanged ($? reads 130 here)", code))
			}
		}
	case routeGit:
		if err := s.view.share(lr.dec.Roots); err != nil {
			lr.e.say("note: " + err.Error())
		}
		g, c, ok := lr.startGit(rec, start)
		if ok {
			cur.git = g
		} else {
			action, code = "skip", c
		}
	}
	return action, code
}

// endLine ends the line that ran with status: verify, rollback and the
// journal for a checkpointed line. It returns the history entry to
// forget, or 0.
func (s *session) endLine(status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finishLocked(status)
}

func (s *session) finishLocked(code int) int {
	cur := s.cur
	if cur == nil {
		return 0
	}
	s.cur = nil
	var b *beyond
	if s.view != nil && cur.run != nil {
		b = s.view.caught(cur.roots(), cur.start)
	}
	if cur.git != nil {
		cur.git.view, cur.git.viewCaught = s.view, b
		cur.git.finish(status{code: code}) // 128+n for a signal: a failure like any other
		cur.git.close()
		_ = os.WriteFile("/proc/self/comm", []byte(s.comm), 0)
	} else if b != nil {
		s.settleLine(cur, b, code)
	}
	s.settle()
	return cur.forget
}

// lineRun is the run of one command line: the session's, with the line as
// the command, the shell's exported variables as the environment, and
// undosh's notes written to the terminal.
func (s *session) lineRun(text, cwd string, env []string, envMap map[string]string) *run {
	base := s.r
	e := *base.e
	e.Argv = []string{base.real, "-c", text}
	e.Environ = env
	e.Getenv = func(k string) string { return envMap[k] }
	if s.ctl != nil {
		e.Stderr = s.notes
	}
	e.Closed = func(int) bool { return false }
	e.Files = []*os.File{nil, nil, nil}
	e.DieBy = func(syscall.Signal) {} // a line's death is not the session's
	e.Exec = func(string, []string, []string) error { return errors.New("a session line is not exec'd") }
	return &run{e: &e, beforeStep: s.settle, real: base.real, stateDir: base.stateDir, pol: base.pol, cwd: cwd, env: envMap, uid: base.uid, inView: s.view != nil,
		inv: invocation{Argv: e.Argv, Personality: "bash", Mode: modeCommand, Command: text}, src: source{text: text}}
}

// noteWriter writes undosh's notes on the session's terminal, each on a
// line of its own, after everything the shell wrote before it. The
// newline that ends the last note is held back until [noteWriter.settle]:
// a line the shell drops prints a newline of its own.
type noteWriter struct {
	s    *session
	mu   sync.Mutex
	held bool
	// after is where notes go once the session's terminal is gone (end).
	after io.Writer
}

// end sends the notes that come after the session to w, the session's
// own standard error.
func (w *noteWriter) end(after io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.after, w.held = after, false
}

func (w *noteWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.after != nil {
		return w.after.Write(p)
	}
	n := len(p)
	var out []byte
	if w.held || !w.s.ctl.AtLineStart(200*time.Millisecond) {
		out = append(out, '\n')
	}
	w.held = false
	if len(p) > 0 && p[len(p)-1] == '\n' {
		p, w.held = p[:len(p)-1], true
	}
	out = append(out, p...)
	if err := w.s.writeTTY(out); err != nil {
		return 0, err
	}
	return n, nil
}

// settle ends the last note's line, unless the shell is about to end it
// (it drops an interrupted line with a newline).
func (w *noteWriter) settle(shellEndsLine bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.after != nil {
		return
	}
	if w.held && !shellEndsLine {
		_ = w.s.writeTTY([]byte("\n")) // Best effort, as every note.
	}
	w.held = false
}

// settle ends the line of the last note.
func (s *session) settle() {
	if s.ctl != nil {
		s.notes.settle(false)
	}
}

// stepFiles are the standard files of a line run elsewhere: the session's
// terminal for all three, or for a session on a pipe, /dev/null and
// undosh's own output. Whoever runs the line closes files[0].
func (s *session) stepFiles() ([]*os.File, error) {
	if s.ctl != nil {
		tty, err := os.OpenFile(s.ctl.TTY(), os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			return nil, err
		}
		return []*os.File{tty, tty, tty}, nil
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	return []*os.File{null, s.r.e.Files[1], s.r.e.Files[2]}, nil
}

// writeTTY writes p on the session's terminal.
func (s *session) writeTTY(p []byte) error {
	f, err := os.OpenFile(s.ctl.TTY(), os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(p)
	return err
}

// parseHistoryEntry splits `history 1` ("%5d%c %s\n", with HISTTIMEFORMAT
// empty) into the entry's number and text.
func parseHistoryEntry(s string) (int, string) {
	s = strings.TrimLeft(s, " ")
	i := strings.IndexFunc(s, func(c rune) bool { return c < '0' || c > '9' })
	if i <= 0 || len(s) < i+2 {
		return 0, ""
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return 0, ""
	}
	return n, strings.TrimSuffix(s[i+2:], "\n")
}

// parseExports reads `export -p` (declare -x NAME="value" lines, or
// export NAME="value" in POSIX mode) into an environment.
func parseExports(text string) ([]string, map[string]string) {
	m := map[string]string{}
	var env []string
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(text), "")
	if err != nil {
		return nil, m
	}
	for _, st := range f.Stmts {
		d, ok := st.Cmd.(*syntax.DeclClause)
		if !ok {
			continue
		}
		for _, a := range d.Args {
			if a.Name == nil || a.Naked || a.Value == nil && a.Array != nil {
				continue
			}
			v := ""
			if a.Value != nil {
				if v, err = expand.Literal(nil, a.Value); err != nil {
					continue
				}
			}
			if _, dup := m[a.Name.Value]; !dup {
				m[a.Name.Value] = v
				env = append(env, a.Name.Value+"="+v)
			}
		}
	}
	return env, m
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
