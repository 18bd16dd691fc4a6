package hostlink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/vsock"
)

// ClientOptions configure a [Client]. The zero value is the default.
type ClientOptions struct {
	// Token is the current generation's token; it overrides the URL's
	// token parameter. [Client.Adopt] replaces it.
	Token string
	// Agent names the guest software in HELLO.
	Agent string
	// RetryWindow is how long a resumable call keeps reconnecting after
	// the connection drops or the host is unreachable; default 2 min,
	// which exceeds a full snapshot of a large VM.
	RetryWindow time.Duration
	// PollWait is the long-poll wait asked of the host; default 10 s.
	PollWait time.Duration
	// Timeout bounds one round trip, beyond its long-poll wait; default
	// 10 s.
	Timeout time.Duration
	// Identity, if set, returns the last WHO_YOU_ARE the host sent this
	// VM (undosh reads it from host.json, which the guest agent writes).
	// The client reads it before every attempt and adopts a newer
	// generation's token (it overrides Token and the URL's), and watches
	// it while it waits: a round trip in flight when the generation
	// changes is abandoned and made again on a new connection. It must
	// be cheap and safe for concurrent use; it is called every 100 ms
	// while a call waits.
	Identity func() (WhoYouAre, bool)
}

// Client talks to the host. It is safe for concurrent use; every call is
// one connection. Create it with [NewClient].
type Client struct {
	network, addr string
	cid, port     uint32
	opts          ClientOptions

	mu         sync.Mutex
	token      string
	generation uint64
}

// NewClient returns a client for the host at rawURL, without connecting:
//
//	vsock://2:PORT            the host (CID 2) over vsock
//	unix:///PATH              a Unix socket (Firecracker's hybrid vsock lands on <uds>_<port>)
//	tcp://127.0.0.1:PORT      loopback TCP, for tests; only loopback addresses are accepted
//
// Any of them may carry ?token=TOKEN.
func NewClient(rawURL string, opts ClientOptions) (*Client, error) {
	name := HostName(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the whole URL, token and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("hostlink: host url %q: %w", name, err)
	}
	if opts.RetryWindow <= 0 {
		opts.RetryWindow = 2 * time.Minute
	}
	if opts.PollWait <= 0 {
		opts.PollWait = 10 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	c := &Client{opts: opts, token: u.Query().Get("token")}
	if opts.Token != "" {
		c.token = opts.Token
	}
	switch u.Scheme {
	case "vsock":
		cid, err1 := strconv.ParseUint(u.Hostname(), 10, 32)
		port, err2 := strconv.ParseUint(u.Port(), 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("hostlink: host url %q: want vsock://CID:PORT", name)
		}
		c.network, c.cid, c.port = "vsock", uint32(cid), uint32(port)
	case "unix":
		if u.Path == "" || u.Host != "" {
			return nil, fmt.Errorf("hostlink: host url %q: want unix:///PATH", name)
		}
		c.network, c.addr = "unix", u.Path
	case "tcp":
		ip := net.ParseIP(u.Hostname())
		if ip == nil || !ip.IsLoopback() || u.Port() == "" {
			return nil, fmt.Errorf("hostlink: host url %q: tcp is for loopback only, want tcp://127.0.0.1:PORT", name)
		}
		c.network, c.addr = "tcp", u.Host
	default:
		return nil, fmt.Errorf("hostlink: host url %q: scheme must be vsock, unix or tcp", name)
	}
	return c, nil
}

// HostName is a host URL as it may be shown or recorded: without its
// query, where the token goes. Messages, logs and the journal name the
// host by it; the token is the sandbox's credential and must not reach
// the agent's transcript.
func HostName(rawURL string) string {
	if i := strings.IndexAny(rawURL, "?#"); i >= 0 {
		return rawURL[:i]
	}
	return rawURL
}

// Adopt takes the identity the host told the VM on the control channel:
// from now on requests carry the new generation's token. A client with
// [ClientOptions.Identity] adopts what it returns by itself.
func (c *Client) Adopt(w WhoYouAre) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.Generation >= c.generation {
		c.generation, c.token = w.Generation, w.Token
	}
}

// identityPoll is how often a client with an identity source looks at it
// while it waits, on a connection or between two attempts.
const identityPoll = 100 * time.Millisecond

// errNewIdentity is a round trip given up because the host started a new
// generation while it waited: the connection is from before a snapshot,
// and nothing may ever arrive on it.
var errNewIdentity = errors.New("hostlink: the host started a new generation; the connection from before is abandoned")

