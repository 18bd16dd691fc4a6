package front

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/flock"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/shell"
)

// frame is a whole request: the magic, the payload's length, the payload.
func frame(payload []byte) []byte {
	b := append([]byte(RequestMagic), binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))...)
	return append(b, payload...)
}

// exchange sends raw on one end of a Unix socket pair, has s answer on
// the other, and returns every byte of the answer, up to the end of the
// connection the server closes. The sending side is shut for writing
// after raw, so that a short request ends rather than times out. A
// server that closes with bytes of the request unread resets the
// connection, which exchange returns.
func exchange(t *testing.T, s *server, raw []byte) ([]byte, error) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := os.NewFile(uintptr(fds[0]), "front end")
	defer client.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serve(fds[1])
	}()
	if _, err := client.Write(raw); err != nil {
		t.Fatal(err)
	}
	unix.Shutdown(fds[0], unix.SHUT_WR)
	out, err := io.ReadAll(client)
	<-served
	if err != nil && !errors.Is(err, unix.ECONNRESET) {
		t.Fatal(err)
	}
	return out, err
}

// parseAnswer splits an answer into its verdict and text, failing the
// test when its length is not the one it says.
func parseAnswer(t *testing.T, b []byte) (byte, string) {
	t.Helper()
	if len(b) < answerHeadSize {
		t.Fatalf("answer %q: shorter than its header", b)
	}
	if n := binary.LittleEndian.Uint32(b[1:]); int(n) != len(b)-answerHeadSize {
		t.Fatalf("answer %q: says %d bytes of text, has %d", b, n, len(b)-answerHeadSize)
	}
	return b[0], string(b[answerHeadSize:])
}

