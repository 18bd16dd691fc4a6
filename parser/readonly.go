package parser

import (
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// effects lists what the options of a program that otherwise only reads
// (tree, less, xmllint, fd, hyperfine, …) make it do besides: the files
// they write and the code they run. The policy classes such a program
// none; the writes found here are classified by their paths, and the code
// by what it runs.
type effects struct {
	// spec says which options take a value, so that clusters (-ao FILE)
	// and operands read as the program reads them. The options below
	// are added to it.
	spec optSpec
	// dashLong: the program spells long options with one dash too
	// (xmllint -output, lshw -dump); any word of one dash and more than
	// one letter is read as --word.
	dashLong bool
	// out: options whose value is a file written into ("-" is the
	// standard output).
	out []string
	// tree: options whose value is a directory written under.
	tree []string
	// code: options whose value is shell code the program runs.
	code []string
	// prog: options whose value names a program run on each file read.
	prog []string
	// unknown: options whose effect the parser cannot see (code loaded
	// from a file, commands read from standard input).
	unknown []string
	// flags: options that make the program write a path of its own
	// choosing: the path, relative to the working directory or ~/, or
	// "" for everything under the operands (the working directory when
	// there is none).
	flags map[string]string
	// custom sees what the table cannot say.
	custom func(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg)
}

// effectsFor returns the effects of the options of base, when base is a
// program that only reads unless an option says otherwise.
func effectsFor(base string) (effects, bool) {
	switch base {
	case "tree":
		// tree -R writes 00Tree.html into every directory it lists.
		return effects{spec: optSpec{value: "LPIHT", longValue: []string{"--charset", "--filelimit", "--timefmt", "--sort", "--hintro", "--houtro"}},
			out: []string{"-o"}, flags: map[string]string{"-R": ""}}, true
	case "less", "more", "most":
		return effects{spec: optSpec{value: "bhjkpPtTxyzD#", longValue: []string{"--buffers", "--max-back-scroll", "--jump-target",
			"--lesskey-file", "--prompt", "--tag", "--tag-file", "--tabs", "--max-forw-scroll", "--window", "--color", "--shift",
			"--quotes", "--lesskey-src", "--rscroll", "--line-num-width", "--status-col-width", "--header", "--wordwrap"}},
			out: []string{"-o", "-O", "--log-file", "--LOG-FILE"}, custom: lessCommands}, true
	case "info":
		return effects{spec: optSpec{value: "dfnr", longValue: []string{"--directory", "--file", "--node", "--restore", "--index-search"}},
			out: []string{"-o", "--output", "--dribble"}}, true
	case "sar":
		return effects{spec: optSpec{value: "fiIPnmeqsu", longValue: []string{"--dev", "--iface", "--fs", "--sadc"}},
			custom: sarOutput}, true
	case "man":
		return effects{spec: optSpec{value: "CMSsmeLprRE", optional: "HTX", longValue: []string{"--config-file", "--manpath",
			"--sections", "--systems", "--extension", "--locale", "--preprocessor", "--prompt", "--recode", "--encoding"}},
			code: []string{"-P", "--pager", "-H", "--html"}}, true
	case "xmllint":
		return effects{dashLong: true, spec: optSpec{longValue: []string{"--path", "--dtdvalid", "--dtdvalidfpi", "--relaxng",
			"--schema", "--schematron", "--encode", "--pattern", "--xpath", "--maxmem", "--pretty", "--catalogs"}},
			out: []string{"-o", "--output"}, unknown: []string{"--shell"}}, true
	case "fd", "fdfind":
		return effects{spec: optSpec{value: "deEtcjSoCg", longValue: []string{"--max-depth", "--min-depth", "--exact-depth",
			"--extension", "--exclude", "--type", "--color", "--threads", "--size", "--changed-within", "--changed-before",
			"--owner", "--base-directory", "--search-path", "--max-results", "--ignore-file", "--path-separator",
			"--batch-size", "--max-buffer-time", "--and", "--format"}}, custom: fdExec}, true
	case "hyperfine":
		return effects{custom: hyperfine}, true
	case "fzf":
		return effects{spec: optSpec{value: "qfdn", longValue: []string{"--query", "--filter", "--delimiter", "--nth", "--with-nth",
			"--height", "--min-height", "--layout", "--border", "--margin", "--padding", "--info", "--prompt", "--pointer",
			"--marker", "--header", "--header-lines", "--color", "--tiebreak", "--preview-window", "--history-size",
			"--expect", "--tabstop", "--scheme", "--walker", "--walker-root", "--walker-skip", "--jump-labels", "--ellipsis",
			"--border-label", "--preview-label", "--separator", "--scrollbar", "--bind", "--with-shell"}},
			code: []string{"--preview"}, out: []string{"--history"}, unknown: []string{"--listen", "--listen-unsafe"},
			custom: fzfBind}, true
	case "ncdu":
		return effects{spec: optSpec{value: "ofX", longValue: []string{"--exclude", "--exclude-from", "--color"}}, custom: ncdu}, true
	case "bat", "batcat":
		return effects{spec: optSpec{value: "lHmpr", longValue: []string{"--language", "--highlight-line", "--file-name",
			"--diff-context", "--tabs", "--wrap", "--terminal-width", "--color", "--italic-text", "--decorations",
			"--paging", "--map-syntax", "--theme", "--style", "--line-range", "--config-file"}},
			code: []string{"--pager"}, flags: map[string]string{"--generate-config-file": "~/.config/bat/config"}, custom: batCache}, true
	case "delta":
		return effects{code: []string{"--pager"}}, true
	case "ack", "ag":
		return effects{code: []string{"--pager"}}, true
	case "rg":
		return effects{spec: optSpec{value: "efgtTmABCjMrEd", longValue: []string{"--regexp", "--file", "--glob", "--iglob",
			"--type", "--type-not", "--type-add", "--type-clear", "--max-count", "--after-context", "--before-context",
			"--context", "--threads", "--max-columns", "--replace", "--encoding", "--max-depth", "--colors", "--sort",
			"--sortr", "--pre-glob", "--path-separator", "--context-separator", "--field-match-separator",
			"--field-context-separator", "--dfa-size-limit", "--regex-size-limit", "--engine", "--hyperlink-format",
			"--ignore-file", "--max-filesize", "--color"}},
			prog: []string{"--pre", "--hostname-bin"}}, true
	case "cloc":
		return effects{dashLong: true, out: []string{"--out", "--report-file", "--sql", "--write-lang-def", "--write-lang-def-incl-dup"},
			code: []string{"--extract-with"}}, true
	case "scc":
		return effects{spec: optSpec{value: "fsMwx", longValue: []string{"--format", "--sort", "--not-match", "--exclude-dir",
			"--include-ext", "--exclude-ext", "--count-as", "--remap-all", "--remap-unknown", "--cocomo-project-type"}},
			out: []string{"-o", "--output"}, custom: sccFormats}, true
	case "xsv":
		return effects{spec: optSpec{value: "dsn", longValue: []string{"--delimiter", "--select", "--size", "--chunks"}},
			out: []string{"-o", "--output"}, custom: xsvWrites}, true
	case "mlr":
		return effects{spec: optSpec{value: "fsne", longValue: []string{"--from", "--ifs", "--ofs", "--ips", "--ops",
			"--irs", "--ors", "--fs", "--ps", "--rs", "--nr-progress-mod", "--ofmt", "--fflatsep", "--records-per-batch",
			"--tz", "--load", "--mload"}},
			code: []string{"--prepipe", "--prepipex"}, unknown: []string{"--load", "--mload"},
			flags: map[string]string{"-I": ""}, custom: mlrDSL}, true
	case "dc":
		return effects{custom: dcCode}, true
	case "codespell":
		return effects{spec: optSpec{value: "dcIxLSDirABCeq", longValue: []string{"--dictionary", "--builtin", "--ignore-words",
			"--ignore-words-list", "--ignore-regex", "--uri-ignore-words-list", "--skip", "--exclude-file", "--interactive",
			"--regex", "--after-context", "--before-context", "--context", "--quiet-level", "--config", "--count"}},
			flags: map[string]string{"-w": "", "--write-changes": ""}}, true
	case "jsonlint":
		return effects{spec: optSpec{value: "tV", longValue: []string{"--indent", "--validate", "--environment"}},
			flags: map[string]string{"-i": "", "--in-place": ""}}, true
	case "markdownlint":
		return effects{spec: optSpec{value: "cips", longValue: []string{"--config", "--ignore", "--ignore-path", "--stdin"}},
			out: []string{"-o", "--output"}, unknown: []string{"-r", "--rules"}, flags: map[string]string{"-f": "", "--fix": ""},
			custom: markdownlintConfig}, true
	case "flake8":
		return effects{out: []string{"--output-file"}}, true
	case "bandit":
		return effects{spec: optSpec{value: "anctpsfxb", longValue: []string{"--aggregate", "--number", "--configfile", "--profile",
			"--tests", "--skip", "--format", "--msg-template", "--exclude", "--baseline", "--ini", "--severity-level",
			"--confidence-level"}},
			out: []string{"-o", "--output"}}, true
	case "file":
		return effects{spec: optSpec{value: "mfFeP", longValue: []string{"--magic-file", "--files-from", "--separator",
			"--exclude", "--exclude-quiet", "--parameter"}}, custom: fileCompile}, true
	case "blkid":
		return effects{spec: optSpec{value: "ostLUnuOS", longValue: []string{"--output", "--match-tag", "--match-token",
			"--label", "--uuid", "--match-types", "--usages", "--offset", "--size"}},
			out: []string{"-c", "--cache-file"}}, true
	case "lshw":
		return effects{dashLong: true, spec: optSpec{value: "C", longValue: []string{"--class", "--disable", "--enable"}},
			out: []string{"--dump"}}, true
	case "dmidecode":
		return effects{spec: optSpec{value: "dtsH", longValue: []string{"--dev-mem", "--type", "--string", "--handle",
			"--from-dump", "--oem-string"}}, out: []string{"--dump-bin"}}, true
	case "hwinfo":
		return effects{spec: optSpec{longValue: []string{"--only", "--show-config", "--map"}}, out: []string{"--log"},
			unknown: []string{"--save-config"}}, true
	case "iptables-save", "ip6tables-save", "iptables-legacy-save", "iptables-nft-save":
		return effects{spec: optSpec{value: "tM", longValue: []string{"--table", "--modprobe"}}, out: []string{"-f", "--file"}}, true
	case "nm":
		return effects{unknown: []string{"--plugin"}}, true
	case "actionlint":
		return effects{dashLong: true, spec: optSpec{longValue: []string{"--format", "--config-file", "--ignore",
			"--stdin-filename"}}, prog: []string{"--shellcheck", "--pyflakes"},
			flags: map[string]string{"--init-config": ".github/actionlint.yaml"}}, true
	case "fastfetch":
		return effects{flags: map[string]string{"--gen-config": "~/.config/fastfetch/config.jsonc",
			"--gen-config-force": "~/.config/fastfetch/config.jsonc"}}, true
	case "cspell":
		return effects{spec: optSpec{value: "ce", longValue: []string{"--config", "--exclude", "--locale", "--language-id",
			"--cache-strategy", "--reporter", "--file-list"}},
			out: []string{"--cache-location"}, flags: map[string]string{"--cache": ".cspellcache"}}, true
	case "stty":
		return effects{custom: sttyDevice}, true
	case "json.tool":
		// python -m json.tool [INFILE [OUTFILE]]
		return effects{spec: optSpec{longValue: []string{"--indent"}}, custom: secondOperand}, true
	case "timeit":
		// python -m timeit [-s SETUP] STATEMENT…: both are Python code.
		return effects{spec: optSpec{value: "nrsu", longValue: []string{"--number", "--repeat", "--setup", "--unit"}},
			custom: timeitCode}, true
	case "zipfile", "tarfile":
		// python -m zipfile -e ARCHIVE DIR, -c ARCHIVE FILE…
		return effects{custom: archiveModule}, true
	case "compileall", "py_compile":
		// They write __pycache__ beside what they compile; compileall
		// with no operand compiles sys.path.
		return effects{spec: optSpec{value: "lrdxiqjeos", longValue: []string{"--workers", "--invalidation-mode"}},
			custom: compileModule}, true
	case "pydoc":
		// pydoc -w NAME writes NAME.html.
		return effects{spec: optSpec{value: "kpn"}, custom: pydocWrite}, true
	}
	return effects{}, false
}

// sideEffects applies e to c.
func (w *walker) sideEffects(s *syntax.Stmt, c *Command, base string, e effects) {
	sp := e.spec
	all := func(lists ...[]string) []string {
		var out []string
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	named := all(e.out, e.tree, e.code, e.prog, e.unknown)
	sp.longValue = append(append([]string(nil), sp.longValue...), longs(named)...)
	sp.value += shorts(named)
	var longFlags []string
	for f := range e.flags {
		if strings.HasPrefix(f, "--") {
			longFlags = append(longFlags, f)
		}
	}
	// Read the words as the program does: one-dash long options, and
	// abbreviations of the long options that matter (getopt_long takes
	// any unambiguous prefix; an ambiguous one is taken to be the one
	// that matters).
	args := make([]Arg, 0, len(c.Argv)-1)
	for _, a := range c.Argv[1:] {
		v := a.Value
		if !a.Dynamic && e.dashLong && len(v) > 2 && v[0] == '-' && v[1] != '-' {
			if name, _, _ := strings.Cut(v[1:], "="); len(name) > 1 {
				v = "-" + v
			}
		}
		if !a.Dynamic && strings.HasPrefix(v, "--") && len(v) > 3 {
			name, val, eq := strings.Cut(v, "=")
			if full := abbreviation(name, all(named, longFlags), sp.longValue); full != name {
				v = full
				if eq {
					v += "=" + val
				}
			}
		}
		args = append(args, Arg{Value: v, Dynamic: a.Dynamic, Glob: a.Glob})
	}
	opts, ops := scanAll(sp, args)
	for _, o := range opts {
		v := o.val
		switch {
		case contains(e.out, o.name):
			if v.Dynamic || v.Value != "-" && v.Value != "" {
				wr := w.resolveAt(c, v)
				wr.Stream = true
				c.Writes = append(c.Writes, wr)
			}
		case contains(e.tree, o.name):
			wr := w.resolveAt(c, v)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		case contains(e.code, o.name):
			w.optionCode(s, c, base+" "+o.name, v)
		case contains(e.prog, o.name):
			if !v.Dynamic && v.Value == "" {
				continue // -shellcheck= turns it off
			}
			w.runOnFiles(s, c, base+" "+o.name, v)
		case contains(e.unknown, o.name):
			w.unknownAt(c.Pos, base+" "+o.name+" runs code the parser cannot see", c.Text)
		}
		if p, ok := e.flags[o.name]; ok {
			w.flagWrites(c, p, ops)
		}
	}
	if e.custom != nil {
		e.custom(w, s, c, opts, ops)
	}
}

// scanAll reads every option of args, wherever it stands (GNU getopt
// permutes), and the operands; after -- everything is an operand.
func scanAll(sp optSpec, args []Arg) (opts []opt, ops []Arg) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.Dynamic && a.Value == "--" {
			return opts, append(ops, args[i+1:]...)
		}
		if a.Dynamic || len(a.Value) < 2 || a.Value[0] != '-' {
			ops = append(ops, a)
			continue
		}
		o, rest, _ := sp.scan(args[i:])
		opts = append(opts, o...)
		i = len(args) - len(rest) - 1
	}
	return opts, ops
}

