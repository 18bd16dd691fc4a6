package parser

import (
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Options tell [Parse] what it may assume. The zero value parses bash with
// an unknown working directory, no environment and no script reading.
type Options struct {
	// Name is the file name used in parse errors, or "".
	Name string
	// POSIX parses the source as POSIX sh instead of bash.
	POSIX bool
	// Cwd is the absolute working directory the source starts in. When
	// empty, relative paths stay unresolved.
	Cwd string
	// Env holds the environment that tilde and $NAME expand against
	// (HOME, OLDPWD, …). Names not in Env and not assigned literally in the
	// source are dynamic.
	Env map[string]string
	// ReadFile, when set, lets the parser read scripts that the source runs
	// (`bash x.sh`, `./x.sh`, `source x.sh`, package.json for `npm run`) so
	// that their text is classified too. Paths passed to it are absolute.
	ReadFile func(path string) ([]byte, error)
	// Readlink, when set, returns the target of the symbolic link at an
	// absolute path, and an error when the path is not one (or does not
	// exist). With it, every written path and working directory is
	// resolved as the kernel does, through the links that already exist
	// (a workspace's `data -> /srv/data`) as well as those the source
	// makes, `..` included. Without it only the source's links count.
	Readlink func(path string) (string, error)
	// MaxDepth bounds nested code (bash -c, eval, scripts). Zero means 8.
	MaxDepth int
	// MaxCommands bounds the number of commands recorded. Zero means 10000.
	// Source with more commands is reported as unknown code. A for loop
	// walked once per item counts the commands of its first item only.
	MaxCommands int
	// Terminal says that standard input is a person's (or an agent's)
	// terminal, as for a line typed at an interactive prompt: a program
	// that reads its code from it (python3, node, bash with no script) is
	// an interactive session of that program, an unknown program, rather
	// than code the parser cannot see.
	Terminal bool
	// LookPath, when set, says which file a command name runs under a PATH
	// value: the first executable regular file of that name in PATH's
	// directories, or false when there is none. With it, a name that the
	// source's new PATH resolves to the same file as the environment's PATH
	// (Env["PATH"]) is not shadowed. Without it, or when PATH's new value
	// is not known, any change of PATH shadows every name without a slash.
	// Parse passes only PATH values whose directories are all absolute.
	LookPath func(name, pathValue string) (string, bool)
	// Cache, when set, keeps the parse of large sources (a sourced shell
	// snapshot) for the next Parse calls.
	Cache *Cache
	// Stands, when set, reports whether a function that the file (a
	// script the source reads) defines under name stands for the program
	// name: a call of it is then that program, and its body is not
	// walked. A harness's shell snapshot shadows grep with its own.
	Stands func(file, name string) bool
	// Emits, when set, returns the variables that the output of the
	// command argv only sets, or false when that is not known: `eval
	// "$(dircolors -b)"` is then assignments of LS_COLORS, of a value
	// known only at run time, rather than code the parser cannot see.
	Emits func(argv []string) ([]string, bool)
	// Knows, when set, reports whether a rule of the policy names the
	// program name (a base name). A program it does not know may be a
	// wrapper no table knows: the command lines among its arguments are
	// walked too.
	Knows func(name string) bool
	// EnvComplete says that Env is the whole environment the source
	// starts with (bash -c, not a login or interactive shell, whose
	// start-up files may set more): a name not in it, and not one bash
	// sets itself, is unset, so `[ -n "${X+x}" ]` is decided.
	EnvComplete bool
}

// Parse walks src and returns the facts about it. It never panics on any
// input; a syntax error is reported in [Facts.Err].
func Parse(src string, opts Options) *Facts {
	if opts.MaxDepth == 0 {
		opts.MaxDepth = 8
	}
	if opts.MaxCommands == 0 {
		opts.MaxCommands = 10000
	}
	f := &Facts{}
	w := &walker{
		opts:   &opts,
		facts:  f,
		st:     &state{cwd: cleanAbs(opts.Cwd)},
		shared: &shared{calling: map[string]bool{}, unroll: &unroll{mul: 1, sets: map[string]int{}, last: map[string]int{}}},
	}
	w.cfg = &expand.Config{Env: environ{w}}
	if opts.Env != nil {
		w.st.oldpwd = cleanAbs(opts.Env["OLDPWD"])
	}
	// A function that is defined but never called by name does not run:
	// a trap, eval or nested shell that calls it is walked as a call.
	w.source(src, opts.Name)
	w.runTraps()
	return f
}

// walker walks one source text. Nested code gets a walker of its own that
// shares the facts, the budget and the functions.
type walker struct {
	opts   *Options
	facts  *Facts
	st     *state
	shared *shared
	// loops counts the loop bodies this walk is in (branch): each is
	// walked twice (probe), so nested loops would cost 2^depth walks
	// without maxProbes.
	loops int
	cfg   *expand.Config

	src   string
	outer *Pos   // set in nested code: every position becomes *outer
	via   string // how nested code was reached
	file  string // the file the source was read from, or ""
	depth int
	root  bool // nested code that runs as another user (sudo bash -c)
	// hidden names variables this code cannot see: it runs in a process
	// of its own (they are not exported), or later (a trap, and they may
	// change before it runs).
	hidden map[string]bool
	// hideAll hides every variable: trap code after an assignment to a
	// name the parser does not know.
	hideAll bool
	// process is set for nested code that runs in a process of its own
	// (bash -c, a script, xargs sh -c): it starts with a copy of the state
	// that sees only the exported functions and no aliases, and what it
	// changes stays there.
	process bool
	// stdinTaken is set while the code walked reads standard input from
	// a pipe or a redirection, not from the terminal.
	stdinTaken bool
	// piped, when set, is the text a pipe feeds the simple command
	// being walked: `echo 'git push' | bash` runs that text.
	piped *string
}

type shared struct {
	calling map[string]bool
	// readlinks caches what Options.Readlink said of each path: the
	// files do not change while a step is decided.
	readlinks map[string]readlinkResult
	// repoWrites and treeWrites are the paths recorded commands (not
	// git) wrote into a repository's .git and the trees they wrote
	// (noteRepoWrites).
	repoWrites, treeWrites []string
	// expanding names the aliases being expanded: bash does not expand
	// an alias again inside its own value.
	expanding map[string]bool
	commands  int
	full      bool
	// unroll is shared with the scratch walks of loop bodies too.
	unroll *unroll
	// unrolling counts the loops being walked item by item; overflow is
	// set when they spent the budget (see [walker.eachItem]).
	unrolling int
	overflow  bool
	// gitSets are the git configuration settings the step made with
	// `git config` so far (they land in files, which outlive a
	// subshell); gitStale is set once it changed one in a way the
	// parser does not follow (git config -e, an include).
	gitSets  []gitEntry
	gitStale bool
}

type funcDef struct {
	body *syntax.Stmt
	w    *walker // walker of the source that defined it (for positions)
	// exported is set by export -f or declare -fx: child bash processes
	// import the function from the environment.
	exported bool
	// stands is set for a function that stands for the program it is
	// named after ([Options.Stands]).
	stands bool
	// maybe is set when the function may or may not be defined where it
	// is called: it was defined, redefined or unset in a branch or a loop,
	// or it reaches a child process that may not import it. A call then
	// walks the body and also runs the program the name names.
	maybe bool
}

// state is what a subshell copies and a sequential list carries forward.
type state struct {
	cwd    string // "" when unknown
	oldpwd string
	dirs   []string
	// vars holds what the source did to its variables; a name it did
	// not touch has the environment's value ([Options.Env]).
	vars table[binding]
	// shadow is set once hash, LD_PRELOAD or the like changed: every name
	// after it may run something else.
	shadow bool
	// pathSet is set once the source changed PATH: a name without a slash
	// may then run another program (see [walker.pathShadows]).
	pathSet bool
	// args are the positional parameters when they are known (inside a
	// function called with literal arguments), else nil.
	args []string
	// links maps symlinks created by the source (ln -s) to their targets.
	links map[string]string
	// funcs and aliases are those this shell defined: a subshell sees
	// them, a child process does not (but for exported functions).
	funcs   table[*funcDef]
	aliases table[string]
	// traps are the traps set in this shell, walked when it ends (see
	// [walker.runTraps]).
	traps []*trap
}

// binding is what the source did to one variable.
type binding struct {
	value string
	how   bound
	// private is set for a variable the source set without exporting it
	// (a for loop's too): other processes do not see it.
	private bool
	// exported is set for a variable the source exported.
	exported bool
}

type bound uint8

const (
	fromEnv    bound = iota // not assigned: the environment's value, if any
	knownVal                // assigned a value the parser knows
	unknownVal              // assigned a value known only at run time
	unsetVal                // unset by the source
)

func (s *state) clone() *state {
	c := *s
	c.vars = s.vars.clone()
	c.dirs = append([]string(nil), s.dirs...)
	c.links = maps.Clone(s.links)
	c.funcs = s.funcs.clone()
	c.aliases = s.aliases.clone()
	c.traps = s.traps[:len(s.traps):len(s.traps)]
	return &c
}

func (w *walker) lookup(name string) (string, bool) {
	if w.hideAll || w.hidden[name] {
		return "", false
	}
	if b, _ := w.st.vars.get(name); b.how == knownVal {
		return b.value, true
	} else if b.how == unknownVal || b.how == unsetVal {
		return "", false
	}
	switch name {
	case "PWD":
		if w.st.cwd != "" {
			return w.st.cwd, true
		}
		return "", false
	case "OLDPWD":
		if w.st.oldpwd != "" {
			return w.st.oldpwd, true
		}
		return "", false
	case "IFS":
		return " \t\n", true
	case "$":
		// The shell's own pid: /proc/$$ is /proc/self for what the
		// shell itself opens.
		return "self", true
	case "!":
		// The last job the shell started: its own child.
		return "job", true
	}
	if w.st.args != nil {
		switch name {
		case "#":
			return strconv.Itoa(len(w.st.args)), true
		case "*":
			return strings.Join(w.st.args, " "), true
		}
		if n, err := strconv.Atoi(name); err == nil && n >= 1 {
			if n <= len(w.st.args) {
				return w.st.args[n-1], true
			}
			return "", true
		}
	}
	if v, ok := w.opts.Env[name]; ok {
		return v, true
	}
	return "", false
}

func (w *walker) setVar(name, value string, known bool) {
	w.noteAssign(name)
	old, had := w.lookup(name)
	b, _ := w.st.vars.get(name)
	// A variable the source sets is the shell's own, unseen by the
	// programs it starts, until it is exported (or came from the
	// environment).
	b.private = !b.exported && !w.inEnv(name)
	if known {
		b.value, b.how = value, knownVal
	} else {
		b.value, b.how = "", unknownVal
	}
	w.st.vars.set(name, b)
	if known && had && old == value {
		// The value it had: nothing changes which program a name runs.
		return
	}
	if w.shared.unroll.namerefs {
		// declare -n: name may stand for PATH or LD_PRELOAD.
		w.st.shadow = true
	}
	switch {
	case name == "PATH":
		w.st.pathSet = true
	case shadowVars[name] || strings.HasPrefix(name, "GIT_") && gitProgramVar(name):
		w.st.shadow = true
	}
}

// isUnset reports whether the variable name is surely unset here: the
// source unset it, or it is not in a complete environment
// ([Options.EnvComplete]), was never assigned, and bash does not set it.
func (w *walker) isUnset(name string) bool {
	if w.hideAll || w.hidden[name] || !syntax.ValidName(name) {
		return false
	}
	switch b, _ := w.st.vars.get(name); b.how {
	case unsetVal:
		return true
	case fromEnv:
		_, inEnv := w.opts.Env[name]
		return w.opts.EnvComplete && !inEnv && !bashSets(name)
	}
	return false
}

// bashSets reports whether bash gives name a value of its own at start,
// or may (PATH and SHELL when the environment has none).
func bashSets(name string) bool {
	if strings.HasPrefix(name, "BASH") || strings.HasPrefix(name, "COMP_") || strings.HasPrefix(name, "READLINE_") {
		return true
	}
	switch name {
	case "DIRSTACK", "EPOCHREALTIME", "EPOCHSECONDS", "EUID", "FUNCNAME", "GROUPS", "HISTCMD", "HISTFILE",
		"HISTFILESIZE", "HISTSIZE", "HOSTNAME", "HOSTTYPE", "IFS", "LINENO", "MACHTYPE", "MAILCHECK", "OPTARG",
		"OPTERR", "OPTIND", "OSTYPE", "PIPESTATUS", "PPID", "PS1", "PS2", "PS4", "PWD", "OLDPWD", "RANDOM",
		"SECONDS", "SHELL", "SHELLOPTS", "SHLVL", "SRANDOM", "TERM", "UID", "PATH", "HOME", "_":
		return true
	}
	return false
}

// unsetVar records `unset name`.
func (w *walker) unsetVar(name string) {
	w.setVar(name, "", false)
	b, _ := w.st.vars.get(name)
	b.how = unsetVal
	w.st.vars.set(name, b)
}

// varBinding returns what the source did to name.
func (w *walker) varBinding(name string) binding {
	b, _ := w.st.vars.get(name)
	return b
}

// inEnv reports whether name came in the environment the source starts
// with, where every variable is exported.
func (w *walker) inEnv(name string) bool {
	_, ok := w.opts.Env[name]
	return ok
}

// export marks name as exported: the programs the source starts see it.
func (w *walker) export(name string) {
	b, _ := w.st.vars.get(name)
	if b.exported && !b.private {
		return
	}
	b.exported, b.private = true, false
	w.st.vars.set(name, b)
}

// pathShadows reports whether PATH, as the source has left it, may make
// name run another program than under the PATH the source started with.
// A name with a slash is not looked up in PATH.
func (w *walker) pathShadows(name string) bool {
	if !w.st.pathSet || strings.Contains(name, "/") {
		return false
	}
	orig, ok := w.opts.Env["PATH"]
	cur, known := w.lookup("PATH")
	switch {
	case !ok || !known:
		return true
	case cur == orig:
		return false
	case w.opts.LookPath == nil || !absolutePath(orig) || !absolutePath(cur):
		// A relative directory is searched from the cwd of the moment,
		// which the lookup does not know.
		return true
	}
	// A program that the source writes into a directory of the new PATH
	// before it runs the name is not seen by the lookup. Such a write
	// makes the step at least git, the class a shadowed name gets, so it
	// is not looked for.
	a, okA := w.opts.LookPath(name, orig)
	b, okB := w.opts.LookPath(name, cur)
	return !okA || !okB || a != b
}

// absolutePath reports whether every directory of a PATH value is
// absolute (an empty one means the cwd).
func absolutePath(v string) bool {
	for dir := range strings.SplitSeq(v, ":") {
		if !strings.HasPrefix(dir, "/") {
			return false
		}
	}
	return true
}

// shadowVars are variables that change which program a name runs, or that
// inject code into every program or shell started after them.
var shadowVars = map[string]bool{
	"PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
	"BASH_ENV": true, "ENV": true, "BASH_LOADABLES_PATH": true, "PYTHONSTARTUP": true,
	"PYTHONPATH": true, "NODE_OPTIONS": true, "PERL5OPT": true, "PERL5LIB": true,
	"RUBYOPT": true, "SHELLOPTS": true, "PS4": true, "PROMPT_COMMAND": true, "CDPATH": true,
	"GCONV_PATH": true, "HOSTALIASES": true, "EDITOR": true, "VISUAL": true, "PAGER": true,
}

// gitProgramVar reports GIT_* variables that name a program git runs.
func gitProgramVar(name string) bool {
	switch name {
	case "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_SSH", "GIT_SSH_COMMAND",
		"GIT_ASKPASS", "GIT_EXEC_PATH", "GIT_PROXY_COMMAND", "GIT_SEQUENCE_EDITOR",
		"GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS",
		"GIT_CONFIG_COUNT", "GIT_DIR", "GIT_WORK_TREE", "GIT_TEMPLATE_DIR":
		return true
	}
	return strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_")
}

// source parses and walks one source text.
func (w *walker) source(src, name string) {
	if w.process {
		w.enterProcess()
		defer w.runTraps()
	}
	w.src, w.file = src, name
	w.checkRaw(src)
	variant := syntax.LangBash
	if w.opts.POSIX {
		variant = syntax.LangPOSIX
	}
	// The statements before a syntax error are walked: bash runs them.
	stmts, err := w.opts.Cache.parse(src, variant)
	for _, s := range stmts {
		if w.shared.full {
			break
		}
		w.stmt(s)
	}
	if err == nil {
		return
	}
	pe := &ParseError{Name: name, Msg: err.Error()}
	var se syntax.ParseError
	if asParseError(err, &se) {
		pe.Pos = Pos{int(se.Pos.Line()), int(se.Pos.Col())}
		pe.Msg = se.Text
		if se.Incomplete {
			pe.Msg += " (the input is incomplete)"
		}
	} else if lp, ok := err.(syntax.LangError); ok {
		pe.Pos = Pos{int(lp.Pos.Line()), int(lp.Pos.Col())}
		pe.Msg = lp.Error()
	}
	if w.outer != nil {
		pe.Msg = w.via + ": " + pe.Msg
		pe.Pos = *w.outer
		w.unknown(syntax.Pos{}, "nested code does not parse: "+pe.Msg, src)
		return
	}
	if w.facts.Err == nil {
		w.facts.Err = pe
	}
}

func asParseError(err error, se *syntax.ParseError) bool {
	switch e := err.(type) {
	case syntax.ParseError:
		*se = e
		return true
	case *syntax.ParseError:
		*se = *e
		return true
	}
	return false
}

// checkRaw flags text where bash and mvdan.cc/sh read the same bytes
// differently.
func (w *walker) checkRaw(src string) {
	// bash joins "$\<newline>(" into "$(" even inside double quotes.
	if i := strings.Index(src, "$\\\n"); i >= 0 {
		w.unknownAt(w.posOfOffset(i), "line continuation after $ (bash and the parser disagree)", snippet(src, i))
	}
}

func (w *walker) posOfOffset(off int) Pos {
	if w.outer != nil {
		return *w.outer
	}
	line := 1 + strings.Count(src0(w.src, off), "\n")
	col := off - strings.LastIndexByte(src0(w.src, off), '\n')
	return Pos{line, col}
}

func src0(s string, off int) string {
	if off > len(s) {
		off = len(s)
	}
	return s[:off]
}

func snippet(s string, i int) string {
	end := min(len(s), i+40)
	return s[i:end]
}

func (w *walker) pos(p syntax.Pos) Pos {
	if w.outer != nil {
		return *w.outer
	}
	return Pos{int(p.Line()), int(p.Col())}
}

func (w *walker) text(n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if s, ok := n.(*syntax.Stmt); ok && s.Cmd != nil && s.Semicolon.IsValid() {
		// A statement's end includes its ; or &: the command ends before.
		end = int(s.Cmd.End().Offset())
		for _, r := range s.Redirs {
			end = max(end, int(r.End().Offset()))
		}
	}
	if start < 0 || end > len(w.src) || start > end {
		return ""
	}
	return w.src[start:end]
}

func (w *walker) unknown(p syntax.Pos, reason, text string) {
	w.unknownAt(w.pos(p), reason, text)
}

func (w *walker) unknownAt(p Pos, reason, text string) {
	if w.via != "" {
		reason = reason + " (in " + w.via + ")"
	}
	w.facts.Unknown = append(w.facts.Unknown, Finding{Pos: p, Reason: reason, Text: text})
}

// record appends a command, unless the budget is spent.
func (w *walker) record(c Command) {
	if w.shared.full {
		return
	}
	w.shared.commands++
	if w.shared.commands > w.opts.MaxCommands {
		w.shared.full = true
		if w.shared.unrolling > 0 {
			// The loop being walked item by item is walked again as a
			// whole, within the budget.
			w.shared.overflow = true
			return
		}
		w.unknownAt(c.Pos, "too many commands to analyse", "")
		return
	}
	c.Via = w.via
	c.Depth = w.depth
	c.Root = c.Root || w.root
	c.Writes = dedupe(c.Writes)
	if c.Cwd != "" {
		// A program writes where its directory really is: `cd link`
		// follows the link for the kernel, whatever $PWD says.
		if real, ok := w.physical(c.Cwd, true); ok {
			c.Cwd = real
		} else {
			c.Cwd = ""
		}
	}
	if w.st.shadow {
		c.Shadowed = true
	}
	wordHosts(&c)
	w.server(&c)
	c.Signals = !c.Function && len(c.Argv) > 0 && !c.Argv[0].Dynamic && slices.Contains(signalPrograms, path.Base(c.Argv[0].Value))
	pushWords(&c)
	divertWords(&c)
	namedPaths(&c)
	w.facts.Commands = append(w.facts.Commands, c)
	w.noteRepoWrites(c)
}

// signalPrograms are the programs that signal other processes
// ([Command].Signals).
var signalPrograms = []string{"kill", "pkill", "killall", "fuser"}

// noteRepoWrites keeps what gitHooks asks of every command recorded: the
// writes into a repository's own files, and the trees written, by any
// program but git (which writes its own files).
func (w *walker) noteRepoWrites(c Command) {
	if len(c.Writes) == 0 || len(c.Argv) > 0 && !c.Argv[0].Dynamic && baseName(c.Argv[0].Value) == "git" {
		return
	}
	for _, wr := range c.Writes {
		if !wr.Resolved || harmlessDevice(wr.Path) {
			continue
		}
		if strings.Contains(wr.Path+"/", "/.git/") {
			w.shared.repoWrites = append(w.shared.repoWrites, wr.Path)
		} else if wr.Tree {
			w.shared.treeWrites = append(w.shared.treeWrites, wr.Path)
		}
	}
}

// nested returns a walker for code found inside src at pos.
func (w *walker) nested(at syntax.Pos, via string) *walker {
	p := w.pos(at)
	n := &walker{opts: w.opts, facts: w.facts, st: w.st, shared: w.shared,
		outer: &p, via: via, depth: w.depth + 1, root: w.root, hidden: w.hidden, hideAll: w.hideAll,
		stdinTaken: w.stdinTaken, process: newProcess(via)}
	if n.process {
		cloned := false
		w.st.vars.each(func(name string, b binding) bool {
			if b.private && !w.hidden[name] {
				if !cloned {
					n.hidden, cloned = maps.Clone(w.hidden), true
					if n.hidden == nil {
						n.hidden = map[string]bool{}
					}
				}
				n.hidden[name] = true
			}
			return true
		})
	}
	if w.via != "" {
		n.via = w.via + " > " + via
	}
	n.cfg = &expand.Config{Env: environ{n}}
	return n
}

// code walks src as nested shell code in the current state.
func (w *walker) code(at syntax.Pos, via, src string) {
	if w.depth+1 > w.opts.MaxDepth {
		w.unknown(at, "nested code is too deep to analyse", via)
		return
	}
	n := w.nested(at, via)
	n.source(src, "")
	if !n.process {
		w.st = n.st
	}
}

// newProcess reports whether nested code reached by via runs in a process
// of its own, rather than in the shell that reaches it (eval, an alias,
// source, a trap).
func newProcess(via string) bool {
	return !(via == "eval" || via == "trap" || strings.HasPrefix(via, "alias ") ||
		strings.HasPrefix(via, "source ") || strings.HasPrefix(via, ". "))
}

// enterProcess gives nested code that runs in a process of its own a
// state of its own. The process sees neither the aliases nor the functions
// of its parent, except the exported functions, which a child bash
// imports and a child sh may not.
func (w *walker) enterProcess() {
	st := w.st.clone()
	st.traps = nil
	st.aliases = table[string]{}
	st.funcs = table[*funcDef]{}
	w.st.funcs.each(func(name string, fd *funcDef) bool {
		if fd.exported {
			m := *fd
			m.maybe = true
			st.funcs.set(name, &m)
		}
		return true
	})
	w.st = st
}

// subshell runs fn on a copy of the state, as bash does for ( ), pipelines,
// substitutions and background jobs. A subshell does not inherit the
// traps of its parent; its own run when it ends.
func (w *walker) subshell(fn func()) {
	saved := w.st
	w.st = saved.clone()
	w.st.traps = nil
	fn()
	w.runTraps()
	w.st = saved
}

// branch runs fn, which may or may not run (or may run many times), and
// afterwards forgets the cwd and the variables that fn changed.
func (w *walker) branch(loop bool, fn func()) {
	before := w.st.clone()
	if loop {
		// A loop body sees the state its previous iteration left. Walk the
		// body once into a scratch record to learn what it changes, then
		// walk it for real with those things unknown; nested deeper than
		// maxProbes, take it to change everything.
		w.loops++
		defer func() { w.loops-- }()
		if w.loops <= maxProbes {
			w.probe(fn)
		} else {
			w.forgetAll()
		}
		before = w.st.clone()
	}
	fn()
	forgetChanges(w.st, before, w.st)
}

// probe walks fn into a scratch record, then leaves the state as it was
// before, less what fn changed.
func (w *walker) probe(fn func()) {
	before := w.st.clone()
	facts, sh := w.facts, w.shared
	w.facts = &Facts{}
	w.shared = &shared{calling: maps.Clone(sh.calling), expanding: maps.Clone(sh.expanding), unroll: sh.unroll}
	fn()
	probe := w.st
	w.facts, w.shared, w.st = facts, sh, before.clone()
	forgetChanges(w.st, before, probe)
}

// maxProbes is how deep loop bodies are probed before they are taken to
// change everything (bash's own test suite nests 200 for loops).
const maxProbes = 6

// forgetAll makes the walk forget the cwd, the directory stack and the
// value of every variable: what a loop body nested too deep to probe may
// have changed.
func (w *walker) forgetAll() {
	w.st.cwd, w.st.oldpwd, w.st.dirs = "", "", nil
	var names []string
	w.st.vars.each(func(name string, b binding) bool {
		if b.how != unknownVal {
			names = append(names, name)
		}
		return true
	})
	for _, name := range names {
		b, _ := w.st.vars.get(name)
		b.value, b.how = "", unknownVal
		w.st.vars.set(name, b)
	}
}

// forgetChanges makes dst forget what differs between before and after.
func forgetChanges(dst, before, after *state) {
	if after.cwd != before.cwd {
		dst.cwd = ""
	}
	if after.oldpwd != before.oldpwd {
		dst.oldpwd = ""
	}
	if !equalStrings(after.dirs, before.dirs) {
		dst.dirs = nil
	}
	differing(&before.vars, &after.vars, func(name string) {
		a, _ := after.vars.get(name)
		b, _ := before.vars.get(name)
		if a.how == unknownVal || a.how == knownVal && (b.how != knownVal || b.value != a.value) {
			d, _ := dst.vars.get(name)
			if d.how != unknownVal {
				d.value, d.how = "", unknownVal
				dst.vars.set(name, d)
			}
		}
	})
	// A function defined, redefined or unset in fn may or may not be
	// defined after it.
	differing(&before.funcs, &after.funcs, func(name string) {
		a, _ := after.funcs.get(name)
		b, _ := before.funcs.get(name)
		if a == b {
			return
		}
		fd := a
		if fd == nil {
			fd = b
		}
		if d, _ := dst.funcs.get(name); d != nil && d.maybe && d.body == fd.body {
			return
		}
		m := *fd
		m.maybe = true
		dst.funcs.set(name, &m)
	})
	if after.shadow {
		dst.shadow = true
	}
	if after.pathSet {
		dst.pathSet = true
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (w *walker) stmts(list []*syntax.Stmt) {
	for _, s := range list {
		w.stmt(s)
	}
}

func (w *walker) stmt(s *syntax.Stmt) {
	if w.shared.full || s == nil {
		return
	}
	w.shared.unroll.walked++
	if !w.stdinTaken && redirectsStdin(s) {
		w.stdinTaken = true
		defer func() { w.stdinTaken = false }()
	}
	if s.Background || s.Coprocess {
		w.subshell(func() { w.stmtCmd(s) })
		return
	}
	w.stmtCmd(s)
}

// redirectsStdin reports whether s takes its standard input from a file,
// a here-document or another descriptor.
// echoed returns the text s writes when it is echo or printf of literal
// words with no redirection (the builtins, not a function or an alias of
// that name): what a pipe from it carries.
func (w *walker) echoed(s *syntax.Stmt) (string, bool) {
	ce, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(s.Redirs) > 0 || len(ce.Assigns) > 0 || len(ce.Args) < 1 {
		return "", false
	}
	args := w.words(ce.Args)
	for _, a := range args {
		if a.Dynamic {
			return "", false
		}
	}
	name := args[0].Value
	if fd, _ := w.st.funcs.get(name); fd != nil {
		return "", false
	}
	if _, ok := w.st.aliases.get(name); ok {
		return "", false
	}
	words := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		words = append(words, a.Value)
	}
	switch {
	case name == "echo" && (len(words) == 0 || !strings.HasPrefix(words[0], "-")):
		text := strings.Join(words, " ")
		if strings.Contains(text, "\\") {
			return "", false // xpg_echo would read escapes
		}
		return text + "\n", true
	case name == "printf" && len(words) == 1 && !strings.ContainsAny(words[0], "%\\"):
		return words[0], true
	}
	return "", false
}

func redirectsStdin(s *syntax.Stmt) bool {
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			if r.N == nil || r.N.Value == "0" {
				return true
			}
		}
	}
	return false
}

