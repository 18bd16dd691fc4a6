package fork

// Crash and lock tests. The test binary doubles as the child process they
// kill or watch: TestCommitChild does the child's part when
// UNDOSH_FORK_COMMIT_CHILD names a mode, and is skipped otherwise. The
// child reports each event on fd 3, one line at a time, and waits for a
// line on stdin before going on, so the parent synchronises on events,
// never on sleeps, and kills the child at an exact point.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

const (
	childEnv   = "UNDOSH_FORK_COMMIT_CHILD" // commit | hold
	planEnv    = "UNDOSH_FORK_PLAN"         // commit: the plan, as JSON
	journalEnv = "UNDOSH_FORK_JOURNAL"      // commit: the journal directory
	lockEnv    = "UNDOSH_FORK_LOCK"         // hold: the file to lock
)

// TestCommitChild is the child of the crash and lock tests:
//
//	commit  commits the plan; after each Progress call it reports
//	        "applied N TOTAL" and waits; at the end it reports "done ID"
//	hold    takes a write lock on a file, reports "held" and waits
func TestCommitChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("the child of the crash and lock tests")
	}
	events := os.NewFile(3, "events")
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "commit":
		data, err := os.ReadFile(os.Getenv(planEnv))
		if err != nil {
			fmt.Fprintf(events, "error %v\n", err)
			os.Exit(1)
		}
		var p Plan
		if err := json.Unmarshal(data, &p); err != nil {
			fmt.Fprintf(events, "error %v\n", err)
			os.Exit(1)
		}
		rec, err := Commit(p, CommitOptions{JournalDir: os.Getenv(journalEnv), Progress: func(applied, total int) {
			fmt.Fprintf(events, "applied %d %d\n", applied, total)
			in.ReadString('\n')
		}})
		if err != nil {
			fmt.Fprintf(events, "error %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(events, "done %s\n", rec.ID)
	case "hold":
		fd, err := unix.Open(os.Getenv(lockEnv), unix.O_RDWR, 0)
		if err == nil {
			err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &unix.Flock_t{Type: unix.F_WRLCK})
		}
		if err != nil {
			fmt.Fprintf(events, "error %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintln(events, "held")
		in.ReadString('\n')
	}
	os.Exit(0)
}

type commitChild struct {
	cmd    *exec.Cmd
	events *bufio.Scanner
	stdin  io.WriteCloser
}

func startCommitChild(t *testing.T, mode string, env ...string) *commitChild {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + mode}, env...)...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		r.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &commitChild{cmd: cmd, events: bufio.NewScanner(r), stdin: stdin}
}

// next returns the child's next event.
func (c *commitChild) next(t *testing.T) string {
	t.Helper()
	if !c.events.Scan() {
		t.Fatalf("the child ended without a word: %v", c.cmd.Wait())
	}
	ev := c.events.Text()
	if strings.HasPrefix(ev, "error ") {
		t.Fatalf("child: %s", ev)
	}
	return ev
}

func (c *commitChild) proceed(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "\n"); err != nil {
		t.Fatal(err)
	}
}

func (c *commitChild) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
}

// startCommit starts a child that commits the fixture's plan.
func startCommit(t *testing.T, f *fixture, p Plan) *commitChild {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(f.base, "plan.json")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return startCommitChild(t, "commit", planEnv+"="+name, journalEnv+"="+f.journal)
}

