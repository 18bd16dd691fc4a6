package shell

import (
	"os"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// A step is decided by one rule wherever it is decided: the front end's
// server answering a front end ([Ask], for package front) and undosh
// itself (run.main)
// both call [decideStep], and each maps the route it returns to its own
// action. A mismatch between the two would silently skip protection (the
// server execs what undosh would protect) or protect a step twice.
// What one side cannot do (the server reads no caller's stdin, and
// takes no checkpoint that walks) it decides before or after the rule,
// and hands the step to undosh, which then decides it by the same rule.

// step is what both deciders know of a step when they decide how it runs.
type step struct {
	inv invocation
	// src is what the step runs: its text, why it is unseen, whether it
	// passes through, and the script file read (for `bash -n`).
	src source
	// cwd is the working directory as the caller's process sees it
	// ("" when unknown); the decision uses [shellDir] of it.
	cwd string
	// env is the environment the shell starts with, and envMap the same
	// as a map ([environ]).
	env    []string
	envMap map[string]string
	pol    *policy.Policy
	// stateDir is undosh's state directory ("" when it has none).
	stateDir string
	// real is the real shell, which checks a syntax error (bash -n).
	real string
	// uid is the caller's.
	uid int
	// cache, when set, keeps the parse of large sources.
	cache *parser.Cache
}

// stepDecision is how a step runs, and why.
type stepDecision struct {
	res   classify.Result
	route Route
	// cwd is the working directory the step was judged in.
	cwd string
}

// decideStep decides how step s runs. A syntax error the real shell
// finds too (bash -n) stops it there, so that only what comes before the
// error is judged; one the real shell does not find is unknown code. A
// read-only step that runs sudo (or doas, su, runuser) as another user
// than root gets [RouteSudo]: the read-only limit would stop its sudo.
func decideStep(s step) stepDecision {
	cwd := shellDir(s.cwd, s.envMap)
	if s.src.passThrough {
		return stepDecision{route: RoutePlain, cwd: cwd}
	}
	env := s.envMap
	o := classify.Options{Policy: s.pol, Cwd: cwd, Env: env, POSIX: s.inv.POSIX, Unseen: s.src.unseen, StateDir: s.stateDir,
		Cache: s.cache, EnvComplete: classify.StartsWith(env, s.inv.Login, s.inv.Interactive)}
	res := classify.Decide(s.src.text, o)
	if res.Decision.SyntaxErr != "" && s.src.unseen == "" && bashRejects(s.real, s.inv, s.src, s.env, cwd) {
		o.BashRejects = true
		res = classify.Decide(s.src.text, o)
	}
	rt := routeOf(res.Decision, enforcingIn(func(k string) string { return env[k] }, s.pol))
	if rt == RouteLimited && limitStopsSudo(runsAsRoot(res.Facts), s.uid) {
		rt = RouteSudo
	}
	return stepDecision{res: res, route: rt, cwd: cwd}
}

// limitStopsSudo reports whether a hard limit that sets no_new_privs
// (Landlock) stops a step that runs sudo, doas, su or runuser (sudoers),
// run by uid: sudo refuses no_new_privs only to a caller that is not
// root already.
func limitStopsSudo(sudoers bool, uid int) bool {
	return sudoers && uid != 0
}

// shellDir is the working directory dir as the shell takes it: $PWD
// when it is absolute and names dir itself (a path through a symbolic
// link, as cd left it), else dir. bash starts so, and so does
// os.Getwd, which undosh's own cwd comes from; the front end sends the
// directory getcwd gives.
func shellDir(dir string, env map[string]string) string {
	pwd := env["PWD"]
	if dir == "" || pwd == dir || len(pwd) == 0 || pwd[0] != '/' {
		return dir
	}
	d, err := os.Stat(dir)
	if err != nil {
		return dir
	}
	if p, err := os.Stat(pwd); err == nil && os.SameFile(d, p) {
		return pwd
	}
	return dir
}
