package vmagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/agent"
)

// shortDir is a temporary directory with a path short enough for Unix
// sockets.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "va")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serveOn serves a over a real Unix socket, its writes passed through
// wrap when it is not nil, and returns a client of it and a wait for
// ServeSession to return.
func serveOn(t *testing.T, a *Agent, wrap func(io.Writer) io.Writer) (*Client, func() error) {
	t.Helper()
	sock := filepath.Join(shortDir(t), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Dial(sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	var serr error
	go func() {
		defer close(ended)
		defer conn.Close()
		var rw io.ReadWriter = conn
		if wrap != nil {
			rw = struct {
				io.Reader
				io.Writer
			}{conn, wrap(conn)}
		}
		serr = ServeSession(rw, a)
	}()
	wait := func() error {
		select {
		case <-ended:
			return serr
		case <-time.After(10 * time.Second):
			return errors.New("ServeSession did not return after the host hung up")
		}
	}
	t.Cleanup(func() {
		c.Close()
		if err := wait(); err != nil {
			t.Error(err)
		}
	})
	return c, wait
}

// watcher is a writer that tells when what it has been written contains
// want.
type watcher struct {
	want string
	seen chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
}

func newWatcher(want string) *watcher { return &watcher{want: want, seen: make(chan struct{})} }

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Exec's output reaches the host while the command still runs: it
// blocks on a FIFO that the test opens only once it saw the first line.
func TestExecStreams(t *testing.T) {
	t.Parallel()
	c, _ := serveOn(t, &Agent{StateDir: t.TempDir()}, nil)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	out := newWatcher("first\n")
	type result struct {
		status int
		err    error
	}
	res := make(chan result, 1)
	go func() {
		st, err := c.Exec(ctx10(t), []string{"sh", "-c", `echo first; read x <"$1"; echo "second $x"`, "sh", fifo}, "", nil, out, nil)
		res <- result{st, err}
	}()
	select {
	case <-out.seen:
	case r := <-res:
		t.Fatalf("the command ended (%d, %v) before its first line arrived", r.status, r.err)
	case <-time.After(10 * time.Second):
		t.Fatalf("the first line did not arrive while the command ran: %q", out.String())
	}
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.status != 0 {
		t.Fatalf("Exec: %d, %v", r.status, r.err)
	}
	if got := out.String(); got != "first\nsecond go\n" {
		t.Errorf("stdout %q", got)
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := strings.Repeat("x", 3*Chunk+5)
	for _, tt := range []struct {
		name           string
		script, cwd    string
		env            []string
		status         int
		stdout, stderr string
	}{
		{name: "exit", script: "exit 3", status: 3},
		{name: "sigkill", script: "kill -KILL $$", status: 128 + 9},
		{name: "sigterm", script: "kill -TERM $$", status: 128 + 15},
		{name: "streams", script: "echo out; echo err >&2", stdout: "out\n", stderr: "err\n"},
		{name: "env", script: `printf %s "$UNDOSH_T"`, env: []string{"UNDOSH_T=a b"}, stdout: "a b"},
		{name: "env overrides", script: `printf %s "$HOME"`, env: []string{"HOME=/nowhere"}, stdout: "/nowhere"},
		{name: "cwd", script: "pwd", cwd: dir, stdout: dir + "\n"},
		{name: "cwd default", script: "pwd", stdout: "/\n"},
		{name: "chunks", script: "printf %s " + big, stdout: big},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := serveOn(t, &Agent{StateDir: t.TempDir()}, nil)
			var out, errb bytes.Buffer
			st, err := c.Exec(ctx10(t), []string{"sh", "-c", tt.script}, tt.cwd, tt.env, &out, &errb)
			if err != nil {
				t.Fatal(err)
			}
			if st != tt.status || out.String() != tt.stdout || errb.String() != tt.stderr {
				t.Errorf("status %d, stdout %.40q, stderr %q; want %d, %.40q, %q", st, out.String(), errb.String(), tt.status, tt.stdout, tt.stderr)
			}
		})
	}
}

// An exec ends soon after its command, even when a process the command
// left running holds its output open.
func TestExecLeavesChild(t *testing.T) {
	t.Parallel()
	c, _ := serveOn(t, &Agent{StateDir: t.TempDir()}, nil)
	var out bytes.Buffer
	st, err := c.Exec(ctx10(t), []string{"sh", "-c", "sleep 1000 & echo $!"}, "", nil, &out, nil)
	var pid int
	if _, err := fmt.Sscan(out.String(), &pid); err == nil {
		defer unix.Kill(pid, unix.SIGKILL)
	}
	if err != nil || st != 0 || pid == 0 {
		t.Errorf("Exec: %d, %q, %v", st, out.String(), err)
	}
}

// A command that cannot start is an error the agent sends, and the
// session goes on.
func TestExecNotFound(t *testing.T) {
	t.Parallel()
	c, _ := serveOn(t, &Agent{StateDir: t.TempDir()}, nil)
	ctx := ctx10(t)
	_, err := c.Exec(ctx, []string{"/nonexistent/undosh-test"}, "", nil, nil, nil)
	var ae *Error
	if !errors.As(err, &ae) || ae.Op != OpExec {
		t.Errorf("Exec of a missing command: %v, want an *Error", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("after a failed exec: %v", err)
	}
}

// stale is a writer that sends lines meant for another client (and the
// tail of a line cut off) before each of the agent's.
type stale struct{ w io.Writer }

func (s stale) Write(p []byte) (int, error) {
	fmt.Fprint(s.w, `{"id":"0123456789abcdef","stream":"out","data":"c3RhbGUK"}`+"\n")
	fmt.Fprint(s.w, `{"id":"0123456789abcdef","exit":9}`+"\n"+`,"pong":true}`+"\n")
	return s.w.Write(p)
}

// Replies with another id are skipped.
func TestStaleReplies(t *testing.T) {
	t.Parallel()
	c, _ := serveOn(t, &Agent{StateDir: t.TempDir()}, func(w io.Writer) io.Writer { return stale{w} })
	ctx := ctx10(t)
	var out bytes.Buffer
	st, err := c.Exec(ctx, []string{"sh", "-c", "echo hi; exit 4"}, "", nil, &out, nil)
	if err != nil || st != 4 || out.String() != "hi\n" {
		t.Errorf("Exec among stale replies: %d, %q, %v; want 4, \"hi\\n\"", st, out.String(), err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("Ping among stale replies: %v", err)
	}
}

// gone reports whether process pid has ended (a zombie has).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// A host that hangs up during an exec gets its process group killed: the
// command and what it left in the background.
func TestHangUpKills(t *testing.T) {
	t.Parallel()
	c, wait := serveOn(t, &Agent{StateDir: t.TempDir()}, nil)
	ctx, cancel := context.WithCancel(ctx10(t))
	out := newWatcher("\n")
	res := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, []string{"sh", "-c", "sleep 1000 & echo $$ $!; exec sleep 1000"}, "", nil, out, nil)
		res <- err
	}()
	select {
	case <-out.seen:
	case err := <-res:
		t.Fatalf("Exec ended early: %v", err)
	}
	var pids [2]int
	if _, err := fmt.Sscan(out.String(), &pids[0], &pids[1]); err != nil {
		t.Fatalf("pids %q: %v", out.String(), err)
	}
	for _, pid := range pids {
		if gone(pid) {
			t.Fatalf("process %d is gone before the host hung up", pid)
		}
	}
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("Exec after its context ended: %v, want context.Canceled", err)
	}
	if err := wait(); err != nil {
		t.Fatalf("ServeSession: %v", err)
	}
	// The command was waited for; the child it left behind has its
	// SIGKILL, and dies when next scheduled.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d outlived the session", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := c.Ping(context.Background()); err == nil {
		t.Error("a client whose call's context ended still works")
	}
}