// refresh adopts the identity source's WHO_YOU_ARE and returns the
// generation and token the next HELLO carries.
func (c *Client) refresh() (uint64, string) {
	if c.opts.Identity != nil {
		if w, ok := c.opts.Identity(); ok && w.Token != "" {
			c.Adopt(w)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.generation, c.token
}

// newer reports whether the identity source names a generation after gen.
func (c *Client) newer(gen uint64) bool {
	if c.opts.Identity == nil {
		return false
	}
	w, ok := c.opts.Identity()
	return ok && w.Token != "" && w.Generation > gen
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	if c.network == "vsock" {
		// vsock.Dial takes no context; a connect to the host is local and
		// answered at once (a listener, or a reset).
		conn, err := vsock.Dial(c.cid, c.port, nil)
		if err != nil {
			return nil, fmt.Errorf("dial vsock %d:%d: %w", c.cid, c.port, err)
		}
		return conn, nil
	}
	var d net.Dialer
	return d.DialContext(ctx, c.network, c.addr)
}

// roundTrip sends HELLO and, pipelined, one request; it reads WELCOME and
// the reply. With t == 0 it sends only HELLO.
func (c *Client) roundTrip(ctx context.Context, t Type, req any, wait time.Duration, want Type, resp any) (Welcome, error) {
	var w Welcome
	conn, err := c.dial(ctx)
	if err != nil {
		return w, err
	}
	defer conn.Close()
	deadline := time.Now().Add(c.opts.Timeout + wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	gen, token := c.refresh()
	var abandoned atomic.Bool
	if c.opts.Identity != nil {
		// A VM cloned while this connection waits is never told on it:
		// the connection goes silent. The guest agent's host.json is what
		// says so.
		done := make(chan struct{})
		defer close(done)
		go func() {
			tick := time.NewTicker(identityPoll)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					if c.newer(gen) {
						abandoned.Store(true)
						conn.SetDeadline(time.Now())
						return
					}
				}
			}
		}()
	}
	fail := func(err error) (Welcome, error) {
		if abandoned.Load() {
			return w, errNewIdentity
		}
		return w, err
	}
	h := Hello{Version: Version, Agent: c.opts.Agent, Generation: gen, Token: token}
	buf, err := appendMsg(nil, TypeHello, h)
	if err != nil {
		return w, err
	}
	if t != 0 {
		if buf, err = appendMsg(buf, t, req); err != nil {
			return w, err
		}
	}
	if _, err := conn.Write(buf); err != nil {
		return fail(err)
	}
	if err := readMsg(conn, MaxFrame, TypeWelcome, &w); err != nil {
		return fail(err)
	}
	if t == 0 {
		return w, nil
	}
	if err := readMsg(conn, MaxFrame, want, resp); err != nil {
		return fail(err)
	}
	return w, nil
}

func appendMsg(dst []byte, t Type, v any) ([]byte, error) {
	var b writerBuf
	if err := writeMsg(&b, t, v); err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

type writerBuf []byte

func (b *writerBuf) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

// Hello opens a connection, says hello and returns what the host says the
// caller is.
func (c *Client) Hello(ctx context.Context) (Welcome, error) {
	return c.roundTrip(ctx, 0, nil, 0, 0, nil)
}

// ForkRun submits a fork-and-run once. The caller must expect the
// connection to drop before the reply (a snapshot resets it): [Client.Run]
// does the resubmission and the following.
func (c *Client) ForkRun(ctx context.Context, req ForkRun) (Accepted, error) {
	var a Accepted
	_, err := c.roundTrip(ctx, TypeForkRun, req, 0, TypeAccepted, &a)
	return a, err
}

// Checkpoint submits a checkpoint once.
func (c *Client) Checkpoint(ctx context.Context, req Checkpoint) (Accepted, error) {
	var a Accepted
	_, err := c.roundTrip(ctx, TypeCheckpoint, req, 0, TypeAccepted, &a)
	return a, err
}

// Restore submits a restore once.
func (c *Client) Restore(ctx context.Context, req Restore) (Accepted, error) {
	var a Accepted
	_, err := c.roundTrip(ctx, TypeRestore, req, 0, TypeAccepted, &a)
	return a, err
}

// Checkpoints lists the sandbox's checkpoints, oldest first.
func (c *Client) Checkpoints(ctx context.Context) ([]CheckpointInfo, error) {
	var r Checkpoints
	_, err := c.roundTrip(ctx, TypeListCheckpoints, ListCheckpoints{}, 0, TypeCheckpoints, &r)
	return r.Items, err
}

// Status returns an operation's status, waiting up to wait for it to be
// final.
func (c *Client) Status(ctx context.Context, op string, wait time.Duration) (Op, error) {
	var o Op
	_, err := c.roundTrip(ctx, TypeStatus, StatusRequest{Op: op, WaitMS: wait.Milliseconds()}, wait, TypeOp, &o)
	return o, err
}

// Output returns an operation's output from the offsets in req.
func (c *Client) Output(ctx context.Context, req OutputRequest) (Chunk, error) {
	var ch Chunk
	wait := time.Duration(req.WaitMS) * time.Millisecond
	_, err := c.roundTrip(ctx, TypeOutput, req, wait, TypeChunk, &ch)
	return ch, err
}

// Cancel asks the host to cancel an operation and returns its status,
// which may not be final yet.
func (c *Client) Cancel(ctx context.Context, op string) (Op, error) {
	var o Op
	_, err := c.roundTrip(ctx, TypeCancel, CancelRequest{Op: op}, 0, TypeOp, &o)
	return o, err
}

// retryable reports whether err is the kind a reconnect may cure: the
// connection dropped or was refused, the host is restarting, or the
// generation moved on and the new token is on its way.
func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Code == CodeUnavailable || e.Code == CodeStaleGeneration
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	return true // I/O errors: EOF, reset, refused, timeouts, bad frames from a half-written reply
}

// retry calls f until it succeeds, fails for good, or the retry window
// passes without a success. With an identity source, an attempt abandoned
// for a new generation, or a pause during which one arrives, is followed
// by the next attempt at once.
func (c *Client) retry(ctx context.Context, f func() error) error {
	start := time.Now()
	backoff := 20 * time.Millisecond
	for {
		err := f()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if time.Since(start) > c.opts.RetryWindow {
			return fmt.Errorf("hostlink: gave up after %v: %w", c.opts.RetryWindow, err)
		}
		if errors.Is(err, errNewIdentity) {
			backoff = 20 * time.Millisecond
			continue
		}
		var e *Error
		if errors.As(err, &e) && e.RetryAfterMS > 0 {
			backoff = max(backoff, time.Duration(e.RetryAfterMS)*time.Millisecond)
		}
		c.mu.Lock()
		gen := c.generation
		c.mu.Unlock()
		woke, err := c.pause(ctx, backoff, gen)
		if err != nil {
			return err
		}
		if woke {
			backoff = 20 * time.Millisecond
			continue
		}
		backoff = min(2*backoff, time.Second)
	}
}

// pause waits d, or until the identity source names a generation after
// gen (woke): the next attempt has a token that may work now.
func (c *Client) pause(ctx context.Context, d time.Duration, gen uint64) (woke bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	var tick <-chan time.Time
	if c.opts.Identity != nil {
		tk := time.NewTicker(identityPoll)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
			return false, nil
		case <-tick:
			if c.newer(gen) {
				return true, nil
			}
		}
	}
}

