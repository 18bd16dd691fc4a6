package enforce

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	creackpty "github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// The tests run steps through the test binary itself: it links this
// package, so its constructor takes over when it is started as Name.

const etcProbe = "/etc/undosh-enforce-test"

var modes = []Mode{MountNS, Landlock}

func self(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// needMode skips unless this process can enforce with m.
func needMode(t testing.TB, m Mode) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("enforcement tests run as root (they check that root cannot write outside the plan)")
	}
	if _, err := Probe(m); err != nil {
		t.Skipf("%v is not available here: %v", m, err)
	}
}

// needAny skips unless some mechanism works in this process, as any
// user.
func needAny(t testing.TB) {
	t.Helper()
	if _, err := Probe(Auto); err != nil {
		t.Skipf("no enforcement here: %v", err)
	}
}

// workspace makes a directory outside /tmp (the scratch path of the
// plans below), removed after the test.
func workspace(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "undosh-enforce-ws-")
	if err != nil {
		t.Skipf("no /var/tmp for a workspace outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type result struct {
	stdout, stderr string
	code           int
}

// step runs script with /bin/bash -c under plan; setup may adjust the
// command (fds, directory) before it starts.
func step(t testing.TB, plan Plan, script string, env []string, setup func(*exec.Cmd)) result {
	t.Helper()
	path, argv, env, err := Command(self(t), plan, []string{"/bin/bash", "-c", script}, append(os.Environ(), env...))
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdout: &stdout, Stderr: &stderr}
	if setup != nil {
		setup(cmd)
	}
	err = cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run the step: %v", err)
	}
	return r
}

// refusal is what each mode's kernel answers to a blocked write.
func refusal(m Mode) string {
	if m == Landlock {
		return "Permission denied"
	}
	return "Read-only file system"
}

func TestGitStep(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			needMode(t, m)
			if _, err := os.Lstat(etcProbe); err == nil {
				t.Fatalf("%s exists before the test: remove it", etcProbe)
			}
			t.Cleanup(func() {
				if os.Remove(etcProbe) == nil {
					t.Errorf("the step created %s (removed now)", etcProbe)
				}
			})
			ws := workspace(t)
			r := step(t, Plan{Class: "git", Writable: []string{ws, "/tmp"}, Mode: m},
				`echo ok > "$WS/f"; mkdir "$WS/d" && mv "$WS/f" "$WS/d/g"; echo x > `+etcProbe+`; st=$?
				/bin/sh -c 'echo y > `+etcProbe+`' || echo child blocked
				cat /proc/self/status | grep NoNewPrivs; readlink /proc/self/ns/mnt; exit $st`,
				[]string{"WS=" + ws}, nil)
			if r.code == 0 {
				t.Errorf("exit status 0, want the status of the refused redirection")
			}
			if b, err := os.ReadFile(filepath.Join(ws, "d", "g")); err != nil || string(b) != "ok\n" {
				t.Errorf("workspace write: %q, %v; want \"ok\\n\"", b, err)
			}
			if _, err := os.Lstat(etcProbe); err == nil {
				t.Errorf("%s was created", etcProbe)
			}
			if !strings.Contains(r.stderr, refusal(m)) {
				t.Errorf("stderr %q does not mention %q", r.stderr, refusal(m))
			}
			if !strings.Contains(r.stdout, "child blocked") {
				t.Errorf("a child of the step could write %s: stdout %q", etcProbe, r.stdout)
			}
			if got := Blocked([]byte(r.stderr)); len(got) == 0 || got[0] != etcProbe {
				t.Errorf("Blocked(stderr) = %q, want %s first", got, etcProbe)
			}
			checkMechanism(t, m, r.stdout)
		})
	}
}

