package shell

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// invMode says where the commands of an invocation come from.
type invMode int

const (
	// modeCommand: -c STRING.
	modeCommand invMode = iota
	// modeScript: a script file named by the first operand.
	modeScript
	// modeStdin: commands read from standard input (-s, or no operands).
	modeStdin
	// modeNothing: nothing runs (--version, --help, -n, a bad option);
	// the real shell prints what it prints.
	modeNothing
)

// invocation is a shell's command line, read the way bash reads it.
type invocation struct {
	// Argv is the command line exactly as given, argv[0] included.
	Argv []string
	// Personality is "bash" or "sh": the shell undosh stands in for, from
	// the base name of argv[0].
	Personality string
	Login       bool
	Interactive bool // -i
	POSIX       bool // sh, --posix or -o posix
	Mode        invMode
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

// parseArgsByName reads a bash or sh command line. It never fails: a command
// line bash would refuse gets modeNothing, and the real shell reports it.
func parseArgsByName(argv []string) invocation {
	sh := false
	if len(argv) > 0 {
		switch filepath.Base(strings.TrimPrefix(argv[0], "-")) {
		case "sh", "dash", "ash":
			sh = true
		}
	}
	return parseArgs(argv, sh)
}

// parseInvocation is parseArgsByName for a shell that the kernel was asked to run
// as the file execfn (AT_EXECFN: the path given to execve; see
// [Executed]), started in cwd with environment getenv. The file decides
// which shell undosh stands in for, as it decides which shell the kernel
// runs ([shellIsSh]); argv[0] decides only what bash itself decides by it
// (POSIX mode for a name sh, a login shell for a leading '-').
func parseInvocation(argv []string, execfn, cwd string, getenv func(string) string) invocation {
	return parseArgs(argv, len(argv) > 0 && shellIsSh(execfn, argv[0], cwd, getenv))
}

// systemShells are where a system keeps its sh: undosh reached through
// one of them (undoctl install --sh) stands in for sh.
var systemShells = []string{"/bin/sh", "/usr/bin/sh"}

// shellIsSh reports whether an invocation of undosh run as the file
// execfn, with argv[0] argv0, in cwd, stands in for the system's sh rather
// than for bash:
//
//   - run through the system's sh (execfn, or a symbolic link on the way
//     from it, is /bin/sh or /usr/bin/sh), it is sh, whatever argv[0] says;
//   - run through any other path (bash's, a copy or a link named sh
//     elsewhere, as bash's own tests make with cp $THIS_SH $TMPDIR/sh), it
//     is bash, which goes into POSIX mode by itself when argv[0] is sh;
//   - run as undosh itself (its own file name, or no execfn known), it is
//     what argv[0] names ([systemSh]): the caller asked undosh by name.
func shellIsSh(execfn, argv0, cwd string, getenv func(string) string) bool {
	if execfn == "" || strings.HasPrefix(filepath.Base(execfn), "undosh") {
		switch filepath.Base(strings.TrimPrefix(argv0, "-")) {
		case "sh", "dash", "ash":
			return systemSh(argv0, cwd, getenv)
		}
		return false
	}
	p := execfn
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	sys := systemShellPaths()
	// Each link on the way counts (/usr/local/bin/sh -> /bin/sh is the
	// system's sh), up to the kernel's own limit of 40.
	for range 40 {
		p = resolveDir(filepath.Clean(p))
		if slices.Contains(sys, p) {
			return true
		}
		target, err := os.Readlink(p)
		if err != nil {
			return false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	return false
}

// systemShellPaths are systemShells with their directories resolved,
// once: the front end's server decides by them on every request.
var systemShellPaths = sync.OnceValue(func() []string {
	sys := make([]string, 0, len(systemShells))
	for _, s := range systemShells {
		sys = append(sys, resolveDir(s))
	}
	return sys
})

// resolveDir is p with the symbolic links of its directory resolved
// (/bin/sh is /usr/bin/sh where /bin links to usr/bin), its last
// element kept as it is.
func resolveDir(p string) string {
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return p
	}
	return filepath.Join(dir, filepath.Base(p))
}

// systemSh reports whether argv0, a shell's argv[0] in cwd with PATH from
// getenv, names the system's sh: the file /bin/sh (or /usr/bin/sh) is, or
// a name other than sh. It is false for another file named sh, such as a
// copy of bash, which bash runs in POSIX mode.
func systemSh(argv0, cwd string, getenv func(string) string) bool {
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
	for _, sys := range systemShells {
		if s, err := os.Stat(sys); err == nil && os.SameFile(st, s) {
			return true
		}
	}
	return false
}

// parseArgs reads argv as sh's command line, or as bash's.
func parseArgs(argv []string, sh bool) invocation {
	inv := invocation{Argv: argv, Personality: "bash", Mode: modeStdin}
	if len(argv) == 0 {
		return inv
	}
	name := argv[0]
	if strings.HasPrefix(name, "-") {
		inv.Login = true
		name = name[1:]
	}
	if sh {
		inv.Personality = "sh"
	}
	// bash named sh goes into POSIX mode by itself.
	inv.POSIX = sh || filepath.Base(name) == "sh"
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
				inv.Mode = modeNothing
				return inv
			}
		case "--version", "--help", "--dump-strings", "--dump-po-strings":
			inv.Mode = modeNothing
			return inv
		default:
			if strings.HasPrefix(a, "--") && a != "--" {
				inv.Mode = modeNothing // bash: invalid option
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
				inv.Mode = modeNothing // invalid option
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
		inv.Mode = modeNothing
		return inv
	}
	ops := args[i:]
	switch {
	case cmd:
		if len(ops) == 0 {
			inv.Mode = modeNothing // -c: option requires an argument
			return inv
		}
		inv.Mode = modeCommand
		inv.Command = ops[0]
	case stdin || len(ops) == 0:
		inv.Mode = modeStdin
	default:
		inv.Mode = modeScript
		inv.Script = ops[0]
	}
	return inv
}
