package parser

import (
	"path"
	"slices"
	"strings"
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

// TestNamedPaths: the absolute paths the words of a program whose writes
// are not known name. The policy's TestFamilyNamedPaths decides from
// these same readings.
func TestNamedPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"mytool /dev/sda", []string{"/dev/sda"}},
		{"mytool of=/dev/sdb", []string{"/dev/sdb"}},
		{"mytool --target=/usr/lib/x", []string{"/usr/lib/x"}},
		{"mytool -o/boot/grub.cfg", []string{"/boot/grub.cfg"}},
		{"./flash.sh /dev/mmcblk0", []string{"/dev/mmcblk0"}},
		{"mytool /dev/null /tmp/x /home/agent/f", []string{"/dev/null", "/tmp/x", "/home/agent/f"}},
		{"mytool /dev/tcp/203.0.113.1/80", []string{"/dev/tcp/203.0.113.1/80"}},
		{"cat /etc/passwd", []string{"/etc/passwd"}},
		{"make -I/usr/include", []string{"/usr/include"}},
		{"mytool //dev/./sda/ x=/etc//x/.. -x/y/z --out=/a -- /b", []string{"/dev/sda", "/etc", "/y/z", "/a", "/b"}},
		{"mytool /=x a=b -o relative --x/y $P /dev/$X", []string{"/=x"}},
		{"mytool =/etc/x -/x", []string{"/etc/x", "/x"}},
		// Writes the parser knows: nothing more.
		{"rm /dev/sda", nil},
		{"echo /etc/passwd", nil},
	}
	for _, tt := range tests {
		f := Parse(tt.in, Options{Cwd: "/w"})
		c := f.Commands[len(f.Commands)-1]
		if diff := cmp.Diff(tt.want, c.NamedPaths); diff != "" {
			t.Errorf("%q: NamedPaths (-want +got):\n%s", tt.in, diff)
		}
	}
}

// FuzzNamedPaths: what the parser reads as paths in a command's words
// (NamedPaths, and Diverts for dpkg-divert) is always absolute and
// clean, and a dpkg-divert that only asks diverts nothing.
func FuzzNamedPaths(f *testing.F) {
	for _, s := range []string{"/dev/sda", "of=/dev/sdb -o/boot/x", "--target=/usr/lib/x", "//a/../b/ =/c -/d", "--add /bin/bash", "--list /bin/sh", "-? /x", "a=b /=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, words string) {
		if len(words) > 256 {
			return
		}
		argv := []Arg{{Value: "dpkg-divert"}}
		for _, w := range strings.Fields(words) {
			argv = append(argv, Arg{Value: w, Dynamic: strings.HasPrefix(w, "$")})
		}
		c := Command{Argv: argv}
		namedPaths(&c)
		divertWords(&c)
		for _, l := range [][]string{c.NamedPaths, c.Diverts} {
			for _, p := range l {
				if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
					t.Errorf("%q: path %q is not absolute and clean", words, p)
				}
			}
		}
		asks := slices.ContainsFunc(argv[1:], func(a Arg) bool {
			return slices.Contains([]string{"--list", "--listpackage", "--truename", "--help", "-?", "--version"}, a.Value)
		})
		if asks && len(c.Diverts) > 0 {
			t.Errorf("%q: a dpkg-divert that only asks diverts %q", words, c.Diverts)
		}
		c.WritesKnown = true
		if namedPaths(&c); c.NamedPaths != nil {
			t.Errorf("%q: writes known, yet NamedPaths %q", words, c.NamedPaths)
		}
	})
}
