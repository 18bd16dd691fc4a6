package main

// These tests never act on this machine's /: install and uninstall run
// with --root on a tree in a temporary directory, and the one run without
// --root is by a user who is not root, which must be refused.

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/internal/frontend"
	"github.com/undosh/undosh/internal/install"
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

// buildFast builds the undosh-fast front end with cc into a directory of
// its own.
func buildFast(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "undosh-fast")
	if err := frontend.Build("../../front/undosh-fast.c", out); errors.Is(err, frontend.ErrNoCompiler) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	return out
}

func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, func(string) string { return "" })
	return out.String(), errb.String(), code
}

// smallRoot makes a usrmerged tree with bash, sh -> dash, a passwd and
// /etc/shells.
func smallRoot(t *testing.T) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	data, err := os.ReadFile(bash)
	if err != nil {
		t.Fatal(err)
	}
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
	return root
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
	undosh := build(t, "github.com/undosh/undosh/cmd/undosh", "undosh")
	root := smallRoot(t)
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

// TestInstallCLIFast installs undosh with its front end, checks doctor,
// switches the front end off and on, and uninstalls.
func TestInstallCLIFast(t *testing.T) {
	undosh := build(t, "github.com/undosh/undosh/cmd/undosh", "undosh")
	fast := buildFast(t)
	root := smallRoot(t)
	state := filepath.Join(t.TempDir(), "state")
	before := tree(t, root)

	out, errs, code := cli(t, "install", "--root", root, "--undosh", undosh, "--fast", fast, "--sh")
	want := `installed undosh at /usr/lib/undosh/undosh
installed undosh-fast at /usr/lib/undosh/undosh-fast
moved /bin/bash to /usr/lib/undosh/real/bash
/bin/bash -> /usr/lib/undosh/undosh-fast (so is /usr/bin/bash)
/usr/lib/undosh/real/sh -> /usr/bin/dash (the real sh)
/bin/sh -> /usr/lib/undosh/undosh-fast (so is /usr/bin/sh)
wrote /etc/undosh/shells
undosh is installed in ` + root + `; /etc/undosh/install.json records every change (undoctl uninstall puts them back)
`
	if code != 0 || errs != "" {
		t.Fatalf("install: exit %d\n%s%s", code, out, errs)
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("install output (-want +got):\n%s", diff)
	}
	if got, err := filepath.EvalSymlinks(filepath.Join(root, "usr/lib/undosh/undosh-fast")); err != nil || got != filepath.Join(root, "usr/lib/undosh/undosh-fast") {
		t.Errorf("the front end: %s, %v", got, err)
	}
	if l, _ := os.Readlink(filepath.Join(root, "usr/bin/bash")); l != "/usr/lib/undosh/undosh-fast" {
		t.Errorf("usr/bin/bash -> %s, want /usr/lib/undosh/undosh-fast", l)
	}

	doctor := func(lines ...string) {
		t.Helper()
		out, errs, code := cli(t, "doctor", "--root", root, "--state", state)
		if code != 0 || errs != "" || !strings.HasSuffix(out, "\nhealthy\n") {
			t.Errorf("doctor: exit %d\n%s%s", code, out, errs)
		}
		for _, line := range lines {
			if !strings.Contains(out, line) {
				t.Errorf("doctor output lacks %q:\n%s", line, out)
			}
		}
	}
	doctor("front end:      /usr/lib/undosh/undosh-fast (undosh-fast: bash asks its server, then runs the real bash or undosh)\n",
		"/bin/bash:      undosh through undosh-fast (a link to /usr/lib/undosh/undosh-fast)\n",
		"/bin/sh:        undosh through undosh-fast (a link to /usr/lib/undosh/undosh-fast)\n",
		"real bash:      /usr/lib/undosh/real/bash (GNU bash ",
		"server:         not running ("+state+"/run/classify.sock); the first call through undosh-fast starts it\n")

	out, _, code = cli(t, "install", "--root", root, "--undosh", undosh, "--fast", fast, "--sh")
	if code != 0 || out != "undosh is installed in "+root+" already; nothing to change\n" {
		t.Errorf("second install: exit %d\n%s", code, out)
	}

	out, errs, code = cli(t, "install", "--root", root, "--undosh", undosh, "--no-fast")
	want = `/bin/bash -> /usr/lib/undosh/undosh (was /usr/lib/undosh/undosh-fast)
/bin/sh -> /usr/lib/undosh/undosh (was /usr/lib/undosh/undosh-fast)
removed /usr/lib/undosh/undosh-fast
undosh was installed in ` + root + ` already; updated as above
`
	if diff := cmp.Diff(want, out); code != 0 || errs != "" || diff != "" {
		t.Errorf("install --no-fast: exit %d, stderr %q (-want +got):\n%s", code, errs, diff)
	}
	doctor("front end:      none: bash is undosh directly (undoctl install --fast PATH adds undosh-fast)\n",
		"/bin/bash:      undosh (a link to /usr/lib/undosh/undosh)\n",
		"server:         not running ("+state+"/run/classify.sock); only undosh-fast starts and asks it\n")
	out, _, code = cli(t, "install", "--root", root, "--undosh", undosh, "--no-fast")
	if code != 0 || !strings.HasSuffix(out, "nothing to change\n") {
		t.Errorf("install --no-fast again: exit %d\n%s", code, out)
	}

	out, errs, code = cli(t, "install", "--root", root, "--undosh", undosh, "--fast", fast)
	want = `installed undosh-fast at /usr/lib/undosh/undosh-fast
/bin/bash -> /usr/lib/undosh/undosh-fast (was /usr/lib/undosh/undosh)
/bin/sh -> /usr/lib/undosh/undosh-fast (was /usr/lib/undosh/undosh)
undosh was installed in ` + root + ` already; updated as above
`
	if diff := cmp.Diff(want, out); code != 0 || errs != "" || diff != "" {
		t.Errorf("install --fast again: exit %d, stderr %q (-want +got):\n%s", code, errs, diff)
	}

	out, errs, code = cli(t, "uninstall", "--root", root)
	if code != 0 || !strings.HasSuffix(out, "undosh is uninstalled in "+root+": everything it changed is back\n") {
		t.Errorf("uninstall: exit %d\n%s%s", code, out, errs)
	}
	if diff := cmp.Diff(before, tree(t, root)); diff != "" {
		t.Errorf("uninstall left the tree different (-before +after):\n%s", diff)
	}
}

