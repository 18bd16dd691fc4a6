package install

// Like install_test.go, these tests act only on roots in t.TempDir(): the
// one dpkg run is dpkg --root on such a root.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/where"
)

// debianMarker is Debian 12's PEP 668 marker, shortened.
const debianMarker = "[externally-managed]\nError=To install Python packages system-wide, try apt install\n python3-xyz, where xyz is the package you are trying to\n install.\n"

// addPythons gives root three system Pythons: 3.11 with Debian's marker
// (mode 0640, to see that mode come back too), 3.12 without one, and a
// source build in /usr/local; /usr/lib/python3 holds no standard library.
func addPythons(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{"usr/lib/python3.11", "usr/lib/python3.12", "usr/local/lib/python3.13"} {
		write(t, filepath.Join(root, d, "os.py"), []byte("# os\n"), 0o644)
	}
	write(t, filepath.Join(root, "usr/lib/python3.11", MarkerName), []byte(debianMarker), 0o640)
	write(t, filepath.Join(root, "usr/lib/python3/dist-packages/x.py"), nil, 0o644)
}

var markers = []string{
	"/usr/lib/python3.11/EXTERNALLY-MANAGED",
	"/usr/lib/python3.12/EXTERNALLY-MANAGED",
	"/usr/local/lib/python3.13/EXTERNALLY-MANAGED",
}

// guardsOn checks that every guard is in place in root.
func guardsOn(t *testing.T, root string, dpkg bool) {
	t.Helper()
	r := mustRoot(t, root)
	if dpkg {
		if got := readFile(t, r.host(DpkgGuardFile)); got != string(dpkgGuardConfig()) {
			t.Errorf("%s = %q", DpkgGuardFile, got)
		}
		if !strings.Contains(readFile(t, r.host(DpkgGuardFile)), "\npre-invoke=/usr/lib/undosh/undosh-guard dpkg\n") {
			t.Errorf("%s has no pre-invoke hook", DpkgGuardFile)
		}
		if l := r.readlink(GuardBinary); l != Binary {
			t.Errorf("%s -> %q, want %s", GuardBinary, l, Binary)
		}
	}
	for _, m := range markers {
		data := readFile(t, r.host(m))
		if !isGuardMarker([]byte(data)) || !strings.Contains(data, "Error=undosh: refused: pip changes the machine outside a machine step") {
			t.Errorf("%s is not the pip guard:\n%s", m, data)
		}
	}
}

