package testsvc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRedis(t *testing.T) {
	t.Parallel()
	var m made
	t.Run("run", func(t *testing.T) {
		r := StartRedis(t, RedisOptions{})
		m = r.made()
		tests := []struct {
			args []string
			want string
		}{
			{[]string{"SET", "k", "a value\r\nwith CRLF"}, "OK"},
			{[]string{"GET", "k"}, "a value\r\nwith CRLF"},
			{[]string{"GET", "nosuch"}, ""},
			{[]string{"INCR", "n"}, "1"},
			{[]string{"INCRBY", "n", "-5"}, "-4"},
			{[]string{"RPUSH", "l", "x", "", "z"}, "3"},
			{[]string{"LRANGE", "l", "0", "-1"}, "x\n\nz"},
			{[]string{"CONFIG", "GET", "appendonly"}, "appendonly\nno"},
		}
		for _, tt := range tests {
			if got := r.Do(t, tt.args...); got != tt.want {
				t.Errorf("%q = %q, want %q", tt.args, got, tt.want)
			}
		}
		_, err := r.DoErr("NOSUCHCOMMAND")
		var rerr *RedisError
		if !errors.As(err, &rerr) {
			t.Errorf("unknown command: %v, want a *RedisError", err)
		}
		r.Stop(t)
		if !gone(r.PID) {
			t.Errorf("redis-server %d still there after Stop", r.PID)
		}
		if _, err := r.DoErr("PING"); err == nil {
			t.Errorf("PING works after Stop")
		}
		if _, err := os.Stat(filepath.Join(r.Dir, "dump.rdb")); err == nil {
			t.Errorf("Stop saved dump.rdb")
		}
		r.Stop(t) // again: nothing
	})
	checkGone(t, m)
}

func TestRedisAppendOnly(t *testing.T) {
	t.Parallel()
	r := StartRedis(t, RedisOptions{AppendOnly: true, Args: []string{"--appendfsync", "always"}})
	r.Do(t, "SET", "k", "v")
	if got := r.Do(t, "CONFIG", "GET", "appendfsync"); got != "appendfsync\nalways" {
		t.Errorf("appendfsync: %q", got)
	}
	ents, err := os.ReadDir(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) == 0 {
		t.Errorf("no append-only file in %s", r.Dir)
	}
}

func BenchmarkRedisGet(b *testing.B) {
	r := StartRedis(b, RedisOptions{})
	r.Do(b, "SET", "k", "v")
	for b.Loop() {
		r.Do(b, "GET", "k")
	}
}
