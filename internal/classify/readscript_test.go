package classify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/policy"
)

// ReadScript reads a regular file whole and refuses, without waiting,
// what is not one: a fifo no writer has opened (whose open would wait
// for one), a directory, and a file over the limit.
func TestReadScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "script")
	if err := os.WriteFile(file, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadScript(file); err != nil || string(got) != "echo hi\n" {
		t.Errorf("a regular file: %q, %v", got, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadScript(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a fifo: read, want refused")
		}
	case <-time.After(30 * time.Second):
		// Let the waiting open through before failing.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("ReadScript waits for a writer on a fifo")
	}
	if _, err := ReadScript(dir); err == nil {
		t.Error("a directory: read, want refused")
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxScript+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadScript(big); err == nil {
		t.Error("a file over the limit: read, want refused")
	}
}

// A policy named by a fifo is refused at once, with the policy's error.
func TestLoadPolicyFifo(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "policy.yaml")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := LoadPolicy(fifo, "")
		done <- err
	}()
	select {
	case err := <-done:
		var le *policy.LoadError
		if !errors.As(err, &le) || !strings.Contains(le.Msg, "not a regular file") {
			t.Errorf("a fifo as the policy: %v, want a LoadError saying it is not a regular file", err)
		}
	case <-time.After(30 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("LoadPolicy waits for a writer on a fifo")
	}
}