// fromTerminal reports whether a program run by s reads the terminal: the
// source was typed at an interactive prompt and nothing redirects or pipes
// its standard input.
func (w *walker) fromTerminal(s *syntax.Stmt) bool {
	return w.opts.Terminal && !w.stdinTaken && !redirectsStdin(s)
}

// stdinProgram reports a program that reads its code from standard input:
// at a terminal, an interactive session of it (an unknown program);
// otherwise code the parser cannot see.
func (w *walker) stdinProgram(s *syntax.Stmt, c *Command, reason string) {
	if w.fromTerminal(s) {
		c.Opaque = true
		return
	}
	w.unknownAt(c.Pos, reason, c.Text)
}

func (w *walker) stmtCmd(s *syntax.Stmt) {
	switch c := s.Cmd.(type) {
	case nil:
		// Only redirections: `> file` truncates file.
		writes := w.redirects(s, nil)
		w.record(Command{Pos: w.pos(s.Pos()), Text: w.text(s), Writes: writes,
			WritesKnown: true, Builtin: true, Cwd: w.st.cwd})
	case *syntax.CallExpr:
		w.call(s, c)
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.Pipe, syntax.PipeAll:
			w.subshell(func() { w.stmt(c.X) })
			saved := w.stdinTaken
			w.stdinTaken = true
			if text, ok := w.echoed(c.X); ok {
				if _, simple := c.Y.Cmd.(*syntax.CallExpr); simple {
					w.piped = &text
				}
			}
			w.subshell(func() { w.stmt(c.Y) })
			w.stdinTaken, w.piped = saved, nil
		case syntax.OrStmt:
			w.stmt(c.X)
			w.branch(false, func() { w.stmt(c.Y) })
		default:
			w.stmt(c.X)
			w.stmt(c.Y)
		}
		w.compoundRedirs(s)
	case *syntax.Subshell:
		w.subshell(func() { w.stmts(c.Stmts) })
		w.compoundRedirs(s)
	case *syntax.Block:
		w.stmts(c.Stmts)
		w.compoundRedirs(s)
	case *syntax.IfClause:
		w.ifClause(c)
		w.compoundRedirs(s)
	case *syntax.WhileClause:
		w.branch(true, func() {
			w.stmts(c.Cond)
			w.stmts(c.Do)
		})
		w.compoundRedirs(s)
	case *syntax.ForClause:
		w.forClause(s, c)
	case *syntax.CaseClause:
		w.subs(c.Word)
		w.branch(false, func() {
			for _, item := range c.Items {
				for _, p := range item.Patterns {
					w.subs(p)
				}
				w.branch(false, func() { w.stmts(item.Stmts) })
			}
		})
		w.compoundRedirs(s)
	case *syntax.FuncDecl:
		if c.Name != nil {
			fd := &funcDef{body: c.Body, w: w}
			fd.stands = w.file != "" && w.opts.Stands != nil && w.opts.Stands(w.file, c.Name.Value)
			w.st.funcs.set(c.Name.Value, fd)
		}
	case *syntax.ArithmCmd:
		w.subs(c.X)
		w.quotedArith(c.X)
		w.builtinCmd(s, "((")
	case *syntax.LetClause:
		for _, x := range c.Exprs {
			w.subs(x)
			w.quotedArith(x)
		}
		w.builtinCmd(s, "let")
	case *syntax.TestClause:
		w.subs(c.X)
		w.builtinCmd(s, "[[")
	case *syntax.DeclClause:
		w.decl(s, c)
	case *syntax.TimeClause:
		w.stmt(c.Stmt)
	case *syntax.CoprocClause:
		st := c.Stmt
		if call, ok := st.Cmd.(*syntax.CallExpr); ok {
			cp := *st
			if c.Name != nil {
				// bash takes NAME only before a compound command: in
				// `coproc a b` the name is the program.
				call = &syntax.CallExpr{Assigns: call.Assigns, Args: append([]*syntax.Word{c.Name}, call.Args...)}
				cp.Cmd = call
			}
			// mvdan puts the statement at its last word: move it to the
			// command's start.
			cp.Position = call.Pos()
			st = &cp
		}
		w.subshell(func() { w.stmt(st) })
	case *syntax.TestDecl:
		w.subs(c.Description)
		w.stmt(c.Body)
	default:
		w.unknown(s.Pos(), "construct the parser does not model", w.text(s))
	}
}