// A request that does not decode, or is too long, or asks for what the
// agent does not do, is answered with an error, and the session goes on.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(shortDir(t), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			ServeSession(conn, &Agent{StateDir: t.TempDir()})
			conn.Close()
		}
	}()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for _, tt := range []struct {
		name, line, id string
	}{
		{"not json", "not json", ""},
		{"wrong type", `{"id":"x1","op":5}`, "x1"},
		{"unknown op", `{"id":"x2","op":"fly"}`, "x2"},
		{"no op", `{"id":"x3"}`, "x3"},
		{"too long", `{"id":"x4","op":"ping","argv":["` + strings.Repeat("a", MaxLine) + `"]}`, ""},
		{"exec without argv", `{"id":"x5","op":"exec"}`, "x5"},
		{"notify without who", `{"id":"x6","op":"notify"}`, "x6"},
		{"notify with a bad who", `{"id":"x7","op":"notify","who":{"generation":"one"}}`, "x7"},
		{"notify without a token", `{"id":"x8","op":"notify","who":{"generation":1}}`, "x8"},
		{"blank lines are skipped", "\n  \t\n" + `{"id":"x9","op":"exec","argv":[]}`, "x9"},
	} {
		if _, err := io.WriteString(conn, "\n"+tt.line+"\n"); err != nil {
			t.Fatal(err)
		}
		b, _, err := readLine(br)
		if err != nil {
			t.Fatal(err)
		}
		r, err := parseReply(b)
		if err != nil || r.ID != tt.id || r.Error == "" || r.Pong || r.Noted != nil {
			t.Errorf("%s: reply %s (%v), want an error for id %q", tt.name, b, err, tt.id)
		}
		// The session goes on.
		fmt.Fprintf(conn, `{"id":"p","op":"ping"}`+"\n")
		b, _, err = readLine(br)
		if r, err2 := parseReply(b); err != nil || err2 != nil || r.ID != "p" || !r.Pong {
			t.Fatalf("after %s: %s, %v", tt.name, b, err)
		}
	}
}

