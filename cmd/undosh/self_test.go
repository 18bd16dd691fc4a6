package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What the classifier cannot see, the commit of a machine step (or of
// what a workspace step wrote beyond its workspace) still refuses: the
// copy is discarded and the policy in force is unchanged.
func TestSelfProtectCommit(t *testing.T) {
	needForkEngine(t)
	needEnforcement(t)
	mach, err := os.MkdirTemp("/opt", "undosh-self-")
	if err != nil {
		t.Skipf("no /opt to stand for the machine: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(mach) })
	pol := filepath.Join(mach, "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := sessWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "tool.py"), []byte("open('"+pol+"', 'a').write('# tool\\n')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "where"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+t.TempDir(), "HOME="+t.TempDir(), "UNDOSH_POLICY="+pol)
	for _, c := range []string{
		`echo '# x' >> "$(cat where)"`, // a machine step: the path is known at run time only
		`python3 tool.py`,              // a workspace step, in a view, that wrote beyond it
	} {
		r := runWith(t, undoshBin, ws, env, "bash", "-c", c)
		if r.code != 126 || !strings.Contains(r.stderr, "not kept") && !strings.Contains(r.stderr, "not applied") ||
			!strings.Contains(r.stderr, "undosh: refused: ") || !strings.Contains(r.stderr, "this changes undosh itself") {
			t.Errorf("%s: %+v", c, r)
		}
		t.Logf("%s: %s", c, r.stderr)
		if b, _ := os.ReadFile(pol); string(b) != "version: 1\n" {
			t.Errorf("%s: the policy in force changed: %q", c, b)
		}
	}
}
