package enforce

// #include <limits.h>
// #include <stdlib.h>
// #include "enforce.h"
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/undosh/undosh/internal/exit"
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
// (and also when a container's seccomp filter refuses unshare). Capture
// runs the step in a view of the machine ([View]) whose writes outside
// the writable paths land in upper layers the caller reads afterwards.
const (
	Auto     Mode = C.UNDOSH_MODE_AUTO
	MountNS  Mode = C.UNDOSH_MODE_NS
	Landlock Mode = C.UNDOSH_MODE_LANDLOCK
	Capture  Mode = C.UNDOSH_MODE_CAPTURE
)

// modeNames are the modes as a plan writes them (limit.c reads them in
// this order).
var modeNames = []string{"auto", "ns", "landlock", "capture"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
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
	// Held lists paths beneath a writable one that stay read-only: the
	// workspace of a read-only step that lies in a scratch path (a
	// project in /tmp). Only a mount namespace can hold them (Landlock
	// grants whole trees, with no exception beneath): under [Auto] they
	// are held if it picks one, and the plan of any other mode may not
	// name them. A held path that does not exist is skipped.
	Held []string
	// Shell is the program to run once the plan is in place, the real
	// shell. Empty means argv[0], which must then be its absolute path;
	// set it whenever argv[0] is a name (a login shell's "-bash").
	Shell string
	// Mode picks the mechanism; the zero value is Auto.
	Mode Mode
	// View is the view a Capture plan builds; Writable must be empty
	// then (the view's Shared paths are what the step may write).
	View *View
}

// View is the view of the machine a step runs in under [Capture]: one
// overlay per filesystem of the machine, whose upper directory collects
// what the step writes there, with the machine's own trees and the
// shared paths bound on top. The caller makes Root and the layers'
// directories (on a filesystem of its own, so that the upper directories
// are not beneath any lower one), and reads the upper directories after
// the step. The view goes when the last process in it ends.
type View struct {
	// Root is the directory the view is built in; it becomes the step's
	// root.
	Root string
	// Layers are the overlays, the machine's root first, then parents
	// before children.
	Layers []Layer
	// Machine are trees shown as they are on the machine, writable:
	// /proc, /dev and /run always (/proc/sys, /sys and /dev itself are
	// made read-only), and the mounts no layer covers. A Unix socket
	// cannot be reached through an overlay, hence /run.
	Machine []string
	// Shared are the paths the step may write: bound from the machine,
	// recursively, in the order given (parents before children).
	Shared []string
	// Files are files bound from the machine one by one: the listening
	// Unix sockets that lie on a layer.
	Files []string
	// Hidden are directories the view shows empty: where the caller
	// keeps the layers of views, beneath a shared path.
	Hidden []string
}

// MachineTrees are the trees every view shows as they are on the
// machine (see [View].Machine).
var MachineTrees = []string{"/proc", "/dev", "/run", "/sys"}

// Layer is one overlay of a [View].
type Layer struct {
	// Mount is the machine's mount point (the overlay's lower
	// directory); Upper and Work its upper and work directories.
	Mount, Upper, Work string
	// ReadOnly: the machine's mount is read-only, and so is the overlay.
	ReadOnly bool
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
	got := C.undosh_limit_probe(C.int(m), &abi)
	if got >= 0 {
		return Mode(got), nil
	}
	switch m {
	case MountNS:
		return 0, fmt.Errorf("mount namespace: no CAP_SYS_ADMIN: %w", ErrUnavailable)
	case Landlock:
		return 0, fmt.Errorf("landlock: the kernel does not offer it: %w", ErrUnavailable)
	case Capture:
		return 0, fmt.Errorf("capture: no CAP_SYS_ADMIN to build a view: %w", ErrUnavailable)
	case Auto:
		return 0, fmt.Errorf("no CAP_SYS_ADMIN for a mount namespace, and the kernel offers no Landlock: %w", ErrUnavailable)
	}
	return 0, fmt.Errorf("unknown mechanism %v", m)
}

// Self is this process's executable, resolved: the self that [Command]
// takes.
func Self() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
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

// Encode returns a hard limit's plan (not Capture) as limit.c reads it,
// for a process that applies it itself: the front end, which has the
// plan from its server. p.Shell must be set.
func Encode(p Plan) (string, error) {
	if p.Mode == Capture {
		return "", errors.New("enforce: a view is for undosh's own child")
	}
	enc, err := p.encode(p.Shell)
	if err != nil {
		return "", fmt.Errorf("enforce: %w", err)
	}
	return enc, nil
}

