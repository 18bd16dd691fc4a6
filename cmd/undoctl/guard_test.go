package main

// Like install_test.go, these tests never act on this machine's /: install
// runs with --root, and dpkg with --root, on trees in temporary
// directories.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/exit"
	place "github.com/undosh/undosh/internal/where"
)

const debianMarker = "[externally-managed]\nError=To install Python packages system-wide, try apt install\n python3-xyz.\n"

// TestInstallCLIGuards installs undosh in a root with dpkg and a system
// Python, checks the guards with doctor, turns them off, and uninstalls.
func TestInstallCLIGuards(t *testing.T) {
	if _, err := exec.LookPath("dpkg-divert"); err != nil {
		t.Skip("dpkg-divert is not installed here")
	}
	undosh := build(t, "github.com/undosh/undosh/cmd/undosh", "undosh")
	root := smallRoot(t)
	for name, data := range map[string]string{
		"var/lib/dpkg/status":                   "",
		"var/lib/dpkg/diversions":               "",
		"usr/lib/python3.11/os.py":              "# os\n",
		"usr/lib/python3.11/EXTERNALLY-MANAGED": debianMarker,
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := tree(t, root)

	out, errs, code := cli(t, "install", "--root", root, "--undosh", undosh)
	if code != 0 || errs != "" {
		t.Fatalf("install: exit %d\n%s%s", code, out, errs)
	}
	want := `/usr/lib/undosh/undosh-guard -> /usr/lib/undosh/undosh (the guard's entry point)
dpkg guard: /etc/dpkg/dpkg.cfg.d/undosh-guard runs /usr/lib/undosh/undosh-guard dpkg before dpkg changes anything
pip guard: /usr/lib/python3.11/EXTERNALLY-MANAGED (PEP 668: pip refuses to install into system paths outside a machine step)
undosh is installed in ` + root + `; /etc/undosh/install.json records every change (undoctl uninstall puts them back)
`
	if !strings.HasSuffix(out, want) {
		t.Errorf("install output ends\n%s\nwant\n%s", out, want)
	}
	out, errs, code = cli(t, "doctor", "--root", root, "--state", t.TempDir())
	if code != 0 || errs != "" || !strings.HasSuffix(out, "\nhealthy\n") {
		t.Errorf("doctor after install: exit %d\n%s%s", code, out, errs)
	}
	for _, line := range []string{
		"guard dpkg:     /etc/dpkg/dpkg.cfg.d/undosh-guard: dpkg runs /usr/lib/undosh/undosh-guard dpkg first\n",
		"guard pip:      /usr/lib/python3.11/EXTERNALLY-MANAGED (PEP 668 marker; copies of the machine do not see it)\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("doctor output lacks %q:\n%s", line, out)
		}
	}

	out, errs, code = cli(t, "install", "--root", root, "--undosh", undosh, "--no-guards")
	want = `restored /usr/lib/python3.11/EXTERNALLY-MANAGED
removed /etc/dpkg/dpkg.cfg.d/undosh-guard
removed /etc/dpkg/dpkg.cfg.d
removed /etc/dpkg
removed /usr/lib/undosh/undosh-guard
undosh was installed in ` + root + ` already; updated as above
`
	if diff := cmp.Diff(want, out); code != 0 || errs != "" || diff != "" {
		t.Errorf("install --no-guards: exit %d, stderr %q (-want +got):\n%s", code, errs, diff)
	}
	if got, err := os.ReadFile(filepath.Join(root, "usr/lib/python3.11/EXTERNALLY-MANAGED")); err != nil || string(got) != debianMarker {
		t.Errorf("Debian's marker after --no-guards: %q, %v", got, err)
	}
	out, _, _ = cli(t, "doctor", "--root", root, "--state", t.TempDir())
	if !strings.Contains(out, "\nguards:         off (undoctl install --no-guards)") {
		t.Errorf("doctor with the guards off:\n%s", out)
	}

	out, errs, code = cli(t, "uninstall", "--root", root)
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s%s", code, out, errs)
	}
	after := tree(t, root)
	delete(after, "var/lib/dpkg/diversions-old") // dpkg-divert's backup, kept on every machine
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("uninstall left the tree different (-before +after):\n%s", diff)
	}
}

