package enforce

// #include <limits.h>
// #include "enforce.h"
import "C"

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Name is the argv[0] under which undosh's executable applies a plan and
// execs the step's shell (see the package documentation).
const Name = C.UNDOSH_ENFORCE_NAME

// planVar carries the plan from [Command] to the constructor, which
// removes it before the shell starts.
const planVar = C.UNDOSH_ENFORCE_VAR

// Mode is the kernel mechanism that enforces a plan.
type Mode int

// The mechanisms. The zero value, Auto, picks a mount namespace when the
// process that applies the plan has CAP_SYS_ADMIN, and Landlock otherwise
// (and also when a container's seccomp filter refuses unshare).
const (
	Auto     Mode = C.UNDOSH_MODE_AUTO
	MountNS  Mode = C.UNDOSH_MODE_NS
	Landlock Mode = C.UNDOSH_MODE_LANDLOCK
)

func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case MountNS:
		return "ns"
	case Landlock:
		return "landlock"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Plan says what a step may write.
type Plan struct {
	// Class is the step's class: "none" or "git". A "fork" step runs in
	// a copy of the machine, not here.
	Class string
	// Writable lists the absolute paths that stay writable, with
	// everything beneath them: the workspace roots (git steps only), the
	// scratch paths and the state directory. Symbolic links are resolved
	// when the plan is applied; a path that does not exist then is
	// skipped.
	Writable []string
	// Shell is the program to run once the plan is in place, the real
	// shell. Empty means argv[0], which must then be its absolute path;
	// set it whenever argv[0] is a name (a login shell's "-bash").
	Shell string
	// Mode picks the mechanism; the zero value is Auto.
	Mode Mode
}

// ErrUnavailable means that the mechanism a plan asks for cannot work
// here: no CAP_SYS_ADMIN for a mount namespace, or a kernel without
// Landlock. The caller decides what to do with the step (refuse it, or
// run it in a copy).
var ErrUnavailable = errors.New("enforcement unavailable")

// Probe returns the mechanism that m resolves to in this process, or an
// error wrapping [ErrUnavailable] that says what is missing. A process
// started with fewer capabilities than the caller (setpriv, a container)
// decides for itself when m is Auto.
func Probe(m Mode) (Mode, error) {
	var abi C.int
	got := C.undosh_enforce_probe(C.int(m), &abi)
	if got >= 0 {
		return Mode(got), nil
	}
	switch m {
	case MountNS:
		return 0, fmt.Errorf("mount namespace: no CAP_SYS_ADMIN: %w", ErrUnavailable)
	case Landlock:
		return 0, fmt.Errorf("landlock: the kernel does not offer it: %w", ErrUnavailable)
	case Auto:
		return 0, fmt.Errorf("no CAP_SYS_ADMIN for a mount namespace, and the kernel offers no Landlock: %w", ErrUnavailable)
	}
	return 0, fmt.Errorf("unknown mechanism %v", m)
}

// Command rewrites the exec of a step's shell (argv, env, and the program
// [Plan].Shell) so that it runs under plan: it returns the program, argv
// and environment to exec or start instead. self must be undosh's own
// executable, resolved (/proc/self/exe read by os.Executable), or another
// binary that links this package. The caller execs the result exactly as
// it would have exec'd the shell, with the same fds, signal state and
// working directory: they reach the shell unchanged, and so do argv and
// env. When the plan cannot be applied the shell does not run: the
// process exits 126 after `undosh: error: enforce: …` on stderr.
//
// Command returns an error wrapping [ErrUnavailable] when no mechanism
// can work here, and an error for a plan that makes no sense.
func Command(self string, plan Plan, argv, env []string) (path string, newArgv, newEnv []string, err error) {
	if len(argv) == 0 {
		return "", nil, nil, errors.New("enforce: no argv")
	}
	if !filepath.IsAbs(self) {
		return "", nil, nil, fmt.Errorf("enforce: %q is not an absolute path", self)
	}
	shell := plan.Shell
	if shell == "" {
		shell = argv[0]
	}
	enc, err := plan.encode(shell)
	if err != nil {
		return "", nil, nil, fmt.Errorf("enforce: %w", err)
	}
	if _, err := Probe(plan.Mode); err != nil {
		return "", nil, nil, fmt.Errorf("enforce: %w", err)
	}
	newEnv = make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, planVar+"=") {
			newEnv = append(newEnv, kv)
		}
	}
	newEnv = append(newEnv, planVar+"="+enc)
	newArgv = append([]string{Name}, argv...)
	return self, newArgv, newEnv, nil
}

// encode writes the plan as the constructor reads it (parse_plan in
// enforce.c): `1 MODE CLASS LEN:SHELL [LEN:PATH]...`, each path prefixed by
// its length so that no byte of it needs escaping.
func (p Plan) encode(shell string) (string, error) {
	if p.Class != "none" && p.Class != "git" {
		return "", fmt.Errorf("class %q: only none and git steps are enforced", p.Class)
	}
	switch p.Mode {
	case Auto, MountNS, Landlock:
	default:
		return "", fmt.Errorf("unknown mechanism %v", p.Mode)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "1 %v %s", p.Mode, p.Class)
	for i, s := range append([]string{shell}, p.Writable...) {
		what := "writable path"
		if i == 0 {
			what = "shell"
		}
		switch {
		case s == "" || !filepath.IsAbs(s):
			return "", fmt.Errorf("%s %q is not an absolute path", what, s)
		case strings.IndexByte(s, 0) >= 0:
			return "", fmt.Errorf("%s %q holds a NUL byte", what, s)
		case len(s) >= C.PATH_MAX:
			return "", fmt.Errorf("%s %.40q… is too long", what, s)
		case i > 0 && filepath.Clean(s) == "/":
			return "", fmt.Errorf("%s %q would leave everything writable", what, s)
		}
		fmt.Fprintf(&b, " %d:%s", len(s), s)
	}
	return b.String(), nil
}

// Main is for a main whose argv[0] is [Name]. The constructor always
// takes such a process over before main runs, in a binary built with
// glibc or musl; reaching Main means it did not, so Main says so on stderr
// and returns 126, the status of a plan that could not be applied.
func Main(stderr io.Writer) int {
	fmt.Fprintln(stderr, "undosh: error: enforce: the constructor did not run ("+Name+")")
	fmt.Fprintln(stderr, "undosh: hint: this binary was built without the enforce package's C constructor; the step did not run")
	return 126
}
