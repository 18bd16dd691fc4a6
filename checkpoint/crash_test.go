package checkpoint

// Crash, concurrency and bad-input tests. The test binary doubles as the
// child process these tests kill: TestMain runs crashChildMain instead of
// the tests when UNDOSH_CHECKPOINT_CHILD names a mode. A child reports
// each step on stdout, one line at a time, and the parent synchronises on
// those lines, never on sleeps.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

const (
	crashChildEnv  = "UNDOSH_CHECKPOINT_CHILD" // checkpoint | restore | concurrent | hold | flock
	crashWSEnv     = "UNDOSH_CRASH_WS"
	crashStateEnv  = "UNDOSH_CRASH_STATE"
	crashGenEnv    = "UNDOSH_CRASH_GEN"    // first generation (checkpoint, hold)
	crashGCEnv     = "UNDOSH_CRASH_GC"     // "1": gc after every other checkpoint (checkpoint)
	crashTargetEnv = "UNDOSH_CRASH_TARGET" // "A B": the checkpoints restore alternates between
	crashNEnv      = "UNDOSH_CRASH_N"      // checkpoints to take (concurrent)
	crashLockEnv   = "UNDOSH_CRASH_LOCK"   // the lock file (flock)
	crashNobodyEnv = "UNDOSH_CRASH_NOBODY" // set when a test re-runs itself as nobody
	crashSeedEnv   = "UNDOSH_CRASH_SEED"   // overrides the seed of the kill schedule
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(crashChildEnv); mode != "" {
		os.Exit(crashChildMain(mode))
	}
	os.Exit(m.Run())
}

// crashSay writes one protocol line. A parent that has gone away closes
// the pipe, and the write's SIGPIPE ends the child.
func crashSay(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// crashChildMain is the child process. It returns the exit code; it never
// returns in the looping modes, where the parent kills it.
func crashChildMain(mode string) int {
	fail := func(err error) int {
		crashSay("error %s", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	ws, state := os.Getenv(crashWSEnv), os.Getenv(crashStateEnv)
	if mode == "flock" {
		f, err := os.OpenFile(os.Getenv(crashLockEnv), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fail(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			return fail(err)
		}
		crashSay("locked")
		_, _ = io.Copy(io.Discard, os.Stdin) // until killed or orphaned
		return 3
	}
	o := Options{StateDir: state}
	if mode == "hold" {
		o.Logger = slog.New(crashHoldHandler{})
	}
	s, err := Open(ws, o)
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	gen, _ := strconv.Atoi(os.Getenv(crashGenEnv))
	switch mode {
	case "checkpoint":
		universe := crashGenPaths()
		gc := os.Getenv(crashGCEnv) == "1"
		for g := gen; ; g++ {
			if err := crashApply(ws, crashGen(g), universe); err != nil {
				return fail(err)
			}
			crashSay("start %d", g)
			r, err := s.Checkpoint(fmt.Sprintf("gen %d", g))
			if err != nil {
				return fail(err)
			}
			crashSay("done %d %s", g, r.ID)
			if gc && g%2 == 1 {
				crashSay("gcstart")
				if _, err := s.GC(GCOptions{MaxAge: time.Hour, MaxBytes: 1 << 20}); err != nil {
					return fail(err)
				}
				crashSay("gcdone")
			}
		}
	case "restore":
		targets := strings.Fields(os.Getenv(crashTargetEnv))
		for i := 0; ; i++ {
			crashSay("start %d", i)
			r, err := s.Restore(targets[i%2])
			if err != nil {
				return fail(err)
			}
			crashSay("done %d %s", i, r.Before)
		}
	case "concurrent":
		n, _ := strconv.Atoi(os.Getenv(crashNEnv))
		crashSay("ready")
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil || line != "go\n" {
			return fail(fmt.Errorf("waiting for go: %q, %v", line, err))
		}
		for i := range n {
			r, err := s.Checkpoint(fmt.Sprintf("child %d", i))
			if err != nil {
				return fail(err)
			}
			crashSay("done %t %s", r.Changed, r.ID)
		}
		return 0
	case "hold":
		if err := crashApply(ws, crashGen(gen), crashGenPaths()); err != nil {
			return fail(err)
		}
		// crashHoldHandler stops the checkpoint inside the lock.
		if _, err := s.Checkpoint("held"); err != nil {
			return fail(err)
		}
		return fail(errors.New("the checkpoint logged nothing"))
	}
	return fail(fmt.Errorf("unknown child mode %q", mode))
}

// crashHoldHandler receives the store's debug log in the "hold" child.
// The "checkpoint" record is logged after the ref moved and before the
// lock is released: the child announces it and stops there.
type crashHoldHandler struct{}

func (crashHoldHandler) Enabled(context.Context, slog.Level) bool { return true }

func (crashHoldHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "checkpoint" {
		return nil
	}
	id := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "id" {
			id = a.Value.String()
		}
		return true
	})
	crashSay("inlock %s", id)
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed or orphaned
	os.Exit(3)
	return nil
}

func (h crashHoldHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h crashHoldHandler) WithGroup(string) slog.Handler      { return h }

// crashProc is a running child.
type crashProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // closed when the child's stdout closes
	stderr *crashBuffer
	seen   []string // every line read
	ended  bool
}

type crashBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *crashBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *crashBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// crashSpawn starts the test binary as a child in mode.
func crashSpawn(t *testing.T, mode string, env ...string) *crashProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), crashChildEnv+"="+mode)
	cmd.Env = append(cmd.Env, env...)
	p := &crashProc{t: t, cmd: cmd, lines: make(chan string, 256), stderr: &crashBuffer{}}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		if !p.ended {
			_ = cmd.Process.Kill()
			for range p.lines {
			}
			_ = cmd.Wait()
		}
	})
	return p
}

// crashSilence is how long a child may say nothing before the test gives
// up on it. It is a deadline for failing, not a way to order events.
const crashSilence = 2 * time.Minute

// next returns the child's next line. It fails the test when the child
// ends or reports an error.
func (p *crashProc) next() string {
	p.t.Helper()
	l, _ := p.nextOr(nil)
	return l
}

// nextOr is next, but returns false instead when timer fires first.
func (p *crashProc) nextOr(timer <-chan time.Time) (string, bool) {
	p.t.Helper()
	select {
	case <-timer:
		return "", false
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("child ended early: %v\nstdout:\n%s\nstderr:\n%s", p.wait(), strings.Join(p.seen, "\n"), p.stderr)
		}
		p.seen = append(p.seen, l)
		if strings.HasPrefix(l, "error ") {
			p.t.Fatalf("child failed: %s\nstderr:\n%s", l, p.stderr)
		}
		return l, true
	case <-time.After(crashSilence):
		p.t.Fatalf("child said nothing for %v\nstdout:\n%s\nstderr:\n%s", crashSilence, strings.Join(p.seen, "\n"), p.stderr)
	}
	return "", false
}

