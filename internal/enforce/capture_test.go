package enforce

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// needCapture skips unless this process can build a view (root with
// overlayfs).
func needCapture(t testing.TB) {
	t.Helper()
	needMode(t, Capture)
	data, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(data), "\toverlay\n") {
		t.Skip("no overlayfs in /proc/filesystems")
	}
}

// testView makes a view of the machine's root filesystem on a private
// tmpfs, as the shell does with the fork engine's layers: / is the only
// layer (the tests' files live on it), and every other mount is shown as
// it is.
func testView(t *testing.T, shared ...string) (*View, string) {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("undosh-test", dir, "tmpfs", unix.MS_NODEV, "mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	for _, d := range []string{"root", "upper", "work"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var machine []string
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	rootDev := ""
	for _, line := range strings.Split(strings.TrimSpace(string(info)), "\n") {
		f := strings.Fields(line)
		if f[4] == "/" {
			rootDev = f[2]
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(info)), "\n") {
		f := strings.Fields(line)
		if mp := f[4]; mp != "/" && f[2] != rootDev && !strings.HasPrefix(mp, dir) {
			machine = append(machine, mp)
		}
	}
	return &View{
		Root:    filepath.Join(dir, "root"),
		Layers:  []Layer{{Mount: "/", Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work")}},
		Machine: machine,
		Shared:  shared,
	}, filepath.Join(dir, "upper")
}

// TestCapture checks that a step in a view writes its shared paths for
// real, and that what it writes elsewhere lands in the upper directory
// and nowhere on the machine.
func TestCapture(t *testing.T) {
	needCapture(t)
	ws := workspace(t)
	outside := workspace(t) // on the root filesystem, not shared
	if err := os.WriteFile(filepath.Join(outside, "old"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A server's socket on a layer: reachable only through a bind.
	sock := filepath.Join(outside, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	view, upper := testView(t, ws, "/tmp")
	view.Files = []string{sock}
	r := step(t, Plan{Class: "git", Mode: Capture, View: view}, `
		cd "$WS" && echo ok > f && pwd
		echo new > "$OUT/new"; echo changed >> "$OUT/old"; rm -f "$OUT/gone"; chmod 600 "$OUT/old"
		cat "$OUT/old"
		echo tmp > "$SCRATCH/t" && echo scratch ok
		echo x > /dev/null && echo null ok
		echo 1 > /proc/self/oom_score_adj && echo proc ok
		echo 1 > /proc/sys/kernel/panic_on_oops 2>/dev/null || echo sysctl blocked
		touch /sys/x 2>/dev/null || echo sys blocked
		python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(6).decode(), end="")' "$OUT/s.sock"
		readlink /proc/self/ns/mnt`,
		[]string{"WS=" + ws, "OUT=" + outside, "SCRATCH=" + t.TempDir()}, nil)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{ws + "\n", "old\nchanged\n", "scratch ok", "null ok", "proc ok", "sysctl blocked", "sys blocked", "hello\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q lacks %q (stderr %q)", r.stdout, want, r.stderr)
		}
	}
	if host, _ := os.Readlink("/proc/self/ns/mnt"); strings.Contains(r.stdout, host) {
		t.Errorf("the step ran in the machine's mount namespace")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(b) != "ok\n" {
		t.Errorf("shared write: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Errorf("the step created a file on the machine outside its shared paths")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "old")); string(b) != "old\n" {
		t.Errorf("the step changed a file of the machine: %q", b)
	}
	// What it wrote outside is in the upper directory, under the path
	// the step used.
	if b, err := os.ReadFile(filepath.Join(upper, outside, "new")); err != nil || string(b) != "new\n" {
		t.Errorf("upper: new = %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(upper, outside, "old")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("upper: old = %v, %v; want mode 0600", st, err)
	}
	if _, err := os.Stat(filepath.Join(upper, ws)); err == nil {
		t.Errorf("the shared workspace shows in the upper directory")
	}
}

// TestCaptureChildren checks that the view holds the step's children
// and a process that outlives the step, and that the machine's mount
// table is as it was.
func TestCaptureChildren(t *testing.T) {
	needCapture(t)
	outside := workspace(t)
	view, upper := testView(t)
	// Only the test's own mounts: other tests mount copies meanwhile.
	mine := func() string {
		data, _ := os.ReadFile("/proc/self/mountinfo")
		var out []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, filepath.Dir(view.Root)) || strings.Contains(l, outside) {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	before := mine()
	r := step(t, Plan{Class: "none", Mode: Capture, View: view}, `
		/bin/sh -c 'echo child > "$OUT/c"' && echo child ok
		(sleep 0.2; echo late > "$OUT/late") &
		wait`, []string{"OUT=" + outside}, nil)
	if r.code != 0 || !strings.Contains(r.stdout, "child ok") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	for _, n := range []string{"c", "late"} {
		if _, err := os.Stat(filepath.Join(outside, n)); err == nil {
			t.Errorf("%s reached the machine", n)
		}
		if _, err := os.Stat(filepath.Join(upper, outside, n)); err != nil {
			t.Errorf("%s is not in the upper directory: %v", n, err)
		}
	}
	if after := mine(); before != after {
		t.Errorf("the machine's mount table changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// FuzzPlan checks that limit.c reads back what encode writes, field by
// field, and reads anything else without crashing.
func FuzzPlan(f *testing.F) {
	f.Add("git", "/bin/bash", "/w s", "/tmp", "/v", "/", true, false)
	f.Add("none", "/usr/bin/bash", "/a\nb", "/c:d,e\\f", "/root/x", "/home", false, true)
	f.Fuzz(func(t *testing.T, class, shell, a, b, root, layer string, capture, ro bool) {
		// ro, without a view: b is held as well as writable.
		p := Plan{Class: class, Shell: shell, Writable: []string{a, b}}
		if ro {
			p.Held = []string{b}
		}
		if capture {
			p = Plan{Class: class, Shell: shell, Mode: Capture, View: &View{
				Root:    root,
				Layers:  []Layer{{Mount: "/", Upper: a, Work: b}, {Mount: layer, Upper: b, Work: a, ReadOnly: ro}},
				Machine: []string{layer},
				Shared:  []string{a},
				Files:   []string{b},
				Hidden:  []string{root},
			}}
		}
		enc, err := p.encode(shell)
		if err != nil {
			return
		}
		mode, gotClass, fields, err := decodePlan(enc)
		if err != nil {
			t.Fatalf("decode %q: %v", enc, err)
		}
		if mode != p.Mode || gotClass != class {
			t.Errorf("mode %v class %q, want %v %q", mode, gotClass, p.Mode, class)
		}
		want := []string{"s" + shell, "w" + a, "w" + b}
		if ro {
			want = append(want, "x"+b)
		}
		if capture {
			lt := "o"
			if ro {
				lt = "O"
			}
			want = []string{"s" + shell, "r" + root, "o/", "u" + a, "k" + b, lt + layer, "u" + b, "k" + a,
				"b/proc", "b/dev", "b/run", "b/sys"}
			if layer != "/proc" && layer != "/dev" && layer != "/run" && layer != "/sys" {
				want = append(want, "b"+layer)
			}
			want = append(want, "w"+a, "B"+b, "E"+root, "b/proc/sys", "R/proc/sys", "R/sys", "P/dev")
		}
		if strings.Join(fields, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("fields %q, want %q", fields, want)
		}
	})
}

// FuzzDecodePlan checks that limit.c's reader takes any bytes without
// crashing, and keeps only absolute paths.
func FuzzDecodePlan(f *testing.F) {
	for _, s := range []string{
		"2 auto git s9:/bin/bash w4:/tmp",
		"2 capture none s9:/bin/bash r2:/v o1:/ u2:/u k2:/k b5:/proc w4:/tmp B2:/s R4:/sys P4:/dev",
		"2 ns none s9:/bin/bash w99999999999999999999:/",
		"2 capture git s1:/ r2:/v u2:/u",
		"2 ns none s9:/bin/bash w4:/tmp x6:/tmp/w",
		"2 landlock none s9:/bin/bash w4:/tmp x6:/tmp/w",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return // a C string ends there
		}
		_, _, fields, err := decodePlan(s)
		if err != nil {
			return
		}
		for _, fl := range fields {
			if len(fl) < 2 || fl[1] != '/' {
				t.Errorf("field %q of %q is not an absolute path", fl, s)
			}
		}
	})
}

// A layer whose mount the machine dropped, directory and all, after the
// view was planned (another process's temporary mount) does not stop the
// step: there is nothing left to hold there.
func TestCaptureMountGone(t *testing.T) {
	needCapture(t)
	view, _ := testView(t)
	extra := t.TempDir()
	for _, d := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(extra, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	gone := filepath.Join(t.TempDir(), "was-a-mount")
	view.Layers = append(view.Layers, Layer{Mount: gone, Upper: filepath.Join(extra, "upper"), Work: filepath.Join(extra, "work")})
	r := step(t, Plan{Class: "none", Mode: Capture, View: view}, `echo ran`, nil, nil)
	if r.code != 0 || !strings.Contains(r.stdout, "ran") {
		t.Fatalf("a step whose view lists a mount that is gone: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A mount of the machine that ends between the plan and the step (another
// step's copy, say) is left out of the view, with its read-only mark: the
// step runs, and the rest of the view is as writable as before.
func TestCaptureMachineMountGone(t *testing.T) {
	needCapture(t)
	ws := workspace(t)
	view, upper := testView(t, ws, "/tmp")
	gone := "/undosh-gone-" + strconv.Itoa(os.Getpid())
	if _, err := os.Lstat(gone); err == nil {
		t.Fatalf("%s exists", gone)
	}
	view.Machine = append(view.Machine, gone)
	r := step(t, Plan{Class: "git", Mode: Capture, View: view}, `cd "$WS" && echo ok > f && echo elsewhere > /var/tmp/undosh-gone-test && cat f`,
		[]string{"WS=" + ws}, nil)
	if r.code != 0 || r.stdout != "ok\n" {
		t.Fatalf("with a machine mount gone: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(upper, "var/tmp/undosh-gone-test")); err != nil {
		t.Errorf("the write outside the workspace did not land in the upper directory: %v", err)
	}
}
