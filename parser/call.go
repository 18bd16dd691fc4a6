package parser

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// call handles one simple command: its assignments, words and redirections.
func (w *walker) call(s *syntax.Stmt, ce *syntax.CallExpr) {
	var env []string
	shadow := false
	for _, a := range ce.Assigns {
		w.assignSubs(a)
	}
	for _, word := range ce.Args {
		w.subs(word)
	}
	for _, a := range ce.Assigns {
		if a.Name == nil {
			continue
		}
		name := a.Name.Value
		if len(ce.Args) > 0 {
			env = append(env, name)
			if shadowVars[name] || gitProgramVar(name) {
				shadow = true
			}
			w.envCode(s, name, a.Value)
			continue
		}
		w.assign(a)
		w.envCode(s, name, a.Value)
	}
	argv := w.words(ce.Args)
	writes := w.redirects(s, nil)
	if len(argv) == 0 {
		if len(writes) > 0 {
			w.record(Command{Pos: w.pos(s.Pos()), Text: w.text(s), Writes: writes,
				WritesKnown: true, Builtin: true, Cwd: w.st.cwd})
		}
		return
	}
	c := Command{Pos: w.pos(s.Pos()), Text: w.text(s), Argv: argv, Env: env,
		Cwd: w.st.cwd, Writes: writes, Shadowed: shadow}
	c.Stdin, _ = w.stdinText(s)
	w.command(s, c)
}

func (w *walker) assignSubs(a *syntax.Assign) {
	if a.Index != nil {
		w.subs(a.Index)
	}
	if a.Value != nil {
		w.subs(a.Value)
	}
	if a.Array != nil {
		w.subs(a.Array)
	}
}

// assign records a shell variable assignment.
func (w *walker) assign(a *syntax.Assign) {
	name := a.Name.Value
	if a.Index != nil || a.Array != nil || a.Append || a.Value == nil {
		w.setVar(name, "", a.Value == nil && a.Array == nil && a.Index == nil && !a.Append)
		return
	}
	if v, ok := w.mktempValue(a.Value); ok {
		w.setVar(name, v, true)
		return
	}
	args := w.word(a.Value)
	// Assignments are not field-split: a known value is one string.
	if len(args) == 1 && !args[0].Dynamic {
		w.setVar(name, args[0].Value, true)
		return
	}
	w.setVar(name, "", false)
}

// decl handles declare, local, export, readonly and typeset.
func (w *walker) decl(s *syntax.Stmt, d *syntax.DeclClause) {
	for _, a := range d.Args {
		w.assignSubs(a)
	}
	variant := d.Variant.Value
	if variant == "nameref" {
		w.shared.unroll.namerefs = true
	}
	exporting := variant == "export"
	for _, a := range d.Args {
		if a.Naked && a.Name == nil {
			for _, arg := range w.word(a.Value) {
				if !arg.Dynamic && strings.HasPrefix(arg.Value, "-") && strings.Contains(arg.Value, "x") {
					exporting = true // declare -x
				}
			}
		}
	}
	defer func() {
		if !exporting {
			return
		}
		for _, a := range d.Args {
			if a.Name != nil {
				w.export(a.Name.Value)
			}
		}
	}()
	for _, a := range d.Args {
		switch {
		case a.Naked && a.Name == nil:
			args := w.word(a.Value)
			for _, arg := range args {
				if !arg.Dynamic && strings.HasPrefix(arg.Value, "-") && strings.Contains(arg.Value, "n") {
					// declare -n: assigning one name may assign another.
					w.shared.unroll.namerefs = true
				}
				if arg.Dynamic {
					w.unknown(a.Pos(), variant+" of a non-literal name", arg.Value)
				} else if name, val, ok := strings.Cut(arg.Value, "="); ok {
					w.setVar(name, val, true)
				}
			}
		case a.Name != nil && a.Naked:
			if shadowVars[a.Name.Value] && variant == "export" {
				// export of a name already set changes nothing we track.
				continue
			}
			if _, ok := w.st.vars[a.Name.Value]; !ok && variant != "export" {
				w.setVar(a.Name.Value, "", true)
			}
		case a.Name != nil:
			w.assign(a)
			w.envCode(s, a.Name.Value, a.Value)
		}
	}
	c := Command{Pos: w.pos(s.Pos()), Text: w.text(s), Argv: []Arg{{Value: variant}},
		Builtin: true, WritesKnown: true, Cwd: w.st.cwd, Writes: w.redirects(s, nil)}
	w.record(c)
}

