package parser

import (
	"errors"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
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
	c.Sub = subcommandIndex(base, c.Argv)
	if w.runner(s, c, base) {
		return
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
	case isDatabase(base):
		w.database(s, c, base)
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
		w.git(c)
	case base == "npm" || base == "pnpm" || base == "yarn":
		w.npm(s, c, base)
	case base == "pip" || base == "pip3":
		w.pip(c)
	case base == "tar":
		w.tar(c)
	case base == "unzip":
		w.unzip(c)
	case base == "curl":
		w.curl(c)
	case base == "wget":
		w.wget(c)
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
		if base == "go" {
			w.outputs(c, "-o")
		}
	case base == "gcc" || base == "g++" || base == "cc" || base == "c++" || base == "clang" || base == "clang++" || base == "ld" || base == "rustc":
		w.outputs(c, "-o", "--out-dir")
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

func (w *walker) resolveAt(c *Command, a Arg) Write {
	return w.followLinks(resolveIn(a, c.Cwd))
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
	// stream: the program opens what it writes and writes into it
	// ([Write].Stream), unless it is given an option outside keep.
	stream bool
	keep   []string
}

func writeSpecFor(base string) (writeSpec, bool) {
	switch base {
	case "rm", "unlink", "shred", "rmdir", "mkfifo", "dos2unix", "unix2dos":
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
		return writeSpec{ops: "all", spec: optSpec{value: "tS", longValue: []string{"--target-directory", "--suffix", "--backup"}}, dir: []string{"-t", "--target-directory"}}, true
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
	case "ex", "ed":
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
	link := resolveIn(ops[1], c.Cwd)
	if !link.Resolved {
		return
	}
	target := ops[0].Value
	if !strings.HasPrefix(target, "/") {
		target = path.Join(path.Dir(link.Path), target)
	}
	if w.st.links == nil {
		w.st.links = map[string]string{}
	}
	w.st.links[link.Path] = path.Clean(target)
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
	opts, ops, ok := ws.spec.scan(c.Argv[1:])
	if !ok {
		// An option we cannot read may name another target.
		c.Writes = append(c.Writes, Write{Path: c.Text})
		return
	}
	// Options may follow operands (GNU getopt permutes): collect the
	// options among the operands too.
	var operands []Arg
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
			ws.ops = "all-but-dest"
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
	case "all":
		for _, a := range operands {
			c.Writes = append(c.Writes, w.resolveAt(c, a))
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
	modeSeen := false
	for _, a := range c.Argv[1:] {
		if strings.HasPrefix(a.Value, "--reference") {
			modeSeen = true
			continue
		}
		if !a.Dynamic && !modeSeen && chmodMode().MatchString(a.Value) {
			modeSeen = true
			continue
		}
		if !a.Dynamic && strings.HasPrefix(a.Value, "-") {
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

func (w *walker) tar(c *Command) {
	args := c.Argv[1:]
	if len(args) == 0 {
		return
	}
	c.WritesKnown = true
	extract, create, file, dir := false, false, "", ""
	fileDyn := false
	// Old-style bundled options: tar xzf file.
	if first := args[0]; !first.Dynamic && !strings.HasPrefix(first.Value, "-") {
		rest := args[1:]
		for _, ch := range first.Value {
			switch ch {
			case 'x':
				extract = true
			case 'c', 'r', 'u', 'A':
				create = true
			case 'f', 'C', 'T', 'X', 'b', 'N', 'K', 'L', 'V', 'g':
				if len(rest) > 0 {
					if ch == 'f' {
						file, fileDyn = rest[0].Value, rest[0].Dynamic
					}
					if ch == 'C' {
						dir = rest[0].Value
					}
					rest = rest[1:]
				}
			}
		}
		args = rest
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i].Value
			}
			return ""
		}
		switch {
		case a.Dynamic:
		case v == "--extract" || v == "--get":
			extract = true
		case v == "--create" || v == "--append" || v == "--update" || v == "--concatenate":
			create = true
		case strings.HasPrefix(v, "--file="):
			file = v[len("--file="):]
		case v == "--file":
			file = next()
		case strings.HasPrefix(v, "--directory="):
			dir = v[len("--directory="):]
		case v == "--directory":
			dir = next()
		case strings.HasPrefix(v, "--to-command") || strings.HasPrefix(v, "--checkpoint-action") ||
			strings.HasPrefix(v, "--use-compress-program") || strings.HasPrefix(v, "--info-script") ||
			strings.HasPrefix(v, "--new-volume-script") || v == "-I" || v == "-F" || strings.HasPrefix(v, "--rsh-command"):
			w.unknownAt(c.Pos, "tar runs a program named in its options", c.Text)
		case strings.HasPrefix(v, "--"):
		case strings.HasPrefix(v, "-") && len(v) > 1:
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'x':
					extract = true
				case 'c', 'r', 'u', 'A':
					create = true
				case 'f', 'C', 'T', 'X', 'b', 'N', 'K', 'L', 'V', 'g':
					val := v[j+1:]
					if val == "" {
						val = next()
					}
					if v[j] == 'f' {
						file = val
					}
					if v[j] == 'C' {
						dir = val
					}
					j = len(v)
				}
			}
		}
	}
	switch {
	case extract:
		target := c.Cwd
		if dir != "" {
			target = resolveIn(Arg{Value: dir}, c.Cwd).Path
		}
		c.Writes = append(c.Writes, Write{Path: target, Resolved: target != "", Tree: true})
		if target == "" {
			c.Writes[len(c.Writes)-1].Path = "."
		}
	case create:
		if file != "" && file != "-" {
			c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: file, Dynamic: fileDyn}))
		}
	}
}

