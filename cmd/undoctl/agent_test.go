package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	creackpty "github.com/creack/pty"
	"golang.org/x/sys/unix"

	undoshpty "github.com/undosh/undosh/pty"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/agent"
)

func TestAgentUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"agent", "--relay", "unix:///x"},
		{"agent", "--relay", "unix:///x="},
		{"agent", "--relay", "=tcp://10.0.2.100:5757"},
		{"agent", "extra"},
	} {
		_, stderr, code := cli(t, append(args, "--state", t.TempDir())...)
		if code != 2 || !strings.HasPrefix(stderr, "undoctl: error: agent: ") {
			t.Errorf("undoctl %q: exit %d, %q; want 2 and a usage error", args, code, stderr)
		}
	}
}

// dialWait dials the Unix socket at path once something listens there.
func dialWait(t *testing.T, path string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(10 * time.Second))
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", path, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// rawPort is a pty in raw mode standing in for a virtio-serial port: it
// returns the host's end and the guest's device.
func rawPort(t *testing.T) (*os.File, string) {
	t.Helper()
	host, tty, err := creackpty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { host.Close(); tty.Close() })
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	raw := undoshpty.Raw(*tio)
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, &raw); err != nil {
		t.Fatal(err)
	}
	return host, tty.Name()
}

// One undoctl agent serves the control channel, the virtio-serial port
// and the relay together: a notify of a copy on the port resets the
// relay's connections.
func TestServeAgent(t *testing.T) {
	t.Parallel()
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	port, dev := rawPort(t)
	sys := t.TempDir()
	pdir := filepath.Join(sys, "class", "virtio-ports", filepath.Base(dev))
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "name"), []byte("undosh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	socks, err := os.MkdirTemp("", "ua")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(socks)
	sd := t.TempDir()
	cfg := agentConfig{
		stateDir:    sd,
		listen:      "unix://" + filepath.Join(socks, "control.sock"),
		serial:      "undosh",
		relayListen: "unix://" + filepath.Join(socks, "relay.sock"),
		relayDial:   "tcp://" + target.Addr().String(),
		sys:         sys,
		dev:         filepath.Dir(dev),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serveAgent(ctx, cfg, io.Discard) }()

	// The control channel.
	cc := dialWait(t, filepath.Join(socks, "control.sock"))
	body, _ := json.Marshal(hostlink.WhoYouAre{Generation: 1, Token: "one", Role: hostlink.RolePrimary})
	if err := hostlink.Encode(cc, hostlink.Frame{Type: hostlink.TypeWhoYouAre, Body: body}); err != nil {
		t.Fatal(err)
	}
	if f, err := hostlink.Decode(cc, hostlink.MaxRequest); err != nil || f.Type != hostlink.TypeNoted {
		t.Fatalf("the control channel's answer: %v, %v", f.Type, err)
	}

	// The relay.
	rc := dialWait(t, filepath.Join(socks, "relay.sock"))
	if _, err := io.WriteString(rc, "hello"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(rc, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("through the relay: %q, %v", buf, err)
	}

	// The virtio-serial port.
	who, _ := json.Marshal(hostlink.WhoYouAre{Generation: 2, Token: "two", Role: hostlink.RoleCopy})
	fmt.Fprintf(port, `{"id":"n","op":"notify","who":%s}`+"\n", who)
	line, err := bufio.NewReader(port).ReadString('\n')
	if err != nil || !strings.Contains(line, `"noted":{"generation":2}`) || strings.Contains(line, "error") {
		t.Fatalf("notify on the port: %q, %v", line, err)
	}
	if w, _ := agent.Read(sd); w.Token != "two" {
		t.Errorf("host.json after the port's notify: %+v", w)
	}
	if _, err := rc.Read(buf); !errors.Is(err, io.EOF) {
		t.Errorf("a relayed connection after a copy's notify: %v, want EOF", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serveAgent after SIGTERM: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveAgent did not return when its context ended")
	}
}
