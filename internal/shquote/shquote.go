// Package shquote spells strings as words of a POSIX shell, for the
// command lines undosh shows (hints, notices, refusals) and the ones it
// hands to sh -c. It is the module's one shell quoting.
package shquote

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Word is s as one shell word: syntax.Quote's spelling for POSIX sh
// (unquoted when nothing in it is special), or, for a string it will not
// quote (a newline, a tab or another control character, which POSIX has
// no escape for), s in single quotes, which carry any byte but NUL.
func Word(s string) string {
	if q, err := syntax.Quote(s, syntax.LangPOSIX); err == nil {
		return q
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join is argv as a command line, each element one word.
func Join(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Word(a)
	}
	return strings.Join(q, " ")
}
