package install

// These tests never touch this machine's /bin, /usr or /etc: every
// Install and Uninstall runs with Options.Root set to a tree made in
// t.TempDir(). Nothing here may call them with an empty Root.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/front"
	"github.com/undosh/undosh/internal/frontend"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/shell"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// undoshBinary builds the real undosh once.
func undoshBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "undosh-install-test-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(buildDir, "undosh"), "github.com/undosh/undosh/cmd/undosh").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/undosh: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "undosh")
}

var (
	fastOnce sync.Once
	fastErr  error
)

// fastBinary builds the undosh-fast front end once, with cc.
func fastBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip(frontend.ErrNoCompiler)
	}
	undoshBinary(t) // makes buildDir
	name := filepath.Join(buildDir, "front", "undosh-fast")
	fastOnce.Do(func() {
		if fastErr = os.Mkdir(filepath.Dir(name), 0o755); fastErr != nil {
			return
		}
		fastErr = frontend.Build("../../front/undosh-fast.c", name)
	})
	if fastErr != nil {
		t.Fatal(fastErr)
	}
	return name
}

// hostFile returns the content of a program of this machine, to copy into
// test roots.
func hostFile(t *testing.T, name string) []byte {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed here", name)
	}
	p, err = filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	if isUndoshBinary(p) == nil {
		t.Skipf("this machine's %s is undosh: no real one to copy", name)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// layout is the shape of a test root.
type layout struct {
	merged  bool // /bin is a link to usr/bin (usrmerge)
	absLink bool // that link is absolute (/usr/bin): it must stay inside the root
	dpkg    bool // the root has a dpkg database
	// ownsUsr: the bash package lists /usr/bin/bash, not /bin/bash (as
	// after Debian moved its files to /usr).
	ownsUsr bool
	// shToBash: /bin/sh is a link to bash, not dash.
	shToBash bool
}

const (
	passwd = "root:x:0:0:root:/root:/bin/bash\n" +
		"# a comment\n" +
		"agent:x:1000:1000:Agent,,,:/home/agent:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	shells = "# /etc/shells: valid login shells\n/bin/sh\n/usr/bin/sh\n/bin/dash\n/usr/bin/dash" // no final newline
	// dash's diversion, as on Debian 12.
	diversions = "/bin/sh\n/bin/sh.distrib\ndash\n"
	status     = "Package: bash\nStatus: install ok installed\nMaintainer: x\nDescription: x\nVersion: 5.2.15-2+b7\nArchitecture: amd64\n\n" +
		"Package: dash\nStatus: install ok installed\nMaintainer: x\nDescription: x\nVersion: 0.5.12-2\nArchitecture: amd64\n\n"
)

func write(t *testing.T, name string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// makeRoot builds a small Debian-like root: bash, dash, sh -> dash, a
// passwd with a test user, /etc/shells and, with l.dpkg, a dpkg database
// that owns /bin/bash and holds dash's diversion of /bin/sh.
func makeRoot(t *testing.T, l layout) string {
	t.Helper()
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	if l.merged {
		target := "usr/bin"
		if l.absLink {
			target = "/usr/bin"
		}
		symlink(t, target, bin)
		bin = filepath.Join(root, "usr/bin")
	}
	write(t, filepath.Join(bin, "bash"), hostFile(t, "bash"), 0o755)
	write(t, filepath.Join(bin, "dash"), []byte("#!dash stand-in\n"), 0o755)
	if l.shToBash {
		symlink(t, "bash", filepath.Join(bin, "sh"))
	} else {
		symlink(t, "dash", filepath.Join(bin, "sh"))
	}
	write(t, filepath.Join(root, "usr/bin/env"), []byte("env stand-in\n"), 0o755)
	write(t, filepath.Join(root, "etc/passwd"), []byte(passwd), 0o644)
	write(t, filepath.Join(root, "etc/shells"), []byte(shells), 0o644)
	write(t, filepath.Join(root, "etc/.pwd.lock"), nil, 0o600)
	if err := os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if l.dpkg {
		if _, err := exec.LookPath("dpkg-divert"); err != nil {
			t.Skip("dpkg-divert is not installed here: the dpkg method cannot be tested")
		}
		write(t, filepath.Join(root, "var/lib/dpkg/diversions"), []byte(diversions), 0o644)
		write(t, filepath.Join(root, "var/lib/dpkg/status"), []byte(status), 0o644)
		list := "/.\n/bin\n/bin/bash\n"
		if l.ownsUsr {
			list = "/.\n/usr\n/usr/bin\n/usr/bin/bash\n"
		}
		write(t, filepath.Join(root, "var/lib/dpkg/info/bash.list"), []byte(list), 0o644)
		write(t, filepath.Join(root, "var/lib/dpkg/info/dash.list"), []byte("/.\n/bin\n/bin/dash\n/bin/sh\n"), 0o644)
	}
	return root
}

// snapshot describes every path of a tree: type, mode, link target and
// content. dpkg-divert's backup of its database (diversions-old) is left
// out: dpkg keeps one on every machine.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "var/lib/dpkg/diversions-old" {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case info.IsDir():
			out[rel] = fmt.Sprintf("dir %v", info.Mode())
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %v %x", info.Mode(), sha256.Sum256(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mustRoot(t *testing.T, dir string) fsRoot {
	t.Helper()
	r, err := newRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func localDiversions(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("dpkg-divert", "--root", root, "--list").Output()
	if err != nil {
		t.Fatalf("dpkg-divert --list: %v", err)
	}
	var l []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "local ") {
			l = append(l, line)
		}
	}
	return l
}

