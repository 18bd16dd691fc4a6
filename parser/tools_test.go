package parser

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiverts: the paths whose diversion dpkg-divert changes. The
// policy's self-protection decides from these same readings
// (policy/decide_test.go).
func TestDiverts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"dpkg-divert --remove /bin/bash", []string{"/bin/bash"}},
		{"dpkg-divert --rename --remove /usr/bin/../bin/sh", []string{"/usr/bin/sh"}},
		{"dpkg-divert --remove /usr/bin/perf", []string{"/usr/bin/perf"}},
		{"sudo dpkg-divert --add --rename --divert /bin/bash.real //bin/bash", []string{"/bin/bash.real", "/bin/bash"}},
		{"/usr/sbin/dpkg-divert --add /bin/sh", []string{"/bin/sh"}},
		{"dpkg-divert --add $P", nil},
		{"dpkg-divert --divert=/bin/bash.x --add relative", nil},
		{"dpkg-divert --list", nil},
		{"dpkg-divert --truename /bin/bash", nil},
		{"dpkg-divert /bin/bash --listpackage", nil},
		{"dpkg-divert -? /bin/bash", nil},
		{"echo dpkg-divert --remove /bin/bash", nil},
	}
	for _, tt := range tests {
		f := Parse(tt.in, Options{Cwd: "/w"})
		c := f.Commands[len(f.Commands)-1]
		if diff := cmp.Diff(tt.want, c.Diverts); diff != "" {
			t.Errorf("%q: Diverts (-want +got):\n%s", tt.in, diff)
		}
	}
}
