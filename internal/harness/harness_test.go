package harness

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/frontend"
	"github.com/undosh/undosh/internal/testuser"
)

var update = flag.Bool("update", false, "rewrite docs/harnesses.md from this run")

func TestMain(m *testing.M) {
	// Started again by Run, inside a run's namespaces: carry the run out.
	if p := os.Getenv(InnerEnv); p != "" {
		os.Exit(Inner(p))
	}
	os.Exit(m.Run())
}

// harnessPrefix returns the npm prefix that holds the harnesses.
func harnessPrefix() string {
	if p := os.Getenv(prefixEnv); p != "" {
		return p
	}
	return defaultPrefix
}

// installed returns the clients installed under prefix at their pinned
// version, and why each other one is not run.
func installed(prefix string) (have []Client, missing []string) {
	for _, c := range Clients {
		if only := os.Getenv("UNDOSH_HARNESS_ONLY"); only != "" && !strings.Contains(","+only+",", ","+c.Name+",") {
			continue
		}
		bin := filepath.Join(prefix, "node_modules", ".bin", c.Bin)
		if _, err := os.Stat(bin); err != nil {
			missing = append(missing, fmt.Sprintf("%s: %s is not installed (%v); .ci/run installs it: npm install --prefix %s %s@%s", c.Name, c.Package, err, prefix, c.Package, c.Version))
			continue
		}
		v, err := packageVersion(filepath.Join(prefix, "node_modules", c.Package, "package.json"))
		if err != nil || v != c.Version {
			missing = append(missing, fmt.Sprintf("%s: %s is %q (%v), the suite pins %s", c.Name, c.Package, v, err, c.Version))
			continue
		}
		have = append(have, c)
	}
	return have, missing
}

// tools is what the suite builds once: undosh, undosh-fast and undoctl,
// and a copy of the real bash.
type tools struct {
	base, bin, realBash string
}

// buildTools builds the binaries into base/bin and copies bash to
// base/realbash/bash.
func buildTools(t *testing.T, base string) tools {
	t.Helper()
	tl := tools{base: base, bin: filepath.Join(base, "bin"), realBash: filepath.Join(base, "realbash", "bash")}
	for _, d := range []string{tl.bin, filepath.Dir(tl.realBash)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range [][2]string{{"undosh", "../../cmd/undosh"}, {"undoctl", "../../cmd/undoctl"}} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(tl.bin, b[0]), b[1]).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", b[1], err, out)
		}
	}
	if err := frontend.Build("../../front/undosh-fast.c", filepath.Join(tl.bin, "undosh-fast")); errors.Is(err, frontend.ErrNoCompiler) {
		t.Skip("no C compiler: undosh-fast, which is installed as bash, cannot be built")
	} else if err != nil {
		t.Fatal(err)
	}
	if err := copyFile("/usr/bin/bash", tl.realBash, 0o755); err != nil {
		t.Fatal(err)
	}
	return tl
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return out.Close()
}

// testUser is the temporary non-root user the suite creates.
const testUser = "undosh-harness"

// makeUser creates the temporary non-root user and removes it when the
// test ends; ok is false (with the reason) when it cannot.
func makeUser(t *testing.T) (User, string) {
	t.Helper()
	u, why := testuser.Make(t, testUser, testuser.Options{Comment: "undosh harness test, removed after the test"})
	return User{Name: u.Name, UID: u.UID, GID: u.GID}, why
}