// expect reads lines until one starts with prefix.
func (p *crashProc) expect(prefix string) string {
	p.t.Helper()
	for {
		if l := p.next(); strings.HasPrefix(l, prefix) {
			return l
		}
	}
}

// wait reaps the child after its stdout closed.
func (p *crashProc) wait() error {
	if p.ended {
		return nil
	}
	p.ended = true
	for range p.lines {
	}
	return p.cmd.Wait()
}

// kill sends SIGKILL, reaps the child, and returns the lines it wrote
// that were not read yet. It fails the test if the child had already
// ended by itself.
func (p *crashProc) kill() []string {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	var rest []string
	for l := range p.lines {
		rest = append(rest, l)
	}
	p.seen = append(p.seen, rest...)
	p.ended = true
	err := p.cmd.Wait()
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("child was not killed by SIGKILL but ended with %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(p.seen, "\n"), p.stderr)
	}
	for _, l := range rest {
		if strings.HasPrefix(l, "error ") {
			p.t.Fatalf("child failed before the kill: %s\nstderr:\n%s", l, p.stderr)
		}
	}
	return rest
}

// The workspace of the crash tests: a fixed base of a few hundred files,
// plus paths that change with a generation number g. crashGen(g) says what
// those paths hold, in snapshotFS's format, so the state a checkpoint of
// generation g must restore is known without having watched it being made.

const crashBigSize = 256 << 10

var crashBigData = sync.OnceValue(func() [3][2]string {
	var out [3][2]string
	for v := range 3 {
		for k := range 2 {
			r := rand.New(rand.NewPCG(uint64(v)+1, uint64(k)+7))
			b := make([]byte, crashBigSize)
			for i := 0; i < len(b); i += 8 {
				u := r.Uint64()
				for j := 0; j < 8 && i+j < len(b); j++ {
					b[i+j] = byte(u >> (8 * j))
				}
			}
			out[v][k] = string(b)
		}
	}
	return out
})

func crashGen(g int) map[string]string {
	big := crashBigData()
	m := map[string]string{
		"counter.txt": fmt.Sprintf("file-:%d\n", g),
		"big":         "dir",
		"big/b0.bin":  "file-:" + big[g%3][0],
		"big/b1.bin":  "file-:" + big[(g+1)%3][1],
		"flip":        "dir",
		"opt":         "dir",
		"dirs":        "dir",
		"many":        "dir",
	}
	m["run.sh"] = "file-:#!/bin/sh\necho hi\n"
	if g%2 == 0 {
		m["run.sh"] = "filex:#!/bin/sh\necho hi\n"
		m["flip/x"] = "file-:even\n"
	} else {
		m["flip/x"] = "link:../counter.txt"
	}
	m[fmt.Sprintf("opt/o%d.txt", g%3)] = fmt.Sprintf("file-:option %d\n", g%3)
	m[fmt.Sprintf("dirs/d%d", g%2)] = "dir"
	for i := range 40 {
		m[fmt.Sprintf("many/f%03d.txt", i)] = fmt.Sprintf("file-:%d %d\n", i, (g+i)%3)
	}
	return m
}

