// Package resp speaks the few parts of RESP2, the protocol of Redis,
// that undosh needs (the service checkpoints, and the tests' servers): a
// command is an array of bulk strings; a reply is a simple string, an
// error, an integer, a bulk string (or nil) or an array (or nil) of
// replies.
package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Error is an error reply of Redis ("-ERR unknown command …").
type Error struct{ Msg string }

func (e *Error) Error() string { return "redis: " + e.Msg }

// ErrProtocol is what a reply that is not RESP2 wraps.
var ErrProtocol = errors.New("redis protocol")

// Limits of what Read takes: Redis's own default proto-max-bulk-len
// for a bulk string, and a depth of nested arrays no reply of Redis has.
const (
	maxBulk  = 512 << 20
	maxArray = 1 << 24
	maxDepth = 32
)

// AppendCommand appends args as a RESP command.
func AppendCommand(b []byte, args ...string) []byte {
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// Read reads one reply: a string (simple or bulk), an int64, nil (a nil
// bulk string or array), a []any of replies, or an *Error for an error
// reply, which it returns as a value: inside an array it is an element,
// not a failure. The error is for I/O and for what is not RESP2.
func Read(r *bufio.Reader) (any, error) { return readDepth(r, 0) }

func readDepth(r *bufio.Reader, depth int) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if line == "" {
		return nil, fmt.Errorf("%w: empty line", ErrProtocol)
	}
	kind, rest := line[0], line[1:]
	switch kind {
	case '+':
		return rest, nil
	case '-':
		return &Error{Msg: rest}, nil
	case ':':
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: integer %q", ErrProtocol, rest)
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
			return nil, fmt.Errorf("%w: bulk string of %d bytes: %w", ErrProtocol, n, io.ErrUnexpectedEOF)
		}
		if b[n] != '\r' || b[n+1] != '\n' {
			return nil, fmt.Errorf("%w: bulk string of %d bytes not ended by CRLF", ErrProtocol, n)
		}
		return string(b[:n]), nil
	case '*':
		n, err := length(rest, maxArray)
		if err != nil || n < 0 {
			return nil, err
		}
		if depth >= maxDepth {
			return nil, fmt.Errorf("%w: arrays nested deeper than %d", ErrProtocol, maxDepth)
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
	return nil, fmt.Errorf("%w: reply of type %q", ErrProtocol, kind)
}

// length parses the length of a bulk string or array: -1 for nil, or
// 0 to max.
func length(s string, max int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 || n > max {
		return 0, fmt.Errorf("%w: length %q", ErrProtocol, s)
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
		return "", fmt.Errorf("%w: line not ended by CRLF", ErrProtocol)
	}
	return line, nil
}
