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
// snapshot resets vsock.
type snapListener struct {
	net.Listener
	accepts atomic.Int64

	mu   sync.Mutex
	open []*snapConn
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

type snapConn struct{ net.Conn }

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
