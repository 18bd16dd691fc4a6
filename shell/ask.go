package shell

import (
	"os"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// A Query is an invocation the front end's server (package front) asks
// about: what the front end sent, and the caller's uid, which the server
// takes from its socket. The server reads no caller's standard input and
// keeps its own caches, hence the functions.
type Query struct {
	Argv, Env []string
	// Cwd is the caller's working directory ("" when unknown); Execfn
	// the file it was run as (AT_EXECFN).
	Cwd, Execfn string
	UID         int
	// RealShell finds the real shell of a personality; Policy loads the
	// policy the caller's environment names, false when it cannot. Both
	// must be set.
	RealShell func(personality string, getenv func(string) string) (string, error)
	Policy    func(getenv func(string) string, stateDir string) (*policy.Policy, bool)
	// Cache, when set, keeps the parse of large sources.
	Cache *parser.Cache
}

// A Pass is how undosh would run the step of a [Query]: [RoutePlain]
// (exec Real as it is), [RouteLimited] (exec Real under the read-only
// limit) or, for anything else, [RouteProtect]: the server then hands
// the step to undosh, which decides it again by the same rule.
type Pass struct {
	Route Route
	// Real is the real shell, with RoutePlain and RouteLimited.
	Real string
	// Checkpoint: the policy judged the step read-only, and its
	// workspace must have a checkpoint before it runs
	// ([Pass.TakeCheckpoint]), unless an outer read-only step's covers
	// it. False for what nothing judged (no command, a missing script)
	// and for undosh's own tools.
	Checkpoint bool
	// What the step was judged with, and by: set when the policy judged
	// it. Cwd is the working directory as the shell takes it.
	Policy                       *policy.Policy
	StateDir, Home, Cwd, Command string
}

// Ask decides the step of q by the rule undosh itself decides by
// ([decideStep]), as far as the front end's server can see it: a script
// on the caller's stdin or on one of its fds, a state directory with a
// rollback to finish, a policy that does not load, an unknown working
// directory, all get [RouteProtect], and so undosh.
func Ask(q Query) Pass {
	protect := Pass{Route: RouteProtect}
	if len(q.Argv) == 0 {
		return protect
	}
	env := classify.Environ(q.Env)
	getenv := func(k string) string { return env[k] }
	inv := parseInvocation(q.Argv, q.Execfn, q.Cwd, getenv)
	// The front end itself is never the real shell: RealShell skips it.
	real, err := q.RealShell(inv.Personality, getenv)
	if err != nil {
		return protect
	}
	stateDir := state.Dir("", getenv, q.UID)
	if stateDir == "" {
		return protect
	}
	if _, err := os.Lstat(journal.PendingDir(stateDir)); err == nil {
		return protect // a rollback to finish first
	}
	plain := Pass{Route: RoutePlain, Real: real}
	var src source
	switch inv.Mode {
	case modeNothing:
		return plain
	case modeCommand:
		src = source{text: inv.Command}
	case modeScript:
		if _, ok := fdName(inv.Script); ok {
			return protect // a file only the caller holds: undosh reads it
		}
		src, err = readScript(inv.Script, q.Cwd, getenv)
		if err != nil {
			return protect
		}
		if src.passThrough {
			return plain
		}
	default:
		return protect // the script is on the caller's stdin
	}
	pol, ok := q.Policy(getenv, stateDir)
	if !ok || q.Cwd == "" {
		return protect
	}
	d := decideStep(step{inv: inv, src: src, cwd: q.Cwd, env: q.Env, envMap: env, pol: pol, stateDir: stateDir,
		real: real, uid: q.UID, cache: q.Cache})
	if d.route != RoutePlain && d.route != RouteLimited {
		return protect
	}
	return Pass{Route: d.route, Real: real, Checkpoint: !d.res.Decision.Own, Policy: pol,
		StateDir: stateDir, Home: env["HOME"], Cwd: d.cwd, Command: src.text}
}

// TakeCheckpoint checkpoints the workspace of p's read-only step, using
// the server's watchers, and returns its journal record for
// [JournalReadOnly]. It returns false when the step has no workspace or
// its store cannot be written (the step runs unrecorded), and an error
// wrapping [checkpoint.ErrWouldWalk] when the checkpoint would walk the
// workspace: the server then hands the step to undosh, so that a walk of
// a large tree never holds up the other front ends.
func (p Pass) TakeCheckpoint(watch *watchd.Service, pid int) (journal.Record, bool, error) {
	return readOnlyCheckpoint(readOnlyStep{stateDir: p.StateDir, pol: p.Policy, home: p.Home, cwd: p.Cwd, command: p.Command,
		pid: pid, watch: watch})
}

// JournalReadOnly numbers and journals the record of a read-only step
// that ran.
func JournalReadOnly(stateDir string, rec journal.Record) error {
	return journalReadOnly(stateDir, rec)
}

// ReadOnlyWritable lists what a read-only step may write under its limit
// (the scratch paths of the policy and of the tools found under home, and
// undosh's own state directory). It stats every path it lists.
func ReadOnlyWritable(pol *policy.Policy, home, stateDir string) []string {
	return writablePaths(policy.None, pol, nil, home, stateDir)
}

// A Trial is what [Decide] takes beyond the process: where, and as
// whom, the step would run, and by which policy.
type Trial struct {
	Cwd, StateDir string
	UID           int
	// Policy, when set, is the policy; else Decide loads the one p's
	// environment names.
	Policy *policy.Policy
}

// Decide is the route [Main] would take for the invocation of p, run as
// t says: it reads the invocation and the script it names (or its
// standard input), and decides it by the policy, running nothing but
// `bash -n`. The front end's tests check by it that [Ask] and undosh
// decide alike.
func Decide(p *Process, t Trial) (Route, error) {
	inv := parseInvocation(p.Argv, p.Executed, t.Cwd, p.Getenv)
	real, err := RealShell(inv.Personality, p.Getenv, p.config(), nil)
	if err != nil {
		return RouteProtect, err
	}
	src, err := readSource(inv, p)
	if err != nil {
		return RouteProtect, err
	}
	if src.passThrough {
		return RoutePlain, nil // Main execs it
	}
	r := &run{proc: p, inv: inv, real: real, src: src, stateDir: t.StateDir, cwd: t.Cwd, uid: t.UID, pol: t.Policy, env: classify.Environ(p.Environ)}
	if r.pol == nil {
		if err := r.load(); err != nil {
			return RouteProtect, err
		}
	}
	return r.decide(), nil
}
