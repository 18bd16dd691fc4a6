package parser

import (
	"maps"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// call handles one simple command: its assignments, words and redirections.
func (w *walker) call(s *syntax.Stmt, ce *syntax.CallExpr) {
	var env []string
	var vals map[string]Arg
	shadow := false
	var path *Arg // PATH=value before the command: it runs under that PATH
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
		old, had := w.lookup(name)
		if len(ce.Args) > 0 {
			env = append(env, name)
			v, known := w.value(a)
			if vals == nil {
				vals = map[string]Arg{}
			}
			vals[name] = Arg{Value: v, Dynamic: !known}
			if known && had && old == v {
				continue // the value it has: nothing changes
			}
			if name == "PATH" {
				path = &Arg{Value: v, Dynamic: !known}
			} else if shadowVars[name] || gitProgramVar(name) {
				shadow = true
			}
			w.envCode(s, name, a.Value)
			continue
		}
		if v, known := w.assign(a); !known || !had || old != v {
			w.envCode(s, name, a.Value)
		}
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
	c := Command{Pos: w.pos(s.Pos()), Text: w.text(s), Argv: argv, Env: env, EnvValues: vals,
		Cwd: w.st.cwd, Writes: writes, Shadowed: shadow}
	c.Stdin, _ = w.stdinText(s)
	if path != nil {
		w.withPATH(*path, func() { w.command(s, c) })
		return
	}
	w.command(s, c)
}

// envValue returns the value the variable name has in c's environment:
// a prefix assignment (`NAME=v cmd`, `env NAME=v cmd`) or the shell's
// variable. ok is false when the parser does not know it is set; a value
// known only at run time is Dynamic.
func (w *walker) envValue(c *Command, name string) (Arg, bool) {
	if v, ok := c.EnvValues[name]; ok {
		return v, true
	}
	if v, ok := w.lookup(name); ok {
		return Arg{Value: v}, true
	}
	if b, _ := w.st.vars.get(name); b.how == unknownVal {
		return Arg{Value: "$" + name, Dynamic: true}, true
	}
	return Arg{}, false
}

// withPATH runs fn, a command given PATH=v before it, with PATH set to v
// and exported, as bash does both to find the command and for the
// programs it starts; then it puts PATH back.
func (w *walker) withPATH(v Arg, fn func()) {
	saved, savedSet := w.varBinding("PATH"), w.st.pathSet
	w.setVar("PATH", v.Value, !v.Dynamic)
	w.export("PATH")
	want := w.varBinding("PATH")
	fn()
	if w.varBinding("PATH") != want {
		// The command set PATH itself (PATH=x eval 'PATH=y'): which of
		// the two stays is not modelled.
		w.setVar("PATH", "", false)
		return
	}
	w.st.vars.set("PATH", saved)
	w.st.pathSet = savedSet
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

// value returns the value an assignment gives its name, and whether the
// parser knows it.
func (w *walker) value(a *syntax.Assign) (string, bool) {
	if a.Index != nil || a.Array != nil || a.Append {
		return "", false
	}
	if a.Value == nil {
		return "", true
	}
	if v, ok := w.mktempValue(a.Value); ok {
		return v, true
	}
	args := w.word(a.Value)
	// Assignments are not field-split: a known value is one string.
	if len(args) == 1 && !args[0].Dynamic {
		return args[0].Value, true
	}
	return "", false
}

// assign records a shell variable assignment and returns the value, when
// it is known.
func (w *walker) assign(a *syntax.Assign) (string, bool) {
	v, known := w.value(a)
	w.setVar(a.Name.Value, v, known)
	return v, known
}

// declFlags returns the option letters of a declare, local, export,
// readonly or typeset, those given with - and those with +, from the
// literal option words before its first name. ok is false when an option
// word is dynamic.
func (w *walker) declFlags(d *syntax.DeclClause) (minus, plus string, ok bool) {
	for _, a := range d.Args {
		if !a.Naked || a.Name != nil {
			return minus, plus, true
		}
		for _, arg := range w.word(a.Value) {
			v := arg.Value
			switch {
			case arg.Dynamic:
				return minus, plus, false
			case v == "--":
				return minus, plus, true
			case len(v) > 1 && v[0] == '-':
				minus += v[1:]
			case len(v) > 1 && v[0] == '+':
				plus += v[1:]
			default:
				return minus, plus, true
			}
		}
	}
	return minus, plus, true
}

// decl handles declare, local, export, readonly and typeset.
func (w *walker) decl(s *syntax.Stmt, d *syntax.DeclClause) {
	for _, a := range d.Args {
		w.assignSubs(a)
	}
	variant := d.Variant.Value
	if variant == "nameref" {
		w.nameref()
	}
	minus, plus, _ := w.declFlags(d)
	all := minus + plus
	// With -f or -F the names are functions; declare, local and typeset
	// with -p only print. In these forms nothing is assigned.
	functions := strings.ContainsAny(all, "fF")
	printing := strings.Contains(all, "p") && variant != "export" && variant != "readonly"
	c := Command{Pos: w.pos(s.Pos()), Text: w.text(s), Argv: []Arg{{Value: variant}},
		Builtin: true, WritesKnown: true, Cwd: w.st.cwd}
	if functions || printing {
		if functions && (variant == "export" || strings.Contains(minus, "x")) {
			w.exportFuncs(d)
		}
		c.Writes = w.redirects(s, nil)
		w.record(c)
		return
	}
	if strings.Contains(minus, "n") && variant != "export" {
		w.nameref() // declare -n: assigning one name may assign another
	}
	exporting := variant == "export" || strings.Contains(minus, "x")
	// local, and declare or typeset in a function without -g, make the
	// name local: unset until it is assigned.
	local := variant == "local" || len(w.shared.calling) > 0 && variant != "export" &&
		variant != "readonly" && !strings.Contains(minus, "g")
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
			for _, arg := range w.word(a.Value) {
				if arg.Dynamic {
					w.unknown(a.Pos(), variant+" of a non-literal name", arg.Value)
				} else if name, val, ok := strings.Cut(arg.Value, "="); ok && !strings.HasPrefix(name, "-") && !strings.HasPrefix(name, "+") {
					w.setVar(name, val, true)
				}
			}
		case a.Name != nil && a.Naked:
			name := a.Name.Value
			if variant == "export" {
				continue // export NAME keeps its value
			}
			_, set := w.lookup(name)
			switch {
			case !set && w.varBinding(name).how != unknownVal && !w.hideAll && !w.hidden[name]:
				w.setVar(name, "", true)
			case local:
				w.setVar(name, "", false)
			}
		case a.Name != nil:
			old, had := w.lookup(a.Name.Value)
			if v, known := w.assign(a); !known || !had || old != v {
				w.envCode(s, a.Name.Value, a.Value)
			}
		}
	}
	c.Writes = w.redirects(s, nil)
	w.record(c)
}

