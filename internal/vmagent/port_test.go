package vmagent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	creackpty "github.com/creack/pty"
	"golang.org/x/sys/unix"

	undoshpty "github.com/undosh/undosh/pty"
)

// ServePort finds its port in sysfs and serves the host on the device,
// here a pty in raw mode (a character device, pollable as the
// virtio-serial one is), until its context ends.
func TestServePort(t *testing.T) {
	t.Parallel()
	host, tty, err := creackpty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer host.Close()
	defer tty.Close()
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	raw := undoshpty.Raw(*tio)
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, &raw); err != nil {
		t.Fatal(err)
	}
	sys := t.TempDir()
	port := filepath.Join(sys, "class", "virtio-ports", filepath.Base(tty.Name()))
	if err := os.MkdirAll(port, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(port, "name"), []byte("undosh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &Agent{StateDir: t.TempDir(), Sys: sys, Dev: filepath.Dir(tty.Name())}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.ServePort(ctx, "undosh") }()
	c := newClient(host, host.Name())
	if err := c.Ping(ctx10(t)); err != nil {
		t.Fatalf("Ping through the port: %v", err)
	}
	var out, errb bytes.Buffer
	if st, err := c.Exec(ctx10(t), []string{"sh", "-c", "echo out; echo err >&2; exit 7"}, "", nil, &out, &errb); err != nil || st != 7 || out.String() != "out\n" || errb.String() != "err\n" {
		t.Errorf("Exec through the port: %d, %q, %q, %v", st, out.String(), errb.String(), err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServePort after its context ended: %v, want nil", err)
	}
}

// A ServePort whose context ends while it waits for its port returns
// nil, as after serving it.
func TestServePortMissing(t *testing.T) {
	t.Parallel()
	a := &Agent{Sys: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.ServePort(ctx, "undosh"); err != nil {
		t.Errorf("ServePort of a missing port with a context that ended: %v, want nil", err)
	}
}