// abbreviation returns the long option that name abbreviates among
// those that matter, or name itself when it is one of the program's
// long options or abbreviates none that matter.
func abbreviation(name string, matter, known []string) string {
	if contains(matter, name) || contains(known, name) {
		return name
	}
	for _, m := range matter {
		if strings.HasPrefix(m, name) {
			return m
		}
	}
	return name
}

func longs(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "--") {
			out = append(out, n)
		}
	}
	return out
}

func shorts(names []string) string {
	var b strings.Builder
	for _, n := range names {
		if len(n) == 2 && n[0] == '-' {
			b.WriteByte(n[1])
		}
	}
	return b.String()
}

// placeholder matches the parts of a command template that a program
// fills in as it runs it: {}, {1}, {+}, {q}, {name} (fd, fzf, hyperfine,
// parallel), not ${VAR} or {a,b}.
var placeholder = lazyRE(`(^|[^$\w])\{[\w+./:-]*\}`)

// optionCode walks the shell code an option of a program names; its
// placeholders become a value known only at run time.
func (w *walker) optionCode(s *syntax.Stmt, c *Command, via string, v Arg) {
	if v.Dynamic {
		w.unknownAt(c.Pos, via+" runs a command that is not literal", v.Value)
		return
	}
	if strings.TrimSpace(v.Value) == "" {
		return
	}
	// A command substitution: a value no environment can make known.
	src := placeholder().ReplaceAllString(v.Value, `$1"$$(:)"`)
	w.subshell(func() {
		saved := w.st.cwd
		w.st.cwd = c.Cwd
		w.code(s.Pos(), via, src)
		w.st.cwd = saved
	})
}

