package main

// These tests never act on this machine's /: install and uninstall run
// with --root on a tree in a temporary directory, and the one run without
// --root is by a user who is not root, which must be refused.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// build builds one of the commands into a directory anyone can read.
func build(t *testing.T, pkg, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "undoctl-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, func(string) string { return "" })
	return out.String(), errb.String(), code
}

func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			m[rel] = "-> " + l
		case info.IsDir():
			m[rel] = info.Mode().String()
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("%v %x", info.Mode(), sha256.Sum256(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestInstallCLI installs the real undosh into a usrmerged tree, checks it
// with doctor, installs again, and uninstalls.
func TestInstallCLI(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	data, err := os.ReadFile(bash)
	if err != nil {
		t.Fatal(err)
	}
	undosh := build(t, "github.com/undosh/undosh/cmd/undosh", "undosh")
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/lib", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []struct {
		name string
		data string
		mode os.FileMode
	}{
		{"usr/bin/bash", string(data), 0o755},
		{"usr/bin/dash", "dash stand-in\n", 0o755},
		{"etc/passwd", "root:x:0:0:root:/root:/bin/bash\nagent:x:1000:1000::/home/agent:/bin/sh\n", 0o644},
		{"etc/shells", "/bin/sh\n", 0o644},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f.name), []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"bin", "usr/bin"}, {"usr/bin/sh", "dash"}} {
		if err := os.Symlink(l[1], filepath.Join(root, l[0])); err != nil {
			t.Fatal(err)
		}
	}
	before := tree(t, root)

	out, errs, code := cli(t, "install", "--root", root, "--undosh", undosh, "--user", "agent", "--sh")
	want := `installed undosh at /usr/lib/undosh/undosh
moved /bin/bash to /usr/lib/undosh/real/bash
/bin/bash -> /usr/lib/undosh/undosh (so is /usr/bin/bash)
/usr/lib/undosh/real/sh -> /usr/bin/dash (the real sh)
/bin/sh -> /usr/lib/undosh/undosh (so is /usr/bin/sh)
wrote /etc/undosh/shells
added /bin/bash to /etc/shells
user agent: login shell /bin/bash (was /bin/sh)
undosh is installed in ` + root + `; /etc/undosh/install.json records every change (undoctl uninstall puts them back)
`
	if code != 0 || errs != "" {
		t.Fatalf("install: exit %d\n%s%s", code, out, errs)
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("install output (-want +got):\n%s", diff)
	}

	out, errs, code = cli(t, "doctor", "--root", root, "--user", "agent")
	if code != 0 || errs != "" || !strings.HasSuffix(out, "\nhealthy\n") {
		t.Errorf("doctor after install: exit %d\n%s%s", code, out, errs)
	}
	for _, line := range []string{
		"/bin/bash:      undosh (a link to /usr/lib/undosh/undosh)\n",
		"real bash:      /usr/lib/undosh/real/bash (GNU bash ",
		"real sh:        /usr/lib/undosh/real/sh (/usr/bin/dash; from /etc/undosh/shells)\n",
		"login shell:    agent: /bin/bash (undosh)\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("doctor output lacks %q:\n%s", line, out)
		}
	}

	out, _, code = cli(t, "install", "--root", root, "--undosh", undosh, "--user", "agent", "--sh")
	if code != 0 || !strings.HasSuffix(out, "undosh is installed in "+root+" already; nothing to change\n") {
		t.Errorf("second install: exit %d\n%s", code, out)
	}

	out, errs, code = cli(t, "uninstall", "--root", root)
	if code != 0 || !strings.HasSuffix(out, "undosh is uninstalled in "+root+": everything it changed is back\n") {
		t.Errorf("uninstall: exit %d\n%s%s", code, out, errs)
	}
	if diff := cmp.Diff(before, tree(t, root)); diff != "" {
		t.Errorf("uninstall left the tree different (-before +after):\n%s", diff)
	}
	out, _, code = cli(t, "uninstall", "--root", root)
	if code != 0 || !strings.Contains(out, "not installed") {
		t.Errorf("second uninstall: exit %d\n%s", code, out)
	}
}

// TestInstallNeedsRoot: on this machine's / (no --root), install and
// uninstall refuse a user who is not root. As root, the test runs undoctl
// as nobody, who could not change / even if the check were missing.
func TestInstallNeedsRoot(t *testing.T) {
	for _, cmd := range []string{"install", "uninstall"} {
		var stderr string
		var code int
		if os.Geteuid() != 0 {
			_, stderr, code = cli(t, cmd)
		} else {
			setpriv, err := exec.LookPath("setpriv")
			if err != nil {
				t.Skip("running as root without setpriv: cannot become another user")
			}
			undoctl := build(t, ".", "undoctl")
			c := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", undoctl, cmd)
			c.Dir = os.TempDir()
			var errb bytes.Buffer
			c.Stderr = &errb
			err = c.Run()
			stderr = errb.String()
			code = c.ProcessState.ExitCode()
			if err != nil && code < 0 {
				t.Fatal(err)
			}
		}
		want := "undoctl: error: this changes /bin/bash, /usr/bin/bash and /etc of this machine: it must run as root\n" +
			"undoctl: hint: run it as root (sudo), or act on another tree (an image, a chroot) with --root DIR\n"
		if code != 1 || stderr != want {
			t.Errorf("undoctl %s as a user: exit %d, stderr\n%s\nwant exit 1 and\n%s", cmd, code, stderr, want)
		}
	}
}
