package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/undosh/undosh/internal/resp"
)

// Redis is asked over RESP, its protocol, for what undosh needs: where
// its data files are, a snapshot (SAVE), a shutdown that saves nothing,
// and whether it answers.

// redisConn is a connection to a Redis server on this machine.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRedis(port int) (*redisConn, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dialTimeout)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, r: bufio.NewReader(c)}, nil
}

func (rc *redisConn) Close() error { return rc.c.Close() }

// do sends a command and reads its reply, within timeout; an error
// reply is the error (a *resp.Error).
func (rc *redisConn) do(timeout time.Duration, args ...string) (any, error) {
	_ = rc.c.SetDeadline(time.Now().Add(timeout))
	if _, err := rc.c.Write(resp.AppendCommand(nil, args...)); err != nil {
		return nil, err
	}
	v, err := resp.Read(rc.r)
	if re, ok := v.(*resp.Error); ok && err == nil {
		return nil, re
	}
	return v, err
}

// redisConfig asks for one setting (CONFIG GET name).
func (rc *redisConn) config(name string) (string, error) {
	v, err := rc.do(dialTimeout, "CONFIG", "GET", name)
	if err != nil {
		return "", fmt.Errorf("CONFIG GET %s: %w", name, err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", fmt.Errorf("CONFIG GET %s: unexpected reply %v", name, v)
	}
	s, _ := a[1].(string)
	return s, nil
}

// redisSetup is what a Redis server says of where its data is and how
// it was set up, asked over its port.
type redisSetup struct {
	dir   string
	files []string
	// args start it again as it runs now: its argv shows only
	// "redis-server *:6379".
	args []string
}

// askRedis asks the Redis server on port for its directory, the data
// files in it (the snapshot, dbfilename, and the append-only file's
// directory, Redis 7, or file, when it is on) and the settings that
// start it again as it is: its config file, and what may have been
// given on its command line.
func askRedis(port int) (redisSetup, error) {
	var rs redisSetup
	rc, err := dialRedis(port)
	if err != nil {
		return rs, fmt.Errorf("cannot ask it where its data is: %w", err)
	}
	defer rc.Close()
	get := func(name string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = rc.config(name)
		return v
	}
	rs.dir = get("dir")
	db, aof, bind, save, pidfile := get("dbfilename"), get("appendonly"), get("bind"), get("save"), get("pidfile")
	if err != nil {
		return rs, fmt.Errorf("cannot ask it where its data is: %w", err)
	}
	rs.files = []string{filepath.Join(rs.dir, db)}
	if aof == "yes" {
		name := get("appenddirname")
		if err != nil || name == "" { // before Redis 7: one file
			err = nil
			name = get("appendfilename")
		}
		if err != nil {
			return rs, fmt.Errorf("cannot ask it where its data is: %w", err)
		}
		rs.files = append(rs.files, filepath.Join(rs.dir, name))
	}
	if v, ierr := rc.do(dialTimeout, "INFO", "server"); ierr == nil {
		if info, ok := v.(string); ok {
			for _, line := range strings.Split(info, "\n") {
				if f, ok := strings.CutPrefix(strings.TrimSpace(line), "config_file:"); ok && f != "" {
					rs.args = append(rs.args, f)
				}
			}
		}
	}
	rs.args = append(rs.args, "--port", strconv.Itoa(port), "--bind", bind, "--dir", rs.dir, "--dbfilename", db,
		"--appendonly", aof, "--save", save, "--daemonize", "no")
	if pidfile != "" {
		rs.args = append(rs.args, "--pidfile", pidfile)
	}
	// Settings a command line often gives, where this server has them
	// (an older Redis lacks some).
	for _, name := range redisKept {
		if v, err := rc.config(name); err == nil && v != "" {
			rs.args = append(rs.args, "--"+name, v)
		}
	}
	return rs, nil
}

// redisKept are the settings, besides where its data is, that a Redis
// started again keeps.
var redisKept = []string{"databases", "maxmemory", "maxmemory-policy", "protected-mode", "appendfsync",
	"enable-debug-command", "unixsocket", "unixsocketperm", "logfile", "loglevel"}

// redisSave has the server on port write its snapshot (BGSAVE: the
// server forks, and the child writes what the server held at the fork,
// copy-on-write, while the server goes on answering), and waits until
// the dump is written. frozen is how long the fork held the server.
func redisSave(ctx context.Context, port int) (frozen time.Duration, err error) {
	rc, err := dialRedis(port)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	info := func(section string) (map[string]string, error) {
		v, err := rc.do(dialTimeout, "INFO", section)
		if err != nil {
			return nil, fmt.Errorf("INFO %s: %w", section, err)
		}
		text, _ := v.(string)
		m := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				m[k] = v
			}
		}
		return m, nil
	}
	// One save at a time: wait out one already running (its own, or a
	// rewrite of the append-only file), then start ours.
	started := false
	for !started {
		v, err := rc.do(dialTimeout, "BGSAVE")
		var re *resp.Error
		switch {
		case err == nil && strings.HasPrefix(fmt.Sprint(v), "Background saving started"):
			started = true
		case errors.As(err, &re) && strings.Contains(re.Msg, "in progress"):
			if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
				return 0, err
			}
		case err != nil:
			return 0, fmt.Errorf("BGSAVE: %w", err)
		default:
			return 0, fmt.Errorf("BGSAVE: unexpected reply %v", v)
		}
	}
	for {
		m, err := info("persistence")
		if err != nil {
			return 0, err
		}
		if m["rdb_bgsave_in_progress"] == "0" {
			if st := m["rdb_last_bgsave_status"]; st != "ok" {
				return 0, fmt.Errorf("BGSAVE failed (rdb_last_bgsave_status: %s; the server's log says why)", st)
			}
			break
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return 0, err
		}
	}
	if m, err := info("stats"); err == nil {
		us, _ := strconv.ParseInt(m["latest_fork_usec"], 10, 64)
		frozen = time.Duration(us) * time.Microsecond
	}
	return frozen, nil
}

// sleepCtx waits d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// redisShutdown stops the server on port without saving (its data is
// about to be put back).
func redisShutdown(port int) error {
	rc, err := dialRedis(port)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = rc.do(dialTimeout, "SHUTDOWN", "NOSAVE")
	if errors.Is(err, io.EOF) {
		return nil // it closed the connection as it went
	}
	return err
}

// redisReady reports whether the server on port answers PING (a server
// loading its data answers -LOADING).
func redisReady(port int) bool {
	rc, err := dialRedis(port)
	if err != nil {
		return false
	}
	defer rc.Close()
	v, err := rc.do(dialTimeout, "PING")
	return err == nil && v == "PONG"
}
