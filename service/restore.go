package service

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/internal/shquote"
)

// Restored is what a restore did.
type Restored struct {
	// After is the point taken of the service's data just before it
	// was put back: Restore(After.ID) undoes the restore.
	After Point
	// Main is the service's main process, started again.
	Main procs.Proc
}

// RestoreError is a restore that could not finish. The point's copy is
// kept whatever happened, and so is After when it was taken.
type RestoreError struct {
	Point Point
	After Point
	// Stage is where it stopped: "stop", "save", "put back" or "start".
	Stage string
	// Hint says what state the service's data is in and how to finish
	// by hand.
	Hint string
	Err  error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("restore service %s to checkpoint %s: %s: %v", e.Point.Service.Name, e.Point.ID, e.Stage, e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// Timeouts of a restore: for the service to stop, and to be ready again.
var (
	stopTimeout  = 30 * time.Second
	readyTimeout = 60 * time.Second
)

// Restore puts the service of point id back as the point holds it: it
// stops the service (a client connected to it loses its connection),
// takes a point of its data as it is then (After, so that the restore
// can be undone), puts the point's data back exactly, and starts the
// service again, waiting until it answers.
func (st *Store) Restore(ctx context.Context, id string) (Restored, error) {
	pt, err := st.Get(id)
	if err != nil {
		return Restored{}, err
	}
	s := pt.Service
	fail := func(stage, hint string, after Point, err error) (Restored, error) {
		return Restored{After: after}, &RestoreError{Point: pt, After: after, Stage: stage, Hint: hint, Err: err}
	}
	cur, running := current(s)
	if running {
		s.Main = cur
		if err := stop(s); err != nil {
			return fail("stop", fmt.Sprintf("nothing was changed; stop %s (pid %d) by hand, then: undoctl service restore %s", s.Name, cur.PID, id), Point{}, err)
		}
	}
	after, err := st.take(ctx, s, "stopped")
	if err != nil {
		_, serr := start(st, s)
		hint := "nothing was changed"
		if serr != nil {
			hint += fmt.Sprintf("; it was stopped and did not start again (%v): start it by hand with: %s", serr, startCommand(s))
		}
		return fail("save", hint, Point{}, err)
	}
	for i, d := range s.Data {
		src := filepath.Join(st.Dir(pt.ID), "data", strconv.Itoa(i))
		var err error
		if slices.Contains(pt.Absent, d) {
			err = os.RemoveAll(d)
		} else {
			err = newSyncer().syncTree(src, d, syncOpts{stable: pt.Time.Add(-margin), dstStable: true})
		}
		if err != nil {
			return fail("put back", fmt.Sprintf("the data from before is whole in %s, and the data as it was before this restore in %s; copy it back by hand (cp -a %s/. %s) and start %s with: %s",
				src, st.Dir(after.ID), src, d, s.Name, startCommand(s)), after, spaceHint(err, filepath.Dir(d)))
		}
	}
	if s.Kind == Postgres && len(s.Data) > 0 {
		// The copy's pid file names a server that is gone; one whose pid
		// was taken since would stop the new one starting.
		_ = os.Remove(filepath.Join(s.Data[0], "postmaster.pid"))
	}
	p, err := start(st, s)
	if err != nil {
		return fail("start", fmt.Sprintf("its data is back as checkpoint %s had it; the data from before this restore is kept in checkpoint %s (%s); start it by hand with: %s; its log: %s",
			pt.ID, after.ID, st.Dir(after.ID), startCommand(s), st.logPath(s)), after, err)
	}
	return Restored{After: after, Main: p}, nil
}

// current finds the process that is s now: the one the point recorded,
// or one that serves the same data (a service started again since).
func current(s Service) (procs.Proc, bool) {
	if s.Main.Alive() {
		return s.Main, true
	}
	ps, err := procs.List()
	if err != nil {
		return procs.Proc{}, false
	}
	for _, o := range detectIn(ps, nil) {
		if o.Kind == s.Kind && s.Kind != "" && slices.Equal(o.Data, s.Data) {
			return o.Main, true
		}
	}
	for _, p := range ps {
		if slices.Equal(p.Argv, s.Main.Argv) && p.Exe == s.Main.Exe && p.UID == s.Main.UID {
			return p, true
		}
	}
	return procs.Proc{}, false
}

// stop stops s and waits until its processes are gone: its own way
// (PostgreSQL's fast shutdown, Redis's SHUTDOWN NOSAVE, the policy's
// stop command), else SIGTERM; SIGKILL once the time is up.
func stop(s Service) error {
	all, _ := procs.List()
	tree := procs.Tree(all, s.Main.PID)
	if len(tree) == 0 {
		tree = []procs.Proc{s.Main}
	}
	var err error
	switch {
	case s.Stop != "":
		err = shell(s, s.Stop, nil)
	case s.Kind == Postgres:
		err = syscall.Kill(s.Main.PID, syscall.SIGINT)
	case s.Kind == Redis:
		if err = redisShutdown(s.Port); err != nil {
			err = syscall.Kill(s.Main.PID, syscall.SIGTERM)
		}
	default:
		err = syscall.Kill(s.Main.PID, syscall.SIGTERM)
	}
	if err != nil && s.Main.Alive() {
		return err
	}
	if procs.WaitGone(tree, stopTimeout) {
		return nil
	}
	procs.Signal(tree, syscall.SIGKILL)
	if !procs.WaitGone(tree, 5*time.Second) {
		return fmt.Errorf("%s (pid %d) did not end, even after SIGKILL", s.Name, s.Main.PID)
	}
	return nil
}

// logPath is where a service started by undosh writes its output.
func (st *Store) logPath(s Service) string {
	return filepath.Join(st.dir, strings.NewReplacer("/", "_", ":", "_").Replace(s.Name)+".log")
}

// startCommand is how s is started, for a hint.
func startCommand(s Service) string {
	if s.Start != "" {
		return s.Start
	}
	argv := s.Main.Argv
	if len(s.Restart) > 0 {
		argv = s.Restart
	}
	return shquote.Join(argv)
}

// start starts s again and waits until it is ready.
func start(st *Store, s Service) (procs.Proc, error) {
	log := st.logPath(s)
	var p procs.Proc
	if s.Start != "" {
		if err := shell(s, s.Start, nil); err != nil {
			return procs.Proc{}, err
		}
		q, ok := waitFor(func() (procs.Proc, bool) { return current(s) }, readyTimeout)
		if !ok {
			return procs.Proc{}, fmt.Errorf("%q ran, but no process of %s came up", s.Start, s.Name)
		}
		p = q
	} else {
		how := s.Main
		if len(s.Restart) > 0 {
			how.Argv = s.Restart
		}
		var err error
		if p, err = procs.Start(how, log); err != nil {
			return procs.Proc{}, err
		}
	}
	if err := ready(s, p); err != nil {
		return p, fmt.Errorf("%w (its log: %s)", err, log)
	}
	return p, nil
}

// ready waits until s, started as p, answers: PostgreSQL says so in its
// pid file, Redis answers PING, another service accepts connections on
// its port; one with no port is ready when it has stayed up a moment.
func ready(s Service, p procs.Proc) error {
	check := func() bool {
		switch {
		case s.Kind == Postgres && len(s.Data) > 0:
			b, err := os.ReadFile(filepath.Join(s.Data[0], "postmaster.pid"))
			lines := strings.Split(string(b), "\n")
			return err == nil && len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready"
		case s.Kind == Redis:
			return redisReady(s.Port)
		case s.Port != 0:
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), dialTimeout)
			if err == nil {
				c.Close()
			}
			return err == nil
		}
		return false
	}
	deadline := time.Now().Add(readyTimeout)
	if s.Port == 0 && s.Kind != Postgres {
		deadline = time.Now().Add(time.Second)
	}
	for time.Now().Before(deadline) {
		if check() {
			return nil
		}
		if !p.Alive() {
			return fmt.Errorf("%s (pid %d) ended as it started", s.Name, p.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s.Port == 0 && s.Kind != Postgres {
		return nil // it stayed up
	}
	return fmt.Errorf("%s (pid %d) did not answer within %s", s.Name, p.PID, readyTimeout)
}

// waitFor polls f until it finds something, or timeout passes.
func waitFor[T any](f func() (T, bool), timeout time.Duration) (T, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if v, ok := f(); ok || time.Now().After(deadline) {
			return v, ok
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shell runs a policy's stop or start command for s, as the user the
// service runs as.
func shell(s Service, command string, env []string) error {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = "/"
	if os.Geteuid() == 0 && s.Main.UID != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.Main.UID), Gid: uint32(s.Main.GID)}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%q: %w: %s", command, err, strings.TrimSpace(string(out)))
	}
	return nil
}