// checkMechanism checks, from the step's output of NoNewPrivs and its
// mount namespace, that m was the mechanism applied.
func checkMechanism(t *testing.T, m Mode, stdout string) {
	t.Helper()
	host, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	ownNS := !strings.Contains(stdout, host)
	noNewPrivs := strings.Contains(stdout, "NoNewPrivs:\t1")
	if m == MountNS && (!ownNS || noNewPrivs) {
		t.Errorf("mount-namespace mode: own namespace %v, no_new_privs %v; want true, false\n%s", ownNS, noNewPrivs, stdout)
	}
	if m == Landlock && (ownNS || !noNewPrivs) {
		t.Errorf("Landlock mode: own namespace %v, no_new_privs %v; want false, true\n%s", ownNS, noNewPrivs, stdout)
	}
}

func TestNoneStep(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			needMode(t, m)
			ws := workspace(t)
			scratch := t.TempDir() // under /tmp
			r := step(t, Plan{Class: "none", Writable: []string{"/tmp"}, Mode: m}, `
				echo no > "$WS/f" || echo ws blocked
				echo yes > "$SCRATCH/f" && echo scratch ok
				echo null > /dev/null && echo null ok
				python3=/usr/bin/python3
				[ -x $python3 ] || python3=python3
				$python3 -c 'from multiprocessing import shared_memory as s; m = s.SharedMemory(create=True, size=8); m.close(); m.unlink(); print("shm ok")'
				`, []string{"WS=" + ws, "SCRATCH=" + scratch}, nil)
			for _, want := range []string{"ws blocked", "scratch ok", "null ok", "shm ok"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout %q lacks %q (stderr %q)", r.stdout, want, r.stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(ws, "f")); err == nil {
				t.Errorf("the none step wrote the workspace")
			}
			if b, err := os.ReadFile(filepath.Join(scratch, "f")); err != nil || string(b) != "yes\n" {
				t.Errorf("scratch write: %q, %v", b, err)
			}
		})
	}
}

// TestHeld checks that a held path stays read-only, with the mounts
// beneath it, though it lies in a writable one (a read-only step's
// workspace in /tmp), and that the rest of that writable path stays
// writable.
func TestHeld(t *testing.T) {
	for _, m := range []Mode{MountNS, Auto} {
		t.Run(m.String(), func(t *testing.T) { testHeld(t, m) })
	}
}

