package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/procs"
)

// detectIn finds the main process of each server, reads its data
// directory and port, and names two servers of a kind apart.
func TestDetectIn(t *testing.T) {
	ps := []procs.Proc{
		{PID: 10, PPID: 1, Comm: "postgres", Argv: []string{"/usr/lib/postgresql/15/bin/postgres", "-D", "main", "-p", "5433"}, Cwd: "/var/lib/postgresql/15"},
		{PID: 11, PPID: 10, Comm: "postgres", Argv: []string{"postgres: checkpointer"}},
		{PID: 20, PPID: 1, Comm: "postgres", Argv: []string{"postgres", "-D/srv/pg2", "--port=5434"}, Cwd: "/"},
		{PID: 30, PPID: 1, Comm: "mysqld", Argv: []string{"/usr/sbin/mysqld", "--datadir=/srv/mysql", "--port", "3307"}},
		{PID: 40, PPID: 1, Comm: "mongod", Argv: []string{"mongod", "--dbpath", "/srv/mongo"}},
		{PID: 50, PPID: 1, Comm: "myapp", Exe: "/opt/app/myapp", Argv: []string{"/opt/app/myapp"}},
		{PID: 51, PPID: 50, Comm: "myapp", Exe: "/opt/app/myapp", Argv: []string{"/opt/app/myapp", "worker"}},
	}
	got := detectIn(ps, []Decl{{Name: "app", Process: "myap?", Data: []string{"/srv/app"}}})
	want := map[string]string{
		"postgres:5433": "10 /var/lib/postgresql/15/main",
		"postgres:5434": "20 /srv/pg2",
		"mysql":         "30 /srv/mysql",
		"mongodb":       "40 /srv/mongo",
		"app":           "50 /srv/app",
	}
	if len(got) != len(want) {
		t.Fatalf("detected %d services, want %d: %+v", len(got), len(want), got)
	}
	for _, s := range got {
		if w, ok := want[s.Name]; !ok || fmt.Sprint(s.Main.PID, " ", strings.Join(s.Data, ",")) != w {
			t.Errorf("%s: pid %d data %v, want %q", s.Name, s.Main.PID, s.Data, w)
		}
	}
	if i := slices.IndexFunc(got, func(s Service) bool { return s.Name == "mysql" }); got[i].Port != 3307 {
		t.Errorf("mysql port %d, want 3307", got[i].Port)
	}
}

// A server whose data directory cannot be told, or a Redis that does
// not answer, is listed as one undosh cannot checkpoint, with why.
func TestDetectUnreadable(t *testing.T) {
	ps := []procs.Proc{
		{PID: 10, PPID: 1, Comm: "postgres", Argv: []string{"postgres"}},
		{PID: 20, PPID: 1, Comm: "redis-server", Argv: []string{"redis-server *:1"}},
	}
	for _, s := range detectIn(ps, nil) {
		if s.Unreadable == "" {
			t.Errorf("%s: checkpointable, with no data directory or a server that does not answer", s.Name)
		}
	}
}

func TestOption(t *testing.T) {
	for _, c := range []struct {
		argv        []string
		short, long string
		want        string
	}{
		{[]string{"p", "-D", "/a"}, "-D", "", "/a"},
		{[]string{"p", "-D/a", "-D", "/b"}, "-D", "", "/b"},
		{[]string{"p", "--datadir=/x"}, "", "--datadir", "/x"},
		{[]string{"p", "--datadir", "/y"}, "", "--datadir", "/y"},
		{[]string{"p", "--datadir"}, "", "--datadir", ""},
		{[]string{"p", "--data=/z"}, "-D", "--datadir", ""},
	} {
		if got := option(c.argv, c.short, c.long); got != c.want {
			t.Errorf("option(%q, %q, %q) = %q, want %q", c.argv, c.short, c.long, got, c.want)
		}
	}
}

// sleeper starts a process that stands for a service: a sleep with an
// argv of its own, in a session of its own, stopped by pid when the test
// ends.
func sleeper(t *testing.T, dir string) procs.Proc {
	t.Helper()
	cmd := exec.Command("sleep", fmt.Sprintf("%d.%d", 1000+os.Getpid()%1000, len(t.Name())))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	p, err := procs.ReadStarted(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killService(p) })
	return p
}