// crashGenPaths lists every path some generation holds.
func crashGenPaths() []string {
	set := map[string]bool{}
	for g := range 6 {
		for p := range crashGen(g) {
			set[p] = true
		}
	}
	var out []string
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// crashApply makes the paths of universe hold what want says.
func crashApply(ws string, want map[string]string, universe []string) error {
	for _, p := range slices.Backward(universe) {
		if _, ok := want[p]; !ok {
			if err := os.RemoveAll(filepath.Join(ws, p)); err != nil {
				return err
			}
		}
	}
	keys := make([]string, 0, len(want))
	for p := range want {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	for _, p := range keys {
		v, full := want[p], filepath.Join(ws, filepath.FromSlash(p))
		fi, statErr := os.Lstat(full)
		switch {
		case v == "dir":
			if statErr == nil && !fi.IsDir() {
				if err := os.RemoveAll(full); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(full, 0o755); err != nil {
				return err
			}
		case strings.HasPrefix(v, "link:"):
			if err := os.RemoveAll(full); err != nil {
				return err
			}
			if err := os.Symlink(v[len("link:"):], full); err != nil {
				return err
			}
		case strings.HasPrefix(v, "file-:"), strings.HasPrefix(v, "filex:"):
			if statErr == nil && !fi.Mode().IsRegular() {
				if err := os.RemoveAll(full); err != nil {
					return err
				}
			}
			perm := os.FileMode(0o644)
			if v[4] == 'x' {
				perm = 0o755
			}
			if err := os.WriteFile(full, []byte(v[len("file-:"):]), perm); err != nil {
				return err
			}
			if err := os.Chmod(full, perm); err != nil {
				return err
			}
		default:
			return fmt.Errorf("crashApply: bad value for %q", p)
		}
	}
	return nil
}

// crashBase writes the fixed part of the workspace: 200 small files in 20
// directories, the workspace's own .git and a nested one, symlinks, a
// name starting with "~" and an empty directory.
func crashBase(t *testing.T, ws string, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	for d := range 20 {
		for f := range 10 {
			n := r.IntN(40) + 1
			write(t, ws, fmt.Sprintf("src/pkg%02d/file%02d.go", d, f), strings.Repeat(fmt.Sprintf("// %d %d %d\n", d, f, r.Uint32()), n))
		}
	}
	write(t, ws, ".git/HEAD", "ref: refs/heads/main\n")
	write(t, ws, ".git/config", "[core]\n\tbare = false\n")
	write(t, ws, "vendor/lib/.git/HEAD", "ref: refs/heads/dev\n")
	write(t, ws, "vendor/lib/lib.go", "package lib\n")
	write(t, ws, "~tilde.txt", "tilde\n")
	for _, l := range [][2]string{{"src/link", "pkg00"}, {"dangling", "no/such/file"}} {
		if err := os.Symlink(l[1], filepath.Join(ws, l[0])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(ws, "empty/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func crashMerge(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// crashDigest shortens big contents so that a diff stays readable.
func crashDigest(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if len(v) > 100 {
			sum := sha256.Sum256([]byte(v))
			v = fmt.Sprintf("%q… (%d bytes, sha256 %x)", v[:20], len(v), sum[:8])
		}
		out[k] = v
	}
	return out
}

func crashSameFS(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	if d := cmp.Diff(crashDigest(want), crashDigest(got)); d != "" {
		t.Fatalf("%s (-want +got):\n%s", what, d)
	}
}

// crashNoDiff fails unless the workspace matches checkpoint id.
func crashNoDiff(t *testing.T, s *Store, id, what string) {
	t.Helper()
	d, err := s.Diff(id, "")
	if err != nil {
		t.Fatalf("%s: diff %s: %v", what, short0(id), err)
	}
	if len(d) != 0 {
		t.Fatalf("%s: the workspace differs from checkpoint %s: %+v", what, short0(id), d)
	}
}

func short0(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func crashCheckClean(t *testing.T, s *Store, what string) CheckResult {
	t.Helper()
	chk, err := s.Check()
	if err != nil {
		t.Fatalf("%s: check: %v", what, err)
	}
	if len(chk.Problems) != 0 {
		t.Fatalf("%s: check found problems: %q", what, chk.Problems)
	}
	return chk
}

// crashTree returns the tree of checkpoint id.
func crashTree(t *testing.T, s *Store, id string) string {
	t.Helper()
	return crashTrees(t, s, []string{id})[0]
}

// crashTrees returns the trees of checkpoints ids, reading them through
// one view of the objects.
func crashTrees(t *testing.T, s *Store, ids []string) []string {
	t.Helper()
	st := s.objects()
	var out []string
	for _, id := range ids {
		c, err := object.GetCommit(st, plumbing.NewHash(id))
		if err != nil {
			t.Fatalf("read checkpoint %s: %v", short0(id), err)
		}
		out = append(out, c.TreeHash.String())
	}
	return out
}

// crashSeed is the seed of the kill schedule. Kill timing is still up to
// the scheduler; the seed fixes what the test aims at.
func crashSeed(t *testing.T) uint64 {
	seed := uint64(20240601)
	if v := os.Getenv(crashSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, v, err)
		}
		seed = n
	}
	t.Logf("kill schedule seed %d (set %s to change it)", seed, crashSeedEnv)
	return seed
}

// crashAvg keeps a running mean of a duration, for aiming random kills.
type crashAvg struct {
	sum time.Duration
	n   int
	def time.Duration
}

func (a *crashAvg) add(d time.Duration) { a.sum += d; a.n++ }

func (a *crashAvg) mean() time.Duration {
	if a.n == 0 {
		return a.def
	}
	return a.sum / time.Duration(a.n)
}

// crashDelay draws a delay in [0, 1.2*d].
func crashDelay(r *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(r.Int64N(int64(d)*6/5 + 1))
}

// crashDamageCache damages the stat cache in one of three ways and says
// how (or "" when there was no cache to damage).
func crashDamageCache(t *testing.T, s *Store, how int) string {
	t.Helper()
	name := s.cachePath()
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case 1:
		if err := os.Truncate(name, int64(len(data)/2)); err != nil {
			t.Fatal(err)
		}
		return "truncated"
	case 2:
		for _, i := range []int{len(data) / 3, len(data) / 2, len(data) - 1} {
			data[i] ^= 0xff
		}
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return "flipped"
	case 3:
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
		return "deleted"
	}
	return ""
}

func TestCrashDuringCheckpoint(t *testing.T) {
	t.Parallel()
	kills, perStore := 30, 3
	if testing.Short() {
		kills, perStore = 6, 3
	}
	r := rand.New(rand.NewPCG(crashSeed(t), 1))
	universe := crashGenPaths()
	ckAvg := crashAvg{def: 100 * time.Millisecond}
	gcAvg := crashAvg{def: 800 * time.Millisecond}
	var ws, state string
	var base map[string]string
	gen := 0
	strategies := map[string]int{}
	for kill := range kills {
		if kill%perStore == 0 {
			// A fresh store now and then keeps Check, which reads every
			// pack, from growing with the number of kills.
			ws, state = t.TempDir(), t.TempDir()
			crashBase(t, ws, uint64(kill))
			base = snapshotFS(t, ws, nil)
			if err := crashApply(ws, crashGen(gen), universe); err != nil {
				t.Fatal(err)
			}
			crashSameFS(t, "the workspace of generation "+strconv.Itoa(gen), crashMerge(base, crashGen(gen)), snapshotFS(t, ws, nil))
		}
		strategy := r.IntN(5)
		gc := "0"
		if strategy == 4 {
			gc = "1"
		}
		p := crashSpawn(t, "checkpoint", crashWSEnv+"="+ws, crashStateEnv+"="+state, crashGenEnv+"="+strconv.Itoa(gen), crashGCEnv+"="+gc)
		nth := r.IntN(2) + 1
		var timer <-chan time.Time
		var name string
		switch strategy {
		case 0:
			name = "at start"
		case 1:
			name = "after start"
		case 2:
			name = "at done"
		case 3:
			name = "after spawn"
			// Anywhere from start-up to the middle of the second checkpoint.
			timer = time.After(crashDelay(r, 2*ckAvg.mean()+200*time.Millisecond))
		case 4:
			name = "during gc"
		}
		strategies[name]++
		var lastDone string
		maxGen := gen - 1
		starts, dones := 0, 0
		var startAt, gcAt time.Time
		var rest []string
	run:
		for {
			l, ok := p.nextOr(timer)
			if !ok {
				rest = p.kill()
				break run
			}
			switch f := strings.Fields(l); f[0] {
			case "start":
				starts++
				startAt = time.Now()
				maxGen, _ = strconv.Atoi(f[1])
				if starts == nth && strategy == 0 {
					rest = p.kill()
					break run
				}
				if starts == nth && strategy == 1 {
					timer = time.After(crashDelay(r, ckAvg.mean()))
				}
			case "done":
				dones++
				ckAvg.add(time.Since(startAt))
				lastDone = f[2]
				if dones == nth && strategy == 2 {
					rest = p.kill()
					break run
				}
			case "gcstart":
				gcAt = time.Now()
				if strategy == 4 {
					timer = time.After(crashDelay(r, gcAvg.mean()))
				}
			case "gcdone":
				gcAvg.add(time.Since(gcAt))
			}
		}
		for _, l := range rest {
			if f := strings.Fields(l); f[0] == "done" {
				lastDone = f[2]
			} else if f[0] == "start" {
				maxGen, _ = strconv.Atoi(f[1])
			}
		}
		gen = maxGen + 1
		what := fmt.Sprintf("kill %d (%s)", kill, name)

		s, err := Open(ws, Options{StateDir: state})
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		damage := crashDamageCache(t, s, kill%4)
		chk := crashCheckClean(t, s, what+", stat cache "+damage)
		if (damage == "truncated" || damage == "flipped") && len(chk.Notes) == 0 {
			t.Errorf("%s: check says nothing of a %s stat cache", what, damage)
		}
		log, err := s.Log()
		if err != nil {
			t.Fatalf("%s: log: %v", what, err)
		}
		if lastDone != "" && !slices.ContainsFunc(log, func(i Info) bool { return i.ID == lastDone }) {
			t.Fatalf("%s: checkpoint %s was announced but is not in the log %+v", what, short0(lastDone), log)
		}
		now := snapshotFS(t, ws, nil)
		after, err := s.Checkpoint(fmt.Sprintf("after kill %d", kill))
		if err != nil {
			t.Fatalf("%s: the next checkpoint: %v", what, err)
		}
		if damage != "" && after.Hashed != after.Files {
			t.Fatalf("%s: with the stat cache %s the next checkpoint hashed %d of %d files, want all", what, damage, after.Hashed, after.Files)
		}
		// Back to the newest checkpoint the child made, then forward again.
		log, err = s.Log()
		if err != nil {
			t.Fatalf("%s: log: %v", what, err)
		}
		var gens []Info
		for _, i := range log {
			if strings.HasPrefix(i.Message, "gen ") {
				gens = append(gens, i)
			}
		}
		check := gens
		if len(gens) > 1 && kill%5 == 0 {
			check = []Info{gens[0], gens[1+r.IntN(len(gens)-1)]}
		} else if len(gens) > 1 {
			check = gens[:1]
		}
		for _, c := range check {
			g, err := strconv.Atoi(strings.TrimPrefix(c.Message, "gen "))
			if err != nil {
				t.Fatalf("%s: checkpoint message %q", what, c.Message)
			}
			if _, err := s.Restore(c.ID); err != nil {
				t.Fatalf("%s: restore %s (gen %d): %v", what, short0(c.ID), g, err)
			}
			crashSameFS(t, fmt.Sprintf("%s: after restoring gen %d", what, g), crashMerge(base, crashGen(g)), snapshotFS(t, ws, nil))
		}
		if len(check) == 0 {
			// The child made no checkpoint: change the workspace some other
			// way, so that the restore below has work to do.
			if err := crashApply(ws, crashGen(gen), universe); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Restore(after.ID); err != nil {
			t.Fatalf("%s: restore the checkpoint taken after the kill: %v", what, err)
		}
		crashSameFS(t, what+": after restoring the newest checkpoint", now, snapshotFS(t, ws, nil))
		crashNoDiff(t, s, after.ID, what)
		if kill%perStore == perStore-1 {
			crashCheckClean(t, s, what+", at the end")
		}
		s.Close()
	}
	t.Logf("%d kills: %v; mean checkpoint %v, gc %v", kills, strategies, ckAvg.mean(), gcAvg.mean())
}

func TestCrashDuringRestore(t *testing.T) {
	t.Parallel()
	kills, perStore := 30, 3
	if testing.Short() {
		kills, perStore = 6, 3
	}
	r := rand.New(rand.NewPCG(crashSeed(t), 2))
	universe := crashGenPaths()
	avg := crashAvg{def: 150 * time.Millisecond}
	lifeAvg := crashAvg{def: 300 * time.Millisecond}
	var ws, state string
	var s *Store
	var a, b Result
	var snapA, snapB map[string]string
	var allowed map[string]bool
	strategies := map[string]int{}
	for kill := range kills {
		if kill%perStore == 0 {
			ws, state = t.TempDir(), t.TempDir()
			crashBase(t, ws, uint64(kill))
			base := snapshotFS(t, ws, nil)
			s = openStore(t, ws, Options{StateDir: state})
			var err error
			if err := crashApply(ws, crashGen(0), universe); err != nil {
				t.Fatal(err)
			}
			if a, err = s.Checkpoint("A"); err != nil {
				t.Fatal(err)
			}
			if err := crashApply(ws, crashGen(1), universe); err != nil {
				t.Fatal(err)
			}
			if b, err = s.Checkpoint("B"); err != nil {
				t.Fatal(err)
			}
			snapA, snapB = crashMerge(base, crashGen(0)), crashMerge(base, crashGen(1))
			crashSameFS(t, "workspace B", snapB, snapshotFS(t, ws, nil))
			allowed = map[string]bool{crashTree(t, s, a.ID): true, crashTree(t, s, b.ID): true}
		}
		// The workspace is at B, or a mix of A and B that a killed
		// restore left: the child restores A, B, A, …
		spawned := time.Now()
		p := crashSpawn(t, "restore", crashWSEnv+"="+ws, crashStateEnv+"="+state, crashTargetEnv+"="+a.ID+" "+b.ID)
		strategy := r.IntN(4)
		nth := r.IntN(2) + 1
		var timer <-chan time.Time
		name := [...]string{"at start", "after start", "at done", "after spawn"}[strategy]
		strategies[name]++
		if strategy == 3 {
			timer = time.After(crashDelay(r, 2*avg.mean()+200*time.Millisecond))
		}
		starts, dones := 0, 0
		var startAt time.Time
	run:
		for {
			l, ok := p.nextOr(timer)
			if !ok {
				p.kill()
				break run
			}
			switch strings.Fields(l)[0] {
			case "start":
				starts++
				startAt = time.Now()
				if starts == nth && strategy == 0 {
					p.kill()
					break run
				}
				if starts == nth && strategy == 1 {
					timer = time.After(crashDelay(r, avg.mean()))
				}
			case "done":
				dones++
				avg.add(time.Since(startAt))
				if dones == nth && strategy == 2 {
					p.kill()
					break run
				}
			}
		}
		lifeAvg.add(time.Since(spawned))
		what := fmt.Sprintf("kill %d (%s)", kill, name)

		s2, err := Open(ws, Options{StateDir: state})
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		crashCheckClean(t, s2, what)
		// Every restore checkpointed the state it started from, which was
		// A or B (or a state this test recorded itself).
		log, err := s2.Log()
		if err != nil {
			t.Fatalf("%s: log: %v", what, err)
		}
		var ids []string
		for _, i := range log {
			ids = append(ids, i.ID)
		}
		trees := crashTrees(t, s2, ids)
		for n, i := range log {
			if tree := trees[n]; !allowed[tree] {
				t.Fatalf("%s: checkpoint %s (%q) holds a state that was never whole: tree %s", what, short0(i.ID), i.Message, short0(tree))
			}
		}
		// A killed restore leaves each path as A or B has it: files are
		// replaced whole, and nothing else is touched.
		now := snapshotFS(t, ws, nil)
		for path, v := range now {
			if strings.HasPrefix(filepath.Base(path), ".undosh-restore-") {
				continue // a killed restore's temp file
			}
			if v != snapA[path] && v != snapB[path] {
				t.Fatalf("%s: %q holds %s, which is neither A's %s nor B's %s", what, path,
					crashDigest(map[string]string{"": v})[""], crashDigest(map[string]string{"": snapA[path]})[""], crashDigest(map[string]string{"": snapB[path]})[""])
			}
		}
		for path, v := range snapA {
			if snapB[path] == v && now[path] != v {
				t.Fatalf("%s: %q, the same in A and B, holds %q", what, path, now[path])
			}
		}
		after, err := s2.Checkpoint(fmt.Sprintf("after kill %d", kill))
		if err != nil {
			t.Fatalf("%s: the next checkpoint: %v", what, err)
		}
		allowed[crashTree(t, s2, after.ID)] = true
		// Back to A or B, which the store must give exactly.
		target, want, name := a.ID, snapA, "A"
		if kill%2 == 1 {
			target, want, name = b.ID, snapB, "B"
		}
		res, err := s2.Restore(target)
		if err != nil {
			t.Fatalf("%s: restore %s: %v", what, name, err)
		}
		allowed[crashTree(t, s2, res.Before)] = true
		crashSameFS(t, what+": after restoring "+name, want, snapshotFS(t, ws, nil))
		// The newest checkpoint is the one taken after the kill: restoring
		// it gives back the state the kill left. The next child starts
		// from there, so it restores from mixed states too.
		res, err = s2.Restore(after.ID)
		if err != nil {
			t.Fatalf("%s: restore the checkpoint taken after the kill: %v", what, err)
		}
		allowed[crashTree(t, s2, res.Before)] = true
		crashSameFS(t, what+": after restoring the checkpoint taken after the kill", now, snapshotFS(t, ws, nil))
		crashNoDiff(t, s2, after.ID, what)
		if kill%perStore == perStore-1 {
			crashCheckClean(t, s2, what+", at the end")
		}
		s2.Close()
	}
	t.Logf("%d kills: %v; mean restore %v, child life %v", kills, strategies, avg.mean(), lifeAvg.mean())
}

// crashResult is one checkpoint of TestConcurrentCheckpoints.
type crashResult struct {
	who     string
	id      string
	changed bool
}

func TestConcurrentCheckpoints(t *testing.T) {
	t.Parallel()
	t.Run("processes and goroutines", func(t *testing.T) {
		procs, goroutines, n := 4, 2, 5
		if testing.Short() {
			n = 3
		}
		ws, state := t.TempDir(), t.TempDir()
		crashBase(t, ws, 7)
		if err := crashApply(ws, crashGen(0), crashGenPaths()); err != nil {
			t.Fatal(err)
		}
		// Opened once first: concurrent first opens are tested below.
		s := openStore(t, ws, Options{StateDir: state})

		var mu sync.Mutex
		var results []crashResult
		ticks := make(chan struct{}, procs*n+goroutines*n)
		record := func(r crashResult) {
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
			ticks <- struct{}{}
		}
		// The mutator changes the workspace once for every checkpoint that
		// completes, while the others run.
		stop := make(chan struct{})
		mutated := make(chan error, 1)
		go func() {
			k := 0
			for {
				select {
				case <-stop:
					mutated <- nil
					return
				case <-ticks:
				}
				if err := crashMutate(ws, k); err != nil {
					mutated <- err
					return
				}
				k++
			}
		}()

		var kids []*crashProc
		for range procs {
			kids = append(kids, crashSpawn(t, "concurrent", crashWSEnv+"="+ws, crashStateEnv+"="+state, crashNEnv+"="+strconv.Itoa(n)))
		}
		for _, p := range kids {
			p.expect("ready")
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, goroutines*n+procs)
		for g := range goroutines {
			st, err := Open(ws, Options{StateDir: state})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer st.Close()
				<-start
				for i := range n {
					r, err := st.Checkpoint(fmt.Sprintf("goroutine %d.%d", g, i))
					if err != nil {
						errs <- fmt.Errorf("goroutine %d, checkpoint %d: %w", g, i, err)
						return
					}
					record(crashResult{fmt.Sprintf("goroutine %d", g), r.ID, r.Changed})
				}
			}()
		}
		for i, p := range kids {
			if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					l, ok := <-p.lines
					if !ok {
						if err := p.cmd.Wait(); err != nil {
							errs <- fmt.Errorf("child %d: %v\n%s", i, err, p.stderr)
						}
						p.ended = true
						return
					}
					f := strings.Fields(l)
					if f[0] != "done" || len(f) != 3 {
						errs <- fmt.Errorf("child %d: %s\n%s", i, l, p.stderr)
						continue
					}
					record(crashResult{fmt.Sprintf("child %d", i), f[2], f[1] == "true"})
				}
			}()
		}
		close(start)
		wg.Wait()
		close(stop)
		if err := <-mutated; err != nil {
			t.Fatal(err)
		}
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			t.FailNow()
		}
		if len(results) != (procs+goroutines)*n {
			t.Fatalf("%d checkpoints reported, want %d", len(results), (procs+goroutines)*n)
		}

		chk := crashCheckClean(t, s, "after the concurrent checkpoints")
		log, err := s.Log()
		if err != nil {
			t.Fatal(err)
		}
		if chk.Checkpoints != len(log) {
			t.Errorf("check counts %d checkpoints, the log %d", chk.Checkpoints, len(log))
		}
		// The log is one chain: each checkpoint's only parent is the next
		// entry, and the oldest has none.
		inLog := map[string]int{}
		for i, e := range log {
			if _, dup := inLog[e.ID]; dup {
				t.Fatalf("checkpoint %s is in the log twice", short0(e.ID))
			}
			inLog[e.ID] = i
			c, err := s.commit(plumbing.NewHash(e.ID))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if i+1 < len(log) {
				want = []string{log[i+1].ID}
			}
			var got []string
			for _, p := range c.ParentHashes {
				got = append(got, p.String())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("checkpoint %s has parents %v, want %v", short0(e.ID), got, want)
			}
		}
		// Every reported id is in the log; each new checkpoint was
		// reported as new exactly once, and every entry was reported new.
		newIDs := map[string]string{}
		for _, r := range results {
			if _, ok := inLog[r.id]; !ok {
				t.Errorf("%s reported %s (changed %t), which is not in the log", r.who, short0(r.id), r.changed)
			}
			if r.changed {
				if other, dup := newIDs[r.id]; dup {
					t.Errorf("%s and %s both reported %s as new", other, r.who, short0(r.id))
				}
				newIDs[r.id] = r.who
			}
		}
		for _, e := range log {
			if _, ok := newIDs[e.ID]; !ok {
				t.Errorf("log entry %s (%q) was never reported as new", short0(e.ID), e.Message)
			}
		}
		// Quiet now: the newest state round-trips.
		now := snapshotFS(t, ws, nil)
		last, err := s.Checkpoint("quiet")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Restore(log[len(log)-1].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Restore(last.ID); err != nil {
			t.Fatal(err)
		}
		crashSameFS(t, "after restoring the newest checkpoint", now, snapshotFS(t, ws, nil))
		t.Logf("%d checkpoints by %d processes and %d goroutines, %d new", len(results), procs, goroutines, len(log))
	})

	t.Run("first open", func(t *testing.T) {
		ws := t.TempDir()
		write(t, ws, "f", "x")
		for round := range 20 {
			state := t.TempDir()
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := Open(ws, Options{StateDir: state})
					if err == nil {
						_, err = s.Checkpoint("")
						s.Close()
					}
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("round %d: %v", round, err)
			}
		}
	})
}

// crashMutate makes change number k to the workspace.
func crashMutate(ws string, k int) error {
	p := func(format string, args ...any) string { return filepath.Join(ws, "mut", fmt.Sprintf(format, args...)) }
	if err := os.MkdirAll(filepath.Join(ws, "mut"), 0o755); err != nil {
		return err
	}
	switch k % 5 {
	case 0:
		return os.WriteFile(p("f%d", k%7), []byte(strconv.Itoa(k)), 0o644)
	case 1:
		return os.RemoveAll(p("f%d", (k+3)%7))
	case 2:
		if err := os.RemoveAll(p("d%d", (k+1)%3)); err != nil {
			return err
		}
		return os.MkdirAll(p("d%d/e", k%3), 0o755)
	case 3:
		return os.WriteFile(filepath.Join(ws, "counter.txt"), []byte(strconv.Itoa(k)), 0o644)
	default:
		if err := os.RemoveAll(p("l%d", k%2)); err != nil {
			return err
		}
		return os.Symlink(fmt.Sprintf("f%d", k%7), p("l%d", k%2))
	}
}

func TestStaleLock(t *testing.T) {
	t.Parallel()
	// probe says whether the store's lock is held, without waiting.
	probe := func(t *testing.T, s *Store) bool {
		f, err := os.OpenFile(filepath.Join(s.Dir(), "lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
			return false
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			t.Fatal(err)
		}
		return true
	}
	// waiting starts a checkpoint that must wait for the lock.
	type outcome struct {
		r   Result
		err error
	}
	waiting := func(s *Store) chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			r, err := s.Checkpoint("after the kill")
			ch <- outcome{r, err}
		}()
		return ch
	}
	finish := func(t *testing.T, ch chan outcome) Result {
		t.Helper()
		select {
		case o := <-ch:
			if o.err != nil {
				t.Fatalf("checkpoint after the holder was killed: %v", o.err)
			}
			return o.r
		case <-time.After(crashSilence):
			t.Fatalf("the lock of a killed process was not taken over in %v", crashSilence)
		}
		return Result{}
	}

	t.Run("killed in a checkpoint", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		crashBase(t, ws, 3)
		s := openStore(t, ws, Options{})
		p := crashSpawn(t, "hold", crashWSEnv+"="+ws, crashStateEnv+"="+s.opts.StateDir, crashGenEnv+"=0")
		id := strings.TrimPrefix(p.expect("inlock "), "inlock ")
		if !probe(t, s) {
			t.Fatal("the child says it is inside a checkpoint, but the store is not locked")
		}
		ch := waiting(s)
		select {
		case o := <-ch:
			t.Fatalf("a checkpoint finished while another process held the lock: %+v, %v", o.r, o.err)
		default:
		}
		p.kill()
		r := finish(t, ch)
		// The child had moved the ref before it was killed, and the
		// workspace has not changed since.
		if r.Changed || !strings.HasPrefix(r.ID, id) || len(id) < 12 {
			t.Fatalf("after the kill: %+v, want the child's checkpoint %s unchanged", r, id)
		}
		crashCheckClean(t, s, "after the kill")
		crashNoDiff(t, s, r.ID, "after the kill")
	})

	t.Run("killed holding flock", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		write(t, ws, "a.txt", "a")
		s := openStore(t, ws, Options{})
		p := crashSpawn(t, "flock", crashLockEnv+"="+filepath.Join(s.Dir(), "lock"))
		p.expect("locked")
		if !probe(t, s) {
			t.Fatal("the child says it holds the lock, but the store is not locked")
		}
		ch := waiting(s)
		select {
		case o := <-ch:
			t.Fatalf("a checkpoint finished while another process held the lock: %+v, %v", o.r, o.err)
		default:
		}
		p.kill()
		r := finish(t, ch)
		if !r.Changed {
			t.Fatalf("first checkpoint after the kill: %+v", r)
		}
		if probe(t, s) {
			t.Fatal("the store is still locked after the checkpoint")
		}
		crashCheckClean(t, s, "after the kill")
	})
}

