package parser

import (
	"errors"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/undosh/undosh/internal/pathglob"
)

// baseName returns the program's base name with a version suffix removed
// (python3.12 → python3).
func baseName(name string) string {
	b := path.Base(name)
	if i := strings.IndexAny(b, "0123456789"); i > 0 {
		if j := strings.IndexByte(b[i:], '.'); j >= 0 && strings.Trim(b[i:], "0123456789.") == "" {
			return b[:i+j]
		}
	}
	return b
}

func isShell(base string) bool {
	switch base {
	case "sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "rbash", "posh", "yash", "undosh":
		return true
	}
	return false
}

// program adds what the parser knows about a program's behaviour: the
// paths it writes, the code it runs, its subcommand.
func (w *walker) program(s *syntax.Stmt, c *Command) {
	name := c.Name()
	base := baseName(name)
	if rest, ok := strings.CutPrefix(base, "git-"); ok && gitCommand(rest) {
		// git's commands are one program under many names: git-push
		// (in git's exec-path, or in PATH) is git push.
		git := "git"
		if strings.Contains(name, "/") {
			git = path.Dir(name) + "/git"
		}
		c.Argv = append([]Arg{{Value: git}, {Value: rest}}, c.Argv[1:]...)
		name, base = git, "git"
	}
	if base == "docker" || base == "podman" || base == "nerdctl" || base == "docker-compose" || base == "podman-compose" {
		w.daemonHost(c)
	}
	c.Sub = subcommandIndex(base, c.Argv)
	if w.runner(s, c, base) {
		return
	}
	db, isDB := dbToolFor(base)
	if isDB && db.servers {
		w.dbHosts(c, db)
	}
	switch {
	case base == "venv" || base == "virtualenv":
		w.venv(c)
	case isShell(base):
		w.shell(s, c, base)
		return
	case base == "python" || base == "python3" || base == "python2" || base == "pypy3":
		w.python(s, c)
	case base == "node" || base == "nodejs":
		w.node(s, c)
	case base == "perl":
		w.perl(s, c)
	case isDB && db.reads != noReader:
		w.database(s, c, db)
	case base == "ruby" || base == "php" || base == "lua" || base == "Rscript" || base == "osascript" || base == "tclsh":
		w.interpreterCode(s, c, "-e", "-r")
	case base == "sed" || base == "gsed":
		w.sed(s, c)
	case base == "awk" || base == "gawk" || base == "mawk" || base == "nawk":
		w.awk(s, c)
	case base == "find":
		w.find(s, c)
		return
	case base == "git":
		w.git(s, c)
	case base == "npm" || base == "pnpm" || base == "yarn":
		w.npm(s, c, base)
	case base == "pip" || base == "pip3":
		w.pip(c)
	case base == "cargo" || base == "uv" || base == "gem" || base == "bundle" || base == "bundler" || base == "dotnet":
		w.installTarget(c, base)
	case base == "tar" || base == "gtar" || base == "bsdtar":
		w.tar(c)
	case base == "unzip":
		w.unzip(c)
	case base == "cpio":
		w.cpio(c)
	case base == "pax":
		w.pax(c)
	case base == "curl":
		w.curl(c)
	case base == "wget":
		w.wget(c)
	case base == "http" || base == "https" || base == "xh" || base == "xhs" || base == "curlie" || base == "httpie":
		w.httpieArgs(c)
	case base == "mktemp":
		w.mktemp(c)
	case base == "ssh":
		w.ssh(s, c)
	case base == "chmod":
		w.chmod(c)
	case base == "rsync" || base == "scp":
		w.knownWrites(c, mustSpec(base))
		if cmd, ok := optValue(c.Argv[1:], "-e", "--rsh"); ok && base == "rsync" {
			if cmd.Dynamic {
				w.unknownAt(c.Pos, "rsync -e with a non-literal command", cmd.Value)
			} else {
				w.subshell(func() { w.code(s.Pos(), "rsync -e", cmd.Value) })
			}
		}
	case base == "ln":
		w.knownWrites(c, mustSpec(base))
		w.symlink(c)
	case base == "make" || base == "gmake" || base == "go":
		if dir, ok := optValue(c.Argv[1:], "-C", "--directory"); ok {
			c.Cwd = resolveIn(dir, c.Cwd).Path
		}
		if base != "go" {
			w.makefiles(c)
		}
		if base == "go" {
			w.outputs(c, "-o")
		}
	case base == "gcc" || base == "g++" || base == "cc" || base == "c++" || base == "clang" || base == "clang++" || base == "ld" || base == "rustc":
		w.outputs(c, "-o", "--out-dir")
	case base == "gdb" || base == "lldb" || base == "cgdb":
		w.debugger(s, c)
	case base == "tmux" || base == "screen":
		w.multiplexer(s, c, base)
	case base == "yq" || base == "xmlstarlet" || base == "sd":
		w.inPlace(c, base)
	case base == "ed" || base == "red":
		w.knownWrites(c, mustSpec("ed"))
		w.edScript(s, c)
	default:
		if e, ok := effectsFor(base); ok {
			w.sideEffects(s, c, base, e)
		} else if ws, ok := writeSpecFor(base); ok {
			w.knownWrites(c, ws)
		}
	}
	// A handler may have handed the command on (python -m MODULE) and
	// left it with no argv.
	if len(c.Argv) > 0 && strings.Contains(name, "/") && c.Script == "" {
		w.execPath(s, c)
	}
	if len(c.Argv) > 0 && c.Script == "" && w.opts.Knows != nil && !w.opts.Knows(base) && !isShell(base) {
		w.embedded(s, c)
	}
}

// embedded walks the commands that a program no rule knows may run: it
// may be a wrapper no table knows (fakeroot CMD, bwrap … CMD), so the
// words after a `--`, the first word that names a program a rule knows
// and has arguments of its own, and every argument that is a command line
// for a program a rule knows are classified too. What it really runs can
// only be as bad as these; the program itself stays an unknown program.
// A known name alone is taken for a subcommand (npx husky init).
func (w *walker) embedded(s *syntax.Stmt, c *Command) {
	known := func(a Arg) bool {
		if a.Dynamic || a.Value == "" || strings.HasPrefix(a.Value, "-") || strings.ContainsAny(a.Value, " \t\n=") {
			return false
		}
		b := baseName(a.Value)
		switch b {
		case "script", "watch", "time", "exec", "command", "builtin":
			return false // words more often than wrappers
		}
		_, wrap := wrapperFor(b)
		return isShell(b) || wrap || w.opts.Knows(b)
	}
	run := func(argv []Arg) {
		next := *c
		next.Argv = argv
		next.Sub = 0
		next.Writes = nil
		next.WritesKnown = false
		next.Script = ""
		next.Wrappers = append(append([]string(nil), c.Wrappers...), baseName(c.Argv[0].Value))
		w.subshell(func() { w.command(s, next) })
	}
	args := c.Argv[1:]
	found := false
	for i, a := range args {
		switch {
		case !a.Dynamic && a.Value == "--":
			if i+1 < len(args) && !found {
				run(args[i+1:])
			}
			return
		case !found && i+1 < len(args) && known(a):
			found = true
			run(args[i:])
		case !a.Dynamic && strings.ContainsAny(a.Value, " \t\n;|&"):
			if f := strings.Fields(a.Value); len(f) > 0 && known(Arg{Value: f[0]}) {
				w.subshell(func() { w.code(s.Pos(), baseName(c.Argv[0].Value), a.Value) })
			}
		}
	}
}