func who(t *testing.T, w hostlink.WhoYouAre) []byte {
	t.Helper()
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// notify keeps the WHO_YOU_ARE in host.json, and a second one of the same
// generation is refused with the generation kept.
func TestNotify(t *testing.T) {
	t.Parallel()
	sd := t.TempDir()
	c, _ := serveOn(t, &Agent{StateDir: sd}, nil)
	ctx := ctx10(t)
	n, err := c.Notify(ctx, who(t, hostlink.WhoYouAre{Generation: 5, Token: "five", Role: hostlink.RolePrimary, Entropy: make([]byte, 32)}))
	if err != nil || n.Generation != 5 {
		t.Fatalf("Notify: %+v, %v", n, err)
	}
	if w, ok := agent.Read(sd); !ok || w.Token != "five" || w.Generation != 5 {
		t.Errorf("host.json after notify: %+v, %v", w, ok)
	}
	n, err = c.Notify(ctx, who(t, hostlink.WhoYouAre{Generation: 5, Token: "again"}))
	var ae *Error
	if !errors.As(err, &ae) || n.Generation != 5 {
		t.Errorf("a replayed notify: %+v, %v; want NOTED 5 and an *Error", n, err)
	}
	if w, _ := agent.Read(sd); w.Token != "five" {
		t.Errorf("a replay replaced host.json: %+v", w)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("after a refusal: %v", err)
	}
}

// echoServer is a TCP target on loopback that sends back what it reads.
// Its connections' ends arrive on the channel.
func echoServer(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ended := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
				ended <- struct{}{}
			}()
		}
	}()
	return ln.Addr().String(), ended
}

// relayed starts a relay of a to target and returns a connection through
// it that has carried bytes both ways.
func relayed(t *testing.T, a *Agent, target string) net.Conn {
	t.Helper()
	ln, err := listenUnix(filepath.Join(shortDir(t), "relay.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.relay(ctx, ln, target) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	roundTrip(t, c, "hello\n")
	return c
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("through the relay: %q, %v; want %q", buf, err, msg)
	}
}

// wantEOF checks that the relay closed c.
func wantEOF(t *testing.T, c net.Conn) {
	t.Helper()
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("a relayed connection after a reset: read %d, %v; want EOF", n, err)
	}
}

// A reset closes every relayed connection, at both ends.
func TestRelayReset(t *testing.T) {
	t.Parallel()
	target, ended := echoServer(t)
	a := &Agent{StateDir: t.TempDir()}
	rc := relayed(t, a, target)
	roundTrip(t, rc, strings.Repeat("big", 100000))
	c, _ := serveOn(t, a, nil)
	if err := c.Reset(ctx10(t)); err != nil {
		t.Fatal(err)
	}
	wantEOF(t, rc)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Error("the target's end of a reset relay stayed open")
	}
	// New connections are relayed as before.
	relayed(t, a, target)
}

// A notify of a copy or a restored VM resets the relays; of a primary, it
// does not.
func TestNotifyResets(t *testing.T) {
	t.Parallel()
	target, _ := echoServer(t)
	a := &Agent{StateDir: t.TempDir()}
	rc := relayed(t, a, target)
	c, _ := serveOn(t, a, nil)
	ctx := ctx10(t)
	if _, err := c.Notify(ctx, who(t, hostlink.WhoYouAre{Generation: 1, Token: "one", Role: hostlink.RolePrimary})); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, rc, "still here\n")
	for i, role := range []hostlink.Role{hostlink.RoleCopy, hostlink.RoleRestored} {
		if _, err := c.Notify(ctx, who(t, hostlink.WhoYouAre{Generation: uint64(2 + i), Token: "t", Role: role})); err != nil {
			t.Fatal(err)
		}
		wantEOF(t, rc)
		rc = relayed(t, a, target)
	}
}

