// Package shquote spells strings as words of a POSIX shell, for the
// command lines undosh shows (hints, notices) and the ones it hands to
// sh -c.
package shquote

import "strings"

// Word is s as one shell word: as it is when it holds only characters no
// shell treats specially, else in single quotes.
func Word(s string) string {
	if s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-+:@%=,", c))
	}) < 0 {
		return s
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
