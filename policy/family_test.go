package policy_test

import (
	"testing"

	"github.com/undosh/undosh/policy"
)

// TestFamilyNamedPaths: a program no rule knows may write the devices and
// system paths it names, in any option form; a known program, or a
// program whose writes are known, is decided by its rules and writes.
func TestFamilyNamedPaths(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	ctx := policy.Context{Cwd: "/work/proj", Roots: []string{"/work/proj"}, Home: "/home/agent"}
	for _, tc := range []struct {
		argv  []string
		known bool // WritesKnown
		want  policy.Class
	}{
		{[]string{"mytool", "/dev/sda"}, false, policy.Fork},
		{[]string{"mytool", "of=/dev/sdb"}, false, policy.Fork},
		{[]string{"mytool", "--target=/usr/lib/x"}, false, policy.Fork},
		{[]string{"mytool", "-o/boot/grub.cfg"}, false, policy.Fork},
		{[]string{"./flash.sh", "/dev/mmcblk0"}, false, policy.Fork},
		{[]string{"mytool", "/dev/null", "/tmp/x", "/home/agent/f"}, false, policy.Git},
		{[]string{"mytool", "/dev/tcp/203.0.113.1/80"}, false, policy.Git},
		{[]string{"mytool", "/dev/sda"}, true, policy.Git},
		{[]string{"cat", "/etc/passwd"}, false, policy.None},
		{[]string{"make", "-I/usr/include"}, false, policy.Git},
	} {
		c := policy.Command{Pos: "1:1", Text: "x", Cwd: "/work/proj", WritesKnown: tc.known}
		for _, a := range tc.argv {
			c.Argv = append(c.Argv, policy.Arg{Value: a})
		}
		d := p.Decide(policy.Input{Commands: []policy.Command{c}}, ctx)
		if d.Class != tc.want || d.Egress {
			t.Errorf("%v: got %s egress=%v, want %s", tc.argv, d.Class, d.Egress, tc.want)
		}
	}
}