// applied parses an "applied N TOTAL" event.
func applied(t *testing.T, ev string) int {
	t.Helper()
	f := strings.Fields(ev)
	if len(f) != 3 || f[0] != "applied" {
		t.Fatalf("event %q, want applied N TOTAL", ev)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCrashRecovery kills a committing process (SIGKILL) after k of its n
// operations, for several k, and checks that Recover puts the root back
// exactly: content, attributes, inode numbers and directory times.
func TestCrashRecovery(t *testing.T) {
	requireRoot(t)
	n := len(newFixture(t, true).diff(t).Ops)
	var ks []int
	for _, k := range []int{0, 1, 2, n / 4, n / 3, n / 2, 2 * n / 3, n - 1, n} {
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	for i, k := range ks {
		t.Run(fmt.Sprintf("after %d of %d", k, n), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, i%2 == 0) // upper on a tmpfs, or on the root's filesystem
			before := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
			c := startCommit(t, f, f.diff(t))
			for {
				if applied(t, c.next(t)) == k {
					c.kill(t)
					break
				}
				c.proceed(t)
			}
			did, err := Recover(f.journal)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("cut short after %d of %d operations", k, n)
			if len(did) != 1 || !strings.Contains(did[0], want) {
				t.Errorf("Recover did %q, want one line with %q", did, want)
			}
			if diff := cmp.Diff(before, manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})); diff != "" {
				t.Errorf("after recovery (-want +got):\n%s", diff)
			}
			if recs, err := List(f.journal); err != nil || len(recs) != 0 {
				t.Errorf("journal after recovery: %+v, %v", recs, err)
			}
			if did, err := Recover(f.journal); err != nil || len(did) != 0 {
				t.Errorf("a second Recover did %q, %v", did, err)
			}
		})
	}

	// The process dies between the link that keeps a replaced file and
	// the rename that replaces it.
	t.Run("between link and rename", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, true)
		before := manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})
		p := f.diff(t)
		r := slices.IndexFunc(p.Ops, func(op Op) bool { return op.Kind == OpReplace })
		c := startCommit(t, f, p)
		for applied(t, c.next(t)) != r {
			c.proceed(t)
		}
		c.kill(t)
		ids, err := os.ReadDir(f.journal)
		if err != nil {
			t.Fatal(err)
		}
		var id string
		for _, e := range ids {
			if e.IsDir() {
				id = e.Name()
			}
		}
		orig := filepath.Join(f.journal, id, "orig", strconv.Itoa(r))
		if err := os.Link(filepath.Join(f.target, p.Ops[r].Path), orig); err != nil {
			t.Fatal(err)
		}
		if _, err := Recover(f.journal); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, manifest(t, f.target, manifestOpts{inodes: true, dirTimes: true})); diff != "" {
			t.Errorf("after recovery (-want +got):\n%s", diff)
		}
	})

	// Killed after the committed mark: the commit stands.
	t.Run("after the mark", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, true)
		want := expected(t)
		c := startCommit(t, f, f.diff(t))
		for {
			ev := c.next(t)
			if strings.HasPrefix(ev, "done ") {
				break
			}
			c.proceed(t)
		}
		c.kill(t)
		if did, err := Recover(f.journal); err != nil || len(did) != 0 {
			t.Errorf("Recover did %q, %v; want nothing", did, err)
		}
		if diff := cmp.Diff(want, manifest(t, f.target, manifestOpts{})); diff != "" {
			t.Errorf("after a commit and Recover (-want +got):\n%s", diff)
		}
		if recs, err := List(f.journal); err != nil || len(recs) != 1 || !recs[0].Committed {
			t.Errorf("List = %+v, %v", recs, err)
		}
	})
}

// TestPkgLocks checks that the dpkg and apt locks are held while a commit
// changes /var/lib/dpkg (as seen by another process with F_GETLK), that
// they are released after, and that a commit is refused while a package
// manager holds one.
func TestPkgLocks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	w := tree{t, f.target}
	for _, d := range []string{"var/lib/apt", "var/lib/apt/lists", "var/cache/apt", "var/cache/apt/archives"} {
		w.dir(d, 0o755)
	}
	w.file("var/lib/apt/lists/lock", "", 0o640, tBase)
	w.file("var/cache/apt/archives/lock", "", 0o640, tBase)
	locks := []string{"var/lib/dpkg/lock-frontend", "var/lib/dpkg/lock", "var/cache/apt/archives/lock", "var/lib/apt/lists/lock"}
	held := func(name string) (int32, bool) {
		t.Helper()
		fd, err := unix.Open(filepath.Join(f.target, name), unix.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		if err := unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &lk); err != nil {
			t.Fatal(err)
		}
		return lk.Pid, lk.Type != unix.F_UNLCK
	}

	c := startCommit(t, f, f.diff(t))
	for applied(t, c.next(t)) != 1 {
		c.proceed(t)
	}
	for _, l := range locks {
		if pid, ok := held(l); !ok || int(pid) != c.cmd.Process.Pid {
			t.Errorf("during the commit, %s: held=%v by %d, want held by the child %d", l, ok, pid, c.cmd.Process.Pid)
		}
	}
	for {
		c.proceed(t)
		if strings.HasPrefix(c.next(t), "done ") {
			break
		}
	}
	c.cmd.Wait()
	for _, l := range locks {
		if _, ok := held(l); ok {
			t.Errorf("after the commit, %s is still locked", l)
		}
	}

	// A package manager holds the front-end lock: the commit of another
	// copy that changes /var/lib/dpkg is refused.
	g := newFixture(t, true)
	h := startCommitChild(t, "hold", lockEnv+"="+filepath.Join(g.target, "var/lib/dpkg/lock-frontend"))
	if ev := h.next(t); ev != "held" {
		t.Fatalf("hold: %s", ev)
	}
	before := manifest(t, g.target, manifestOpts{inodes: true, dirTimes: true})
	_, err := Commit(g.diff(t), CommitOptions{JournalDir: g.journal})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", h.cmd.Process.Pid)) {
		t.Errorf("Commit while dpkg is locked = %v, want ErrLocked naming process %d", err, h.cmd.Process.Pid)
	}
	if diff := cmp.Diff(before, manifest(t, g.target, manifestOpts{inodes: true, dirTimes: true})); diff != "" {
		t.Errorf("a commit refused for the lock changed the root (-before +after):\n%s", diff)
	}
}
