// Command friction measures what kernel enforcement of a step's class
// costs an agent (issue #8): it runs a recorded coding-agent session
// (session.txt, embedded: three projects, Go, Node and Python, made from
// nothing) through undosh twice, side by side, once with UNDOSH_ENFORCE=0
// and once with UNDOSH_ENFORCE=1, and reports the steps whose exit status
// or output differ between the two: the steps enforcement broke.
//
//	go build -o bin/ ./cmd/undosh && go run ./bench/friction
//
// Flags:
//
//	-undosh PATH      the undosh to run (default bin/undosh)
//	-session FILE     the session to run (default: the embedded session.txt)
//	-enforce A,B      the UNDOSH_ENFORCE of each run (default 0,1; 0,0
//	                  checks that the session is deterministic)
//	-base DIR         where the runs' projects and homes go: where a file
//	                  written is a workspace write for undosh, not in a
//	                  scratch path such as /tmp, not in a git work tree
//	                  (default: the home directory, else /home; not /root,
//	                  which the policy counts as the system's)
//	-timeout D        the most one step may take (default 2m)
//	-keep             keep the runs' directories, and every step's output
//	-raw FILE         write every step's result as CSV
//	-undoctl PATH     the undoctl whose `explain --json` tells each step's
//	                  class (default: undoctl beside undosh; none: classes
//	                  shown as ?)
//	-cold             start each run with an empty Go build cache, as on a
//	                  machine where Go never ran (by default each run starts
//	                  with the standard library compiled, once, beforehand)
//
// Each run gets a fresh directory: a HOME with a minimal ~/.gitconfig and
// ~/.npmrc, the projects' root (@ROOT@ in the session), UNDOSH_STATE_DIR,
// and a directory under /tmp (@TMP@, and TMPDIR). Every step is its own
// process, `undosh -c STEP`, started in the directory the last step that
// began with `cd DIR` went to, with stdin from /dev/null and the caller's
// environment, less what would make the runs differ (GOPATH, GOFLAGS,
// git's and npm's settings, UNDOSH_*), plus UNDOSH_REAL_BASH=/bin/bash,
// LC_ALL=C.UTF-8, TZ=UTC, GOTOOLCHAIN=local and fixed commit dates. The
// two runs take each step in turn, in an order that alternates from step
// to step, so that drift in the machine's load falls on both alike.
//
// Output is compared after the runs' own paths are replaced by @ROOT@,
// @TMP@ and @HOME@, durations (0.003s, 404ms, duration_ms 1.2) by <dur>,
// hexadecimal numbers (0xc000123456, as in a panic) by 0x…, and the random
// part of temporary names by XXXXXXXX; undosh's own lines (stderr lines
// that start with "undosh:") are set apart as its notes. A step differs
// when its status or its output differ.
//
// It prints, per run, the steps that failed and those whose status is as
// the session wants (the session marks the steps written to fail); then
// each differing step with its class, both statuses, undosh's notes and
// the first line of output that differs; the steps that are not as the
// session wants in both runs (a problem of the session or of undosh, not
// of enforcement); and the median wall time of a step in each run with
// their ratio, over all steps and by class over the steps that agree. It
// exits 0 whatever differs, 1 when the harness itself fails, 2 on bad
// flags.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/undosh/undosh/bench/internal/stats"
)

//go:embed session.txt
var embeddedSession string

// The minimal configuration of each run's fresh HOME. The .npmrc keeps npm
// from asking the registry about itself and from printing what changes by
// the day (funding, audit, a newer npm).
const (
	gitconfig = "[user]\n\tname = Agent\n\temail = agent@example.com\n[init]\n\tdefaultBranch = main\n"
	npmrc     = "update-notifier=false\nfund=false\naudit=false\n"
	// commitDate makes commit ids the same in every run.
	commitDate = "2026-01-01T12:00:00Z"
)

type options struct {
	undosh  string
	session string
	enforce []string
	base    string
	timeout time.Duration
	keep    bool
	raw     string
	cold    bool
	undoctl string
}

