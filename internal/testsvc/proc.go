package testsvc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/procs"
)

// StopTimeout is how long a server has to end after it was asked to,
// before it is killed.
const StopTimeout = 20 * time.Second

// server is one running server process.
type server struct {
	cmd  *exec.Cmd
	log  string        // its output
	done chan struct{} // closed once it has ended and been reaped
	err  error         // how it ended, once done is closed
}

// startServer starts cmd detached, with its output going to the file
// logPath (created). The caller must stop it.
func startServer(cmd *exec.Cmd, logPath string) (*server, error) {
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, log, log
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	s := &server{cmd: cmd, log: logPath, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The kernel sends Pdeathsig when the thread that started the
		// process ends, not the process: keep this thread for as long
		// as the server runs, so that only the test binary's end kills
		// it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.err = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return s, nil
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// exited reports whether the server has ended.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop sends sig to the server and waits until it has ended, up to
// [StopTimeout]; then it kills the server and every process below it.
// It returns an error saying so when it had to kill. It may be called
// again.
func (s *server) stop(sig syscall.Signal) error {
	if s.exited() {
		return nil
	}
	// Process.Signal goes by pidfd: it cannot reach another process
	// that got the pid after the server's end.
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %d: %w", s.pid(), err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(StopTimeout):
	}
	var tree []procs.Proc
	if ps, err := procs.List(); err == nil {
		tree = procs.Tree(ps, s.pid())
	}
	procs.Signal(tree, syscall.SIGKILL)
	_ = s.cmd.Process.Kill()
	<-s.done
	procs.WaitGone(tree, 5*time.Second)
	return fmt.Errorf("%s (pid %d) did not end within %v of signal %d: killed", s.cmd.Path, s.pid(), StopTimeout, sig)
}

// stopSuccessor registers, for the end of t, the stop of a server that
// took the place of the one this package started (pid orig): one that
// undosh stopped and started again, as a rollback of a service does,
// is found by the pid file it writes, and is no child of the test.
func stopSuccessor(t testing.TB, pidFile string, orig int, sig syscall.Signal) {
	t.Cleanup(func() {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if err != nil || pid == orig {
			return
		}
		p, err := procs.Read(pid)
		if err != nil {
			return
		}
		ps, _ := procs.List()
		tree := procs.Tree(ps, p.PID)
		_ = syscall.Kill(p.PID, sig)
		if !procs.WaitGone(tree, StopTimeout) {
			procs.Signal(tree, syscall.SIGKILL)
			procs.WaitGone(tree, 5*time.Second)
			t.Errorf("the server that took the place of pid %d, pid %d, did not end within %v of signal %d: killed", orig, pid, StopTimeout, sig)
		}
	})
}

// waitReady polls ready until it says the server is ready, or the
// server ends, or ReadyTimeout passes; the error says which, with the
// last reason ready gave.
func (s *server) waitReady(ready func() (bool, error)) error {
	deadline := time.After(ReadyTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := ready()
		if ok {
			return nil
		}
		last = err
		select {
		case <-s.done:
			return fmt.Errorf("server ended before it was ready: %v", s.err)
		case <-deadline:
			if last != nil {
				return fmt.Errorf("server not ready within %v: %v", ReadyTimeout, last)
			}
			return fmt.Errorf("server not ready within %v", ReadyTimeout)
		case <-tick.C:
		}
	}
}

// logText is the server's output so far, for a failure message.
func (s *server) logText() string { return readLog(s.log) }

func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const max = 8 << 10
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return strings.TrimSpace(string(b))
}

// logOnFailure logs the server's output at the end of a test that
// failed, before anything is removed.
func (s *server) logOnFailure(t testing.TB, name string) {
	if t.Failed() {
		t.Logf("%s log (%s):\n%s", name, s.log, s.logText())
	}
}
