// Package shquote spells strings as words of a POSIX shell, for the
// command lines undosh shows (hints, notices, refusals) and the ones it
// hands to sh -c. It is the module's one shell quoting.
package shquote

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Word is s as one shell word that is not a command's name: unquoted
// when it holds only letters, digits and /._-+:@%=, (an option such as
// --root=/x stays readable), else syntax.Quote's spelling for POSIX sh,
// or, for a string it will not quote (a newline, a tab or another control
// character, which POSIX has no escape for), s in single quotes, which
// carry any byte but NUL.
func Word(s string) string {
	if plain(s) {
		return s
	}
	return quote(s)
}

func plain(s string) bool {
	return s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-+:@%=,", c))
	}) < 0
}

func quote(s string) string {
	if q, err := syntax.Quote(s, syntax.LangPOSIX); err == nil {
		return q
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join is argv as a command line, each element one word; a command name
// with an = in it is quoted, or the shell would take it for an
// assignment.
func Join(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Word(a)
		if i == 0 && strings.Contains(a, "=") {
			q[i] = quote(a)
		}
	}
	return strings.Join(q, " ")
}
