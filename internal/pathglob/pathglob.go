// Package pathglob matches slash-separated paths against globs in which
// ** matches any number of whole path elements, * and ? match within one
// element, and "dir/**" also matches "dir" itself; and it says whether
// one path lies within another ([Within]).
package pathglob

// Match reports whether p matches pattern. Both are slash-separated; a
// pattern and a path are compared as they are (absolute with absolute,
// relative with relative).
func Match(pattern, p string) bool {
	if pattern == "" {
		return p == ""
	}
	if len(pattern) >= 2 && pattern[0] == '*' && pattern[1] == '*' {
		rest := pattern[2:]
		if len(rest) > 0 && rest[0] == '/' {
			rest = rest[1:]
		}
		if rest == "" {
			return true
		}
		for i := 0; i <= len(p); i++ {
			if (i == 0 || p[i-1] == '/') && Match(rest, p[i:]) {
				return true
			}
		}
		return false
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(p); i++ {
			if i > 0 && p[i-1] == '/' {
				break
			}
			if Match(pattern[1:], p[i:]) {
				return true
			}
		}
		return false
	case '?':
		return p != "" && p[0] != '/' && Match(pattern[1:], p[1:])
	}
	if p == "" || p[0] != pattern[0] {
		// "dir/**" also matches "dir" itself.
		return p == "" && (pattern == "/**" || pattern == "/")
	}
	return Match(pattern[1:], p[1:])
}
