package front

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/corpus"
	"github.com/undosh/undosh/policy"
	"github.com/undosh/undosh/shell"
)

func loadCommands(t *testing.T) []corpus.Line {
	t.Helper()
	lines, err := corpus.Read("../testdata/classify")
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// The outcome of a step, as either decider says it: "exec" (the real
// shell, as it is), "limit" (the real shell under the read-only limit)
// or "protect" (undosh protects it: the server hands it to undosh).
func serverOutcome(a answer) string {
	switch a.verdict {
	case 'E':
		return "exec"
	case 'L', 'N':
		return "limit"
	}
	return "protect"
}

func undoshOutcome(rt shell.Route) string {
	switch rt {
	case shell.RoutePlain:
		return "exec"
	case shell.RouteLimited:
		return "limit"
	}
	return "protect"
}

// decideConfig is one setting both deciders are run in.
type decideConfig struct {
	name    string
	argv    func(cmd, script string) []string // the shell's command line
	enforce string                            // $UNDOSH_ENFORCE
	policy  string                            // $UNDOSH_POLICY
	uid     uint32
	// workspace: the step runs in a workspace (a directory with .git)
	// rather than in $HOME.
	workspace bool
}

// TestSameDecision runs every command of the corpus through both deciders,
// the server's answer to a front end and undosh's own run.main, and
// checks that they agree: the server execs the real shell exactly
// when undosh would, puts it under the read-only limit exactly when undosh
// would, and hands everything else to undosh. The working directory is
// $HOME, which no workspace holds: a read-only step then has no
// checkpoint to take, and the server never hands one over because
// its checkpoint would walk (the one thing it legitimately leaves to
// undosh after the shared rule).
func TestSameDecision(t *testing.T) {
	t.Parallel()
	cmds := loadCommands(t)
	if len(cmds) < 1000 {
		t.Fatalf("the corpus has %d commands, want at least 1000", len(cmds))
	}
	bash, err := shell.RealShell("bash", os.Getenv, shell.ConfigFile, nil)
	if err != nil {
		t.Skipf("no real bash: %v", err)
	}
	sh, err := shell.RealShell("sh", os.Getenv, shell.ConfigFile, nil)
	if err != nil {
		t.Skipf("no real sh: %v", err)
	}
	// A policy under which more steps are read-only, and with them
	// syntax errors, unseen code and writes: where the two deciders'
	// roots or syntax checks differ, the route does.
	// It is the default, without its examples (which it fails).
	src, _, _ := strings.Cut(string(policy.DefaultSource()), "\nexamples:")
	for _, cl := range []string{"unknown_program: git", "unknown_code: fork", "outside_write: fork"} {
		name, _, _ := strings.Cut(cl, ":")
		if !strings.Contains(src, "\n  "+cl) {
			t.Fatalf("the default policy has no %q", cl)
		}
		src = strings.Replace(src, "\n  "+cl, "\n  "+name+": none", 1)
	}
	lenient := filepath.Join(t.TempDir(), "lenient.yaml")
	if err := os.WriteFile(lenient, []byte("extends: none\n"+src), 0o600); err != nil {
		t.Fatal(err)
	}
	bashC := func(cmd, _ string) []string { return []string{"bash", "-c", cmd} }
	var configs []decideConfig
	for _, pol := range []string{"-", lenient} {
		for _, enf := range []string{"0", "1"} {
			for _, uid := range []uint32{0, 1000} {
				configs = append(configs, decideConfig{name: fmt.Sprintf("bash-c/policy=%s/enforce=%s/uid=%d", filepath.Base(pol), enf, uid),
					argv: bashC, enforce: enf, policy: pol, uid: uid})
			}
		}
	}
	configs = append(configs,
		decideConfig{name: "bash-script", argv: func(_, script string) []string { return []string{"bash", script} }, enforce: "1", policy: lenient, uid: 1000},
		decideConfig{name: "sh-c", argv: func(cmd, _ string) []string { return []string{"/bin/sh", "-c", cmd} }, enforce: "1", policy: lenient, uid: 1000},
		decideConfig{name: "workspace/policy=-", argv: bashC, enforce: "1", policy: "-", uid: 0, workspace: true},
		decideConfig{name: "workspace/policy=lenient", argv: bashC, enforce: "1", policy: lenient, uid: 1000, workspace: true},
	)
	for _, cf := range configs {
		t.Run(cf.name, func(t *testing.T) {
			t.Parallel()
			home, stateDir, scripts := t.TempDir(), t.TempDir(), t.TempDir()
			cwd := home
			if cf.workspace {
				cwd = filepath.Join(home, "proj")
				if err := os.MkdirAll(filepath.Join(cwd, ".git"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "UNDOSH_STATE_DIR=" + stateDir, "UNDOSH_POLICY=" + cf.policy,
				"UNDOSH_ENFORCE=" + cf.enforce, "UNDOSH_REAL_BASH=" + bash, "UNDOSH_REAL_SH=" + sh}
			envMap := classify.Environ(env)
			getenv := func(k string) string { return envMap[k] }
			c := newServer(stateDir, "/undosh", slog.New(slog.DiscardHandler))
			defer c.watch.Close()
			peer := &unix.Ucred{Pid: int32(os.Getpid()), Uid: cf.uid}
			if cf.workspace {
				// From here on the server's watcher tells that nothing
				// changed.
				watchedStore(t, c, getenv, stateDir, home, cwd)
			}
			seen := map[string]int{}
			for i, cc := range cmds {
				script := filepath.Join(scripts, fmt.Sprintf("step%d", i))
				if err := os.WriteFile(script, []byte(cc.Command), 0o600); err != nil {
					t.Fatal(err)
				}
				argv := cf.argv(cc.Command, script)
				a := c.answer(request{argv: argv, env: env, cwd: cwd}, peer)
				// The server journals the read-only steps it passes.
				for len(c.records) > 0 {
					<-c.records
				}
				got := serverOutcome(a)
				want := undoshDecides(t, argv, env, getenv, cwd, stateDir, int(cf.uid))
				seen[want]++
				if got == "protect" && want != "protect" && cf.workspace {
					// The server takes no checkpoint that walks the
					// workspace: undosh takes it.
					pol, _ := c.policy(getenv, stateDir)
					p := shell.Pass{Policy: pol, StateDir: stateDir, Home: home, Cwd: cwd, Command: cc.Command}
					_, _, err := p.TakeCheckpoint(c.watch, os.Getpid())
					if errors.Is(err, checkpoint.ErrWouldWalk) {
						seen["walk"]++
						continue
					}
				}
				if got != want {
					t.Errorf("%s: %q: the server answers %c (%s), undosh would %s it", cc.At(), cc.Command, a.verdict, got, want)
				}
			}
			t.Logf("%d commands: %v", len(cmds), seen)
		})
	}
}

// loaded keeps the policies undoshDecides loaded, by file.
var loaded sync.Map

// undoshDecides is how undosh, started as argv in cwd with env, would run
// the step: Main's reading of the invocation, then its decision
// (shell.Decide).
func undoshDecides(t *testing.T, argv, env []string, getenv func(string) string, cwd, stateDir string, uid int) string {
	t.Helper()
	// undosh by its own name, as the requests say (no execfn)
	p := &shell.Process{Argv: argv, Environ: env, Getenv: getenv, Closed: func(int) bool { return false }}
	// Loading a policy file takes longer than deciding: once per file.
	name := classify.PolicyPath("", getenv)
	var pol *policy.Policy
	if p, ok := loaded.Load(name); ok {
		pol = p.(*policy.Policy)
	} else {
		var err error
		if pol, err = classify.LoadPolicy(name, stateDir+"/cache"); err != nil {
			t.Fatal(err)
		}
		loaded.Store(name, pol)
	}
	rt, err := shell.Decide(p, shell.Trial{Cwd: cwd, StateDir: stateDir, UID: uid, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	return undoshOutcome(rt)
}

// BenchmarkAnswer times the server's answer to a read-only step, and
// to one with a syntax error that bash finds too (bash -n runs).
func BenchmarkAnswer(b *testing.B) {
	bash, err := shell.RealShell("bash", os.Getenv, shell.ConfigFile, nil)
	if err != nil {
		b.Skip(err)
	}
	home, stateDir := b.TempDir(), b.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "UNDOSH_STATE_DIR=" + stateDir, "UNDOSH_POLICY=-",
		"UNDOSH_ENFORCE=0", "UNDOSH_REAL_BASH=" + bash}
	c := newServer(stateDir, "/undosh", slog.New(slog.DiscardHandler))
	defer c.watch.Close()
	peer := &unix.Ucred{Pid: int32(os.Getpid()), Uid: 1000}
	for _, bc := range []struct{ name, cmd, cwd string }{
		{"read-only", "ls -la | head", home},
		{"syntax-error", "echo ok; if [ x ]; then", home},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := request{argv: []string{"bash", "-c", bc.cmd}, env: env, cwd: bc.cwd}
			for b.Loop() {
				if a := c.answer(req, peer); a.verdict == 'U' {
					b.Fatalf("%q: U", bc.cmd)
				}
				for len(c.records) > 0 {
					<-c.records
				}
			}
		})
	}
}
