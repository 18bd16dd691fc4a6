package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// Process is the process undosh runs in, as cmd/undosh sees it: its
// argv, environment, standard files and the caller's signal state, and how
// to exec or end it.
type Process struct {
	Argv    []string
	Environ []string
	Getenv  func(string) string
	Stdin   *os.File
	Stderr  io.Writer
	// Closed reports whether a standard fd was closed when undosh started.
	Closed func(fd int) bool
	// Files are the standard files for a child (nil where closed).
	Files []*os.File
	// Exec replaces the process; it returns only on failure.
	Exec func(path string, argv, env []string) error
	// DieBy ends the process by a signal.
	DieBy func(syscall.Signal)
	// Ignored reports whether the caller ignored a signal.
	Ignored func(syscall.Signal) bool
	// Config is the file naming the real shells; "" means [ConfigFile].
	Config string
	// Executed is the file the kernel was asked to run (AT_EXECFN), which
	// decides whether undosh stands in for bash or sh (shellIsSh); "" is
	// undosh by its own name.
	Executed string
}

// Main runs the invocation of p and returns its exit status (or, for a
// step killed by a signal, ends p by the same signal).
func Main(p *Process) int {
	environ0 := p.Environ
	var sup *supervisor
	p.Environ, sup = takeSupervise(p.Environ)
	if sup != nil {
		// The file run is the shell-to-be's, not this one's (undosh's
		// own path, which goes by argv[0]).
		p.Executed = sup.executed
		return sup.supervise(p, func() int { return mainOf(p, sup, p.Environ) })
	}
	return mainOf(p, nil, environ0)
}

// mainOf runs the invocation, as the supervisor sup of a step handed over
// when it is set; environ0 is the environment as undosh received it.
func mainOf(p *Process, sup *supervisor, environ0 []string) int {
	// "" when the directory was removed: bash runs there too, and so
	// does the step, judged without one.
	cwd, _ := os.Getwd()
	var front os.FileInfo
	executed := p.Executed
	p.Environ, front, executed = takeFront(p.Environ, executed)
	inv := parseInvocation(p.Argv, executed, cwd, p.Getenv)
	real, err := RealShell(inv.Personality, p.Getenv, p.config(), front)
	if err != nil {
		p.errorf(err, "set UNDOSH_REAL_BASH (or UNDOSH_REAL_SH) to the real shell, or run undoctl install")
		return exit.Usage
	}
	stateDir := state.Dir("", p.Getenv, os.Getuid())
	if stateDir != "" {
		if _, err := os.Lstat(journal.PendingDir(stateDir)); err == nil {
			finishRollbacks(p, stateDir)
		}
	}
	src, err := readSource(inv, p)
	if err != nil {
		p.errorf(err, "")
		return exit.Failure
	}
	if src.passThrough && !(src.interactive && stateDir != "") {
		return p.exec(real, src)
	}
	r := &run{proc: p, inv: inv, real: real, src: src, stateDir: stateDir, cwd: cwd, uid: os.Getuid(), sup: sup, environ0: environ0, executed: executed}
	return r.main()
}

// takeFront removes UNDOSH_FRONT and UNDOSH_EXECFN, which undosh-fast
// sets when it hands an invocation to undosh, from the environment the
// shell will see. It returns the file UNDOSH_FRONT names (the front end,
// which must never be taken for the real shell) and the file the kernel
// was asked to run: the front end's, from UNDOSH_EXECFN, when undosh was
// reached through it, else executed.
func takeFront(env []string, executed string) ([]string, os.FileInfo, string) {
	var front os.FileInfo
	var execfn string
	kept := env[:0:0]
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "UNDOSH_FRONT="); ok {
			front, _ = os.Stat(p)
			continue
		}
		if p, ok := strings.CutPrefix(kv, "UNDOSH_EXECFN="); ok {
			execfn = p
			continue
		}
		kept = append(kept, kv)
	}
	if front != nil {
		executed = execfn
	}
	return kept, front, executed
}

func (p *Process) config() string {
	if p.Config != "" {
		return p.Config
	}
	return ConfigFile
}

// exec replaces undosh with the real shell, with fd 0 replaced by the
// relayed script when there is one.
func (p *Process) exec(real string, src source) int {
	return p.execAs(real, p.Argv, p.Environ, src)
}

// execAs replaces undosh with path (the real shell, or the shell under
// a limit), as exec does.
func (p *Process) execAs(path string, argv, env []string, src source) int {
	if src.stdin != nil {
		if err := syscall.Dup2(int(src.stdin.Fd()), 0); err != nil {
			p.errorf(fmt.Errorf("relay standard input: %w", err), "")
			return exit.Failure
		}
	}
	err := p.Exec(path, argv, env)
	if errors.Is(err, errHandedOver) {
		return 0 // the shell-to-be execs it
	}
	p.errorf(fmt.Errorf("exec %s: %w", path, err), "check UNDOSH_REAL_BASH and "+ConfigFile)
	return exit.NotRun
}

