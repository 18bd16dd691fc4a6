package testsvc

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/resp"
)

// RedisOptions say how [StartRedis] makes its server. The zero value is
// an empty server that keeps nothing on disk.
type RedisOptions struct {
	// AppendOnly turns the append-only file on (appendonly yes, in Dir).
	AppendOnly bool
	// Args are more arguments for redis-server, after the others (a
	// later setting wins), for example "--maxmemory", "100mb".
	Args []string
}

// Redis is a running Redis server of [StartRedis], run as the test's
// user.
type Redis struct {
	// Bin is the path of redis-server.
	Bin string
	// Dir is its working directory: dump.rdb and the append-only files
	// go there.
	Dir string
	// Port is the TCP port it listens on at 127.0.0.1.
	Port int
	// PID is the server's.
	PID int
	// Log is the file of its output, removed with the rest.
	Log string

	srv *server
}

// StartRedis starts a server in a fresh directory and waits until it
// answers PING. The end of t stops it and removes its directory. It
// skips t when redis-server is not installed.
func StartRedis(t testing.TB, o RedisOptions) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server here (apt install redis-server)")
	}
	l := newLease(t)
	dir := tempDir(t, l, "undosh-redis-")
	r := &Redis{Bin: bin, Dir: filepath.Join(dir, "data"), Log: filepath.Join(dir, "redis.log")}
	if err := os.Mkdir(r.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	appendOnly := "no"
	if o.AppendOnly {
		appendOnly = "yes"
	}
	for try := 1; ; try++ {
		r.Port = freePort(t)
		args := append([]string{"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
			"--dbfilename", "dump.rdb", "--save", "", "--appendonly", appendOnly, "--daemonize", "no",
			"--logfile", "", "--pidfile", filepath.Join(r.Dir, "redis.pid")}, o.Args...)
		cmd := exec.Command(bin, args...)
		cmd.Dir = r.Dir
		srv, err := startServer(cmd, r.Log)
		if err != nil {
			t.Fatal(err)
		}
		r.srv, r.PID = srv, srv.pid()
		t.Cleanup(func() {
			srv.logOnFailure(t, "redis-server")
			if err := srv.stop(syscall.SIGTERM); err != nil {
				t.Error(err)
			}
		})
		err = r.waitReady()
		if err == nil {
			stopSuccessor(t, filepath.Join(r.Dir, "redis.pid"), r.PID, syscall.SIGTERM)
			return r
		}
		if srv.exited() && strings.Contains(srv.logText(), "Address already in use") && try < 5 {
			continue
		}
		t.Fatalf("redis-server on port %d: %v\n%s", r.Port, err, srv.logText())
	}
}

// waitReady waits until the server answers PING with PONG (not LOADING),
// or it ends.
func (r *Redis) waitReady() error {
	return r.srv.waitReady(func() (bool, error) {
		v, err := r.do("PING")
		return err == nil && v == "PONG", err
	})
}

// Addr is the server's address, 127.0.0.1:Port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// Stop stops the server (SIGTERM: it saves nothing unless RedisOptions
// asked for an append-only file or Args for save points), waiting until
// it has ended; the end of the test does it otherwise. Its directory
// stays until the test ends.
func (r *Redis) Stop(t testing.TB) {
	t.Helper()
	if err := r.srv.stop(syscall.SIGTERM); err != nil {
		t.Error(err)
	}
}

// Do sends the command args on a connection of its own and returns the
// reply as redis-cli prints it to a pipe: a string as it is, an integer
// in decimal, nil as "", an array's elements a line each. An error reply
// or any other error fails t.
func (r *Redis) Do(t testing.TB, args ...string) string {
	t.Helper()
	out, err := r.DoErr(args...)
	if err != nil {
		t.Fatalf("redis %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// DoErr is [Redis.Do] that returns the error: a *[RedisError] for an
// error reply (with the rest of the reply as text).
func (r *Redis) DoErr(args ...string) (string, error) {
	v, err := r.do(args...)
	if err != nil {
		return "", err
	}
	return formatReply(v)
}

// do sends args and reads the reply on a connection of its own.
func (r *Redis) do(args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("redis: no command")
	}
	c, err := net.DialTimeout("tcp", r.Addr(), 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return nil, err
	}
	if _, err := c.Write(resp.AppendCommand(nil, args...)); err != nil {
		return nil, err
	}
	return resp.Read(bufio.NewReader(c))
}