// runOnFiles walks the program an option names, as run on a file the
// command reads.
func (w *walker) runOnFiles(s *syntax.Stmt, c *Command, via string, prog Arg) {
	if prog.Dynamic {
		w.unknownAt(c.Pos, via+" runs a program that is not literal", prog.Value)
		return
	}
	next := Command{Pos: c.Pos, Text: c.Text, Argv: []Arg{prog, {Value: "$FILE", Dynamic: true}}, Root: c.Root,
		Env: c.Env, Cwd: c.Cwd, Shadowed: c.Shadowed, Wrappers: append(append([]string(nil), c.Wrappers...), via)}
	w.command(s, next)
}

// flagWrites adds what a flag makes the program write: p relative to
// the working directory or ~/, or with p "", everything under the
// operands (the working directory when there is none).
func (w *walker) flagWrites(c *Command, p string, ops []Arg) {
	if p == "" {
		if len(ops) == 0 {
			ops = []Arg{{Value: "."}}
		}
		for _, o := range ops {
			wr := w.resolveAt(c, o)
			wr.Tree = true
			c.Writes = append(c.Writes, wr)
		}
		return
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		home, known := w.lookup("HOME")
		if !known || home == "" {
			c.Writes = append(c.Writes, Write{Path: p})
			return
		}
		p = path.Join(home, rest)
	}
	c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: p}))
}