// encode writes the plan as limit.c reads it (undosh_plan_parse):
// `2 MODE CLASS` and then fields ` TAG LEN:BYTES`, each prefixed by its
// length so that no byte of it needs escaping.
func (p Plan) encode(shell string) (string, error) {
	if p.Class != "none" && p.Class != "git" {
		return "", fmt.Errorf("class %q: only none and git steps are enforced", p.Class)
	}
	if p.Mode < 0 || int(p.Mode) >= len(modeNames) {
		return "", fmt.Errorf("unknown mechanism %v", p.Mode)
	}
	if (p.Mode == Capture) != (p.View != nil) {
		return "", errors.New("a view goes with capture, and only with it")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "2 %v %s", p.Mode, p.Class)
	var err error
	field := func(tag byte, what, s string) {
		switch {
		case err != nil:
			return
		case s == "" || !filepath.IsAbs(s):
			err = fmt.Errorf("%s %q is not an absolute path", what, s)
		case strings.IndexByte(s, 0) >= 0:
			err = fmt.Errorf("%s %q holds a NUL byte", what, s)
		case len(s) >= C.PATH_MAX:
			err = fmt.Errorf("%s %.40q… is too long", what, s)
		case tag == 'w' && filepath.Clean(s) == "/":
			err = fmt.Errorf("%s %q would leave everything writable", what, s)
		}
		fmt.Fprintf(&b, " %c%d:%s", tag, len(s), s)
	}
	field('s', "shell", shell)
	if p.View == nil {
		for _, w := range p.Writable {
			field('w', "writable path", w)
		}
		if len(p.Held) > 0 && p.Mode != MountNS && p.Mode != Auto {
			return "", errors.New("a held path needs the ns mechanism: Landlock cannot make an exception beneath a writable tree")
		}
		for _, h := range p.Held {
			field('x', "held path", h)
		}
		return b.String(), err
	}
	if len(p.Writable) > 0 {
		return "", errors.New("a capture plan's writable paths are its view's Shared")
	}
	v := p.View
	if filepath.Clean(v.Root) == "/" {
		return "", errors.New("a view cannot be built in /")
	}
	field('r', "view root", v.Root)
	if len(v.Layers) == 0 || v.Layers[0].Mount != "/" {
		return "", errors.New("a view starts with the overlay of /")
	}
	for _, l := range v.Layers {
		tag := byte('o')
		if l.ReadOnly {
			tag = 'O'
		}
		field(tag, "layer", l.Mount)
		field('u', "upper directory", l.Upper)
		field('k', "work directory", l.Work)
	}
	machine := append(slices.Clone(MachineTrees), v.Machine...)
	for i, m := range machine {
		if !slices.Contains(machine[:i], m) {
			field('b', "tree of the machine", m)
		}
	}
	for _, s := range v.Shared {
		field('w', "shared path", s)
	}
	for _, f := range v.Files {
		field('B', "file of the machine", f)
	}
	for _, h := range v.Hidden {
		field('E', "hidden directory", h)
	}
	// The kernel's settings stay the machine's, read-only.
	field('b', "tree of the machine", "/proc/sys")
	field('R', "read-only tree", "/proc/sys")
	field('R', "read-only tree", "/sys")
	field('P', "read-only mount", "/dev")
	return b.String(), err
}

// decodePlan is limit.c's reading of an encoded plan, for tests: the
// mode, the class and the fields in order, each as its tag and bytes.
func decodePlan(s string) (mode Mode, class string, fields []string, err error) {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	var p C.struct_undosh_plan
	defer C.undosh_plan_free(&p)
	if bad := C.undosh_plan_parse(cs, &p); bad != nil {
		return 0, "", nil, errors.New(C.GoString(bad))
	}
	fields = append(fields, "s"+C.GoString(p.shell))
	if p.root != nil {
		fields = append(fields, "r"+C.GoString(p.root))
	}
	if p.mode == C.UNDOSH_MODE_CAPTURE {
		for _, a := range unsafe.Slice(p.actions, p.nactions) {
			fields = append(fields, string(rune(a.tag))+C.GoString(a.s))
		}
	} else {
		for _, w := range unsafe.Slice(p.writable, p.nwritable) {
			fields = append(fields, "w"+C.GoString(w))
		}
		for _, h := range unsafe.Slice(p.held, p.nheld) {
			fields = append(fields, "x"+C.GoString(h))
		}
	}
	return Mode(p.mode), C.GoString(p.class), fields, nil
}

// ViewSyncName is the argv[0] under which undosh's executable puts paths
// of a view back as the machine has them ([SyncCommand]).
const ViewSyncName = C.UNDOSH_VIEW_SYNC_NAME

// ViewBindName is the argv[0] under which undosh's executable binds
// paths of the machine into a view ([BindCommand]).
const ViewBindName = C.UNDOSH_VIEW_BIND_NAME

// BindCommand returns the argv that, run with undosh's executable,
// binds paths (directories of the machine, real paths) into the view
// that process pid is in, writable, with the mounts beneath them: a
// session's line whose workspace the view does not share yet. It needs
// CAP_SYS_ADMIN and exits 0 when all went well.
func BindCommand(pid int, paths []string) []string {
	return append([]string{ViewBindName, strconv.Itoa(pid)}, paths...)
}

// How [SyncCommand] puts a path of a view back.
const (
	PutRemove = 'a' // the machine has none: remove it from the view
	PutCopy   = 'c' // copy it, whole, from the machine
	PutMeta   = 'm' // a directory whose mode, owner and times alone changed
)

// Put is one path of a view to put back as the machine has it.
type Put struct {
	Path string
	How  byte // PutRemove, PutCopy or PutMeta
}

// SyncCommand returns the argv that, run with undosh's executable,
// enters the view that process pid is in and puts puts back as the
// machine has them: through the view's overlay, whose upper directory
// must never be written while it is mounted. It needs CAP_SYS_ADMIN
// (setns) and exits 0 when all went well.
func SyncCommand(pid int, puts []Put) []string {
	argv := []string{ViewSyncName, strconv.Itoa(pid)}
	for _, p := range puts {
		argv = append(argv, string(p.How)+":"+p.Path)
	}
	return argv
}

// Main is for a main whose argv[0] is [Name]. The constructor always
// takes such a process over before main runs, in a binary built with
// glibc or musl; reaching Main means it did not, so Main says so on stderr
// and returns [exit.Refused] (126), the status of a plan that could not be
// applied.
func Main(stderr io.Writer) int {
	fmt.Fprintln(stderr, "undosh: error: enforce: the constructor did not run ("+Name+")")
	fmt.Fprintln(stderr, "undosh: hint: this binary was built without the enforce package's C constructor; the step did not run")
	return exit.Refused
}
