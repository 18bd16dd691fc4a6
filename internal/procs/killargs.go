package procs

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// call is what a kill, pkill or killall command asks for, read from its
// words alone.
type call struct {
	tool string // "kill", "pkill" or "killall"; "" for another program
	// sig is the signal it sends: TERM unless it says otherwise, -1 for a
	// signal parseKill cannot name.
	sig int
	// none is set when it signals nothing: it lists signals, prints its
	// help, sends signal 0 or stops at a usage error.
	none bool
	// why says, when it is not "", why its targets cannot be told before
	// it runs.
	why string

	// kill: the processes it names by pid, and the process groups it
	// names by -PGID.
	pids, groups []int
	// pkill: the arguments to pgrep that select what it signals.
	pgrep []string
	// killall: the names, -u's user, -e, -I and -g.
	names             []string
	user              string
	exact, fold, pgid bool
	// quit is set while parsing when the program stops at a word.
	quit bool
}

// The real-time signals as glibc numbers them, and so bash and procps:
// glibc keeps the kernel's first two.
const (
	rtMin = 34
	rtMax = 64
)

// parseKill reads argv, a kill, pkill or killall command. It is pure: it
// reads no file and runs nothing.
func parseKill(argv []string) call {
	other := call{why: "not kill, pkill or killall"}
	if len(argv) == 0 {
		return other
	}
	c := call{tool: filepath.Base(argv[0]), sig: int(unix.SIGTERM)}
	switch c.tool {
	case "kill":
		if strings.Contains(argv[0], "/") {
			c.parseProcpsKill(argv[1:])
		} else {
			c.parseBashKill(argv[1:])
		}
	case "pkill":
		c.parsePkill(argv[1:])
	case "killall":
		c.parseKillall(argv[1:])
	default:
		return other
	}
	switch {
	case c.none || c.sig == 0:
		// Signal 0 only asks whether a process may be signalled.
		c.none, c.why = true, ""
	case c.sig < 0:
		c.because("a signal undosh cannot name")
	}
	if c.none || c.why != "" {
		c.pids, c.groups, c.pgrep, c.names = nil, nil, nil, nil
	}
	return c
}

// parseBashKill reads the arguments of bash's kill builtin as bash does
// (builtins/kill.def): -l and -L list; -s SIG, -n NUM, -sSIG, -nNUM and a
// first -SIG name the signal; "--" ends the options; each operand is a
// pid, a -PGID or a job spec.
func (c *call) parseBashKill(args []string) {
	sawSignal := false
	i := 0
options:
	for i < len(args) {
		w := args[i]
		switch {
		case w == "-l" || w == "-L":
			c.none = true
			i++
		case w == "-s" || w == "-n":
			if i+1 == len(args) {
				c.none = true // "option requires an argument"
				return
			}
			c.sig, sawSignal = signum(args[i+1]), true
			i += 2
		case len(w) > 2 && w[0] == '-' && (w[1] == 's' && isAlpha(w[2]) || w[1] == 'n' && isDigit(w[2])):
			c.sig, sawSignal = signum(w[2:]), true
			i++
		case w == "--":
			i++
			break options
		case w == "-?":
			c.none = true // usage
			return
		case strings.HasPrefix(w, "-") && !sawSignal:
			c.sig, sawSignal = signum(w[1:]), true
			i++
		default:
			break options
		}
	}
	if c.none || c.sig < 0 {
		// bash lists, or rejects the signal, before it reads an operand.
		return
	}
	if i == len(args) {
		c.none = true // usage
		return
	}
	for _, w := range args[i:] {
		if n, ok := bashNumber(w); ok {
			c.operand(n)
			continue
		}
		switch {
		case w == "":
		case strings.HasPrefix(w, "%"):
			c.because("a job spec names a job of the shell that runs it")
		default:
			// bash rejects it; the words undosh is given may stand for
			// a pid it cannot see ($!).
			c.because("an operand that is not a pid")
		}
	}
	c.none = len(c.pids)+len(c.groups) == 0 && c.why == ""
}

// operand records kill's operand n: a pid, 0 (the caller's group), -1
// (every process) or -PGID.
func (c *call) operand(n int) {
	switch {
	case n > 0:
		c.pids = append(c.pids, n)
	case n == 0:
		c.because("pid 0 is the process group of the shell that runs it")
	case n == -1:
		c.because("pid -1 is every process the caller may signal")
	default:
		c.groups = append(c.groups, -n)
	}
}

// because records the first reason its targets cannot be told.
func (c *call) because(why string) {
	if c.why == "" {
		c.why = why
	}
}