func TestAnswerEncode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   answer
		want string
	}{
		{"exec", answer{verdict: verdictExec, text: "/bin/bash"}, "E\x09\x00\x00\x00/bin/bash"},
		{"undosh", answer{verdict: verdictUndosh, text: ""}, "U\x00\x00\x00\x00"},
	} {
		if got := string(tc.in.encode()); got != tc.want {
			t.Errorf("%s: encode = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestServeRequests answers requests on a real Unix socket, one per
// connection, as a front end sends them: malformed ones and what the
// server cannot decide get undosh, a plainly read-only step the real
// shell (under the read-only limit when enforcement is on).
func TestServeRequests(t *testing.T) {
	t.Parallel()
	bash, err := shell.RealShell("bash", os.Getenv, shell.ConfigFile, nil)
	if err != nil {
		t.Skipf("no real bash: %v", err)
	}
	home, stateDir := t.TempDir(), t.TempDir()
	env := func(enforce string) []string {
		return []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "UNDOSH_STATE_DIR=" + stateDir, "UNDOSH_POLICY=-",
			"UNDOSH_ENFORCE=" + enforce, "UNDOSH_REAL_BASH=" + bash}
	}
	bashC := func(cmd, enforce string) []byte {
		return frame(encodeRequest(request{argv: []string{"bash", "-c", cmd}, env: env(enforce), cwd: home, execfn: "/usr/bin/bash"}))
	}
	s := newServer(stateDir, "/undosh", slog.New(slog.DiscardHandler))
	defer s.watch.Close()
	long := binary.LittleEndian.AppendUint32([]byte(RequestMagic), maxRequest+1)
	for _, tc := range []struct {
		name    string
		raw     []byte
		verdict byte
		text    string // "plan": the read-only limit's plan
		// reset: the server leaves bytes of the request unread, and
		// the front end may see the connection reset instead of the
		// answer, which it takes for U as well.
		reset bool
	}{
		{"ping", frame(encodeRequest(request{})), 'U', "/undosh", false},
		{"empty", nil, 'U', "/undosh", false},
		{"bad magic", append([]byte("UNDOSHQ1"), frame(encodeRequest(request{argv: []string{"bash"}}))[8:]...), 'U', "/undosh", true},
		{"too long", long, 'U', "/undosh", false},
		{"truncated", frame(encodeRequest(request{argv: []string{"bash", "-c", "ls"}}))[:20], 'U', "/undosh", false},
		{"trailing bytes", append(frame(encodeRequest(request{argv: []string{"bash"}})), 'x'), 'U', "/undosh", true},
		{"read-only", bashC("ls -la | head", "0"), 'E', bash, false},
		{"read-only, enforced", bashC("ls -la | head", "1"), 'L', "plan", false},
		{"writes", bashC("rm -rf ./x", "0"), 'U', "/undosh", false},
		{"script on stdin", frame(encodeRequest(request{argv: []string{"bash", "-s"}, env: env("0"), cwd: home})), 'U', "/undosh", false},
		{"script on an fd", frame(encodeRequest(request{argv: []string{"bash", "/dev/fd/3"}, env: env("0"), cwd: home})), 'U', "/undosh", false},
		{"no cwd", frame(encodeRequest(request{argv: []string{"bash", "-c", "ls"}, env: env("0")})), 'U', "/undosh", false},
		{"no command", frame(encodeRequest(request{argv: []string{"bash", "-c"}, env: env("0"), cwd: home})), 'E', bash, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exchange(t, s, tc.raw)
			if err != nil {
				if !tc.reset {
					t.Fatal(err)
				}
				return
			}
			verdict, text := parseAnswer(t, out)
			if verdict != tc.verdict {
				t.Fatalf("verdict %c (%q), want %c", verdict, text, tc.verdict)
			}
			switch tc.text {
			case "plan":
				envMap := classify.Environ(env("1"))
				pol, ok := s.policy(func(k string) string { return envMap[k] }, stateDir)
				if !ok {
					t.Fatal("no policy")
				}
				want, err := enforce.Encode(enforce.Plan{Class: "none", Shell: bash, Writable: shell.ReadOnlyWritable(pol, home, stateDir)})
				if err != nil {
					t.Fatal(err)
				}
				if text != want {
					t.Errorf("plan %q, want %q", text, want)
				}
			default:
				if text != tc.text {
					t.Errorf("text %q, want %q", text, tc.text)
				}
			}
		})
		for len(s.records) > 0 {
			<-s.records
		}
	}

	// A workspace in a writable path (here /tmp) is held read-only by
	// the plan, where a mount namespace is made.
	ws := t.TempDir()
	envMap := classify.Environ(env("1"))
	getenv := func(k string) string { return envMap[k] }
	watchedStore(t, s, getenv, stateDir, home, ws)
	out, err := exchange(t, s, frame(encodeRequest(request{argv: []string{"bash", "-c", "ls"}, env: env("1"), cwd: ws, execfn: "/usr/bin/bash"})))
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := s.policy(getenv, stateDir)
	real, _ := filepath.EvalSymlinks(ws)
	want, err := enforce.Encode(enforce.Plan{Class: "none", Shell: bash, Writable: shell.ReadOnlyWritable(pol, home, stateDir), Held: []string{real}})
	if err != nil {
		t.Fatal(err)
	}
	if verdict, text := parseAnswer(t, out); verdict != 'L' || text != want {
		t.Errorf("a read-only step in a workspace in /tmp: %c %q, want L %q", verdict, text, want)
	}
	for len(s.records) > 0 {
		<-s.records
	}

	// A rollback to finish first: undosh finishes it.
	if err := os.MkdirAll(journal.PendingDir(stateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err = exchange(t, s, bashC("ls", "0"))
	if err != nil {
		t.Fatal(err)
	}
	if verdict, text := parseAnswer(t, out); verdict != 'U' {
		t.Errorf("with a rollback pending: verdict %c (%q), want U", verdict, text)
	}
}

// TestServeWatchRequest: a request to the watchers on the same socket
// gets the watchers' answer, in their format.
func TestServeWatchRequest(t *testing.T) {
	t.Parallel()
	s := newServer(t.TempDir(), "/undosh", slog.New(slog.DiscardHandler))
	defer s.watch.Close()
	req, err := watchd.Encode(watchd.Request{Op: "ping"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exchange(t, s, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 12 || string(out[:8]) != watchd.Magic {
		t.Fatalf("answer %q: not the watchers'", out)
	}
	if _, err := watchd.ReadBody(strings.NewReader(string(out[12:])), out[:12]); err != nil {
		t.Errorf("the watchers' answer %q: %v", out, err)
	}
}

// watchedStore opens the checkpoint store of the workspace cwd as the
// server's read-only steps see it, and takes its first two checkpoints:
// the first walks and starts the server's watcher, from the second on the
// watcher tells what changed. The store closes when the test ends.
func watchedStore(t *testing.T, s *server, getenv func(string) string, stateDir, home, cwd string) *checkpoint.Store {
	t.Helper()
	pol, ok := s.policy(getenv, stateDir)
	if !ok {
		t.Fatal("no policy")
	}
	o := state.StoreOptions(stateDir, pol, home)
	o.Watch = s.watch.Watcher(o.Exclude, o.MaxFileSize)
	st, err := checkpoint.Open(cwd, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, msg := range []string{"the first", "the first watched"} {
		if _, err := st.Checkpoint(msg); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// A process holding the workspace's checkpoint store (undosh taking a
// step's checkpoint, which asks this very server's watcher what changed)
// does not hold up the server, which answers one request at a time: a
// read-only step that needs a new checkpoint goes to undosh at once, and
// once the store is free the server takes the checkpoint and passes the
// step itself.
func TestReadOnlyStoreBusy(t *testing.T) {
	t.Parallel()
	bash, err := shell.RealShell("bash", os.Getenv, shell.ConfigFile, nil)
	if err != nil {
		t.Skipf("no real bash: %v", err)
	}
	home, stateDir := t.TempDir(), t.TempDir()
	cwd := filepath.Join(home, "proj")
	if err := os.MkdirAll(filepath.Join(cwd, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "UNDOSH_STATE_DIR=" + stateDir, "UNDOSH_POLICY=-",
		"UNDOSH_ENFORCE=0", "UNDOSH_REAL_BASH=" + bash}
	envMap := classify.Environ(env)
	s := newServer(stateDir, "/undosh", slog.New(slog.DiscardHandler))
	defer s.watch.Close()
	st := watchedStore(t, s, func(k string) string { return envMap[k] }, stateDir, home, cwd)
	if err := os.WriteFile(filepath.Join(cwd, "new"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, unchanged := st.Current(); !unchanged {
			break // the watcher saw the write
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher never saw the write")
		}
	}
	lock, err := flock.Lock(filepath.Join(st.Dir(), "lock"), unix.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() answer {
		t.Helper()
		got := make(chan answer, 1)
		go func() {
			got <- s.answer(request{argv: []string{"bash", "-c", "ls"}, env: env, cwd: cwd, execfn: "/usr/bin/bash"},
				&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid())})
		}()
		select {
		case a := <-got:
			return a
		case <-time.After(time.Minute):
			t.Fatal("the server waits for the store's lock")
			return answer{}
		}
	}
	if a := ask(); a.verdict != verdictUndosh {
		t.Errorf("with the store held: verdict %c (%q), want U", a.verdict, a.text)
	}
	if len(s.records) != 0 {
		t.Errorf("with the store held, %d read-only steps journaled", len(s.records))
	}
	lock.Close()
	if a := ask(); a.verdict != verdictExec || a.text != bash {
		t.Errorf("with the store free: verdict %c (%q), want E %s", a.verdict, a.text, bash)
	}
	if len(s.records) != 1 {
		t.Errorf("with the store free, %d read-only steps journaled, want 1", len(s.records))
	}
}

// TestServeLifecycle runs the server on its socket in a state directory:
// it answers there once its pid file appears, a second server of the
// same directory returns at once, and once idle it exits, taking its
// socket and pid file with it.
func TestServeLifecycle(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	run := filepath.Join(stateDir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	// The pid file is renamed into place once the server listens.
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, run, unix.IN_MOVED_TO|unix.IN_CREATE); err != nil {
		t.Fatal(err)
	}
	const idle = 5 * time.Second
	done := make(chan error, 1)
	go func() { done <- Serve(Options{StateDir: stateDir, Idle: idle}) }()
	pidFile := filepath.Join(run, "classify.pid")
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Serve returned before it listened: %v", err)
		default:
		}
		// Wait for the next event in run/, checking on Serve each second.
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}, 1000); err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
		var buf [4096]byte
		if _, err := unix.Read(in, buf[:]); err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pid file %q (%v), want %d", pid, err, os.Getpid())
	}

	sock := state.SocketPath(stateDir)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(frame(encodeRequest(request{}))); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if verdict, text := parseAnswer(t, out); verdict != 'U' || text != exe {
		t.Errorf("ping: %c %q, want U %q", verdict, text, exe)
	}
	if !watchd.Answers(sock) {
		t.Error("the watchers do not answer on the server's socket")
	}

	// Only one server serves a state directory.
	second := make(chan error, 1)
	go func() { second <- Serve(Options{StateDir: stateDir, Idle: time.Hour}) }()
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("a second server: %v", err)
		}
	case err := <-done:
		t.Fatalf("the first server returned (%v) while the second started", err)
	}

	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * idle):
		t.Fatalf("the server did not exit after %v idle", idle)
	}
	for _, p := range []string{sock, pidFile} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the server exited: %v", p, err)
		}
	}
}
