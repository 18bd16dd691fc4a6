package parser

import (
	"maps"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// opt is one option a wrapper was given.
type opt struct {
	name string // "-u" or "--user"
	val  Arg    // the value, if the option takes one
}

// optSpec says which options of a program take a value. Short options in
// value take the rest of their cluster or the next word; those in optional
// take only an attached value (-i[REPL]); long options in longValue take
// "=VALUE" or the next word.
type optSpec struct {
	value     string
	optional  string
	longValue []string
}

// scan splits args into the options before the first operand and the rest.
// ok is false when an option word is dynamic, since its meaning is unknown.
func (sp optSpec) scan(args []Arg) (opts []opt, rest []Arg, ok bool) {
	opts, rest, ok, _ = sp.scanEnd(args)
	return opts, rest, ok
}

// scanEnd is scan, and says whether the options ended at "--": then every
// word of rest is an operand, "-x" as much as "x".
func (sp optSpec) scanEnd(args []Arg) (opts []opt, rest []Arg, ok, ended bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if strings.HasPrefix(v, "-") || strings.HasPrefix(v, "\"-") || strings.HasPrefix(v, "'-") {
				return opts, args[i:], false, false
			}
			return opts, args[i:], !looksLikeOption(v), false
		}
		if v == "--" {
			return opts, args[i+1:], true, true
		}
		if len(v) < 2 || v[0] != '-' {
			return opts, args[i:], true, false
		}
		if strings.HasPrefix(v, "--") {
			name, after, has := strings.Cut(v, "=")
			val := Arg{Value: after}
			if !has && contains(sp.longValue, name) && i+1 < len(args) {
				i++
				val = args[i]
			}
			opts = append(opts, opt{name, val})
			continue
		}
		for j := 1; j < len(v); j++ {
			ch := v[j]
			switch {
			case strings.IndexByte(sp.value, ch) >= 0:
				val := Arg{Value: v[j+1:]}
				if val.Value == "" && i+1 < len(args) {
					i++
					val = args[i]
				}
				opts = append(opts, opt{"-" + string(ch), val})
				j = len(v)
			case strings.IndexByte(sp.optional, ch) >= 0:
				opts = append(opts, opt{"-" + string(ch), Arg{Value: v[j+1:]}})
				j = len(v)
			default:
				opts = append(opts, opt{"-" + string(ch), Arg{}})
			}
		}
	}
	return opts, nil, true, false
}

// split is scan for programs that take options after operands too (GNU
// getopt and git's parse-options permute them): the options among all of
// args, and the operands in order.
func (sp optSpec) split(args []Arg) (opts []opt, ops []Arg, ok bool) {
	ok = true
	for len(args) > 0 {
		o, rest, sure, ended := sp.scanEnd(args)
		opts = append(opts, o...)
		ok = ok && sure
		if ended {
			return opts, append(ops, rest...), ok
		}
		if len(rest) == 0 {
			break
		}
		ops = append(ops, rest[0])
		args = rest[1:]
	}
	return opts, ops, ok
}

