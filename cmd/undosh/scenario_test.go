package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// These tests run the real undosh binary against real git repositories.
// Every workspace has its own state directory and HOME, outside the
// repository. Nothing here sleeps to synchronise: steps meet on files and
// fifos.

// stepTimeout bounds any one process a test starts.
const stepTimeout = 60 * time.Second

// ws is a git workspace with its state directory and HOME.
type ws struct {
	t     *testing.T
	root  string // holds everything below
	dir   string // the repository
	state string // UNDOSH_STATE_DIR
	home  string // HOME
	env   []string
	// parallel: steps ran at once, so the journal's ids need not increase.
	parallel bool
}

// testEnv is the environment of a step: this process's, without anything
// that would point undosh or git elsewhere, plus HOME and the state
// directory.
func testEnv(home, state string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "UNDOSH_") || strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "XDG_") || k == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "UNDOSH_STATE_DIR="+state)
}

// newWS makes an empty git repository, with no commit yet, and its own
// state directory and HOME. Its journal is checked when the test ends.
func newWS(t *testing.T) *ws {
	t.Helper()
	root := t.TempDir()
	w := &ws{t: t, root: root, dir: filepath.Join(root, "repo"), state: filepath.Join(root, "state"), home: filepath.Join(root, "home")}
	for _, d := range []string{w.dir, w.state, w.home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.env = testEnv(w.home, w.state)
	if err := initRepo(w.dir, w.env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { checkJournal(t, w.state, !w.parallel) })
	return w
}

// seedWS makes the workspace of the seed's scenarios: committed files (an
// executable, symlinks, nested directories), a second branch, a stash,
// uncommitted and staged edits, an untracked file, ignored files and a
// nested repository.
func seedWS(t *testing.T) *ws {
	t.Helper()
	w := newWS(t)
	if err := seedRepo(w.dir, w.env); err != nil {
		t.Fatal(err)
	}
	return w
}

// initRepo makes an empty git repository in dir, with no commit yet.
func initRepo(dir string, env []string) error {
	if _, err := runGit(dir, env, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	for _, kv := range [][2]string{{"user.name", "Test"}, {"user.email", "test@example.com"}, {"gc.auto", "0"},
		{"maintenance.auto", "false"}, {"commit.gpgsign", "false"}, {"core.hooksPath", "/dev/null"}} {
		if _, err := runGit(dir, env, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// seedRepo fills the repository dir (made by initRepo) as seedWS says.
func seedRepo(dir string, env []string) (err error) {
	// seeder's methods stop at the first error, which they panic with.
	defer func() {
		if v := recover(); v != nil {
			se, ok := v.(seedError)
			if !ok {
				panic(v)
			}
			err = se.err
		}
	}()
	w := seeder{dir: dir, env: env}
	w.write("index.js", "var a = 1;\nvar b = 2;\n", 0o644)
	w.write("src/app.js", "console.log('app');\n", 0o644)
	w.write("src/lib/util.js", "module.exports = {};\n", 0o644)
	w.write("src/run.sh", "#!/bin/sh\necho run\n", 0o755)
	w.write("src/lib/deep/deeper/leaf.txt", "leaf\n", 0o600)
	w.symlink("app.js", "src/link.js")
	w.symlink("lib/deep", "src/deeplink")
	w.write("test.sh", "#!/bin/sh\necho tests failed >&2\nexit 1\n", 0o755)
	w.write("package.json", "{\"dependencies\":{}}\n", 0o644)
	w.write("package-lock.json", "lock 0\n", 0o644)
	w.write(".gitignore", "node_modules/\n*.log\n/vendor/\n", 0o644)
	w.git("add", "-A")
	w.git("commit", "-qm", "first")
	w.git("branch", "feature")
	w.write("src/app.js", "console.log('stashed');\n", 0o644)
	w.git("stash", "-q")
	w.write("README", "second commit\n", 0o644)
	w.git("add", "README")
	w.git("commit", "-qm", "second")
	// Uncommitted work.
	w.write("src/app.js", "console.log('uncommitted');\n", 0o644)
	w.write("src/lib/util.js", "module.exports = {staged: true};\n", 0o644)
	w.git("add", "src/lib/util.js")
	w.write("notes.txt", "untracked\n", 0o644)
	w.write("src/empty/.keep", "", 0o644)
	w.write("debug.log", "ignored\n", 0o644)
	w.write("node_modules/left-pad/index.js", "module.exports = 'pad';\n", 0o644)
	w.symlink("../../src/app.js", "node_modules/left-pad/link")
	// A nested repository, ignored by the outer one.
	nested := filepath.Join(w.dir, "vendor", "lib")
	w.write("vendor/lib/lib.go", "package lib\n", 0o644)
	w.gitIn(nested, "init", "-q", "-b", "main")
	w.gitIn(nested, "-c", "user.name=T", "-c", "user.email=t@example.com", "add", "-A")
	w.gitIn(nested, "-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "commit", "-qm", "nested")
	w.write("vendor/lib/lib.go", "package lib // edited\n", 0o644)
	return nil
}

// seeder writes a seed; its methods panic with a seedError, which
// seedRepo returns.
type seeder struct {
	dir string
	env []string
}

type seedError struct{ err error }

func (w seeder) check(err error) {
	if err != nil {
		panic(seedError{err})
	}
}

func (w seeder) write(rel, content string, mode fs.FileMode) {
	w.check(writeMode(filepath.Join(w.dir, rel), content, mode))
}

func (w seeder) symlink(target, rel string) {
	p := filepath.Join(w.dir, rel)
	w.check(os.MkdirAll(filepath.Dir(p), 0o755))
	w.check(os.Symlink(target, p))
}

func (w seeder) git(args ...string) { w.gitIn(w.dir, args...) }

func (w seeder) gitIn(dir string, args ...string) {
	_, err := runGit(dir, w.env, args...)
	w.check(err)
}

// writeMode writes a file, making its directory, and gives it mode
// whatever the umask.
func writeMode(p, content string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}

func (w *ws) write(rel, content string, mode fs.FileMode) {
	w.t.Helper()
	if err := writeMode(filepath.Join(w.dir, rel), content, mode); err != nil {
		w.t.Fatal(err)
	}
}

func (w *ws) read(rel string) string {
	w.t.Helper()
	data, err := os.ReadFile(filepath.Join(w.dir, rel))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(data)
}

func (w *ws) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(w.dir, rel))
	return err == nil
}

// git runs the real git (never through undosh) in the repository.
func (w *ws) git(args ...string) string {
	w.t.Helper()
	return w.gitIn(w.dir, args...)
}

func (w *ws) gitIn(dir string, args ...string) string {
	w.t.Helper()
	out, err := runGit(dir, w.env, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// runGit runs the real git in dir with env, and returns its output.
func runGit(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// gitState is what must read the same after a rollback as before the
// step: status with untracked and ignored files, every ref, the stashes.
func (w *ws) gitState() string {
	w.t.Helper()
	s, err := gitStateOf(w.dir, w.env)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// gitStateOf is gitState of the repository dir.
func gitStateOf(dir string, env []string) (string, error) {
	var b strings.Builder
	for _, part := range []struct {
		name string
		args []string
	}{
		{"status", []string{"status", "--porcelain=v1", "--untracked-files=all", "--ignored"}},
		{"refs", []string{"log", "--all", "--format=%H%d"}},
		{"stashes", []string{"stash", "list"}},
	} {
		out, err := runGit(dir, env, part.args...)
		if err != nil {
			return "", err
		}
		b.WriteString(part.name + ":\n" + out)
	}
	return b.String(), nil
}

// stepResult is how a process ended.
type stepResult struct {
	stdout, stderr string
	code           int // -1 when killed by a signal
	ps             *os.ProcessState
	pid            int
}

// undoshLines returns the lines undosh itself wrote on stderr.
func (r stepResult) undoshLines() []string {
	var out []string
	for l := range strings.SplitSeq(r.stderr, "\n") {
		if strings.HasPrefix(l, "undosh: ") {
			out = append(out, l)
		}
	}
	return out
}

func (r stepResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs undosh -c script in the repository.
func (w *ws) run(script string, extraEnv ...string) stepResult {
	w.t.Helper()
	return w.runArgv(w.dir, append(w.env[:len(w.env):len(w.env)], extraEnv...), undoshBin, "-c", script)
}

// runArgv runs argv in dir with env, and waits for it.
func (w *ws) runArgv(dir string, env []string, argv ...string) stepResult {
	w.t.Helper()
	cmd := w.command(dir, env, argv...)
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := stepResult{stdout: stdout.String(), stderr: stderr.String(), ps: cmd.ProcessState}
	if cmd.Process != nil {
		r.pid = cmd.Process.Pid
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
	default:
		w.t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	r.code = cmd.ProcessState.ExitCode()
	return r
}

func (w *ws) command(dir string, env []string, argv ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	w.t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	return cmd
}

// undoctl runs undoctl with the workspace's environment, in the repository.
func (w *ws) undoctl(args ...string) stepResult {
	w.t.Helper()
	return w.runArgv(w.dir, w.env, append([]string{undoctlBin}, args...)...)
}

// entry is one path of a snapshot.
type entry struct {
	Mode fs.FileMode
	Size int64
	// Sum is the sha256 of a file's content, or a symlink's target.
	Sum   string
	MTime time.Time
}

// snapshot records every path under root: mode, size, content and, with
// withTime, the modification time.
func snapshot(t *testing.T, root string, withTime bool) map[string]entry {
	t.Helper()
	m, err := snapshotOf(root, withTime)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// snapshotOf is snapshot, with its error.
func snapshotOf(root string, withTime bool) (map[string]entry, error) {
	m := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode()}
		if withTime {
			e.MTime = fi.ModTime()
		}
		switch {
		case fi.Mode().IsRegular():
			e.Size = fi.Size()
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			e.Sum = hex.EncodeToString(sum[:])
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.Sum = "-> " + target
		}
		rel, _ := filepath.Rel(root, p)
		m[rel] = e
		return nil
	})
	return m, err
}

// gitModes keeps of each mode what a checkpoint promises to restore: the
// type, and for a file whether its owner may execute it. Other permission
// bits come back as 0644 or 0755 (see TestRollbackPermissions).
func gitModes(m map[string]entry) map[string]entry {
	out := make(map[string]entry, len(m))
	for k, e := range m {
		e.Mode = e.Mode.Type() | e.Mode&0o100
		out[k] = e
	}
	return out
}

// checkRolledBack checks that r is a step that failed with code and was
// rolled back: one undosh line, naming the number of files.
func checkRolledBack(t *testing.T, r stepResult, code, files int) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit status %d, want %d\n%s", r.code, code, r)
	}
	lines := r.undoshLines()
	if len(lines) != 1 {
		t.Fatalf("want one undosh line on stderr, got %d\n%s", len(lines), r)
	}
	l := lines[0]
	if !strings.HasPrefix(l, "undosh: step ") || !strings.Contains(l, "undo the rollback with: undoctl restore -C ") {
		t.Errorf("not a rollback line: %q", l)
	}
	if files >= 0 {
		want := fmt.Sprintf("rolled back %d %s to checkpoint ", files, map[bool]string{true: "file", false: "files"}[files == 1])
		if !strings.Contains(l, want) {
			t.Errorf("rollback line %q does not say %q", l, want)
		}
	}
}

// writePolicy writes a user policy outside the workspace and returns the
// environment that selects it.
func writePolicy(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return "UNDOSH_POLICY=" + p
}

// TestUnfinishedRollback: a rollback cut short by SIGKILL is finished by
// the next undosh, whatever it runs; whether the step ran as undosh's
// child (the rollback runs in the undosh started) or was handed over (it
// runs in the supervisor, and the shell's own status reaches the caller
// when the supervisor dies).
func TestUnfinishedRollback(t *testing.T) {
	t.Parallel()
	t.Run("child", func(t *testing.T) { t.Parallel(); testUnfinishedRollback(t, false) })
	t.Run("handed-over", func(t *testing.T) { t.Parallel(); testUnfinishedRollback(t, true) })
}

func testUnfinishedRollback(t *testing.T, handed bool) {
	w := newWS(t)
	if !handed {
		w.env = append(w.env, "UNDOSH_HANDOVER=0")
	}
	// Enough files that the restore takes far longer than noticing its
	// marker and killing undosh: 1500 files take about half a second to
	// restore here, noticing the marker well under a millisecond.
	for d := range 15 {
		dir := filepath.Join(w.dir, "tree", fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), []byte(fmt.Sprintf("file %d %d\n", d, f)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.git("add", "-A")
	w.git("commit", "-qm", "tree")
	before := w.gitState()
	tree := snapshot(t, w.dir, false)

	cmd := w.command(w.dir, w.env, undoshBin, "-c", "rm -rf tree && false")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pending := filepath.Join(w.state, "pending")
	var marker string
	for marker == "" {
		select {
		case err := <-exited:
			t.Fatalf("undosh ended (%v) before its rollback marker was seen\n%s", err, stderr.String())
		default:
		}
		if ents, _ := os.ReadDir(pending); len(ents) > 0 && strings.HasSuffix(ents[0].Name(), ".json") {
			marker = filepath.Join(pending, ents[0].Name())
		}
		runtime.Gosched()
	}
	// The marker is named step-pid: the pid of the undosh rolling back.
	_, pid, _ := strings.Cut(strings.TrimSuffix(filepath.Base(marker), ".json"), "-")
	rolling, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatalf("marker %s names no pid", marker)
	}
	if (rolling == cmd.Process.Pid) == handed {
		t.Fatalf("the rollback runs in pid %d, the undosh started is %d: handed over is not %v", rolling, cmd.Process.Pid, handed)
	}
	syscall.Kill(rolling, syscall.SIGKILL)
	<-exited
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		t.Fatalf("no wait status: %v", cmd.ProcessState)
	case !handed && !ws.Signaled():
		t.Fatalf("undosh was not killed: %v", cmd.ProcessState)
	case handed && ws.ExitStatus() != 1:
		// The supervisor's death lets the shell's end through.
		t.Fatalf("the shell's status did not reach its caller once its supervisor was killed: %v", cmd.ProcessState)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the rollback finished before undosh was killed (marker %s: %v): the tree is too small to cut it short", marker, err)
	}
	if cmp.Equal(tree, snapshot(t, w.dir, false)) {
		t.Fatalf("the rollback was complete when undosh was killed: the tree is too small to cut it short")
	}

	r := w.run("true")
	if r.code != 0 {
		t.Errorf("undosh -c true: exit %d\n%s", r.code, r)
	}
	lines := r.undoshLines()
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "undosh: finished the rollback of step 1 that was cut short: restored ") {
		t.Errorf("want one line saying the rollback of step 1 was finished\n%s", r)
	}
	if d := cmp.Diff(tree, snapshot(t, w.dir, false)); d != "" {
		t.Errorf("workspace after the finished rollback (-before +after):\n%s", d)
	}
	if d := cmp.Diff(before, w.gitState()); d != "" {
		t.Errorf("git state after the finished rollback (-before +after):\n%s", d)
	}
	if _, err := os.Lstat(pending); err == nil {
		t.Errorf("%s remains after the rollback was finished", pending)
	}
	// Only once: the next undosh has nothing to finish.
	if r := w.run("true"); r.stderr != "" {
		t.Errorf("second undosh -c true printed\n%s", r)
	}
	// The read-only steps (true) have records too where the kernel
	// cannot hold them off the workspace (Landlock, in /tmp).
	var outcomes []string
	for _, r := range readJournal(t, w.state) {
		if r.Outcome != "passed through" {
			outcomes = append(outcomes, r.Outcome)
		}
	}
	if d := cmp.Diff([]string{"killed", "rolled back later"}, outcomes); d != "" {
		t.Errorf("journal outcomes (-want +got):\n%s", d)
	}
}

// TestParallelSteps: two steps at once in one workspace. The failing one
// overlapped the other, so it keeps its changes and says how to go back;
// the store stays sound; a failing step that runs alone afterwards is
// rolled back.
func TestParallelSteps(t *testing.T) {
	t.Parallel()
	w := seedWS(t)
	w.parallel = true
	sync := filepath.Join(w.root, "sync")
	if err := os.Mkdir(sync, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(sync, "b-started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	beforeA := w.gitState()
	treeA := snapshot(t, w.dir, false)
	// A writes, waits until B runs, then fails. B writes and tells A.
	a := w.command(w.dir, w.env, undoshBin, "-c", "echo a > a.txt && read x < "+fifo+" && false")
	var aErr strings.Builder
	a.Stderr = &aErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	b := w.run("echo b > b.txt && echo go > " + fifo)
	if b.code != 0 || b.stderr != "" {
		t.Errorf("step B: want exit 0 and nothing on stderr\n%s", b)
	}
	err := a.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("step A: %v, want exit 1\n%s", err, aErr.String())
	}
	if !w.exists("a.txt") || !w.exists("b.txt") {
		t.Errorf("a step that overlapped another was rolled back: a.txt %v, b.txt %v", w.exists("a.txt"), w.exists("b.txt"))
	}
	recs := readJournal(t, w.state)
	ids := map[int]journalRecord{}
	for _, r := range recs {
		ids[r.ID] = r
	}
	if len(recs) != 2 || len(ids) != 2 {
		t.Fatalf("journal: want two steps with distinct ids, got %+v", recs)
	}
	var aRec journalRecord
	for _, r := range recs {
		if strings.HasPrefix(r.Command, "echo a") {
			aRec = r
		}
	}
	if aRec.Outcome != "kept: overlapped" {
		t.Errorf("step A's outcome = %q, want kept: overlapped", aRec.Outcome)
	}
	want := fmt.Sprintf("undosh: step %d failed (exit 1) while another step ran, so its changes were kept; to go back: undoctl back %d\n", aRec.ID, aRec.ID)
	if d := cmp.Diff(want, aErr.String()); d != "" {
		t.Errorf("step A's stderr (-want +got):\n%s", d)
	}
	if r := w.undoctl("check"); r.code != 0 {
		t.Errorf("undoctl check after parallel steps\n%s", r)
	}
	// The way back A's notice gives.
	if r := w.undoctl("back", strconv.Itoa(aRec.ID)); r.code != 0 {
		t.Fatalf("undoctl back %d\n%s", aRec.ID, r)
	}
	if d := cmp.Diff(treeA, snapshot(t, w.dir, false)); d != "" {
		t.Errorf("workspace after undoctl back %d (-before A +after):\n%s", aRec.ID, d)
	}
	if d := cmp.Diff(beforeA, w.gitState()); d != "" {
		t.Errorf("git state after undoctl back %d (-before A +after):\n%s", aRec.ID, d)
	}

	// Alone, a failing step is rolled back.
	before := w.gitState()
	tree := snapshot(t, w.dir, false)
	r := w.run("echo c > c.txt && false")
	checkRolledBack(t, r, 1, 1)
	if d := cmp.Diff(tree, snapshot(t, w.dir, false)); d != "" {
		t.Errorf("workspace after the rollback (-before +after):\n%s", d)
	}
	if d := cmp.Diff(before, w.gitState()); d != "" {
		t.Errorf("git state after the rollback (-before +after):\n%s", d)
	}
	if r := w.undoctl("check"); r.code != 0 {
		t.Errorf("undoctl check\n%s", r)
	}
}

// TestSignalForwarded: SIGTERM sent to undosh reaches the step; the step
// dies of it, is rolled back, and undosh dies of the same signal.
func TestSignalForwarded(t *testing.T) {
	t.Parallel()
	w := seedWS(t)
	started, gate := filepath.Join(w.root, "started"), filepath.Join(w.root, "gate")
	for _, f := range []string{started, gate} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Keep the gate open for writing so that the step's read blocks on
	// data, not on opening it.
	g, err := os.OpenFile(gate, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	before := w.gitState()
	tree := snapshot(t, w.dir, false)
	cmd := w.command(w.dir, w.env, undoshBin, "-c", "echo x > out.txt && echo s > "+started+" && read x < "+gate+"; echo survived > survived.txt")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(started); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("undosh ended with %v, want death by SIGTERM\n%s", cmd.ProcessState, stderr.String())
	}
	checkRolledBack(t, stepResult{code: -1, stderr: stderr.String()}, -1, 1)
	if !strings.Contains(stderr.String(), "killed by SIGTERM") {
		t.Errorf("the rollback line does not name SIGTERM\n%s", stderr.String())
	}
	if d := cmp.Diff(tree, snapshot(t, w.dir, false)); d != "" {
		t.Errorf("workspace after the rollback (-before +after):\n%s", d)
	}
	if d := cmp.Diff(before, w.gitState()); d != "" {
		t.Errorf("git state after the rollback (-before +after):\n%s", d)
	}
}

// TestManyParallelSteps: several steps at once, some failing, all
// overlapping: none rolls back, every one is journaled once, and the store
// checks clean.
func TestManyParallelSteps(t *testing.T) {
	t.Parallel()
	w := seedWS(t)
	w.parallel = true
	const n = 6
	sync := filepath.Join(w.root, "sync")
	if err := os.Mkdir(sync, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every step writes its file, says it started, and waits for the
	// go-ahead; the test gives it once all have started.
	start := filepath.Join(sync, "started")
	if err := syscall.Mkfifo(start, 0o600); err != nil {
		t.Fatal(err)
	}
	started, err := os.OpenFile(start, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer started.Close()
	var cmds []*exec.Cmd
	var errs []*strings.Builder
	for i := range n {
		gate := filepath.Join(sync, fmt.Sprintf("go%d", i))
		if err := syscall.Mkfifo(gate, 0o600); err != nil {
			t.Fatal(err)
		}
		status := "true"
		if i%2 == 1 {
			status = "false"
		}
		c := w.command(w.dir, w.env, undoshBin, "-c",
			fmt.Sprintf("echo %d > p%d.txt && echo %d > %s && read x < %s && %s", i, i, i, start, gate, status))
		var e strings.Builder
		c.Stderr = &e
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		errs = append(errs, &e)
	}
	rd := bufio.NewReader(started)
	for range n {
		if _, err := rd.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(sync, fmt.Sprintf("go%d", i)), []byte("go\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		c.Wait()
		want := 0
		if i%2 == 1 {
			want = 1
		}
		if got := c.ProcessState.ExitCode(); got != want {
			t.Errorf("step %d: exit %d, want %d\n%s", i, got, want, errs[i])
		}
		if !w.exists(fmt.Sprintf("p%d.txt", i)) {
			t.Errorf("step %d's file is gone", i)
		}
		if want == 1 && !strings.Contains(errs[i].String(), "while another step ran, so its changes were kept; to go back: undoctl back ") {
			t.Errorf("step %d's stderr does not say it overlapped:\n%s", i, errs[i])
		}
	}
	recs := readJournal(t, w.state)
	seen := map[int]bool{}
	for _, r := range recs {
		if seen[r.ID] {
			t.Errorf("step id %d journaled twice", r.ID)
		}
		seen[r.ID] = true
	}
	if len(recs) != n {
		t.Errorf("journal has %d records, want %d", len(recs), n)
	}
	if r := w.undoctl("check"); r.code != 0 {
		t.Errorf("undoctl check\n%s", r)
	}
}

// TestNesting: a nested undosh that the outer step cannot see through,
// run in a machine step's view, writes beyond the workspace as the outer
// step; the rest of nesting (no second checkpoint, env -i, a refusal or
// an escalation inside) is testdata/script/nesting.txtar.
func TestNesting(t *testing.T) {
	t.Parallel()
	t.Run("held by a view", func(t *testing.T) {
		t.Parallel()
		needForkEngine(t)
		w := seedWS(t)
		p := harmless(t)
		script := writeInner(t, w.root, "echo x > "+p+"; touch ran\n")
		u := opaqueUndosh(t, w.root)
		// In the outer step's view, the inner one runs: what it writes
		// beyond the workspace is the outer step's, kept as it escalates.
		r := w.run(`touch started; ` + u + ` ` + script + `; echo inner=$?`)
		if r.code != 0 || r.stdout != "inner=0\n" || !w.exists("ran") {
			t.Errorf("want the inner step run in the outer step's view\n%s", r)
		}
		if lines := r.undoshLines(); len(lines) != 1 || !strings.Contains(lines[0], "wrote "+p+": kept as a machine step would be") {
			t.Errorf("want the outer step kept for what the inner one wrote\n%s", r)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	})
}

// writeInner writes the script a nested undosh runs, before the step:
// a script the step itself writes and then runs is unknown code (fork),
// which is not what these cases are about.
func writeInner(t *testing.T, dir, text string) string {
	t.Helper()
	script := filepath.Join(dir, "inner.sh")
	if err := os.WriteFile(script, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return script
}

// opaqueUndosh is undosh under a path the policy does not trust (a hard
// link, or a copy, in dir): the outer step cannot read the script it runs,
// so the nested undosh is the one that decides it.
func opaqueUndosh(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "undosh-untrusted")
	if err := os.Link(undoshBin, p); err != nil {
		data, err := os.ReadFile(undoshBin)
		if err == nil {
			err = os.WriteFile(p, data, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return strconv.Quote(p)
}

// journalRecord is what the tests read of a journal line.
type journalRecord struct {
	ID          int    `json:"id"`
	Command     string `json:"command"`
	Class       string `json:"class"`
	Exit        int    `json:"exit"`
	Signal      string `json:"signal"`
	Outcome     string `json:"outcome"`
	Parent      int    `json:"parent"`
	VerifyOK    *bool  `json:"verify_ok"`
	Checkpoints []struct {
		Root   string `json:"root"`
		Before string `json:"before"`
		After  string `json:"after"`
		Walk   string `json:"walk"`
	} `json:"checkpoints"`
}

// readJournal reads the journal of a state directory.
func readJournal(t *testing.T, state string) []journalRecord {
	t.Helper()
	recs, err := readJournalOf(state)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// readJournalOf is readJournal, with its error.
func readJournalOf(state string) ([]journalRecord, error) {
	data, err := os.ReadFile(filepath.Join(state, "journal.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var recs []journalRecord
	for l := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		var r journalRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return nil, fmt.Errorf("journal line %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// checkJournal checks every line of a journal: valid JSON with the fields
// every step has, checkpoints for every step that took them, and distinct
// ids, increasing when ordered (steps did not run at once).
func checkJournal(t *testing.T, state string, ordered bool) {
	t.Helper()
	for _, p := range journalProblems(state, ordered) {
		t.Error(p)
	}
}

// journalProblems is what checkJournal finds wrong.
func journalProblems(state string, ordered bool) []string {
	var probs []string
	errorf := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	data, err := os.ReadFile(filepath.Join(state, "journal.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return []string{err.Error()}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		errorf("journal does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	// An outer step is journaled when it ends, after the steps run inside
	// it, which have later ids.
	outer := map[int]bool{}
	for _, l := range lines {
		var r struct {
			Parent int `json:"parent"`
		}
		if json.Unmarshal([]byte(l), &r) == nil && r.Parent > 0 {
			outer[r.Parent] = true
		}
	}
	seen := map[int]bool{}
	last := 0
	for i, l := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			errorf("journal line %d is not JSON: %v\n%s", i+1, err, l)
			continue
		}
		for _, k := range []string{"id", "time", "class", "exit", "outcome"} {
			if _, ok := m[k]; !ok {
				errorf("journal line %d has no %s: %s", i+1, k, l)
			}
		}
		var r struct {
			ID      int       `json:"id"`
			Time    time.Time `json:"time"`
			Outcome string    `json:"outcome"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			errorf("journal line %d: %v", i+1, err)
			continue
		}
		// A refused step took no checkpoint; every other one did.
		if _, ok := m["checkpoints"]; !ok && r.Outcome != "refused" {
			errorf("journal line %d (outcome %s) has no checkpoints: %s", i+1, r.Outcome, l)
		}
		if r.Time.IsZero() {
			errorf("journal line %d has no time: %s", i+1, l)
		}
		if seen[r.ID] || r.ID <= 0 {
			errorf("journal line %d: id %d is not new", i+1, r.ID)
		}
		seen[r.ID] = true
		// A step whose undosh was killed is recorded by the next one.
		if r.ID < last && ordered && r.Outcome != "killed" && !outer[r.ID] {
			errorf("journal line %d: id %d after %d", i+1, r.ID, last)
		}
		last = max(last, r.ID)
	}
	return probs
}
