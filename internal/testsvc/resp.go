package testsvc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The few parts of RESP2, the protocol of Redis, that a test needs: a
// command is an array of bulk strings; a reply is a simple string, an
// error, an integer, a bulk string (or nil) or an array (or nil) of
// replies.

// RedisError is an error reply of Redis ("-ERR unknown command …").
type RedisError struct{ Msg string }

func (e *RedisError) Error() string { return "redis: " + e.Msg }

// errProtocol is what a reply that is not RESP2 wraps.
var errProtocol = errors.New("redis protocol")

// Limits of what readReply takes: Redis's own default proto-max-bulk-len
// for a bulk string, and a depth of nested arrays no reply of Redis has.
const (
	maxBulk  = 512 << 20
	maxArray = 1 << 24
	maxDepth = 32
)

// appendCommand appends args as a RESP command.
func appendCommand(b []byte, args ...string) []byte {
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// readReply reads one reply: a string (simple or bulk), an int64, nil
// (a nil bulk string or array), a []any of replies, or a *RedisError
// for an error reply, which it returns as a value: inside an array it
// is an element, not a failure. The error is for I/O and for what is not
// RESP2.
func readReply(r *bufio.Reader) (any, error) { return readDepth(r, 0) }

func readDepth(r *bufio.Reader, depth int) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if line == "" {
		return nil, fmt.Errorf("%w: empty line", errProtocol)
	}
	kind, rest := line[0], line[1:]
	switch kind {
	case '+':
		return rest, nil
	case '-':
		return &RedisError{Msg: rest}, nil
	case ':':
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: integer %q", errProtocol, rest)
		}
		return n, nil
	case '$':
		n, err := length(rest, maxBulk)
		if err != nil || n < 0 {
			return nil, err
		}
		// Read as it comes rather than allocate what the length
		// claims: a short reply cannot make a large buffer.
		b, err := io.ReadAll(io.LimitReader(r, int64(n)+2))
		if err != nil {
			return nil, err
		}
		if len(b) < n+2 {
			return nil, fmt.Errorf("%w: bulk string of %d bytes: %w", errProtocol, n, io.ErrUnexpectedEOF)
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return nil, fmt.Errorf("%w: bulk string of %d bytes not ended by CRLF", errProtocol, n)
		}
		return string(b[:n]), nil
	case '*':
		n, err := length(rest, maxArray)
		if err != nil || n < 0 {
			return nil, err
		}
		if depth >= maxDepth {
			return nil, fmt.Errorf("%w: arrays nested deeper than %d", errProtocol, maxDepth)
		}
		a := make([]any, 0, min(n, 1024))
		for range n {
			v, err := readDepth(r, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	}
	return nil, fmt.Errorf("%w: reply of type %q", errProtocol, kind)
}

// length parses the length of a bulk string or array: -1 for nil, or
// 0 to max.
func length(s string, max int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 || n > max {
		return 0, fmt.Errorf("%w: length %q", errProtocol, s)
	}
	return n, nil
}

// readLine reads a line ended by CRLF, without it.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && line != "" {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	line, ok := strings.CutSuffix(line, "\r\n")
	if !ok {
		return "", fmt.Errorf("%w: line not ended by CRLF", errProtocol)
	}
	return line, nil
}

// formatReply writes v as redis-cli writes a reply to a pipe (--raw):
// strings as they are, integers in decimal, nil as nothing, an array's
// elements a line each. The first error reply in v is returned as the
// error.
func formatReply(v any) (string, error) {
	var b strings.Builder
	err := writeReply(&b, v)
	return b.String(), err
}

func writeReply(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case string:
		b.WriteString(v)
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case *RedisError:
		b.WriteString(v.Msg)
		return v
	case []any:
		var first error
		for i, e := range v {
			if i > 0 {
				b.WriteByte('\n')
			}
			if err := writeReply(b, e); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	return nil
}