// crashAsNobody lets a test that needs permissions to bite run as root:
// it re-runs the current test as the user nobody and reports its result.
// It returns true when the caller should run the test body itself.
func crashAsNobody(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	if os.Getenv(crashNobodyEnv) != "" {
		t.Fatal("started as nobody but running as root")
	}
	skip := func(err error) {
		t.Helper()
		t.Skipf("running as root, where chmod 000 leaves a file readable, and the test cannot re-run itself as nobody: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		skip(err)
	}
	dir, err := os.MkdirTemp("", "undosh-crash-nobody-")
	if err != nil {
		skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tmp := filepath.Join(dir, "tmp")
	bin := filepath.Join(dir, "checkpoint.test")
	data, err := os.ReadFile(exe)
	if err == nil {
		err = os.WriteFile(bin, data, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.Mkdir(tmp, 0o700)
	}
	if err == nil {
		err = os.Chown(tmp, 65534, 65534)
	}
	if err != nil {
		skip(err)
	}
	var parts []string
	for _, p := range strings.Split(t.Name(), "/") {
		parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
	}
	args := []string{"-test.run=" + strings.Join(parts, "/"), "-test.v", "-test.count=1"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), crashNobodyEnv+"=1", "TMPDIR="+tmp, "HOME="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) {
		skip(err)
	}
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "BUG: "); i >= 0 {
			t.Skip("as nobody: " + l[i:])
		}
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as nobody, the test did not pass:\n%s", out)
	}
	t.Logf("ran as nobody:\n%s", out)
	return false
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	leftOut := func(r Result, path string) string {
		for _, l := range r.LeftOut {
			if l.Path == path {
				return l.Reason
			}
		}
		return ""
	}

	t.Run("unreadable_file_kept", func(t *testing.T) {
		t.Parallel()
		if !crashAsNobody(t) {
			return
		}
		ws := t.TempDir()
		write(t, ws, "a.txt", "a")
		s := openStore(t, ws, Options{})
		a, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		write(t, ws, "secret", "mine")
		write(t, ws, "locked/in.txt", "inside")
		for _, p := range []string{"secret", "locked"} {
			if err := os.Chmod(filepath.Join(ws, p), 0); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(ws, "locked"), 0o755) })
		r, err := s.Checkpoint("")
		if err != nil {
			t.Fatalf("checkpoint with unreadable paths: %v", err)
		}
		for _, p := range []string{"secret", "locked"} {
			if got := leftOut(r, p); got != "unreadable" {
				t.Errorf("%s left out as %q, want \"unreadable\" (left out: %+v)", p, got, r.LeftOut)
			}
		}
		res, err := s.Restore(a.ID)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		if slices.Contains(res.Removed, "secret") || slices.Contains(res.Removed, "locked/") {
			t.Errorf("restore says it removed unreadable paths: %+v", res)
		}
		for _, p := range []string{"secret", "locked"} {
			fi, err := os.Lstat(filepath.Join(ws, p))
			if err != nil {
				t.Fatalf("restore removed the unreadable %s: %v", p, err)
			}
			if fi.Mode().Perm() != 0 {
				t.Errorf("restore changed the mode of %s to %v", p, fi.Mode())
			}
			if err := os.Chmod(filepath.Join(ws, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		snap := snapshotFS(t, ws, nil)
		if snap["secret"] != "filex:mine" || snap["locked/in.txt"] != "file-:inside" {
			t.Fatalf("unreadable paths changed by restore: %q, %q", snap["secret"], snap["locked/in.txt"])
		}
	})

	t.Run("unreadable_file_not_counted", func(t *testing.T) {
		t.Parallel()
		if !crashAsNobody(t) {
			return
		}
		ws := t.TempDir()
		write(t, ws, "a.txt", "a")
		write(t, ws, "secret", "mine")
		if err := os.Chmod(filepath.Join(ws, "secret"), 0); err != nil {
			t.Fatal(err)
		}
		s := openStore(t, ws, Options{})
		r, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		log, err := s.Log()
		if err != nil {
			t.Fatal(err)
		}
		if r.Files != 1 || log[0].Files != 1 || log[0].LeftOut != 1 {
			t.Fatalf("checkpoint of one readable and one unreadable file: result %d files, log %+v; want 1 file and 1 left out", r.Files, log[0])
		}
	})

	t.Run("unreadable_file_not_overwritten", func(t *testing.T) {
		t.Parallel()
		if !crashAsNobody(t) {
			return
		}
		ws := t.TempDir()
		write(t, ws, "secret", "v1")
		write(t, ws, "locked/in.txt", "v1")
		s := openStore(t, ws, Options{})
		a, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		write(t, ws, "secret", "v2, in no checkpoint")
		write(t, ws, "locked/in.txt", "v2, in no checkpoint")
		for _, p := range []string{"secret", "locked"} {
			if err := os.Chmod(filepath.Join(ws, p), 0); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(ws, "locked"), 0o755) })
		if _, err := s.Restore(a.ID); err != nil {
			t.Fatalf("restore: %v", err)
		}
		for _, p := range []string{"secret", "locked"} {
			if err := os.Chmod(filepath.Join(ws, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		snap := snapshotFS(t, ws, nil)
		if snap["secret"] != "filex:v2, in no checkpoint" || snap["locked/in.txt"] != "file-:v2, in no checkpoint" {
			t.Fatalf("restore overwrote unreadable files: secret %q, locked/in.txt %q", snap["secret"], snap["locked/in.txt"])
		}
	})

	t.Run("too_large_file_not_overwritten", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		write(t, ws, "f", "small")
		s := openStore(t, ws, Options{MaxFileSize: 100})
		a, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("big ", 100)
		write(t, ws, "f", big)
		res, err := s.Restore(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := snapshotFS(t, ws, nil)["f"]; got != "file-:"+big {
			t.Fatalf("restore wrote %q over a file too large to checkpoint (%+v)", got, res)
		}
	})

	t.Run("special_files", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		write(t, ws, "a.txt", "a")
		s := openStore(t, ws, Options{})
		a, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(ws, "sock")}); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		write(t, ws, "b.txt", "b")
		r, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"fifo", "sock"} {
			if got := leftOut(r, p); got != "special file" {
				t.Errorf("%s left out as %q, want \"special file\" (left out: %+v)", p, got, r.LeftOut)
			}
		}
		if r.Files != 2 {
			t.Errorf("checkpoint recorded %d files, want 2", r.Files)
		}
		if _, err := s.Restore(a.ID); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]os.FileMode{"fifo": os.ModeNamedPipe, "sock": os.ModeSocket} {
			fi, err := os.Lstat(filepath.Join(ws, p))
			if err != nil || fi.Mode().Type() != want {
				t.Errorf("after restore %s is %v, %v; want it kept", p, fi, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(ws, "b.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("b.txt, added after the checkpoint, was not removed: %v", err)
		}
	})

	t.Run("root_and_home_refused", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		link := filepath.Join(t.TempDir(), "home-link")
		if err := os.Symlink(home, link); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, ws, home string }{
			{"root", "/", ""},
			{"root via dot-dot", "/tmp/..", ""},
			{"home", home, home},
			{"home via a symlinked workspace", link, home},
			{"home via a symlinked Home", home, link},
		} {
			state := t.TempDir()
			s, err := Open(tc.ws, Options{StateDir: state, Home: tc.home})
			if err == nil {
				s.Close()
				t.Errorf("%s: Open(%q) worked, want it refused", tc.name, tc.ws)
				continue
			}
			if !errors.Is(err, ErrBadWorkspace) || !strings.Contains(err.Error(), "hint:") {
				t.Errorf("%s: Open(%q): %v, want ErrBadWorkspace with a hint", tc.name, tc.ws, err)
			}
			if ents, _ := os.ReadDir(state); len(ents) != 0 {
				t.Errorf("%s: a refused Open wrote into the state directory", tc.name)
			}
		}
		if ents, _ := os.ReadDir(home); len(ents) != 0 {
			t.Errorf("a refused Open wrote into the home directory")
		}
		// A project inside the home directory is fine.
		write(t, home, "project/a.txt", "a")
		s := openStore(t, filepath.Join(home, "project"), Options{Home: home})
		if _, err := s.Checkpoint(""); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("state_inside_workspace_refused", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		write(t, ws, "a.txt", "a")
		if err := os.Mkdir(filepath.Join(ws, ".undosh"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, ws, state string }{
			{"new directory inside", ws, filepath.Join(ws, "state")},
			{"existing directory inside", ws, filepath.Join(ws, ".undosh")},
			{"the workspace itself", ws, ws},
			{"nested deeper inside", ws, filepath.Join(ws, "a", "b", "state")},
		} {
			before := snapshotFS(t, ws, nil)
			s, err := Open(tc.ws, Options{StateDir: tc.state})
			if err == nil {
				s.Close()
				t.Errorf("%s: Open worked with the state directory %s, want it refused", tc.name, tc.state)
			} else if !errors.Is(err, ErrBadWorkspace) || !strings.Contains(err.Error(), "hint:") {
				t.Errorf("%s: %v, want ErrBadWorkspace with a hint", tc.name, err)
			}
			if d := cmp.Diff(before, snapshotFS(t, ws, nil)); d != "" {
				t.Errorf("%s: Open changed the workspace (-before +after):\n%s", tc.name, d)
			}
		}
	})

	t.Run("state_inside_workspace_via_symlink_refused", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		write(t, ws, "a.txt", "a")
		other := t.TempDir()
		link := filepath.Join(other, "ws-link")
		if err := os.Symlink(ws, link); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, ws, state string }{
			{"workspace named by the symlink", link, filepath.Join(link, "state")},
			{"state named by the symlink", ws, filepath.Join(link, "state")},
		} {
			before := snapshotFS(t, ws, nil)
			s, err := Open(tc.ws, Options{StateDir: tc.state})
			if err == nil {
				s.Close()
				t.Errorf("%s: Open worked with the state directory %s, want it refused", tc.name, tc.state)
			} else if !errors.Is(err, ErrBadWorkspace) {
				t.Errorf("%s: %v, want ErrBadWorkspace", tc.name, err)
			}
			if d := cmp.Diff(before, snapshotFS(t, ws, nil)); d != "" {
				t.Errorf("%s: Open changed the workspace (-before +after):\n%s", tc.name, d)
			}
			os.RemoveAll(filepath.Join(ws, "state"))
		}
	})

	t.Run("odd_names_round_trip", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		names := []string{
			"new\nline", "\xff\xfe.bin", "tab\there", "dir\nwith/inner\xc3(", "back\\slash",
			"~tilde", "~~two", " space ", "-dash", "ünïcödé", "quote\"'", "star*?[", "dot.", "..dots",
			"cr\rret", "esc\x1b[31m",
		}
		for i, n := range names {
			write(t, ws, n, fmt.Sprintf("content %d\n%s\n", i, n))
		}
		if err := os.Symlink("target\nwith\xffodd bytes", filepath.Join(ws, "odd\nlink\xfe")); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(ws, "empty\xff\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		want := snapshotFS(t, ws, nil)
		s := openStore(t, ws, Options{})
		a, err := s.Checkpoint("odd\nmessage\xff")
		if err != nil {
			t.Fatal(err)
		}
		if len(a.LeftOut) != 0 || a.Files != len(names)+1 {
			t.Fatalf("checkpoint: %+v, want %d files and nothing left out", a, len(names)+1)
		}
		crashNoDiff(t, s, a.ID, "after the checkpoint")
		// The changes name the paths byte for byte.
		if err := os.Remove(filepath.Join(ws, "new\nline")); err != nil {
			t.Fatal(err)
		}
		write(t, ws, "\xff\xfe.bin", "changed")
		d, err := s.Diff(a.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range d {
			got = append(got, c.Kind+" "+c.Path)
		}
		sort.Strings(got)
		if want := []string{"modified \xff\xfe.bin", "removed new\nline"}; !slices.Equal(got, want) {
			t.Fatalf("diff gave %q, want %q", got, want)
		}
		for _, n := range names {
			if err := os.RemoveAll(filepath.Join(ws, strings.Split(n, "/")[0])); err != nil {
				t.Fatal(err)
			}
		}
		write(t, ws, "other\n\xff", "new")
		if _, err := s.Restore(a.ID); err != nil {
			t.Fatal(err)
		}
		crashSameFS(t, "after restore", want, snapshotFS(t, ws, nil))
		log, err := s.Log()
		if err != nil || len(log) == 0 || log[len(log)-1].Message != "odd" {
			t.Fatalf("log: %+v, %v", log, err)
		}
	})

	t.Run("long_names_round_trip", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		long := strings.Repeat("n", 255)
		write(t, ws, long, "file")
		write(t, ws, strings.Repeat("d", 255)+"/"+long, "deep")
		if err := os.Symlink("target", filepath.Join(ws, strings.Repeat("l", 255))); err != nil {
			t.Fatal(err)
		}
		want := snapshotFS(t, ws, nil)
		s := openStore(t, ws, Options{})
		a, err := s.Checkpoint("")
		if err != nil {
			t.Fatal(err)
		}
		ents, err := os.ReadDir(ws)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(ws, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Restore(a.ID); err != nil {
			t.Fatalf("restore: %v", err)
		}
		crashSameFS(t, "after restore", want, snapshotFS(t, ws, nil))
	})

	t.Run("full_disk", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("not root: mounting a small tmpfs to fill needs root")
		}
		state := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", state, "tmpfs", 0, "size=2m"); err != nil {
			t.Skipf("root, but cannot mount a tmpfs here: %v", err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(state, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", state, err)
			}
		})
		ws := t.TempDir()
		crashBase(t, ws, 11)
		s := openStore(t, ws, Options{StateDir: state})
		a, err := s.Checkpoint("A")
		if err != nil {
			t.Fatal(err)
		}
		snapA := snapshotFS(t, ws, nil)
		filler := filepath.Join(state, "filler")
		// fill leaves about free bytes on the tmpfs.
		fill := func(free int64) {
			t.Helper()
			f, err := os.OpenFile(filler, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			chunk := make([]byte, 16<<10)
			var n int64
			for {
				m, err := f.Write(chunk)
				n += int64(m)
				if errors.Is(err, syscall.ENOSPC) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Truncate(max(0, n-free)); err != nil {
				t.Fatal(err)
			}
		}
		r := rand.New(rand.NewPCG(5, 5))
		failed := 0
		for i, free := range []int64{0, 4 << 10, 12 << 10, 32 << 10, 100 << 10, 300 << 10} {
			b := make([]byte, 200<<10)
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			write(t, ws, "data.bin", string(b))
			write(t, ws, fmt.Sprintf("src/pkg%02d/file00.go", i), fmt.Sprintf("changed %d\n", i))
			headBefore, err := s.Log()
			if err != nil {
				t.Fatal(err)
			}
			fill(free)
			before := snapshotFS(t, ws, nil)
			res, err := s.Checkpoint(fmt.Sprintf("with %d bytes free", free))
			if d := cmp.Diff(crashDigest(before), crashDigest(snapshotFS(t, ws, nil))); d != "" {
				t.Fatalf("free %d: a checkpoint changed the workspace (-before +after):\n%s", free, d)
			}
			crashCheckClean(t, s, fmt.Sprintf("free %d", free))
			log, lerr := s.Log()
			if lerr != nil {
				t.Fatal(lerr)
			}
			if err != nil {
				failed++
				if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left") {
					t.Fatalf("free %d: checkpoint failed with %v, want an error that says there is no space left", free, err)
				}
				if log[0].ID != headBefore[0].ID || len(log) != len(headBefore) {
					t.Fatalf("free %d: a failed checkpoint changed the log from %+v to %+v", free, headBefore, log)
				}
				// A restore must checkpoint first: it fails too, and touches
				// nothing.
				if _, err := s.Restore(a.ID); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("free %d: restore on a full disk: %v, want ENOSPC", free, err)
				}
				if d := cmp.Diff(crashDigest(before), crashDigest(snapshotFS(t, ws, nil))); d != "" {
					t.Fatalf("free %d: a failed restore changed the workspace (-before +after):\n%s", free, d)
				}
			} else {
				if log[0].ID != res.ID {
					t.Fatalf("free %d: checkpoint %s worked but the log starts at %s", free, short0(res.ID), short0(log[0].ID))
				}
				crashNoDiff(t, s, res.ID, fmt.Sprintf("free %d", free))
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		}
		if failed == 0 {
			t.Fatal("no checkpoint failed: the disk was never full")
		}
		// With space again, everything works.
		now := snapshotFS(t, ws, nil)
		last, err := s.Checkpoint("space again")
		if err != nil {
			t.Fatalf("checkpoint after freeing space: %v", err)
		}
		if _, err := s.Restore(a.ID); err != nil {
			t.Fatal(err)
		}
		crashSameFS(t, "after restoring A", snapA, snapshotFS(t, ws, nil))
		if _, err := s.Restore(last.ID); err != nil {
			t.Fatal(err)
		}
		crashSameFS(t, "after restoring the newest", now, snapshotFS(t, ws, nil))
		crashCheckClean(t, s, "at the end")
		t.Logf("%d of 6 checkpoints failed for want of space", failed)
	})
}