// step is one command line of the session.
type step struct {
	n     int
	line  int // of its @@ line in the session file
	desc  string
	text  string // with @ROOT@ and @TMP@ unexpanded
	fails bool   // written to fail
	// fed: the step's lines are commands fed one at a time to one undosh
	// reading them on a pipe, as session-keeping harnesses drive bash
	// (`@@= TEXT`).
	fed bool
}

// result is what one step did in one run.
type result struct {
	class  string // as undoctl explain tells it just before the step runs; "?" when unknown
	status int    // exit status; 128+n for signal n; -1 when it could not start
	wall   time.Duration
	stdout string // normalised
	stderr string // normalised, without undosh's lines
	notes  []string
	harm   string // what the harness saw go wrong: a timeout, a missing cwd
}

// sessionRun is one run of the session, in directories of its own.
type sessionRun struct {
	name    string
	enforce string
	dir     string // everything of this run but tmp
	root    string // @ROOT@
	home    string
	state   string
	tmp     string // @TMP@
	logs    string
	cwd     string
	env     []string
	results []result
}

func main() {
	var o options
	var enforce string
	flag.StringVar(&o.undosh, "undosh", "bin/undosh", "the undosh to run")
	flag.StringVar(&o.session, "session", "", "the session file (default: the embedded session.txt)")
	flag.StringVar(&enforce, "enforce", "0,1", "UNDOSH_ENFORCE of the two runs")
	flag.StringVar(&o.base, "base", "", "where the runs' directories go (default: the home directory)")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "the most one step may take")
	flag.BoolVar(&o.keep, "keep", false, "keep the runs' directories and every step's output")
	flag.StringVar(&o.raw, "raw", "", "write every step's result to this CSV file")
	flag.BoolVar(&o.cold, "cold", false, "start each run with an empty Go build cache")
	flag.StringVar(&o.undoctl, "undoctl", "", "the undoctl that tells each step's class (default: undoctl beside undosh)")
	flag.Parse()
	o.enforce = strings.Split(enforce, ",")
	if len(o.enforce) != 2 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: friction [-undosh PATH] [-undoctl PATH] [-session FILE] [-enforce A,B] [-base DIR] [-timeout D] [-keep] [-raw FILE] [-cold]")
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "friction: error: %v\n", err)
		os.Exit(1)
	}
}

func run(o options, out io.Writer) (err error) {
	text, name := embeddedSession, "bench/friction/session.txt (embedded)"
	if o.session != "" {
		b, err := os.ReadFile(o.session)
		if err != nil {
			return err
		}
		text, name = string(b), o.session
	}
	steps, err := parseSession(text)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	undosh, err := filepath.Abs(o.undosh)
	if err != nil {
		return err
	}
	if !isExecutable(undosh) {
		return fmt.Errorf("no undosh at %s: build it with go build -o bin/ ./cmd/undosh, or pass -undosh", undosh)
	}
	undoctl := o.undoctl
	if undoctl == "" {
		if p := filepath.Join(filepath.Dir(undosh), "undoctl"); isExecutable(p) {
			undoctl = p
		}
	}
	top, err := makeTop(o.base, undoctl)
	if err != nil {
		return err
	}
	tmpTop, err := os.MkdirTemp("/tmp", "undosh-friction-")
	if err != nil {
		return errors.Join(err, removeAll(top))
	}
	defer func() {
		if o.keep {
			fmt.Fprintf(out, "\nkept: %s and %s (each step's raw output in RUN/log)\n", top, tmpTop)
			return
		}
		err = errors.Join(err, removeAll(top), removeAll(tmpTop))
	}()
	// A copy, so that a rebuild of bin/undosh in the middle of the runs
	// cannot make them differ.
	pinned := filepath.Join(top, "bin", "undosh")
	if err := copyFile(undosh, pinned, 0o755); err != nil {
		return err
	}
	var gocache string
	warm := "each run starts with an empty Go build cache (-cold)"
	if !o.cold {
		t0 := time.Now()
		gocache = filepath.Join(top, "warm")
		if err := warmGoCache(gocache); err != nil {
			return fmt.Errorf("warm the Go build cache: %w", err)
		}
		warm = fmt.Sprintf("each run starts with the standard library compiled (beforehand, %.1f s)", time.Since(t0).Seconds())
	}
	runs := make([]*sessionRun, 2)
	for i, e := range o.enforce {
		runs[i] = &sessionRun{name: runName(o.enforce, i), enforce: e}
		if err := runs[i].setup(top, tmpTop, gocache); err != nil {
			return err
		}
	}
	load0 := loadavg()
	start := time.Now()
	for i, s := range steps {
		order := []*sessionRun{runs[0], runs[1]}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, r := range order {
			res, err := r.do(pinned, undoctl, s, o.timeout)
			if err != nil {
				return fmt.Errorf("step %d (line %d): %w", s.n, s.line, err)
			}
			r.results = append(r.results, res)
		}
	}
	elapsed := time.Since(start)
	report(out, reportInput{name: name, undosh: undosh, steps: steps, runs: runs,
		elapsed: elapsed, load: load0 + " … " + loadavg(), warm: warm})
	if o.raw != "" {
		return writeRaw(o.raw, steps, runs)
	}
	return nil
}