func TestInstallUninstall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		l    layout
		sh   bool
		user string
	}{
		{"usrmerge, dpkg, sh, user", layout{merged: true, dpkg: true}, true, "agent"},
		{"usrmerge, plain", layout{merged: true}, false, ""},
		{"usrmerge by an absolute link, plain, sh", layout{merged: true, absLink: true}, true, "agent"},
		{"usrmerge, dpkg owns /usr/bin/bash", layout{merged: true, dpkg: true, ownsUsr: true}, false, ""},
		{"usrmerge, dpkg, sh is bash", layout{merged: true, dpkg: true, shToBash: true}, true, ""},
		{"split /bin, dpkg", layout{dpkg: true}, false, "agent"},
		{"split /bin, plain, sh is bash", layout{shToBash: true}, true, ""},
		{"split /bin, plain, sh, user", layout{}, true, "agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bin := undoshBinary(t)
			root := makeRoot(t, tt.l)
			r := mustRoot(t, root)
			before := snapshot(t, root)
			bashAt, _ := r.target("/bin/bash")
			bash := readFile(t, bashAt)
			var log bytes.Buffer
			o := Options{Root: root, Undosh: bin, User: tt.user, Sh: tt.sh, Log: &log}
			res, err := Install(o)
			if err != nil {
				t.Fatalf("Install: %v\n%s", err, log.String())
			}
			if res.Already || !res.Changed {
				t.Errorf("Install = %+v, want a first install", res)
			}

			for _, p := range BashPaths {
				if !r.isUndosh(p) {
					t.Errorf("%s is not undosh after install", p)
				}
			}
			if got := readFile(t, r.host(RealBash)); got != bash {
				t.Errorf("%s differs from the bash that was there", RealBash)
			}
			if st, err := os.Lstat(r.host(RealBash)); err != nil || st.Mode() != 0o755 {
				t.Errorf("%s: %v, mode %v, want a 0755 file", RealBash, err, st.Mode())
			}
			if got, want := readFile(t, r.host(Binary)), readFile(t, bin); got != want {
				t.Errorf("%s is not the undosh binary given", Binary)
			}
			wantConfig := "# The real shells undosh runs, written by undoctl install.\nbash=/usr/lib/undosh/real/bash\n"
			if tt.sh {
				wantConfig += "sh=/usr/lib/undosh/real/sh\n"
			}
			if got := readFile(t, r.host(ConfigFile)); got != wantConfig {
				t.Errorf("%s = %q, want %q", ConfigFile, got, wantConfig)
			}
			if tt.sh {
				for _, p := range ShPaths {
					if _, ok := r.entryOf(p); ok && !r.isUndosh(p) {
						t.Errorf("%s is not undosh after install --sh", p)
					}
				}
				want := []string{"/usr/bin/dash", "/bin/dash"}
				if tt.l.shToBash {
					want = []string{RealBash}
				}
				if got, _ := r.resolve(RealSh, true); got != want[0] && (len(want) == 1 || got != want[1]) {
					t.Errorf("%s leads to %s, want %s", RealSh, got, want[0])
				}
			} else if r.isUndosh("/bin/sh") {
				t.Error("/bin/sh is undosh without --sh")
			}
			if tt.user != "" {
				u, err := r.lookupUser(tt.user, 0)
				if err != nil || u.Shell != LoginShell {
					t.Errorf("user %s: %+v, %v; want shell %s", tt.user, u, err, LoginShell)
				}
				if got, want := readFile(t, r.host(ShellsFile)), shells+"\n"+LoginShell+"\n"; got != want {
					t.Errorf("%s = %q, want %q", ShellsFile, got, want)
				}
				if got := readFile(t, r.host(PasswdFile)); got != strings.Replace(passwd, "/home/agent:/bin/sh", "/home/agent:/bin/bash", 1) {
					t.Errorf("%s: other bytes changed:\n%s", PasswdFile, got)
				}
			}
			if tt.l.dpkg {
				want := []string{"local diversion of /bin/bash to /usr/lib/undosh/real/bash"}
				if tt.l.ownsUsr {
					want = []string{"local diversion of /usr/bin/bash to /usr/lib/undosh/real/bash"}
				}
				if diff := cmp.Diff(want, localDiversions(t, root)); diff != "" {
					t.Errorf("diversions (-want +got):\n%s", diff)
				}
			}
			rep, err := Doctor(DoctorOptions{Root: root, User: tt.user})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) > 0 {
				t.Errorf("doctor after install: %+v", rep.Problems)
			}
			if !rep.Installed || rep.Real[0].Path != RealBash || rep.Real[0].From != ConfigFile || !strings.HasPrefix(rep.Real[0].Is, "GNU bash") {
				t.Errorf("doctor: installed %v, real bash %+v", rep.Installed, rep.Real[0])
			}

			// Again: nothing changes, not even the record.
			installed := snapshot(t, root)
			res, err = Install(o)
			if err != nil {
				t.Fatalf("second Install: %v", err)
			}
			if !res.Already || res.Changed {
				t.Errorf("second Install = %+v, want already installed, unchanged", res)
			}
			if diff := cmp.Diff(installed, snapshot(t, root)); diff != "" {
				t.Errorf("second install changed the root (-before +after):\n%s", diff)
			}

			log.Reset()
			if _, err := Uninstall(o); err != nil {
				t.Fatalf("Uninstall: %v\n%s", err, log.String())
			}
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("uninstall left the root different (-before +after):\n%s\nlog:\n%s", diff, log.String())
			}
			if tt.l.dpkg {
				if got := readFile(t, filepath.Join(root, "var/lib/dpkg/diversions")); got != diversions {
					t.Errorf("diversions = %q, want %q", got, diversions)
				}
			}
			res, err = Uninstall(o)
			if err != nil || !res.Already {
				t.Errorf("second Uninstall = %+v, %v; want not installed", res, err)
			}
		})
	}
}