// killService ends p, or what was started in its place (same argv).
func killService(p procs.Proc) {
	if q, ok := current(Service{Main: p}); ok {
		procs.Stop(q, syscall.SIGKILL, 0)
	}
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree lists the files under dir and their contents.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, _ := d.Info()
		switch {
		case d.Type().IsRegular():
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s %o %q\n", rel, fi.Mode().Perm(), data)
		case d.Type()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, "%s -> %s\n", rel, l)
		default:
			fmt.Fprintf(&b, "%s/ %o\n", rel, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A declared service: checkpointed while it runs, then its data changed
// (as a step would); Restore stops it, puts the data back exactly,
// starts it again, and keeps what it replaced as a point of its own,
// which undoes the restore.
func TestCheckpointRestoreDeclared(t *testing.T) {
	data := t.TempDir()
	writeFile(t, filepath.Join(data, "table"), "v1")
	writeFile(t, filepath.Join(data, "sub", "index"), "i1")
	if err := os.Symlink("table", filepath.Join(data, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(data, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	before := tree(t, data)
	main := sleeper(t, data)
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := Service{Name: "app", Main: main, Data: []string{data}, Declared: true}
	pt, err := st.Checkpoint(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Method != "freeze" || pt.Bytes != 4 {
		t.Errorf("point: method %q, %d bytes; want freeze, 4", pt.Method, pt.Bytes)
	}
	if got := tree(t, filepath.Join(st.Dir(pt.ID), "data", "0")); got != before {
		t.Errorf("the point holds\n%s\nwant\n%s", got, before)
	}
	// The step.
	writeFile(t, filepath.Join(data, "table"), "v2 longer")
	writeFile(t, filepath.Join(data, "new"), "n")
	if err := os.Remove(filepath.Join(data, "sub", "index")); err != nil {
		t.Fatal(err)
	}
	changed := tree(t, data)

	res, err := st.Restore(context.Background(), pt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := tree(t, data); got != before {
		t.Errorf("after the restore the data is\n%s\nwant\n%s", got, before)
	}
	if main.Alive() || !res.Main.Alive() || !slices.Equal(res.Main.Argv, main.Argv) {
		t.Errorf("the service: old pid %d alive %v, new %+v", main.PID, main.Alive(), res.Main)
	}
	if res.After.ID == "" || res.After.Method != "stopped" {
		t.Fatalf("no point of the data before the restore: %+v", res.After)
	}
	// Undo the restore.
	if _, err := st.Restore(context.Background(), res.After.ID); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, data); got != changed {
		t.Errorf("after undoing the restore the data is\n%s\nwant\n%s", got, changed)
	}
	pts, err := st.List()
	if err != nil || len(pts) != 3 {
		t.Errorf("List: %d points, %v; want 3", len(pts), err)
	}
}

// A second point of a service shares the files that did not change with
// the first (hard links), and counts only what it copied.
func TestCheckpointLinksUnchanged(t *testing.T) {
	data := t.TempDir()
	writeFile(t, filepath.Join(data, "big"), strings.Repeat("x", 1<<16))
	writeFile(t, filepath.Join(data, "small"), "1")
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := Service{Name: "app", Main: sleeper(t, data), Data: []string{data}, Declared: true}
	// The files are old enough, by the coarse clock, to be linked.
	waitPast(t, time.Now().Add(margin))
	pt1, err := st.Checkpoint(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	// Change "small" after the coarse clock has moved past pt1's margin.
	waitPast(t, pt1.Time.Add(margin))
	writeFile(t, filepath.Join(data, "small"), "2")
	pt2, err := st.Checkpoint(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if pt2.Bytes != 1 {
		t.Errorf("the second point copied %d bytes, want 1 (big is linked)", pt2.Bytes)
	}
	a, _ := os.Stat(filepath.Join(st.Dir(pt1.ID), "data", "0", "big"))
	b, _ := os.Stat(filepath.Join(st.Dir(pt2.ID), "data", "0", "big"))
	if !os.SameFile(a, b) {
		t.Error("big is not shared by the two points")
	}
	want := int64(1<<16 + 2) // big once, and small twice
	for _, pt := range []Point{pt1, pt2} {
		fi, err := os.Stat(filepath.Join(st.Dir(pt.ID), metaFile))
		if err != nil {
			t.Fatal(err)
		}
		want += fi.Size()
	}
	if got := st.Size(); got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
}

// waitPast waits until a file written now gets a ctime after t.
func waitPast(t *testing.T, when interface{ UnixNano() int64 }) {
	t.Helper()
	probe := filepath.Join(t.TempDir(), "probe")
	for {
		writeFile(t, probe, "")
		fi, err := os.Stat(probe)
		if err != nil {
			t.Fatal(err)
		}
		c := fi.Sys().(*syscall.Stat_t).Ctim
		if c.Nano() > when.UnixNano() {
			return
		}
		runtime.Gosched()
	}
}

// The freeze stops the whole tree and thaw lets it go on.
func TestFreeze(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 1000 & sleep 1000 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	main, err := procs.ReadStarted(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var all []procs.Proc
	for len(all) < 3 { // the shell has started its two children
		ps, err := procs.List()
		if err != nil {
			t.Fatal(err)
		}
		all = procs.Tree(ps, main.PID)
		runtime.Gosched()
	}
	f, err := freeze(main)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if st := procState(p); st != 'T' {
			t.Errorf("pid %d frozen is in state %c", p.PID, st)
		}
	}
	f.thaw()
	for _, p := range all {
		for procState(p) == 'T' {
			runtime.Gosched()
		}
	}
}

// A service that ended before its checkpoint: an error that says so,
// and nothing left in the store.
func TestCheckpointServiceGone(t *testing.T) {
	data := t.TempDir()
	writeFile(t, filepath.Join(data, "f"), "x")
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := procs.ReadStarted(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Checkpoint(context.Background(), Service{Name: "app", Main: p, Data: []string{data}, Declared: true})
	if err == nil || !strings.Contains(err.Error(), "ended") {
		t.Errorf("Checkpoint of a service that ended: %v", err)
	}
	if entries, _ := os.ReadDir(st.dir); len(entries) != 0 {
		t.Errorf("the store holds %d entries after a failed checkpoint", len(entries))
	}
}

// The disk fills during the copy: the error says so and what to do,
// and the partial copy is removed; the service runs on, unfrozen. The
// test runs itself again in a mount namespace of its own (unshare),
// where its small tmpfs lives and dies.
func TestCheckpointDiskFull(t *testing.T) {
	if os.Getenv("UNDOSH_TEST_DISK_FULL") == "" {
		if os.Geteuid() != 0 {
			t.Skip("mounting a small tmpfs needs root")
		}
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("unshare (util-linux) is not installed")
		}
		cmd := exec.Command(unshare, "--mount", "--propagation", "private", os.Args[0], "-test.run=^TestCheckpointDiskFull$", "-test.v")
		cmd.Env = append(os.Environ(), "UNDOSH_TEST_DISK_FULL=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestCheckpointDiskFull")) {
			t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
		}
		return
	}
	data := t.TempDir()
	writeFile(t, filepath.Join(data, "big"), strings.Repeat("x", 2<<20))
	main := sleeper(t, data)
	small := t.TempDir()
	if err := unix.Mount("tmpfs", small, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(small, unix.MNT_DETACH) })
	st, err := Open(small)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Checkpoint(context.Background(), Service{Name: "app", Main: main, Data: []string{data}, Declared: true})
	if err == nil {
		t.Fatal("a checkpoint that cannot fit succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("the error does not say the disk is full and what to do: %v", err)
	}
	if entries, _ := os.ReadDir(st.dir); len(entries) != 0 {
		t.Errorf("the store holds %d entries after the disk filled", len(entries))
	}
	if st := procState(main); st == 'T' || st == 0 {
		t.Errorf("the service after a failed checkpoint: state %q", st)
	}
}

// A put-back that cannot finish (a file of the data made immutable)
// keeps both copies and says where the data from before is, and how to
// put it back by hand.
func TestRestorePutBackFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chattr +i needs root")
	}
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Skip("no chattr here (e2fsprogs)")
	}
	data := t.TempDir()
	writeFile(t, filepath.Join(data, "a"), "before")
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pt, err := st.Checkpoint(context.Background(), Service{Name: "app", Main: sleeper(t, data), Data: []string{data}, Declared: true})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(data, "a"), "the step's")
	if out, err := exec.Command(chattr, "+i", filepath.Join(data, "a")).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(chattr, "-i", filepath.Join(data, "a")).Run() })
	_, err = st.Restore(context.Background(), pt.ID)
	var re *RestoreError
	src := filepath.Join(st.Dir(pt.ID), "data", "0")
	if !errors.As(err, &re) || re.Stage != "put back" || !strings.Contains(re.Hint, src) || !strings.Contains(re.Hint, "cp -a") || re.After.ID == "" {
		t.Fatalf("a put-back that cannot finish: %v (%+v)", err, re)
	}
	if b, err := os.ReadFile(filepath.Join(src, "a")); err != nil || string(b) != "before" {
		t.Errorf("the data from before in %s: %q, %v", src, b, err)
	}
	if b, err := os.ReadFile(filepath.Join(st.Dir(re.After.ID), "data", "0", "a")); err != nil || string(b) != "the step's" {
		t.Errorf("the data the step left, kept: %q, %v", b, err)
	}
}