// TestGuardExit: undoctl guard's exit statuses.
func TestGuardExit(t *testing.T) {
	if place.InCopy("") || place.InHostCopy(fork.DefaultStateDir) {
		t.Skip("the tests run in a copy of the machine, where every guard passes")
	}
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"guard", "dpkg"}, exit.Refused},
		{[]string{"guard", "pip", "--", "pip", "install", "x"}, exit.Refused},
		{[]string{"guard"}, exit.Usage},
		{[]string{"guard", "cargo"}, exit.Usage},
		{[]string{"guard", "--help"}, exit.OK},
	} {
		if _, stderr, code := cli(t, tt.args...); code != tt.want {
			t.Errorf("undoctl %s: exit %d, want %d\n%s", strings.Join(tt.args, " "), code, tt.want, stderr)
		}
	}
}

// TestGuardInCopy runs the same buried dpkg -i twice: refused on this
// machine, and let through in a copy of the machine made by undoctl try
// (the local fork engine; root only).
func TestGuardInCopy(t *testing.T) {
	for _, p := range []string{"dpkg", "dpkg-deb"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed here", p)
		}
	}
	if err := fork.Probe(); err != nil {
		t.Skipf("the local fork engine cannot run here: %v", err)
	}
	if place.InCopy("") || place.InHostCopy(fork.DefaultStateDir) {
		t.Skip("the tests run in a copy of the machine")
	}
	undoctl := build(t, ".", "undoctl")
	undosh := build(t, "github.com/undosh/undosh/cmd/undosh", "undosh")
	work := t.TempDir()
	guard := filepath.Join(work, "bin", "undosh-guard")
	root := filepath.Join(work, "root")
	pkg := filepath.Join(work, "pkg")
	for _, d := range []string{"bin", "root/var/lib/dpkg/updates", "root/var/lib/dpkg/info", "pkg/DEBIAN", "pkg/opt/t"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(undosh, guard); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"root/var/lib/dpkg/status": "",
		"pkg/DEBIAN/control":       "Package: undosh-guard-test\nVersion: 1.0\nArchitecture: all\nMaintainer: undosh <undosh@example.org>\nDescription: t\n",
		"pkg/opt/t/hello":          "hello\n",
		// Not in the copy: exit 77, and the test is skipped.
		"install.sh": "#!/bin/sh\nset -e\ntest -d \"$1\" || exit 77\ndpkg --root=\"$1\" --log=/dev/null --pre-invoke=\"$2 dpkg\" -i \"$3\" >/dev/null\ncat \"$1/opt/t/hello\"\n",
	} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(work, "x.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-b", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	run := func(argv ...string) (string, string, int) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "UNDOSH_STATE_DIR="+filepath.Join(work, "state"))
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	script := []string{"sh", "./install.sh", root, guard, deb}

	stdout, stderr, code := run(script...)
	if code == 0 || !strings.Contains(stderr, "undosh: refused: dpkg changes the machine outside a machine step (dpkg --root="+root) {
		t.Errorf("on this machine: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = run(append([]string{undoctl, "try", "--"}, script...)...)
	switch {
	case code == 77:
		t.Skip("the copy does not show the test's directory (a tmpfs on /tmp?)")
	case code != 0 || !strings.HasPrefix(stdout, "hello\n") || strings.Contains(stderr, "refused") || !strings.Contains(stderr, "the machine is unchanged"):
		t.Errorf("in a copy: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// try discards the copy.
	if _, err := os.Lstat(filepath.Join(root, "opt")); err == nil {
		t.Error("the package is installed in the real root")
	}
}
