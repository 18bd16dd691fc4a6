package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A step may not switch undosh off: one that writes the policy in force
// or the state directory, or runs undoctl uninstall, is refused before it
// runs; unless the policy says self_protect: false.
func TestSelfProtect(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), t.TempDir()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), "UNDOSH_POLICY="+pol,
		"PATH="+filepath.Dir(undoctlBin)+":"+os.Getenv("PATH"))
	for _, c := range []string{
		"echo '# x' >> " + pol,
		"sed -i s/1/2/ " + pol,
		"rm -rf " + state,
		"cp /dev/null " + filepath.Join(state, "journal.jsonl"),
		"undoctl uninstall",
		"undoctl --root / uninstall",
		"dpkg-divert --rename --remove /usr/bin/bash",
		"echo x > /etc/undosh/policy.yaml",
		"ln -sf /bin/true /usr/lib/undosh/undosh",
	} {
		r := runWith(t, undoshBin, ws, env, "bash", "-c", c)
		if r.code != 126 || !strings.HasPrefix(r.stderr, "undosh: refused: this changes undosh itself") || !strings.Contains(r.stderr, "undosh: hint: ") {
			t.Errorf("%s: %+v", c, r)
		}
	}
	if b, _ := os.ReadFile(pol); string(b) != "version: 1\n" {
		t.Errorf("the policy in force changed: %q", b)
	}
	// Reading undosh's files, and its own tools, stay as they were.
	for _, c := range []string{"cat " + pol, "dpkg-divert --list '*bash*' >/dev/null || true", "undoctl log >/dev/null"} {
		if r := runWith(t, undoshBin, ws, env, "bash", "-c", c); r.code != 0 || strings.Contains(r.stderr, "refused") {
			t.Errorf("%s: %+v", c, r)
		}
	}
	// self_protect: false lets the policy be edited.
	if err := os.WriteFile(pol, []byte("version: 1\nself_protect: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(ws, "policy.yaml")
	if err := os.WriteFile(local, []byte("version: 1\nself_protect: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env2 := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), "UNDOSH_POLICY="+local)
	if r := runWith(t, undoshBin, ws, env2, "bash", "-c", "echo '# edited' >> policy.yaml"); r.code != 0 || r.stderr != "" {
		t.Errorf("editing the policy with self_protect: false: %+v", r)
	}
	if b, _ := os.ReadFile(local); !strings.HasSuffix(string(b), "# edited\n") {
		t.Errorf("the policy was not edited: %q", b)
	}
}

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
