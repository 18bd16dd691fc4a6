package shell

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// readRegular reads a regular file whole, and refuses at once what is
// not one: a fifo put where the file was (whose open would otherwise
// wait for a writer) and a directory.
func TestReadRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "script")
	if err := os.WriteFile(file, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readRegular(file); err != nil || string(got) != "echo hi\n" {
		t.Errorf("a regular file: %q, %v", got, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readRegular(fifo); err == nil || !strings.Contains(err.Error(), "no longer a regular file") {
		t.Errorf("a fifo: %v, want refused", err)
	}
	if _, err := readRegular(dir); err == nil {
		t.Error("a directory: read, want refused")
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxText+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readRegular(big); err == nil {
		t.Error("a file larger than maxText: read, want refused")
	}
}
