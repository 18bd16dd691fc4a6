package pathglob

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestWithin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b/c", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/a", "/a/b", false},
		{"/a/b", "/a/b/", true},
		{"/a/b/", "/a/b", true},
		{"/a/b/../c", "/a", true},
		{"/a/b/../c", "/a/b", false},
		{"/x", "/", true},
		{"/", "/", true},
		{"x", "/", false},
		{"a/b", "a", true},
		{"a", "a/b", false},
		{"", "/", false},
		{"/a", "", false},
		{"//a//b", "/a", true},
	}
	for _, tt := range tests {
		if got := Within(tt.p, tt.dir); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
	}
}

func TestBelow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a/b", false},
		{"/a/b/", "/a/b", false},
		{"/a/b/c", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/x", "/", true},
		{"/", "/", false},
		{"a/b", "a", true},
		{"a", "a", false},
		{"/a/b/..", "/a", false},
		{"", "/", false},
	}
	for _, tt := range tests {
		if got := Below(tt.p, tt.dir); got != tt.want {
			t.Errorf("Below(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
	}
}

// For absolute paths Within agrees with filepath.Rel: p is within dir
// when the way from dir to p does not climb out.
func FuzzWithin(f *testing.F) {
	for _, s := range [][2]string{{"/a/b", "/a"}, {"/a/bc", "/a/b"}, {"/", "/"}, {"/a/../b", "/b"}, {"/a//b/", "/a/b"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, dir string) {
		if !strings.HasPrefix(p, "/") || !strings.HasPrefix(dir, "/") {
			return
		}
		rel, err := filepath.Rel(dir, p)
		want := err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
		if got := Within(p, dir); got != want {
			t.Errorf("Within(%q, %q) = %v; filepath.Rel says %q, %v", p, dir, got, rel, err)
		}
	})
}
