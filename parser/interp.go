package parser

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// sed: -i writes its files; the script's e command, s///e flag and w/W
// commands run a shell or write files.
func (w *walker) sed(s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	args := c.Argv[1:]
	var scripts []string
	var files []Arg
	inPlace, sandbox, haveScript := false, false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if !haveScript {
				w.unknownAt(c.Pos, "sed script is not literal", v)
				haveScript = true
				continue
			}
			files = append(files, a)
			continue
		}
		switch {
		case v == "--":
			for _, f := range args[i+1:] {
				if !haveScript {
					haveScript = true
					scripts = append(scripts, f.Value)
					continue
				}
				files = append(files, f)
			}
			i = len(args)
		case v == "-e" || v == "--expression":
			if i+1 < len(args) {
				i++
				if args[i].Dynamic {
					w.unknownAt(c.Pos, "sed script is not literal", args[i].Value)
				}
				scripts = append(scripts, args[i].Value)
				haveScript = true
			}
		case strings.HasPrefix(v, "--expression="):
			scripts = append(scripts, v[len("--expression="):])
			haveScript = true
		case v == "-f" || v == "--file" || strings.HasPrefix(v, "--file="):
			file := strings.TrimPrefix(v, "--file=")
			if v == "-f" || v == "--file" {
				if i+1 < len(args) {
					i++
					file = args[i].Value
				}
			}
			haveScript = true
			text, ok := w.readRel(c, file)
			if !ok {
				w.unknownAt(c.Pos, "sed script file could not be read", file)
				continue
			}
			scripts = append(scripts, text)
		case v == "--sandbox":
			sandbox = true
		case v == "-i" || strings.HasPrefix(v, "--in-place"):
			inPlace = true
		case v == "-l" || v == "--line-length":
			i++
		case strings.HasPrefix(v, "--"):
		case strings.HasPrefix(v, "-") && len(v) > 1:
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'i':
					inPlace = true
					j = len(v) // the rest is a backup suffix
				case 'e', 'f':
					rest := v[j+1:]
					if rest == "" && i+1 < len(args) {
						i++
						rest = args[i].Value
					}
					haveScript = true
					if v[j] == 'e' {
						scripts = append(scripts, rest)
					} else if text, ok := w.readRel(c, rest); ok {
						scripts = append(scripts, text)
					} else {
						w.unknownAt(c.Pos, "sed script file could not be read", rest)
					}
					j = len(v)
				case 'l':
					if j == len(v)-1 {
						i++
					}
					j = len(v)
				}
			}
		default:
			if !haveScript {
				haveScript = true
				scripts = append(scripts, v)
				continue
			}
			files = append(files, a)
		}
	}
	if !sandbox {
		joined := strings.Join(scripts, "\n")
		for _, eff := range sedEffects(joined) {
			switch eff.kind {
			case 'e':
				w.unknownAt(c.Pos, "sed runs a shell command (e)", eff.arg)
				if eff.arg != "s///e" && !strings.HasPrefix(eff.arg, "e (") {
					w.subshell(func() { w.code(s.Pos(), "sed e", eff.arg) })
				}
			case 'w':
				if harmlessDevice(eff.arg) {
					continue
				}
				c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: eff.arg}))
			case '?':
				w.unknownAt(c.Pos, "sed script the parser cannot read", eff.arg)
			}
		}
	}
	if inPlace {
		for _, f := range files {
			c.Writes = append(c.Writes, w.resolveAt(c, f))
		}
	}
}

func (w *walker) readRel(c *Command, p string) (string, bool) {
	if w.opts.ReadFile == nil {
		return "", false
	}
	wr := w.locate(Arg{Value: p}, c.Cwd, true)
	if !wr.Resolved || w.changed(wr.Path) != asRead {
		return "", false
	}
	data, err := w.opts.ReadFile(wr.Path)
	if err != nil {
		return "", false
	}
	return string(data), true
}

type sedEffect struct {
	kind byte // 'e' exec, 'w' write, '?' unreadable
	arg  string
}

