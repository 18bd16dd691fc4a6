package session

import (
	"bufio"
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
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"

	"github.com/undosh/undosh/internal/shquote"
	"github.com/undosh/undosh/pty"
)

// hooks is the init file of an interactive session's bash, after the
// lines that name its session (see [Session.init]).
//
//go:embed hooks.bash
var hooks string

// Lines protect the lines of a session; package shell implements them.
type Lines interface {
	// Contain returns what to run for the session's bash, argv with
	// environment env: the real bash, or what runs it under the limit
	// of a workspace step for the whole session.
	Contain(argv, env []string) (path string, nargv, nenv []string)
	// Started says that the session's bash runs, as process pid.
	Started(pid int)
	// Release ends what Contain set up, once the session is over.
	Release()
	// Begin decides and protects a line before it runs.
	Begin(l Line) Begun
	// Follow is called once a line has ended: it reports whether the
	// shell must enter its working directory again (its workspace was
	// bound in beneath it), and a note to say when something failed.
	Follow() (bool, error)
}

// A Line is one command line of a session, as its hooks sent it.
type Line struct {
	// Text is the line; Unseen, when not "", says why it is not.
	Text, Unseen string
	Cwd          string
	// Env is the shell's exported variables, and EnvMap the same.
	Env    []string
	EnvMap map[string]string
	// PID is the hook's process, which ends when the user gives up on
	// the line (Ctrl-C).
	PID int
	// Terminal: the session runs on a terminal.
	Terminal bool
	// Notes, when set, is where undosh's notes of the line go (the
	// session's terminal); Settle ends the line of the last note.
	Notes  io.Writer
	Settle func()
	// Files returns the standard files of a line run elsewhere (the
	// terminal, or /dev/null and undosh's own output); whoever runs
	// the line closes files[0].
	Files func() ([]*os.File, error)
}

// Begun is how a line begins.
type Begun struct {
	// Action is "run" when the shell runs the line, "skip" when it must
	// not (refused, or run in a copy of the machine), "exit:N" when the
	// shell must exit N (the line ended its shell in a copy).
	Action string
	// Code is the status of a line that did not run here.
	Code int
	// End ends the line once it ran, or was dropped, with its status.
	End func(status int)
	// MustEnd: the line's end must be reported (it has a checkpoint, or
	// the shell runs in a view of the machine).
	MustEnd bool
}

// Status is how a session's bash on a pipe ended.
type Status struct {
	Code int // its exit status, or 128+n for a signal n
	Sig  unix.Signal
}

// Options are what a session needs of its process.
type Options struct {
	Lines Lines
	// Argv is the shell's command line, Environ the caller's
	// environment.
	Argv, Environ []string
	// Stdin and Stdout are the terminal's side of an interactive
	// session; Stderr is undosh's own.
	Stdin, Stdout *os.File
	Stderr        io.Writer
	// Say writes one line of undosh's own on stderr ("undosh: " LINE).
	Say func(line string)

	// For a session on a pipe: Files are the standard files for bash
	// (Files[0] is replaced by Input, the pipe bash reads, of which
	// Feed is the write end); First is what came on standard input so
	// far, and InputFd the fd the rest comes on. Start starts bash.
	Files   []*os.File
	Input   *os.File
	Feed    *os.File
	First   string
	InputFd int
	Start   func(path string, argv, env []string, files []*os.File) (pid int, done <-chan Status, err error)
}

// Session is a session's private directory, its two named pipes and the
// state of its lines.
type Session struct {
	dir      string
	req, rep *os.File
	ctl      *pty.Control
	ready    chan struct{}
	notes    *noteWriter
	o        Options
	files    []*os.File

	mu sync.Mutex // serializes lines: serve, and the end of the session
	// histNum is the number of the newest history entry seen; lastKept
	// the text of the newest one bash's own settings would have kept.
	histNum  int
	lastKept string
	cur      *line
}

// line is the command line between its begin and its end.
type line struct {
	forget  int // the history entry to delete once it ends, or 0
	end     func(status int)
	mustEnd bool
}

