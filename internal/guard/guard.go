package guard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/shquote"
	"github.com/undosh/undosh/internal/where"
)

// Name is the argv[0] under which undosh is the guard: dpkg's pre-invoke
// hook runs /usr/lib/undosh/undosh-guard, a link to undosh.
const Name = "undosh-guard"

// actors are the programs a guard stands in front of, with how a
// command of theirs is spelled when none can be named.
var actors = map[string]string{
	"dpkg": "dpkg -i …",
	"pip":  "pip install …",
	"npm":  "npm install -g …",
}

// Actors returns the names of the programs a guard stands in front of.
func Actors() []string {
	var a []string
	for k := range actors {
		a = append(a, k)
	}
	slices.Sort(a)
	return a
}

// Options say where Check looks. The zero value looks at this process on
// this machine.
type Options struct {
	// Proc is the proc filesystem; "" means /proc.
	Proc string
	// PID is the process whose ancestors name the command; 0 means this
	// one.
	PID int
	// StateDirs are where undoctl agent keeps what a sandbox host said
	// this VM is; nil means $UNDOSH_STATE_DIR (when set) and
	// /var/lib/undosh.
	StateDirs []string
	// Getenv reads the environment ($UNDOSH_STATE_DIR, and dpkg's
	// $DPKG_HOOK_ACTION); nil reads none.
	Getenv func(string) string
}

func (o Options) getenv(k string) string {
	if o.Getenv == nil {
		return ""
	}
	return o.Getenv(k)
}

// RefusedError is a machine change outside a machine step.
type RefusedError struct {
	// Actor is the program refused: dpkg, pip or npm.
	Actor string
	// Command is the command that would change the machine, quoted as a
	// shell would take it; "" when it cannot be named.
	Command string
	// From is the command that ran it (./install.sh), "" when unknown.
	From string
}

func (e *RefusedError) Error() string {
	var why string
	switch {
	case e.Command != "" && e.From != "":
		why = e.Command + ", run by " + e.From
	case e.Command != "":
		why = e.Command
	default:
		why = "this is not a copy of the machine made for a machine step"
	}
	return fmt.Sprintf("%s changes the machine outside a machine step (%s)", e.Actor, why)
}

// Hint says how to run the command as a machine step.
func (e *RefusedError) Hint() string {
	cmd := e.Command
	if cmd == "" {
		cmd = actors[e.Actor]
	}
	return "undoctl run --fork -- " + cmd
}

// UnknownError is a program no guard stands in front of.
type UnknownError struct{ Actor string }

func (e *UnknownError) Error() string {
	return fmt.Sprintf("no guard for %q (guards: %s)", e.Actor, strings.Join(Actors(), ", "))
}

// Check returns nil when actor may change the machine here: in a copy of
// the machine made for a machine step. Anywhere else it returns a
// *[RefusedError]; for a program it does not know, an *[UnknownError].
// cmd, when not empty, is the command to name; otherwise Check names it
// from the process's ancestors.
func Check(actor string, cmd []string, o Options) error {
	if _, ok := actors[actor]; !ok {
		return &UnknownError{Actor: actor}
	}
	if where.InCopy(o.Proc) {
		return nil
	}
	dirs := o.StateDirs
	if dirs == nil {
		if d := o.getenv("UNDOSH_STATE_DIR"); d != "" {
			dirs = append(dirs, d)
		}
		dirs = append(dirs, where.StateDir)
	}
	for _, d := range dirs {
		if where.InHostCopy(d) {
			return nil
		}
	}
	return name(actor, cmd, o)
}

// frontends are the programs (by /proc/PID/comm, which the kernel cuts to
// 15 bytes) that run dpkg for a command of their own: the command to run
// as a machine step is theirs.
var frontends = map[string]bool{
	"apt": true, "apt-get": true, "aptitude": true, "unattended-upgr": true,
	"dselect": true, "synaptic": true, "packagekitd": true,
}

// shells, run with no arguments, are interactive: they say nothing about
// who ran a command.
var shells = map[string]bool{"sh": true, "dash": true, "bash": true}