// bashNumber reads w as bash's legal_number does, and kill then as a pid:
// an optional sign and decimal digits, blanks around them allowed, that
// fit a pid_t.
func bashNumber(w string) (int, bool) {
	n, err := strconv.ParseInt(strings.Trim(w, " \t\n"), 10, 32)
	return int(n), err == nil
}

// parseProcpsKill reads the arguments of procps' kill program
// (src/kill.c): the first argument that reads as -SIGNAL, wherever it
// is, names the signal; then getopt_long reads -s, --signal, -q, -l, -L,
// -h and -V, and every other word is a pid or a -PGID.
func (c *call) parseProcpsKill(args []string) {
	args = c.takeSignalOption(args)
	r := getopt(args, procpsKillOptions)
	for _, g := range r.opts {
		switch g.opt.long {
		case "list", "table", "help", "version":
			c.none = true
			return
		case "signal":
			c.sig = signum(g.arg)
		case "queue":
			if _, err := strconv.ParseInt(strings.TrimLeft(g.arg, " \t\n"), 10, 32); err != nil {
				c.none = true // "must be an integer value to be passed with the signal"
				return
			}
		}
	}
	if r.bad != "" {
		if isDigit(r.badChar) {
			// procps 4.0.2 to 4.0.4 signal a pid made from its first
			// digit alone ("-1234" is kill(-1)); 3.3 and 4.0.5 the group.
			c.because("a negative pid before \"--\", which procps' kill reads as options")
		} else {
			c.because("an option undosh does not know: " + r.bad)
		}
		return
	}
	if len(r.operands) == 0 {
		c.none = true // usage
		return
	}
	for _, w := range r.operands {
		n, err := strconv.ParseInt(strings.TrimLeft(w, " \t\n"), 10, 32)
		if err != nil {
			c.because("an operand that is not a pid")
			continue
		}
		c.operand(int(n))
	}
}

var procpsKillOptions = []option{
	{'l', "list", optArg}, {'L', "table", noArg}, {'s', "signal", needArg},
	{'h', "help", noArg}, {'V', "version", noArg}, {'q', "queue", needArg},
}

// takeSignalOption takes the signal from args as procps' kill and pkill
// do before they read options: the first word that reads as -SIGNAL,
// wherever it is, "--" or no. A number up to 93 is a signal to procps
// (signal_name_to_number), though one past 64 cannot be sent. It returns
// args without that word.
func (c *call) takeSignalOption(args []string) []string {
	for i, w := range args {
		if len(w) > 1 && w[0] == '-' {
			n := signum(w[1:])
			if v, err := strconv.Atoi(w[1:]); n >= 0 || err == nil && isDigit(w[1]) && v <= 127-rtMin {
				c.sig = n
				return slices.Delete(slices.Clone(args), i, i+1)
			}
		}
	}
	return args
}

// parsePkill reads the arguments of procps' pkill (src/pgrep.c): the
// signal as procps' kill takes it, then getopt_long. It keeps, in long
// form, the options that select processes, as arguments to pgrep, and
// drops those that only say how to signal or what to print.
func (c *call) parsePkill(args []string) {
	args = c.takeSignalOption(args)
	r := getopt(args, pkillOptions)
	var sel []string
	pick, hasA, handler := false, false, false
	for _, g := range r.opts {
		switch name := g.opt.long; name {
		case "help", "version":
			c.none = true
			return
		case "signal":
			c.sig = signum(g.arg)
		case "echo", "mrelease", "shell-quote", "count", "queue":
		case "newest", "oldest":
			pick = true
			sel = append(sel, "--"+name)
		case "ignore-ancestors":
			hasA = true
			sel = append(sel, "--"+name)
		case "require-handler":
			handler = true
			sel = append(sel, "--"+name)
		default:
			if g.opt.arg == noArg {
				sel = append(sel, "--"+name)
				break
			}
			switch {
			case name == "pidfile" && !filepath.IsAbs(g.arg):
				c.because("a pid file relative to a directory undosh does not know")
			case (name == "pgroup" || name == "session") && slices.Contains(strings.Split(g.arg, ","), "0"):
				c.because("group or session 0 is the one of the pkill that runs")
			}
			sel = append(sel, "--"+name+"="+g.arg)
		}
	}
	if r.bad != "" {
		c.because("an option undosh does not know: " + r.bad)
		return
	}
	switch len(r.operands) {
	case 0:
		if len(sel) == 0 {
			c.none = true // "no matching criteria specified"
			return
		}
	case 1:
		sel = append(sel, "--", r.operands[0])
	default:
		c.none = true // "only one pattern can be provided"
		return
	}
	if pick && !hasA {
		// -n and -o pick one process: pick it from those the caller may
		// end, not from among undosh and its parents.
		sel = append([]string{"--ignore-ancestors"}, sel...)
	}
	if handler && c.sig > 0 {
		// -H asks whether a process handles the signal pkill sends.
		sel = append([]string{"--signal=" + strconv.Itoa(c.sig)}, sel...)
	}
	c.pgrep = sel
}

