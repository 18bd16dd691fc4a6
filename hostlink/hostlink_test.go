package hostlink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type harness struct {
	t       *testing.T
	srv     *Server
	backend Backend
	state   string
}

func newHarness(t *testing.T, b Backend, state string) *harness {
	t.Helper()
	if state == "" {
		state = t.TempDir()
	}
	srv, err := NewServer(Options{StateDir: state, Backend: b, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &harness{t: t, srv: srv, backend: b, state: state}
}

// socketDir returns a short directory for Unix sockets (their paths are
// limited to 108 bytes).
func socketDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "hl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// serve binds a listener of network ("unix" or "tcp") to the sandbox and
// returns the URL a client of that sandbox uses, token included. wrap, if
// not nil, wraps the listener.
func (h *harness) serve(network, sandbox string, wrap func(net.Listener) net.Listener) string {
	h.t.Helper()
	var (
		ln  net.Listener
		err error
		u   string
	)
	if network == "unix" {
		path := filepath.Join(socketDir(h.t), "v.sock_52")
		ln, err = net.Listen("unix", path)
		u = "unix://" + path
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			u = "tcp://" + ln.Addr().String()
		}
	}
	if err != nil {
		h.t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	id, err := h.srv.Identity(sandbox)
	if err != nil {
		h.t.Fatal(err)
	}
	go h.srv.Serve(ln, sandbox)
	return u + "?token=" + id.Token
}

func client(t *testing.T, u string) *Client {
	t.Helper()
	c, err := NewClient(u, ClientOptions{Agent: "test", RetryWindow: 10 * time.Second, PollWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func shell(key, step string) ForkRun {
	return ForkRun{Key: key, Step: Command{Shell: step}, Network: Network{Mode: "off"}}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			b := newDirBackend(t.TempDir())
			h := newHarness(t, b, "")
			c := client(t, h.serve(network, "vm-a", nil))
			ctx := ctxT(t)

			w, err := c.Hello(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if w.Sandbox != "vm-a" || w.Generation != 1 || w.Role != RolePrimary || w.MaxFrame != MaxFrame {
				t.Errorf("welcome %+v", w)
			}

			// A step that passes is kept, with its output and status.
			var out, errb bytes.Buffer
			req := shell("k1", "echo hello; echo oops >&2; echo data > f")
			req.Verify = &Command{Shell: "test -s f"}
			o, err := c.Run(ctx, req, &out, &errb)
			if err != nil {
				t.Fatal(err)
			}
			if o.State != StateKept || *o.Result.StepExit != 0 || *o.Result.VerifyExit != 0 {
				t.Errorf("op %+v", o)
			}
			if out.String() != "hello\n" || errb.String() != "oops\n" {
				t.Errorf("output %q %q", out.String(), errb.String())
			}
			if _, err := os.Stat(filepath.Join(b.dir("vm-a"), "f")); err != nil {
				t.Errorf("kept step's file: %v", err)
			}

			// A step whose verify fails is discarded: its file is gone.
			req = shell("k2", "echo junk > g; exit 0")
			req.Verify = &Command{Argv: []string{"/bin/sh", "-c", "exit 3"}}
			o, err = c.Run(ctx, req, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.State != StateDiscarded || *o.Result.VerifyExit != 3 {
				t.Errorf("op %+v", o)
			}
			if _, err := os.Stat(filepath.Join(b.dir("vm-a"), "g")); !os.IsNotExist(err) {
				t.Errorf("discarded step's file: %v", err)
			}

			// A step's exit status passes through.
			o, err = c.Run(ctx, shell("k3", "exit 7"), io.Discard, io.Discard)
			if err != nil || o.State != StateDiscarded || *o.Result.StepExit != 7 {
				t.Errorf("exit 7: %+v %v", o, err)
			}

			// Checkpoint, list, change, restore.
			a, err := c.Checkpoint(ctx, Checkpoint{Key: "c1", Label: "after k1", Retention: Retention{KeepLast: 5}})
			if err != nil {
				t.Fatal(err)
			}
			o, err = c.Follow(ctx, a.Op, nil, nil)
			if err != nil || o.State != StateDone || o.Result.Checkpoint != "ck-1" {
				t.Fatalf("checkpoint: %+v %v", o, err)
			}
			list, err := c.Checkpoints(ctx)
			if err != nil || len(list) != 1 || list[0].Label != "after k1" {
				t.Fatalf("list: %+v %v", list, err)
			}
			if o, err := c.Run(ctx, shell("k4", "rm f"), nil, nil); err != nil || o.State != StateKept {
				t.Fatalf("rm: %+v %v", o, err)
			}
			a, err = c.Restore(ctx, Restore{Key: "r1", Checkpoint: "ck-1"})
			if err != nil {
				t.Fatal(err)
			}
			if o, err := c.Follow(ctx, a.Op, nil, nil); err != nil || o.State != StateDone {
				t.Fatalf("restore: %+v %v", o, err)
			}
			if _, err := os.Stat(filepath.Join(b.dir("vm-a"), "f")); err != nil {
				t.Errorf("restored file: %v", err)
			}
			a, err = c.Restore(ctx, Restore{Key: "r2", Checkpoint: "ck-9"})
			if err != nil {
				t.Fatal(err)
			}
			if o, err := c.Follow(ctx, a.Op, nil, nil); err != nil || o.State != StateFailed || o.Error.Code != CodeNotFound {
				t.Fatalf("restore unknown: %+v %v", o, err)
			}
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newDirBackend(t.TempDir()), "")
	c := client(t, h.serve("unix", "vm-a", nil))
	ctx := ctxT(t)
	for _, tt := range []struct {
		name string
		req  ForkRun
	}{
		{"no key", ForkRun{Step: Command{Shell: "true"}, Network: Network{Mode: "off"}}},
		{"shell and argv", ForkRun{Key: "a", Step: Command{Shell: "true", Argv: []string{"true"}}, Network: Network{Mode: "off"}}},
		{"no network mode", ForkRun{Key: "b", Step: Command{Shell: "true"}}},
		{"allow with off", ForkRun{Key: "c", Step: Command{Shell: "true"}, Network: Network{Mode: "off", Allow: []string{"x:1"}}}},
		{"bad allow", ForkRun{Key: "d", Step: Command{Shell: "true"}, Network: Network{Mode: "allow", Allow: []string{"x"}}}},
		{"relative cwd", ForkRun{Key: "e", Step: Command{Shell: "true", Cwd: "tmp"}, Network: Network{Mode: "off"}}},
		{"bad env", ForkRun{Key: "f", Step: Command{Shell: "true", Env: []string{"=x"}}, Network: Network{Mode: "off"}}},
		{"launcher without path", ForkRun{Key: "h", Step: Command{Argv: []string{"bash"}, Launcher: "/usr/lib/undosh/undosh"}, Network: Network{Mode: "off"}}},
		{"relative launcher", ForkRun{Key: "i", Step: Command{Argv: []string{"bash"}, Path: "/bin/bash", Launcher: "undosh"}, Network: Network{Mode: "off"}}},
		{"budget over 24h", ForkRun{Key: "g", Step: Command{Shell: "true"}, Network: Network{Mode: "off"}, Timeouts: Timeouts{StepMS: 25 * 3600 * 1000}}},
	} {
		if _, err := c.ForkRun(ctx, tt.req); !errors.Is(err, &Error{Code: CodeInvalid}) {
			t.Errorf("%s: %v, want invalid", tt.name, err)
		}
	}
	if _, err := c.Status(ctx, "op-nope", 0); !errors.Is(err, &Error{Code: CodeNotFound}) {
		t.Errorf("status of unknown op: %v", err)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newDirBackend(t.TempDir()), "")
	c := client(t, h.serve("unix", "vm-a", nil))
	ctx := ctxT(t)

	req := shell("slow", "echo before; sleep 20")
	req.Timeouts.StepMS = 300
	start := time.Now()
	var out bytes.Buffer
	o, err := c.Run(ctx, req, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.State != StateDiscarded || o.Result.TimedOut != "step" || out.String() != "before\n" {
		t.Errorf("timed out step: %+v %q", o, out.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("step budget 300 ms took %v", d)
	}

	a, err := c.ForkRun(ctx, shell("cancel-me", "sleep 20"))
	if err != nil {
		t.Fatal(err)
	}
	// Busy: one operation at a time per sandbox.
	if _, err := c.ForkRun(ctx, shell("other", "true")); !errors.Is(err, &Error{Code: CodeBusy}) {
		t.Errorf("second op while one runs: %v, want busy", err)
	}
	if _, err := c.Cancel(ctx, a.Op); err != nil {
		t.Fatal(err)
	}
	o, err = c.Status(ctx, a.Op, 5*time.Second)
	if err != nil || o.State != StateCancelled {
		t.Errorf("cancelled op: %+v %v", o, err)
	}
}

// dropListener drops connections the way a snapshot does. For the first
// connection that carries an ACCEPTED it closes without sending it (the ack
// is lost), for the second it sends it and then closes, and every third
// OUTPUT reply is cut in half.
type dropListener struct {
	net.Listener
	accepts atomic.Int64
	chunks  atomic.Int64
}

func (l *dropListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, l: l}, nil
}

type dropConn struct {
	net.Conn
	l *dropListener
}

func (c *dropConn) Write(p []byte) (int, error) {
	if len(p) >= HeaderSize && p[0] == 'U' {
		switch Type(p[3]) {
		case TypeAccepted:
			switch c.l.accepts.Add(1) {
			case 1:
				c.Conn.Close()
				return 0, net.ErrClosed
			case 2:
				n, err := c.Conn.Write(p)
				c.Conn.Close()
				return n, err
			}
		case TypeChunk:
			if c.l.chunks.Add(1)%3 == 1 {
				c.Conn.Write(p[:len(p)/2])
				c.Conn.Close()
				return 0, net.ErrClosed
			}
		}
	}
	return c.Conn.Write(p)
}

func TestVMSwap(t *testing.T) {
	t.Parallel()
	b := newDirBackend(t.TempDir())
	h := newHarness(t, b, "")
	dl := new(dropListener)
	u := h.serve("unix", "vm-a", func(ln net.Listener) net.Listener { dl.Listener = ln; return dl })
	c := client(t, u)
	ctx := ctxT(t)

	step := `for i in $(seq 1 200); do echo "out $i"; echo "err $i" >&2; done; echo x >> ran`
	for i, key := range []string{"swap-1", "swap-2", "swap-3"} {
		var out, errb bytes.Buffer
		o, err := c.Run(ctx, shell(key, step), &out, &errb)
		if err != nil {
			t.Fatal(err)
		}
		if o.State != StateKept {
			t.Fatalf("%s: %+v", key, o)
		}
		var wantOut, wantErr strings.Builder
		for j := 1; j <= 200; j++ {
			fmt.Fprintf(&wantOut, "out %d\n", j)
			fmt.Fprintf(&wantErr, "err %d\n", j)
		}
		if out.String() != wantOut.String() || errb.String() != wantErr.String() {
			t.Errorf("%s: output not exactly once: %d/%d bytes, want %d/%d", key, out.Len(), errb.Len(), wantOut.Len(), wantErr.Len())
		}
		if got := b.forks.Load(); got != int64(i+1) {
			t.Errorf("%s: backend ran %d forks, want %d", key, got, i+1)
		}
	}
	ran, _ := os.ReadFile(filepath.Join(b.dir("vm-a"), "ran"))
	if string(ran) != "x\nx\nx\n" {
		t.Errorf("steps ran %q, want each once", ran)
	}
	if dl.accepts.Load() < 3 || dl.chunks.Load() < 3 {
		t.Errorf("the wrapper dropped too little: %d accepts, %d chunks", dl.accepts.Load(), dl.chunks.Load())
	}
}

func TestDedup(t *testing.T) {
	t.Parallel()
	b := newDirBackend(t.TempDir())
	h := newHarness(t, b, "")
	c := client(t, h.serve("tcp", "vm-a", nil))
	ctx := ctxT(t)
	a1, err := c.ForkRun(ctx, shell("same", "echo once >> f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Follow(ctx, a1.Op, nil, nil); err != nil {
		t.Fatal(err)
	}
	a2, err := c.ForkRun(ctx, shell("same", "echo once >> f"))
	if err != nil || a2.Op != a1.Op || !a2.Replayed || a2.State != StateKept {
		t.Errorf("resubmission: %+v %v, want replay of %s", a2, err, a1.Op)
	}
	if _, err := c.ForkRun(ctx, shell("same", "echo twice >> f")); !errors.Is(err, &Error{Code: CodeKeyConflict}) {
		t.Errorf("same key, other request: %v, want key_conflict", err)
	}
	if n := b.forks.Load(); n != 1 {
		t.Errorf("backend ran %d forks, want 1", n)
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	bb := &blockBackend{dirBackend: *newDirBackend(t.TempDir()), started: make(chan string, 1), release: make(chan struct{})}
	srv1, err := NewServer(Options{StateDir: state, Backend: bb})
	if err != nil {
		t.Fatal(err)
	}
	h1 := &harness{t: t, srv: srv1, backend: bb, state: state}
	c := client(t, h1.serve("unix", "vm-a", nil))
	ctx := ctxT(t)

	// One operation finishes before the restart, one is running at it.
	a1, err := c.ForkRun(ctx, shell("done", "x"))
	if err != nil {
		t.Fatal(err)
	}
	<-bb.started
	bb.release <- struct{}{}
	if o, err := c.Follow(ctx, a1.Op, nil, nil); err != nil || o.State != StateKept {
		t.Fatalf("first op: %+v %v", o, err)
	}
	a2, err := c.ForkRun(ctx, shell("running", "x"))
	if err != nil {
		t.Fatal(err)
	}
	<-bb.started

	// A new server over the same state, as after a crash of the first:
	// the first is not shut down until the end.
	h2 := newHarness(t, newDirBackend(t.TempDir()), state)
	c2 := client(t, h2.serve("unix", "vm-a", nil))
	if c2.token != c.token {
		t.Errorf("the sandbox's token changed across a restart")
	}
	var out bytes.Buffer
	o, err := c2.Follow(ctx, a1.Op, &out, nil)
	if err != nil || o.State != StateKept || out.String() != "started\n" {
		t.Errorf("finished op after restart: %+v %q %v", o, out.String(), err)
	}
	o, err = c2.Status(ctx, a2.Op, 0)
	if err != nil || o.State != StateAbandoned || o.Error == nil || o.Error.Code != CodeHostRestarted || o.Stdout != int64(len("started\n")) {
		t.Errorf("running op after restart: %+v %v", o, err)
	}
	// Its key still deduplicates.
	if a, err := c2.ForkRun(ctx, shell("running", "x")); err != nil || a.Op != a2.Op || !a.Replayed {
		t.Errorf("resubmission after restart: %+v %v", a, err)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	srv1.Shutdown(sctx)
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newDirBackend(t.TempDir()), "")
	ua := h.serve("unix", "vm-a", nil)
	ub := h.serve("unix", "vm-b", nil)
	ca, cb := client(t, ua), client(t, ub)
	ctx := ctxT(t)

	a, err := ca.ForkRun(ctx, shell("k", "echo secret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Follow(ctx, a.Op, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	// B cannot see, read or cancel A's operation, even by its id.
	if _, err := cb.Status(ctx, a.Op, 0); !errors.Is(err, &Error{Code: CodeNotFound}) {
		t.Errorf("B status of A's op: %v", err)
	}
	if _, err := cb.Output(ctx, OutputRequest{Op: a.Op}); !errors.Is(err, &Error{Code: CodeNotFound}) {
		t.Errorf("B output of A's op: %v", err)
	}
	if _, err := cb.Cancel(ctx, a.Op); !errors.Is(err, &Error{Code: CodeNotFound}) {
		t.Errorf("B cancel of A's op: %v", err)
	}
	// The same key on B is B's own operation.
	if a2, err := cb.ForkRun(ctx, shell("k", "echo secret")); err != nil || a2.Op == a.Op || a2.Replayed {
		t.Errorf("B's key k: %+v %v", a2, err)
	}
	// A's token on B's listener is refused: identity is the listener.
	cab := client(t, ub)
	cab.token = ca.token
	if _, err := cab.Hello(ctx); !errors.Is(err, &Error{Code: CodeUnauthorized}) {
		t.Errorf("A's token on B's listener: %v", err)
	}
	if _, err := client(t, strings.Split(ua, "?")[0]).Hello(ctx); !errors.Is(err, &Error{Code: CodeUnauthorized}) {
		t.Errorf("no token: %v", err)
	}

	// After a fork the old token is refused, the new one works.
	old := ca.token
	w, err := h.srv.Advance("vm-a", RolePrimary, a.Op)
	if err != nil {
		t.Fatal(err)
	}
	if w.Generation != 2 || w.Parent != 1 || w.Token == old || len(w.Entropy) != 32 {
		t.Errorf("who you are: %+v", w)
	}
	_, err = ca.Hello(ctx)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeStaleGeneration || e.Generation != 2 {
		t.Errorf("old token after advance: %v", err)
	}
	ca.Adopt(w)
	if wel, err := ca.Hello(ctx); err != nil || wel.Generation != 2 {
		t.Errorf("new token: %+v %v", wel, err)
	}
	// The old operation is still A's to read in the new generation.
	if o, err := ca.Status(ctx, a.Op, 0); err != nil || o.Generation != 1 {
		t.Errorf("status across generations: %+v %v", o, err)
	}
}

// A client that waits for the new token while the host advances the
// generation resumes with it: the Run survives both the drop and the
// re-key.
func TestStaleTokenRetry(t *testing.T) {
	t.Parallel()
	bb := &blockBackend{dirBackend: *newDirBackend(t.TempDir()), started: make(chan string, 1), release: make(chan struct{})}
	h := newHarness(t, bb, "")
	c := client(t, h.serve("unix", "vm-a", nil))
	ctx := ctxT(t)
	go func() {
		op := <-bb.started
		w, err := h.srv.Advance("vm-a", RolePrimary, op)
		if err != nil {
			t.Error(err)
			return
		}
		time.Sleep(100 * time.Millisecond) // the notice arrives a little later
		c.Adopt(w)
		bb.release <- struct{}{}
	}()
	var out bytes.Buffer
	o, err := c.Run(ctx, shell("k", "x"), &out, nil)
	if err != nil || o.State != StateKept || out.String() != "started\n" {
		t.Errorf("run across advance: %+v %q %v", o, out.String(), err)
	}
}

func rawConn(t *testing.T, u string) net.Conn {
	t.Helper()
	path := strings.TrimPrefix(strings.Split(u, "?")[0], "unix://")
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newDirBackend(t.TempDir()), "")
	u := h.serve("unix", "vm-a", nil)
	for _, tt := range []struct {
		name string
		in   []byte
		code Code
	}{
		{"oversized", header(1, TypeHello, MaxRequest+1), CodeBadFrame},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), CodeBadFrame},
		{"version 9", header(9, TypeHello, 0), CodeUnsupportedVersion},
		{"not hello", append(header(1, TypeStatus, 2), "{}"...), CodeProtocol},
		{"bad json", append(header(1, TypeHello, 3), "{{{"...), CodeProtocol},
		{"hello version 2", append(header(1, TypeHello, 13), `{"version":2}`...), CodeUnsupportedVersion},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := rawConn(t, u)
			c.Write(tt.in)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			var e Error
			if err := readMsg(c, MaxFrame, TypeError, &e); err != nil || e.Code != tt.code {
				t.Errorf("reply %+v %v, want %s", e, err, tt.code)
			}
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("connection left open: %v", err)
			}
		})
	}
	t.Run("truncated", func(t *testing.T) {
		c := rawConn(t, u)
		c.Write(append(header(1, TypeHello, 100), "{"...))
		c.(*net.UnixConn).CloseWrite()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var e Error
		if err := readMsg(c, MaxFrame, TypeError, &e); err != nil || e.Code != CodeBadFrame {
			t.Errorf("reply %+v %v", e, err)
		}
	})
}

// Slow clients hold nothing but their own connection, and are cut off by
// the request timeout; many clients at once are all served; memory stays
// bounded even when each claims the largest request.
func TestManyAndSlowClients(t *testing.T) {
	t.Parallel()
	srv, err := NewServer(Options{StateDir: t.TempDir(), Backend: newDirBackend(t.TempDir()), RequestTimeout: 3 * time.Second, MaxConns: 128})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	h := &harness{t: t, srv: srv}
	u := h.serve("unix", "vm-a", nil)
	ctx := ctxT(t)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// 100 slow clients: each claims a full request and sends one byte.
	var slow []net.Conn
	for range 100 {
		c := rawConn(t, u)
		c.Write(append(header(1, TypeHello, MaxRequest), '{'))
		slow = append(slow, c)
	}
	// Meanwhile 1000 clients at once each do hello and a status.
	c := client(t, u)
	a, err := c.ForkRun(ctx, shell("k", "echo hi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Follow(ctx, a.Op, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var fails atomic.Int64
	for range 1000 {
		wg.Go(func() {
			if o, err := c.Status(ctx, a.Op, 0); err != nil || o.State != StateKept {
				if fails.Add(1) == 1 {
					t.Errorf("status: %+v %v", o, err)
				}
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("1000 clients took %v behind 100 slow ones", d)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("heap grew %d MiB", grew>>20)
	}
	// The slow ones are cut off by the request timeout.
	for _, s := range slow[:3] {
		s.SetDeadline(time.Now().Add(10 * time.Second))
		var e Error
		if err := readMsg(s, MaxFrame, TypeError, &e); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("slow client never cut off")
			}
		}
	}
}

func TestURLs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"vsock://2:5200", true},
		{"unix:///run/undosh.sock_52", true},
		{"tcp://127.0.0.1:7000?token=abc", true},
		{"tcp://[::1]:7000", true},
		{"tcp://10.0.0.1:7000", false},
		{"tcp://example.com:7000", false},
		{"vsock://host:52", false},
		{"unix://relative", false},
		{"http://127.0.0.1:1", false},
	} {
		_, err := NewClient(tt.url, ClientOptions{})
		if (err == nil) != tt.ok {
			t.Errorf("NewClient(%q): %v", tt.url, err)
		}
	}
	c, _ := NewClient("tcp://127.0.0.1:1?token=abc", ClientOptions{})
	if c.token != "abc" {
		t.Errorf("token from url: %q", c.token)
	}
	// What the client says of a URL never shows its token.
	for _, u := range []string{"tcp://10.0.0.1:7000?token=s3cr3t", "http://127.0.0.1:1?token=s3cr3t", "unix://x?token=s3cr3t", "vsock://a:b?token=s3cr3t", "tcp://127.0.0.1:1%zz?token=s3cr3t", "unix:///p\x7f?token=s3cr3t"} {
		if _, err := NewClient(u, ClientOptions{}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("NewClient(%q): %v, want an error without the token", u, err)
		}
	}
	for _, tt := range [][2]string{
		{"unix:///run/h.sock?token=abc", "unix:///run/h.sock"},
		{"tcp://127.0.0.1:1?x=1&token=abc", "tcp://127.0.0.1:1"},
		{"vsock://2:5757", "vsock://2:5757"},
		{"unix:///run/h.sock#token=abc", "unix:///run/h.sock"},
	} {
		if got := HostName(tt[0]); got != tt[1] {
			t.Errorf("HostName(%q) = %q, want %q", tt[0], got, tt[1])
		}
	}
}

func BenchmarkHelloStatus(b *testing.B) {
	srv, err := NewServer(Options{StateDir: b.TempDir(), Backend: newDirBackend(b.TempDir())})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	ln, err := net.Listen("unix", filepath.Join(b.TempDir(), "s"))
	if err != nil {
		b.Fatal(err)
	}
	id, _ := srv.Identity("vm-a")
	go srv.Serve(ln, "vm-a")
	c, _ := NewClient("unix://"+ln.Addr().String()+"?token="+id.Token, ClientOptions{})
	ctx := context.Background()
	a, err := c.ForkRun(ctx, shell("k", "true"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Follow(ctx, a.Op, nil, nil); err != nil {
		b.Fatal(err)
	}
	times := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		if _, err := c.Status(ctx, a.Op, 0); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}

// Output larger than one chunk arrives whole, in order, across several
// OUTPUT round trips; output over the host's cap is counted, not kept.
func TestLargeOutput(t *testing.T) {
	t.Parallel()
	srv, err := NewServer(Options{StateDir: t.TempDir(), Backend: newDirBackend(t.TempDir()), MaxOutput: 700 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	h := &harness{t: t, srv: srv}
	c := client(t, h.serve("unix", "vm-a", nil))
	ctx := ctxT(t)
	var out, errb bytes.Buffer
	o, err := c.Run(ctx, shell("big", "seq 1 200000; seq 1 1000 >&2"), &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := exec.Command("seq", "1", "200000").Output()
	if len(want) <= 700<<10 {
		t.Fatalf("test output too small: %d", len(want))
	}
	if !bytes.Equal(out.Bytes(), want[:700<<10]) || o.Stdout != 700<<10 || o.Dropped != int64(len(want)-700<<10) {
		t.Errorf("stdout %d bytes, op %+v", out.Len(), o)
	}
	if wantErr, _ := exec.Command("seq", "1", "1000").Output(); !bytes.Equal(errb.Bytes(), wantErr) {
		t.Errorf("stderr %d bytes", errb.Len())
	}
}

// Shutdown waits for running operations until its context ends, then
// stops them: they end abandoned, and a new server reports them so.
func TestShutdownAbandons(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	bb := &blockBackend{dirBackend: *newDirBackend(t.TempDir()), started: make(chan string, 1), release: make(chan struct{})}
	srv, err := NewServer(Options{StateDir: state, Backend: bb})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv}
	c := client(t, h.serve("unix", "vm-a", nil))
	ctx := ctxT(t)
	a, err := c.ForkRun(ctx, shell("k", "x"))
	if err != nil {
		t.Fatal(err)
	}
	<-bb.started
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	srv.Shutdown(sctx)
	if _, err := c.Hello(ctx); err == nil {
		t.Errorf("hello after shutdown succeeded")
	}
	h2 := newHarness(t, newDirBackend(t.TempDir()), state)
	o, err := client(t, h2.serve("unix", "vm-a", nil)).Status(ctx, a.Op, 0)
	if err != nil || o.State != StateAbandoned || o.Error.Code != CodeHostRestarted {
		t.Errorf("after shutdown: %+v %v", o, err)
	}
}