// TestInstallAddsLater: a second install adds --sh and --user to a plain
// one, and uninstall takes all of it back.
func TestInstallAddsLater(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true, dpkg: true})
	before := snapshot(t, root)
	o := Options{Root: root, Undosh: undoshBinary(t)}
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	o.Sh, o.User = true, "agent"
	var log bytes.Buffer
	o.Log = &log
	res, err := Install(o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Already || !res.Changed {
		t.Errorf("Install = %+v, want already installed, changed", res)
	}
	want := "/usr/lib/undosh/real/sh -> /usr/bin/dash (the real sh)\n" +
		"/bin/sh -> /usr/lib/undosh/undosh (so is /usr/bin/sh)\n" +
		"wrote /etc/undosh/shells\n" +
		"added /bin/bash to /etc/shells\n" +
		"user agent: login shell /bin/bash (was /bin/sh)\n"
	if diff := cmp.Diff(want, log.String()); diff != "" {
		t.Errorf("second install (-want +got):\n%s", diff)
	}
	if rec, err := LoadRecord(root); err != nil || !rec.Complete {
		t.Errorf("record after the second install: %+v, %v", rec, err)
	}
	if _, err := Uninstall(o); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("uninstall (-before +after):\n%s", diff)
	}
}

// TestRealBashRuns runs the installed undosh in front of the moved bash:
// it must hand over to the real bash.
func TestRealBashRuns(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true})
	if _, err := Install(Options{Root: root, Undosh: undoshBinary(t)}); err != nil {
		t.Fatal(err)
	}
	r := mustRoot(t, root)
	want, err := exec.Command(r.host(RealBash), "-c", "echo $BASH_VERSION").Output()
	if err != nil {
		t.Fatalf("the moved bash does not run: %v", err)
	}
	want = append(want, "bash\n"...)
	cmd := exec.Command(r.host(Binary), "-c", "echo $BASH_VERSION; read -r c </proc/$$/comm; echo $c")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "UNDOSH_STATE_DIR=" + t.TempDir(),
		"UNDOSH_REAL_BASH=" + r.host(RealBash)}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("undosh -c: %v\n%s", err, stderr.String())
	}
	if len(want) < 7 || string(got) != string(want) {
		t.Errorf("undosh -c (version, comm) = %q, want %q", got, want)
	}
}

func TestCheckRoot(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	slash := filepath.Join(t.TempDir(), "slash")
	if err := os.Symlink("/", slash); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		root string
		uid  int
		want error
	}{
		{"this machine, not root", "", 1000, ErrNotRoot},
		{"slash, not root", "/", 65534, ErrNotRoot},
		{"a link to slash, not root", slash, 1000, ErrNotRoot},
		{"this machine, root", "", 0, nil},
		{"another tree, not root", tmp, 1000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckRoot(tt.root, tt.uid)
			if !errors.Is(err, tt.want) {
				t.Errorf("CheckRoot(%q, %d) = %v, want %v", tt.root, tt.uid, err, tt.want)
			}
			var e *Error
			if err != nil && (!errors.As(err, &e) || !strings.Contains(e.Hint(), "--root")) {
				t.Errorf("CheckRoot: %v has no hint naming --root", err)
			}
		})
	}
}

// TestRefusals: each refusal changes nothing.
func TestRefusals(t *testing.T) {
	t.Parallel()
	bin := undoshBinary(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, root string) Options
		want  string
	}{
		{"no undosh binary", func(t *testing.T, root string) Options {
			return Options{Undosh: filepath.Join(root, "nope")}
		}, "no such file"},
		{"undosh is not undosh", func(t *testing.T, root string) Options {
			return Options{Undosh: filepath.Join(root, "bin/bash")}
		}, "is not undosh: not a Go program"},
		{"no bash", func(t *testing.T, root string) Options {
			os.Remove(filepath.Join(root, "bin/bash"))
			return Options{Undosh: bin}
		}, "no bash in"},
		{"two different bash files", func(t *testing.T, root string) Options {
			write(t, filepath.Join(root, "usr/bin/bash"), []byte("another bash"), 0o755)
			return Options{Undosh: bin}
		}, "two different files"},
		{"no such user", func(t *testing.T, root string) Options {
			return Options{Undosh: bin, User: "ghost"}
		}, "no user ghost in /etc/passwd"},
		{"leftover real bash", func(t *testing.T, root string) Options {
			write(t, filepath.Join(root, "usr/lib/undosh/real/bash"), []byte("old"), 0o755)
			return Options{Undosh: bin}
		}, "/usr/lib/undosh/real/bash exists, but there is no install record"},
		{"bash is undosh already", func(t *testing.T, root string) Options {
			os.Remove(filepath.Join(root, "bin/bash"))
			symlink(t, Binary, filepath.Join(root, "bin/bash"))
			return Options{Undosh: bin}
		}, "is undosh already, but there is no install record"},
		{"bash is the front end already", func(t *testing.T, root string) Options {
			os.Remove(filepath.Join(root, "bin/bash"))
			symlink(t, FastBinary, filepath.Join(root, "bin/bash"))
			return Options{Undosh: bin}
		}, "is undosh already, but there is no install record"},
		{"the front end is bash", func(t *testing.T, root string) Options {
			return Options{Undosh: bin, Fast: filepath.Join(root, "bin/bash")}
		}, "is not undosh-fast: it does not start undosh-classifier"},
		{"the front end is undosh", func(t *testing.T, root string) Options {
			return Options{Undosh: bin, Fast: bin}
		}, "is not undosh-fast: it is the Go program github.com/undosh/undosh/cmd/undosh"},
		{"a front end and none", func(t *testing.T, root string) Options {
			return Options{Undosh: bin, Fast: bin, NoFast: true}
		}, "a front end to install and none at once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := makeRoot(t, layout{})
			o := tt.setup(t, root)
			o.Root = root
			before := snapshot(t, root)
			_, err := Install(o)
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(e.Msg, tt.want) || e.Hint() == "" {
				t.Fatalf("Install = %v, want an *Error with a hint saying %q", err, tt.want)
			}
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("a refused install changed the root:\n%s", diff)
			}
		})
	}
}