// command dispatches a command whose argv is known: functions, wrappers,
// builtins and programs with known behaviour.
func (w *walker) command(s *syntax.Stmt, c Command) {
	if w.shared.full {
		return
	}
	name := c.Name()
	if name == "" {
		if len(c.Argv) > 0 {
			w.unknownAt(c.Pos, "command name is not literal", c.Argv[0].Value)
		}
		w.record(c)
		return
	}
	if val, ok := w.shared.aliases[name]; ok {
		c.Shadowed = true
		w.aliasUse(s, c, val)
	}
	if fd := w.shared.funcs[name]; fd != nil && !wrappedAway(c.Wrappers) {
		c.Function = true
		c.Builtin = true
		c.WritesKnown = true
		w.record(c)
		w.callFunc(name, fd, c.Argv[1:])
		return
	}
	if spec, ok := wrapperFor(baseName(name)); ok {
		if w.unwrap(s, c, spec) {
			return
		}
	}
	if !strings.Contains(name, "/") {
		if b, ok := builtin(name); ok {
			c.Builtin = true
			if b != nil {
				b(w, s, &c)
			} else {
				c.WritesKnown = true
			}
			w.record(c)
			return
		}
	}
	w.program(s, &c)
	if c.Argv != nil { // program clears Argv when it recorded c itself
		w.record(c)
	}
}

// wrappedAway reports whether a wrapper makes the shell skip functions.
func wrappedAway(ws []string) bool {
	for _, x := range ws {
		if x != "exec" && x != "time" {
			return true
		}
	}
	return false
}

func (w *walker) callFunc(name string, fd *funcDef, args []Arg) {
	if w.shared.calling[name] || w.depth+1 > w.opts.MaxDepth {
		return
	}
	w.shared.calling[name] = true
	defer delete(w.shared.calling, name)
	// Walk the body with the caller's state but the defining source's
	// positions.
	saved := fd.w.st
	savedArgs := w.st.args
	w.st.args = []string{}
	for _, a := range args {
		if a.Dynamic {
			w.st.args = nil
			break
		}
		w.st.args = append(w.st.args, a.Value)
	}
	fd.w.st = w.st
	fd.w.stmt(fd.body)
	w.st = fd.w.st
	w.st.args = savedArgs
	fd.w.st = saved
}

type builtinFunc func(w *walker, s *syntax.Stmt, c *Command)

// builtin returns the handler of a bash builtin; a nil handler means the
// builtin has no effect the parser models.
func builtin(name string) (builtinFunc, bool) {
	switch name {
	case ":", "true", "false", "echo", "test", "[", "pwd", "exit", "return", "break",
		"continue", "shift", "wait", "jobs", "fg", "bg", "disown", "times", "type", "help",
		"caller", "compgen", "complete", "compopt", "dirs", "logout", "suspend", "umask",
		"ulimit", "history", "shopt", "let", "local", "declare", "typeset",
		"readonly", "unalias", "set":
		return nil, true
	case "kill":
		return bKill, true
	case "printf":
		return bPrintf, true
	case "getopts", "read", "mapfile", "readarray":
		return bRead, true
	case "unset":
		return bUnset, true
	case "export":
		return bExport, true
	case "cd":
		return bCd, true
	case "pushd":
		return bPushd, true
	case "popd":
		return bPopd, true
	case "eval":
		return bEval, true
	case "source", ".":
		return bSource, true
	case "trap":
		return bTrap, true
	case "alias":
		return bAlias, true
	case "hash":
		return bHash, true
	case "enable":
		return bEnable, true
	case "fc":
		return bFc, true
	}
	return nil, false
}