// passers run a command as it is, in a changed context: the command that
// ran it is the one before them.
var passers = map[string]bool{"sudo": true, "doas": true, "env": true, "nice": true, "ionice": true, "setpriv": true}

// name builds the refusal, naming the command from cmd or from the
// ancestors of o.PID.
func name(actor string, cmd []string, o Options) *RefusedError {
	proc := o.Proc
	if proc == "" {
		proc = "/proc"
	}
	pid := o.PID
	if pid == 0 {
		pid = os.Getpid()
	}
	e := &RefusedError{Actor: actor}
	chain := ancestors(proc, pid)
	i := -1 // the process of the command, in chain
	switch {
	case len(cmd) > 0:
		e.Command = quote(cmd)
	case actor == "dpkg":
		// dpkg runs its hook by sh -c, which may be undosh's sh and
		// the real one: dpkg is a few steps up.
		for j, p := range chain[:min(len(chain), 4)] {
			if p.comm == "dpkg" {
				i = j
				break
			}
		}
		if i >= 0 && i+1 < len(chain) && frontends[chain[i+1].comm] {
			i++
		}
		if i >= 0 {
			e.Command = quote(chain[i].argv)
		} else if a := o.getenv("DPKG_HOOK_ACTION"); isAction(a) {
			e.Command = "dpkg --" + a + " …"
		}
	}
	// Who ran it: the first process above it that is not sudo and the
	// like, unless that is an interactive shell, which says nothing.
	for j := i + 1; j < len(chain); j++ {
		p := chain[j]
		if passers[p.comm] {
			continue
		}
		if !(shells[p.comm] && len(p.argv) == 1) && len(p.argv) > 0 {
			if from := quote(p.argv); from != e.Command {
				e.From = from
			}
		}
		break
	}
	return e
}

// isAction reports whether a is one of the dpkg actions that run hooks.
func isAction(a string) bool {
	switch a {
	case "install", "unpack", "configure", "remove", "purge", "triggers-only", "add-architecture", "remove-architecture":
		return true
	}
	return false
}

// process is one ancestor.
type process struct {
	pid  int
	comm string
	argv []string
}

// ancestors returns the ancestors of pid, its parent first, up to but
// not including pid 1 (init, or the copy's init), at most 64.
func ancestors(proc string, pid int) []process {
	var out []process
	for hops := 0; hops < 64; hops++ {
		pid = where.Parent(proc, pid)
		if pid <= 1 {
			break
		}
		dir := filepath.Join(proc, strconv.Itoa(pid))
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		p := process{pid: pid, comm: strings.TrimSpace(string(comm))}
		if len(cmdline) > 0 {
			p.argv = strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		}
		out = append(out, p)
	}
	return out
}

// maxCommand bounds a command in a message.
const maxCommand = 200

// quote spells argv as a shell would take it, cut to maxCommand bytes.
func quote(argv []string) string {
	s := shquote.Join(argv)
	if len(s) > maxCommand {
		cut := maxCommand
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Main is the guard's command line: ACTOR [-- COMMAND…]. It exits 0 in a
// copy of the machine made for a machine step; elsewhere it says why not
// on stderr and exits [exit.Refused], which makes dpkg abort. Bad usage
// exits [exit.Usage]: it too stops dpkg.
func Main(args []string, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || (len(args) > 1 && args[1] != "--") {
		fmt.Fprintf(stderr, "undosh: error: usage: %s %s [-- COMMAND…]\n", Name, strings.Join(Actors(), "|"))
		return exit.Usage
	}
	var cmd []string
	if len(args) > 2 {
		cmd = args[2:]
	}
	err := Check(args[0], cmd, Options{Getenv: getenv})
	var re *RefusedError
	switch {
	case err == nil:
		return exit.OK
	case errors.As(err, &re):
		fmt.Fprintf(stderr, "undosh: refused: %s\nundosh: hint: %s\n", re.Error(), re.Hint())
		return exit.Refused
	}
	fmt.Fprintf(stderr, "undosh: error: %v\n", err)
	return exit.Usage
}