// debugger: gdb --args PROG and lldb -- PROG run PROG; shell commands
// given with -ex run too, and a command file or a scripting language
// is code the parser cannot read.
func (w *walker) debugger(s *syntax.Stmt, c *Command) {
	args := c.Argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.Dynamic {
			continue
		}
		v := a.Value
		next := func() (Arg, bool) {
			if _, after, ok := strings.Cut(v, "="); ok && strings.HasPrefix(v, "--") {
				return Arg{Value: after}, true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return Arg{}, false
		}
		switch {
		case v == "--args" || v == "--" || v == "-args":
			if i+1 < len(args) {
				n := *c
				n.Argv = args[i+1:]
				n.Writes, n.WritesKnown, n.Sub = nil, false, 0
				n.Wrappers = append(append([]string(nil), c.Wrappers...), baseName(c.Argv[0].Value))
				w.subshell(func() { w.command(s, n) })
			}
			return
		case v == "-ex" || v == "-iex" || v == "-eval-command" || strings.HasPrefix(v, "--eval-command") ||
			v == "-o" || v == "--one-line" || v == "-O" || v == "--one-line-before-file" || v == "-k" || v == "--source-on-crash":
			cmd, ok := next()
			if !ok {
				continue
			}
			t := strings.TrimSpace(cmd.Value)
			switch {
			case cmd.Dynamic:
				w.unknownAt(c.Pos, "debugger command is not literal", cmd.Value)
			case strings.HasPrefix(t, "!") || strings.HasPrefix(t, "shell "):
				code := strings.TrimPrefix(strings.TrimPrefix(t, "!"), "shell ")
				w.subshell(func() { w.code(s.Pos(), baseName(c.Argv[0].Value)+" shell", code) })
			case strings.HasPrefix(t, "python") || strings.HasPrefix(t, "pi ") || strings.HasPrefix(t, "pipe") || strings.HasPrefix(t, "|") ||
				strings.HasPrefix(t, "script") || strings.HasPrefix(t, "platform") || strings.HasPrefix(t, "source") ||
				strings.HasPrefix(t, "guile") || strings.HasPrefix(t, "call") || strings.HasPrefix(t, "command script"):
				w.unknownAt(c.Pos, "debugger command runs code: "+t, c.Text)
			}
		case v == "-x" || v == "-ix" || v == "--command" || strings.HasPrefix(v, "--command=") || v == "-s" || v == "--source" ||
			v == "-S" || v == "--source-before-file" || strings.HasPrefix(v, "--init-command") || v == "-p" || v == "--pid" || strings.HasPrefix(v, "--pid="):
			w.unknownAt(c.Pos, "debugger runs a command file or attaches to a running process: "+v, c.Text)
			next()
		}
	}
}

// multiplexer: tmux and screen run the command a session, window or pane
// starts with (one word is shell code, several a command), and what
// send-keys or stuff types into a shell, whose directory is unknown.
func (w *walker) multiplexer(s *syntax.Stmt, c *Command, base string) {
	args := c.Argv[1:]
	cmdAt := func(args []Arg, values string, cwd string) {
		opts, ops, ok := optSpec{value: values}.scan(args)
		if !ok {
			w.unknownAt(c.Pos, base+" with an option that is not literal", c.Text)
			return
		}
		if d, ok := has(opts, "-c"); ok && base == "tmux" {
			cwd = resolveIn(d, cwd).Path
		}
		for len(ops) > 1 && !ops[0].Dynamic && isDigits(ops[0].Value) {
			ops = ops[1:]
		}
		switch {
		case len(ops) == 1:
			if ops[0].Dynamic {
				w.unknownAt(c.Pos, base+" runs a command that is not literal", ops[0].Value)
				return
			}
			w.subshell(func() { w.st.cwd = cwd; w.code(s.Pos(), base, ops[0].Value) })
		case len(ops) > 1:
			n := *c
			n.Argv, n.Cwd = ops, cwd
			n.Writes, n.WritesKnown, n.Sub = nil, false, 0
			n.Wrappers = append(append([]string(nil), c.Wrappers...), base)
			w.subshell(func() { w.command(s, n) })
		}
	}
	typed := func(keys []Arg) {
		var parts []string
		for _, k := range keys {
			if k.Dynamic {
				w.unknownAt(c.Pos, base+" types text that is not literal", k.Value)
				return
			}
			switch k.Value {
			case "Enter", "C-m", "KPEnter", "C-j", "Escape", "C-c", "C-d", "Space", "Tab":
				parts = append(parts, "\n")
				continue
			}
			parts = append(parts, strings.NewReplacer("^M", "\n", "\\n", "\n", "\\r", "\n", "\r", "\n").Replace(k.Value))
		}
		if text := strings.Join(parts, ""); strings.TrimSpace(text) != "" {
			w.subshell(func() { w.st.cwd = ""; w.code(s.Pos(), base+" typed", text) })
		}
	}
	if base == "screen" {
		opts, ops, ok := optSpec{value: "SceptThsX", longValue: []string{"-Logfile"}}.scan(args)
		if !ok {
			w.unknownAt(c.Pos, "screen with an option that is not literal", c.Text)
			return
		}
		if x, ok := has(opts, "-X"); ok {
			switch {
			case x.Dynamic:
				w.unknownAt(c.Pos, "screen -X of a command that is not literal", x.Value)
			case x.Value == "stuff":
				typed(ops)
			case x.Value == "exec" || x.Value == "screen":
				cmdAt(ops, "", c.Cwd)
			}
			return
		}
		if len(ops) > 0 {
			cmdAt(ops, "", c.Cwd)
		}
		return
	}
	// tmux [-L socket] [-S path] [-f file] [-c shell-command] COMMAND …
	i := 0
	for i < len(args) && !args[i].Dynamic && strings.HasPrefix(args[i].Value, "-") && args[i].Value != "--" {
		v := args[i].Value
		if v == "-c" && i+1 < len(args) {
			cmdAt(args[i+1:i+2], "", c.Cwd)
		}
		if v == "-L" || v == "-S" || v == "-f" || v == "-c" || v == "-T" {
			i++
		}
		i++
	}
	// tmux commands may be chained with ";".
	for i < len(args) {
		j := i + 1
		for j < len(args) && (args[j].Dynamic || args[j].Value != ";" && args[j].Value != "\\;") {
			j++
		}
		sub, rest := args[i], args[i+1:j]
		i = j + 1
		if sub.Dynamic {
			w.unknownAt(c.Pos, "tmux command is not literal", sub.Value)
			continue
		}
		switch sub.Value {
		case "new", "new-session":
			cmdAt(rest, "cefFnstxy", c.Cwd) // -d (detached) takes no value
		case "neww", "new-window":
			cmdAt(rest, "ceFnt", c.Cwd)
		case "splitw", "split-window":
			cmdAt(rest, "ceFlpt", c.Cwd)
		case "respawn-pane", "respawnp", "respawn-window", "respawnw":
			cmdAt(rest, "cet", c.Cwd)
		case "display-popup", "popup":
			cmdAt(rest, "bcdehsStTwxy", c.Cwd) // here -d is the directory
		case "pipe-pane", "pipep":
			cmdAt(rest, "t", c.Cwd)
		case "run-shell", "run":
			cmdAt(rest, "dt", c.Cwd) // -d is a delay
		case "send-keys", "send":
			_, keys, _ := optSpec{value: "tNX"}.scan(rest)
			typed(keys)
		case "if-shell", "if":
			_, ops, _ := optSpec{value: "t"}.scan(rest)
			if len(ops) > 0 {
				cmdAt(ops[:1], "", c.Cwd)
			}
			for _, o := range ops[min(1, len(ops)):] {
				if o.Dynamic {
					w.unknownAt(c.Pos, "tmux if-shell runs a command that is not literal", o.Value)
				} else {
					w.unknownAt(c.Pos, "tmux if-shell runs tmux commands", o.Value)
				}
			}
		case "source-file", "source", "command-prompt", "confirm-before", "bind-key", "bind", "set-hook":
			w.unknownAt(c.Pos, "tmux "+sub.Value+" runs commands the parser cannot see", c.Text)
		}
	}
}

// makefiles checks the makefiles make reads (-f FILE, else GNUmakefile,
// makefile or Makefile in its directory): one the step changes first
// holds code that is not known yet.
func (w *walker) makefiles(c *Command) {
	var files []Arg
	args := c.Argv[1:]
	for i, a := range args {
		switch {
		case a.Dynamic:
		case (a.Value == "-f" || a.Value == "--file" || a.Value == "--makefile") && i+1 < len(args):
			files = append(files, args[i+1])
		case strings.HasPrefix(a.Value, "--file=") || strings.HasPrefix(a.Value, "--makefile="):
			_, f, _ := strings.Cut(a.Value, "=")
			files = append(files, Arg{Value: f})
		case strings.HasPrefix(a.Value, "-f") && len(a.Value) > 2:
			files = append(files, Arg{Value: a.Value[2:]})
		}
	}
	if len(files) == 0 {
		files = []Arg{{Value: "GNUmakefile"}, {Value: "makefile"}, {Value: "Makefile"}}
	}
	for _, f := range files {
		if wr := w.locate(f, c.Cwd, true); wr.Resolved && w.changed(wr.Path) == rewritten {
			w.runsChanged(c, f.Value)
			return
		}
	}
}