// TestCutShort: an install that fails half-way is refused by the next
// install and undone in full by uninstall.
func TestCutShort(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true})
	// /etc/shells as a directory: the run fails after bash is taken over.
	os.Remove(filepath.Join(root, "etc/shells"))
	if err := os.Mkdir(filepath.Join(root, "etc/shells"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	o := Options{Root: root, Undosh: undoshBinary(t), User: "agent"}
	if _, err := Install(o); err == nil {
		t.Fatal("Install succeeded with /etc/shells a directory")
	}
	r := mustRoot(t, root)
	if !r.isUndosh("/bin/bash") {
		t.Fatal("the failing install did not get as far as bash")
	}
	_, err := Install(o)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "cut short") {
		t.Fatalf("Install after a failed one = %v, want a refusal", err)
	}
	if _, err := Uninstall(o); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("uninstall after a failed install (-before +after):\n%s", diff)
	}
}

// TestUndoTakeover: undoing a takeover copes with each state a run cut
// short can leave.
func TestUndoTakeover(t *testing.T) {
	t.Parallel()
	const bash = "the real bash"
	tests := []struct {
		name    string
		setup   func(t *testing.T, path, real string)
		wantErr bool
	}{
		{"never moved", func(t *testing.T, path, real string) {
			write(t, path, []byte(bash), 0o755)
		}, false},
		{"linked, not replaced", func(t *testing.T, path, real string) {
			write(t, path, []byte(bash), 0o755)
			if err := os.Link(path, real); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"replaced by the link to undosh", func(t *testing.T, path, real string) {
			write(t, real, []byte(bash), 0o755)
			symlink(t, Binary, path)
		}, false},
		{"name missing", func(t *testing.T, path, real string) {
			write(t, real, []byte(bash), 0o755)
		}, false},
		{"replaced by something else", func(t *testing.T, path, real string) {
			write(t, real, []byte(bash), 0o755)
			write(t, path, []byte("a newer bash"), 0o755)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			r := mustRoot(t, root)
			if err := os.MkdirAll(r.host(RealDir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(r.host("/bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, r.host("/bin/bash"), r.host(RealBash))
			in := &installer{r: r, log: &bytes.Buffer{}}
			a := Action{Op: opTakeover, Path: "/bin/bash", Target: RealBash, Shell: "bash"}
			err := in.undo(a)
			if tt.wantErr {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("undo = %v, want a refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("undo: %v", err)
			}
			if got := readFile(t, r.host("/bin/bash")); got != bash {
				t.Errorf("/bin/bash = %q, want the real bash", got)
			}
			if _, err := os.Lstat(r.host(RealBash)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there: %v", RealBash, err)
			}
			// Undoing twice is harmless.
			if err := in.undo(a); err != nil {
				t.Errorf("second undo: %v", err)
			}
		})
	}
}

func TestResolveStaysInRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	symlink(t, "/usr/bin", filepath.Join(root, "bin"))
	symlink(t, "../../../../../../etc", filepath.Join(root, "usr/bin/up"))
	symlink(t, "/etc/passwd", filepath.Join(root, "usr/bin/pw"))
	r := mustRoot(t, root)
	tests := []struct {
		in     string
		follow bool
		want   string
	}{
		{"/bin/bash", false, "/usr/bin/bash"},
		{"/bin", true, "/usr/bin"},
		{"/bin", false, "/bin"},
		{"/../../etc/passwd", false, "/etc/passwd"},
		{"/bin/up/passwd", false, "/etc/passwd"},
		{"/bin/pw", true, "/etc/passwd"},
		{"/bin/pw", false, "/usr/bin/pw"},
		{"/bin/missing/x", true, "/usr/bin/missing/x"},
	}
	for _, tt := range tests {
		got, err := r.resolve(tt.in, tt.follow)
		if err != nil || got != tt.want {
			t.Errorf("resolve(%q, %v) = %q, %v; want %q", tt.in, tt.follow, got, err, tt.want)
		}
	}
	symlink(t, "loop", filepath.Join(root, "loop"))
	if _, err := r.resolve("/loop", true); err == nil {
		t.Error("resolve of a link loop succeeded")
	}
}

func TestSetShell(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"middle", "a:x:1:1::/a:/bin/sh\nagent:x:2:2::/h:/bin/sh\nb:x:3:3::/b:/bin/sh\n", "a:x:1:1::/a:/bin/sh\nagent:x:2:2::/h:/bin/bash\nb:x:3:3::/b:/bin/sh\n"},
		{"last line without newline", "# c\nagent:x:2:2::/h:/bin/sh", "# c\nagent:x:2:2::/h:/bin/bash"},
		{"empty shell", "agent:x:2:2::/h:\n", "agent:x:2:2::/h:/bin/bash\n"},
		{"prefix of another name", "agent2:x:2:2::/h:/bin/sh\nagent:x:3:3::/h:/bin/zsh\n", "agent2:x:2:2::/h:/bin/sh\nagent:x:3:3::/h:/bin/bash\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			write(t, filepath.Join(root, "etc/passwd"), []byte(tt.in), 0o640)
			r := mustRoot(t, root)
			old, err := r.setShell("agent", "/bin/bash", "")
			if err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(root, "etc/passwd")); got != tt.want {
				t.Errorf("passwd = %q, want %q", got, tt.want)
			}
			if st, _ := os.Stat(filepath.Join(root, "etc/passwd")); st.Mode() != 0o640 {
				t.Errorf("mode = %v, want 0640", st.Mode())
			}
			if _, err := r.setShell("agent", old, "/bin/bash"); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, filepath.Join(root, "etc/passwd")); got != tt.in {
				t.Errorf("passwd after restoring = %q, want %q", got, tt.in)
			}
		})
	}
}

func TestLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   *string // nil: no file
	}{
		{"ends with newline", ptr("/bin/sh\n")},
		{"no final newline", ptr("/bin/sh")},
		{"empty", ptr("")},
		{"no file", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			name := filepath.Join(root, "etc/shells")
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			a := Action{Op: opLine, Path: ShellsFile, Target: "/bin/bash"}
			if tt.in != nil {
				write(t, name, []byte(*tt.in), 0o644)
				a.Existed = true
				a.Newline = *tt.in != "" && !strings.HasSuffix(*tt.in, "\n")
			}
			r := mustRoot(t, root)
			if err := r.appendLine(a); err != nil {
				t.Fatal(err)
			}
			if ok, _ := r.hasLine(ShellsFile, "/bin/bash"); !ok {
				t.Fatal("line not added")
			}
			if err := r.removeLine(a); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(name)
			switch {
			case tt.in == nil && !errors.Is(err, os.ErrNotExist):
				t.Errorf("file left behind: %q, %v", data, err)
			case tt.in != nil && string(data) != *tt.in:
				t.Errorf("after remove = %q, want %q", data, *tt.in)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestDoctor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policy   string // "" for none
		problems []string
		outcome  string // of the machine-changing command
		// byEngine: where the local fork engine runs (root, overlayfs),
		// the outcome is a copy of the machine instead.
		byEngine bool
	}{
		{"not installed", "", []string{"undosh is not installed: /bin/bash is a file of"}, "refused: no sandbox host", true},
		{"broken policy", "version: 1\nhost:\n  fallback: fork\n",
			[]string{"undosh is not installed", `policy.yaml:3:13: host.fallback must be git, deny or auto, not "fork"`}, "refused: the policy does not load", false},
		{"fallback git", "version: 1\nhost:\n  fallback: git\n", []string{"undosh is not installed"}, "workspace checkpoint only", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := makeRoot(t, layout{merged: true})
			if tt.policy != "" {
				write(t, filepath.Join(root, "etc/undosh/policy.yaml"), []byte(tt.policy), 0o644)
			}
			stateDir := filepath.Join(root, "var/lib/undosh")
			write(t, filepath.Join(stateDir, "journal.jsonl"), []byte("{}\n{}\n{\"torn"), 0o600)
			rep, err := Doctor(DoctorOptions{Root: root, UID: 0})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) != len(tt.problems) {
				t.Fatalf("problems = %+v, want %d", rep.Problems, len(tt.problems))
			}
			for i, want := range tt.problems {
				if p := rep.Problems[i]; !strings.Contains(p.What, want) || p.Fix == "" {
					t.Errorf("problem %d = %+v, want it to say %q, with a fix", i, p, want)
				}
			}
			want := tt.outcome
			if tt.byEngine && fork.Probe() == nil {
				want = "runs in a copy of this machine"
			}
			if got := rep.Examples[1]; !strings.Contains(got.Outcome, want) {
				t.Errorf("machine change: %+v, want %q", got, want)
			}
			if tt.policy == "" && rep.Examples[0].Class != "git" {
				t.Errorf("file change: %+v, want class git", rep.Examples[0])
			}
			if rep.State.Dir != stateDir || rep.State.Steps != 2 || !rep.State.Exists || !rep.State.Writable {
				t.Errorf("state = %+v, want %s with 2 journal steps", rep.State, stateDir)
			}
			if rep.Login == nil || rep.Login.Name != "root" || rep.LoginIsUndosh {
				t.Errorf("login = %+v (undosh %v), want root, not undosh", rep.Login, rep.LoginIsUndosh)
			}
		})
	}
}

