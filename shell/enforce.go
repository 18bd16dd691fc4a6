package shell

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/policy"
)

// enforcing reports whether steps run under the isolation of their class
// (internal/enforce): $UNDOSH_ENFORCE (1 or 0) when set, else the
// policy's enforce.
func (r *run) enforcing() bool {
	switch r.e.Getenv("UNDOSH_ENFORCE") {
	case "1":
		return true
	case "0":
		return false
	}
	return r.pol != nil && r.pol.Enforce
}

// scratchTools names the program whose cache each default scratch path
// under $HOME is: undosh makes the cache, empty, before an enforced step
// when the program is installed and the cache is not there yet, so that
// the program can fill it (its first use would otherwise be stopped
// making it in a home directory the step may not write). ~/.cache, the
// XDG cache of many programs, is always made; a scratch path of the
// user's own when its parent exists.
var scratchTools = map[string]string{
	"~/.npm": "npm", "~/.yarn/berry/cache": "yarn", "~/.local/share/pnpm/store": "pnpm",
	"~/.cargo/registry": "cargo", "~/.cargo/git": "cargo", "~/go/pkg": "go",
	"~/.gradle/caches": "gradle", "~/.m2/repository": "mvn", "~/.bun/install/cache": "bun", "~/.deno": "deno",
}

// writable is what a step of class c may write under enforcement: its
// workspace roots (git), the policy's scratch paths (see [scratchTools])
// and undosh's state directory (a nested undosh journals there).
func (r *run) writable(c policy.Class) []string {
	var out []string
	if c == policy.Git {
		out = append(out, r.dec.Roots...)
	}
	home := r.e.Getenv("HOME")
	for _, s := range r.pol.Scratch {
		if rest, ok := strings.CutPrefix(s, "~"); ok {
			if home == "" || home == "/" {
				continue
			}
			p := filepath.Join(home, rest)
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) && r.makeScratch(s, p) {
				_ = os.MkdirAll(p, 0o755) // Best effort: without it, the cache is blocked.
			}
			s = p
		}
		out = append(out, s)
	}
	if r.stateDir != "" {
		out = append(out, r.stateDir)
	}
	var kept []string
	for _, p := range out {
		if p = filepath.Clean(p); filepath.IsAbs(p) && p != "/" {
			if _, err := os.Stat(p); err == nil {
				kept = append(kept, p)
			}
		}
	}
	return kept
}

// makeScratch reports whether the missing scratch path p (spelt s in the
// policy) should be made before an enforced step.
func (r *run) makeScratch(s, p string) bool {
	if s == "~/.cache" {
		return true
	}
	if tool, ok := scratchTools[s]; ok {
		// A one-shot step's environment is undosh's own.
		_, err := exec.LookPath(tool)
		return err == nil
	}
	_, err := os.Stat(filepath.Dir(p))
	return err == nil
}

// enforced is a step's shell started under its class's isolation.
type enforced struct {
	class    policy.Class
	writable []string
	path     string
	argv     []string
	env      []string
}

// enforceStep prepares running argv (the real shell) with env under the
// isolation of class c. It returns nil, and says why once, when the
// kernel offers no way to.
func (r *run) enforceStep(c policy.Class, argv, env []string) *enforced {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		r.e.say("note: enforcement is on, but undosh cannot find its own executable (" + err.Error() + "): the step runs without it")
		return nil
	}
	w := r.writable(c)
	path, nargv, nenv, err := enforce.Command(self, enforce.Plan{Class: c.String(), Writable: w, Shell: r.real}, argv, env)
	if err != nil {
		r.e.say("note: enforcement is on, but " + err.Error() + ": the step runs without it")
		return nil
	}
	return &enforced{class: c, writable: w, path: path, argv: nargv, env: nenv}
}

// stderrTail keeps the end of what a step writes on standard error, so
// that a step stopped by enforcement can be told which paths it was
// stopped at: a pipe or socket is relayed through one of undosh's, a
// regular file is read back afterwards; a terminal is left alone.
type stderrTail struct {
	orig *os.File
	w    *os.File // the child's standard error, when relayed
	done chan struct{}
	mu   sync.Mutex
	tail tail
	off  int64 // a regular file's size before the step
	file bool
}