var pkillOptions = []option{
	{0, "signal", needArg}, {'e', "echo", noArg}, {'q', "queue", needArg},
	{'m', "mrelease", noArg}, {'Q', "shell-quote", noArg}, {'c', "count", noArg},
	{'f', "full", noArg}, {'g', "pgroup", needArg}, {'G', "group", needArg},
	{'i', "ignore-case", noArg}, {'n', "newest", noArg}, {'o', "oldest", noArg},
	{'O', "older", needArg}, {'p', "pid", needArg}, {'P', "parent", needArg},
	{'s', "session", needArg}, {'t', "terminal", needArg}, {'u', "euid", needArg},
	{'U', "uid", needArg}, {'x', "exact", noArg}, {'F', "pidfile", needArg},
	{'L', "logpidfile", noArg}, {'r', "runstates", needArg}, {'A', "ignore-ancestors", noArg},
	{'H', "require-handler", noArg}, {0, "cgroup", needArg}, {0, "ns", needArg},
	{0, "nslist", needArg}, {0, "env", needArg}, {'h', "help", noArg}, {'V', "version", noArg},
}

// parseKillall reads the arguments of psmisc's killall (src/killall.c),
// which uses getopt_long_only: a long option may follow one dash, and a
// word it cannot read that starts with an upper-case letter or a digit is
// a signal (-HUP, -9). -I and -V followed by more letters are signals
// too (-INT, -VTALRM).
func (c *call) parseKillall(args []string) {
	for i := 0; i < len(args) && !c.none; i++ {
		w := args[i]
		switch {
		case w == "--":
			c.names = append(c.names, args[i+1:]...)
			i = len(args)
			continue
		case len(w) < 2 || w[0] != '-':
			c.names = append(c.names, w)
			continue
		}
		o, arg, hasArg, done := c.killallWord(w)
		switch {
		case c.quit:
			return
		case done:
			continue
		case o.arg == needArg && !hasArg:
			if i+1 == len(args) {
				c.because("an option without its argument: " + w)
				return
			}
			i++
			arg = args[i]
		}
		c.killallOption(o, arg)
	}
	switch {
	case c.none || c.why != "":
	case len(c.names) == 0 && c.user == "":
		c.none = true // usage
	case len(c.names) > 64:
		c.none = true // "Maximum number of names is 64"
	}
}

// killallWord reads w, a word of killall's that starts with a dash. It
// returns the option that still wants an argument (from w when hasArg),
// or done when the word is read. It sets c.quit when killall would stop
// at w, or undosh cannot tell what killall makes of it.
func (c *call) killallWord(w string) (o option, arg string, hasArg, done bool) {
	body := w[1:]
	if long, ok := strings.CutPrefix(body, "-"); ok {
		name, v, eq := strings.Cut(long, "=")
		o, found, _ := lookupLong(killallOptions, name)
		if !found || o.arg == noArg && eq {
			c.unknown(w)
			return option{}, "", false, true
		}
		return o, v, eq, false
	}
	first, isShort := shortOption(killallOptions, body[0])
	if len(body) > 1 || !isShort {
		name, v, eq := strings.Cut(body, "=")
		o, found, ambiguous := lookupLong(killallOptions, name)
		switch {
		case found:
			return o, v, eq, false
		case ambiguous && strings.HasPrefix(w, "-ve"):
			c.exact = true // the hack for "-ve", verbose or version
			return option{}, "", false, true
		case ambiguous || !isShort:
			// getopt gives up on the whole word, and killall reads it as
			// a signal if it can.
			switch {
			case isUpper(body[0]):
				c.sig = signum(body)
			case isDigit(body[0]):
				c.sig = atoi(body)
			default:
				c.unknown(w)
			}
			return option{}, "", false, true
		}
	}
	if (first.short == 'I' || first.short == 'V') && len(body) > 1 {
		// -I and -V read their word as a signal unless they are alone.
		c.sig = signum(body)
		return option{}, "", false, true
	}
	// A cluster of short options, read a letter at a time.
	for j := 0; j < len(body); j++ {
		o, ok := shortOption(killallOptions, body[j])
		if !ok || j > 0 && (o.short == 'I' || o.short == 'V') {
			// killall reads the word before or after this one then.
			c.unknown(w)
			return option{}, "", false, true
		}
		if o.arg == needArg {
			return o, body[j+1:], j+1 < len(body), false
		}
		c.killallOption(o, "")
		if c.none {
			return option{}, "", false, true
		}
	}
	return option{}, "", false, true
}

