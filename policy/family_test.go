package policy_test

import (
	"testing"

	"github.com/undosh/undosh/policy"
)

// TestFamilyNamedPaths: a program no rule knows may write the devices and
// system paths it names, in any option form; a known program, or a
// program whose writes are known, is decided by its rules and writes.
// The paths are those the parser reads in the words (its NamedPaths;
// TestNamedPaths there reads these same words so).
func TestFamilyNamedPaths(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	ctx := policy.Context{Cwd: "/work/proj", Roots: []string{"/work/proj"}, Home: "/home/agent"}
	for _, tc := range []struct {
		argv  []string
		known bool // WritesKnown
		named []string
		want  policy.Class
	}{
		{[]string{"mytool", "/dev/sda"}, false, []string{"/dev/sda"}, policy.Fork},
		{[]string{"mytool", "of=/dev/sdb"}, false, []string{"/dev/sdb"}, policy.Fork},
		{[]string{"mytool", "--target=/usr/lib/x"}, false, []string{"/usr/lib/x"}, policy.Fork},
		{[]string{"mytool", "-o/boot/grub.cfg"}, false, []string{"/boot/grub.cfg"}, policy.Fork},
		{[]string{"./flash.sh", "/dev/mmcblk0"}, false, []string{"/dev/mmcblk0"}, policy.Fork},
		{[]string{"mytool", "/dev/null", "/tmp/x", "/home/agent/f"}, false, []string{"/dev/null", "/tmp/x", "/home/agent/f"}, policy.Git},
		{[]string{"mytool", "/dev/tcp/203.0.113.1/80"}, false, []string{"/dev/tcp/203.0.113.1/80"}, policy.Git},
		{[]string{"mytool", "/dev/sda"}, true, nil, policy.Git},
		{[]string{"cat", "/etc/passwd"}, false, []string{"/etc/passwd"}, policy.None},
		{[]string{"make", "-I/usr/include"}, false, []string{"/usr/include"}, policy.Git},
	} {
		c := policy.Command{Pos: "1:1", Text: "x", Cwd: "/work/proj", WritesKnown: tc.known, NamedPaths: tc.named}
		for _, a := range tc.argv {
			c.Argv = append(c.Argv, policy.Arg{Value: a})
		}
		d := p.Decide(policy.Input{Commands: []policy.Command{c}}, ctx)
		if d.Class != tc.want || d.Egress {
			t.Errorf("%v: got %s egress=%v, want %s", tc.argv, d.Class, d.Egress, tc.want)
		}
	}
}