// lessSafe matches the initial commands of less +CMD that only move or
// search: +G, +F, +123, +/pattern.
var lessSafe = regexp.MustCompile(`^\+\+?([0-9]*[gGpP%]?|[0-9]*[jkeyfbdu]?|F|/.*|\?.*|:[nxpd])$`)

// lessCommands: less +CMD and ++CMD run less commands, which include !
// (a shell), | (a pipe) and s (save to a file).
func lessCommands(w *walker, s *syntax.Stmt, c *Command, _ []opt, ops []Arg) {
	for _, a := range ops {
		if !a.Dynamic && strings.HasPrefix(a.Value, "+") && !lessSafe.MatchString(a.Value) {
			w.unknownAt(c.Pos, c.Name()+" runs the initial command "+a.Value, c.Text)
		}
	}
}

// sarOutput: sar -o FILE saves the readings; -o with no file (the next
// word is the interval) saves them in the daily file under /var/log/sa.
func sarOutput(w *walker, s *syntax.Stmt, c *Command, _ []opt, _ []Arg) {
	args := c.Argv[1:]
	for i, a := range args {
		if a.Dynamic || a.Value != "-o" && !strings.HasPrefix(a.Value, "-o") {
			continue
		}
		if a.Value != "-o" {
			c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: a.Value[2:]}))
			continue
		}
		if i+1 < len(args) && !args[i+1].Dynamic && !isDigits(args[i+1].Value) && !strings.HasPrefix(args[i+1].Value, "-") {
			c.Writes = append(c.Writes, w.resolveAt(c, args[i+1]))
			continue
		}
		c.Writes = append(c.Writes, Write{Path: "/var/log/sa", Resolved: true, Tree: true},
			Write{Path: "/var/log/sysstat", Resolved: true, Tree: true})
	}
}

