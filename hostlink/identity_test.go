package hostlink

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// snapListener stands for the VM's side of the host's listener around a
// snapshot or a promotion. reset closes every open connection, as a
// snapshot resets vsock; freeze makes every open connection go silent
// without closing, as a connection the promoted copy's network never knew
// (its replies go nowhere, and nothing tells the guest).
type snapListener struct {
	net.Listener
	accepts atomic.Int64

	mu     sync.Mutex
	open   []*snapConn
	frozen []*snapConn
}

func (l *snapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &snapConn{Conn: c}
	l.mu.Lock()
	l.open = append(l.open, sc)
	l.mu.Unlock()
	l.accepts.Add(1)
	return sc, nil
}

func (l *snapListener) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.open {
		c.Conn.Close()
	}
	l.open = nil
}

func (l *snapListener) freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.open {
		c.frozen.Store(true)
	}
	l.frozen, l.open = append(l.frozen, l.open...), nil
}

// closeFrozen closes the frozen connections for real, at the end.
func (l *snapListener) closeFrozen() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.frozen {
		c.Conn.Close()
	}
}

type snapConn struct {
	net.Conn
	frozen atomic.Bool
}

func (c *snapConn) Write(p []byte) (int, error) {
	if c.frozen.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *snapConn) Close() error {
	if c.frozen.Load() {
		return nil
	}
	return c.Conn.Close()
}

// identityFile stands for host.json: what the guest agent last kept.
type identityFile struct{ w atomic.Pointer[WhoYouAre] }

func (f *identityFile) store(w WhoYouAre) { f.w.Store(&w) }

func (f *identityFile) read() (WhoYouAre, bool) {
	w := f.w.Load()
	if w == nil {
		return WhoYouAre{}, false
	}
	return *w, true
}

// signalWriter is a buffer that closes wrote at its first write.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.wrote) })
	return w.buf.Write(p)
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// eventually polls cond until it holds (true) or d passes (false).
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// identityHarness serves vm-a behind a snapListener and returns a client
// of it with an identity source that holds generation 1.
func identityHarness(t *testing.T, bb *blockBackend) (*harness, *snapListener, *identityFile, *Client) {
	t.Helper()
	h := newHarness(t, bb, "")
	sl := new(snapListener)
	u := h.serve("unix", "vm-a", func(ln net.Listener) net.Listener { sl.Listener = ln; return sl })
	t.Cleanup(sl.closeFrozen)
	w, err := h.srv.Identity("vm-a")
	if err != nil {
		t.Fatal(err)
	}
	id := new(identityFile)
	id.store(w)
	c, err := NewClient(u, ClientOptions{Agent: "test", RetryWindow: 10 * time.Second, PollWait: 2 * time.Second, Identity: id.read})
	if err != nil {
		t.Fatal(err)
	}
	return h, sl, id, c
}

// After a promotion the host starts a new generation, the connection
// drops, and the old token is stale. The client takes the new token from
// its identity source (host.json), as soon as the guest agent has written
// it, and finishes: no one calls Adopt for it.
func TestIdentityAfterPromotion(t *testing.T) {
	t.Parallel()
	bb := &blockBackend{dirBackend: *newDirBackend(t.TempDir()), started: make(chan string, 1), release: make(chan struct{})}
	h, sl, id, c := identityHarness(t, bb)
	ctx := ctxT(t)
	told := make(chan time.Time, 1)
	go func() {
		op := <-bb.started
		w, err := h.srv.Advance("vm-a", RolePrimary, op)
		if err != nil {
			t.Error(err)
			return
		}
		n := sl.accepts.Load()
		sl.reset()
		// The client comes back with the old token before WHO_YOU_ARE
		// arrives, and is told stale_generation.
		if !eventually(10*time.Second, func() bool { return sl.accepts.Load() > n }) {
			t.Error("the client never came back")
		}
		id.store(w)
		told <- time.Now()
		bb.release <- struct{}{}
	}()
	var out bytes.Buffer
	o, err := c.Run(ctx, shell("k", "x"), &out, nil)
	if err != nil || o.State != StateKept || out.String() != "started\n" {
		t.Fatalf("run across a promotion: %+v %q %v", o, out.String(), err)
	}
	if d := time.Since(<-told); d > 2*time.Second {
		t.Errorf("the client finished %v after the new identity, want promptly", d)
	}
}

// A connection that only waits (a long poll) is never told the VM was
// cloned: its replies go nowhere and it does not close. The client sees
// the new generation in its identity source, abandons the connection and
// redials at once, instead of waiting out the poll and its timeout.
func TestIdentityAbandonsSilentPoll(t *testing.T) {
	t.Parallel()
	bb := &blockBackend{dirBackend: *newDirBackend(t.TempDir()), started: make(chan string, 1), release: make(chan struct{})}
	h, sl, id, c := identityHarness(t, bb)
	ctx := ctxT(t)
	out := &signalWriter{wrote: make(chan struct{})}
	told := make(chan time.Time, 1)
	go func() {
		op := <-bb.started
		<-out.wrote
		// "started" is relayed; the next connection is the long poll.
		n := sl.accepts.Load()
		if !eventually(10*time.Second, func() bool { return sl.accepts.Load() > n }) {
			t.Error("the client never polled")
		}
		sl.freeze()
		w, err := h.srv.Advance("vm-a", RolePrimary, op)
		if err != nil {
			t.Error(err)
			return
		}
		id.store(w)
		told <- time.Now()
		bb.release <- struct{}{}
	}()
	o, err := c.Run(ctx, shell("k", "x"), out, nil)
	if err != nil || o.State != StateKept || out.String() != "started\n" {
		t.Fatalf("run across a silent connection: %+v %q %v", o, out.String(), err)
	}
	if d := time.Since(<-told); d > 2*time.Second {
		t.Errorf("the client finished %v after the new identity, want within 2s (the poll alone waits %v)", d, c.opts.PollWait+c.opts.Timeout)
	}
}