func operands(c *Command) []Arg {
	var ops []Arg
	end := false
	for _, a := range c.Argv[1:] {
		if !end && !a.Dynamic && a.Value == "--" {
			end = true
			continue
		}
		if !end && !a.Dynamic && len(a.Value) > 1 && a.Value[0] == '-' {
			continue
		}
		ops = append(ops, a)
	}
	return ops
}

func bCd(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	ops := operands(c)
	var target string
	switch {
	case len(ops) == 0:
		home, ok := w.lookup("HOME")
		if !ok {
			w.chdir("")
			return
		}
		target = home
	case ops[0].Dynamic:
		w.chdir("")
		return
	case ops[0].Value == "-":
		target = w.st.oldpwd
		if target == "" {
			w.chdir("")
			return
		}
	default:
		target = ops[0].Value
		if _, cdpath := w.lookup("CDPATH"); cdpath && !strings.HasPrefix(target, "/") &&
			!strings.HasPrefix(target, "./") && !strings.HasPrefix(target, "../") && target != "." && target != ".." {
			w.chdir("")
			return
		}
	}
	w.chdir(target)
}

// chdir moves the tracked cwd; "" makes it unknown.
func (w *walker) chdir(target string) {
	old := w.st.cwd
	switch {
	case target == "":
		w.st.cwd = ""
	case strings.HasPrefix(target, "/"):
		w.st.cwd = path.Clean(target)
	case w.st.cwd != "":
		w.st.cwd = path.Join(w.st.cwd, target)
	default:
		w.st.cwd = ""
	}
	w.st.oldpwd = old
}

func bPushd(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	ops := operands(c)
	switch {
	case len(ops) == 0:
		if len(w.st.dirs) == 0 {
			return
		}
		top := w.st.dirs[len(w.st.dirs)-1]
		w.st.dirs[len(w.st.dirs)-1] = w.st.cwd
		w.chdir(top)
	case ops[0].Dynamic || strings.HasPrefix(ops[0].Value, "+"):
		w.st.dirs = nil
		w.chdir("")
	default:
		w.st.dirs = append(w.st.dirs, w.st.cwd)
		w.chdir(ops[0].Value)
	}
}

func bPopd(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	ops := operands(c)
	if len(ops) > 0 || len(w.st.dirs) == 0 {
		w.st.dirs = nil
		w.chdir("")
		return
	}
	top := w.st.dirs[len(w.st.dirs)-1]
	w.st.dirs = w.st.dirs[:len(w.st.dirs)-1]
	w.chdir(top)
}

func bEval(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	var parts []string
	for _, a := range c.Argv[1:] {
		if a.Dynamic {
			w.unknownAt(c.Pos, "eval of a non-literal", a.Value)
			return
		}
		parts = append(parts, a.Value)
	}
	w.code(s.Pos(), "eval", strings.Join(parts, " "))
}

func bSource(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	ops := c.Argv[1:]
	if len(ops) > 0 && ops[0].Value == "--" {
		ops = ops[1:]
	}
	if len(ops) == 0 {
		return
	}
	if ops[0].Dynamic {
		w.unknownAt(c.Pos, "source of a non-literal path", ops[0].Value)
		return
	}
	if isStdinPath(ops[0].Value) {
		w.stdinCode(s, c, "source")
		return
	}
	// source searches PATH for names without a slash; only a path we can
	// resolve is read.
	p := ops[0].Value
	if !strings.Contains(p, "/") {
		p = "./" + p
	}
	if !w.script(s, c, p, c.Argv[0].Value+" "+ops[0].Value, false) {
		c.Opaque = true
	}
}