// unknown records that w is an option undosh does not know.
func (c *call) unknown(w string) {
	c.because("an option undosh does not know: " + w)
	c.quit = true
}

// killallOption applies killall's option o; c.none is set when killall
// stops there (it lists signals, prints its version).
func (c *call) killallOption(o option, arg string) {
	switch o.long {
	case "exact":
		c.exact = true
	case "ignore-case":
		c.fold = true
	case "process-group":
		c.pgid = true
	case "signal":
		if len(arg) > 0 && isDigit(arg[0]) {
			c.sig = atoi(arg)
		} else {
			c.sig = signum(arg)
		}
	case "user":
		c.user = arg
		if arg == "" {
			c.because("an empty user name")
		}
	case "list-signals", "version":
		c.none = true
	case "interactive":
		c.because("killall -i asks before each signal")
	case "regexp":
		c.because("killall -r matches names as regular expressions")
	case "younger-than", "older-than":
		c.because("killall -y and -o select by age")
	case "ns":
		c.because("killall -n selects by namespace")
	case "context":
		c.because("killall -Z selects by security context")
	}
}

var killallOptions = []option{
	{'e', "exact", noArg}, {'I', "ignore-case", noArg}, {'g', "process-group", noArg},
	{'y', "younger-than", needArg}, {'o', "older-than", needArg}, {'i', "interactive", noArg},
	{'l', "list-signals", noArg}, {'q', "quiet", noArg}, {'r', "regexp", noArg},
	{'s', "signal", needArg}, {'u', "user", needArg}, {'v', "verbose", noArg},
	{'w', "wait", noArg}, {'n', "ns", needArg}, {'Z', "context", needArg}, {'V', "version", noArg},
}