// optValue finds the value of the first of the named options in args.
func optValue(args []Arg, names ...string) (Arg, bool) {
	for i, a := range args {
		if a.Dynamic {
			continue
		}
		for _, n := range names {
			if a.Value == n && i+1 < len(args) {
				return args[i+1], true
			}
			if strings.HasPrefix(n, "--") && strings.HasPrefix(a.Value, n+"=") {
				return Arg{Value: a.Value[len(n)+1:]}, true
			}
			if !strings.HasPrefix(n, "--") && len(n) == 2 && strings.HasPrefix(a.Value, n) && len(a.Value) > 2 && a.Value[1] != '-' && n != "-o" {
				return Arg{Value: a.Value[2:]}, true
			}
		}
	}
	return Arg{}, false
}

// outputs adds the paths named by output options.
func (w *walker) outputs(c *Command, names ...string) {
	args := c.Argv[1:]
	for i, a := range args {
		for _, n := range names {
			switch {
			case a.Value == n && i+1 < len(args):
				c.Writes = append(c.Writes, w.resolveAt(c, args[i+1]))
			case strings.HasPrefix(a.Value, n+"="):
				c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: a.Value[len(n)+1:], Dynamic: a.Dynamic}))
			}
		}
	}
}

// inPlace records the files an editor of structured text rewrites when
// told to edit in place: yq -i EXPR FILE…, sd FIND REPLACE FILE…, and
// xmlstarlet ed -L … FILE (its last operand: the edit options take
// XPaths and values that look like paths). Without the option they
// print.
func (w *walker) inPlace(c *Command, base string) {
	args := c.Argv[1:]
	var files []Arg
	switch base {
	case "yq":
		opts, ops, ok := optSpec{value: "opIsP", longValue: []string{"--output-format", "--input-format", "--indent",
			"--split-exp", "--expression", "--from-file", "--front-matter", "--xml-attribute-prefix"}}.split(args)
		if _, in := has(opts, "-i", "--inplace"); !in && ok {
			return
		}
		if _, e := has(opts, "--expression", "--from-file"); !e && len(ops) > 0 {
			ops = ops[1:] // the expression
		}
		files = ops
	case "sd":
		opts, ops, _ := optSpec{value: "fn", longValue: []string{"--flags", "--max-replacements"}}.split(args)
		if _, preview := has(opts, "-p", "--preview"); preview || len(ops) < 3 {
			return // stdin to stdout, or a preview
		}
		files = ops[2:]
	case "xmlstarlet":
		if len(args) == 0 || args[0].Dynamic || args[0].Value != "ed" && args[0].Value != "edit" {
			return
		}
		in := false
		for _, a := range args[1:] {
			in = in || a.Dynamic || a.Value == "-L" || a.Value == "--inplace"
		}
		if !in || len(args) < 2 {
			return
		}
		files = args[len(args)-1:]
	}
	for _, f := range files {
		c.Writes = append(c.Writes, w.resolveAt(c, f))
	}
	c.WritesKnown = true
}

func (w *walker) resolveAt(c *Command, a Arg) Write {
	return w.locate(a, c.Cwd, true)
}

// writeSpec says which operands of a program are paths it writes.
type writeSpec struct {
	spec optSpec
	// which operands: "all", "last" (a destination), "second" (uniq's
	// output), "skipfirst" (chown's owner), "none"
	ops string
	// options whose value is a written path, and options whose value is a
	// directory written into.
	out, dir []string
	// eq are dd-style operands (of=FILE).
	eq []string
	// readOnly options make the program write nothing (gzip -c, tar -t).
	readOnly []string
	// unlinks: the operands are names removed from their directory, so
	// a symbolic link among them is not followed (rm, mv's sources).
	unlinks bool
	// stream: the program opens what it writes and writes into it
	// ([Write].Stream), unless it is given an option outside keep.
	stream bool
	keep   []string
}

func writeSpecFor(base string) (writeSpec, bool) {
	switch base {
	case "rm", "unlink", "rmdir":
		return writeSpec{ops: "all", unlinks: true}, true
	case "shred", "mkfifo", "dos2unix", "unix2dos":
		return writeSpec{ops: "all", spec: optSpec{value: "nsm", longValue: []string{"--mode", "--iterations", "--size"}}}, true
	case "touch":
		return writeSpec{ops: "all", spec: optSpec{value: "drt", longValue: []string{"--date", "--reference"}}}, true
	case "mkdir":
		return writeSpec{ops: "all", spec: optSpec{value: "mZ", longValue: []string{"--mode", "--context"}}}, true
	case "truncate":
		return writeSpec{ops: "all", spec: optSpec{value: "sr", longValue: []string{"--size", "--reference"}}, stream: true}, true
	case "tee":
		return writeSpec{ops: "all", spec: optSpec{longValue: []string{"--output-error"}}, stream: true}, true
	case "sponge":
		return writeSpec{ops: "all", stream: true, keep: []string{"-a"}}, true
	case "chown", "chgrp", "chattr":
		return writeSpec{ops: "skipfirst", spec: optSpec{longValue: []string{"--from"}}}, true
	case "setfacl":
		return writeSpec{ops: "all", spec: optSpec{value: "mMxX", longValue: []string{"--modify", "--remove", "--set", "--modify-file", "--remove-file", "--set-file"}}}, true
	case "cp":
		// cp opens an existing destination and writes into it, unless
		// it is told to link, back up, remove or keep attributes.
		ws := mustSpec("install")
		ws.stream = true
		ws.keep = []string{"-f", "--force", "-i", "--interactive", "-n", "--no-clobber", "-u", "--update", "-v", "--verbose",
			"-T", "--no-target-directory", "-L", "--dereference", "-H", "-r", "-R", "--recursive"}
		return ws, true
	case "install", "ln", "rsync", "scp":
		return writeSpec{ops: "last", spec: optSpec{value: "tSmogTe", longValue: []string{"--target-directory", "--suffix", "--mode", "--owner", "--group", "--backup", "--exclude", "--include", "--filter", "--rsh", "--files-from", "--exclude-from", "--include-from", "--chmod", "--log-file", "--partial-dir", "--temp-dir", "--link-dest", "--compare-dest", "--copy-dest", "--password-file", "--rsync-path"}}, dir: []string{"-t", "--target-directory"}}, true
	case "mv":
		return writeSpec{ops: "all", unlinks: true, spec: optSpec{value: "tS", longValue: []string{"--target-directory", "--suffix", "--backup"}}, dir: []string{"-t", "--target-directory"}}, true
	case "dd":
		return writeSpec{ops: "none", eq: []string{"of="}, stream: true}, true
	case "sort":
		return writeSpec{ops: "none", spec: optSpec{value: "ktoST", longValue: []string{"--key", "--field-separator", "--output", "--buffer-size", "--temporary-directory", "--parallel", "--batch-size", "--files0-from", "--compress-program", "--random-source", "--sort"}}, out: []string{"-o", "--output"}, stream: true}, true
	case "shuf":
		return writeSpec{ops: "none", spec: optSpec{value: "eino", longValue: []string{"--echo", "--input-range", "--head-count", "--output", "--random-source"}}, out: []string{"-o", "--output"}, stream: true}, true
	case "uniq":
		return writeSpec{ops: "second", spec: optSpec{value: "fsw", longValue: []string{"--skip-fields", "--skip-chars", "--check-chars", "--group", "--all-repeated"}}, stream: true}, true
	case "split", "csplit":
		return writeSpec{ops: "prefix", spec: optSpec{value: "abCdelnfx", longValue: []string{"--suffix-length", "--bytes", "--line-bytes", "--lines", "--number", "--additional-suffix", "--filter", "--prefix", "--suffix-format"}}, out: []string{"-f", "--prefix"}}, true
	case "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lz4", "compress", "uncompress", "brotli":
		return writeSpec{ops: "all", spec: optSpec{value: "SboT", longValue: []string{"--suffix", "--threads", "--format", "--output"}}, out: []string{"-o", "--output"}, readOnly: []string{"-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test"}}, true
	case "zcat", "bzcat", "xzcat", "zstdcat":
		return writeSpec{ops: "none"}, true
	case "patch":
		return writeSpec{ops: "first", spec: optSpec{value: "pidoBDFrVYzg", longValue: []string{"--strip", "--input", "--directory", "--output", "--prefix", "--reject-file", "--backup-if-mismatch", "--suffix", "--basename-prefix", "--fuzz"}}, out: []string{"-o", "--output", "-r", "--reject-file"}, dir: []string{"-d", "--directory"}}, true
	case "ed":
		return writeSpec{ops: "all"}, true
	case "xxd":
		return writeSpec{ops: "second", spec: optSpec{value: "cglosC", longValue: []string{"-cols", "-groupsize", "-len", "-seek", "-offset"}}, stream: true}, true
	case "sdiff", "iconv":
		return writeSpec{ops: "none", spec: optSpec{value: "owfWtco", longValue: []string{"--output", "--from-code", "--to-code", "--width"}}, out: []string{"-o", "--output"}, stream: true}, true
	}
	return writeSpec{}, false
}