// sedEffects scans a GNU sed script for the commands and flags that run a
// shell or write a file.
func sedEffects(script string) []sedEffect {
	var out []sedEffect
	s := script
	i := 0
	restOfLine := func() string {
		j := strings.IndexByte(s[i:], '\n')
		var r string
		if j < 0 {
			r, i = s[i:], len(s)
		} else {
			r, i = s[i:i+j], i+j
		}
		return strings.TrimSpace(r)
	}
	skipDelim := func(d byte) bool {
		for i < len(s) {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case d:
				i++
				return true
			}
			i++
		}
		return false
	}
	for i < len(s) {
		// Skip separators and whitespace.
		for i < len(s) && strings.IndexByte(" \t\n;{}!", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			break
		}
		// Addresses: numbers, $, /re/, \cREc, first~step, addr,+N.
		for i < len(s) {
			ch := s[i]
			switch {
			case ch >= '0' && ch <= '9' || ch == '$' || ch == ',' || ch == '~' || ch == '+':
				i++
				continue
			case ch == '/':
				i++
				if !skipDelim('/') {
					return append(out, sedEffect{'?', script})
				}
				for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
					i++
				}
				continue
			case ch == '\\' && i+1 < len(s):
				d := s[i+1]
				i += 2
				if !skipDelim(d) {
					return append(out, sedEffect{'?', script})
				}
				for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
					i++
				}
				continue
			case ch == ' ' || ch == '\t' || ch == '!':
				i++
				continue
			}
			break
		}
		if i >= len(s) {
			break
		}
		cmd := s[i]
		i++
		switch cmd {
		case '{', '}', ';':
		case 's', 'y':
			if i >= len(s) {
				return append(out, sedEffect{'?', script})
			}
			d := s[i]
			i++
			for range 2 { // the pattern, then the replacement
				if !skipDelim(d) {
					return append(out, sedEffect{'?', script})
				}
			}
			if cmd == 'y' {
				continue
			}
			for i < len(s) && strings.IndexByte("gpiImMe0123456789w", s[i]) >= 0 {
				switch s[i] {
				case 'e':
					out = append(out, sedEffect{'e', "s///e"})
				case 'w':
					i++
					out = append(out, sedEffect{'w', restOfLine()})
					continue
				}
				i++
			}
		case 'e':
			arg := restOfLine()
			if arg == "" {
				arg = "e (runs the pattern space)"
			}
			out = append(out, sedEffect{'e', arg})
		case 'w', 'W':
			out = append(out, sedEffect{'w', restOfLine()})
		case ':', 'b', 't', 'T', 'v':
			// GNU sed ends a label (and v's version) at a semicolon or
			// blank as well as at the end of the line, and goes on with
			// the next command: `:a;N;$!ba;w f` writes f. Ending it early
			// can only show more commands than a sed that reads to the
			// end of the line runs.
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
			for i < len(s) && strings.IndexByte(" \t\n;", s[i]) < 0 {
				i++
			}
		case 'F', 'z':
		case 'r', 'R', 'a', 'i', 'c':
			// Text and file names to the end of the line (GNU one-liner
			// forms). a/i/c may continue with backslashes.
			for {
				line := restOfLine()
				if (cmd == 'a' || cmd == 'i' || cmd == 'c') && strings.HasSuffix(line, "\\") && i < len(s) {
					i++
					continue
				}
				break
			}
		case 'q', 'Q', 'l', 'L':
			for i < len(s) && s[i] >= '0' && s[i] <= '9' || i < len(s) && s[i] == ' ' {
				i++
			}
		case 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', '=':
		case '#':
			restOfLine()
		default:
			return append(out, sedEffect{'?', script})
		}
	}
	return out
}

