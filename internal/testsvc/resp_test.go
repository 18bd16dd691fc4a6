package testsvc

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/undosh/undosh/internal/resp"
)

func TestFormatReply(t *testing.T) {
	got, err := formatReply([]any{"a", int64(2), nil, []any{"b", "c"}})
	if want := "a\n2\n\nb\nc"; got != want || err != nil {
		t.Errorf("= %q, %v; want %q", got, err, want)
	}
	got, err = formatReply([]any{"a", &RedisError{Msg: "ERR x"}})
	var rerr *RedisError
	if !errors.As(err, &rerr) || rerr.Msg != "ERR x" || got != "a\nERR x" {
		t.Errorf("= %q, %v; want the error", got, err)
	}
}

// FuzzFormatReply: any reply resp.Read takes formats without a panic.
func FuzzFormatReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*2\r\n$1\r\na\r\n*1\r\n-E\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if v, err := resp.Read(bufio.NewReader(bytes.NewReader(in))); err == nil {
			formatReply(v)
		}
	})
}