// TestHarnesses runs the story through every installed harness, as root
// and as a non-root user, with plain bash and with undosh as bash, in
// namespaces with only loopback; it checks what must hold, and reports
// the class tables and the overheads (docs/harnesses.md, with -update).
// UNDOSH_HARNESS_ONLY=NAME,… runs only those harnesses; _ROUNDS and
// _BENCH set the rounds and the bench's calls; _KEEP keeps the runs;
// _IN_HOME puts the project under /home ([Spec].InHome).
func TestHarnesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: each run makes a mount and a network namespace and mounts an overlay on /usr/bin")
	}
	prefix := harnessPrefix()
	clients, missing := installed(prefix)
	for _, m := range missing {
		t.Logf("skipped: %s", m)
	}
	if len(clients) == 0 {
		t.Skipf("no harness installed under %s ($%s): .ci/run installs them", prefix, prefixEnv)
	}
	base, err := os.MkdirTemp("", "undosh-harness-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	if os.Getenv("UNDOSH_HARNESS_KEEP") == "" {
		t.Cleanup(func() { os.RemoveAll(base) })
	} else {
		t.Logf("runs kept in %s", base)
	}
	t.Cleanup(removeEtc)
	tl := buildTools(t, base)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	users := []User{{}}
	if nr, why := makeUser(t); why == "" {
		users = append(users, nr)
	} else {
		t.Logf("non-root runs skipped: %s", why)
		missing = append(missing, "non-root runs: "+why)
	}
	rounds, benchN := 1, 10
	if n, err := strconv.Atoi(os.Getenv("UNDOSH_HARNESS_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	if n, err := strconv.Atoi(os.Getenv("UNDOSH_HARNESS_BENCH")); err == nil && n >= 0 {
		benchN = n
	}
	steps := Story(filepath.Join(tl.bin, "undoctl"))
	rep := &Report{Steps: steps, Bare: bareClasses(t, tl, steps), Skipped: missing, Date: time.Now(), Machine: machine(), Base: base}
	for _, c := range clients {
		t.Run(c.Name, func(t *testing.T) {
			for _, u := range users {
				t.Run(u.Label(), func(t *testing.T) {
					for round := range rounds {
						p, ok := runPair(t, self, tl, prefix, c, u, round, steps, benchN)
						if ok {
							rep.Pairs = append(rep.Pairs, p)
						}
					}
				})
			}
		})
	}
	// The class targets are deterministic, so they are asserted; the
	// time targets carry the machine's noise, so they are reported.
	for _, c := range clients {
		for _, u := range users {
			s, ok := rep.Summarize(c.Name, u)
			if !ok {
				continue
			}
			if len(s.ReadOnlyMissed) > 0 {
				t.Errorf("%s as %s: read-only steps %v not classed none", c.Name, s.User, s.ReadOnlyMissed)
			}
			if s.EditsGit != s.Edits {
				t.Errorf("%s as %s: %d of %d edits classed git", c.Name, s.User, s.EditsGit, s.Edits)
			}
			if len(s.Above) > 0 {
				t.Errorf("%s as %s: steps %v classed above their bare class", c.Name, s.User, s.Above)
			}
			if len(s.Refused) > 0 {
				t.Errorf("%s as %s: steps %v refused where bash runs them", c.Name, s.User, s.Refused)
			}
		}
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	if *update {
		if err := os.WriteFile("../../docs/harnesses.md", []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runPair runs one round of a harness as u: plain bash and undosh, in
// an order that alternates with the round, then checks both and compares
// them. ok is false when a run could not be carried out at all.
func runPair(t *testing.T, self string, tl tools, prefix string, c Client, u User, round int, steps []Step, benchN int) (Pair, bool) {
	t.Helper()
	// Other packages' tests change /etc, which each run checks: keep
	// them out meanwhile.
	defer testuser.WatchingEtc()()
	p := Pair{Client: c.Name, User: u, Round: round}
	modes := []string{Plain, Undosh}
	if round%2 == 1 {
		modes = []string{Undosh, Plain}
	}
	for _, mode := range modes {
		dir := filepath.Join(tl.base, fmt.Sprintf("%s-%s-%d-%s", c.Name, u.Label(), round, mode))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Each run is bounded, and so is the suite: the runs left when
		// go test's deadline nears are not started (a test killed by its
		// deadline would skip its clean-up).
		timeout := 3 * time.Minute
		if dl, ok := t.Deadline(); ok {
			if left := time.Until(dl) - 2*time.Minute; left < timeout {
				timeout = left
			}
		}
		if timeout < 30*time.Second {
			t.Errorf("%s run not started: go test's deadline is too near (-timeout)", mode)
			return p, false
		}
		spec := Spec{Client: c.Name, Mode: mode, User: u, Dir: dir, Bin: tl.bin, RealBash: tl.realBash,
			Prefix: prefix, Script: Commands(steps), Timeout: timeout, InHome: os.Getenv("UNDOSH_HARNESS_IN_HOME") != ""}
		if mode == Undosh && round == 0 {
			spec.Bench = benchN
		}
		out, err := Run(context.Background(), self, spec)
		if err != nil {
			t.Errorf("%s run: %v", mode, err)
			if out.Spec.Client == "" {
				return p, false
			}
		}
		t.Logf("%s: harness exit %d in %v, %d results, %d requests, %d journal records", mode, out.Exit, out.Wall.Round(time.Millisecond),
			len(out.Results), out.Requests, len(out.Journal))
		if mode == Plain {
			p.Plain = out
		} else {
			p.Undosh = out
		}
		for _, f := range checkRun(steps, out) {
			t.Errorf("%s", f)
			p.Failed = append(p.Failed, f)
		}
	}
	p.Cells, p.Extras = Classify(steps, p.Undosh.Results, p.Undosh.Journal)
	dirs := map[string]string{p.Plain.Spec.Dir: "<run>", p.Undosh.Spec.Dir: "<run>", tl.base: "<base>"}
	p.Diffs = Compare(steps, p.Plain.Results, p.Undosh.Results, u.Root(), dirs, c.Empty)
	// A difference the story does not intend fails the test, unless
	// asked to report only (UNDOSH_HARNESS_LENIENT=1, to see a whole run
	// of a new harness version).
	report := t.Errorf
	if os.Getenv("UNDOSH_HARNESS_LENIENT") == "1" {
		report = t.Logf
	}
	for _, d := range p.Diffs {
		if d.Kind == Unintended || d.Problem != "" {
			report("NOT AS INTENDED: step %d (%s): %s: %s\nplain:  %q\nundosh: %q", d.Step+1, steps[d.Step].Short(), d.Kind, d.Problem, d.Plain, d.Undosh)
		}
	}
	if i := slices.IndexFunc(steps, func(s Step) bool { return s.Commits }); u.Root() && i >= 0 && !slices.Contains(p.Undosh.Etc, "+"+EtcKept) {
		report("NOT AS INTENDED: step %d, the machine step that passes, was not committed: %q", i+1, byStep(p.Undosh.Results)[i].Text)
	}
	if b := p.Undosh.Bench; b != nil {
		t.Logf("wrapper alone, %d runs each: plain %v, undosh %v (%s) %s", b.N, b.Plain.Round(10*time.Microsecond), b.Undosh.Round(10*time.Microsecond), b.Class, b.Err)
	}
	var cls []string
	for i, cl := range p.Cells {
		cls = append(cls, fmt.Sprintf("%d:%s", i+1, cl.Label()))
	}
	t.Logf("classes: %s", strings.Join(cls, " "))
	return p, true
}

// checkRun checks what must hold of every run, and says what did not.
func checkRun(steps []Step, out Outcome) (failed []string) {
	errorf := func(format string, a ...any) { failed = append(failed, fmt.Sprintf(format, a...)) }
	mode, root := out.Spec.Mode, out.Spec.User.Root()
	if out.TimedOut {
		errorf("%s: the harness did not finish within %v (killed)", mode, out.Spec.Timeout)
	}
	if len(out.Results) != len(steps) {
		got := map[int]bool{}
		for _, r := range out.Results {
			got[r.Step] = true
		}
		var miss []string
		for i, s := range steps {
			if !got[i] {
				miss = append(miss, fmt.Sprintf("%d (%s)", i+1, s.Short()))
			}
		}
		errorf("%s: no tool result for step %s; see %s", mode, strings.Join(miss, ", "), out.Spec.Dir)
	}
	for _, e := range out.ServerErrors {
		errorf("%s: model server: %s", mode, e)
	}
	results := byStep(out.Results)
	push := slices.IndexFunc(steps, func(s Step) bool { return s.Want == "refused" })
	switch mode {
	case Plain:
		// The control must really be the story, or comparing is moot.
		if out.IndexJS != "let x = ;\n" {
			errorf("plain: index.js is %q, want the bad edit kept (%q)", out.IndexJS, "let x = ;\n")
		}
		if out.RemoteAfter == out.RemoteBefore {
			errorf("plain: the push did not reach the remote")
		}
	case Undosh:
		if len(out.Journal) == 0 {
			errorf("undosh: no journal in %s: did undosh run, with the run's state directory?", out.Spec.Dir)
		}
		if !strings.Contains(out.IndexJS, "x = 1;") {
			errorf("undosh: index.js is %q: the bad edit was not rolled back", out.IndexJS)
		}
		if out.RemoteAfter != out.RemoteBefore {
			errorf("undosh: the push reached the remote (%s -> %s)", out.RemoteBefore, out.RemoteAfter)
		}
		if r, ok := results[push]; ok && !Refused(r.Text) {
			errorf("undosh: step %d (%s) was not refused: %q", push+1, steps[push].Short(), r.Text)
		}
		// Nothing may change in /etc but the file of the machine step
		// that passed, committed as root (whether it was is reported).
		for _, c := range out.Etc {
			if !root || c != "+"+EtcKept {
				errorf("undosh: /etc changed: %s (all changes: %v)", c, out.Etc)
			}
		}
	}
	return failed
}

// bareClasses asks undoctl explain for each step's class typed bare, in a
// fresh project: the class, or refused when the policy denies it.
func bareClasses(t *testing.T, tl tools, steps []Step) []string {
	t.Helper()
	dir := filepath.Join(tl.base, "explain")
	proj, err := WriteProject(dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for _, s := range steps {
		b, _ := json.Marshal(s.Command)
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command(filepath.Join(tl.bin, "undoctl"), "explain", "--json-lines", "--state", filepath.Join(dir, "state"), "-C", proj)
	cmd.Dir = proj
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("undoctl explain: %v", err)
	}
	var bare []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var d struct {
			Class   string `json:"class"`
			Verdict string `json:"verdict"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("undoctl explain: %v: %s", err, line)
		}
		if d.Verdict == "deny" {
			d.Class = "refused"
		}
		bare = append(bare, d.Class)
	}
	if len(bare) != len(steps) {
		t.Fatalf("undoctl explain gave %d decisions for %d steps", len(bare), len(steps))
	}
	return bare
}

// machine says what the figures were measured on.
func machine() string {
	var u unix.Utsname
	unix.Uname(&u)
	return fmt.Sprintf("%d CPUs, Linux %s", runtime.NumCPU(), unix.ByteSliceToString(u.Release[:]))
}

// packageVersion reads the version in an npm package.json.
func packageVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var p struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("decode %s: %w", path, err)
	}
	return p.Version, nil
}