// New makes a session's private directory under stateDir, its two named
// pipes and bash's init file.
func New(stateDir string) (*Session, error) {
	if stateDir == "" {
		return nil, errors.New("no state directory")
	}
	base := filepath.Join(stateDir, "run", "sessions")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, err
	}
	removeStaleSessions(base)
	dir, err := os.MkdirTemp(base, strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	s := &Session{dir: dir, ready: make(chan struct{}), histNum: -1}
	s.notes = &noteWriter{s: s}
	fail := func(err error) (*Session, error) {
		s.Close()
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

// Close removes the session's directory.
func (s *Session) Close() {
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
func (s *Session) init() string {
	return "__undosh_dir=" + shquote.Word(s.dir) + "\n" + hooks
}

// env is bash's environment: the caller's (environ), with the boot that
// installs the hooks at the first prompt, after bash has read its
// start-up files as it always does. The caller's own PROMPT_COMMAND and
// PS0 are kept for the boot to put back.
func (s *Session) env(environ []string) []string {
	var out []string
	var pc, ps0 *string
	for _, kv := range environ {
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
func (s *Session) messages() <-chan message {
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

func pidOf(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "p"))
	return n
}

func (s *Session) reply(id, action string) {
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

// followCwd follows the shell into the directory it is in now, once a
// line has ended ([Lines.Follow]): "cd+" when the shell must enter its
// directory again (the hook does, keeping OLDPWD), else "".
func (s *Session) followCwd() string {
	bound, err := s.o.Lines.Follow()
	if err != nil {
		s.o.Say("note: " + err.Error())
	}
	if bound {
		return "cd+"
	}
	return ""
}

// begin hands the line text to the Lines as cur, before it runs: it
// returns "run" when the shell should run it, "skip" when it must not,
// and then the status it ended with. unseen, when not "", says why the
// text is not the line's.
func (s *Session) begin(cur *line, text, unseen string, m beginMsg) (string, int) {
	env, envMap := parseExports(m.exports)
	l := Line{Text: text, Unseen: unseen, Cwd: m.cwd, Env: env, EnvMap: envMap, PID: m.pid, Terminal: s.ctl != nil,
		Settle: s.settle, Files: s.stepFiles}
	if s.ctl != nil {
		l.Notes = s.notes
	}
	b := s.o.Lines.Begin(l)
	cur.end, cur.mustEnd = b.End, b.MustEnd
	return b.Action, b.Code
}

// endLine ends the line that ran with status: verify, rollback and the
// journal for a checkpointed line. It returns the history entry to
// forget, or 0.
func (s *Session) endLine(status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finishLocked(status)
}

func (s *Session) finishLocked(code int) int {
	cur := s.cur
	if cur == nil {
		return 0
	}
	s.cur = nil
	if cur.end != nil {
		cur.end(code) // 128+n for a signal: a failure like any other
	}
	s.settle()
	return cur.forget
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

// EndsShell reports whether a line ends its shell once it runs to its
// end: its last command is an unconditional exit (`…; exit 3`, not
// `… || exit 1`). Run in a copy of the machine, it ended the copy's
// shell; the session's ends after it, with its status.
func EndsShell(text string) bool {
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

// noteWriter writes undosh's notes on the session's terminal, each on a
// line of its own, after everything the shell wrote before it. The
// newline that ends the last note is held back until [noteWriter.settle]:
// a line the shell drops prints a newline of its own.
type noteWriter struct {
	s    *Session
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
func (s *Session) settle() {
	if s.ctl != nil {
		s.notes.settle(false)
	}
}

// stepFiles are the standard files of a line run elsewhere: the session's
// terminal for all three, or for a session on a pipe, /dev/null and
// undosh's own output. Whoever runs the line closes files[0].
func (s *Session) stepFiles() ([]*os.File, error) {
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
	return []*os.File{null, s.files[1], s.files[2]}, nil
}

// writeTTY writes p on the session's terminal.
func (s *Session) writeTTY(p []byte) error {
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
				// A config of its own: expand.Literal writes into the
				// shared one that nil stands for, a race between sessions.
				if v, err = expand.Literal(&expand.Config{}, a.Value); err != nil {
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
