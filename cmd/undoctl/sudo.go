package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/shquote"
	"github.com/undosh/undosh/internal/sudo"
)

// backSudo undoes machine step r, which its user's undosh ran as root
// through sudo: its commits are root's, so undoctl runs itself as root
// with sudo -n, on this journal (back --state DIR N), and says so. When
// sudo needs a password here, it names the command to run instead.
func backSudo(sd string, r journal.Record, io stdio, asJSON, force bool) error {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return fmt.Errorf("step %d ran as root through sudo, and undoctl cannot find its own executable to run it as root: %w", r.ID, err)
	}
	args := []string{"back", "--state", sd}
	if force {
		args = append(args, "--force")
	}
	if asJSON {
		args = append(args, "--json")
	}
	args = append(args, strconv.Itoa(r.ID))
	command := "sudo " + shquote.Join(append([]string{self}, args...))
	path, err := exec.LookPath("sudo")
	if err == nil {
		err = sudo.Probe(path)
	}
	if err != nil {
		return &hintError{err: fmt.Errorf("step %d ran as root through sudo, so its commits are root's, and undoctl cannot undo them as root: %w", r.ID, err),
			hint: "run: " + command}
	}
	fmt.Fprintf(io.err, "undoctl: step %d ran as root through sudo: undoing it as root with sudo -n (%s)\n", r.ID, strings.TrimPrefix(command, "sudo "))
	cmd := exec.Command(path, append([]string{"-n", "--", self}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, io.out, io.err
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("undoing step %d as root through sudo -n failed (exit %d; its error is above)", r.ID, ee.ExitCode())
		}
		return fmt.Errorf("undo step %d as root through sudo -n: %w", r.ID, err)
	}
	return nil
}

// journalAsOwner makes the rest of this process, when it runs as root,
// write files as the owner of the state directory dir (its effective
// uid and gid), so that a journal that root writes through sudo stays
// its user's.
func journalAsOwner(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Uid == 0 {
		return nil
	}
	// syscall's, not x/sys/unix's: these change every thread.
	if err := syscall.Setresgid(-1, int(sys.Gid), -1); err != nil {
		return fmt.Errorf("write the journal as its owner: %w", err)
	}
	if err := syscall.Setresuid(-1, int(sys.Uid), -1); err != nil {
		return fmt.Errorf("write the journal as its owner: %w", err)
	}
	return nil
}