// awk: system(), pipes to and from commands, and print > file.
func (w *walker) awk(s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	args := c.Argv[1:]
	var prog string
	have := false
	inPlace := false
	var files []Arg
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if !have {
				w.unknownAt(c.Pos, "awk program is not literal", v)
				have = true
				continue
			}
			files = append(files, a)
			continue
		}
		switch {
		case v == "-F" || v == "-v" || v == "--assign" || v == "--field-separator":
			i++
		case v == "-f" || v == "--file" || v == "-e" || v == "--source" || v == "-E" || v == "--exec":
			if i+1 >= len(args) {
				continue
			}
			i++
			have = true
			if v == "-e" || v == "--source" {
				prog += "\n" + args[i].Value
				continue
			}
			text, ok := w.readRel(c, args[i].Value)
			if !ok {
				w.unknownAt(c.Pos, "awk program file could not be read", args[i].Value)
				continue
			}
			prog += "\n" + text
		case v == "-i" || v == "--include":
			if i+1 < len(args) && args[i+1].Value == "inplace" {
				inPlace = true
			} else {
				w.unknownAt(c.Pos, "awk loads a library", c.Text)
			}
			i++
		case v == "-l" || v == "--load":
			w.unknownAt(c.Pos, "awk loads an extension", c.Text)
			i++
		case strings.HasPrefix(v, "-F") || strings.HasPrefix(v, "-v") || v == "--":
		case strings.HasPrefix(v, "-") && len(v) > 1 && !have:
		default:
			if !have {
				have = true
				prog = v
				continue
			}
			if !strings.Contains(v, "=") {
				files = append(files, a)
			}
		}
	}
	effects := awkEffects(prog)
	for _, eff := range effects {
		if eff.kind == 'e' {
			// The commands awk runs are its string literals: classify
			// them as shell code too.
			_, lits := blankStrings(prog)
			for _, l := range sortedLits(lits) {
				w.subshell(func() { w.code(s.Pos(), "awk command", l) })
			}
			break
		}
	}
	for _, eff := range effects {
		switch eff.kind {
		case 'e':
			w.unknownAt(c.Pos, "awk runs a command ("+eff.arg+")", prog)
		case 'w':
			if eff.arg == "" {
				c.Writes = append(c.Writes, Write{Path: "<awk output file>"})
				continue
			}
			if harmlessDevice(eff.arg) || eff.arg == "/dev/stderr" || eff.arg == "-" {
				continue
			}
			c.Writes = append(c.Writes, w.resolveAt(c, Arg{Value: eff.arg}))
		}
	}
	if inPlace {
		for _, f := range files {
			c.Writes = append(c.Writes, w.resolveAt(c, f))
		}
	}
}

var awkPrintRedirect = lazyRE(`\bprintf?\b[^;{}\n]*?[^>=<!]>>?\s*("([^"\\]|\\.)*"|[^;}\s]+)`)

// awkEffects finds system(), command pipes and output redirections in an
// awk program. It works on the text with string literals blanked, so that
// "a > b" inside a string is not a redirection.
func awkEffects(prog string) []sedEffect {
	var out []sedEffect
	blank, lits := blankStrings(prog)
	if strings.Contains(blank, "system") {
		out = append(out, sedEffect{'e', "system()"})
	}
	if i := strings.IndexByte(strings.ReplaceAll(blank, "||", "  "), '|'); i >= 0 {
		out = append(out, sedEffect{'e', "a pipe to or from a command"})
	}
	if strings.Contains(blank, "@load") {
		out = append(out, sedEffect{'e', "@load"})
	}
	for _, m := range awkPrintRedirect().FindAllStringSubmatchIndex(blank, -1) {
		target := blank[m[2]:m[3]]
		if strings.HasPrefix(target, "\"") {
			// Recover the literal from the original text.
			target = lits[m[2]]
			out = append(out, sedEffect{'w', target})
			continue
		}
		out = append(out, sedEffect{'w', ""})
	}
	return out
}

func sortedLits(m map[int]string) []string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// blankStrings replaces the inside of "..." literals and /regex/ is left
// alone; it returns the blanked text and the literals by start offset.
func blankStrings(s string) (string, map[int]string) {
	b := []byte(s)
	lits := map[int]string{}
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		start := i
		var sb strings.Builder
		i++
		for i < len(b) && b[i] != '"' {
			if b[i] == '\\' && i+1 < len(b) {
				sb.WriteByte(b[i+1])
				b[i], b[i+1] = ' ', ' '
				i += 2
				continue
			}
			sb.WriteByte(b[i])
			b[i] = ' '
			i++
		}
		lits[start] = sb.String()
	}
	return string(b), lits
}

