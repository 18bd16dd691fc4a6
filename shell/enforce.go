package shell

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/pathglob"
	"github.com/undosh/undosh/internal/shquote"
	"github.com/undosh/undosh/policy"
)

// enforcing reports whether steps run under the limit of their class
// (internal/enforce, docs/enforce.md): $UNDOSH_ENFORCE (1 or 0) when set,
// else the policy's enforce.
func (r *run) enforcing() bool {
	return enforcingIn(r.proc.Getenv, r.pol)
}

func enforcingIn(getenv func(string) string, pol *policy.Policy) bool {
	switch getenv("UNDOSH_ENFORCE") {
	case "1":
		return true
	case "0":
		return false
	}
	return pol != nil && pol.Enforce
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
	"~/.cargo/registry": "cargo", "~/.cargo/git": "cargo", "~/go/pkg": "go", "~/.config/go/telemetry": "go",
	"~/.gradle/caches": "gradle", "~/.m2/repository": "mvn", "~/.bun/install/cache": "bun", "~/.deno": "deno",
}

// writablePaths lists what a step of class c may write under its limit:
// its workspace roots (git), the policy's scratch paths (~ is home; see
// [scratchTools]) and undosh's state directory (a nested undosh journals
// there). Each is absolute, real (no symbolic links) and exists, and
// none is beneath another (which holds it already).
func writablePaths(c policy.Class, pol *policy.Policy, roots []string, home, stateDir string) []string {
	var out []string
	if c == policy.Git {
		out = append(out, roots...)
	}
	for _, s := range pol.Scratch {
		if rest, ok := strings.CutPrefix(s, "~"); ok {
			if home == "" || home == "/" {
				continue
			}
			p := filepath.Join(home, rest)
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) && makeScratch(s, p) {
				_ = os.MkdirAll(p, 0o755) // Best effort: without it, the cache is blocked.
			}
			s = p
		}
		out = append(out, s)
	}
	if stateDir != "" {
		out = append(out, stateDir)
	}
	var kept []string
	for _, p := range out {
		if p = filepath.Clean(p); !filepath.IsAbs(p) || p == "/" {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && real != "/" && !slices.Contains(kept, real) {
			kept = append(kept, real)
		}
	}
	slices.SortStableFunc(kept, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	var top []string
	for _, p := range kept {
		if !under(p, top) {
			top = append(top, p)
		}
	}
	return top
}

// makeScratch reports whether the missing scratch path p (spelt s in the
// policy) should be made before an enforced step.
func makeScratch(s, p string) bool {
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

// limit is a step's shell started under its class's limit.
type limit struct {
	writable []string
	// exposed are the workspace roots of a read-only step that lie in a
	// writable path and that the kernel cannot hold read-only here
	// (Landlock grants whole trees): its checkpoint is all that undoes
	// a wrong guess there.
	exposed []string
	// copy holds the layers of a capture view; nil for a hard limit.
	copy *fork.Copy
	path string
	argv []string
	env  []string
}

// contain prepares running argv (the real shell) with env under the
// limit of class c: for a workspace step, a view of the machine where
// one can be made; else (and for a read-only step, which undosh execs)
// the kernel's hard limit. It returns nil, and why, when the step cannot
// be held to its class here; the caller then protects it without a
// limit (a read-only step as a workspace step).
func (r *run) contain(c policy.Class, argv, env []string) (*limit, string) {
	self, err := enforce.Self()
	if err != nil {
		return nil, "undosh cannot find its own executable (" + err.Error() + ")"
	}
	mode, ok, why := machine.Containment(r.proc.Getenv)
	if !ok {
		return nil, why
	}
	roots := r.dec.Roots
	if c == policy.Git && len(roots) == 0 {
		roots = classify.WorkspaceRoots(r.cwd, r.proc.Getenv("HOME"))
	}
	w := writablePaths(c, r.pol, roots, r.proc.Getenv("HOME"), r.stateDir)
	plan := enforce.Plan{Class: c.String(), Shell: r.real}
	l := &limit{writable: w}
	if mode == enforce.Capture && (c == policy.None || r.cwd == "") {
		// A read-only step is exec'd: no one would read its view. A
		// view cannot return to a working directory that was removed.
		mode = enforce.Auto
	}
	if mode == enforce.Capture {
		if cp, view, err := captureView(w); err == nil {
			l.copy = cp
			plan.Mode, plan.View = enforce.Capture, view
		} else {
			r.proc.say("note: no view of the machine for this step (" + err.Error() + "); it runs under a read-only limit instead")
			mode = enforce.Auto
		}
	}
	if l.copy == nil {
		if mode == enforce.Landlock && limitStopsSudo(r.runsAsRoot, r.uid) {
			// no_new_privs would stop sudo: a step the parser sees run
			// sudo keeps it, with its workspace checkpointed. (A
			// read-only one never comes here: [decideStep] routes it so.)
			return nil, sudoKept
		}
		plan.Writable = w // Auto: the kernel's hard limit, whichever works
		if c == policy.None {
			plan.Mode, plan.Held, l.exposed = holdRoots(mode, r.dec.Roots, r.cwd, r.proc.Getenv("HOME"), w)
		}
	}
	path, nargv, nenv, err := enforce.Command(self, plan, argv, env)
	if err != nil {
		l.release()
		return nil, err.Error()
	}
	l.path, l.argv, l.env = path, nargv, nenv
	return l, ""
}

// captureView makes the copy whose layers catch what a step writes
// beyond the shared paths, and the view built on it.
func captureView(shared []string) (*fork.Copy, *enforce.View, error) {
	_ = fork.Cleanup("") // copies of undosh processes that died
	cp, err := fork.Create(fork.Options{Share: shared})
	if err != nil {
		return nil, nil, err
	}
	v := &enforce.View{Root: filepath.Join(cp.Dir, "root"), Machine: cp.Skipped}
	for _, o := range cp.Overlays {
		v.Layers = append(v.Layers, enforce.Layer{Mount: o.Mount, Upper: o.Upper, Work: o.Work, ReadOnly: o.ReadOnly})
	}
	// A shared path beneath a tree shown as it is is writable already.
	machine := append(slices.Clone(enforce.MachineTrees), cp.Skipped...)
	for _, s := range shared {
		if !under(s, machine) {
			v.Shared = append(v.Shared, s)
		}
	}
	v.Files = layerSockets(append(machine, v.Shared...))
	// The views' own layers stay out of sight, and out of reach.
	if copies := filepath.Dir(cp.Dir); under(copies, shared) {
		v.Hidden = append(v.Hidden, copies)
	}
	return cp, v, nil
}

// holdRoots decides, for a read-only step run under the limit mode with
// writable paths w, what happens to its workspace roots that lie in a
// writable path ([HeldRoots]): a mount namespace holds them read-only all
// the same (held); where only Landlock can hold the step, nothing can,
// and they are exposed. mode is what machine.Containment found here, a
// view made Auto for a read-only step: anything but Landlock means a
// mount namespace can be made.
func holdRoots(mode enforce.Mode, roots []string, cwd, home string, w []string) (_ enforce.Mode, held, exposed []string) {
	in := HeldRoots(roots, cwd, home, w)
	switch {
	case len(in) == 0:
		return mode, nil, nil
	case mode == enforce.Landlock:
		return mode, nil, in
	}
	return enforce.MountNS, in, nil
}

// HeldRoots lists, resolved, the workspace roots of a read-only step
// (roots, else those of cwd) that lie in one of its writable paths w (a
// project in /tmp): its limit must hold them read-only as an exception
// ([enforce.Plan].Held), or the kernel does not keep the step off them.
func HeldRoots(roots []string, cwd, home string, w []string) []string {
	var in []string
	for _, root := range resolvedRoots(roots, cwd, home) {
		if under(root, w) {
			in = append(in, root)
		}
	}
	return in
}

// resolvedRoots is roots, else the workspace roots of cwd, each with its
// symbolic links resolved.
func resolvedRoots(roots []string, cwd, home string) []string {
	if len(roots) == 0 {
		roots = classify.WorkspaceRoots(cwd, home)
	}
	var out []string
	for _, root := range roots {
		if real, err := filepath.EvalSymlinks(root); err == nil {
			out = append(out, real)
		}
	}
	return out
}

// layerSockets lists the Unix sockets bound to paths outside the trees
// given (/proc/net/unix): in a view they lie on a layer, where connect()
// would not reach them, so each is bound from the machine.
func layerSockets(trees []string) []string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path
		fl := strings.Fields(sc.Text())
		if len(fl) < 8 || !strings.HasPrefix(fl[7], "/") {
			continue
		}
		p := fl[7]
		if under(p, trees) || slices.Contains(out, p) {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			out = append(out, p)
		}
	}
	return out
}