// makeTop makes the directory that holds both runs in base or, when base
// is "", in the first of the home directory and /home where it can.
func makeTop(base, undoctl string) (string, error) {
	cands := []string{base}
	if base == "" {
		cands = nil
		if h, err := os.UserHomeDir(); err == nil {
			cands = append(cands, h)
		}
		cands = append(cands, "/home")
	}
	var errs []error
	for _, c := range cands {
		top, err := tryTop(c, undoctl)
		if err == nil {
			return top, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no place for the runs' projects (pass -base): %w", errors.Join(errs...))
}

// tryTop makes the directory of the runs in base if the projects there
// would be what an agent's projects are to undosh: a file written in one
// is a workspace write (class git). Under a path the policy calls the
// system's (root's home directory is one) every write would run in a copy
// of the machine instead.
func tryTop(base, undoctl string) (string, error) {
	if err := checkBase(base); err != nil {
		return "", err
	}
	top, err := os.MkdirTemp(base, ".undosh-friction-")
	if err != nil {
		return "", err
	}
	if undoctl == "" {
		return top, nil
	}
	const probe = "printf x > probe"
	cmd := exec.Command(undoctl, "explain", "--json", probe)
	cmd.Dir = top
	out, err := cmd.Output()
	var d struct {
		Class   string
		Reasons []struct{ Rule, Class string }
	}
	if err == nil && json.Unmarshal(out, &d) == nil && d.Class == "git" {
		return top, nil
	}
	os.Remove(top)
	if err != nil {
		return "", fmt.Errorf("%s explain: %w", undoctl, err)
	}
	rule := "?"
	for _, r := range d.Reasons {
		if r.Class == d.Class {
			rule = r.Rule
		}
	}
	return "", fmt.Errorf("in %s, `%s` is class %s for undosh (rule %s), not a workspace write", base, probe, d.Class, rule)
}

// checkBase refuses a base directory where the runs would not measure what
// they should: in a scratch path every write is allowed, and inside a git
// work tree the projects' workspace before `git init` would be that tree.
func checkBase(base string) error {
	abs, err := filepath.Abs(base)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for _, s := range []string{"/tmp", "/var/tmp"} {
		if abs == s || strings.HasPrefix(abs, s+"/") {
			return fmt.Errorf("base %s is in the scratch path %s, which every step may write; pass -base", abs, s)
		}
	}
	cmd := exec.Command("git", "rev-parse", "--show-toplevel")
	cmd.Dir = abs
	if top, err := cmd.Output(); err == nil {
		return fmt.Errorf("base %s is inside the git work tree %s; pass -base", abs, strings.TrimSpace(string(top)))
	}
	return nil
}

func runName(enforce []string, i int) string {
	name := map[string]string{"0": "off", "1": "on"}[enforce[i]]
	if name == "" {
		name = "enforce=" + enforce[i]
	}
	if enforce[0] == enforce[1] {
		name += strconv.Itoa(i + 1)
	}
	return name
}

// setup makes the run's directories and environment. Its HOME starts with
// the Go build cache warmed in gocache, unless that is "".
func (r *sessionRun) setup(top, tmpTop, gocache string) error {
	r.dir = filepath.Join(top, r.name)
	r.root = filepath.Join(r.dir, "work")
	r.home = filepath.Join(r.dir, "home")
	r.state = filepath.Join(r.dir, "state")
	r.logs = filepath.Join(r.dir, "log")
	r.tmp = filepath.Join(tmpTop, r.name)
	for _, d := range []string{r.root, r.home, r.state, r.logs, r.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(r.home, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.home, ".npmrc"), []byte(npmrc), 0o644); err != nil {
		return err
	}
	if gocache != "" {
		if err := linkTree(filepath.Join(gocache, "go-build"), filepath.Join(r.home, ".cache", "go-build")); err != nil {
			return fmt.Errorf("copy the warm Go build cache: %w", err)
		}
	}
	r.cwd = r.root
	r.env = stepEnv(os.Environ(), map[string]string{
		"HOME":                r.home,
		"TMPDIR":              r.tmp,
		"UNDOSH_STATE_DIR":    r.state,
		"UNDOSH_REAL_BASH":    "/bin/bash",
		"UNDOSH_ENFORCE":      r.enforce,
		"LC_ALL":              "C.UTF-8",
		"TZ":                  "UTC",
		"GOTOOLCHAIN":         "local",
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_DATE":     commitDate,
		"GIT_COMMITTER_DATE":  commitDate,
		"TERM":                "dumb",
	})
	return nil
}

// warmGoCache compiles into dir/go-build what the session's Go steps take
// from the standard library (fmt, os, strings, testing, and vet's facts
// about them), as a machine where Go has been used before has it: on two
// cores that is 15-30 s of each run's first build, test and vet.
func warmGoCache(dir string) error {
	mod := filepath.Join(dir, "mod")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"main.go":      "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\nfunc main() { fmt.Fprintln(os.Stdout, strings.ToUpper(os.Args[0])) }\n",
		"main_test.go": "package main\n\nimport \"testing\"\n\nfunc TestWarm(t *testing.T) {}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	env := stepEnv(os.Environ(), map[string]string{"HOME": dir, "GOCACHE": filepath.Join(dir, "go-build"),
		"GOTOOLCHAIN": "local", "LC_ALL": "C.UTF-8"})
	for _, args := range [][]string{{"mod", "init", "warm"}, {"build", "-o", os.DevNull, "."}, {"vet", "."}, {"test", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = mod, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// linkTree makes dst a copy of src, by hard links where it can: Go writes
// a new cache entry by renaming, never into an old one.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if os.Link(p, to) == nil {
			return nil
		}
		return copyFile(p, to, 0o644)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, perm)
}