func mustSpec(base string) writeSpec {
	ws, _ := writeSpecFor(base)
	return ws
}

// symlink remembers `ln -s TARGET LINK`, so that later writes through LINK
// land on TARGET.
func (w *walker) symlink(c *Command) {
	var ops []Arg
	sym := false
	for _, a := range c.Argv[1:] {
		switch {
		case a.Dynamic:
			return
		case a.Value == "-s" || a.Value == "--symbolic" || strings.HasPrefix(a.Value, "-") && !strings.HasPrefix(a.Value, "--") && strings.Contains(a.Value, "s"):
			sym = true
		case strings.HasPrefix(a.Value, "-"):
		default:
			ops = append(ops, a)
		}
	}
	if !sym || len(ops) != 2 {
		return
	}
	link := w.locate(ops[1], c.Cwd, false)
	if !link.Resolved || link.Tree {
		return
	}
	// The target is kept as written, relative to the link's directory:
	// it is resolved, `..` and all, when a path goes through the link.
	target := ops[0].Value
	if !strings.HasPrefix(target, "/") {
		target = path.Dir(link.Path) + "/" + target
	}
	if w.st.links == nil {
		w.st.links = map[string]string{}
	}
	w.st.links[link.Path] = target
}

// knownWrites applies a writeSpec to c.
func (w *walker) knownWrites(c *Command, ws writeSpec) {
	c.WritesKnown = true
	start := len(c.Writes)
	stream := ws.stream
	defer func() {
		if stream {
			for i := start; i < len(c.Writes); i++ {
				c.Writes[i].Stream = true
			}
		}
	}()
	for _, a := range c.Argv[1:] {
		if !a.Dynamic && a.Value == "--" {
			break
		}
		if a.Dynamic {
			// A word known only at run time may turn out to be an option
			// that names another target (-t/etc, --output=…).
			c.Writes = append(c.Writes, Write{Path: a.Value})
			break
		}
	}
	opts, ops, ok, ended := ws.spec.scanEnd(c.Argv[1:])
	if !ok {
		// An option we cannot read may name another target.
		c.Writes = append(c.Writes, Write{Path: c.Text})
		return
	}
	// Options may follow operands (GNU getopt permutes): collect the
	// options among the operands too.
	var operands []Arg
	if ended {
		operands, ops = ops, nil
	}
	for i := 0; i < len(ops); i++ {
		a := ops[i]
		if !a.Dynamic && len(a.Value) > 1 && a.Value[0] == '-' && a.Value != "--" {
			more, _, _ := ws.spec.scan(ops[i : i+1])
			if len(more) > 0 {
				last := more[len(more)-1]
				if last.val.Value == "" && (strings.IndexByte(ws.spec.value, last.name[len(last.name)-1]) >= 0 && len(last.name) == 2 ||
					contains(ws.spec.longValue, last.name)) && i+1 < len(ops) {
					last.val = ops[i+1]
					more[len(more)-1] = last
					i++
				}
			}
			opts = append(opts, more...)
			continue
		}
		if !a.Dynamic && a.Value == "--" {
			operands = append(operands, ops[i+1:]...)
			break
		}
		operands = append(operands, a)
	}
	for _, o := range opts {
		if contains(ws.readOnly, o.name) {
			return
		}
		if ws.keep != nil && !contains(ws.keep, o.name) {
			stream = false
		}
	}
	for _, o := range opts {
		switch {
		case contains(ws.out, o.name):
			c.Writes = append(c.Writes, w.resolveAt(c, o.val))
		case contains(ws.dir, o.name):
			if o.name == "-d" || o.name == "--directory" {
				c.Cwd = resolveIn(o.val, c.Cwd).Path
				continue
			}
			wr := w.resolveAt(c, o.val)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
			// The destination is given: every operand is a source,
			// which only mv changes (it removes it).
			if ws.unlinks {
				ws.ops = "sources"
			} else {
				ws.ops = "none"
			}
		}
	}
	for _, a := range operands {
		for _, prefix := range ws.eq {
			if v, ok := strings.CutPrefix(a.Value, prefix); ok {
				c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: v, Dynamic: a.Dynamic}))
			} else if a.Dynamic {
				c.Writes = append(c.Writes, Write{Path: a.Value})
			}
		}
	}
	switch ws.ops {
	case "all", "sources":
		for i, a := range operands {
			// mv's last operand is its destination, which it follows
			// into a directory a link points to.
			follow := !ws.unlinks || ws.ops == "all" && i == len(operands)-1 && len(operands) > 1 && path.Base(c.Name()) == "mv"
			c.Writes = append(c.Writes, w.locate(a, c.Cwd, follow))
		}
	case "skipfirst":
		if len(operands) > 1 {
			for _, a := range operands[1:] {
				c.Writes = append(c.Writes, w.resolveAt(c, a))
			}
		}
	case "first":
		if len(operands) > 0 {
			c.Writes = append(c.Writes, w.resolveAt(c, operands[0]))
		} else {
			wr := w.resolveAt(c, Arg{Value: "."})
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
	case "second":
		if len(operands) > 1 {
			c.Writes = append(c.Writes, w.resolveAt(c, operands[1]))
		}
	case "prefix":
		p := Arg{Value: "x"}
		if len(operands) > 1 {
			p = operands[1]
		}
		wr := w.resolveAt(c, p)
		wr.Tree = true
		wr.Path = path.Dir(wr.Path)
		c.Writes = append(c.Writes, wr)
	case "last":
		if len(operands) == 1 && path.Base(c.Name()) == "ln" {
			c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: path.Base(operands[0].Value), Dynamic: operands[0].Dynamic}))
			return
		}
		if len(operands) > 0 {
			dest := operands[len(operands)-1]
			if strings.Contains(dest.Value, ":") && !strings.HasPrefix(dest.Value, "/") && !strings.HasPrefix(dest.Value, "./") {
				return // host:path — a remote destination, not a local write
			}
			wr := w.resolveAt(c, dest)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
	}
}

// chmod operands: the first non-option word is the mode (which may look
// like an option: chmod -x f), unless --reference is given.
func (w *walker) chmod(c *Command) {
	c.WritesKnown = true
	modeSeen, ended := false, false
	for _, a := range c.Argv[1:] {
		if !ended && !a.Dynamic && a.Value == "--" {
			ended = true // the mode, if not given yet, and files follow
			continue
		}
		if !ended && strings.HasPrefix(a.Value, "--reference") {
			modeSeen = true
			continue
		}
		// A mode may start with a dash (chmod -x f): it comes first.
		if !a.Dynamic && !modeSeen && chmodMode().MatchString(a.Value) {
			modeSeen = true
			continue
		}
		if !ended && !a.Dynamic && strings.HasPrefix(a.Value, "-") {
			continue
		}
		if !modeSeen {
			modeSeen = true
			continue
		}
		c.Writes = append(c.Writes, w.resolveAt(c, a))
	}
}