// ifClause walks an if. A condition the parser can decide (a test of
// text it knows) picks its branch; from the first it cannot, the rest may
// or may not run.
func (w *walker) ifClause(c *syntax.IfClause) {
	for ic := c; ic != nil; ic = ic.Else {
		if len(ic.Cond) == 0 { // else, reached
			w.stmts(ic.Then)
			return
		}
		truth, known := w.condTruth(ic.Cond)
		if !known {
			// The condition runs whatever it decides (Codex's wrapper
			// sources its snapshot in one); then one branch or the
			// rest of the chain may.
			w.stmts(ic.Cond)
			w.branch(false, func() { w.stmts(ic.Then) })
			if ic.Else != nil {
				w.branch(false, func() { w.ifClause(ic.Else) })
			}
			return
		}
		w.stmts(ic.Cond)
		if truth {
			w.stmts(ic.Then)
			return
		}
	}
}

// condTruth decides a condition that is one test of known text:
// `[ -n WORD ]`, `test -z WORD`, `[ A = B ]`, `[[ -n WORD ]]` and the
// like, as harness wrappers write `if [ -n "${X+x}" ]` to save a variable.
func (w *walker) condTruth(cond []*syntax.Stmt) (truth, known bool) {
	if len(cond) != 1 || cond[0].Background || cond[0].Coprocess || len(cond[0].Redirs) > 0 {
		return false, false
	}
	st := cond[0]
	var ops []string
	switch x := st.Cmd.(type) {
	case *syntax.BinaryCmd:
		// A && B, A || B of such tests (Codex: `[ -z "${X+x}" ] || [ … ]`),
		// which run nothing but tests.
		if st.Negated || x.Op != syntax.AndStmt && x.Op != syntax.OrStmt {
			return false, false
		}
		a, okA := w.condTruth([]*syntax.Stmt{x.X})
		if okA && a == (x.Op == syntax.OrStmt) {
			return a, true // B does not run
		}
		b, okB := w.condTruth([]*syntax.Stmt{x.Y})
		return b, okA && okB
	case *syntax.CallExpr:
		if len(x.Assigns) > 0 || len(x.Args) == 0 {
			return false, false
		}
		for _, word := range x.Args {
			args := w.word(word)
			if len(args) != 1 || args[0].Dynamic || args[0].Glob && args[0].Value != "[" && args[0].Value != "]" {
				return false, false
			}
			ops = append(ops, args[0].Value)
		}
		name := ops[0]
		if _, alias := w.st.aliases.get(name); alias {
			return false, false
		}
		if fd, _ := w.st.funcs.get(name); fd != nil {
			return false, false
		}
		switch {
		case name == "[" && ops[len(ops)-1] == "]":
			ops = ops[1 : len(ops)-1]
		case name == "test":
			ops = ops[1:]
		default:
			return false, false
		}
	case *syntax.TestClause:
		u, ok := x.X.(*syntax.UnaryTest)
		if !ok || u.Op != syntax.TsNempStr && u.Op != syntax.TsEmpStr {
			return false, false
		}
		word, ok := u.X.(*syntax.Word)
		if !ok {
			return false, false
		}
		args := w.word(word)
		if len(args) != 1 || args[0].Dynamic {
			return false, false
		}
		ops = []string{u.Op.String(), args[0].Value}
	default:
		return false, false
	}
	switch {
	case len(ops) == 1:
		truth = ops[0] != ""
	case len(ops) == 2 && ops[0] == "-n":
		truth = ops[1] != ""
	case len(ops) == 2 && ops[0] == "-z":
		truth = ops[1] == ""
	case len(ops) == 3 && (ops[1] == "=" || ops[1] == "=="):
		truth = ops[0] == ops[2]
	case len(ops) == 3 && ops[1] == "!=":
		truth = ops[0] != ops[2]
	default:
		return false, false
	}
	if st.Negated {
		truth = !truth
	}
	return truth, true
}

