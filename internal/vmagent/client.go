package vmagent

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/undosh/undosh/hostlink"
)

// Client is the host's connection to one VM's guest agent. Its calls run
// one at a time. A call that fails on the connection, or whose ctx ends,
// closes it (the guest then kills an exec that runs): every later call
// fails, and the caller must Dial again. The caller must Close it.
type Client struct {
	path string
	conn io.ReadWriteCloser // a Unix socket; closing it ends a read or write that waits
	br   *bufio.Reader

	closed atomic.Bool // by Close, which may come during a call

	mu     sync.Mutex // held by a call
	broken error      // why the connection is closed, under mu
}

// Error is a request that the guest agent answered with an error.
type Error struct {
	Socket string // the agent's socket on the host
	Op     string // the request's
	Msg    string // the agent's reason
}

func (e *Error) Error() string {
	return fmt.Sprintf("the guest agent on %s: %s: %s", e.Socket, e.Op, e.Msg)
}

// Dial connects to the guest agent whose virtio-serial port is the Unix
// socket at path. The socket accepts a connection whether or not the
// agent runs: [Client.Ping] tells whether it answers.
func Dial(path string, timeout time.Duration) (*Client, error) {
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, fmt.Errorf("dial the guest agent: %w", err)
	}
	return newClient(conn, path), nil
}

// newClient is a client on conn, which path names in errors.
func newClient(conn io.ReadWriteCloser, path string) *Client {
	return &Client{path: path, conn: conn, br: bufio.NewReaderSize(conn, 64<<10)}
}

// Close closes the connection. A call that runs then fails (an exec is
// killed).
func (c *Client) Close() error {
	c.closed.Store(true)
	return c.conn.Close()
}

// Ping asks the agent to answer.
func (c *Client) Ping(ctx context.Context) error {
	return c.call(ctx, Request{Op: OpPing}, func(r Reply) (bool, error) {
		return c.simple(OpPing, r, r.Pong)
	})
}

// Reset asks the agent to close every connection it relays; it returns
// once they are closed.
func (c *Client) Reset(ctx context.Context) error {
	return c.call(ctx, Request{Op: OpReset}, func(r Reply) (bool, error) {
		return c.simple(OpReset, r, r.Done)
	})
}

// Notify tells the agent who its VM is: who is a [hostlink.WhoYouAre] as
// JSON. A refusal (the VM has that generation or a later one already) is
// an [*Error] together with the NOTED naming the generation the VM keeps.
func (c *Client) Notify(ctx context.Context, who []byte) (hostlink.Noted, error) {
	var n hostlink.Noted
	err := c.call(ctx, Request{Op: OpNotify, Who: json.RawMessage(who)}, func(r Reply) (bool, error) {
		if r.Noted != nil {
			n = *r.Noted
		}
		return c.simple(OpNotify, r, r.Noted != nil)
	})
	return n, err
}

// simple ends a call answered by one reply: ok when the reply says what
// was asked.
func (c *Client) simple(op string, r Reply, ok bool) (bool, error) {
	switch {
	case r.Error != "":
		return true, &Error{Socket: c.path, Op: op, Msg: r.Error}
	case !ok:
		return true, &Error{Socket: c.path, Op: op, Msg: "an answer that is not one to " + op}
	}
	return true, nil
}

// Exec runs argv in the guest, in cwd ("" is /) with env (KEY=VALUE)
// added to the agent's environment, and writes its output to stdout and
// stderr (nil discards it) as it comes. It returns the command's exit
// status, 128+n for death by signal n. If ctx ends first, Exec closes the
// connection, which makes the guest kill the command, and returns an
// error that wraps ctx.Err().
func (c *Client) Exec(ctx context.Context, argv []string, cwd string, env []string, stdout, stderr io.Writer) (status int, err error) {
	if len(argv) == 0 {
		return -1, errors.New("exec: no command")
	}
	status = -1
	err = c.call(ctx, Request{Op: OpExec, Argv: argv, Cwd: cwd, Env: env}, func(r Reply) (bool, error) {
		var w io.Writer
		switch {
		case r.Error != "":
			return true, &Error{Socket: c.path, Op: OpExec, Msg: r.Error}
		case r.Exit != nil:
			status = *r.Exit
			return true, nil
		case r.Stream == StreamOut:
			w = stdout
		case r.Stream == StreamErr:
			w = stderr
		}
		if w != nil && len(r.Data) > 0 {
			if _, err := w.Write(r.Data); err != nil {
				return true, c.fail(fmt.Errorf("exec %s: write its output: %w", argv[0], err))
			}
		}
		return false, nil
	})
	if err != nil {
		return -1, err
	}
	return status, nil
}

// call sends req with a fresh id and hands each reply with that id to
// each until each says the call is done. Replies with another id, and
// lines that do not decode, are skipped: they are left from an earlier
// client (a VM loaded from a capture holds what it had not sent yet).
func (c *Client) call(ctx context.Context, req Request, each func(Reply) (done bool, err error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return fmt.Errorf("%s: the client of the guest agent on %s is closed", req.Op, c.path)
	}
	if c.broken != nil {
		return c.broken
	}
	req.ID = newID()
	line, err := encodeLine(req)
	if err != nil {
		return fmt.Errorf("%s: %w", req.Op, err)
	}
	start := time.Now()
	if ctx.Err() != nil {
		return c.ctxErr(ctx, req.Op, start)
	}
	// Closing the connection is what ends a read or write that waits.
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	defer func() {
		if !stop() && c.broken == nil {
			c.broken = fmt.Errorf("the connection to the guest agent on %s was closed when a call's context ended: dial again", c.path)
		}
	}()
	failed := func(err error) error {
		if ctx.Err() != nil {
			err = c.ctxErr(ctx, req.Op, start)
		}
		return c.fail(err)
	}
	if _, err := c.conn.Write(line); err != nil {
		return failed(fmt.Errorf("send %s to the guest agent on %s: %w", req.Op, c.path, err))
	}
	for {
		b, long, err := readLine(c.br)
		if errors.Is(err, io.EOF) {
			return failed(fmt.Errorf("the guest agent on %s hung up during %s", c.path, req.Op))
		}
		if err != nil {
			return failed(fmt.Errorf("read %s's answer from the guest agent on %s: %w", req.Op, c.path, err))
		}
		if long || blank(b) {
			continue
		}
		r, err := parseReply(b)
		if err != nil || r.ID != req.ID {
			continue
		}
		if done, err := each(r); done {
			return err
		}
	}
}

// fail closes the connection for good, for err.
func (c *Client) fail(err error) error {
	c.conn.Close()
	if c.broken == nil {
		c.broken = fmt.Errorf("the connection to the guest agent on %s was closed after an error (%v): dial again", c.path, err)
	}
	return err
}

// ctxErr is the error of a call whose ctx ended.
func (c *Client) ctxErr(ctx context.Context, op string, start time.Time) error {
	err := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the guest agent on %s did not answer %s within %v: %w", c.path, op, max(dl.Sub(start), 0).Round(time.Millisecond), err)
	}
	return fmt.Errorf("%s on the guest agent on %s: %w", op, c.path, err)
}

// newID is a fresh request id: 16 hex digits.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