// TestInstallDefaults: undoctl installs the undosh and undosh-fast next to
// it; without an undosh-fast there, it keeps what is installed.
func TestInstallDefaults(t *testing.T) {
	undoctl := build(t, ".", "undoctl")
	dir := filepath.Dir(undoctl)
	for name, from := range map[string]string{
		"undosh":      build(t, "github.com/undosh/undosh/cmd/undosh", "undosh"),
		"undosh-fast": buildFast(t),
	} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := smallRoot(t)
	before := tree(t, root)
	undoctlRun := func(args ...string) string {
		t.Helper()
		c := exec.Command(undoctl, args...)
		var errb bytes.Buffer
		c.Stderr = &errb
		out, err := c.Output()
		if err != nil {
			t.Fatalf("undoctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errb.String())
		}
		return string(out)
	}
	bashLink := func() string {
		l, _ := os.Readlink(filepath.Join(root, "usr/bin/bash"))
		return l
	}

	out := undoctlRun("install", "--root", root)
	if !strings.Contains(out, "installed undosh-fast at /usr/lib/undosh/undosh-fast\n") || bashLink() != "/usr/lib/undosh/undosh-fast" {
		t.Errorf("install without flags: bash -> %s\n%s", bashLink(), out)
	}
	undoctlRun("install", "--root", root, "--no-fast")
	if bashLink() != "/usr/lib/undosh/undosh" {
		t.Errorf("install --no-fast: bash -> %s", bashLink())
	}
	if err := os.Remove(filepath.Join(dir, "undosh-fast")); err != nil {
		t.Fatal(err)
	}
	if out := undoctlRun("install", "--root", root); !strings.HasSuffix(out, "nothing to change\n") || bashLink() != "/usr/lib/undosh/undosh" {
		t.Errorf("install with no undosh-fast next to undoctl: bash -> %s\n%s", bashLink(), out)
	}
	undoctlRun("uninstall", "--root", root)
	if diff := cmp.Diff(before, tree(t, root)); diff != "" {
		t.Errorf("uninstall left the tree different (-before +after):\n%s", diff)
	}
}

// TestReportHint: an error with a Hint method, wrapped or not, gets its
// hint line from report.
func TestReportHint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"install error", &install.Error{Msg: "no bash", Fix: "install bash"},
			"undoctl: error: no bash\nundoctl: hint: install bash\n"},
		{"wrapped", fmt.Errorf("in /img: %w", &install.Error{Msg: "no bash", Fix: "install bash"}),
			"undoctl: error: in /img: no bash\nundoctl: hint: install bash\n"},
		{"no advice", &install.Error{Msg: "no bash"}, "undoctl: error: no bash\n"},
		{"plain", errors.New("boom"), "undoctl: error: boom\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			report(&b, tt.err)
			if b.String() != tt.want {
				t.Errorf("report = %q, want %q", b.String(), tt.want)
			}
		})
	}
}