// TestDoctorAfterDrift: doctor notices a bash upgrade that went around
// the diversion and an sh put back by dash.
func TestDoctorAfterDrift(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true})
	if _, err := Install(Options{Root: root, Undosh: undoshBinary(t), Sh: true}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, "usr/bin/bash"))
	write(t, filepath.Join(root, "usr/bin/bash"), hostFile(t, "bash"), 0o755)
	os.Remove(filepath.Join(root, "usr/bin/sh"))
	symlink(t, "dash", filepath.Join(root, "usr/bin/sh"))
	rep, err := Doctor(DoctorOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.What)
	}
	want := []string{
		"/bin/bash is not undosh (a file of",
		"/usr/bin/bash is not undosh (a file of",
		"/bin/sh is not undosh (a link to dash): sh scripts are not protected",
		"/usr/bin/sh is not undosh (a link to dash)",
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want %q…", i, got[i], want[i])
		}
	}
	_, err = Install(Options{Root: root, Undosh: undoshBinary(t)})
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "is not undosh any more") {
		t.Errorf("Install over drift = %v, want a refusal", err)
	}
}

// The install package names files other packages read or write.
func TestSharedNames(t *testing.T) {
	t.Parallel()
	if ConfigFile != shell.ConfigFile {
		t.Errorf("ConfigFile = %s, shell reads %s", ConfigFile, shell.ConfigFile)
	}
	// Installed front ends start the server by this name, and scripts read
	// doctor's JSON by this key: both keep the server's old name
	// (docs/front.md §1).
	if state.ServerName != "undosh-classifier" {
		t.Errorf("state.ServerName = %s: every installed undosh-fast starts undosh-classifier", state.ServerName)
	}
	if f, ok := reflect.TypeFor[Report]().FieldByName("Server"); !ok || f.Tag.Get("json") != "classifier" {
		t.Errorf("doctor's JSON key for the server is %q, want \"classifier\"", f.Tag.Get("json"))
	}
	if got, want := state.SocketPath("/s"), "/s/run/classify.sock"; got != want {
		t.Errorf("the front end's server listens at %s; doctor asks %s", got, want)
	}
	j, err := journal.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(j.Path()) != "journal.jsonl" {
		t.Errorf("the journal is %s; doctor counts steps in journal.jsonl", j.Path())
	}
}

// leadsTo checks that every shell path there is in the root resolves to
// want.
func leadsTo(t *testing.T, r fsRoot, want string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := r.lstat(p); err != nil {
			continue
		}
		if got, err := r.resolve(p, true); err != nil || got != want {
			t.Errorf("%s leads to %s (%v), want %s", p, got, err, want)
		}
	}
}

func sha(t *testing.T, name string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(readFile(t, name)))
	return hex.EncodeToString(sum[:])
}

// TestInstallFast installs the front end, installs again, switches it off
// and on, and uninstalls: the root is as it was, byte for byte.
func TestInstallFast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		l    layout
		sh   bool
	}{
		{"usrmerge, plain", layout{merged: true}, false},
		{"usrmerge, dpkg, sh", layout{merged: true, dpkg: true}, true},
		{"split /bin, plain, sh", layout{}, true},
		{"split /bin, sh is bash", layout{shToBash: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bin, fast := undoshBinary(t), fastBinary(t)
			root := makeRoot(t, tt.l)
			r := mustRoot(t, root)
			before := snapshot(t, root)
			shells := BashPaths
			if tt.sh {
				shells = append(append([]string{}, BashPaths...), ShPaths...)
			}
			var log bytes.Buffer
			on := Options{Root: root, Undosh: bin, Fast: fast, Sh: tt.sh, Log: &log}
			off := Options{Root: root, Undosh: bin, NoFast: true, Sh: tt.sh, Log: &log}
			keep := Options{Root: root, Undosh: bin, Sh: tt.sh, Log: &log}
			install := func(o Options, changed bool) {
				t.Helper()
				snap := snapshot(t, root)
				log.Reset()
				res, err := Install(o)
				if err != nil {
					t.Fatalf("Install: %v\n%s", err, log.String())
				}
				if res.Changed != changed {
					t.Errorf("Install changed %v, want %v; log:\n%s", res.Changed, changed, log.String())
				}
				if !changed {
					if diff := cmp.Diff(snap, snapshot(t, root)); diff != "" {
						t.Errorf("an install with nothing to do changed the root (-before +after):\n%s", diff)
					}
				}
			}
			doctor := func(fast bool) {
				t.Helper()
				rep, err := Doctor(DoctorOptions{Root: root})
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Problems) > 0 {
					t.Errorf("doctor: %+v", rep.Problems)
				}
				if want := (FastInfo{Path: FastBinary, Installed: fast, Present: fast, OK: fast}); rep.Fast != want {
					t.Errorf("doctor: front end %+v, want %+v", rep.Fast, want)
				}
				for _, p := range rep.Paths {
					if strings.HasSuffix(p.Path, "/bash") && (!p.Undosh || p.Fast != fast) {
						t.Errorf("doctor: %+v, want undosh, through the front end: %v", p, fast)
					}
				}
				if rep.Real[0].Path != RealBash {
					t.Errorf("doctor: real bash %+v, want %s", rep.Real[0], RealBash)
				}
			}

			install(on, true)
			leadsTo(t, r, FastBinary, shells...)
			if readFile(t, r.host(FastBinary)) != readFile(t, fast) {
				t.Errorf("%s is not the front end given", FastBinary)
			}
			if st, err := os.Lstat(r.host(FastBinary)); err != nil || st.Mode() != 0o755 {
				t.Errorf("%s: %v, want a 0755 file", FastBinary, err)
			}
			if rec, err := LoadRecord(root); err != nil || rec.Fast != sha(t, fast) || !rec.Complete {
				t.Errorf("record: %+v, %v; want the front end's sha256 %s", rec, err, sha(t, fast))
			}
			doctor(true)
			install(on, false)
			install(keep, false)

			install(off, true)
			leadsTo(t, r, Binary, shells...)
			if _, err := os.Lstat(r.host(FastBinary)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there after --no-fast: %v", FastBinary, err)
			}
			if rec, err := LoadRecord(root); err != nil || rec.Fast != "" || rec.hasFast() || !rec.Complete {
				t.Errorf("record after --no-fast: %+v, %v; want no front end", rec, err)
			}
			doctor(false)
			install(off, false)
			install(keep, false)

			install(on, true)
			leadsTo(t, r, FastBinary, shells...)
			doctor(true)

			log.Reset()
			if _, err := Uninstall(on); err != nil {
				t.Fatalf("Uninstall: %v\n%s", err, log.String())
			}
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("uninstall left the root different (-before +after):\n%s\nlog:\n%s", diff, log.String())
			}
		})
	}
}