func (w *walker) unzip(c *Command) {
	c.WritesKnown = true
	opts := optSpec{value: "dxP"}.all(c.Argv[1:])
	if _, ok := has(opts, "-l", "-v", "-t", "-p", "-Z", "-z"); ok {
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

// curlSpec lists curl's options that take a value.
var curlSpec = optSpec{value: "bcCdDeEFHKmoPQrtTuUwxXyYz", longValue: []string{"--output", "--output-dir",
	"--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr", "--etag-save", "--hsts",
	"--alt-svc", "--libcurl", "--config", "--data", "--data-raw", "--data-binary", "--data-urlencode",
	"--form", "--header", "--user", "--user-agent", "--request", "--url", "--proxy", "--cookie",
	"--referer", "--max-time", "--connect-timeout", "--retry", "--upload-file", "--json", "--cert",
	"--key", "--cacert", "--resolve", "--connect-to", "--write-out", "--range"}}

func (w *walker) curl(c *Command) {
	c.WritesKnown = true
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
		case "-K", "--config":
			w.unknownAt(c.Pos, "curl reads options from a file", c.Text)
		}
	}
}

func (w *walker) wget(c *Command) {
	c.WritesKnown = true
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
	if w.opts.ReadFile == nil {
		return
	}
	p := resolveIn(c.Argv[0], c.Cwd)
	if !p.Resolved {
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
// reports whether the file could be read.
func (w *walker) script(s *syntax.Stmt, c *Command, p, via string, posix bool) bool {
	if w.opts.ReadFile == nil {
		return false
	}
	wr := resolveIn(Arg{Value: p}, c.Cwd)
	if !wr.Resolved {
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

// namesWrite reports whether a command recorded so far names p (or a
// tree above it) among its writes, or writes a path known only at run
// time. Programs whose writes are not all known are left to the caller
// ([Command.Missing]).
func (w *walker) namesWrite(p string) bool {
	for _, c := range w.facts.Commands {
		for _, wr := range c.Writes {
			if !wr.Resolved || wr.Path == p || (wr.Tree && (wr.Path == "/" || strings.HasPrefix(p, wr.Path+"/"))) {
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
	// The script comes from stdin: a here-document or a file we can read.
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