// fdExec: fd -x CMD… and -X CMD… run CMD on every path found, until a
// `;` or the end; the paths lie under the search paths.
func fdExec(w *walker, s *syntax.Stmt, c *Command, _ []opt, _ []Arg) {
	args := c.Argv[1:]
	var roots []Arg
	var execs [][]Arg
	vals := mustEffects(c.Name()).spec
	operands := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if looksLikeOption(v) {
				w.unknownAt(c.Pos, c.Name()+" option is not literal", v)
			}
			operands++
			if operands > 1 {
				roots = append(roots, a)
			}
			continue
		}
		if v == "--" {
			for _, r := range args[i+1:] {
				operands++
				if operands > 1 {
					roots = append(roots, r)
				}
			}
			break
		}
		exec, glued := "", ""
		switch {
		case v == "--exec" || v == "--exec-batch" || strings.HasPrefix(v, "--exec=") || strings.HasPrefix(v, "--exec-batch="):
			exec = v
			if _, g, ok := strings.Cut(v, "="); ok {
				glued = g
			}
		case strings.HasPrefix(v, "--search-path") || strings.HasPrefix(v, "--base-directory"):
			val := ""
			if _, g, ok := strings.Cut(v, "="); ok {
				val = g
			} else if i+1 < len(args) {
				i++
				val = args[i].Value
			}
			if strings.HasPrefix(v, "--base-directory") {
				c.Cwd = resolveIn(Arg{Value: val}, c.Cwd).Path
			} else {
				roots = append(roots, Arg{Value: val})
			}
			continue
		case strings.HasPrefix(v, "--"):
			if name, _, ok := strings.Cut(v, "="); !ok && contains(vals.longValue, name) {
				i++
			}
			continue
		case strings.HasPrefix(v, "-") && len(v) > 1:
			for j := 1; j < len(v); j++ {
				ch := v[j]
				if ch == 'x' || ch == 'X' {
					exec, glued = "-"+string(ch), v[j+1:]
					break
				}
				if strings.IndexByte(vals.value, ch) >= 0 {
					if j+1 == len(v) {
						i++
					}
					break
				}
			}
			if exec == "" {
				continue
			}
		default:
			operands++
			if operands > 1 {
				roots = append(roots, a)
			}
			continue
		}
		var cmd []Arg
		if glued != "" {
			cmd = append(cmd, Arg{Value: glued})
		}
		j := i + 1
		for ; j < len(args) && (args[j].Dynamic || args[j].Value != ";"); j++ {
			cmd = append(cmd, args[j])
		}
		i = j
		execs = append(execs, cmd)
	}
	if len(roots) == 0 {
		roots = []Arg{{Value: "."}}
	}
	for _, cmd := range execs {
		if len(cmd) == 0 {
			continue
		}
		for _, r := range roots {
			under := Arg{Value: strings.TrimSuffix(r.Value, "/") + "/*", Glob: true, Dynamic: r.Dynamic}
			argv := make([]Arg, 0, len(cmd)+1)
			found := false
			for k, ca := range cmd {
				if !ca.Dynamic && placeholder().MatchString(ca.Value) {
					found = true
					if k == 0 || ca.Value != "{}" && ca.Value != "{/}" && ca.Value != "{//}" && ca.Value != "{.}" && ca.Value != "{/.}" {
						ca = Arg{Value: ca.Value, Dynamic: true}
					} else {
						ca = under
					}
				}
				argv = append(argv, ca)
			}
			if !found {
				argv = append(argv, under)
			}
			next := Command{Pos: c.Pos, Text: c.Text, Argv: argv, Root: c.Root, Env: c.Env, Cwd: c.Cwd,
				Shadowed: c.Shadowed, Wrappers: append(append([]string(nil), c.Wrappers...), c.Name()+" --exec")}
			w.command(s, next)
		}
	}
}

func mustEffects(base string) effects {
	e, _ := effectsFor(baseName(base))
	return e
}