// protectNone runs a read-only step under the read-only limit: it execs
// the real shell as the pass-through does, so the step keeps the pid the
// caller started and undosh is gone; a write the limit refuses fails as
// the program reports it, and changes nothing. Where the kernel offers
// no limit (or it would stop the step's sudo), the step is protected as
// a workspace step instead, so that a wrong guess stays undoable.
func (r *run) protectNone() int {
	p := r.proc
	l, why := r.contain(policy.None, p.Argv, p.Environ)
	if l != nil {
		r.beforePlain(l.exposed)
		return p.execAs(l.path, l.argv, l.env, r.src)
	}
	if why != sudoKept {
		r.noLimitNote(why)
	}
	return r.protectKept()
}

// protectKept protects a read-only step that cannot be held to its class
// as a workspace step: its workspace checkpointed, so that a wrong guess
// stays undoable ([RouteSudo], or no limit here).
func (r *run) protectKept() int {
	p := r.proc
	start := time.Now()
	r.dec.Class = policy.Git
	if len(r.dec.Roots) == 0 {
		r.dec.Roots = classify.WorkspaceRoots(r.cwd, p.Getenv("HOME"))
	}
	return r.protectGit(r.record(start, policy.Git), start)
}

// sudoKept is contain's reason for not holding a step that runs sudo
// with Landlock.
const sudoKept = "Landlock would stop its sudo"