// perl: -i writes its files; -e code is read-only only when it uses none
// of the operations that write, run or load things.
func (w *walker) perl(s *syntax.Stmt, c *Command) {
	c.WritesKnown = true
	args := c.Argv[1:]
	var code []string
	inPlace := false
	var files []Arg
	haveCode := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			if !haveCode {
				w.unknownAt(c.Pos, "perl code is not literal", v)
				return
			}
			files = append(files, a)
			continue
		}
		switch {
		case v == "--":
			files = append(files, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(v, "-") && len(v) > 1 && !haveCode || strings.HasPrefix(v, "-") && len(v) > 1 && len(files) == 0:
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'e', 'E':
					rest := v[j+1:]
					if rest == "" && i+1 < len(args) {
						i++
						if args[i].Dynamic {
							w.unknownAt(c.Pos, "perl code is not literal", args[i].Value)
							return
						}
						rest = args[i].Value
					}
					code = append(code, rest)
					haveCode = true
					j = len(v)
				case 'i':
					inPlace = true
					j = len(v)
				case 'M', 'm':
					mod := strings.TrimPrefix(v[j+1:], "-")
					if mod != "strict" && mod != "warnings" && mod != "utf8" && !strings.HasPrefix(mod, "List::Util") && !strings.HasPrefix(mod, "JSON::PP") && !strings.HasPrefix(mod, "Data::Dumper") {
						w.unknownAt(c.Pos, "perl loads a module", v)
					}
					j = len(v)
				case 'I', 'F', 'l', '0', 'C', 'd', 'D', 'x':
					j = len(v)
				}
			}
		default:
			if !haveCode {
				// perl script.pl: an unknown program.
				w.runsFile(c, a)
				return
			}
			files = append(files, a)
		}
	}
	if !haveCode {
		txt, ok := w.stdinText(s)
		if !ok {
			w.stdinProgram(s, c, "perl reads its program from standard input")
			return
		}
		code = append(code, txt)
	}
	if reason := perlDanger(strings.Join(code, "\n")); reason != "" {
		w.unknownAt(c.Pos, "perl code "+reason, strings.Join(code, "; "))
	}
	c.Network = usesNetwork(strings.Join(code, "\n"))
	if inPlace {
		for _, f := range files {
			c.Writes = append(c.Writes, w.resolveAt(c, f))
		}
	}
}

var perlRisky = lazyRE("`|\\b(system|exec|qx|open|sysopen|unlink|rename|mkdir|rmdir|chmod|chown|chdir|utime|symlink|link|truncate|kill|eval|do|require|use|syscall|fork|pipe|socket|dbmopen|glob|readpipe|binmode|select|local\\s*\\$0|\\$0)\\b|<[A-Za-z$*]|\\$\\^X")

func perlDanger(code string) string {
	if m := perlRisky().FindString(code); m != "" {
		return "uses " + strings.TrimSpace(m)
	}
	if perlEvalFlag(code) {
		return "runs a replacement as code (s///e)"
	}
	if strings.Contains(code, "(?{") || strings.Contains(code, "(??{") || strings.Contains(code, "::") {
		return "runs code in a pattern or names a package"
	}
	return ""
}

var perlSubst = lazyRE(`(^|[^\w$@%&])(s|tr|y)\s*([^\w\s])`)

// perlEvalFlag reports whether some s/// of the code may carry the e
// flag, which runs the replacement (a string the code may build) as
// code. It errs on the side of yes.
func perlEvalFlag(code string) bool {
	closer := func(d byte) byte {
		switch d {
		case '{':
			return '}'
		case '(':
			return ')'
		case '[':
			return ']'
		case '<':
			return '>'
		}
		return d
	}
	// skip returns the index after the part that starts after the
	// delimiter at i.
	skip := func(i int) int {
		end := closer(code[i])
		for i++; i < len(code) && code[i] != end; i++ {
			if code[i] == '\\' {
				i++
			}
		}
		return i + 1
	}
	for _, m := range perlSubst().FindAllStringSubmatchIndex(code, -1) {
		i := m[6]
		if closer(code[i]) != code[i] {
			i = skip(i)
			for i < len(code) && (code[i] == ' ' || code[i] == '\t' || code[i] == '\n') {
				i++
			}
			if i >= len(code) {
				return true
			}
			i = skip(i)
		} else {
			i = skip(i) - 1
			if i >= len(code) {
				return true
			}
			i = skip(i)
		}
		if i > len(code) {
			return true
		}
		j := i
		for j < len(code) && code[j] >= 'a' && code[j] <= 'z' {
			j++
		}
		if strings.Contains(code[i:j], "e") {
			return true
		}
	}
	return false
}