// captureStderr returns the files for the step's child, with standard
// error replaced when its end can be kept.
func captureStderr(files []*os.File) ([]*os.File, *stderrTail) {
	if len(files) < 3 || files[2] == nil {
		return files, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(files[2].Fd()), &st); err != nil {
		return files, nil
	}
	t := &stderrTail{orig: files[2]}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		t.file, t.off = true, st.Size
		return files, t
	case unix.S_IFIFO, unix.S_IFSOCK:
	default:
		return files, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return files, nil
	}
	t.w, t.done = w, make(chan struct{})
	go func() {
		defer close(t.done)
		defer r.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = t.orig.Write(buf[:n]) // Best effort, as the step's own write would be.
				t.mu.Lock()
				t.tail.Write(buf[:n])
				t.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	out := append([]*os.File(nil), files...)
	out[2] = w
	return out, t
}

// started closes undosh's copy of the relay's write end once the child
// has its own.
func (t *stderrTail) started() {
	if t != nil && t.w != nil {
		t.w.Close()
	}
}

// end waits for the relay to drain and returns the tail.
func (t *stderrTail) end() []byte {
	if t == nil {
		return nil
	}
	if t.file {
		var st unix.Stat_t
		if unix.Fstat(int(t.orig.Fd()), &st) != nil || st.Size <= t.off {
			return nil
		}
		// Standard error is open for writing only: read the file again.
		f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", t.orig.Fd()))
		if err != nil {
			return nil
		}
		defer f.Close()
		from := max(t.off, st.Size-4096)
		buf := make([]byte, st.Size-from)
		n, _ := f.ReadAt(buf, from)
		return buf[:n]
	}
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tail.b
}

// blockedHint says, after a failed enforced step, where enforcement
// stopped it and how to run it at the class it needs; "" when its error
// output names no path outside what it could write.
func (r *run) blockedHint(en *enforced, stderr []byte) string {
	var paths []string
	for _, p := range enforce.Blocked(stderr) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.cwd, p)
		}
		if !under(p, en.writable) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return ""
	}
	needs := policy.Fork
	if en.class == policy.None {
		roots := r.dec.Roots
		if len(roots) == 0 {
			roots = classify.WorkspaceRoots(r.cwd, r.e.Getenv("HOME"))
		}
		if allUnder(paths, roots) {
			needs = policy.Git
		}
	}
	what := "read-only (class none)"
	if en.class == policy.Git {
		what = "allowed to write only its workspace and scratch paths (class git)"
	}
	return fmt.Sprintf("this step ran %s, and was stopped writing %s: it needs class %s; run it as a machine step with: undoctl run --fork -- %s",
		what, clip(strings.Join(paths, ", "), 200), needs, r.rerunCommand())
}

// rerunCommand is the step as undoctl run takes it.
func (r *run) rerunCommand() string {
	switch r.inv.Mode {
	case ModeCommand:
		return "bash -c " + shellQuote(r.inv.Command)
	}
	var q []string
	for _, a := range r.e.Argv {
		q = append(q, shellQuote(a))
	}
	return strings.Join(q, " ")
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

func allUnder(paths, dirs []string) bool {
	for _, p := range paths {
		if !under(p, dirs) {
			return false
		}
	}
	return len(dirs) > 0
}

// runEnforcedNone runs a read-only step under a read-only view of the
// files, as a child (undosh stays to explain a step it stopped), and
// returns its status.
func (r *run) runEnforcedNone() (int, bool) {
	e := r.e
	en := r.enforceStep(policy.None, e.Argv, e.Environ)
	if en == nil {
		return 0, false
	}
	files, tail := captureStderr(r.stepFiles())
	c, err := startChild(en.path, en.argv, en.env, files, e.Ignored)
	tail.started()
	if err != nil {
		e.errorf(fmt.Errorf("run %s: %w", r.real, err), "check UNDOSH_REAL_BASH and "+ConfigFile)
		return 127, true
	}
	st := <-c.done
	out := tail.end()
	if st.code != 0 && st.sig == 0 {
		if hint := r.blockedHint(en, out); hint != "" {
			e.say("hint: " + hint)
		}
	}
	if st.sig != 0 {
		e.DieBy(st.sig)
	}
	if r.src.stdin != nil {
		r.src.stdin.Close()
	}
	return st.code, true
}