// noLimitNote says, once per state directory, that steps cannot be held
// to their class here.
func (r *run) noLimitNote(why string) {
	if r.stateDir == "" {
		return
	}
	dir := filepath.Join(r.stateDir, "run")
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "no-limit"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return // said already
	}
	fmt.Fprintln(f, why)
	f.Close()
	r.proc.say("note: the kernel offers no way here to hold a step to its class (" + why + "): read-only steps get a workspace checkpoint instead; undoctl doctor says more")
}

// release discards the limit's copy, if it has one.
func (l *limit) release() {
	if l != nil && l.copy != nil {
		l.copy.Discard()
		l.copy = nil
	}
}

// beyond is what a workspace step wrote beyond its workspace and
// scratch paths, as its view caught it: it needed class fork.
type beyond struct {
	plans []fork.Plan
	// paths are what it wrote, absolute.
	paths []string
	// err is set when some of it cannot be committed (a device node).
	err error
}

// caught stops the view from taking more writes (a process the step
// left running keeps its limit: its writes beyond the shared paths fail
// from now on) and returns what the step wrote beyond them, or nil.
// roots are the workspace roots (a commit takes what the step wrote
// there even under an excluded tree such as /tmp).
func (l *limit) caught(roots []string) *beyond {
	if l == nil || l.copy == nil {
		return nil
	}
	// Read-only for everyone, the layers included: the superblock of
	// the copy's tmpfs.
	if err := unix.Mount("", l.copy.Dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return &beyond{err: fmt.Errorf("stop the view's writes: %w", err)}
	}
	return l.diff(roots, l.copy.T0)
}