// TestInstallFastLater: the front end added to an install made without
// it comes after the shells in the record; uninstall points the shells
// back at undosh before it removes it.
func TestInstallFastLater(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true})
	before := snapshot(t, root)
	o := Options{Root: root, Undosh: undoshBinary(t), Sh: true}
	if _, err := Install(o); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	o.Fast, o.Log = fastBinary(t), &log
	res, err := Install(o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Already || !res.Changed {
		t.Errorf("Install = %+v, want already installed, changed", res)
	}
	want := "installed undosh-fast at /usr/lib/undosh/undosh-fast\n" +
		"/bin/bash -> /usr/lib/undosh/undosh-fast (was /usr/lib/undosh/undosh)\n" +
		"/bin/sh -> /usr/lib/undosh/undosh-fast (was /usr/lib/undosh/undosh)\n"
	if diff := cmp.Diff(want, log.String()); diff != "" {
		t.Errorf("adding the front end (-want +got):\n%s", diff)
	}
	log.Reset()
	if _, err := Uninstall(o); err != nil {
		t.Fatal(err)
	}
	first := "/bin/bash -> /usr/lib/undosh/undosh (was /usr/lib/undosh/undosh-fast)\n" +
		"/bin/sh -> /usr/lib/undosh/undosh (was /usr/lib/undosh/undosh-fast)\n" +
		"removed /usr/lib/undosh/undosh-fast\n"
	if !strings.HasPrefix(log.String(), first) {
		t.Errorf("uninstall began:\n%s\nwant\n%s", log.String(), first)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("uninstall (-before +after):\n%s", diff)
	}
}

// TestFastRuns runs the installed front end, as itself and as bash: it
// hands the step to the installed undosh, which runs the moved bash.
func TestFastRuns(t *testing.T) {
	t.Parallel()
	root := makeRoot(t, layout{merged: true})
	if _, err := Install(Options{Root: root, Undosh: undoshBinary(t), Fast: fastBinary(t)}); err != nil {
		t.Fatal(err)
	}
	r := mustRoot(t, root)
	want, err := exec.Command(r.host(RealBash), "-c", "echo $BASH_VERSION").Output()
	if err != nil || len(want) < 7 {
		t.Fatalf("the moved bash does not run: %q, %v", want, err)
	}
	// The root's /usr/bin/bash is an absolute link, which leads out of
	// the root here: a link elsewhere stands in for it. undosh-fast
	// finds undosh next to the file it is, not to its name.
	bash := filepath.Join(t.TempDir(), "bash")
	if err := os.Symlink(r.host(FastBinary), bash); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{r.host(FastBinary), bash} {
		stateDir := t.TempDir()
		cmd := exec.Command(p, "-c", "echo $BASH_VERSION")
		cmd.Dir = t.TempDir()
		// UNDOSH_NO_CLASSIFIER: every step goes to undosh, and no
		// server is started to outlive the test.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "UNDOSH_STATE_DIR=" + stateDir,
			"UNDOSH_REAL_BASH=" + r.host(RealBash), "UNDOSH_NO_CLASSIFIER=1"}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s -c: %v\n%s", p, err, stderr.String())
		}
		if string(got) != string(want) || stderr.Len() > 0 {
			t.Errorf("%s -c 'echo $BASH_VERSION' = %q, stderr %q; want %q", p, got, stderr.String(), want)
		}
		if _, err := os.Stat(filepath.Join(stateDir, "run", "classify.pid")); err == nil {
			t.Errorf("%s started a server despite UNDOSH_NO_CLASSIFIER", p)
		}
	}
}