// Run submits req (whose Key must be unique to this step), expects the
// connection to drop, reconnects as often as needed within the retry
// window, relays the step's output to stdout and stderr exactly once, and
// returns the operation's final status.
func (c *Client) Run(ctx context.Context, req ForkRun, stdout, stderr io.Writer) (Op, error) {
	var a Accepted
	err := c.retry(ctx, func() (err error) {
		a, err = c.ForkRun(ctx, req)
		return err
	})
	if err != nil {
		return Op{}, fmt.Errorf("hostlink: submit %s: %w", req.Key, err)
	}
	return c.Follow(ctx, a.Op, stdout, stderr)
}

// Follow relays an operation's output from the start, exactly once across
// reconnects, and returns its final status.
func (c *Client) Follow(ctx context.Context, op string, stdout, stderr io.Writer) (Op, error) {
	var offs [2]int64
	outs := [2]io.Writer{stdout, stderr}
	for {
		var ch Chunk
		err := c.retry(ctx, func() (err error) {
			ch, err = c.Output(ctx, OutputRequest{Op: op, Stdout: offs[0], Stderr: offs[1], Max: MaxChunk, WaitMS: c.opts.PollWait.Milliseconds()})
			return err
		})
		if err != nil {
			return Op{}, fmt.Errorf("hostlink: output of %s: %w", op, err)
		}
		if ch.StdoutOffset != offs[0] || ch.StderrOffset != offs[1] {
			return Op{}, fmt.Errorf("hostlink: output of %s: host answered offsets %d,%d for %d,%d", op, ch.StdoutOffset, ch.StderrOffset, offs[0], offs[1])
		}
		for i, b := range [2][]byte{ch.Stdout, ch.Stderr} {
			if len(b) == 0 {
				continue
			}
			if outs[i] != nil {
				if _, err := outs[i].Write(b); err != nil {
					return Op{}, fmt.Errorf("hostlink: relay output of %s: %w", op, err)
				}
			}
			offs[i] += int64(len(b))
		}
		if ch.End {
			break
		}
	}
	var o Op
	err := c.retry(ctx, func() (err error) {
		o, err = c.Status(ctx, op, 0)
		return err
	})
	if err != nil {
		return Op{}, fmt.Errorf("hostlink: status of %s: %w", op, err)
	}
	return o, nil
}
