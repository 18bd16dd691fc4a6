package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name, in string
		want     any
		err      error // errors.Is
	}{
		{"simple", "+OK\r\n", "OK", nil},
		{"error", "-ERR no\r\n", &Error{Msg: "ERR no"}, nil},
		{"integer", ":-42\r\n", int64(-42), nil},
		{"bulk", "$5\r\na\r\nb\x00\r\n", "a\r\nb\x00", nil},
		{"empty bulk", "$0\r\n\r\n", "", nil},
		{"nil bulk", "$-1\r\n", nil, nil},
		{"nil array", "*-1\r\n", nil, nil},
		{"array", "*3\r\n:1\r\n*1\r\n+x\r\n$-1\r\n", []any{int64(1), []any{"x"}, nil}, nil},
		{"empty", "", nil, io.EOF},
		{"no CRLF", "+OK\n", nil, ErrProtocol},
		{"cut line", "+OK", nil, io.ErrUnexpectedEOF},
		{"cut bulk", "$5\r\nab", nil, io.ErrUnexpectedEOF},
		{"bulk without CRLF", "$2\r\nabcd", nil, ErrProtocol},
		{"bad length", "$x\r\n", nil, ErrProtocol},
		{"negative length", "*-2\r\n", nil, ErrProtocol},
		{"huge bulk", fmt.Sprintf("$%d\r\n", maxBulk+1), nil, ErrProtocol},
		{"bad integer", ":1.5\r\n", nil, ErrProtocol},
		{"RESP3", "_\r\n", nil, ErrProtocol},
		{"too deep", strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n", nil, ErrProtocol},
		{"cut array", "*2\r\n:1\r\n", nil, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(bufio.NewReader(strings.NewReader(tt.in)))
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(AppendCommand(nil, "SET", "k", "a\r\nb", ""))
	if want := "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n$0\r\n\r\n"; got != want {
		t.Errorf("= %q, want %q", got, want)
	}
}

// appendReply encodes v as a reply, the inverse of Read.
func appendReply(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "$-1\r\n"...)
	case int64:
		return fmt.Appendf(b, ":%d\r\n", v)
	case *Error:
		return fmt.Appendf(b, "-%s\r\n", v.Msg)
	case string:
		return fmt.Appendf(b, "$%d\r\n%s\r\n", len(v), v)
	case []any:
		b = fmt.Appendf(b, "*%d\r\n", len(v))
		for _, e := range v {
			b = appendReply(b, e)
		}
		return b
	}
	panic(fmt.Sprintf("appendReply: %T", v))
}

// FuzzRead: no panic, and a reply read, written again and read
// back is the same reply.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nabc\r\n", "$-1\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "*-1\r\n", "$9999999\r\nab", "*1\r\n*1\r\n*1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReader(bytes.NewReader(in))
		v, err := Read(r)
		if err != nil {
			return
		}
		again, err := Read(bufio.NewReader(bytes.NewReader(appendReply(nil, v))))
		if err != nil {
			t.Fatalf("read back %#v: %v", v, err)
		}
		if diff := cmp.Diff(v, again); diff != "" {
			t.Errorf("read back (-first +again):\n%s", diff)
		}
	})
}