func TestReadFastFile(t *testing.T) {
	t.Parallel()
	fast := fastBinary(t)
	data := []byte(readFile(t, fast))
	dir := t.TempDir()
	write(t, filepath.Join(dir, "bash"), hostFile(t, "bash"), 0o755)
	write(t, filepath.Join(dir, "script"), []byte("#!/bin/sh\nexec undosh-classifier\x00\n"), 0o755)
	write(t, filepath.Join(dir, "truncated"), data[:200], 0o755)
	write(t, filepath.Join(dir, "big"), append(append([]byte{}, data...), make([]byte, maxFast)...), 0o755)
	tests := []struct {
		name, path string
		want       string // "" for undosh-fast
	}{
		{"undosh-fast", fast, ""},
		{"bash", filepath.Join(dir, "bash"), "it does not start undosh-classifier"},
		{"undosh", undoshBinary(t), "it is the Go program github.com/undosh/undosh/cmd/undosh"},
		{"a script naming the server", filepath.Join(dir, "script"), "not an ELF program"},
		{"truncated", filepath.Join(dir, "truncated"), "not an ELF program"},
		{"too big", filepath.Join(dir, "big"), "it is over 4 MB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := readFastFile(tt.path)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("readFastFile = %v, want undosh-fast", err)
			case tt.want != "" && (!errors.As(err, new(*notFastError)) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("readFastFile = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := readFast(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("readFast of a missing file = %v", err)
	}
	write(t, filepath.Join(dir, "plain"), data, 0o644)
	if _, err := readFast(filepath.Join(dir, "plain")); err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("readFast of a file without x bits = %v", err)
	}
}

// TestDoctorFast: doctor notices a front end that is gone or replaced,
// and never takes one for the real bash.
func TestDoctorFast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, r fsRoot)
		want  []string
	}{
		{"healthy", func(t *testing.T, r fsRoot) {}, nil},
		{"front end missing", func(t *testing.T, r fsRoot) {
			os.Remove(r.host(FastBinary))
		}, []string{"/usr/lib/undosh/undosh-fast is missing: bash leads to nothing"}},
		{"front end replaced", func(t *testing.T, r fsRoot) {
			write(t, r.host(FastBinary), []byte("#!/bin/sh\n"), 0o755)
		}, []string{"/usr/lib/undosh/undosh-fast is not undosh-fast"}},
		{"copy as real bash", func(t *testing.T, r fsRoot) {
			write(t, r.host("/opt/fast"), []byte(readFile(t, r.host(FastBinary))), 0o755)
			write(t, r.host(ConfigFile), []byte("bash=/opt/fast\n"), 0o644)
		}, nil},
		{"deep state", func(t *testing.T, r fsRoot) {
			if err := os.MkdirAll(r.host("/var/lib/undosh/"+strings.Repeat("d", 100)), 0o755); err != nil {
				t.Fatal(err)
			}
		}, []string{"the server's socket "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := makeRoot(t, layout{merged: true})
			if _, err := Install(Options{Root: root, Undosh: undoshBinary(t), Fast: fastBinary(t)}); err != nil {
				t.Fatal(err)
			}
			r := mustRoot(t, root)
			tt.setup(t, r)
			o := DoctorOptions{Root: root}
			if deep := r.host("/var/lib/undosh/" + strings.Repeat("d", 100)); isDir(deep) {
				o.State = deep
			}
			rep, err := Doctor(o)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range rep.Problems {
				got = append(got, p.What)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(tt.want))
			}
			for i := range tt.want {
				if !strings.HasPrefix(got[i], tt.want[i]) || rep.Problems[i].Fix == "" {
					t.Errorf("problem %d = %+v, want %q…, with a fix", i, rep.Problems[i], tt.want[i])
				}
			}
			if rep.Real[0].Path != RealBash {
				t.Errorf("real bash %+v, want %s", rep.Real[0], RealBash)
			}
		})
	}
}

// TestDoctorServer: doctor says whether the front end's server serves the
// state directory, and never starts one.
func TestDoctorServer(t *testing.T) {
	t.Parallel()
	bin := undoshBinary(t)
	root := makeRoot(t, layout{merged: true})
	stateDir := filepath.Join(t.TempDir(), "state")
	sock := filepath.Join(stateDir, "run", "classify.sock")
	o := DoctorOptions{Root: root, State: stateDir}
	rep, err := Doctor(o)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ServerInfo{Socket: sock}); !reflect.DeepEqual(rep.Server, want) {
		t.Errorf("server = %+v, want %+v", rep.Server, want)
	}
	if _, err := os.Lstat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("doctor made the state directory: %v", err)
	}

	cmd := exec.Command(bin)
	cmd.Args[0] = state.ServerName
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "UNDOSH_STATE_DIR=" + stateDir, "UNDOSH_CLASSIFIER_IDLE=1m"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The server writes its pid file after it listens.
	pidFile := filepath.Join(stateDir, "run", "classify.pid")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not start")
		}
	}
	rep, err = Doctor(o)
	if err != nil {
		t.Fatal(err)
	}
	want := ServerInfo{Socket: sock, Running: true, PID: cmd.Process.Pid}
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		want.MaxUserWatches, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if !reflect.DeepEqual(rep.Server, want) {
		t.Errorf("server = %+v, want %+v", rep.Server, want)
	}

	// Something else listening there is not a server.
	other := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(other, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(other, "run", "classify.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	write(t, filepath.Join(other, "run", "classify.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	rep, err = Doctor(DoctorOptions{Root: root, State: other})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Server.Running {
		t.Errorf("server = %+v, want not running", rep.Server)
	}
}

func isDir(name string) bool {
	st, err := os.Stat(name)
	return err == nil && st.IsDir()
}

// TestPingRequest: doctor's ping is a request the server decodes,
// in its current wire format.
func TestPingRequest(t *testing.T) {
	if !strings.HasPrefix(pingRequest, front.RequestMagic) {
		t.Errorf("pingRequest starts %q, want the front end's magic %q", pingRequest[:8], front.RequestMagic)
	}
	if n := binary.LittleEndian.Uint32([]byte(pingRequest[8:12])); int(n) != len(pingRequest)-12 {
		t.Errorf("pingRequest says %d payload bytes, has %d", n, len(pingRequest)-12)
	}
}