// looksLikeOption reports whether a dynamic word may expand to an option.
func looksLikeOption(raw string) bool {
	return strings.HasPrefix(raw, "$") && !strings.HasPrefix(raw, "$(")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func has(opts []opt, names ...string) (Arg, bool) {
	for _, o := range opts {
		if contains(names, o.name) {
			return o.val, true
		}
	}
	return Arg{}, false
}

// all scans every argument for options, as GNU getopt does when it
// permutes operands after options.
func (sp optSpec) all(args []Arg) []opt {
	var out []opt
	for i := 0; i < len(args); i++ {
		if args[i].Dynamic {
			continue
		}
		if args[i].Value == "--" {
			break
		}
		if !strings.HasPrefix(args[i].Value, "-") || len(args[i].Value) < 2 {
			continue
		}
		opts, rest, _ := sp.scan(args[i:])
		if len(opts) == 0 {
			continue
		}
		out = append(out, opts...)
		// scan consumed up to the next operand.
		i = len(args) - len(rest) - 1
		if len(rest) == 0 {
			break
		}
	}
	return out
}

// wrapper peels one wrapper off c. It returns the command that runs next
// and true, or false when the wrapper runs nothing after all (c is then
// recorded as it stands).
type wrapper struct {
	spec optSpec
	// operands is the number of operands before the command (timeout's
	// duration, chroot's new root).
	operands int
	root     bool
	// peel adjusts the next command; it may record facts of its own and
	// return false to stop.
	peel func(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool
}

// wrapperFor returns the wrapper named name.
func wrapperFor(name string) (wrapper, bool) {
	switch name {
	case "sudo":
		return wrapper{spec: optSpec{value: "ugChprtTUDR", longValue: []string{"--user", "--group",
			"--close-from", "--chdir", "--chroot", "--host", "--prompt", "--role", "--type",
			"--command-timeout", "--other-user"}}, root: true, peel: peelSudo}, true
	case "pkexec", "run0":
		return wrapper{spec: optSpec{longValue: []string{"--user"}}, root: true, peel: peelRootShell}, true
	case "sudoedit":
		return wrapper{root: true, peel: peelSudoedit}, true
	case "doas":
		return wrapper{spec: optSpec{value: "uC"}, root: true, peel: peelShellIfNone("-s")}, true
	case "su":
		return wrapper{spec: optSpec{value: "cgGswC", longValue: []string{"--command", "--session-command",
			"--group", "--supp-group", "--shell", "--whitelist-environment"}}, root: true, peel: peelSu}, true
	case "runuser":
		return wrapper{spec: optSpec{value: "cgGswCu", longValue: []string{"--command", "--session-command",
			"--group", "--supp-group", "--shell", "--whitelist-environment", "--user"}}, root: true, peel: peelSu}, true
	case "nice":
		return wrapper{spec: optSpec{value: "n", longValue: []string{"--adjustment"}}}, true
	case "ionice":
		return wrapper{spec: optSpec{value: "cnpPu", longValue: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}}, peel: peelUnlessOpt("-p", "-P", "-u", "--pid", "--pgid", "--uid")}, true
	case "chrt":
		return wrapper{spec: optSpec{value: "TPD"}, operands: 1, peel: peelUnlessOpt("-p", "--pid", "-m", "--max")}, true
	case "taskset":
		return wrapper{spec: optSpec{}, operands: 1, peel: peelUnlessOpt("-p", "--pid")}, true
	case "timeout":
		return wrapper{spec: optSpec{value: "sk", longValue: []string{"--signal", "--kill-after"}}, operands: 1}, true
	case "nohup":
		return wrapper{peel: peelNohup}, true
	case "setsid":
		return wrapper{}, true
	case "stdbuf":
		return wrapper{spec: optSpec{value: "ioe", longValue: []string{"--input", "--output", "--error"}}}, true
	case "time":
		return wrapper{spec: optSpec{value: "fo", longValue: []string{"--format", "--output"}}, peel: peelTime}, true
	case "command":
		return wrapper{peel: peelCommand}, true
	case "builtin":
		return wrapper{}, true
	case "exec":
		return wrapper{spec: optSpec{value: "a"}}, true
	case "xargs":
		return wrapper{spec: optSpec{value: "adEILnPs", optional: "eil", longValue: []string{"--arg-file",
			"--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars",
			"--process-slot-var"}}, peel: peelXargs}, true
	case "watch":
		return wrapper{spec: optSpec{value: "nq", longValue: []string{"--interval", "--equexit"}}, peel: peelWatch}, true
	case "flock":
		return wrapper{spec: optSpec{value: "wEc", longValue: []string{"--timeout", "--wait", "--conflict-exit-code", "--command"}}, operands: 1, peel: peelFlock}, true
	case "chroot":
		return wrapper{spec: optSpec{longValue: []string{"--userspec", "--groups"}}, operands: 1, root: true, peel: peelChroot}, true
	case "script":
		return wrapper{spec: optSpec{value: "cEmoTIOB", optional: "t", longValue: []string{"--command", "--echo", "--logging-format", "--output-limit", "--log-timing", "--log-in", "--log-out", "--log-io"}}, peel: peelScript}, true
	case "unbuffer":
		return wrapper{}, true
	case "busybox":
		return wrapper{peel: peelBusybox}, true
	case "env":
		return wrapper{spec: optSpec{value: "uCSP", longValue: []string{"--unset", "--chdir", "--split-string"}},
			peel: peelEnv}, true
	case "parallel":
		return wrapper{peel: peelParallel}, true
	case "strace":
		return wrapper{spec: optSpec{value: "abeEIoOpPsSuUX"}, peel: peelOutputOpt("-o")}, true
	case "ltrace":
		return wrapper{spec: optSpec{value: "aAeEFlLnopsSuXxw"}, peel: peelOutputOpt("-o")}, true
	}
	return wrapper{}, false
}

// unwrap peels the wrapper named by c.Argv[0] and dispatches what runs
// next. It returns false when c should be handled as an ordinary program.
func (w *walker) unwrap(s *syntax.Stmt, c Command, wr wrapper) bool {
	name := c.Argv[0].Value
	opts, rest, ok := wr.spec.scan(c.Argv[1:])
	if !ok {
		w.unknownAt(c.Pos, name+" with an option that is not literal", c.Text)
		w.record(c)
		return true
	}
	var ops []Arg
	if wr.operands > 0 {
		n := min(wr.operands, len(rest))
		ops, rest = rest[:n], rest[n:]
	}
	if strings.Contains(name, "/") {
		// The wrapper named by path is a program of its own too: ./env
		// is not env.
		outer := c
		outer.WritesKnown = true
		w.record(outer)
	}
	name = baseName(name)
	next := c
	next.Argv = rest
	next.Wrappers = append(append([]string(nil), c.Wrappers...), name)
	next.Root = c.Root || wr.root
	next.Writes = append([]Write(nil), c.Writes...)
	if wr.peel != nil && !wr.peel(w, s, &c, opts, ops, &next) {
		if c.Argv != nil { // a peel that recorded c itself clears it
			w.record(c)
		}
		return true
	}
	if len(next.Argv) == 0 {
		// The wrapper alone: it runs nothing (env prints, nice shows,
		// exec applies its redirections to the shell).
		c.WritesKnown = true
		switch name {
		case "exec", "command", "builtin", "time":
			c.Builtin = true
		}
		if !strings.Contains(c.Argv[0].Value, "/") {
			w.record(c)
		}
		return true
	}
	// The command after the wrapper is a new program: it never inherits
	// the wrapper's classification, only its writes and environment.
	w.command(s, next)
	return true
}

func peelSudo(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if _, ok := has(opts, "-e", "--edit"); ok {
		for _, a := range next.Argv {
			c.Writes = append(c.Writes, w.resolve(a))
		}
		c.WritesKnown, c.Root = true, true
		return false
	}
	if _, ok := has(opts, "-l", "--list", "-v", "--validate", "-k", "-K", "--reset-timestamp",
		"--remove-timestamp", "-V", "--version"); ok {
		if len(next.Argv) == 0 {
			c.WritesKnown = true
			return false
		}
	}
	if _, ok := has(opts, "-i", "--login", "-s", "--shell"); ok && len(next.Argv) == 0 {
		w.unknownAt(c.Pos, "interactive root shell", c.Text)
		return false
	}
	if dir, ok := has(opts, "-D", "--chdir"); ok {
		next.Cwd = resolveIn(dir, c.Cwd).Path
	}
	if _, ok := has(opts, "-R", "--chroot"); ok {
		next.Cwd = ""
	}
	return true
}

func peelSudoedit(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	for _, a := range next.Argv {
		c.Writes = append(c.Writes, w.resolve(a))
	}
	c.WritesKnown, c.Root = true, true
	return false
}

func peelShellIfNone(shellOpts ...string) func(*walker, *syntax.Stmt, *Command, []opt, []Arg, *Command) bool {
	return func(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
		if _, ok := has(opts, shellOpts...); ok && len(next.Argv) == 0 {
			w.unknownAt(c.Pos, "interactive shell", c.Text)
			return false
		}
		return true
	}
}

func peelRootShell(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if len(next.Argv) == 0 {
		w.unknownAt(c.Pos, "interactive root shell", c.Text)
		return false
	}
	return true
}

func peelSu(w *walker, s *syntax.Stmt, c *Command, _ []opt, ops []Arg, next *Command) bool {
	// su takes options after the user too: su - bob -c CMD.
	spec, _ := wrapperFor(baseName(c.Argv[0].Value))
	opts := spec.spec.all(c.Argv[1:])
	if code, ok := has(opts, "-c", "--command", "--session-command", "-C"); ok {
		if code.Dynamic {
			w.unknownAt(c.Pos, c.Argv[0].Value+" -c with a non-literal command", c.Text)
			return false
		}
		c.Root = true
		c.WritesKnown = true
		w.record(*c)
		w.subshell(func() { w.asRoot(func() { w.code(s.Pos(), c.Argv[0].Value+" -c", code.Value) }) })
		c.Argv = nil // already recorded
		return false
	}
	if _, ok := has(opts, "-u", "--user"); ok && c.Argv[0].Value == "runuser" && len(next.Argv) > 0 {
		return true
	}
	w.unknownAt(c.Pos, "interactive shell as another user", c.Text)
	return false
}

func peelUnlessOpt(names ...string) func(*walker, *syntax.Stmt, *Command, []opt, []Arg, *Command) bool {
	return func(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
		if _, ok := has(opts, names...); ok {
			// It acts on a running process or prints limits: no command.
			return false
		}
		return true
	}
}

func peelNohup(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	// nohup writes nohup.out when stdout is a terminal.
	next.Writes = append(next.Writes, w.resolve(Arg{Value: "nohup.out"}))
	return true
}

func peelTime(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if out, ok := has(opts, "-o", "--output"); ok {
		next.Writes = append(next.Writes, w.resolve(out))
	}
	return true
}

func peelOutputOpt(name string) func(*walker, *syntax.Stmt, *Command, []opt, []Arg, *Command) bool {
	return func(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
		if out, ok := has(opts, name); ok {
			next.Writes = append(next.Writes, w.resolve(out))
		}
		return true
	}
}

func peelCommand(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if _, ok := has(opts, "-v", "-V"); ok {
		c.Builtin, c.WritesKnown = true, true
		return false
	}
	return true
}

func peelXargs(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	repl := ""
	if r, ok := has(opts, "-I"); ok {
		repl = r.Value
	} else if r, ok := has(opts, "-i", "--replace"); ok {
		repl = r.Value
		if repl == "" {
			repl = "{}"
		}
	}
	if len(next.Argv) == 0 {
		next.Argv = []Arg{{Value: "echo"}}
	}
	input := Arg{Value: "<xargs input>", Dynamic: true}
	if repl == "" {
		next.Argv = append(next.Argv, input)
		return true
	}
	argv := append([]Arg(nil), next.Argv...)
	for i, a := range argv {
		if i > 0 && !a.Dynamic && strings.Contains(a.Value, repl) {
			argv[i] = Arg{Value: a.Value, Dynamic: true}
		}
	}
	next.Argv = argv
	return true
}

func peelWatch(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if _, ok := has(opts, "-x", "--exec"); ok {
		return true
	}
	// watch joins its arguments and runs them with sh -c.
	return w.shellJoin(s, c, next.Argv, "watch")
}

// shellJoin runs args joined by spaces as shell code, as watch and
// parallel do. It records c and returns false.
func (w *walker) shellJoin(s *syntax.Stmt, c *Command, args []Arg, via string) bool {
	var parts []string
	for _, a := range args {
		if a.Dynamic {
			w.unknownAt(c.Pos, via+" of a non-literal command", a.Value)
			return false
		}
		parts = append(parts, a.Value)
	}
	c.WritesKnown = true
	w.record(*c)
	w.subshell(func() { w.code(s.Pos(), via, strings.Join(parts, " ")) })
	c.Argv = nil
	return false
}

func peelFlock(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if len(ops) == 1 && !isDigits(ops[0].Value) {
		// flock creates the lock file when it is missing.
		c.Writes = append(c.Writes, w.resolve(ops[0]))
		next.Writes = append(next.Writes, w.resolve(ops[0]))
	}
	if code, ok := has(opts, "-c", "--command"); ok {
		if code.Dynamic {
			w.unknownAt(c.Pos, "flock -c with a non-literal command", c.Text)
			return false
		}
		c.WritesKnown = true
		w.record(*c)
		w.subshell(func() { w.code(s.Pos(), "flock -c", code.Value) })
		c.Argv = nil
		return false
	}
	if len(next.Argv) > 0 && !next.Argv[0].Dynamic && next.Argv[0].Value == "-c" {
		if len(next.Argv) < 2 || next.Argv[1].Dynamic {
			w.unknownAt(c.Pos, "flock -c with a non-literal command", c.Text)
			return false
		}
		code := next.Argv[1].Value
		c.WritesKnown = true
		w.record(*c)
		w.subshell(func() { w.code(s.Pos(), "flock -c", code) })
		c.Argv = nil
		return false
	}
	c.WritesKnown = true
	return true
}

func peelChroot(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if len(next.Argv) == 0 {
		w.unknownAt(c.Pos, "interactive shell in a chroot", c.Text)
		return false
	}
	// Paths inside the new root are not the paths the parser sees.
	next.Cwd = ""
	return true
}

func peelScript(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	file := "typescript"
	if len(next.Argv) > 0 {
		file = next.Argv[0].Value
		if next.Argv[0].Dynamic {
			c.Writes = append(c.Writes, Write{Path: file})
			file = ""
		}
	}
	if file != "" && !harmlessDevice(file) {
		c.Writes = append(c.Writes, w.resolve(Arg{Value: file}))
	}
	for _, o := range opts {
		switch o.name {
		case "-T", "-I", "-O", "-B", "--log-timing", "--log-in", "--log-out", "--log-io":
			c.Writes = append(c.Writes, w.resolve(o.val))
		case "-t":
			if o.val.Value != "" {
				c.Writes = append(c.Writes, w.resolve(o.val))
			}
		}
	}
	c.WritesKnown = true
	if code, ok := has(opts, "-c", "--command"); ok {
		if code.Dynamic {
			w.unknownAt(c.Pos, "script -c with a non-literal command", c.Text)
			return false
		}
		w.record(*c)
		w.subshell(func() { w.code(s.Pos(), "script -c", code.Value) })
		c.Argv = nil
		return false
	}
	w.unknownAt(c.Pos, "interactive shell under script", c.Text)
	return false
}

func peelBusybox(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	if len(opts) > 0 || len(next.Argv) == 0 {
		c.WritesKnown = true
		return false
	}
	return true
}

func peelEnv(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	var prefix []Arg
	for _, o := range opts {
		switch o.name {
		case "-C", "--chdir":
			next.Cwd = resolveIn(o.val, c.Cwd).Path
		case "-P":
			next.Shadowed = true
		case "-S", "--split-string":
			if o.val.Dynamic {
				w.unknownAt(c.Pos, "env -S of a non-literal string", o.val.Value)
				return false
			}
			for _, f := range strings.Fields(o.val.Value) {
				prefix = append(prefix, Arg{Value: strings.Trim(f, `'"`)})
			}
		}
	}
	argv := append(prefix, next.Argv...)
	if len(argv) > 0 && !argv[0].Dynamic && argv[0].Value == "-" {
		argv = argv[1:] // env - is env -i
	}
	for len(argv) > 0 {
		a := argv[0]
		name, _, ok := strings.Cut(a.Value, "=")
		if a.Dynamic || !ok || name == "" {
			break
		}
		next.Env = append(next.Env, name)
		value, _ := strings.CutPrefix(a.Value, name+"=")
		vals := maps.Clone(next.EnvValues)
		if vals == nil {
			vals = map[string]Arg{}
		}
		vals[name] = Arg{Value: value}
		next.EnvValues = vals
		if shadowVars[name] || gitProgramVar(name) {
			next.Shadowed = true
		}
		w.envVar(s, name, []Arg{{Value: value}})
		argv = argv[1:]
	}
	if len(argv) > 0 && argv[0].Dynamic && strings.Contains(argv[0].Value, "=") {
		w.unknownAt(c.Pos, "env with a non-literal assignment", argv[0].Value)
		return false
	}
	next.Argv = argv
	return true
}

// peelParallel handles GNU parallel: the words before ":::" are a command
// run through the shell with each input.
func peelParallel(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg, next *Command) bool {
	args := c.Argv[1:]
	valueOpts := map[string]bool{"-j": true, "--jobs": true, "-S": true, "--sshlogin": true,
		"-a": true, "--arg-file": true, "-d": true, "--delimiter": true, "-I": true,
		"-n": true, "-N": true, "-L": true, "--colsep": true, "-C": true, "--joblog": true,
		"--results": true, "--tmpdir": true, "--workdir": true, "--env": true, "--timeout": true,
		"--retries": true, "--delay": true, "--basefile": true, "-E": true, "--sshloginfile": true}
	i := 0
	for i < len(args) && strings.HasPrefix(args[i].Value, "-") && !args[i].Dynamic {
		if strings.Contains(args[i].Value, "=") || !valueOpts[args[i].Value] {
			i++
			continue
		}
		i += 2
	}
	if i >= len(args) {
		w.unknownAt(c.Pos, "parallel runs commands read from its input", c.Text)
		return false
	}
	var cmd []Arg
	placeholder := false
	for _, a := range args[i:] {
		if !a.Dynamic && (a.Value == ":::" || a.Value == "::::" || a.Value == ":::+" || a.Value == "::::+") {
			break
		}
		if !a.Dynamic && strings.Contains(a.Value, "{") {
			a = Arg{Value: "\"$PARALLEL_ARG\"", Dynamic: false}
			placeholder = true
		}
		cmd = append(cmd, a)
	}
	if !placeholder {
		// Without {}, parallel appends each input to the command.
		cmd = append(cmd, Arg{Value: "\"$PARALLEL_ARG\""})
	}
	return w.shellJoin(s, c, cmd, "parallel")
}

// asRoot runs fn with every command it records marked as running as root.
func (w *walker) asRoot(fn func()) {
	saved := w.root
	w.root = true
	fn()
	w.root = saved
}