// stepEnv is the caller's environment less what would make the runs differ
// or reach outside their directories, with set on top.
func stepEnv(environ []string, set map[string]string) []string {
	drop := func(k string) bool {
		switch k {
		case "PWD", "OLDPWD", "GOPATH", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOENV",
			"VIRTUAL_ENV", "PYTHONPATH", "PYENV_VERSION", "NODE_OPTIONS", "NODE_PATH",
			"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "BASH_ENV", "ENV":
			return true
		}
		if _, ok := set[k]; ok {
			return true
		}
		u := strings.ToUpper(k)
		// GIT_SSL_CAINFO and the like are the machine's, not a repository's.
		return strings.HasPrefix(u, "UNDOSH_") || strings.HasPrefix(u, "NPM_CONFIG_") ||
			(strings.HasPrefix(u, "GIT_") && !strings.HasPrefix(u, "GIT_SSL_"))
	}
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !drop(k) {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+set[k])
	}
	return env
}

// expand puts the run's directories into a step's text.
func (r *sessionRun) expand(text string) string {
	return strings.NewReplacer("@ROOT@", r.root, "@TMP@", r.tmp).Replace(text)
}

// do runs one step. Its error is the harness's own (the output could not
// be saved); whatever the step does is in the result.
func (r *sessionRun) do(undosh, undoctl string, s step, timeout time.Duration) (result, error) {
	text := r.expand(s.text)
	class := r.classify(undoctl, text)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, undosh, "-c", text)
	if s.fed {
		cmd = exec.CommandContext(ctx, undosh)
		cmd.Args = []string{"bash"}
	}
	cmd.Dir = r.cwd
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var feed, marks io.WriteCloser
	if s.fed {
		// Each command, then a marker the feeder waits for before the
		// next: undosh sees a pipe that goes quiet between commands.
		pr, pw := io.Pipe()
		marks = pw
		cmd.Stdout = io.MultiWriter(&stdout, pw)
		in, err := cmd.StdinPipe()
		if err != nil {
			return result{status: -1, harm: err.Error()}, nil
		}
		feed = in
		go feedLines(in, pr, strings.Split(text, "\n"))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	res := result{class: class}
	t0 := time.Now()
	err := cmd.Run()
	if feed != nil {
		feed.Close()
		marks.Close()
	}
	res.wall = time.Since(t0)
	switch {
	case cmd.ProcessState != nil:
		res.status = exitStatus(cmd.ProcessState)
	default:
		res.status = -1
		res.harm = "could not start: " + err.Error()
	}
	if ctx.Err() != nil {
		res.harm = fmt.Sprintf("killed after the timeout of %s", timeout)
	}
	base := filepath.Join(r.logs, fmt.Sprintf("%03d", s.n))
	if err := errors.Join(
		os.WriteFile(base+".cmd", []byte(fmt.Sprintf("# cwd %s\n%s\n", r.cwd, text)), 0o644),
		os.WriteFile(base+".out", stdout.Bytes(), 0o644),
		os.WriteFile(base+".err", stderr.Bytes(), 0o644),
	); err != nil {
		return res, err
	}
	res.stdout = r.normalize(stdout.String())
	var rest []string
	for _, l := range strings.SplitAfter(stderr.String(), "\n") {
		if strings.HasPrefix(l, "undosh:") {
			res.notes = append(res.notes, strings.TrimRight(l, "\n"))
		} else if l != "" {
			rest = append(rest, l)
		}
	}
	res.stderr = r.normalize(strings.Join(rest, ""))
	if dir, ok := cdTarget(text, r.cwd, r.home); ok {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			r.cwd = dir
		}
	}
	return res, nil
}

