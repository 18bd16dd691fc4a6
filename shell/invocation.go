package shell

import (
	"os"
	"path/filepath"
	"strings"
)

// Mode says where the commands of an invocation come from.
type Mode int

const (
	// ModeCommand: -c STRING.
	ModeCommand Mode = iota
	// ModeScript: a script file named by the first operand.
	ModeScript
	// ModeStdin: commands read from standard input (-s, or no operands).
	ModeStdin
	// ModeNothing: nothing runs (--version, --help, -n, a bad option);
	// the real shell prints what it prints.
	ModeNothing
)

// Invocation is a shell's command line, read the way bash reads it.
type Invocation struct {
	// Argv is the command line exactly as given, argv[0] included.
	Argv []string
	// Personality is "bash" or "sh": the shell undosh stands in for, from
	// the base name of argv[0].
	Personality string
	Login       bool
	Interactive bool // -i
	POSIX       bool // sh, --posix or -o posix
	Mode        Mode
	// Command is the -c string.
	Command string
	// Script is the script operand, as given.
	Script string
}

// The single-letter options each shell accepts; any other letter makes it
// refuse the command line.
const (
	bashLetters = "abcefhiklmnoprstuvxBCDEHOPT"
	shLetters   = "abcefilmnopsuvxCEIV"
)

// ParseArgs reads a bash or sh command line. It never fails: a command
// line bash would refuse gets ModeNothing, and the real shell reports it.
func ParseArgs(argv []string) Invocation {
	return parseArgs(argv, false)
}

// ParseArgsFrom is ParseArgs for a shell started in cwd with environment
// getenv: a file named sh that is not the system's sh (a copy of undosh
// standing in for bash, as bash's own tests make with cp $THIS_SH
// $TMPDIR/sh) is bash in POSIX mode, as such a copy of bash is
// (SystemSh).
func ParseArgsFrom(argv []string, cwd string, getenv func(string) string) Invocation {
	return parseArgs(argv, len(argv) > 0 && !SystemSh(argv[0], cwd, getenv))
}

// SystemSh reports whether argv0, a shell's argv[0] in cwd with PATH from
// getenv, names the system's sh: the file /bin/sh (or /usr/bin/sh) is, or
// a name other than sh. It is false for another file named sh, such as a
// copy of bash, which bash runs in POSIX mode.
func SystemSh(argv0, cwd string, getenv func(string) string) bool {
	name := strings.TrimPrefix(argv0, "-")
	if filepath.Base(name) != "sh" {
		return true
	}
	p := name
	if !strings.Contains(name, "/") {
		p = ""
		for dir := range strings.SplitSeq(getenv("PATH"), ":") {
			if dir == "" {
				dir = "."
			}
			if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() {
				p = filepath.Join(dir, name)
				break
			}
		}
		if p == "" {
			return true
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return true
	}
	for _, sys := range []string{"/bin/sh", "/usr/bin/sh"} {
		if s, err := os.Stat(sys); err == nil && os.SameFile(st, s) {
			return true
		}
	}
	return false
}

func parseArgs(argv []string, bashAsSh bool) Invocation {
	inv := Invocation{Argv: argv, Personality: "bash", Mode: ModeStdin}
	if len(argv) == 0 {
		return inv
	}
	name := argv[0]
	if strings.HasPrefix(name, "-") {
		inv.Login = true
		name = name[1:]
	}
	switch filepath.Base(name) {
	case "sh", "dash", "ash":
		inv.Personality = "sh"
		inv.POSIX = true
		if bashAsSh {
			inv.Personality = "bash"
		}
	}
	// noexec: -n (+n turns it off again); dump: -D or --dump-strings,
	// which imply -n for good; pretty: --pretty-print, which prints a
	// script instead of running it (a -c string still runs).
	cmd, stdin, noexec, dump, pretty := false, false, false, false, false
	args := argv[1:]
	i := 0
	// Multi-character options come first (bash); sh has none.
long:
	for ; i < len(args) && inv.Personality == "bash"; i++ {
		switch a := args[i]; a {
		case "--login":
			inv.Login = true
		case "--posix":
			inv.POSIX = true
		case "--noprofile", "--norc", "--noediting", "--restricted", "--verbose", "--debugger", "--debug", "--protected":
		case "--pretty-print":
			pretty = true
		case "--rcfile", "--init-file":
			i++
			if i >= len(args) {
				inv.Mode = ModeNothing
				return inv
			}
		case "--version", "--help", "--dump-strings", "--dump-po-strings":
			inv.Mode = ModeNothing
			return inv
		default:
			if strings.HasPrefix(a, "--") && a != "--" {
				inv.Mode = ModeNothing // bash: invalid option
				return inv
			}
			break long
		}
	}
	letters := bashLetters
	if inv.Personality == "sh" {
		letters = shLetters
	}
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' && a[0] != '+' {
			break
		}
		on := a[0] == '-'
		for _, ch := range a[1:] {
			if !strings.ContainsRune(letters, ch) {
				inv.Mode = ModeNothing // invalid option
				return inv
			}
			switch ch {
			case 'c':
				// +c too: both shells take any sign as "a command string follows".
				cmd = true
			case 's':
				// bash reads stdin for +s too; for sh +s undoes -s.
				stdin = on || inv.Personality == "bash"
			case 'i':
				inv.Interactive = on
			case 'l':
				inv.Login = true // +l too
			case 'n':
				noexec = on
			case 'D':
				dump = true
			case 'o', 'O':
				if i+1 >= len(args) {
					// Without a name, the shell lists the options and
					// goes on.
					continue
				}
				i++
				if ch == 'o' && args[i] == "posix" {
					inv.POSIX = on
				}
			}
		}
	}
	if noexec || dump || pretty && !cmd {
		inv.Mode = ModeNothing
		return inv
	}
	ops := args[i:]
	switch {
	case cmd:
		if len(ops) == 0 {
			inv.Mode = ModeNothing // -c: option requires an argument
			return inv
		}
		inv.Mode = ModeCommand
		inv.Command = ops[0]
	case stdin || len(ops) == 0:
		inv.Mode = ModeStdin
	default:
		inv.Mode = ModeScript
		inv.Script = ops[0]
	}
	return inv
}
