package pathglob

import "testing"

func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/etc/**", "/etc/hosts", true},
		{"/etc/**", "/etc", true},
		{"/etc/**", "/etcetera", false},
		{"/etc/*", "/etc/a/b", false},
		{"/etc/*", "/etc/a", true},
		{"**/.cache/**", "a/b/.cache/x", true},
		{"**/.cache/**", ".cache", true},
		{"**/.cache/**", "a/.cache", true},
		{"**/.cache/**", "a/cache", false},
		{"/tmp/claude-*-cwd", "/tmp/claude-ab12-cwd", true},
		{"/tmp/claude-*-cwd", "/tmp/claude-a/b-cwd", false},
		{"a?c", "abc", true},
		{"a?c", "a/c", false},
		{"", "", true},
		{"", "x", false},
		{"**", "anything/at/all", true},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.path); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}