// guardsOff checks that no guard is in place in root, and that Debian's
// marker is back byte for byte, with its mode.
func guardsOff(t *testing.T, root string) {
	t.Helper()
	r := mustRoot(t, root)
	for _, p := range []string{DpkgGuardFile, GuardBinary, markers[1], markers[2]} {
		if _, err := r.lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	if got := readFile(t, r.host(markers[0])); got != debianMarker {
		t.Errorf("%s = %q, want Debian's %q", markers[0], got, debianMarker)
	}
	if st, err := os.Stat(r.host(markers[0])); err != nil || st.Mode() != 0o640 {
		t.Errorf("%s: mode %v, %v; want 0640", markers[0], st.Mode(), err)
	}
}

func guardProblems(rep Report) []string {
	var out []string
	for _, p := range rep.Problems {
		if strings.Contains(p.What, "guard") || strings.Contains(p.What, "EXTERNALLY") || strings.Contains(p.What, "dpkg") {
			out = append(out, p.What)
		}
	}
	return out
}

// TestGuards puts the guards in place, turns them off and on, and
// uninstalls: the root is as it was, Debian's marker byte for byte.
func TestGuards(t *testing.T) {
	t.Parallel()
	for _, dpkg := range []bool{true, false} {
		t.Run("dpkg="+map[bool]string{true: "yes", false: "no"}[dpkg], func(t *testing.T) {
			t.Parallel()
			root := makeRoot(t, layout{merged: true, dpkg: dpkg})
			addPythons(t, root)
			before := snapshot(t, root)
			var log bytes.Buffer
			o := Options{Root: root, Undosh: undoshBinary(t), Log: &log}
			if _, err := Install(o); err != nil {
				t.Fatalf("Install: %v\n%s", err, log.String())
			}
			guardsOn(t, root, dpkg)
			r := mustRoot(t, root)
			if !dpkg {
				if _, err := r.lstat(GuardBinary); err == nil {
					t.Errorf("%s without dpkg", GuardBinary)
				}
				if isDir(r.host("/etc/dpkg")) {
					t.Error("/etc/dpkg made without dpkg")
				}
			}
			wantLog := ""
			if dpkg {
				wantLog = "/usr/lib/undosh/undosh-guard -> /usr/lib/undosh/undosh (the guard's entry point)\n" +
					"dpkg guard: /etc/dpkg/dpkg.cfg.d/undosh-guard runs /usr/lib/undosh/undosh-guard dpkg before dpkg changes anything\n"
			}
			for _, m := range markers {
				wantLog += "pip guard: " + m + " (PEP 668: pip refuses to install into system paths outside a machine step)\n"
			}
			if !strings.HasSuffix(log.String(), wantLog) {
				t.Errorf("install log ends\n%s\nwant\n%s", log.String(), wantLog)
			}
			rec, err := LoadRecord(root)
			if err != nil {
				t.Fatal(err)
			}
			var guarded []string
			for _, a := range rec.Actions {
				if a.Guard != "" {
					guarded = append(guarded, a.Guard+" "+a.Op+" "+a.Path)
				}
			}
			want := []string{"pip guard-file " + markers[0], "pip guard-file " + markers[1], "pip guard-file " + markers[2]}
			if dpkg {
				want = append([]string{"dpkg symlink " + GuardBinary, "dpkg mkdir /etc/dpkg", "dpkg mkdir /etc/dpkg/dpkg.cfg.d", "dpkg write " + DpkgGuardFile}, want...)
			}
			if diff := cmp.Diff(want, guarded); diff != "" {
				t.Errorf("guard actions (-want +got):\n%s", diff)
			}

			rep, err := Doctor(DoctorOptions{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			if p := guardProblems(rep); len(p) > 0 {
				t.Errorf("doctor after install: %q", p)
			}
			var on []string
			for _, g := range rep.Guards {
				if g.On {
					on = append(on, g.Actor+" "+g.Path)
				}
			}
			wantOn := []string{"pip " + markers[0], "pip " + markers[1], "pip " + markers[2]}
			if dpkg {
				wantOn = append([]string{"dpkg " + DpkgGuardFile}, wantOn...)
			}
			if diff := cmp.Diff(wantOn, on); diff != "" {
				t.Errorf("doctor's guards (-want +got):\n%s", diff)
			}

			// Again: nothing changes.
			installed := snapshot(t, root)
			if res, err := Install(o); err != nil || res.Changed {
				t.Errorf("second Install = %+v, %v; want no change", res, err)
			}
			if diff := cmp.Diff(installed, snapshot(t, root)); diff != "" {
				t.Errorf("second install changed the root (-before +after):\n%s", diff)
			}

			// --no-guards takes them away, and later runs keep them off.
			o.NoGuards = true
			if res, err := Install(o); err != nil || !res.Changed {
				t.Fatalf("Install --no-guards = %+v, %v", res, err)
			}
			guardsOff(t, root)
			if isDir(r.host("/etc/dpkg")) {
				t.Error("/etc/dpkg, made for the guard, is still there")
			}
			o.NoGuards = false
			if res, err := Install(o); err != nil || res.Changed {
				t.Errorf("Install after --no-guards = %+v, %v; want no change", res, err)
			}
			guardsOff(t, root)
			if rep, err := Doctor(DoctorOptions{Root: root}); err != nil || len(rep.Guards) != 1 || rep.Guards[0].On || !strings.HasPrefix(rep.Guards[0].Is, "off") {
				t.Errorf("doctor with the guards off: %+v, %v", rep.Guards, err)
			}

			// --guards puts them back.
			o.Guards = true
			if res, err := Install(o); err != nil || !res.Changed {
				t.Fatalf("Install --guards = %+v, %v", res, err)
			}
			guardsOn(t, root, dpkg)

			if _, err := Uninstall(o); err != nil {
				t.Fatal(err)
			}
			guardsOff(t, root)
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("uninstall left the root different (-before +after):\n%s", diff)
			}
		})
	}
}

// TestGuardsFlags: --guards and --no-guards at once are refused; a first
// install with --no-guards puts none in place.
func TestGuardsFlags(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true, dpkg: true})
	addPythons(t, root)
	before := snapshot(t, root)
	o := Options{Root: root, Undosh: undoshBinary(t), Guards: true, NoGuards: true}
	if _, err := Install(o); err == nil {
		t.Fatal("Install with --guards and --no-guards: no error")
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("a refused install changed the root:\n%s", diff)
	}
	o.Guards = false
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	guardsOff(t, root)
	if rec, err := LoadRecord(root); err != nil || !rec.NoGuards {
		t.Errorf("record: %+v, %v; want no_guards", rec, err)
	}
	if _, err := Uninstall(o); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("uninstall (-before +after):\n%s", diff)
	}
}