func testHeld(t *testing.T, m Mode) {
	needMode(t, MountNS)
	scratch := workspace(t)
	ws := filepath.Join(scratch, "ws")
	sub := filepath.Join(ws, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
	// Its stdout is a file in the workspace, as a caller's > ws/out.log
	// makes it: the step may write it, and reopen it.
	out, err := os.Create(filepath.Join(ws, "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	r := step(t, Plan{Class: "none", Writable: []string{scratch}, Held: []string{ws, filepath.Join(scratch, "absent")}, Mode: m}, `
		echo yes > "$SCRATCH/free" && echo scratch ok
		echo no > "$WS/f" || echo ws blocked
		echo no > "$WS/sub/f" || echo sub blocked
		cd "$WS" && { echo no > rel || echo relative blocked; }
		echo reopened >> /dev/stdout
		`, []string{"WS=" + ws, "SCRATCH=" + scratch}, func(c *exec.Cmd) { c.Stdout = out })
	b, _ := os.ReadFile(out.Name())
	for _, want := range []string{"scratch ok", "ws blocked", "sub blocked", "relative blocked", "reopened"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("stdout %q lacks %q (stderr %q)", b, want, r.stderr)
		}
	}
	for _, p := range []string{filepath.Join(ws, "f"), filepath.Join(sub, "f"), filepath.Join(ws, "rel")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the none step wrote %s, which it held", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(scratch, "free")); err != nil || string(b) != "yes\n" {
		t.Errorf("scratch write: %q, %v", b, err)
	}
}

func TestTerminal(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			needMode(t, m)
			ptmx, tty, err := creackpty.Open()
			if err != nil {
				t.Skipf("no pty: %v", err)
			}
			defer ptmx.Close()
			out := make(chan string)
			go func() {
				b, _ := io.ReadAll(ptmx) // ends with EIO once every slave is closed
				out <- string(b)
			}()
			r := step(t, Plan{Class: "none", Mode: m}, `
				echo via-stdout
				echo via-dev-tty > /dev/tty
				echo via-ttyname > "$(tty)"
				stty size > /dev/null && echo ioctl ok
				script -qc 'echo new-pty' /dev/null
				`, nil, func(c *exec.Cmd) {
				c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
				c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			})
			tty.Close()
			var got string
			select {
			case got = <-out:
			case <-time.After(10 * time.Second):
				t.Fatal("the terminal did not close")
			}
			if r.code != 0 {
				t.Errorf("exit status %d, output %q", r.code, got)
			}
			for _, want := range []string{"via-stdout", "via-dev-tty", "via-ttyname", "ioctl ok", "new-pty"} {
				if !strings.Contains(got, want) {
					t.Errorf("terminal output %q lacks %q", got, want)
				}
			}
		})
	}
}

// TestMetadata changes a file outside the plan every way there is. The
// mount-namespace mode blocks them all; Landlock has no rights for
// chmod, chown, utimes and xattrs (the package documentation says so).
func TestMetadata(t *testing.T) {
	ops := []struct {
		name, cmd     string
		landlockStops bool
	}{
		{"chmod", `chmod 600 "$F"`, false},
		{"chown", `chown 1:1 "$F"`, false},
		{"utimes", `touch -d 2000-01-01 "$F"`, false},
		{"xattr", `/usr/bin/python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.undosh", b"x")' "$F"`, false},
		{"truncate", `truncate -s 0 "$F"`, true},
		{"append", `echo more >> "$F"`, true},
		{"unlink", `rm -f "$F"`, true},
		{"rename", `mv "$F" "$D/moved"`, true},
		{"mkdir", `mkdir "$D/sub"`, true},
		{"symlink", `ln -s x "$D/link"`, true},
		{"hardlink", `ln "$F" "$D/hard"`, true},
		{"mkfifo", `mkfifo "$D/fifo"`, true},
	}
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			needMode(t, m)
			for _, op := range ops {
				t.Run(op.name, func(t *testing.T) {
					t.Parallel()
					d := workspace(t)
					f := filepath.Join(d, "file")
					if err := os.WriteFile(f, []byte("data\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					before := snapshot(t, d)
					r := step(t, Plan{Class: "git", Writable: []string{"/tmp"}, Mode: m}, op.cmd,
						[]string{"F=" + f, "D=" + d}, nil)
					after := snapshot(t, d)
					blocked := before == after
					if blocked != (r.code != 0) {
						t.Errorf("exit status %d, but the directory changed: %v (stderr %q)", r.code, !blocked, r.stderr)
					}
					want := m == MountNS || op.landlockStops
					if blocked != want {
						t.Errorf("blocked = %v, want %v (stderr %q)\nbefore %s\nafter  %s", blocked, want, r.stderr, before, after)
					}
				})
			}
		})
	}
}

// snapshot describes dir's entries: names, modes, owners, times, sizes,
// xattrs.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		x := make([]byte, 64)
		n, _ := syscall.Getxattr(p, "user.undosh", x)
		if n < 0 {
			n = 0
		}
		fmt.Fprintf(&b, "%s %v %d:%d %d %d %q;", p, fi.Mode(), st.Uid, st.Gid, fi.ModTime().UnixNano(), fi.Size(), x[:n])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestLandlockWithoutSysAdmin runs the step as root without
// CAP_SYS_ADMIN, as a container would: Auto must pick Landlock.
func TestLandlockWithoutSysAdmin(t *testing.T) {
	t.Parallel()
	needMode(t, Landlock)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv to drop CAP_SYS_ADMIN with")
	}
	// setpriv gives no way to set argv[0]: name a link after Name.
	link := filepath.Join(t.TempDir(), Name)
	if err := os.Symlink(self(t), link); err != nil {
		t.Fatal(err)
	}
	ws := workspace(t)
	r := step(t, Plan{Class: "git", Writable: []string{ws}}, `
		grep CapEff /proc/self/status
		echo ok > "$WS/f"; echo x > "$WS/../undosh-enforce-outside" || echo outside blocked
		grep NoNewPrivs /proc/self/status; readlink /proc/self/ns/mnt`,
		[]string{"WS=" + ws}, func(c *exec.Cmd) {
			c.Args = append([]string{setpriv, "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--", link}, c.Args[1:]...)
			c.Path = setpriv
		})
	t.Cleanup(func() { os.Remove(filepath.Join(filepath.Dir(ws), "undosh-enforce-outside")) })
	if !strings.Contains(r.stdout, "outside blocked") {
		t.Errorf("the step wrote outside its workspace: %q %q", r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(b) != "ok\n" {
		t.Errorf("workspace write: %q, %v", b, err)
	}
	checkMechanism(t, Landlock, r.stdout)
}

// TestNothingLeft checks that a step's mount namespace and mounts go when
// the step ends, and that none of its mounts reached the host.
func TestNothingLeft(t *testing.T) {
	needMode(t, MountNS)
	before, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	nsBefore := namespaces(t)
	ws := workspace(t)
	r := step(t, Plan{Class: "git", Writable: []string{ws, "/tmp"}, Mode: MountNS},
		`readlink /proc/self/ns/mnt; /bin/sh -c 'readlink /proc/self/ns/mnt'; grep -c . /proc/self/mountinfo`, nil, nil)
	lines := strings.Fields(r.stdout)
	if r.code != 0 || len(lines) != 3 || lines[0] != lines[1] {
		t.Fatalf("step: %d %q %q; want its namespace twice (the child inherits it)", r.code, r.stdout, r.stderr)
	}
	stepNS := lines[0]
	if host, _ := os.Readlink("/proc/self/ns/mnt"); host == stepNS {
		t.Fatalf("the step ran in the host's namespace %s", host)
	}
	after, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	// Other packages' tests may mount and unmount meanwhile: look for
	// the step's binds, and for a mount of the host's that changed.
	was := map[string]string{}
	for _, l := range strings.Split(string(before), "\n") {
		was[strings.SplitN(l, " ", 2)[0]] = l
	}
	for _, l := range strings.Split(string(after), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		old, ok := was[f[0]]
		// A copy of the machine that another test's step runs in is
		// made read-only when it ends ("stop the view's writes").
		if ok && old != l && !strings.Contains(l, " - tmpfs undosh-fork ") {
			t.Errorf("a host mount changed:\nbefore %s\nafter  %s", old, l)
		}
		if !ok && (f[4] == ws || f[4] == "/tmp" || f[4] == "/proc/sys") {
			t.Errorf("the step's mount reached the host: %s", l)
		}
	}
	if !bytes.Equal(before, after) {
		t.Logf("the host's mount table changed meanwhile (another test?):\nbefore\n%s\nafter\n%s", before, after)
	}
	if holders := namespaces(t)[stepNS]; len(holders) > 0 {
		t.Errorf("the step's namespace %s is still held by %q", stepNS, holders)
	}
	t.Logf("mount namespaces before %d, after %d; the step's had %s mounts", len(nsBefore), len(namespaces(t)), lines[2])
}

// namespaces maps each mount namespace in use to the processes (and
// their fds) that hold it.
func namespaces(t *testing.T) map[string][]string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, p := range procs {
		if ns, err := os.Readlink(p + "/ns/mnt"); err == nil {
			m[ns] = append(m[ns], p)
		}
		fds, _ := filepath.Glob(p + "/fd/*")
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "mnt:[") {
				m[l] = append(m[l], fd)
			}
		}
	}
	return m
}