// hyperfine runs each operand as a shell command, and --prepare,
// --setup, --cleanup, --conclude and --reference too; the --export-*
// options and --output FILE write files.
func hyperfine(w *walker, s *syntax.Stmt, c *Command, _ []opt, _ []Arg) {
	args := c.Argv[1:]
	shell := true
	var cmds []Arg
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if looksLikeOption(v) {
				w.unknownAt(c.Pos, "hyperfine option is not literal", v)
				continue
			}
			cmds = append(cmds, a)
			continue
		}
		name, val, eq := strings.Cut(v, "=")
		take := func() Arg {
			if eq {
				return Arg{Value: val}
			}
			if len(name) > 2 && !strings.HasPrefix(name, "--") {
				return Arg{Value: name[2:]} // -pCMD
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return Arg{}
		}
		short := name
		if len(name) > 2 && !strings.HasPrefix(name, "--") {
			short = name[:2]
		}
		switch {
		case v == "--":
			cmds = append(cmds, args[i+1:]...)
			i = len(args)
		case short == "-s" || short == "-p" || short == "-c" || name == "--setup" || name == "--prepare" ||
			name == "--cleanup" || name == "--conclude" || name == "--reference":
			cmds = append(cmds, take())
		case strings.HasPrefix(name, "--export-"):
			t := take()
			c.Writes = append(c.Writes, w.resolveAt(c, t))
		case name == "--output":
			t := take()
			if t.Dynamic || t.Value != "null" && t.Value != "pipe" && t.Value != "inherit" {
				wr := w.resolveAt(c, t)
				wr.Stream = true
				c.Writes = append(c.Writes, wr)
			}
		case short == "-P" || name == "--parameter-scan":
			i += 3
		case short == "-L" || name == "--parameter-list":
			i += 2
		case short == "-S" || name == "--shell":
			sh := take()
			if sh.Dynamic || sh.Value != "none" && !isShell(baseName(strings.Fields(sh.Value + " x")[0])) {
				w.unknownAt(c.Pos, "hyperfine runs its commands with "+sh.Value, c.Text)
			}
			shell = shell && !sh.Dynamic
		case v == "-N":
		case short == "-w" || short == "-m" || short == "-M" || short == "-r" || short == "-D" || short == "-u" ||
			short == "-n" || name == "--warmup" || name == "--min-runs" || name == "--max-runs" || name == "--runs" ||
			name == "--parameter-step-size" || name == "--time-unit" || name == "--command-name" || name == "--style" ||
			name == "--sort" || name == "--input" || name == "--min-benchmarking-time" || name == "--color":
			take()
		case strings.HasPrefix(v, "-"):
		default:
			cmds = append(cmds, a)
		}
	}
	for _, cmd := range cmds {
		w.optionCode(s, c, "hyperfine", cmd)
	}
}

// fzfBind: --bind KEY:ACTION,… may run commands (execute, become,
// reload, transform, preview and the like all take an argument); an
// action with no argument only moves or selects.
func fzfBind(w *walker, s *syntax.Stmt, c *Command, opts []opt, _ []Arg) {
	safe := regexp.MustCompile(`^[\w-]+:[a-z+-]+$`)
	for _, o := range opts {
		switch o.name {
		case "--bind":
			if o.val.Dynamic {
				w.unknownAt(c.Pos, "fzf --bind is not literal", o.val.Value)
				continue
			}
			for _, b := range strings.Split(o.val.Value, ",") {
				if b != "" && !safe.MatchString(b) {
					w.unknownAt(c.Pos, "fzf --bind runs an action the parser does not model: "+b, c.Text)
					break
				}
			}
		case "--with-shell":
			if o.val.Dynamic || !isShell(baseName(strings.Fields(o.val.Value + " x")[0])) {
				w.unknownAt(c.Pos, "fzf runs its commands with "+o.val.Value, c.Text)
			}
		}
	}
}

// ncdu deletes what it lists when asked to, unless -r; -o FILE exports
// the scan.
func ncdu(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg) {
	exported, readOnly := false, false
	for _, o := range opts {
		switch o.name {
		case "-o":
			exported = true
			if o.val.Dynamic || o.val.Value != "-" {
				wr := w.resolveAt(c, o.val)
				wr.Stream = true
				c.Writes = append(c.Writes, wr)
			}
		case "-r", "-f":
			readOnly = true
		}
	}
	if !exported && !readOnly {
		w.flagWrites(c, "", ops)
	}
}

// batCache: bat cache --build and --clear write bat's cache (or
// --target DIR).
func batCache(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg) {
	if len(ops) == 0 || ops[0].Dynamic || ops[0].Value != "cache" {
		return
	}
	for i, a := range c.Argv {
		if a.Value == "--target" && i+1 < len(c.Argv) {
			w.flagWrites(c, "", []Arg{c.Argv[i+1]})
			return
		}
		if t, ok := strings.CutPrefix(a.Value, "--target="); ok {
			w.flagWrites(c, "", []Arg{{Value: t}})
			return
		}
	}
	if cache, ok := w.lookup("XDG_CACHE_HOME"); ok && strings.HasPrefix(cache, "/") {
		w.flagWrites(c, "", []Arg{{Value: path.Join(cache, "bat")}})
		return
	}
	w.flagWrites(c, "~/.cache/bat", nil)
	c.Writes[len(c.Writes)-1].Tree = true
}

