package pathglob

import (
	"path"
	"strings"
)

// Within reports whether path p is dir or lies inside it. The two are
// cleaned and compared as slash-separated strings, so that:
//
//   - p == dir is within (a tree holds its own root);
//   - "/" holds every absolute path, and no relative one;
//   - "/a/bc" is not within "/a/b", and "/a/b/../c" is "/a/c";
//   - a trailing slash changes nothing;
//   - "" is neither a path nor a directory: Within is then false.
//
// Symlinks are not resolved: a caller for whom they matter resolves
// both first. This is the module's one test of containment.
func Within(p, dir string) bool {
	if p == "" || dir == "" {
		return false
	}
	return within(path.Clean(p), path.Clean(dir))
}

// Below reports whether p lies strictly inside dir: [Within], and not
// dir itself.
func Below(p, dir string) bool {
	if p == "" || dir == "" {
		return false
	}
	p, dir = path.Clean(p), path.Clean(dir)
	return p != dir && within(p, dir)
}

// within is Within for clean paths.
func within(p, dir string) bool {
	switch {
	case p == dir:
		return true
	case dir == "/":
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir+"/")
}