// TestMarkerReplaced: a package upgrade that puts its marker back wins.
// doctor says so; uninstall keeps the new marker, and so does a later
// install, which takes the guard back, for its own uninstall.
func TestMarkerReplaced(t *testing.T) {
	t.Parallel()
	const upgraded = "[externally-managed]\nError=Debian's marker, upgraded\n"
	for _, again := range []bool{false, true} {
		t.Run(map[bool]string{false: "uninstall", true: "install again"}[again], func(t *testing.T) {
			t.Parallel()
			root := makeRoot(t, layout{merged: true})
			addPythons(t, root)
			o := Options{Root: root, Undosh: undoshBinary(t)}
			if _, err := Install(o); err != nil {
				t.Fatal(err)
			}
			r := mustRoot(t, root)
			write(t, r.host(markers[0]), []byte(upgraded), 0o644)
			rep, err := Doctor(DoctorOptions{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			if p := guardProblems(rep); len(p) != 1 || !strings.Contains(p[0], markers[0]+" is no longer the pip guard") {
				t.Errorf("doctor: %q", p)
			}
			var log bytes.Buffer
			o.Log = &log
			if again {
				if _, err := Install(o); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(log.String(), markers[0]+" was replaced since install") {
					t.Errorf("install log:\n%s", log.String())
				}
				guardsOn(t, root, false)
			}
			if _, err := Uninstall(o); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, r.host(markers[0])); got != upgraded {
				t.Errorf("after uninstall %s = %q, want the upgraded %q", markers[0], got, upgraded)
			}
			if !again && !strings.Contains(log.String(), "kept "+markers[0]+": replaced since install") {
				t.Errorf("uninstall log:\n%s", log.String())
			}
		})
	}
}

// TestGuardsCutShort: an install cut short after recording a guard file
// but before writing it is undone all the same.
func TestGuardsCutShort(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true, dpkg: true})
	addPythons(t, root)
	before := snapshot(t, root)
	o := Options{Root: root, Undosh: undoshBinary(t)}
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	r := mustRoot(t, root)
	// Put the files back as they were before the guards' changes, and
	// leave the record unfinished: as a run killed right after recording.
	if err := os.Remove(r.host(markers[1])); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.host(markers[2])); err != nil {
		t.Fatal(err)
	}
	write(t, r.host(markers[0]), []byte(debianMarker), 0o640)
	if err := os.Remove(r.host(DpkgGuardFile)); err != nil {
		t.Fatal(err)
	}
	rec, err := LoadRecord(root)
	if err != nil {
		t.Fatal(err)
	}
	rec.Complete = false
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.host(RecordFile), data, 0o644)
	if _, err := Uninstall(o); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("uninstall (-before +after):\n%s", diff)
	}
}

