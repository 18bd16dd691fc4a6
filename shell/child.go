package shell

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/procstate"
)

// status is how a child ended.
type status struct {
	code int            // exit status, or 128+n for a signal
	sig  syscall.Signal // the signal that killed it, or 0
	// lost: how it ended is unknown (a supervisor lost its trace).
	lost bool
}

// forwarded lists the signals undosh passes on to the shell it runs:
// every catchable signal except those the Go runtime needs (SIGURG,
// SIGPROF), SIGCHLD, and SIGPIPE (which concerns undosh's own writes).
func forwarded(ignored func(syscall.Signal) bool) []os.Signal {
	var out []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF, syscall.SIGPIPE,
			32, 33: // used by the C library's threads
			continue
		}
		if ignored(s) {
			continue // ignored by the caller: the child ignores it too
		}
		out = append(out, s)
	}
	return out
}

// childProc is a child started by [startChild].
type childProc struct {
	p    *os.Process
	done chan status // how it ended, once it has
	err  error       // why waiting for it failed, set before done
}

// startChild starts argv[0]=path as a child in undosh's process group,
// with files as its fds, and forwards every signal undosh receives to it
// until it ends.
func startChild(path string, argv, env []string, files []*os.File, ignored func(syscall.Signal) bool) (*childProc, error) {
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, forwarded(ignored)...)
	// The child starts with the caller's signal mask, not the one the Go
	// runtime gave this thread.
	p, err := procstate.StartProcess(path, argv, &os.ProcAttr{Env: env, Files: files})
	if err != nil {
		signal.Stop(sigs)
		return nil, err
	}
	c := &childProc{p: p, done: make(chan status, 1)}
	fromTerminal := foreground(files)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				forward(p, s.(syscall.Signal), fromTerminal)
			case <-stop:
				return
			}
		}
	}()
	go func() {
		st, err := p.Wait()
		signal.Stop(sigs)
		close(stop)
		if err != nil {
			c.err = err
			c.done <- status{}
			return
		}
		ws := st.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			c.done <- status{code: 128 + int(ws.Signal()), sig: ws.Signal()}
			return
		}
		c.done <- status{code: ws.ExitStatus()}
	}()
	return c, nil
}

// forward passes sig to the child. A stop request stops the child, then
// undosh itself, as a shell's job would stop as a whole. When undosh's
// process group is the foreground of its terminal, the keys that send
// SIGINT, SIGQUIT, SIGTSTP and SIGWINCH reach the child directly (it is in
// the same group), so undosh does not send them a second time.
func forward(p *os.Process, sig syscall.Signal, fromTerminal bool) {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGWINCH:
		if !fromTerminal {
			p.Signal(sig)
		}
	default:
		p.Signal(sig)
	}
	switch sig {
	case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
}

// foreground reports whether undosh's process group is the foreground
// process group of the terminal on one of files.
func foreground(files []*os.File) bool {
	pgrp := syscall.Getpgrp()
	for _, f := range files {
		if f == nil {
			continue
		}
		if fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP); err == nil {
			return fg == pgrp
		}
	}
	return false
}
