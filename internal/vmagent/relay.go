package vmagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"sync"
	"time"
)

// dialTimeout bounds the dial of a relay's target.
const dialTimeout = 5 * time.Second

// Relay accepts connections on listen, a unix:///PATH, and relays each to
// dial, a tcp://HOST:PORT, until ctx is done. The socket is made afresh
// (a stale one is removed) and only its owner may connect (mode 0600).
// Each connection is relayed both ways and closed, with its target, when
// either side ends, or when a reset or a notify of a copy or a restored
// VM closes every relayed connection.
func (a *Agent) Relay(ctx context.Context, listen, dial string) error {
	path, err := unixPath(listen)
	if err != nil {
		return err
	}
	target, err := tcpAddr(dial)
	if err != nil {
		return err
	}
	ln, err := listenUnix(path)
	if err != nil {
		return fmt.Errorf("relay %s: %w", listen, err)
	}
	return a.relay(ctx, ln, target)
}

// relay serves ln until ctx is done, then closes what it relays.
func (a *Agent) relay(ctx context.Context, ln net.Listener, target string) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	// Whatever ends the relay ends its connections too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			ln.Close()
			return fmt.Errorf("relay to %s: %w", target, err)
		}
		// Tracked from the start, so that a reset while it dials closes it.
		a.track(c)
		wg.Go(func() { a.pipe(ctx, c, target) })
	}
}

// pipe relays c to a new connection to target.
func (a *Agent) pipe(ctx context.Context, c net.Conn, target string) {
	defer a.drop(c)
	d := net.Dialer{Timeout: dialTimeout}
	t, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		a.log().Warn("relay: dial", "target", target, "err", err)
		return
	}
	a.track(t)
	defer a.drop(t)
	stop := context.AfterFunc(ctx, func() { c.Close(); t.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(t, c); c.Close(); t.Close() })
	wg.Go(func() { io.Copy(c, t); c.Close(); t.Close() })
	wg.Wait()
}

func (a *Agent) track(c net.Conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conns == nil {
		a.conns = make(map[net.Conn]struct{})
	}
	a.conns[c] = struct{}{}
}

// drop closes c and forgets it.
func (a *Agent) drop(c net.Conn) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
	c.Close()
}

// resetRelays closes every relayed connection, both ends, now. Their
// clients see the end of the connection and dial again.
func (a *Agent) resetRelays() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range a.conns {
		c.Close()
	}
	clear(a.conns)
}

// unixPath is the path of a unix:///PATH.
func unixPath(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "unix" || u.Path == "" || u.Host != "" {
		return "", fmt.Errorf("relay: listen %q: want unix:///PATH", raw)
	}
	return u.Path, nil
}

// tcpAddr is the HOST:PORT of a tcp://HOST:PORT.
func tcpAddr(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err == nil && u.Scheme == "tcp" && (u.Path == "" || u.Path == "/") {
		if _, port, err := net.SplitHostPort(u.Host); err == nil && port != "" {
			return u.Host, nil
		}
	}
	return "", fmt.Errorf("relay: dial %q: want tcp://IP:PORT", raw)
}

// listenUnix listens on a new socket at path, mode 0600. A socket already
// there is removed, unless a process answers on it.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s is not a socket: remove it or listen elsewhere", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("another process already serves %s: stop it or listen elsewhere", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