// compoundRedirs records the redirections of a compound command, such as
// `{ …; } > log` or `while …; done < input`.
func (w *walker) compoundRedirs(s *syntax.Stmt) {
	if len(s.Redirs) == 0 {
		return
	}
	writes := w.redirects(s, nil)
	if len(writes) == 0 {
		return
	}
	w.record(Command{Pos: w.pos(s.Pos()), Text: w.text(s), Writes: writes,
		WritesKnown: true, Builtin: true, Cwd: w.st.cwd})
}

func (w *walker) builtinCmd(s *syntax.Stmt, name string) {
	w.record(Command{Pos: w.pos(s.Pos()), Text: w.text(s),
		Argv: []Arg{{Value: name}}, Builtin: true, WritesKnown: true,
		Writes: w.redirects(s, nil), Cwd: w.st.cwd})
}

// subs walks the command and process substitutions inside a node, and
// flags the expansions that run code the parser cannot see.
func (w *walker) subs(n syntax.Node) {
	if n == nil {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst:
			w.subshell(func() { w.stmts(x.Stmts) })
			return false
		case *syntax.ProcSubst:
			w.subshell(func() { w.stmts(x.Stmts) })
			return false
		case *syntax.ParamExp:
			if x.Exp != nil && x.Exp.Op == syntax.OtherParamOps && x.Exp.Word != nil &&
				strings.Contains(w.text(x.Exp.Word), "P") {
				w.unknown(x.Pos(), "${x@P} runs the command substitutions in a value", w.text(x))
			}
			if x.Excl && x.Names == 0 && x.Index == nil {
				w.unknown(x.Pos(), "indirect expansion ${!x} may evaluate a subscript", w.text(x))
			}
			if x.Exp != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) && x.Param != nil {
				w.unmodelledAssign(x.Param.Value) // ${x:=value}
			}
		case *syntax.ArithmExp:
			w.quotedArith(x.X)
		case *syntax.BinaryArithm:
			if assignOp(x.Op) {
				w.unmodelledAssign(arithName(x.X))
			}
		case *syntax.UnaryArithm:
			if x.Op == syntax.Inc || x.Op == syntax.Dec {
				w.unmodelledAssign(arithName(x.X))
			}
		case *syntax.ExtGlob:
			w.unknown(x.Pos(), "extended glob (bash rejects it unless extglob is on; the parser accepts it)", w.text(x))
		case *syntax.SglQuoted:
			w.checkLiteral(x.Pos(), x.Value)
		case *syntax.Lit:
			w.checkLiteral(x.Pos(), x.Value)
		}
		return true
	})
}