// atoi reads the leading digits of s as C's atoi does, and -1 (a signal
// undosh cannot name) when they do not fit a signal.
func atoi(s string) int {
	end := 0
	for end < len(s) && isDigit(s[end]) {
		end++
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil || n > rtMax {
		return -1
	}
	return n
}

// signum reads a signal as bash, procps and psmisc name it: a number, or
// a name with or without SIG in any case (RTMIN+n and RTMAX-n too). It
// returns -1 for one it cannot name.
func signum(s string) int {
	if s != "" && strings.Trim(s, "0123456789") == "" {
		n, err := strconv.Atoi(s)
		if err != nil || n > rtMax {
			return -1
		}
		return n
	}
	u := strings.ToUpper(s)
	u = strings.TrimPrefix(u, "SIG")
	if n, ok := signalNamed(u); ok {
		return int(n)
	}
	base, off := rtMin, 0
	var rest string
	switch {
	case u == "RTMIN":
		return rtMin
	case u == "RTMAX":
		return rtMax
	case strings.HasPrefix(u, "RTMIN+"):
		rest = u[len("RTMIN+"):]
	case strings.HasPrefix(u, "RTMAX-"):
		base, rest = rtMax, u[len("RTMAX-"):]
	default:
		return -1
	}
	if rest == "" || strings.Trim(rest, "0123456789") != "" || len(rest) > 2 {
		return -1
	}
	off, _ = strconv.Atoi(rest)
	if base == rtMax {
		off = -off
	}
	if n := base + off; n >= rtMin && n <= rtMax {
		return n
	}
	return -1
}

func signalNamed(name string) (unix.Signal, bool) {
	switch name {
	case "EXIT", "NULL":
		return 0, true
	case "HUP":
		return unix.SIGHUP, true
	case "INT":
		return unix.SIGINT, true
	case "QUIT":
		return unix.SIGQUIT, true
	case "ILL":
		return unix.SIGILL, true
	case "TRAP":
		return unix.SIGTRAP, true
	case "ABRT", "IOT":
		return unix.SIGABRT, true
	case "BUS":
		return unix.SIGBUS, true
	case "FPE":
		return unix.SIGFPE, true
	case "KILL":
		return unix.SIGKILL, true
	case "USR1":
		return unix.SIGUSR1, true
	case "SEGV":
		return unix.SIGSEGV, true
	case "USR2":
		return unix.SIGUSR2, true
	case "PIPE":
		return unix.SIGPIPE, true
	case "ALRM":
		return unix.SIGALRM, true
	case "TERM":
		return unix.SIGTERM, true
	case "STKFLT":
		return unix.SIGSTKFLT, true
	case "CHLD", "CLD":
		return unix.SIGCHLD, true
	case "CONT":
		return unix.SIGCONT, true
	case "STOP":
		return unix.SIGSTOP, true
	case "TSTP":
		return unix.SIGTSTP, true
	case "TTIN":
		return unix.SIGTTIN, true
	case "TTOU":
		return unix.SIGTTOU, true
	case "URG":
		return unix.SIGURG, true
	case "XCPU":
		return unix.SIGXCPU, true
	case "XFSZ":
		return unix.SIGXFSZ, true
	case "VTALRM":
		return unix.SIGVTALRM, true
	case "PROF":
		return unix.SIGPROF, true
	case "WINCH":
		return unix.SIGWINCH, true
	case "IO", "POLL":
		return unix.SIGIO, true
	case "PWR":
		return unix.SIGPWR, true
	case "SYS":
		return unix.SIGSYS, true
	}
	return 0, false
}

// killsByDefault reports whether signal sig, unhandled, ends a process.
func killsByDefault(sig int) bool {
	switch unix.Signal(sig) {
	case 0, unix.SIGCHLD, unix.SIGCONT, unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN,
		unix.SIGTTOU, unix.SIGURG, unix.SIGWINCH:
		return false
	}
	return sig > 0 && sig <= rtMax
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
func isUpper(b byte) bool { return 'A' <= b && b <= 'Z' }
func isAlpha(b byte) bool { return isUpper(b) || 'a' <= b && b <= 'z' }

// What an option takes.
const (
	noArg   = iota
	needArg // in the same word or the next
	optArg  // in the same word only
)

// option is one option of a program's getopt: its letter (0 for none),
// its long name, and what it takes.
type option struct {
	short byte
	long  string
	arg   int
}

// gotOption is one option as getopt read it.
type gotOption struct {
	opt option
	arg string
}

// getoptResult is what getopt read of a command's arguments.
type getoptResult struct {
	opts     []gotOption // in the order they came
	operands []string
	// bad is the word getopt stopped at, "" when it read them all, and
	// badChar the letter of a short option at fault in it (0 for none).
	bad     string
	badChar byte
}

// getopt reads args as GNU getopt_long does: options and operands may be
// mixed, "--" ends the options, a long option may be shortened to a
// prefix that names only it. It stops at an option it does not know, or
// one that lacks its argument.
func getopt(args []string, opts []option) getoptResult {
	var r getoptResult
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w == "--":
			r.operands = append(r.operands, args[i+1:]...)
			return r
		case len(w) < 2 || w[0] != '-':
			r.operands = append(r.operands, w)
			continue
		case w[1] == '-':
			name, v, eq := strings.Cut(w[2:], "=")
			o, found, _ := lookupLong(opts, name)
			switch {
			case !found, o.arg == noArg && eq:
				r.bad = w
				return r
			case o.arg == needArg && !eq:
				if i+1 == len(args) {
					r.bad = w
					return r
				}
				i++
				v = args[i]
			}
			r.opts = append(r.opts, gotOption{o, v})
			continue
		}
		for j := 1; j < len(w); j++ {
			o, ok := shortOption(opts, w[j])
			if !ok {
				r.bad, r.badChar = w, w[j]
				return r
			}
			if o.arg == noArg {
				r.opts = append(r.opts, gotOption{opt: o})
				continue
			}
			v := w[j+1:]
			if v == "" && o.arg == needArg {
				if i+1 == len(args) {
					r.bad, r.badChar = w, w[j]
					return r
				}
				i++
				v = args[i]
			}
			r.opts = append(r.opts, gotOption{o, v})
			break
		}
	}
	return r
}

func shortOption(opts []option, b byte) (option, bool) {
	for _, o := range opts {
		if o.short != 0 && o.short == b {
			return o, true
		}
	}
	return option{}, false
}

// lookupLong finds the long option name names: the one so named, or the
// only one whose name starts with it.
func lookupLong(opts []option, name string) (o option, found, ambiguous bool) {
	if name == "" {
		return option{}, false, false
	}
	n := 0
	for _, x := range opts {
		if x.long == name {
			return x, true, false
		}
		if strings.HasPrefix(x.long, name) {
			o, n = x, n+1
		}
	}
	if n == 1 {
		return o, true, false
	}
	return option{}, false, n > 1
}