// TestPythonLibs: the standard library directories found are those pip
// looks in. On this machine (read only), every /usr/bin/python3.N's
// sysconfig stdlib path is among them.
func TestPythonLibs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	addPythons(t, root)
	// /usr/lib64 a link to lib, as on some distributions: found once.
	symlink(t, "lib", filepath.Join(root, "usr/lib64"))
	want := []string{"/usr/lib/python3.11", "/usr/lib/python3.12", "/usr/local/lib/python3.13"}
	if diff := cmp.Diff(want, mustRoot(t, root).pythonLibs()); diff != "" {
		t.Errorf("pythonLibs (-want +got):\n%s", diff)
	}

	live := mustRoot(t, "/").pythonLibs()
	pys, _ := filepath.Glob("/usr/bin/python3.[0-9]*")
	for _, py := range pys {
		if strings.HasSuffix(py, "-config") {
			continue
		}
		out, err := exec.Command(py, "-I", "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))").Output()
		if err != nil {
			continue
		}
		if lib := strings.TrimSpace(string(out)); !slices.Contains(live, lib) {
			t.Errorf("%s keeps its standard library in %s, not among %q", py, lib, live)
		}
	}
}

// TestMarkerReadByPip: pip reads the marker and shows undosh's refusal.
func TestMarkerReadByPip(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), MarkerName)
	write(t, name, pipMarker("/usr/lib/python3.11"), 0o644)
	script := `import sys
from pip._internal.exceptions import ExternallyManagedEnvironment as E
from pip._vendor.rich.console import Console
Console(width=200).print(E.from_config(sys.argv[1]))`
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		out, err := exec.Command(py, "-I", "-c", script, name).CombinedOutput()
		if err != nil {
			continue
		}
		for _, want := range []string{
			"╰─> undosh: refused: pip changes the machine outside a machine step (an install into the system's Python 3.11)\n",
			"    undosh: hint: undoctl run --fork -- pip install …\n",
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%s: pip shows\n%s\nwithout %q", py, out, want)
			}
		}
		return
	}
	t.Skip("no Python with pip here")
}