// checkLiteral flags literal text that bash would run if it is ever
// evaluated as an arithmetic subscript: i='a[$(cmd)]'; echo $((i)).
func (w *walker) checkLiteral(p syntax.Pos, s string) {
	w.checkLiteralAt(w.pos(p), s)
}

// redirects walks the redirections of s (and extra ones, for wrappers) and
// returns the paths they write.
func (w *walker) redirects(s *syntax.Stmt, extra []*syntax.Redirect) []Write {
	var writes []Write
	for _, r := range append(s.Redirs, extra...) {
		if r.N != nil && strings.HasPrefix(r.N.Value, "{") {
			// {var}>file assigns a new fd to var.
			w.setVar(strings.Trim(r.N.Value, "{}"), "", false)
		}
		if r.Hdoc != nil {
			w.subs(r.Hdoc)
		}
		if r.Word == nil {
			continue
		}
		w.subs(r.Word)
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			continue
		}
		args := w.word(r.Word)
		if len(args) != 1 {
			writes = append(writes, Write{Path: w.text(r.Word), Redirect: true})
			continue
		}
		a := args[0]
		target := a.Value
		switch r.Op {
		case syntax.DplIn, syntax.DplOut:
			if !a.Dynamic && (target == "-" || isDigits(strings.TrimSuffix(target, "-"))) {
				continue // fd duplication or close
			}
		}
		input := r.Op == syntax.RdrIn || r.Op == syntax.DplIn
		if !a.Dynamic && harmlessDevice(target) {
			continue
		}
		if input && !(strings.HasPrefix(target, "/dev/tcp/") || strings.HasPrefix(target, "/dev/udp/")) {
			continue
		}
		wr := w.resolve(a)
		wr.Redirect = true
		wr.Append = r.Op == syntax.AppOut || r.Op == syntax.AppAll
		writes = append(writes, wr)
	}
	return writes
}

