package classify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/undosh/undosh/policy"
)

// TestFamilySymlinkWorkspace: on a real file system, a write through a
// link in the workspace that leads outside it is outside, and a
// workspace reached through a link still holds what is written in it.
func TestFamilySymlinkWorkspace(t *testing.T) {
	t.Parallel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(base, "proj")
	// The temporary directory is a scratch path: outside is elsewhere.
	outside := "/usr/share"
	for _, d := range []string{filepath.Join(proj, ".git"), filepath.Join(proj, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		filepath.Join(proj, "out"):    outside,
		filepath.Join(proj, "sub/up"): "../../../../../../../../../../usr",
		filepath.Join(proj, "inside"): "sub",
		filepath.Join(base, "alias"):  proj,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	p := policy.Default()
	tests := []struct {
		cwd, in string
		want    policy.Class
	}{
		{proj, "echo x > out/f", policy.Fork},
		{proj, "cp a out/", policy.Fork},
		{proj, "echo x > sub/up/f", policy.Fork},
		{proj, "echo x > inside/../sub/f", policy.Git},
		{proj, "cd out && make", policy.Fork},
		{proj, "tar -xf a.tar -C out", policy.Fork},
		{proj, "rm -f out", policy.Git},
		{proj, "echo x > inside/f", policy.Git},
		{filepath.Join(base, "alias"), "echo x > f", policy.Git},
		{filepath.Join(base, "alias"), "echo x > out/f", policy.Fork},
		{proj, "cat out/f", policy.None},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"HOME": "/home/agent"}
			d := Decide(tc.in, Options{Policy: p, Cwd: tc.cwd, Env: env}).Decision
			if d.Class != tc.want {
				t.Errorf("Decide(%q) in %s = %s, want %s\n%s", tc.in, tc.cwd, d.Class, tc.want, reasons(d))
			}
		})
	}
}