// TestPassThrough checks that argv, the environment (without the plan),
// fds, the working directory and ignored signals reach the shell.
func TestPassThrough(t *testing.T) {
	signal.Ignore(syscall.SIGUSR2)
	defer signal.Reset(syscall.SIGUSR2)
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			needMode(t, m)
			ws := workspace(t)
			sub := filepath.Join(ws, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			path, argv, env, err := Command(self(t), Plan{Class: "git", Writable: []string{ws}, Mode: m},
				[]string{"/bin/bash", "-c", `printf '%s|' "$0" "$@"; echo; env | grep -c ^UNDOSH_ENFORCE; echo "$FOO"; pwd; echo rel > rel && echo rel ok; echo via3 >&3; grep SigIgn /proc/self/status`, "zero", "a b", ""},
				[]string{"FOO=bar", planVar + "=stale", "PATH=" + os.Getenv("PATH")})
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: sub, Stdout: &stdout, Stderr: &stderr, ExtraFiles: []*os.File{pw}}
			err = cmd.Run()
			pw.Close()
			via3, _ := io.ReadAll(pr)
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			want := fmt.Sprintf("zero|a b||\n0\nbar\n%s\nrel ok\n", sub)
			if got := stdout.String(); !strings.HasPrefix(got, want) {
				t.Errorf("stdout %q, want it to start with %q", got, want)
			}
			// SIGUSR2 is signal 12: bit 11.
			_, ign, _ := strings.Cut(stdout.String(), "SigIgn:\t")
			if mask, err := strconv.ParseUint(strings.TrimSpace(ign), 16, 64); err != nil || mask&(1<<11) == 0 {
				t.Errorf("SIGUSR2 is not ignored in the step: %q", stdout.String())
			}
			if string(via3) != "via3\n" {
				t.Errorf("fd 3 gave %q", via3)
			}
			if b, err := os.ReadFile(filepath.Join(sub, "rel")); err != nil || string(b) != "rel\n" {
				t.Errorf("relative write in the working directory: %q, %v", b, err)
			}
		})
	}
}