var chmodMode = lazyRE(`^([0-7]{1,5}|[ugoa]*([-+=]([rwxXst]*|[ugo]))+(,[ugoa]*([-+=]([rwxXst]*|[ugo]))+)*)$`)

func (w *walker) mktemp(c *Command) {
	c.WritesKnown = true
	if wr, ok := w.mktempTarget(c); ok {
		c.Writes = append(c.Writes, wr)
	}
}

// mktempTarget is the directory under which mktemp c makes its file or
// directory (a Tree write), or false for mktemp -u, which makes nothing.
func (w *walker) mktempTarget(c *Command) (Write, bool) {
	dir := "/tmp"
	if d, ok := w.lookup("TMPDIR"); ok && strings.HasPrefix(d, "/") {
		dir = d
	}
	opts, ops, _ := optSpec{value: "p", longValue: []string{"--tmpdir", "--suffix"}}.scan(c.Argv[1:])
	if _, ok := has(opts, "-u", "--dry-run"); ok {
		return Write{}, false
	}
	tmpdir := false
	for _, o := range opts {
		if o.name == "-p" || o.name == "--tmpdir" {
			tmpdir = true
			if o.val.Dynamic {
				return Write{Path: o.val.Value}, true
			}
			if o.val.Value != "" {
				dir = o.val.Value
			}
		}
		if o.name == "-t" {
			tmpdir = true
		}
	}
	if len(ops) > 0 && !tmpdir {
		wr := w.resolveAt(c, Arg{Value: path.Dir(ops[0].Value), Dynamic: ops[0].Dynamic})
		wr.Tree = true
		return wr, true
	}
	return Write{Path: path.Clean(dir), Resolved: strings.HasPrefix(dir, "/"), Tree: true}, true
}

// mktempValue is what `$(mktemp …)` expands to, as far as the walker can
// tell: a path in the directory mktemp writes to, with the random part
// left as Xs. Writes under it then resolve to that directory (/tmp, a
// scratch path, in most scripts). ok is false for anything else.
func (w *walker) mktempValue(word *syntax.Word) (string, bool) {
	if word == nil || len(word.Parts) != 1 {
		return "", false
	}
	var cs *syntax.CmdSubst
	switch p := word.Parts[0].(type) {
	case *syntax.CmdSubst:
		cs = p
	case *syntax.DblQuoted:
		if len(p.Parts) == 1 {
			cs, _ = p.Parts[0].(*syntax.CmdSubst)
		}
	}
	if cs == nil || len(cs.Stmts) != 1 || cs.Stmts[0].Background || cs.Stmts[0].Negated || len(cs.Stmts[0].Redirs) > 0 {
		return "", false
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return "", false
	}
	c := &Command{Cwd: w.st.cwd}
	for _, a := range call.Args {
		args := w.word(a)
		if len(args) != 1 {
			return "", false
		}
		c.Argv = append(c.Argv, args[0])
	}
	if c.Argv[0].Dynamic || c.Argv[0].Value != "mktemp" {
		return "", false
	}
	wr, ok := w.mktempTarget(c)
	if !ok || !wr.Resolved {
		return "", false
	}
	return path.Join(wr.Path, "tmp.XXXXXXXXXX"), true
}

// envOptions returns the options a program reads from the environment
// variable name before its own (TAR_OPTIONS, UNZIP), split into words.
// known is false when the variable is set with a value known only at
// run time, or for this command alone (`TAR_OPTIONS=-P tar x…`), whose
// value the handler does not see.
func (w *walker) envOptions(c *Command, name string) (opts []Arg, known bool) {
	if contains(c.Env, name) {
		return nil, false
	}
	b := w.varBinding(name)
	v := ""
	switch {
	case b.how == unknownVal:
		return nil, !b.exported && !w.inEnv(name)
	case b.how == knownVal && (b.exported || w.inEnv(name)):
		v = b.value
	case b.how == fromEnv:
		v = w.opts.Env[name]
	}
	for _, f := range strings.Fields(v) {
		opts = append(opts, Arg{Value: f})
	}
	return opts, true
}

// longOpt reports whether v, a long option with its =value cut off, is
// name or an abbreviation of it, as getopt_long takes any unique prefix
// (`--abs` is --absolute-names). An ambiguous prefix makes the program
// refuse to run; taking it for name errs on the safe side.
func longOpt(v, name string, min int) bool {
	v, _, _ = strings.Cut(v, "=")
	return len(v) >= min && strings.HasPrefix(name, v)
}

// anywhere is the write of a program that may write any path.
var anywhere = Write{Path: "/", Resolved: true, Tree: true}

// tar: what it writes. Extraction writes under the target directory
// (-C, --one-top-level=DIR), and GNU tar and bsdtar keep members there:
// they drop a leading / and refuse `..`, unless -P (--absolute-names,
// bsdtar's --absolute-paths, --insecure) lets a member name any path.
// Creating or changing an archive writes the archive (-f; stdout by
// default), and --remove-files removes what it archived.
func (w *walker) tar(c *Command) {
	args := c.Argv[1:]
	if len(args) == 0 {
		return
	}
	c.WritesKnown = true
	envArgs, known := w.envOptions(c, "TAR_OPTIONS")
	if !known {
		c.Writes = append(c.Writes, anywhere)
		return
	}
	extract, create, toStdout, absolute, remove, list, dyn := false, false, false, false, false, false, false
	file, dir, top := Arg{}, Arg{}, Arg{}
	var aside []Arg // files tar writes besides the archive and the members
	var operands []Arg
	// short applies one of tar's one-letter options, and reports whether
	// it takes a value; value gives the value, and false when there is
	// none to give.
	short := func(ch rune, value func() (Arg, bool)) bool {
		switch ch {
		case 't', 'd':
			list = true
		case 'x':
			extract = true
		case 'c', 'r', 'u', 'A':
			create = true
		case 'O':
			toStdout = true
		case 'P':
			absolute = true
		case 'f', 'C', 'T', 'X', 'b', 'N', 'K', 'L', 'V', 'g', 'H':
			if val, ok := value(); ok {
				switch ch {
				case 'f':
					file = val
				case 'C':
					dir = val
				case 'g':
					aside = append(aside, val)
				}
			}
			return true
		}
		return false
	}
	// Old-style bundled options: tar xzf file, each value the next word.
	if first := args[0]; !first.Dynamic && !strings.HasPrefix(first.Value, "-") {
		rest := args[1:]
		for _, ch := range first.Value {
			short(ch, func() (Arg, bool) {
				if len(rest) == 0 {
					return Arg{}, false
				}
				val := rest[0]
				rest = rest[1:]
				return val, true
			})
		}
		args = rest
	}
	args = append(envArgs, args...)
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		next := func() Arg {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return Arg{}
		}
		value := func() Arg {
			if _, val, ok := strings.Cut(v, "="); ok {
				return Arg{Value: val}
			}
			return next()
		}
		switch {
		case a.Dynamic:
			dyn = true
		case v == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case longOpt(v, "--list", 4) || longOpt(v, "--diff", 5) || longOpt(v, "--compare", 5) || v == "--test-label":
			list = true
		case longOpt(v, "--extract", 4) || v == "--get":
			extract = true
		case longOpt(v, "--create", 4) || longOpt(v, "--append", 5) || longOpt(v, "--update", 5) ||
			longOpt(v, "--concatenate", 5) || longOpt(v, "--catenate", 5) || longOpt(v, "--delete", 5):
			create = true
		case longOpt(v, "--absolute-names", 4) || longOpt(v, "--absolute-paths", 4) || v == "--insecure":
			absolute = true
		case longOpt(v, "--to-stdout", 6):
			toStdout = true
		case longOpt(v, "--remove-files", 5):
			remove = true
		case longOpt(v, "--one-top-level", 5):
			if _, val, ok := strings.Cut(v, "="); ok {
				top = Arg{Value: val}
			}
		case longOpt(v, "--file", 6):
			file = value()
		case longOpt(v, "--directory", 5):
			dir = value()
		case longOpt(v, "--listed-incremental", 7) || longOpt(v, "--index-file", 4) || longOpt(v, "--volno-file", 4):
			aside = append(aside, value())
		case strings.HasPrefix(v, "--to-command") || strings.HasPrefix(v, "--checkpoint-action") ||
			strings.HasPrefix(v, "--use-compress-program") || strings.HasPrefix(v, "--info-script") ||
			strings.HasPrefix(v, "--new-volume-script") || v == "-I" || v == "-F" || strings.HasPrefix(v, "--rsh-command"):
			w.unknownAt(c.Pos, "tar runs a program named in its options", c.Text)
		case strings.HasPrefix(v, "--"):
		case strings.HasPrefix(v, "-") && len(v) > 1:
			// A value is the rest of the word, or the next word.
			for j := 1; j < len(v); j++ {
				if short(rune(v[j]), func() (Arg, bool) {
					if v[j+1:] != "" {
						return Arg{Value: v[j+1:]}, true
					}
					return next(), true
				}) {
					break
				}
			}
		default:
			operands = append(operands, a)
		}
	}
	if dir.Value == "" {
		dir = Arg{Value: "."}
	}
	in := resolveIn(dir, c.Cwd)
	at := func(a Arg) Write { return w.locate(a, in.Path, true) }
	if !in.Resolved {
		at = func(a Arg) Write { return Write{Path: a.Value} }
	}
	for _, a := range aside {
		c.Writes = append(c.Writes, w.resolveAt(c, a))
	}
	if dyn && !list {
		// A word known only at run time may be any option (-x, -P).
		c.Writes = append(c.Writes, Write{Path: c.Text})
	}
	switch {
	case extract && toStdout:
	case extract && absolute:
		c.Writes = append(c.Writes, anywhere)
	case extract:
		target := dir
		if top.Value != "" {
			target = top
		}
		wr := w.resolveAt(c, target)
		if top.Value != "" && in.Resolved {
			wr = at(top) // relative to -C
		}
		wr.Tree = true
		c.Writes = append(c.Writes, wr)
	case create:
		if file.Value != "" && file.Value != "-" {
			c.Writes = append(c.Writes, w.resolveAt(c, file))
		}
		if remove {
			for _, a := range operands {
				wr := at(a)
				wr.Tree = true
				c.Writes = append(c.Writes, wr)
			}
		}
	}
}