func bTrap(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	ops := c.Argv[1:]
	if len(ops) > 0 && (ops[0].Value == "-p" || ops[0].Value == "-l") {
		return
	}
	if len(ops) > 0 && ops[0].Value == "--" {
		ops = ops[1:]
	}
	if len(ops) < 2 {
		return
	}
	if ops[0].Dynamic {
		w.unknownAt(c.Pos, "trap of a non-literal action", ops[0].Value)
		return
	}
	if ops[0].Value == "-" || ops[0].Value == "" {
		return
	}
	w.subshell(func() {
		w.st.cwd = "" // a trap runs wherever the shell is when it fires
		w.code(s.Pos(), "trap", ops[0].Value)
	})
}

func bAlias(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	for _, a := range c.Argv[1:] {
		if a.Dynamic {
			w.unknownAt(c.Pos, "alias of a non-literal", a.Value)
			continue
		}
		name, val, ok := strings.Cut(a.Value, "=")
		if !ok {
			continue
		}
		if w.shared.aliases == nil {
			w.shared.aliases = map[string]string{}
		}
		w.shared.aliases[name] = val
	}
}

func bHash(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	for _, a := range c.Argv[1:] {
		if a.Dynamic || strings.HasPrefix(a.Value, "-p") {
			w.st.shadow = true
		}
	}
}

func bEnable(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	for _, a := range c.Argv[1:] {
		if a.Dynamic || strings.HasPrefix(a.Value, "-f") {
			w.unknownAt(c.Pos, "enable loads a builtin from a shared object", c.Text)
			return
		}
	}
	w.st.shadow = true
}

func bFc(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	for _, a := range c.Argv[1:] {
		if a.Value == "-l" {
			return
		}
	}
	w.unknownAt(c.Pos, "fc runs commands from the history", c.Text)
}

func bPrintf(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	for i, a := range c.Argv[1:] {
		if a.Value == "-v" && i+2 < len(c.Argv) {
			v := c.Argv[i+2]
			if v.Dynamic {
				w.unknownAt(c.Pos, "printf -v with a non-literal name", v.Value)
			} else {
				w.checkLiteralAt(c.Pos, v.Value)
				w.setVar(v.Value, "", false)
			}
		}
	}
}

func (w *walker) checkLiteralAt(p Pos, s string) {
	i := strings.IndexByte(s, '[')
	if i >= 0 && (strings.Contains(s[i:], "$(") || strings.Contains(s[i:], "`")) {
		w.unknownAt(p, "text that bash runs when it is evaluated as a subscript", s)
	}
}

func bRead(w *walker, s *syntax.Stmt, c *Command) {
	bUnset(w, s, c)
	// read -a NAME, mapfile -t NAME and the like: forget every name.
	for _, a := range c.Argv[1:] {
		if !a.Dynamic && !strings.HasPrefix(a.Value, "-") {
			w.setVar(a.Value, "", false)
		}
	}
}

// bKill marks a kill whose every target is the shell itself ($$, from
// which the walker makes "self") or one of its jobs ($! made "job", or a
// literal %N job spec). A numeric pid, a process group (-N after the
// signal), or anything dynamic is some other process.
func bKill(w *walker, s *syntax.Stmt, c *Command) {
	args := c.Argv[1:]
	i := 0
	if i < len(args) && !args[i].Dynamic {
		switch v := args[i].Value; {
		case v == "-s" || v == "-n":
			i += 2
		case v == "--":
			i++
		case strings.HasPrefix(v, "-") && v != "-":
			i++ // -SIGNAL or -NUMBER
			if i < len(args) && !args[i].Dynamic && args[i].Value == "--" {
				i++
			}
		}
	}
	if i >= len(args) {
		return
	}
	for _, a := range args[i:] {
		if a.Dynamic || !(a.Value == "self" || a.Value == "job" || strings.HasPrefix(a.Value, "%") && len(a.Value) > 1) {
			return
		}
	}
	c.OwnSignal = true
}