func harmlessDevice(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "/dev/zero", "/dev/full":
		return true
	}
	if rest, ok := strings.CutPrefix(p, "/dev/fd/"); ok && isDigits(rest) {
		return true
	}
	if rest, ok := strings.CutPrefix(p, "/proc/self/fd/"); ok && isDigits(rest) {
		return true
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// resolve turns an argument into a Write, resolved against the cwd.
func (w *walker) resolve(a Arg) Write {
	return w.locate(a, w.st.cwd, true)
}

// locate resolves a written path against cwd as the kernel will when it
// opens it: through symbolic links (those that exist, with
// [Options.Readlink], and those the source made), with `..` taken after
// them. follow says whether a link in the last component is followed
// (rm and unlink act on the link itself).
func (w *walker) locate(a Arg, cwd string, follow bool) Write {
	wr, raw := place(a, cwd)
	if raw == "" {
		return wr
	}
	if !follow && strings.HasSuffix(raw, "/") {
		follow = true // link/ names the directory it points to
	}
	real, ok := w.physical(raw, follow)
	if !ok {
		return Write{Path: wr.Path, Tree: wr.Tree}
	}
	wr.Path = real
	return wr
}

// maxLinks is how many symbolic links one path may go through, as
// Linux's limit (ELOOP beyond it).
const maxLinks = 40

// physical resolves the absolute path raw component by component, as
// the kernel does: a symbolic link is replaced by its target before the
// next component, so `link/..` is the parent of the link's target, not
// the link's directory. ok is false for a loop of links.
func (w *walker) physical(raw string, follow bool) (string, bool) {
	if len(w.st.links) == 0 && w.opts.Readlink == nil {
		return path.Clean("/" + raw), true // no link to follow: the text is the path
	}
	rest := strings.Split(raw, "/")
	done := "/"
	hops := 0
	for len(rest) > 0 {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := done + "/" + comp // done is clean, comp one name
		if done == "/" {
			next = "/" + comp
		}
		last := true
		for _, r := range rest {
			if r != "" && r != "." {
				last = false
				break
			}
		}
		if last && !follow {
			done = next
			continue
		}
		target, ok := w.st.links[next]
		if !ok {
			target, ok = w.readlink(next)
		}
		if !ok {
			done = next
			continue
		}
		if hops++; hops > maxLinks {
			return "", false
		}
		if strings.HasPrefix(target, "/") {
			done = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, true
}

type readlinkResult struct {
	target string
	ok     bool
}

// readlink is Options.Readlink, asked once per path.
func (w *walker) readlink(p string) (string, bool) {
	if w.opts.Readlink == nil {
		return "", false
	}
	if r, ok := w.shared.readlinks[p]; ok {
		return r.target, r.ok
	}
	t, err := w.opts.Readlink(p)
	if w.shared.readlinks == nil {
		w.shared.readlinks = map[string]readlinkResult{}
	}
	w.shared.readlinks[p] = readlinkResult{t, err == nil}
	return t, err == nil
}

// resolveIn resolves a path against cwd by its text alone, `..` taken
// lexically; for a written path use [walker.locate].
func resolveIn(a Arg, cwd string) Write {
	wr, _ := place(a, cwd)
	return wr
}

// place returns the Write for a path and, when it is resolved, the
// absolute path it names before cleaning ("" otherwise). A glob is
// known only up to the directory before its first pattern character,
// and everything under it may be written; a `..` after a pattern
// component leaves that directory for wherever the match leads (a
// symbolic link leads anywhere), so such a path is unresolved.
func place(a Arg, cwd string) (Write, string) {
	if a.Dynamic {
		return Write{Path: a.Value}, ""
	}
	p := a.Value
	wr := Write{Path: p}
	if a.Glob {
		i := strings.IndexAny(p, "*?[")
		if after := p[i:]; slices.Contains(strings.Split(after, "/")[1:], "..") {
			return wr, ""
		}
		p = p[:i]
		if j := strings.LastIndexByte(p, '/'); j >= 0 {
			p = p[:j+1]
		} else {
			p = ""
		}
		wr.Tree = true
		if p == "" {
			p = "."
		}
	}
	switch {
	case strings.HasPrefix(p, "/"):
		wr.Path, wr.Resolved = path.Clean(p), true
		return wr, p
	case cwd != "":
		wr.Path, wr.Resolved = path.Join(cwd, p), true
		return wr, cwd + "/" + p
	}
	return wr, ""
}

func cleanAbs(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	return path.Clean(p)
}

// word expands one word into arguments. A word expands to several when it
// holds a brace expansion or an unquoted known variable with spaces.
func (w *walker) word(word *syntax.Word) []Arg {
	if word == nil {
		return nil
	}
	glob := false
	dynamic := false
	for i, part := range word.Parts {
		switch x := part.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(x.Value, "*?[") {
				glob = true
			}
			if i == 0 && strings.HasPrefix(x.Value, "~") {
				user, _, _ := strings.Cut(x.Value[1:], "/")
				if _, home := w.lookup("HOME"); user != "" || !home {
					dynamic = true // ~user needs the password database
				}
			}
		case *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, p := range x.Parts {
				if !w.staticPart(p) {
					dynamic = true
				}
			}
		case *syntax.ExtGlob:
			glob = true
		default:
			if !w.staticPart(part) {
				dynamic = true
			}
		}
	}
	if dynamic {
		return []Arg{{Value: w.text(word), Dynamic: true, Glob: glob}}
	}
	if len(word.Parts) == 1 {
		if lit, ok := word.Parts[0].(*syntax.Lit); ok && !strings.ContainsAny(lit.Value, "\\~{") {
			return []Arg{{Value: lit.Value, Glob: glob}}
		}
	}
	fields, err := expand.Fields(w.cfg, word)
	if err != nil {
		return []Arg{{Value: w.text(word), Dynamic: true, Glob: glob}}
	}
	args := make([]Arg, len(fields))
	for i, f := range fields {
		args[i] = Arg{Value: f, Glob: glob}
	}
	return args
}

// staticPart reports whether a word part expands to text the parser knows.
func (w *walker) staticPart(p syntax.WordPart) bool {
	switch x := p.(type) {
	case *syntax.Lit, *syntax.SglQuoted:
		return true
	case *syntax.ParamExp:
		if x.Param == nil || x.Excl || x.Index != nil || x.Exp != nil && x.Exp.Op == syntax.OtherParamOps {
			return false
		}
		if x.Param.Value == "@" && w.st.args != nil {
			return x.Exp == nil && x.Repl == nil && x.Slice == nil && !x.Length
		}
		if _, ok := w.lookup(x.Param.Value); !ok && !w.isUnset(x.Param.Value) {
			return false
		}
		for _, sub := range []*syntax.Word{expWord(x), replWord(x, true), replWord(x, false)} {
			if sub != nil {
				for _, sp := range sub.Parts {
					if !w.staticPart(sp) {
						return false
					}
				}
			}
		}
		return x.Slice == nil
	case *syntax.DblQuoted:
		for _, sp := range x.Parts {
			if !w.staticPart(sp) {
				return false
			}
		}
		return true
	}
	return false
}

func expWord(x *syntax.ParamExp) *syntax.Word {
	if x.Exp == nil {
		return nil
	}
	return x.Exp.Word
}

func replWord(x *syntax.ParamExp, orig bool) *syntax.Word {
	if x.Repl == nil {
		return nil
	}
	if orig {
		return x.Repl.Orig
	}
	return x.Repl.With
}

// words expands a list of words.
func (w *walker) words(list []*syntax.Word) []Arg {
	var args []Arg
	for _, word := range list {
		args = append(args, w.word(word)...)
	}
	return args
}

// environ lets mvdan's expander see the variables the walker knows.
type environ struct{ w *walker }

func (e environ) Get(name string) expand.Variable {
	if name == "@" && e.w.st.args != nil {
		return expand.Variable{Set: true, Kind: expand.Indexed, List: e.w.st.args}
	}
	v, ok := e.w.lookup(name)
	if !ok {
		return expand.Variable{}
	}
	return expand.Variable{Set: true, Kind: expand.String, Str: v}
}

func (e environ) Each(func(string, expand.Variable) bool) {}

// dedupe drops repeated writes, keeping the first of each.
func dedupe(ws []Write) []Write {
	for i := 1; i < len(ws); i++ {
		for j := 0; j < i; j++ {
			if ws[i] == ws[j] {
				ws = append(ws[:i], ws[i+1:]...)
				i--
				break
			}
		}
	}
	return ws
}