// fedMark ends the output of each command fed to a session.
const fedMark = "@@fed-done@@"

// feedLines writes each line to in, and waits until out (what the shell
// prints) shows the marker that follows it; then it closes in.
func feedLines(in io.WriteCloser, out io.Reader, lines []string) {
	defer in.Close()
	seen := make(chan struct{}, len(lines))
	go func() {
		buf := make([]byte, 4096)
		var tail []byte
		for {
			n, err := out.Read(buf)
			tail = append(tail, buf[:n]...)
			for {
				i := bytes.Index(tail, []byte(fedMark+"\n"))
				if i < 0 {
					break
				}
				tail = tail[i+len(fedMark)+1:]
				seen <- struct{}{}
			}
			if err != nil {
				return
			}
		}
	}()
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		fmt.Fprintf(in, "%s\necho %s\n", l, fedMark)
		select {
		case <-seen:
		case <-time.After(time.Minute):
			return
		}
	}
}

// classify asks undoctl for the step's class, as undosh will decide it:
// in the step's directory, with its environment.
func (r *sessionRun) classify(undoctl, text string) string {
	if undoctl == "" {
		return "?"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, undoctl, "explain", "--json", text)
	cmd.Dir, cmd.Env = r.cwd, r.env
	out, err := cmd.Output()
	var d struct{ Class string }
	if err != nil || json.Unmarshal(out, &d) != nil || d.Class == "" {
		return "?"
	}
	return d.Class
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// cdTarget returns the directory a step that begins with `cd DIR` goes
// to: an agent's harness keeps it for the next step.
func cdTarget(text, cwd, home string) (string, bool) {
	first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	f := strings.Fields(first)
	if len(f) < 2 || f[0] != "cd" {
		return "", false
	}
	dir := strings.TrimRight(f[1], ";")
	if len(f) > 2 && f[2] != "&&" && f[2] != ";" {
		return "", false
	}
	switch {
	case dir == "~":
		dir = home
	case strings.HasPrefix(dir, "~/"):
		dir = filepath.Join(home, dir[2:])
	case !filepath.IsAbs(dir):
		dir = filepath.Join(cwd, dir)
	}
	return filepath.Clean(dir), true
}

var (
	// Durations as go test, npm, node --test and unittest print them.
	durationRE = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s)\b|duration_ms:? \d+(\.\d+)?`)
	// The random part of temporary names: mktemp's, and pip's.
	tempNameRE = regexp.MustCompile(`\btmp\.[A-Za-z0-9]{10}\b|\b(pip-[a-z-]+-)[a-z0-9_]{8}\b`)
	// Addresses and lengths, as in a Go program's panic.
	addressRE = regexp.MustCompile(`\b0x[0-9a-f]+\b`)
)

// normalize makes a step's output comparable across runs.
func (r *sessionRun) normalize(s string) string {
	s = strings.NewReplacer(r.root, "@ROOT@", r.tmp, "@TMP@", r.home, "@HOME@",
		r.state, "@STATE@", r.dir, "@RUN@").Replace(s)
	s = durationRE.ReplaceAllString(s, "<dur>")
	s = addressRE.ReplaceAllString(s, "0x…")
	return tempNameRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "tmp.") {
			return "tmp.XXXXXXXXXX"
		}
		return m[:strings.LastIndexByte(m, '-')+1] + "XXXXXXXX"
	})
}

// parseSession splits a session into its steps (format: the header of
// session.txt).
func parseSession(text string) ([]step, error) {
	var steps []step
	var body []string
	flush := func() {
		if len(steps) == 0 {
			return
		}
		for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
			body = body[:len(body)-1]
		}
		steps[len(steps)-1].text = strings.Join(body, "\n")
		body = nil
	}
	for i, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "@@") {
			if len(steps) > 0 {
				body = append(body, l)
			}
			continue
		}
		flush()
		s := step{n: len(steps) + 1, line: i + 1}
		rest := l[2:]
		if strings.HasPrefix(rest, "=") {
			s.fed, rest = true, rest[1:]
		}
		if strings.HasPrefix(rest, "!") {
			s.fails, rest = true, rest[1:]
		}
		if !strings.HasPrefix(rest, " ") || strings.TrimSpace(rest) == "" {
			return nil, fmt.Errorf("line %d: a step starts with `@@ TEXT`, `@@! TEXT` or `@@= TEXT`", i+1)
		}
		s.desc = strings.TrimSpace(rest)
		steps = append(steps, s)
	}
	flush()
	for _, s := range steps {
		if strings.TrimSpace(s.text) == "" {
			return nil, fmt.Errorf("line %d: step %d has no command", s.line, s.n)
		}
	}
	if len(steps) == 0 {
		return nil, errors.New("no steps")
	}
	return steps, nil
}

type reportInput struct {
	name, undosh string
	steps        []step
	runs         []*sessionRun
	elapsed      time.Duration
	load         string
	warm         string
}

func report(w io.Writer, in reportInput) {
	a, b := in.runs[0], in.runs[1]
	fmt.Fprintf(w, "friction: %d steps of %s\n", len(in.steps), in.name)
	fmt.Fprintf(w, "undosh: %s (a copy made at the start); runs: %s (UNDOSH_ENFORCE=%s) and %s (UNDOSH_ENFORCE=%s), side by side\n",
		in.undosh, a.name, a.enforce, b.name, b.enforce)
	fmt.Fprintf(w, "%s; elapsed %.1f s, load %s\n\n", in.warm, in.elapsed.Seconds(), in.load)

	fmt.Fprintf(w, "%-10s %6s %7s %9s %9s %10s %10s\n", "run", "steps", "failed", "as-wanted", "notes", "total s", "median ms")
	for _, r := range in.runs {
		failed, asWanted, notes := 0, 0, 0
		var total time.Duration
		for i, res := range r.results {
			if res.status != 0 {
				failed++
			}
			if (res.status != 0) == in.steps[i].fails && res.harm == "" {
				asWanted++
			}
			notes += len(res.notes)
			total += res.wall
		}
		fmt.Fprintf(w, "%-10s %6d %7d %9d %9d %10.1f %10.1f\n", r.name, len(r.results), failed, asWanted, notes,
			total.Seconds(), ms(medianF(walls(r, nil))))
	}

	var diff []int
	for i := range in.steps {
		if differs(a.results[i], b.results[i]) {
			diff = append(diff, i)
		}
	}
	fmt.Fprintf(w, "\nsteps that differ between %s and %s: %d of %d\n", a.name, b.name, len(diff), len(in.steps))
	for _, i := range diff {
		s, ra, rb := in.steps[i], a.results[i], b.results[i]
		fmt.Fprintf(w, "\n  step %d (line %d): %s\n", s.n, s.line, s.desc)
		fmt.Fprintf(w, "%s\n", indent(clip(s.text, 6), "    $ ", "      "))
		fmt.Fprintf(w, "    %s: %s   %s: %s\n", a.name, statusText(ra, s), b.name, statusText(rb, s))
		for _, r := range []struct {
			name string
			res  result
		}{{a.name, ra}, {b.name, rb}} {
			for _, n := range r.res.notes {
				fmt.Fprintf(w, "    %s %s\n", r.name+":", n)
			}
		}
		if d := firstDiff(ra.stdout, rb.stdout); d != "" {
			fmt.Fprintf(w, "    stdout differs: %s\n", d)
		}
		if d := firstDiff(ra.stderr, rb.stderr); d != "" {
			fmt.Fprintf(w, "    stderr differs: %s\n", d)
		}
	}

	fmt.Fprintf(w, "\nsteps whose status is not as the session wants, in both runs:")
	n := 0
	for i, s := range in.steps {
		ra, rb := a.results[i], b.results[i]
		if (ra.status != 0) == s.fails || (rb.status != 0) == s.fails {
			continue
		}
		n++
		fmt.Fprintf(w, "\n  step %d (line %d): %s\n", s.n, s.line, s.desc)
		fmt.Fprintf(w, "%s\n", indent(clip(s.text, 3), "    $ ", "      "))
		fmt.Fprintf(w, "    %s: %s   %s: %s\n", a.name, statusText(ra, s), b.name, statusText(rb, s))
		for _, n := range ra.notes {
			fmt.Fprintf(w, "    %s: %s\n", a.name, n)
		}
		if l := firstLine(ra.stderr); l != "" {
			fmt.Fprintf(w, "    %s stderr: %s\n", a.name, l)
		}
	}
	if n == 0 {
		fmt.Fprintf(w, " none\n")
	}

	fmt.Fprintf(w, "\nwall time of a step, ms: median %s %.1f, %s %.1f, %s/%s %.2f, over all %d steps\n",
		a.name, ms(medianF(walls(a, nil))), b.name, ms(medianF(walls(b, nil))), b.name, a.name,
		medianF(walls(b, nil))/medianF(walls(a, nil)), len(in.steps))
	// A step's class decides what undosh does with it, and so what it
	// costs: medians over the mix of classes say little. The steps that
	// differ are left out, since a step that breaks early is quick.
	fmt.Fprintf(w, "by class (%s's), over the steps that agree:\n", a.name)
	fmt.Fprintf(w, "  %-6s %6s %10s %10s %8s %26s\n", "class", "steps", a.name+" ms", b.name+" ms", "ratio", "per-step ratio (p25, p75)")
	for _, class := range []string{"none", "git", "fork", "?", ""} {
		var keep []int
		for i := range in.steps {
			if !differs(a.results[i], b.results[i]) && (class == "" || a.results[i].class == class) {
				keep = append(keep, i)
			}
		}
		if len(keep) == 0 {
			continue
		}
		wa, wb := walls(a, keep), walls(b, keep)
		var ratios []float64
		for j := range keep {
			if wa[j] > 0 {
				ratios = append(ratios, wb[j]/wa[j])
			}
		}
		name := class
		if class == "" {
			name = "all"
		}
		fmt.Fprintf(w, "  %-6s %6d %10.1f %10.1f %8.2f %10.2f (%.2f, %.2f)\n", name, len(keep),
			ms(medianF(wa)), ms(medianF(wb)), medianF(wb)/medianF(wa),
			medianF(ratios), stats.Quantile(ratios, 0.25), stats.Quantile(ratios, 0.75))
	}
}

func differs(a, b result) bool {
	return a.status != b.status || a.stdout != b.stdout || a.stderr != b.stderr || a.harm != b.harm
}

func statusText(r result, s step) string {
	t := r.class + ", exit " + strconv.Itoa(r.status)
	if r.status == -1 {
		t = r.class + ", not run"
	}
	if s.fails {
		t += " (written to fail)"
	}
	if r.harm != "" {
		t += " [" + r.harm + "]"
	}
	return t
}

// firstDiff describes the first line where a and b differ, or "".
func firstDiff(a, b string) string {
	if a == b {
		return ""
	}
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; ; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y || i >= len(la) || i >= len(lb) {
			return fmt.Sprintf("line %d: %q / %q", i+1, clipLine(x), clipLine(y))
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return clipLine(l)
}

func clipLine(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// clip keeps the first n lines of a step.
func clip(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) <= n {
		return s
	}
	return strings.Join(l[:n], "\n") + fmt.Sprintf("\n… (%d more lines)", len(l)-n)
}

func indent(s, first, rest string) string {
	return first + strings.ReplaceAll(s, "\n", "\n"+rest)
}

// walls returns the wall times of a run's steps (those at the indices
// given, or all), in nanoseconds.
func walls(r *sessionRun, idx []int) []float64 {
	if idx == nil {
		for i := range r.results {
			idx = append(idx, i)
		}
	}
	v := make([]float64, len(idx))
	for j, i := range idx {
		v[j] = float64(r.results[i].wall)
	}
	return v
}

func medianF(v []float64) float64 { return stats.Quantile(v, 0.5) }

func ms(ns float64) float64 { return ns / 1e6 }

// loadavg is the 1-minute load average.
func loadavg() string {
	l, _, _ := strings.Cut(stats.Loadavg(), " ")
	return l
}

func writeRaw(path string, steps []step, runs []*sessionRun) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"step", "run", "enforce", "class", "written_to_fail", "status", "wall_ms", "differs", "notes"})
	for i, s := range steps {
		d := differs(runs[0].results[i], runs[1].results[i])
		for _, r := range runs {
			res := r.results[i]
			w.Write([]string{strconv.Itoa(s.n), r.name, r.enforce, res.class, strconv.FormatBool(s.fails),
				strconv.Itoa(res.status), strconv.FormatFloat(ms(float64(res.wall)), 'f', 3, 64),
				strconv.FormatBool(d), strings.Join(res.notes, " | ")})
		}
	}
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}

// removeAll removes a run's tree, making read-only directories (the Go
// module cache's) writable first.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
