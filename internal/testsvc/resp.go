package testsvc

import (
	"strconv"
	"strings"

	"github.com/undosh/undosh/internal/resp"
)

// RedisError is an error reply of Redis ("-ERR unknown command …").
type RedisError = resp.Error

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