// unzip extracts under the current directory or -d DIR: Info-ZIP drops a
// leading / and `../` from member names unless -: keeps them, and a
// member may then land anywhere. It reads more options from $UNZIP and
// $UNZIPOPT.
func (w *walker) unzip(c *Command) {
	c.WritesKnown = true
	var args []Arg
	for _, name := range []string{"UNZIP", "UNZIPOPT"} {
		env, known := w.envOptions(c, name)
		if !known {
			c.Writes = append(c.Writes, anywhere)
			return
		}
		args = append(args, env...)
	}
	args = append(args, c.Argv[1:]...)
	opts := optSpec{value: "dxP"}.all(args)
	if _, ok := has(opts, "-l", "-v", "-t", "-p", "-Z", "-z"); ok {
		return
	}
	if _, ok := has(opts, "-:"); ok {
		c.Writes = append(c.Writes, anywhere)
		return
	}
	target := Arg{Value: "."}
	if d, ok := has(opts, "-d"); ok {
		target = d
	}
	wr := w.resolveAt(c, target)
	wr.Tree = true
	c.Writes = append(c.Writes, wr)
}

// cpio: -o writes the archive (-O/-F FILE, else standard output); -i
// extracts under the current directory (-D DIR) and keeps absolute member
// names unless --no-absolute-filenames; -p copies the files named on
// standard input into DIR, names that may hold `..`. -t only lists.
func (w *walker) cpio(c *Command) {
	c.WritesKnown = true
	for _, a := range c.Argv[1:] {
		if a.Dynamic {
			// A word known only at run time may be any option.
			c.Writes = append(c.Writes, Write{Path: c.Text})
			return
		}
	}
	opts := optSpec{value: "CDEFHIMOR", longValue: []string{"--directory", "--file", "--format",
		"--io-size", "--message", "--owner", "--pattern-file", "--rsh-command", "--block-size"}}.all(c.Argv[1:])
	mode, noAbs, toStdout := byte(0), false, false
	for _, o := range opts {
		switch {
		case o.name == "-i" || longOpt(o.name, "--extract", 4):
			mode = max(mode, 'i')
		case o.name == "-o" || longOpt(o.name, "--create", 4):
			mode = max(mode, 'o')
		case o.name == "-p" || longOpt(o.name, "--pass-through", 4):
			mode = max(mode, 'p')
		case o.name == "-t" || longOpt(o.name, "--list", 4):
			toStdout = true
		case longOpt(o.name, "--no-absolute-filenames", 6):
			noAbs = true
		case longOpt(o.name, "--to-stdout", 5):
			toStdout = true
		case longOpt(o.name, "--rsh-command", 4):
			w.unknownAt(c.Pos, "cpio runs a program named in its options", c.Text)
		}
	}
	switch mode {
	case 'o':
		if f, ok := has(opts, "-O", "-F", "--file"); ok {
			c.Writes = append(c.Writes, w.resolveAt(c, f))
		}
	case 'i':
		if toStdout {
			return
		}
		if !noAbs {
			c.Writes = append(c.Writes, anywhere)
			return
		}
		dir := Arg{Value: "."}
		if d, ok := has(opts, "-D", "--directory"); ok {
			dir = d
		}
		wr := w.resolveAt(c, dir)
		wr.Tree = true
		c.Writes = append(c.Writes, wr)
	case 'p':
		c.Writes = append(c.Writes, anywhere)
	}
}

// pax: with -w alone it writes the archive (-f FILE, else standard
// output); -r extracts member names as they are, absolute or with `..`,
// so anywhere; -r -w copies the files named (or read from standard
// input) into the last operand. Neither only lists.
func (w *walker) pax(c *Command) {
	c.WritesKnown = true
	opts, ops, ok := optSpec{value: "bfopsxGTU"}.scan(c.Argv[1:])
	if !ok {
		c.Writes = append(c.Writes, Write{Path: c.Text})
		return
	}
	_, read := has(opts, "-r")
	_, write := has(opts, "-w")
	switch {
	case read && write && len(ops) > 1:
		wr := w.resolveAt(c, ops[len(ops)-1])
		wr.Tree = true
		c.Writes = append(c.Writes, wr)
	case read:
		c.Writes = append(c.Writes, anywhere)
	case write:
		if f, ok := has(opts, "-f"); ok {
			c.Writes = append(c.Writes, w.resolveAt(c, f))
		}
	}
}

// curlSpec lists curl's options that take a value.
var curlSpec = optSpec{value: "bcCdDeEFHKmoPQrtTuUwxXyYz", longValue: []string{"--output", "--output-dir",
	"--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr", "--etag-save", "--hsts",
	"--alt-svc", "--libcurl", "--config", "--data", "--data-raw", "--data-binary", "--data-urlencode",
	"--form", "--header", "--user", "--user-agent", "--request", "--url", "--proxy", "--cookie",
	"--referer", "--max-time", "--connect-timeout", "--retry", "--upload-file", "--json", "--cert",
	"--key", "--cacert", "--resolve", "--connect-to", "--write-out", "--range"}}