// nameref notes a `declare -n`: from then on an assignment may assign any
// name, PATH and LD_PRELOAD included.
func (w *walker) nameref() {
	w.shared.unroll.namerefs = true
	w.st.shadow = true
}

// exportFuncs marks the functions a declare -fx or export -f names as
// exported; a name known only at run time may be any of them.
func (w *walker) exportFuncs(d *syntax.DeclClause) {
	mark := func(name string) {
		if fd, _ := w.st.funcs.get(name); fd != nil && !fd.exported {
			m := *fd
			m.exported = true
			w.st.funcs.set(name, &m)
		}
	}
	for _, a := range d.Args {
		if a.Name != nil {
			mark(a.Name.Value)
			continue
		}
		for _, arg := range w.word(a.Value) {
			switch {
			case arg.Dynamic:
				var names []string
				w.st.funcs.each(func(name string, _ *funcDef) bool {
					names = append(names, name)
					return true
				})
				for _, name := range names {
					mark(name)
				}
			case !strings.HasPrefix(arg.Value, "-") && !strings.HasPrefix(arg.Value, "+"):
				mark(arg.Value)
			}
		}
	}
}

// command dispatches a command whose argv is known: functions, wrappers,
// builtins and programs with known behaviour.
func (w *walker) command(s *syntax.Stmt, c Command) {
	if w.shared.full {
		return
	}
	if len(c.EnvValues) > 0 {
		defer w.bindEnv(c.EnvValues)()
	}
	name := c.Name()
	if name == "" {
		if len(c.Argv) > 0 {
			w.unknownAt(c.Pos, "command name is not literal", c.Argv[0].Value)
		}
		w.record(c)
		return
	}
	if val, ok := w.st.aliases.get(name); ok && !w.shared.expanding[name] {
		// Whether bash expands it depends on expand_aliases: walk the
		// alias, then the name as it stands.
		w.aliasUse(s, c, val)
	}
	if fd, _ := w.st.funcs.get(name); fd != nil && !fd.stands && !wrappedAway(c.Wrappers) {
		fc := c
		fc.Function, fc.Builtin, fc.WritesKnown = true, true, true
		w.record(fc)
		w.callFunc(name, fd, c.Argv[1:])
		if !fd.maybe {
			return
		}
		// It may not be defined here: the name may run the program too.
	}
	if w.pathShadows(name) && !shellBuiltin(name) {
		c.Shadowed = true
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

// bindEnv gives the variables assigned for one command (X=v cmd, env
// X=v cmd) their values, exported, while the command is walked, so that
// the code it runs sees them; the returned func puts them back. PATH has
// its own handling ([walker.withPATH]).
func (w *walker) bindEnv(vals map[string]Arg) func() {
	type kept struct{ old, set binding }
	saved := map[string]kept{}
	for name, v := range vals {
		if name == "PATH" || !syntax.ValidName(name) {
			continue
		}
		b := binding{value: v.Value, how: knownVal, exported: true}
		if v.Dynamic {
			b = binding{how: unknownVal, exported: true}
		}
		saved[name] = kept{w.varBinding(name), b}
		w.st.vars.set(name, b)
	}
	return func() {
		for name, k := range saved {
			if w.varBinding(name) == k.set {
				w.st.vars.set(name, k.old)
			}
		}
	}
}

// shellBuiltin reports whether bash runs name itself, without looking it
// up in PATH.
func shellBuiltin(name string) bool {
	if _, ok := builtin(name); ok {
		return true
	}
	return name == "exec" || name == "command" || name == "builtin"
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
	// The body sees the variables and functions of the shell that calls
	// it, which may be a child process of the one that defined it.
	savedHidden, savedAll := fd.w.hidden, fd.w.hideAll
	fd.w.st, fd.w.hidden, fd.w.hideAll = w.st, w.hidden, w.hideAll
	fd.w.stmt(fd.body)
	w.st = fd.w.st
	w.st.args = savedArgs
	fd.w.st, fd.w.hidden, fd.w.hideAll = saved, savedHidden, savedAll
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
	w.shared.unroll.chdirs++
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
	if vars, ok := w.evalEmits(s); ok {
		for _, v := range vars {
			w.setVar(v, "", false)
		}
		return
	}
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

// evalEmits returns the variables that `eval "$(CMD)"` in s sets, when
// its one argument is the output of one command whose arguments are
// known and [Options.Emits] knows what that output sets. The command
// itself was walked with the arguments.
func (w *walker) evalEmits(s *syntax.Stmt) ([]string, bool) {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || w.opts.Emits == nil || len(call.Args) != 2 || len(call.Args[1].Parts) != 1 {
		return nil, false
	}
	part := call.Args[1].Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	cs, ok := part.(*syntax.CmdSubst)
	if !ok || len(cs.Stmts) != 1 {
		return nil, false
	}
	inner := cs.Stmts[0]
	ic, ok := inner.Cmd.(*syntax.CallExpr)
	if !ok || inner.Negated || inner.Background || len(ic.Args) == 0 {
		return nil, false
	}
	var argv []string
	for _, a := range w.words(ic.Args) {
		if a.Dynamic {
			return nil, false
		}
		argv = append(argv, a.Value)
	}
	return w.opts.Emits(argv)
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
	u := w.shared.unroll
	w.st.traps = append(w.st.traps, &trap{w: w, at: s.Pos(), code: ops[0].Value, hidden: w.hidden,
		hideAll: w.hideAll, clock: u.clock, chdirs: u.chdirs, funcs: w.st.funcs.clone()})
}

// trap is trap code waiting for the end of the shell that set it.
type trap struct {
	w    *walker // the walker that set it, for positions
	at   syntax.Pos
	code string
	// hidden and hideAll are what the shell that set it does not see.
	hidden  map[string]bool
	hideAll bool
	// clock and chdirs are the Parse's clocks when the trap was set, and
	// funcs the functions then.
	clock, chdirs int
	funcs         table[*funcDef]
}

// runTraps walks the traps set in the shell that is ending, with the
// state it ends with. A trap runs later than it is set: at the end (EXIT),
// or whenever a signal comes. So its code sees a variable's value only
// when nothing after the trap assigns it, the cwd only when nothing after
// it changes directory, and a function only when nothing after it
// defines it anew; the rest is unknown (a function is walked and also
// taken for the program it names). Trap code that sets traps has them
// walked too.
func (w *walker) runTraps() {
	if len(w.st.traps) == 0 {
		return
	}
	end := w.st
	u := w.shared.unroll
	type key struct {
		w    *walker
		at   syntax.Pos
		code string
	}
	seen := map[key]bool{}
	for _, t := range end.traps {
		// A trap set again (in a loop) keeps its first setting, which
		// hides the most.
		k := key{t.w, t.at, t.code}
		if seen[k] || w.shared.full {
			continue
		}
		seen[k] = true
		dw := t.w
		if dw.depth+1 > dw.opts.MaxDepth {
			dw.unknown(t.at, "nested code is too deep to analyse", "trap")
			continue
		}
		n := dw.nested(t.at, "trap")
		n.st = end.clone()
		n.st.traps = nil
		if u.chdirs != t.chdirs {
			n.st.cwd = ""
		}
		n.hidden = t.hidden
		n.hideAll = t.hideAll || u.namerefs || u.last[""] > t.clock
		cloned := false
		for name, at := range u.last {
			if at > t.clock && !n.hidden[name] {
				if !cloned {
					n.hidden, cloned = maps.Clone(t.hidden), true
					if n.hidden == nil {
						n.hidden = map[string]bool{}
					}
				}
				n.hidden[name] = true
			}
		}
		differing(&t.funcs, &n.st.funcs, func(name string) {
			was, _ := t.funcs.get(name)
			now, _ := n.st.funcs.get(name)
			if was == now {
				return
			}
			fd := now
			if fd == nil {
				fd = was
			}
			m := *fd
			m.maybe = true
			n.st.funcs.set(name, &m)
		})
		n.source(t.code, "")
		n.runTraps()
	}
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
		w.st.aliases.set(name, val)
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
	funcs, vars := false, false
	for _, a := range c.Argv[1:] {
		if a.Value == "--" {
			break
		}
		if !a.Dynamic && strings.HasPrefix(a.Value, "-") {
			funcs = funcs || strings.Contains(a.Value, "f")
			vars = vars || strings.Contains(a.Value, "v")
		}
	}
	for _, a := range operands(c) {
		if a.Dynamic {
			continue
		}
		w.checkLiteralAt(c.Pos, a.Value)
		if funcs {
			// unset -f: the name runs the program again.
			w.st.funcs.del(a.Value)
			continue
		}
		_, set := w.lookup(a.Value)
		w.unsetVar(a.Value)
		if fd, _ := w.st.funcs.get(a.Value); fd != nil && !vars && !set && !fd.maybe {
			// Plain unset removes the function when no variable has the
			// name.
			m := *fd
			m.maybe = true
			w.st.funcs.set(a.Value, &m)
		}
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
		"SYSTEMD_PAGER", "PSQL_PAGER", "MYSQL_PAGER", "BAT_PAGER", "DELTA_PAGER", "FZF_DEFAULT_COMMAND":
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
		"_JAVA_OPTIONS", "DYLD_INSERT_LIBRARIES",
		// Options read from the environment or a file it names, which
		// may write or run code (--preview, --pre, -o, -P).
		"FZF_DEFAULT_OPTS", "FZF_DEFAULT_OPTS_FILE", "RIPGREP_CONFIG_PATH", "BAT_CONFIG_PATH", "MANOPT":
		return true
	}
	return strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") || strings.HasPrefix(name, "BASH_FUNC_")
}

// outputVar reports variables whose value names a file (or, with dir,
// a directory) that programs which otherwise only read write into: git's
// traces, the dynamic loader's debug output, TLS key logs, coverage and
// profile data, history files.
func outputVar(name string) (ok, dir bool) {
	switch name {
	case "LD_DEBUG_OUTPUT", "SSLKEYLOGFILE", "MALLOC_TRACE", "NODE_REDIRECT_WARNINGS", "LLVM_PROFILE_FILE",
		"KRB5_TRACE", "NSPR_LOG_FILE", "MOZ_LOG_FILE", "LESSHISTFILE", "HISTFILE", "SQLITE_HISTORY",
		"MYSQL_HISTFILE", "PSQL_HISTORY", "NODE_REPL_HISTORY", "REDISCLI_HISTFILE", "PYTHON_HISTORY",
		"COVERAGE_FILE", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF", "GIT_TRACE2":
		return true, strings.HasPrefix(name, "GIT_TRACE2")
	case "NODE_V8_COVERAGE", "GCOV_PREFIX", "GOCOVERDIR", "PYTHONPYCACHEPREFIX":
		return true, true
	}
	return strings.HasPrefix(name, "GIT_TRACE"), false
}

// envOutput records the file a variable set for the programs that follow
// makes them write. Git writes its traces only to an absolute path (1,
// 2 or true is standard error); "-" and the empty value write nothing.
func (w *walker) envOutput(s *syntax.Stmt, name string, v Arg) {
	ok, dir := outputVar(name)
	if !ok || !v.Dynamic && (v.Value == "" || v.Value == "-") {
		return
	}
	if strings.HasPrefix(name, "GIT_TRACE") && !v.Dynamic && !strings.HasPrefix(v.Value, "/") {
		return
	}
	wr := w.locate(v, w.st.cwd, true)
	wr.Tree = dir
	wr.Stream = !dir
	w.record(Command{Pos: w.pos(s.Pos()), Text: w.text(s), Writes: []Write{wr}, WritesKnown: true, Builtin: true, Cwd: w.st.cwd})
}

// envCode classifies the value of a variable that makes programs run code
// or write a file.
func (w *walker) envCode(s *syntax.Stmt, name string, value *syntax.Word) {
	var args []Arg
	if value != nil {
		args = w.word(value)
	}
	if len(args) > 1 {
		args = []Arg{{Value: w.text(value), Dynamic: true}}
	}
	w.envVar(s, name, args)
}

// envVar classifies the value a variable is given, for the shell or for
// one command (NAME=value cmd, env NAME=value cmd): args is the value as
// one word, or none for the empty value.
func (w *walker) envVar(s *syntax.Stmt, name string, args []Arg) {
	if ok, _ := outputVar(name); ok {
		v := Arg{}
		if len(args) == 1 {
			v = args[0]
		}
		w.envOutput(s, name, v)
		return
	}
	switch {
	case codeVar(name):
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
	case name == "LESS":
		// less reads options from $LESS: -o and -O name a log file.
		if len(args) != 1 || args[0].Dynamic || strings.Contains(args[0].Value, "o") || strings.Contains(strings.ToLower(args[0].Value), "log") {
			w.unknown(s.Pos(), "LESS may give less a log file to write", w.text(s))
		}
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
	name := c.Argv[0].Value
	if w.shared.expanding == nil {
		w.shared.expanding = map[string]bool{}
	}
	w.shared.expanding[name] = true
	// The alias is walked aside, since the name is walked as it stands
	// too; the traps it sets stay with the shell.
	saved := w.st
	w.st = saved.clone()
	set := len(w.st.traps)
	w.code(s.Pos(), "alias "+name, strings.Join(parts, " "))
	saved.traps = append(saved.traps[:len(saved.traps):len(saved.traps)], w.st.traps[set:]...)
	w.st = saved
	delete(w.shared.expanding, name)
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