// A stale socket is replaced; a live one, or a file that is not a socket,
// is not.
func TestListenUnix(t *testing.T) {
	t.Parallel()
	dir := shortDir(t)
	path := filepath.Join(dir, "s")
	old, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listenUnix(path); err == nil {
		t.Error("listenUnix took a socket another listener serves")
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()
	ln, err := listenUnix(path)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	defer ln.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket's mode: %v, %v; want 0600", fi.Mode(), err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	if _, err := listenUnix(file); err == nil {
		t.Error("listenUnix replaced a regular file")
	}
}

func TestRelayURLs(t *testing.T) {
	t.Parallel()
	a := &Agent{}
	for _, tt := range []struct{ listen, dial string }{
		{"tcp://127.0.0.1:1", "tcp://127.0.0.1:1"},
		{"unix://", "tcp://127.0.0.1:1"},
		{"unix://host/p", "tcp://127.0.0.1:1"},
		{"unix:///p", "unix:///q"},
		{"unix:///p", "tcp://127.0.0.1"},
		{"unix:///p", "tcp://127.0.0.1:1/x"},
	} {
		if err := a.Relay(t.Context(), tt.listen, tt.dial); err == nil {
			t.Errorf("Relay(%q, %q) = nil, want an error", tt.listen, tt.dial)
		}
	}
}