func (w *walker) curl(c *Command) {
	c.WritesKnown = true
	w.curlArgs(c)
	opts := curlSpec.all(c.Argv[1:])
	outDir := Arg{Value: "."}
	if d, ok := has(opts, "--output-dir"); ok {
		outDir = d
	}
	for _, o := range opts {
		t := o.val
		switch o.name {
		case "-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii",
			"--stderr", "--etag-save", "--hsts", "--alt-svc", "--libcurl":
			if !t.Dynamic && (t.Value == "-" || harmlessDevice(t.Value)) {
				continue
			}
			if (o.name == "-o" || o.name == "--output") && !t.Dynamic && !strings.HasPrefix(t.Value, "/") {
				t.Value = path.Join(outDir.Value, t.Value)
			}
			c.Writes = append(c.Writes, w.resolveAt(c, t))
		case "-O", "--remote-name", "--remote-name-all", "-J", "--remote-header-name":
			wr := w.resolveAt(c, outDir)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
	}
	if slices.Contains(c.Argv, configUnknown) {
		// Its options may write files as well as send.
		w.unknownAt(c.Pos, "curl reads options from a file the parser cannot read", c.Text)
	}
}

func (w *walker) wget(c *Command) {
	c.WritesKnown = true
	w.wgetArgs(c)
	args := c.Argv[1:]
	opts := optSpec{value: "oaOPeUTtwQlARDIXiB", longValue: []string{"--output-document", "--directory-prefix",
		"--output-file", "--append-output", "--execute", "--user-agent", "--save-cookies", "--load-cookies"}}.all(args)
	out, hasOut := has(opts, "-O", "--output-document")
	if hasOut && !out.Dynamic && (out.Value == "-" || harmlessDevice(out.Value)) {
		// to stdout
	} else if hasOut {
		c.Writes = append(c.Writes, w.resolveAt(c, out))
	} else {
		dir := Arg{Value: "."}
		if d, ok := has(opts, "-P", "--directory-prefix"); ok {
			dir = d
		}
		spider := false
		for _, a := range args {
			if a.Value == "--spider" {
				spider = true
			}
		}
		if !spider {
			wr := w.resolveAt(c, dir)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
	}
	for _, o := range opts {
		switch o.name {
		case "-o", "--output-file", "-a", "--append-output", "--save-cookies":
			c.Writes = append(c.Writes, w.resolveAt(c, o.val))
		}
	}
	if _, ok := has(opts, "-e", "--execute"); ok {
		w.unknownAt(c.Pos, "wget -e runs wgetrc commands", c.Text)
	}
}

// ssh: the remote command runs elsewhere, but ProxyCommand and
// LocalCommand run here.
func (w *walker) ssh(s *syntax.Stmt, c *Command) {
	args := c.Argv[1:]
	for i, a := range args {
		v := a.Value
		if v == "-o" && i+1 < len(args) {
			v = "-o" + args[i+1].Value
		}
		if !strings.HasPrefix(v, "-o") {
			continue
		}
		key, val, _ := strings.Cut(strings.TrimSpace(v[2:]), "=")
		if val == "" {
			key, val, _ = strings.Cut(strings.TrimSpace(v[2:]), " ")
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "proxycommand", "localcommand", "knownhostscommand", "permitlocalcommand":
			if a.Dynamic {
				w.unknownAt(c.Pos, "ssh option runs a local command", v)
				continue
			}
			if strings.EqualFold(strings.TrimSpace(key), "permitlocalcommand") {
				continue
			}
			w.subshell(func() { w.code(s.Pos(), "ssh -o "+key, val) })
		}
	}
}

// execPath handles a path-qualified program: if it is a shell script we
// can read, its text is classified.
func (w *walker) execPath(s *syntax.Stmt, c *Command) {
	p := w.locate(c.Argv[0], c.Cwd, true)
	if !p.Resolved {
		return
	}
	switch w.changed(p.Path) {
	case rewritten:
		w.runsChanged(c, c.Argv[0].Value)
		return
	case built:
		c.Opaque = true
		return
	}
	if w.opts.ReadFile == nil {
		return
	}
	data, err := w.opts.ReadFile(p.Path)
	if errors.Is(err, ErrBinary) {
		return
	}
	if err != nil {
		c.Opaque = true
		return
	}
	if _, posix, ok := shebang(data); ok {
		w.scriptText(s, c, p.Path, string(data), posix)
		return
	}
	if len(data) < 2 || data[0] != '#' || data[1] != '!' {
		// A binary: the program its path names, as a name found in PATH
		// is. Whether the path inherits the trust of its base name is the
		// caller's to say.
		return
	}
	c.Opaque = true // a program in another language
}

// ErrBinary is what [Options.ReadFile] returns (wrapped) for a compiled
// program whose text it does not return: a file too large to read whole,
// say, whose first bytes show a binary.
var ErrBinary = errors.New("a binary, not a script")

// shebang reports whether data is a shell script: a shell shebang, or no
// shebang at all (bash runs such a file itself).
func shebang(data []byte) (interp string, posix, ok bool) {
	if len(data) < 2 || data[0] != '#' || data[1] != '!' {
		for _, b := range data[:min(len(data), 512)] {
			if b == 0 {
				return "", false, false // a binary
			}
		}
		return "", false, true
	}
	line := string(data[2:])
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "", false, false
	}
	interp = path.Base(fields[0])
	if interp == "env" {
		rest := fields[1:]
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return "", false, false
		}
		interp = path.Base(rest[0])
	}
	switch interp {
	case "bash", "rbash":
		return interp, false, true
	case "sh", "dash", "ash", "posix-sh":
		return interp, true, true
	}
	return interp, false, false
}

// script reads the script at p (relative to the cwd) and walks it. It
// reports whether the file could be read, or what the step does first
// makes its text unknown.
func (w *walker) script(s *syntax.Stmt, c *Command, p, via string, posix bool) bool {
	wr := w.locate(Arg{Value: p}, c.Cwd, true)
	if !wr.Resolved {
		return false
	}
	switch w.changed(wr.Path) {
	case rewritten:
		w.runsChanged(c, p)
		return true
	case built:
		return false
	}
	if w.opts.ReadFile == nil {
		return false
	}
	data, err := w.opts.ReadFile(wr.Path)
	if errors.Is(err, fs.ErrNotExist) && !w.namesWrite(wr.Path) {
		// Missing now, and no command before it writes it by name: it
		// fails to run, and runs nothing (a stock ~/.bashrc sources
		// ~/.bash_aliases only if it exists).
		c.Script, c.Missing = wr.Path, true
		return true
	}
	if err != nil {
		return false
	}
	c.Script = wr.Path
	w.scriptWalk(s, c.Pos, wr.Path, string(data), via, posix)
	return true
}

// How the text of a file stands when a command runs it (see
// [walker.changed]).
const (
	asRead    = iota // the step does not change it: the text read is the text run
	built            // a compiler or venv made it: a program, not text to read
	rewritten        // the step writes it first: its text is not known
)

// changed says whether a command recorded so far may have changed the
// text of the file at p (absolute, resolved): what the step itself
// writes cannot be trusted as read, whether it names p, a tree above
// it, or a path known only at run time. Changing a file's mode, owner
// or times (chmod +x, touch) leaves its text, and removing it leaves
// none to run.
func (w *walker) changed(p string) int {
	state := asRead
	for _, c := range w.facts.Commands {
		kind := rewritten
		switch baseName(c.Name()) {
		case "chmod", "chown", "chgrp", "chattr", "setfacl", "touch", "rm", "unlink", "rmdir", "shred", "mktemp":
			kind = asRead // mktemp makes a new file: it changes none that exists
		case "go", "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "rustc", "venv", "virtualenv":
			kind = built
		}
		for _, wr := range c.Writes {
			k := kind
			if wr.Redirect {
				k = rewritten
			}
			if k == asRead || wr.Resolved && wr.Path != p && !(wr.Tree && pathglob.Below(p, wr.Path)) {
				continue
			}
			state = max(state, k)
		}
	}
	return state
}

// runsChanged reports that c runs the file p, which the step changes
// before it runs.
func (w *walker) runsChanged(c *Command, p string) {
	c.Opaque = true
	w.unknownAt(c.Pos, "runs "+p+", which this step changes first: its text is not known yet", c.Text)
}

// runsFile handles a program that runs the code in the file a (an
// interpreter's script): when the step changes the file first, its code
// is unknown; otherwise the program runs code the parser does not read.
func (w *walker) runsFile(c *Command, a Arg) {
	c.Opaque = true
	if a.Dynamic {
		return
	}
	if wr := w.locate(a, c.Cwd, true); wr.Resolved && w.changed(wr.Path) == rewritten {
		w.runsChanged(c, a.Value)
	}
}

// namesWrite reports whether a command recorded so far names p (or a
// tree above it) among its writes, or writes a path known only at run
// time. Programs whose writes are not all known are left to the caller
// ([Command.Missing]).
func (w *walker) namesWrite(p string) bool {
	for _, c := range w.facts.Commands {
		for _, wr := range c.Writes {
			if !wr.Resolved || wr.Path == p || (wr.Tree && pathglob.Below(p, wr.Path)) {
				return true
			}
		}
	}
	return false
}