// networkWords are the modules and calls that reach the network in
// python, node, perl and ruby code (perl's IO::Socket and Net::HTTP and
// ruby's open-uri are matched by their parts).
var networkWords = map[string]bool{
	"requests": true, "urllib": true, "urllib2": true, "urllib3": true, "httpx": true, "aiohttp": true,
	"socket": true, "smtplib": true, "ftplib": true, "poplib": true, "imaplib": true, "paramiko": true,
	"boto3": true, "botocore": true, "telnetlib": true, "urlopen": true, "websocket": true,
	"websockets": true, "grpc": true, "xmlrpc": true, "pycurl": true, "http": true, "https": true,
	"net": true, "dgram": true, "tls": true, "fetch": true, "axios": true,
	"undici": true, "got": true, "WebSocket": true, "LWP": true, "Socket": true, "HTTP": true,
	"Net": true, "uri": true, "Mechanize": true,
}

// usesNetwork reports whether code names a network module or a URL.
func usesNetwork(code string) bool {
	if strings.Contains(code, "://") {
		return true
	}
	found := false
	eachIdent(code, func(id string) bool {
		found = networkWords[id]
		return !found
	})
	return found
}

// eachIdent calls fn with every identifier-like word of code, in order,
// until fn returns false. It is much cheaper than a regular expression.
func eachIdent(code string, fn func(string) bool) {
	for i := 0; i < len(code); {
		c := code[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			j := i + 1
			for j < len(code) && (code[j] == '_' || code[j] >= 'a' && code[j] <= 'z' || code[j] >= 'A' && code[j] <= 'Z' || code[j] >= '0' && code[j] <= '9') {
				j++
			}
			if !fn(code[i:j]) {
				return
			}
			i = j
			continue
		}
		i++
	}
}

// interpreterCode marks -e style code of interpreters we do not analyse.
func (w *walker) interpreterCode(s *syntax.Stmt, c *Command, flags ...string) {
	for i, a := range c.Argv[1:] {
		for _, f := range flags {
			if a.Value == f || strings.HasPrefix(a.Value, f) && len(f) == 2 {
				w.unknownAt(c.Pos, c.Argv[0].Value+" "+f+" runs code the parser cannot analyse", c.Text)
				if i+2 < len(c.Argv) && usesNetwork(c.Argv[i+2].Value+" "+a.Value) {
					c.Network = true
				}
				return
			}
		}
	}
	if len(c.Argv) == 1 {
		w.stdinProgram(s, c, c.Argv[0].Value+" reads its program from standard input")
		return
	}
	if len(c.Argv) == 2 && !c.Argv[1].Dynamic {
		switch c.Argv[1].Value {
		case "-v", "--version", "-h", "--help":
			return // prints and exits
		}
	}
	c.Opaque = true
	for _, a := range c.Argv[1:] {
		if a.Dynamic || !strings.HasPrefix(a.Value, "-") {
			w.runsFile(c, a) // ruby script.rb
			return
		}
	}
}