func bUnset(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	for _, a := range operands(c) {
		if a.Dynamic {
			continue
		}
		w.checkLiteralAt(c.Pos, a.Value)
		w.setVar(a.Value, "", false)
	}
}

// bExport handles export when the parser sees it as a plain command (POSIX
// mode).
func bExport(w *walker, s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	for _, a := range c.Argv[1:] {
		if a.Dynamic {
			w.unknownAt(c.Pos, "export of a non-literal", a.Value)
			continue
		}
		name, val, ok := strings.Cut(a.Value, "=")
		if ok {
			w.setVar(name, val, true)
		}
		w.export(name)
	}
}

// codeVars hold a command line that programs run through a shell.
func codeVar(name string) bool {
	switch name {
	case "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR", "GIT_SSH_COMMAND", "GIT_SEQUENCE_EDITOR",
		"GIT_PROXY_COMMAND", "GIT_SSH", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "PAGER",
		"MANPAGER", "EDITOR", "VISUAL", "PROMPT_COMMAND", "LESSOPEN", "LESSCLOSE", "BROWSER",
		"SYSTEMD_PAGER", "PSQL_PAGER", "MYSQL_PAGER":
		return true
	}
	return false
}

// preloadVar reports variables that load code from a file into every
// program or shell that starts after them.
func preloadVar(name string) bool {
	switch name {
	case "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "PYTHONPATH",
		"PYTHONSTARTUP", "NODE_OPTIONS", "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB", "GCONV_PATH",
		"BASH_LOADABLES_PATH", "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG", "GIT_CONFIG_GLOBAL",
		"GIT_CONFIG_SYSTEM", "GIT_TEMPLATE_DIR", "SHELLOPTS", "BASHOPTS", "PS4", "JAVA_TOOL_OPTIONS",
		"_JAVA_OPTIONS", "DYLD_INSERT_LIBRARIES":
		return true
	}
	return strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") || strings.HasPrefix(name, "BASH_FUNC_")
}

// envCode classifies the value of a variable that makes programs run code.
func (w *walker) envCode(s *syntax.Stmt, name string, value *syntax.Word) {
	switch {
	case codeVar(name):
		args := w.word(value)
		if len(args) != 1 || args[0].Dynamic {
			w.unknown(s.Pos(), name+" names a command that is not literal", name)
			return
		}
		if strings.TrimSpace(args[0].Value) == "" || args[0].Value == "cat" || args[0].Value == "less" || args[0].Value == "more" {
			return
		}
		w.subshell(func() { w.code(s.Pos(), name, args[0].Value) })
	case preloadVar(name):
		w.unknown(s.Pos(), name+" loads code into the programs that follow", w.text(s))
	}
}

// aliasUse classifies an alias expanded with its arguments.
func (w *walker) aliasUse(s *syntax.Stmt, c Command, val string) {
	parts := []string{val}
	for _, a := range c.Argv[1:] {
		if a.Dynamic {
			parts = append(parts, a.Value)
			continue
		}
		q, err := syntax.Quote(a.Value, syntax.LangBash)
		if err != nil {
			q = "\"$UNKNOWN\""
		}
		parts = append(parts, q)
	}
	w.subshell(func() { w.code(s.Pos(), "alias "+c.Argv[0].Value, strings.Join(parts, " ")) })
}

func isStdinPath(p string) bool {
	return p == "/dev/stdin" || p == "/dev/fd/0" || p == "/proc/self/fd/0"
}

// stdinCode walks the static text fed to c on stdin as shell code.
func (w *walker) stdinCode(s *syntax.Stmt, c *Command, via string) {
	text, ok := w.stdinText(s)
	if !ok {
		w.unknownAt(c.Pos, via+" reads its script from standard input", c.Text)
		return
	}
	w.code(s.Pos(), via+" /dev/stdin", text)
}