func (w *walker) scriptText(s *syntax.Stmt, c *Command, p, text string, posix bool) {
	c.Script = p
	w.subshell(func() {
		saved := w.root
		w.root = w.root || c.Root
		w.scriptWalk(s, c.Pos, p, text, "script "+c.Argv[0].Value, posix)
		w.root = saved
	})
}

func (w *walker) scriptWalk(s *syntax.Stmt, at Pos, p, text, via string, posix bool) {
	if w.depth+1 > w.opts.MaxDepth {
		w.unknownAt(at, "scripts nest too deeply to analyse", p)
		return
	}
	n := w.nested(s.Pos(), via)
	if posix {
		opts := *w.opts
		opts.POSIX = true
		n.opts = &opts
	}
	n.source(text, p)
	if !n.process {
		w.st = n.st
	}
}

// shell handles bash, sh and friends: -c strings, script files, and
// scripts read from stdin.
func (w *walker) shell(s *syntax.Stmt, c *Command, base string) {
	c.WritesKnown = true
	args := c.Argv[1:]
	posix := base == "sh" || base == "dash" || base == "ash" || base == "posh"
	var code *Arg
	check := false
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a.Dynamic {
			w.unknownAt(c.Pos, base+" with a non-literal argument", a.Value)
			w.record(*c)
			c.Argv = nil
			return
		}
		v := a.Value
		if v == "--" || v == "-" {
			i++
			break
		}
		if !strings.HasPrefix(v, "-") && !strings.HasPrefix(v, "+") || len(v) < 2 {
			break
		}
		if strings.HasPrefix(v, "--") {
			switch v {
			case "--rcfile", "--init-file":
				i++
			case "--posix":
				posix = true
			}
			continue
		}
		for j := 1; j < len(v); j++ {
			switch v[j] {
			case 'c':
				code = &Arg{}
			case 'n':
				check = true
			case 'o', 'O':
				i++ // -o OPTION
			}
		}
	}
	rest := args[min(i, len(args)):]
	switch {
	case check:
		// -n only reads the script.
		return
	case code != nil:
		if len(rest) == 0 {
			return
		}
		if rest[0].Dynamic {
			w.unknownAt(c.Pos, base+" -c of a non-literal", rest[0].Value)
			return
		}
		inner := w.nested(s.Pos(), base+" -c")
		if posix {
			opts := *w.opts
			opts.POSIX = true
			inner.opts = &opts
		}
		if w.depth+1 > w.opts.MaxDepth {
			w.unknownAt(c.Pos, "nested code is too deep to analyse", rest[0].Value)
			return
		}
		w.record(*c)
		inner.root = w.root || c.Root
		c.Argv = nil
		w.subshell(func() {
			inner.st = w.st
			inner.st.cwd = c.Cwd
			inner.source(rest[0].Value, "")
		})
		return
	case len(rest) > 0 && isStdinPath(rest[0].Value):
		w.stdinCode(s, c, base)
		return
	case len(rest) > 0:
		// The script runs in a child shell: its cd and variables stay
		// there.
		read := false
		w.subshell(func() {
			saved := w.root
			w.root = w.root || c.Root
			read = w.script(s, c, rest[0].Value, base+" "+rest[0].Value, posix)
			w.root = saved
		})
		if !read {
			// An unread script is an unknown program, not unknown code.
			c.Opaque = true
		}
		return
	}
	// The script comes from stdin: a here-document, a file we can read,
	// or the literal text a pipe feeds it (echo 'git push' | bash).
	if w.piped != nil && !redirectsStdin(s) {
		text := *w.piped
		w.record(*c)
		c.Argv = nil
		w.subshell(func() { w.code(s.Pos(), base+" < pipe", text) })
		return
	}
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			if lit, ok := w.hdocLiteral(r); ok {
				w.record(*c)
				c.Argv = nil
				w.subshell(func() { w.code(r.OpPos, base+" <<here-document", lit) })
				return
			}
		case syntax.WordHdoc:
			args := w.word(r.Word)
			if len(args) == 1 && !args[0].Dynamic {
				w.record(*c)
				c.Argv = nil
				w.subshell(func() { w.code(r.OpPos, base+" <<<", args[0].Value) })
				return
			}
		case syntax.RdrIn:
			args := w.word(r.Word)
			if len(args) == 1 && !args[0].Dynamic && w.script(s, c, args[0].Value, base+" < "+args[0].Value, posix) {
				return
			}
		}
	}
	w.stdinProgram(s, c, base+" reads its script from standard input")
}

// hdocLiteral returns a here-document's body when it is static.
func (w *walker) hdocLiteral(r *syntax.Redirect) (string, bool) {
	if r.Hdoc == nil {
		return "", true
	}
	var sb strings.Builder
	for _, p := range r.Hdoc.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			sb.WriteString(x.Value)
		default:
			if !w.staticPart(p) {
				return "", false
			}
			args := w.word(&syntax.Word{Parts: []syntax.WordPart{p}})
			for _, a := range args {
				sb.WriteString(a.Value)
			}
		}
	}
	body := sb.String()
	if r.Op == syntax.DashHdoc {
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimLeft(l, "\t")
		}
		body = strings.Join(lines, "\n")
	}
	return body, true
}

// stdinText returns the static text a command reads on stdin from a
// here-document or here-string, if any.
func (w *walker) stdinText(s *syntax.Stmt) (string, bool) {
	if w.piped != nil && !redirectsStdin(s) {
		return *w.piped, true
	}
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			return w.hdocLiteral(r)
		case syntax.WordHdoc:
			args := w.word(r.Word)
			if len(args) == 1 && !args[0].Dynamic {
				return args[0].Value, true
			}
			return "", false
		}
	}
	return "", false
}

// lazyRE compiles a regular expression on first use, so that programs
// that never need it do not pay for it at start-up.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// edScript: ed reads its commands from standard input. `!CMD` (alone, or
// as the file of r, e and w) runs CMD through the shell; w FILE, e FILE
// and f FILE name other files it writes. A script the parser cannot read
// may do any of these.
func (w *walker) edScript(s *syntax.Stmt, c *Command) {
	text, ok := w.stdinText(s)
	if !ok {
		if w.fromTerminal(s) {
			c.Opaque = true
			return
		}
		w.unknownAt(c.Pos, "ed reads its commands from standard input", c.Text)
		return
	}
	file := ""
	if ops := operands(c); len(ops) > 0 && !ops[len(ops)-1].Dynamic {
		file = ops[len(ops)-1].Value
	}
	shell := func(code string) {
		code = strings.ReplaceAll(code, "%", file)
		w.subshell(func() { w.code(s.Pos(), "ed !", code) })
	}
	input := false
	for _, line := range strings.Split(text, "\n") {
		if input {
			input = line != "."
			continue
		}
		i := 0
	addr:
		for i < len(line) {
			switch ch := line[i]; {
			case strings.IndexByte(" \t0123456789.,;$+-^", ch) >= 0:
				i++
			case ch == '\'':
				i += 2
			case ch == '/' || ch == '?':
				j := i + 1
				for j < len(line) && line[j] != ch {
					if line[j] == '\\' {
						j++
					}
					j++
				}
				i = j + 1
			default:
				break addr
			}
		}
		if i >= len(line) {
			continue
		}
		cmd := line[i:]
		switch cmd[0] {
		case 'a', 'i', 'c':
			input = len(cmd) == 1 || strings.IndexByte("pln", cmd[1]) >= 0
		case '!':
			shell(cmd[1:])
		case 'g', 'v', 'G', 'V':
			if strings.ContainsAny(cmd, "!") || strings.HasSuffix(cmd, "\\") {
				w.unknownAt(c.Pos, "ed global command runs commands the parser does not read", cmd)
			}
		case 'w', 'W', 'r', 'e', 'E', 'f':
			arg := cmd[1:]
			if strings.HasPrefix(cmd, "wq") {
				arg = cmd[2:]
			}
			arg = strings.TrimSpace(arg)
			switch {
			case strings.HasPrefix(arg, "!"):
				shell(arg[1:])
			case arg != "" && cmd[0] != 'r':
				c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: arg}))
			}
		}
	}
}