// TestStreamReopen checks that a step can reopen its standard output by
// path (>/dev/stdout) when the caller sent it to a file outside the plan,
// and still cannot write next to that file.
func TestStreamReopen(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			needMode(t, m)
			d := workspace(t)
			out, err := os.Create(filepath.Join(d, "out.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			// stderr is a pipe: reopening it goes through /proc/self/fd.
			r := step(t, Plan{Class: "none", Mode: m}, `echo direct; echo reopened >> /dev/stdout; echo x > "$D/other" || echo other blocked > /dev/stderr`,
				[]string{"D=" + d}, func(c *exec.Cmd) { c.Stdout = out })
			b, _ := os.ReadFile(out.Name())
			if string(b) != "direct\nreopened\n" || r.code != 0 {
				t.Errorf("out.log %q, status %d, stderr %q", b, r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "other blocked") {
				t.Errorf("the step wrote next to its stdout file: stderr %q", r.stderr)
			}
		})
	}
}

// TestBadPlan checks that undosh-enforce runs nothing, and exits 126, when
// the plan is missing, malformed or cannot be applied.
func TestBadPlan(t *testing.T) {
	needAny(t)
	root := t.TempDir()
	toRoot := filepath.Join(root, "to-root")
	if err := os.Symlink("/", toRoot); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, plan, want string // plan "-" means none at all
	}{
		{"missing", "-", "enforce: no plan"},
		{"empty", "", "unknown plan version"},
		{"version 1", "1 auto git 9:/bin/bash", "unknown plan version"},
		{"mechanism", "2 magic git s9:/bin/bash", "unknown mechanism"},
		{"class fork", "2 auto fork s9:/bin/bash", "unknown class"},
		{"no shell", "2 auto git", "no shell"},
		{"two shells", "2 auto git s9:/bin/bash s9:/bin/bash", "two shells"},
		{"untagged", "2 auto git 9:/bin/bash", "malformed field"},
		{"unknown tag", "2 auto git s9:/bin/bash q4:/tmp", "unknown field"},
		{"held with landlock", "2 landlock none s9:/bin/bash w4:/tmp x6:/tmp/w", "a held path needs the ns mechanism"},
		{"relative shell", "2 auto git s4:bash", "relative path"},
		{"short", "2 auto git s99:/bin/bash", "truncated field"},
		{"trailing", "2 auto git s9:/bin/bashX", "malformed field"},
		{"a view without capture", "2 auto git s9:/bin/bash b4:/tmp", "a view's field in a plan without one"},
		{"capture without a view", "2 capture git s9:/bin/bash", "a view must start with the overlay of /"},
		{"overlay without upper", "2 capture git s9:/bin/bash r4:/tmp o1:/ b4:/tmp", "upper and work"},
		{"view root /", "2 capture git s9:/bin/bash r1:/ o1:/ u4:/tmp k4:/tmp", "misplaced view root"},
		{"writable is /", fmt.Sprintf("2 auto git s9:/bin/bash w%d:%s", len(toRoot), toRoot), "resolves to /"},
		{"no such shell", "2 auto git s12:/nonexistent", "exec the shell (/nonexistent: No such file or directory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			marker := filepath.Join(t.TempDir(), "ran")
			env := []string{"PATH=" + os.Getenv("PATH")}
			if tt.plan != "-" {
				env = append(env, planVar+"="+tt.plan)
			}
			var stdout, stderr bytes.Buffer
			cmd := &exec.Cmd{Path: self(t), Args: []string{Name, "/bin/bash", "-c", "touch " + marker}, Env: env, Stdout: &stdout, Stderr: &stderr}
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 126 {
				t.Errorf("exit: %v, want status 126", err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the shell ran")
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "undosh: error: enforce: ") || !strings.Contains(lines[0], tt.want) ||
				!strings.HasSuffix(lines[0], ")") || !strings.HasPrefix(lines[1], "undosh: hint: ") {
				t.Errorf("stderr %q, want an error line with %q and a hint", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}

func TestCommand(t *testing.T) {
	t.Parallel()
	needAny(t)
	ok := Plan{Class: "git", Writable: []string{"/w s", "/tmp"}}
	if _, _, _, err := Command("/usr/bin/undosh", ok, []string{"-bash", "-c", "x"}, nil); err == nil {
		t.Fatalf("argv[0] -bash without Plan.Shell: no error")
	}
	ok.Shell = "/bin/bash"
	path, argv, env, err := Command("/usr/bin/undosh", ok, []string{"-bash", "-c", "x"}, []string{"A=1", planVar + "=old", "B=2"})
	if err != nil {
		t.Fatal(err)
	}
	if path != "/usr/bin/undosh" || strings.Join(argv, ",") != Name+",-bash,-c,x" {
		t.Errorf("path %q argv %q", path, argv)
	}
	want := []string{"A=1", "B=2", planVar + "=2 auto git s9:/bin/bash w4:/w s w4:/tmp"}
	sort.Strings(want)
	sort.Strings(env)
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Errorf("env %q, want %q", env, want)
	}
	bad := []struct {
		name string
		plan Plan
	}{
		{"fork", Plan{Class: "fork", Shell: "/bin/bash"}},
		{"no class", Plan{Shell: "/bin/bash"}},
		{"relative writable", Plan{Class: "git", Shell: "/bin/bash", Writable: []string{"ws"}}},
		{"root writable", Plan{Class: "git", Shell: "/bin/bash", Writable: []string{"/tmp/.."}}},
		{"nul", Plan{Class: "git", Shell: "/bin/bash", Writable: []string{"/a\x00b"}}},
		{"mode", Plan{Class: "git", Shell: "/bin/bash", Mode: 7}},
		{"held with landlock", Plan{Class: "none", Shell: "/bin/bash", Writable: []string{"/tmp"}, Held: []string{"/tmp/w"}, Mode: Landlock}},
		{"relative held", Plan{Class: "none", Shell: "/bin/bash", Writable: []string{"/tmp"}, Held: []string{"w"}, Mode: MountNS}},
		{"capture without a view", Plan{Class: "git", Shell: "/bin/bash", Mode: Capture}},
		{"a view without capture", Plan{Class: "git", Shell: "/bin/bash", View: &View{Root: "/v", Layers: []Layer{{Mount: "/", Upper: "/u", Work: "/k"}}}}},
		{"a view in /", Plan{Class: "git", Shell: "/bin/bash", Mode: Capture, View: &View{Root: "/", Layers: []Layer{{Mount: "/", Upper: "/u", Work: "/k"}}}}},
		{"a view without /", Plan{Class: "git", Shell: "/bin/bash", Mode: Capture, View: &View{Root: "/v", Layers: []Layer{{Mount: "/home", Upper: "/u", Work: "/k"}}}}},
		{"capture with writable", Plan{Class: "git", Shell: "/bin/bash", Mode: Capture, Writable: []string{"/w"}, View: &View{Root: "/v", Layers: []Layer{{Mount: "/", Upper: "/u", Work: "/k"}}}}},
	}
	for _, tt := range bad {
		if _, _, _, err := Command("/usr/bin/undosh", tt.plan, []string{"bash"}, nil); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, _, _, err := Command("undosh", ok, []string{"bash"}, nil); err == nil {
		t.Errorf("relative self: no error")
	}
}

// BenchmarkEnforcedStep compares /bin/true started directly with /bin/true
// started through Command, in each mode; "median-ns/op" is the figure to
// read (ns/op is the mean, which a slow outlier moves).
func BenchmarkEnforcedStep(b *testing.B) {
	run := func(b *testing.B, m Mode, direct bool) {
		exe := self(b)
		if p := os.Getenv("UNDOSH_BENCH_SELF"); p != "" {
			exe = p // a built undosh, to measure the real binary
		}
		plan := Plan{Class: "git", Writable: []string{b.TempDir(), "/tmp", "/var/tmp"}, Mode: m}
		path, argv, env := "/bin/true", []string{"/bin/true"}, os.Environ()
		if !direct {
			needMode(b, m)
			var err error
			path, argv, env, err = Command(exe, plan, argv, env)
			if err != nil {
				b.Fatal(err)
			}
		}
		times := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			cmd := &exec.Cmd{Path: path, Args: argv, Env: env}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns/op")
	}
	b.Run("direct", func(b *testing.B) { run(b, Auto, true) })
	b.Run("ns", func(b *testing.B) { run(b, MountNS, false) })
	b.Run("landlock", func(b *testing.B) { run(b, Landlock, false) })
}

// TestOddPaths checks writable paths whose names hold a space, a newline
// and a backslash (mountinfo escapes them), and a link to a workspace.
func TestOddPaths(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			needMode(t, m)
			d := workspace(t)
			ws := filepath.Join(d, "a b\nc\\d")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(d, "link")
			if err := os.Symlink(ws, link); err != nil {
				t.Fatal(err)
			}
			r := step(t, Plan{Class: "git", Writable: []string{link, filepath.Join(d, "missing")}, Mode: m},
				`echo ok > "$WS/f" && echo ws ok; echo x > "$D/sibling" || echo sibling blocked`,
				[]string{"WS=" + ws, "D=" + d}, nil)
			if !strings.Contains(r.stdout, "ws ok") || !strings.Contains(r.stdout, "sibling blocked") {
				t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
		})
	}
}

// TestClosedStdout checks that a standard fd the caller closed stays
// closed in the shell (the constructor's own fds are close-on-exec).
func TestClosedStdout(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			t.Parallel()
			needMode(t, m)
			path, argv, env, err := Command(self(t), Plan{Class: "none", Mode: m},
				[]string{"/bin/bash", "-c", `if [ -e /proc/$$/fd/1 ]; then echo open >&2; else echo closed >&2; fi`}, os.Environ())
			if err != nil {
				t.Fatal(err)
			}
			// exec -a sets argv[0]; >&- closes fd 1 for the exec.
			wrapper := `exec -a "$0" "$@" >&-`
			cmd := exec.Command("/bin/bash", append([]string{"-c", wrapper, argv[0], path}, argv[1:]...)...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "closed" {
				t.Errorf("%v: %q, want closed", err, out)
			}
		})
	}
}