// A client of a guest that never answers gives up when its context's
// deadline passes, and says so.
func TestNoAnswer(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(shortDir(t), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		// A VM that has not started its agent: QEMU accepts, nobody reads.
		conn, err := ln.Accept()
		if err == nil {
			t.Cleanup(func() { conn.Close() })
		}
	}()
	c, err := Dial(sock, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = c.Ping(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the guest agent on "+sock+" did not answer ping within 100ms") {
		t.Errorf("Ping of a silent guest: %v", err)
	}
}

// The agent finds its port by the name in sysfs, and waits for it.
func TestFindPort(t *testing.T) {
	t.Parallel()
	sys := t.TempDir()
	port := func(dir, name string) {
		d := filepath.Join(sys, "class", "virtio-ports", dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "name"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := &Agent{Sys: sys, Dev: "/devdir"}
	ctx := t.Context()
	if _, err := a.findPort(ctx, "undosh", 0); err == nil || !strings.Contains(err.Error(), "virtserialport,name=undosh") {
		t.Errorf("no ports: %v", err)
	}
	port("vport0p1", "org.qemu.guest_agent.0")
	if _, err := a.findPort(ctx, "undosh", 0); err == nil {
		t.Error("found a port of another name")
	}
	found := make(chan string, 1)
	go func() {
		dev, err := a.findPort(ctx, "undosh", time.Minute)
		if err != nil {
			t.Error(err)
		}
		found <- dev
	}()
	port("vport1p2", "undosh")
	if dev := <-found; dev != "/devdir/vport1p2" {
		t.Errorf("found %q, want /devdir/vport1p2", dev)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.findPort(cctx, "other", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting with a context that ended: %v", err)
	}
}

// fifoHost is one host connection to an agent served on two FIFOs, which
// read as the virtio-serial device does: at the end while no host is
// connected, and again once one is.
type fifoHost struct{ r, w *os.File }

func (h fifoHost) Read(p []byte) (int, error)  { return h.r.Read(p) }
func (h fifoHost) Write(p []byte) (int, error) { return h.w.Write(p) }
func (h fifoHost) Close() error                { h.w.Close(); return h.r.Close() }

// fifoDevice is a device on two FIFOs that reads as the virtio-serial
// one does (see fifoHost), and connect, which connects a host to it.
func fifoDevice(t *testing.T) (dev struct {
	io.Reader
	io.Writer
}, connect func() fifoHost) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	for _, p := range []string{in, out} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	devIn, err := os.OpenFile(in, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's own read end keeps what it writes with no host there,
	// as the device does.
	devOut, err := os.OpenFile(out, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devIn.Close(); devOut.Close() })
	dev.Reader, dev.Writer = devIn, devOut
	return dev, func() fifoHost {
		t.Helper()
		w, err := os.OpenFile(in, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := os.OpenFile(out, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fifoHost{r, w}
	}
}

// The agent serves one host after another on the same device, and a host
// that hung up in the middle of an exec leaves nothing the next one hears.
func TestServeHosts(t *testing.T) {
	t.Parallel()
	dev, connect := fifoDevice(t)
	killed := make(chan struct{}, 1)
	a := &Agent{StateDir: t.TempDir(), Log: slog.New(onMessage{msgHungUp, killed})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.serve(ctx, dev) }()
	for i := range 3 {
		c := newClient(connect(), "fifo")
		var stdout bytes.Buffer
		st, err := c.Exec(ctx10(t), []string{"echo", "host", strconv.Itoa(i)}, "", nil, &stdout, nil)
		if err != nil || st != 0 || stdout.String() != fmt.Sprintf("host %d\n", i) {
			t.Errorf("host %d: %d, %q, %v", i, st, stdout.String(), err)
		}
		if i == 1 {
			// Hang up in the middle of an exec that writes more than
			// the device holds: the next host reads its replies first.
			ectx, cancel := context.WithCancel(ctx10(t))
			w := newWatcher("y\n")
			res := make(chan error, 1)
			go func() {
				_, err := c.Exec(ectx, []string{"sh", "-c", "exec yes"}, "", nil, w, nil)
				res <- err
			}()
			select {
			case <-w.seen:
			case err := <-res:
				t.Fatalf("the exec ended before its output came: %v", err)
			}
			cancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Errorf("Exec after its context ended: %v", err)
			}
			// The device gives no sign of a host that connects or
			// hangs up but the end of reading: a host that connected
			// again before the agent read that end would be taken for
			// the one that left.
			select {
			case <-killed:
			case <-time.After(10 * time.Second):
				t.Fatal("the agent did not see the host hang up during an exec")
			}
		}
		c.Close()
	}
	cancel()
	dev.Reader.(*os.File).Close()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// failOnce is a writer whose next write fails once fail is set.
type failOnce struct {
	io.Writer
	fail atomic.Bool
}

func (w *failOnce) Write(p []byte) (int, error) {
	if w.fail.CompareAndSwap(true, false) {
		return 0, errors.New("injected write failure")
	}
	return w.Writer.Write(p)
}

// A reply that cannot be written ends its session, not the agent, and the
// next session does not lose what the host sends meanwhile.
func TestServeAfterWriteFailure(t *testing.T) {
	t.Parallel()
	dev, connect := fifoDevice(t)
	w := &failOnce{Writer: dev.Writer}
	warned := make(chan struct{}, 1)
	a := &Agent{StateDir: t.TempDir(), Log: slog.New(onMessage{"a host session ended", warned})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- a.serve(ctx, struct {
			io.Reader
			io.Writer
		}{dev.Reader, w})
	}()
	h := connect()
	defer h.Close()
	// The pong to a fails to be written; the host, still there, asks
	// again.
	w.fail.Store(true)
	fmt.Fprintf(h, "{\"id\":\"a\",\"op\":\"ping\"}\n")
	select {
	case <-warned:
	case err := <-done:
		t.Fatalf("serve ended after a write failed: %v", err)
	}
	fmt.Fprintf(h, "{\"id\":\"b\",\"op\":\"ping\"}\n")
	h.r.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(h).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":"b"`) || !strings.Contains(line, `"pong":true`) {
		t.Errorf("the reply to a ping after a failed write: %q, %v", line, err)
	}
}

// onMessage is a log handler that tells when a record with its message
// comes.
type onMessage struct {
	msg string
	c   chan<- struct{}
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.c <- struct{}{}
	}
	return nil
}
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onMessage) WithGroup(string) slog.Handler      { return h }

// Close ends a call that runs, and the guest kills its exec.
func TestCloseDuringExec(t *testing.T) {
	t.Parallel()
	c, wait := serveOn(t, &Agent{StateDir: t.TempDir()}, nil)
	out := newWatcher("\n")
	res := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx10(t), []string{"sh", "-c", "echo $$; exec sleep 1000"}, "", nil, out, nil)
		res <- err
	}()
	select {
	case <-out.seen:
	case err := <-res:
		t.Fatalf("Exec ended early: %v", err)
	}
	c.Close()
	if err := <-res; err == nil {
		t.Error("Exec returned no error after Close")
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(out.String(), &pid)
	if !gone(pid) {
		t.Errorf("the exec's command %d outlived its session", pid)
	}
	if err := c.Ping(context.Background()); err == nil {
		t.Error("Ping after Close worked")
	}
}

// An agent without a state directory refuses a notify rather than write
// host.json where it runs.
func TestNotifyNoStateDir(t *testing.T) {
	t.Parallel()
	c, _ := serveOn(t, &Agent{}, nil)
	_, err := c.Notify(ctx10(t), who(t, hostlink.WhoYouAre{Generation: 1, Token: "one"}))
	var ae *Error
	if !errors.As(err, &ae) || !strings.Contains(ae.Msg, "state directory") {
		t.Errorf("Notify without a state directory: %v", err)
	}
}