// diff returns what the view's layers hold that the machine does not, or
// nil; a path of the machine changed at or after t0 is a conflict.
func (l *limit) diff(roots []string, t0 time.Time) *beyond {
	b := &beyond{}
	for _, o := range l.copy.Overlays {
		if emptyDir(o.Upper) || mountGone(o.Mount) {
			// Nothing written over this mount, which the machine may
			// no longer have (a tmpfs unmounted since the view was
			// made); or the machine dropped it, directory and all, so
			// that what the view wrote over it has nowhere to go.
			continue
		}
		plan, err := fork.Diff(fork.Layer{Target: o.Mount, Upper: o.Upper, T0: t0},
			fork.DiffOptions{Seeded: l.copy.Seeded, Mirrored: l.copy.Mirrored, Include: roots})
		var re *fork.RefusedError
		if errors.As(err, &re) {
			b.err = err
			for _, p := range re.Problems {
				b.paths = append(b.paths, p.Path)
			}
			continue
		}
		if err != nil {
			b.err = err
			continue
		}
		if t0.After(l.copy.T0) {
			plan.Ops = since(plan, t0)
		}
		if len(plan.Ops) == 0 {
			continue
		}
		b.plans = append(b.plans, plan)
		for _, op := range plan.Ops {
			if op.Path != "." {
				b.paths = append(b.paths, filepath.Join(o.Mount, op.Path))
			}
		}
	}
	if len(b.plans) == 0 && b.err == nil {
		return nil
	}
	b.paths = topPaths(b.paths)
	return b
}

// since keeps the operations of plan whose entry in the upper directory
// changed at or after t0: in a session's view, those the line that began
// then made. An earlier line's entry that now differs from the machine
// differs because the machine changed since; it is not this line's.
func since(plan fork.Plan, t0 time.Time) []fork.Op {
	var kept []fork.Op
	for _, op := range plan.Ops {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(plan.Upper, op.Path), &st) == nil && time.Unix(st.Ctim.Unix()).Before(t0) {
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

// topPaths keeps the paths that are not beneath another one of the list
// (a directory made stands for what it holds), at most 50.
func topPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		if !under(p, out) {
			out = append(out, p)
		}
		if len(out) == 50 {
			break
		}
	}
	return out
}

// record is the journal's account of b, done as how.
func (b *beyond) record(how string) *journal.Escalation {
	return &journal.Escalation{To: policy.Fork.String(), Paths: b.paths, How: how}
}

// stderrTail keeps the end of what a step writes on standard error, so
// that a step stopped by a hard limit can be told which paths it was
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

// blockedHint says, after a workspace step failed under a hard limit
// (Landlock, without root), where the limit stopped it and how to run it
// as a machine step; "" when its error output names no path outside
// what it could write. A hard limit refuses the write: only the step's
// own messages tell where.
func (r *run) blockedHint(l *limit, stderr []byte) string {
	var paths []string
	for _, p := range enforce.Blocked(stderr) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.cwd, p)
		}
		if !under(p, l.writable) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return ""
	}
	return fmt.Sprintf("this step ran allowed to write only its workspace and scratch paths (class git), and was stopped writing %s: it needs class fork; run it as a machine step with: undoctl run --fork -- %s",
		clip(strings.Join(paths, ", "), 200), r.rerunCommand())
}

// rerunCommand is the step as undoctl run takes it.
func (r *run) rerunCommand() string {
	switch r.inv.Mode {
	case modeCommand:
		return "bash -c " + shquote.Word(r.inv.Command)
	}
	var q []string
	for _, a := range r.proc.Argv {
		q = append(q, shquote.Word(a))
	}
	return strings.Join(q, " ")
}

// under reports whether p is within one of dirs.
func under(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return pathglob.Within(p, d) })
}

// mountGone reports whether the machine no longer has the directory
// mount (a tmpfs unmounted and removed since a view was made over it).
func mountGone(mount string) bool {
	_, err := os.Lstat(mount)
	return mount != "/" && errors.Is(err, os.ErrNotExist)
}

// emptyDir reports whether dir holds no entry.
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