// TestDpkgGuardRefuses is the test: the dpkg guard refuses a
// dpkg -i of a locally built .deb buried in ./install.sh, and nothing is
// installed. dpkg reads its configuration from this machine's /etc, not
// from the root's, so the hook the installed fragment names is given
// with --pre-invoke, pointing at the root's undosh.
func TestDpkgGuardRefuses(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("dpkg refuses to change even a temporary root for a user who is not root")
	}
	for _, p := range []string{"dpkg", "dpkg-deb", "dpkg-query"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed here", p)
		}
	}
	if where.InCopy("") || where.InHostCopy(fork.DefaultStateDir) {
		t.Skip("the tests run in a copy of the machine, where dpkg may run")
	}
	root := makeRoot(t, layout{merged: true, dpkg: true})
	for _, d := range []string{"var/lib/dpkg/updates", "var/lib/dpkg/info"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Install(Options{Root: root, Undosh: undoshBinary(t)}); err != nil {
		t.Fatal(err)
	}
	r := mustRoot(t, root)

	// The hook, from the fragment undoctl install wrote.
	var hook string
	for _, line := range strings.Split(readFile(t, r.host(DpkgGuardFile)), "\n") {
		if v, ok := strings.CutPrefix(line, "pre-invoke="); ok {
			hook = v
		}
	}
	prog, args, _ := strings.Cut(hook, " ")
	if prog != GuardBinary {
		t.Fatalf("the hook runs %q, want %s", prog, GuardBinary)
	}
	// The root's undosh, under the guard's name.
	bin := t.TempDir()
	guard := filepath.Join(bin, filepath.Base(GuardBinary))
	symlink(t, r.host(Binary), guard)
	hook = guard + " " + args

	// A package, built here.
	work := t.TempDir()
	pkg := filepath.Join(work, "pkg")
	write(t, filepath.Join(pkg, "DEBIAN/control"), []byte("Package: undosh-guard-test\nVersion: 1.0\nArchitecture: all\nMaintainer: undosh <undosh@example.org>\nDescription: a package the guard refuses\n"), 0o644)
	write(t, filepath.Join(pkg, "opt/undosh-guard-test/hello"), []byte("hello\n"), 0o644)
	deb := filepath.Join(work, "x.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-b", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	write(t, filepath.Join(work, "install.sh"), []byte("#!/bin/sh\n# builds a tool, and installs a package on the way\nset -e\necho building\ndpkg --root=\"$1\" --log=/dev/null --pre-invoke=\"$2\" -i \"$3\"\necho installed\n"), 0o755)

	installSh := func(hook string) (stdout, stderr string, err error) {
		cmd := exec.Command("sh", "./install.sh", root, hook, deb)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "UNDOSH_STATE_DIR="+t.TempDir())
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}
	stdout, stderr, err := installSh(hook)
	if err == nil {
		t.Fatalf("install.sh passed:\n%s%s", stdout, stderr)
	}
	dpkgCmd := "dpkg --root=" + root + " --log=/dev/null '--pre-invoke=" + hook + "' -i " + deb
	for _, want := range []string{
		"undosh: refused: dpkg changes the machine outside a machine step (" + dpkgCmd + ", run by sh ./install.sh ",
		"\nundosh: hint: undoctl run --fork -- " + dpkgCmd + "\n",
		"dpkg: error: error executing hook",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if stdout != "building\n" {
		t.Errorf("stdout = %q, want the script stopped at dpkg", stdout)
	}
	if _, err := os.Lstat(filepath.Join(root, "opt")); err == nil {
		t.Error("the package's files are in the root")
	}
	if out, err := exec.Command("dpkg-query", "--root="+root, "-W", "-f=${Status}", "undosh-guard-test").CombinedOutput(); err == nil && strings.Contains(string(out), "installed") {
		t.Errorf("dpkg-query: the package is installed: %s", out)
	}

	// The same script, with a hook that lets dpkg through: it installs,
	// so the refusal above was the guard's.
	if stdout, stderr, err := installSh("true"); err != nil || !strings.HasSuffix(stdout, "installed\n") {
		t.Fatalf("install.sh without the guard: %v\n%s%s", err, stdout, stderr)
	}
	if got := readFile(t, filepath.Join(root, "opt/undosh-guard-test/hello")); got != "hello\n" {
		t.Errorf("hello = %q", got)
	}
}

// TestUnattendedUpgrades: apt's switch, in the order apt reads its files;
// doctor reports it when the dpkg guard is on.
func TestUnattendedUpgrades(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"none", nil, false},
		{"on", map[string]string{"20auto-upgrades": "APT::Periodic::Update-Package-Lists \"1\";\nAPT::Periodic::Unattended-Upgrade \"1\";\n"}, true},
		{"off", map[string]string{"20auto-upgrades": "APT::Periodic::Unattended-Upgrade \"0\";\n"}, false},
		{"every 7 days", map[string]string{"20auto-upgrades": "APT::Periodic::Unattended-Upgrade \"7\";\n"}, true},
		{"turned off later", map[string]string{"20auto-upgrades": "APT::Periodic::Unattended-Upgrade \"1\";\n", "99local": "APT::Periodic::Unattended-Upgrade \"0\";\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for name, data := range tt.files {
				write(t, filepath.Join(root, "etc/apt/apt.conf.d", name), []byte(data), 0o644)
			}
			if got := mustRoot(t, root).unattendedUpgrades(); got != tt.want {
				t.Errorf("unattendedUpgrades = %v, want %v", got, tt.want)
			}
		})
	}

	root := makeRoot(t, layout{merged: true, dpkg: true})
	write(t, filepath.Join(root, "etc/apt/apt.conf.d/20auto-upgrades"), []byte("APT::Periodic::Unattended-Upgrade \"1\";\n"), 0o644)
	if _, err := Install(Options{Root: root, Undosh: undoshBinary(t)}); err != nil {
		t.Fatal(err)
	}
	rep, err := Doctor(DoctorOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if p := guardProblems(rep); len(p) != 1 || !strings.HasPrefix(p[0], "unattended-upgrades runs dpkg outside any machine step") {
		t.Errorf("doctor: %q", p)
	}
}