// sccFormats: --format-multi "tabular:stdout,html:out.html" writes
// every destination that is not stdout.
func sccFormats(w *walker, s *syntax.Stmt, c *Command, _ []opt, _ []Arg) {
	for i, a := range c.Argv {
		v := a.Value
		if v == "--format-multi" && i+1 < len(c.Argv) {
			v = "--format-multi=" + c.Argv[i+1].Value
		}
		spec, ok := strings.CutPrefix(v, "--format-multi=")
		if !ok {
			continue
		}
		for _, f := range strings.Split(spec, ",") {
			if _, dest, ok := strings.Cut(f, ":"); ok && dest != "stdout" && dest != "" {
				wr := w.resolveAt(c, Arg{Value: dest, Dynamic: a.Dynamic})
				wr.Stream = true
				c.Writes = append(c.Writes, wr)
			}
		}
	}
}

// xsvWrites: xsv index FILE writes FILE.idx; split DIR and partition
// COLUMN DIR write files under DIR.
func xsvWrites(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg) {
	if len(ops) == 0 || ops[0].Dynamic {
		return
	}
	switch ops[0].Value {
	case "index":
		if _, ok := has(opts, "-o", "--output"); !ok && len(ops) > 1 {
			c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: ops[1].Value + ".idx", Dynamic: ops[1].Dynamic}))
		}
	case "split":
		if len(ops) > 1 {
			w.flagWrites(c, "", ops[1:2])
		}
	case "partition":
		if len(ops) > 2 {
			w.flagWrites(c, "", ops[2:3])
		}
	}
}

// mlrEffect matches what a Miller expression does besides computing:
// run a command, or write to a file or a pipe.
var mlrEffect = lazyRE(`\b(system|exec)\s*\(|\b(tee|emit1|emit|emitp|emitf|print|printn|eprint|eprintn|dump|edump)\b[^;{}]*?[>|]`)

// mlrDSL: put and filter expressions may run commands and write files;
// -f and -s load them from a file; the tee and split verbs write files.
func mlrDSL(w *walker, s *syntax.Stmt, c *Command, _ []opt, ops []Arg) {
	args := c.Argv[1:]
	for i, a := range args {
		if a.Dynamic {
			continue
		}
		switch a.Value {
		case "put", "filter":
			for j := i + 1; j < len(args); j++ {
				b := args[j]
				if b.Value == "-f" || b.Value == "-s" {
					w.unknownAt(c.Pos, "mlr "+a.Value+" loads an expression from a file", c.Text)
					break
				}
				if strings.HasPrefix(b.Value, "-") && !b.Dynamic {
					if b.Value == "-x" || b.Value == "-q" || b.Value == "-S" || b.Value == "-F" {
						continue
					}
					j++ // -e EXPR and the like: the next word is checked below
					if j < len(args) && (args[j].Dynamic || mlrEffect().MatchString(args[j].Value)) {
						w.unknownAt(c.Pos, "mlr "+a.Value+" expression runs a command or writes a file", c.Text)
					}
					continue
				}
				if b.Dynamic || mlrEffect().MatchString(b.Value) {
					w.unknownAt(c.Pos, "mlr "+a.Value+" expression runs a command or writes a file", c.Text)
				}
				break
			}
		case "tee":
			for _, b := range args[i+1:] {
				if b.Dynamic || !strings.HasPrefix(b.Value, "-") {
					wr := w.resolveAt(c, b)
					wr.Stream = true
					c.Writes = append(c.Writes, wr)
					break
				}
			}
		case "split":
			w.flagWrites(c, "", nil)
		}
	}
	_ = ops
}

// dcCode: dc's ! runs the rest of the line as a shell command (!<, !>
// and != compare). Scripts from files or standard input cannot be seen.
func dcCode(w *walker, s *syntax.Stmt, c *Command, _ []opt, _ []Arg) {
	bang := regexp.MustCompile(`![^<>=]|!$`)
	args := c.Argv[1:]
	script := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		switch {
		case !a.Dynamic && (v == "-e" || v == "--expression"):
			script = true
			if i+1 < len(args) {
				i++
				if args[i].Dynamic || bang.MatchString(args[i].Value) {
					w.unknownAt(c.Pos, "dc runs a shell command (!)", c.Text)
				}
			}
		case !a.Dynamic && (strings.HasPrefix(v, "--expression=") || strings.HasPrefix(v, "-e")):
			script = true
			_, e, ok := strings.Cut(v, "=")
			if !ok {
				e = v[2:]
			}
			if bang.MatchString(e) {
				w.unknownAt(c.Pos, "dc runs a shell command (!)", c.Text)
			}
		case !a.Dynamic && strings.HasPrefix(v, "-") && v != "-":
			if v == "-f" || strings.HasPrefix(v, "--file") || strings.HasPrefix(v, "-f") {
				w.unknownAt(c.Pos, "dc runs a script from a file", c.Text)
				script = true
			}
		default:
			w.unknownAt(c.Pos, "dc runs a script from a file", c.Text)
			script = true
		}
	}
	if script {
		return
	}
	if text, ok := w.stdinText(s); ok {
		if bang.MatchString(text) {
			w.unknownAt(c.Pos, "dc runs a shell command (!)", c.Text)
		}
		return
	}
	w.stdinProgram(s, c, "dc reads its script from standard input")
}

