package enforce

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Blocked returns the paths named by the error messages in stderrTail
// (the end of an enforced step's standard error) that enforcement causes:
// "Read-only file system" (EROFS, the mount-namespace mode) and
// "Permission denied" (EACCES, Landlock), as coreutils, bash, Python, Go,
// Node, npm, apt and cargo print them. Paths come in order of first
// appearance, once each, as the messages spell them (relative ones
// included). "Permission denied" has other causes than Landlock: a caller
// that knows the plan should keep only the paths outside its writable
// paths.
func Blocked(stderrTail []byte) []string {
	lines := strings.Split(strings.ReplaceAll(string(stderrTail), "\r", "\n"), "\n")
	var out []string
	seen := map[string]bool{}
	add := func(ps []string) {
		for _, p := range ps {
			if p != "" && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	npmFailed := false
	for i, line := range lines {
		// npm names the code on one line and the path on another.
		if m := npmLine.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "code":
				npmFailed = m[2] == "EROFS" || m[2] == "EACCES" || m[2] == "EPERM"
			case "path":
				if npmFailed {
					add([]string{strings.TrimSpace(m[2])})
				}
				continue
			}
		}
		if !hasMarker(line) {
			continue
		}
		ps := pathsIn(line)
		// "Caused by:\n  Read-only file system (os error 30)": the path is
		// on a line above.
		if len(ps) == 0 && startsWithMarker(line) {
			for j := i - 1; j >= 0 && j >= i-3 && len(ps) == 0; j-- {
				ps = pathsIn(lines[j])
			}
		}
		add(ps)
	}
	return out
}

// npmLine is npm's `npm ERR! code EROFS` and `npm error path /x` (npm 10).
var npmLine = regexp.MustCompile(`^npm (?:ERR!|error) +(\w+) +(.*)$`)

// markers are the messages of EROFS and EACCES, lower case.
var markers = []string{"read-only file system", "permission denied", "erofs", "eacces", "[errno 30]", "[errno 13]", "os error 30", "os error 13"}

func hasMarker(line string) bool {
	l := strings.ToLower(line)
	for _, m := range markers {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

func startsWithMarker(line string) bool {
	l := strings.ToLower(strings.TrimSpace(line))
	for _, m := range markers {
		if strings.HasPrefix(l, m) {
			return true
		}
	}
	return false
}

// quotes pairs each opening quote with its closing one: '…', "…", `…',
// `…`, ‘…’ and “…”.
var quotes = map[rune][]rune{'\'': {'\''}, '"': {'"'}, '`': {'`', '\''}, '‘': {'’'}, '“': {'”'}}

// pathsIn finds the paths on one line: quoted words first (coreutils,
// Python, Node), else words that start with / (bash, Go, apt), else the
// field before the message in `prog: FIELD: message`.
func pathsIn(line string) []string {
	if ps := quoted(line); len(ps) > 0 {
		return ps
	}
	// `/bin/bash: line 1: /etc/x: …`: the program's own path is not
	// the one refused, unless it is the only one (`/etc/x: …`).
	if prog, rest, ok := strings.Cut(line, ": "); ok && !strings.ContainsAny(prog, " \t") {
		if ps := absolute(rest); len(ps) > 0 {
			return ps
		}
	}
	// `PROG: line 5: report.txt: …`: the field before the message, when
	// fields[0] (the program's name, maybe a path) is not it.
	fields := strings.Split(line, ": ")
	for i := len(fields) - 1; i > 0; i-- {
		if hasMarker(fields[i]) {
			if f := strings.TrimSpace(fields[i-1]); i >= 2 && f != "" && !strings.ContainsAny(f, " \t") {
				return []string{f}
			}
			break
		}
	}
	return absolute(line)
}

// absolute returns the words of s that start with /.
func absolute(s string) []string {
	var ps []string
	for w := range strings.FieldsSeq(s) {
		w = strings.TrimLeft(w, `([{<'"`)
		w = strings.TrimRight(w, `:;,.)]}>'"`)
		if len(w) > 1 && w[0] == '/' {
			ps = append(ps, w)
		}
	}
	return ps
}

// quoted returns the quoted words of line. A quote opens only after a
// non-letter (so that "couldn't" opens nothing) and closes only before
// one.
func quoted(line string) []string {
	var ps []string
	prev := ' '
	for i := 0; i < len(line); {
		r, n := utf8.DecodeRuneInString(line[i:])
		closers, ok := quotes[r]
		if !ok || unicode.IsLetter(prev) || unicode.IsDigit(prev) {
			prev = r
			i += n
			continue
		}
		end := -1
		for j := i + n; j < len(line); {
			c, m := utf8.DecodeRuneInString(line[j:])
			next, _ := utf8.DecodeRuneInString(line[j+m:])
			if containsRune(closers, c) && (j+m == len(line) || !unicode.IsLetter(next) && !unicode.IsDigit(next)) {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			prev = r
			i += n
			continue
		}
		if w := line[i+n : end]; strings.TrimSpace(w) != "" && !hasMarker(w) {
			ps = append(ps, w)
		}
		_, m := utf8.DecodeRuneInString(line[end:])
		i = end + m
		prev = ' '
	}
	return ps
}

func containsRune(rs []rune, r rune) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}