// python: -c code is analysed cheaply; -m MODULE runs that module as the
// program, so `python -m pip install x` is pip.
func (w *walker) python(s *syntax.Stmt, c *Command) {
	args := c.Argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			w.unknownAt(c.Pos, "python argument is not literal", v)
			return
		}
		switch {
		case v == "-c" || strings.HasPrefix(v, "-c") && len(v) > 2 && !strings.HasPrefix(v, "--"):
			code := strings.TrimPrefix(v, "-c")
			if code == "" {
				if i+1 >= len(args) {
					return
				}
				if args[i+1].Dynamic {
					w.unknownAt(c.Pos, "python -c of a non-literal", args[i+1].Value)
					return
				}
				code = args[i+1].Value
			}
			c.WritesKnown = true
			if reason := pyDanger(code); reason != "" {
				w.unknownAt(c.Pos, "python code "+reason, code)
			}
			c.Network = usesNetwork(code)
			return
		case v == "-m" || strings.HasPrefix(v, "-m") && len(v) > 2:
			mod := strings.TrimPrefix(v, "-m")
			rest := args[i+1:]
			if mod == "" {
				if len(rest) == 0 {
					return
				}
				mod, rest = rest[0].Value, rest[1:]
			}
			// Hand the module over as a program of its own. The
			// interpreter's path stays, so a venv's python keeps its
			// place.
			next := *c
			next.Argv = append([]Arg{{Value: mod}}, rest...)
			next.Wrappers = append(append([]string(nil), c.Wrappers...), c.Argv[0].Value+" -m")
			next.Python = c.Argv[0].Value
			w.command(s, next)
			c.Argv = nil
			return
		case v == "-W" || v == "-X" || v == "--check-hash-based-pycs":
			i++
		case strings.HasPrefix(v, "-") && v != "-":
		default:
			// python script.py, or - for stdin.
			if v == "-" {
				w.pythonStdin(s, c)
				return
			}
			w.runsFile(c, a)
			return
		}
	}
	w.pythonStdin(s, c)
}

// pythonExits reports whether python given only these options prints
// something and exits without reading a program: -V, --version, -h,
// --help.
func pythonExits(opts []Arg) bool {
	for _, a := range opts {
		switch a.Value {
		case "-V", "-VV", "--version", "-h", "-?", "--help", "--help-env", "--help-xoptions", "--help-all":
			return true
		}
	}
	return false
}

func (w *walker) pythonStdin(s *syntax.Stmt, c *Command) {
	text, ok := w.stdinText(s)
	if !ok {
		if !pythonExits(c.Argv[1:]) {
			// Interactive, or a program piped in that we cannot see:
			// python -v, -i, -u and the like with no program still
			// read one.
			w.stdinProgram(s, c, "python reads its program from standard input")
		}
		return
	}
	c.WritesKnown = true
	if reason := pyDanger(text); reason != "" {
		w.unknownAt(c.Pos, "python code "+reason, text)
	}
	c.Network = usesNetwork(text)
}

// node: -e/-p code is analysed cheaply.
func (w *walker) node(s *syntax.Stmt, c *Command) {
	args := c.Argv[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		if a.Dynamic {
			w.unknownAt(c.Pos, "node argument is not literal", v)
			return
		}
		switch {
		case v == "-e" || v == "--eval" || v == "-p" || v == "--print" || v == "-pe":
			if i+1 >= len(args) {
				return
			}
			if args[i+1].Dynamic {
				w.unknownAt(c.Pos, "node -e of a non-literal", args[i+1].Value)
				return
			}
			c.WritesKnown = true
			if reason := nodeDanger(args[i+1].Value); reason != "" {
				w.unknownAt(c.Pos, "node code "+reason, args[i+1].Value)
			}
			c.Network = usesNetwork(args[i+1].Value)
			return
		case v == "--version" || v == "-v" || v == "--help" || v == "-h" || v == "--v8-options":
			return
		case v == "-r" || v == "--require" || v == "--import" || v == "--loader" || v == "--experimental-loader":
			w.unknownAt(c.Pos, "node preloads a module", c.Text)
			return
		case strings.HasPrefix(v, "-"):
		default:
			w.runsFile(c, a) // node script.js: an unknown program
			return
		}
	}
	text, ok := w.stdinText(s)
	if !ok {
		w.stdinProgram(s, c, "node reads its program from standard input")
		return
	}
	c.WritesKnown = true
	if reason := nodeDanger(text); reason != "" {
		w.unknownAt(c.Pos, "node code "+reason, text)
	}
	c.Network = usesNetwork(text)
}