// errorf prints `undosh: error: …` and an optional hint.
func (p *Process) errorf(err error, hint string) {
	if p.Closed(2) {
		return
	}
	msg := "undosh: error: " + strings.ReplaceAll(err.Error(), "\n", "\nundosh: error: ") + "\n"
	if hint != "" {
		msg += "undosh: hint: " + hint + "\n"
	}
	io.WriteString(p.Stderr, msg)
}

// say prints one line of undosh's own on stderr.
func (p *Process) say(line string) {
	if p.Closed(2) {
		return
	}
	io.WriteString(p.Stderr, "undosh: "+line+"\n")
}

// run is one invocation being decided and protected.
type run struct {
	proc     *Process
	inv      invocation
	real     string
	src      source
	stateDir string
	pol      *policy.Policy
	cwd      string
	env      map[string]string
	uid      int // undosh's own: the caller's
	dec      policy.Decision
	// runsAsRoot: the parser saw the step run a command through sudo (or
	// doas, su, runuser), which Landlock's no_new_privs would stop.
	runsAsRoot bool
	// facts are what the parser saw of the step (nil for a session).
	facts *parser.Facts
	// viaSudo: one of those commands runs through sudo itself.
	viaSudo bool
	// inView: a line of a session whose bash runs in a view of the
	// machine (session_view.go).
	inView bool
	// ctx, when set, ends a step run in a copy of the machine early (an
	// interactive line whose user gave up on it).
	ctx context.Context
	// beforeStep, when set, is called just before a step starts to run
	// elsewhere (in a copy of the machine) and writes to the terminal.
	beforeStep func()
	// sup is set when this undosh supervises a step handed over by the
	// process its caller started (handover.go).
	sup *supervisor
	// environ0 is the environment as undosh received it.
	environ0 []string
	// live is set for a live step run here (live.go).
	live *liveStep
	// executed is the file this undosh was run as (Process.Executed, or the
	// front end's), which decided its personality; a supervisor decides
	// by the same.
	executed string
}

func (r *run) context() context.Context {
	if r.ctx != nil {
		return r.ctx
	}
	return context.Background()
}

func (r *run) main() int {
	p := r.proc
	if err := r.load(); err != nil {
		p.errorf(err, "fix the policy (undoctl policy check FILE explains each error); nothing ran")
		return exit.Usage
	}
	if r.src.interactive {
		return r.interactive()
	}
	if r.src.session {
		if r.inv.Personality == "bash" {
			return r.protectPipe()
		}
		return r.protectSession()
	}
	switch r.decide() {
	case RoutePlain:
		// Enforcement is off (undosh's own tools take no checkpoint):
		// nothing holds the step off its workspace.
		r.beforePlain(resolvedRoots(nil, r.cwd, p.Getenv("HOME")))
		return p.exec(r.real, r.src)
	case RouteLimited:
		return r.protectNone()
	case RouteSudo:
		return r.protectKept()
	}
	return r.protect()
}

// load loads the policy, and the environment as a map.
func (r *run) load() error {
	cacheDir := ""
	if r.stateDir != "" {
		cacheDir = r.stateDir + "/cache"
	}
	pol, err := classify.LoadPolicy(classify.PolicyPath("", r.proc.Getenv), cacheDir)
	if err != nil {
		return err
	}
	r.pol = pol
	r.env = classify.Environ(r.proc.Environ)
	return nil
}

// decide decides the step by [decideStep], as the front end's server does
// ([Ask]), and
// returns its route; it runs nothing but `bash -n`.
func (r *run) decide() Route {
	d := decideStep(step{inv: r.inv, src: r.src, cwd: r.cwd, env: r.proc.Environ, envMap: r.env, pol: r.pol,
		stateDir: r.stateDir, real: r.real, uid: r.uid})
	r.cwd = d.cwd
	r.dec = d.res.Decision
	r.runsAsRoot = runsAsRoot(d.res.Facts)
	r.facts = d.res.Facts
	r.viaSudo = viaSudo(d.res.Facts)
	return d.route
}

// Route is how undosh runs a decided step; [Ask] reports it to the
// front end's server.
type Route int

const (
	// RouteProtect: undosh protects it (a checkpoint, a copy of the
	// machine) or refuses it.
	RouteProtect Route = iota
	// RoutePlain: the real shell is exec'd as it is: a read-only step
	// with enforcement off, or undosh's own tools.
	RoutePlain
	// RouteLimited: the real shell is exec'd under the read-only limit.
	RouteLimited
	// RouteSudo: a read-only step that runs sudo as another user than
	// root, which the read-only limit would stop ([limitStopsSudo]): undosh
	// protects it as a workspace step, without a limit.
	RouteSudo
)

// routeOf is how a step decided d runs, with enforcement on or off (see
// [decideStep], which both undosh and the front end's server call).
func routeOf(d policy.Decision, enforcing bool) Route {
	switch {
	case d.Class != policy.None || d.Verdict != policy.Run:
		return RouteProtect
	case d.Own || !enforcing:
		return RoutePlain
	}
	return RouteLimited
}

// runsAsRoot reports whether a command of the step runs as another user
// through sudo, doas, su or runuser.
func runsAsRoot(f *parser.Facts) bool {
	return f != nil && slices.ContainsFunc(f.Commands, func(c parser.Command) bool { return c.Root })
}