// markdownlintConfig: a configuration in JavaScript is code.
func markdownlintConfig(w *walker, s *syntax.Stmt, c *Command, opts []opt, _ []Arg) {
	for _, o := range opts {
		if (o.name == "-c" || o.name == "--config") && (o.val.Dynamic || strings.HasSuffix(o.val.Value, "js")) {
			w.unknownAt(c.Pos, "markdownlint loads a configuration in JavaScript", c.Text)
		}
	}
}

// fileCompile: file -C compiles the magic files into NAME.mgc in the
// working directory.
func fileCompile(w *walker, s *syntax.Stmt, c *Command, opts []opt, _ []Arg) {
	if _, ok := has(opts, "-C", "--compile"); !ok {
		return
	}
	names := []string{"magic"}
	for _, o := range opts {
		if o.name == "-m" || o.name == "--magic-file" {
			names = nil
			for _, m := range strings.Split(o.val.Value, ":") {
				names = append(names, path.Base(m))
			}
			if o.val.Dynamic {
				c.Writes = append(c.Writes, Write{Path: o.val.Value})
			}
		}
	}
	for _, n := range names {
		c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: n + ".mgc"}))
	}
}

// sttyDevice: stty -F DEVICE SETTINGS changes that device (the step's
// own terminal is the step's: stty -echo stays read-only).
func sttyDevice(w *walker, s *syntax.Stmt, c *Command, _ []opt, _ []Arg) {
	args := c.Argv[1:]
	dev := Arg{}
	settings := false
	for i := 0; i < len(args); i++ {
		v := args[i].Value
		switch {
		case args[i].Dynamic:
			settings = true
		case v == "-F" || v == "--file":
			if i+1 < len(args) {
				i++
				dev = args[i]
			}
		case strings.HasPrefix(v, "--file="):
			dev = Arg{Value: v[len("--file="):]}
		case strings.HasPrefix(v, "-F"):
			dev = Arg{Value: v[2:]}
		case v == "-a" || v == "-g" || v == "--all" || v == "--save" || v == "size" || v == "speed":
		default:
			settings = true
		}
	}
	if dev.Value != "" && settings {
		c.Writes = append(c.Writes, w.resolveAt(c, dev))
	}
}

// secondOperand: the second operand is the file written (python -m
// json.tool IN OUT).
func secondOperand(w *walker, s *syntax.Stmt, c *Command, _ []opt, ops []Arg) {
	if len(ops) > 1 && (ops[1].Dynamic || ops[1].Value != "-") {
		wr := w.resolveAt(c, ops[1])
		wr.Stream = true
		c.Writes = append(c.Writes, wr)
	}
}

// timeitCode: python -m timeit runs its setup and its statements as
// Python code.
func timeitCode(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg) {
	check := func(a Arg) {
		if a.Dynamic {
			w.unknownAt(c.Pos, "timeit runs Python code that is not literal", a.Value)
			return
		}
		if reason := pyDanger(a.Value); reason != "" {
			w.unknownAt(c.Pos, "python code "+reason, a.Value)
		}
		c.Network = c.Network || usesNetwork(a.Value)
	}
	for _, o := range opts {
		if o.name == "-s" || o.name == "--setup" {
			check(o.val)
		}
	}
	for _, a := range ops {
		check(a)
	}
}

// pydocWrite: pydoc -w NAME… writes NAME.html in the working directory.
func pydocWrite(w *walker, s *syntax.Stmt, c *Command, opts []opt, ops []Arg) {
	if _, ok := has(opts, "-w"); !ok {
		return
	}
	for _, a := range ops {
		c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: path.Base(a.Value) + ".html", Dynamic: a.Dynamic}))
	}
}

// archiveModule: python -m zipfile and tarfile extract into the
// directory given after the archive, and create the archive given.
func archiveModule(w *walker, s *syntax.Stmt, c *Command, _ []opt, _ []Arg) {
	args := c.Argv[1:]
	for i, a := range args {
		switch a.Value {
		case "-e", "--extract":
			if i+2 < len(args) {
				w.flagWrites(c, "", args[i+2:i+3])
			} else {
				w.flagWrites(c, "", nil)
			}
		case "-c", "--create":
			if i+1 < len(args) {
				c.Writes = append(c.Writes, w.resolveAt(c, args[i+1]))
			}
		}
		if a.Dynamic {
			c.Writes = append(c.Writes, Write{Path: a.Value})
		}
	}
}

// compileModule: the __pycache__ directories beside the files and under
// the directories compiled.
func compileModule(w *walker, s *syntax.Stmt, c *Command, _ []opt, ops []Arg) {
	if len(ops) == 0 {
		c.Writes = append(c.Writes, Write{Path: "<sys.path>", Tree: true})
		return
	}
	for _, o := range ops {
		if !o.Dynamic && o.Value == "-" {
			c.Writes = append(c.Writes, Write{Path: "<files named on standard input>"})
			continue
		}
		if !o.Dynamic && strings.HasSuffix(o.Value, ".py") {
			o.Value = path.Dir(o.Value)
		}
		w.flagWrites(c, "", []Arg{o})
	}
}
