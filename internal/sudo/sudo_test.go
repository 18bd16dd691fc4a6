package sudo

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The root side of these tests is this test binary run again, as a
// child of the test (an offer is taken only by a descendant), with the
// arguments and SUDO_UID in its environment. It prints what Accept
// returned and, when it took the step, answers with it reversed.
func TestMain(m *testing.M) {
	if args := os.Getenv("SUDO_TEST_ACCEPT"); args != "" {
		h, err := Accept(strings.Fields(args), os.Getenv("SUDO_UID"), os.Getenv("SUDO_GID"))
		if err != nil {
			os.Stdout.WriteString("refused: " + err.Error())
			os.Exit(3)
		}
		defer h.Close()
		if err := h.Taken(); err != nil {
			os.Stdout.WriteString(err.Error())
			os.Exit(4)
		}
		if os.Getenv("SUDO_TEST_NO_REPLY") == "" {
			b := bytes.Clone(h.Spec)
			for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
				b[i], b[j] = b[j], b[i]
			}
			if err := h.Reply(b); err != nil {
				os.Stdout.WriteString(err.Error())
				os.Exit(4)
			}
		}
		os.Stdout.WriteString("taken by uid " + strconv.Itoa(h.Caller.UID) + " gid " + strconv.Itoa(h.Caller.GID))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rootSide runs the root side with args and SUDO_UID uid; it returns its
// output and exit status.
func rootSide(t *testing.T, args []string, uid int, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SUDO_TEST_ACCEPT="+strings.Join(args, " "), "SUDO_UID="+strconv.Itoa(uid), "SUDO_GID="+strconv.Itoa(os.Getgid()))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestHandover(t *testing.T) {
	o, err := NewOffer([]byte("the step"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	args := o.Args()
	if args[0] != Entry {
		t.Fatalf("args: %q", args)
	}
	if taken, _, err := o.Result(); taken || err != nil {
		t.Fatalf("before the root side ran: taken %v, %v", taken, err)
	}
	out, code := rootSide(t, args[1:], os.Getuid())
	if code != 0 || out != "taken by uid "+strconv.Itoa(os.Getuid())+" gid "+strconv.Itoa(os.Getgid()) {
		t.Fatalf("root side: %d, %s", code, out)
	}
	taken, answer, err := o.Result()
	if !taken || string(answer) != "pets eht" || err != nil {
		t.Errorf("answer: taken %v, %q, %v", taken, answer, err)
	}
}

// An answer is given once: a second root side finds it written and
// refuses; one that took the step but never answered is told apart from
// one that never took it.
func TestHandoverOnce(t *testing.T) {
	o, err := NewOffer([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if out, code := rootSide(t, o.Args()[1:], os.Getuid(), "SUDO_TEST_NO_REPLY=1"); code != 0 {
		t.Fatalf("root side: %d, %s", code, out)
	}
	if taken, answer, err := o.Result(); !taken || answer != nil || err != nil {
		t.Errorf("taken but not answered: %v, %q, %v", taken, answer, err)
	}
	if out, code := rootSide(t, o.Args()[1:], os.Getuid()); code != 3 || !strings.Contains(out, "the answer is not empty") {
		t.Errorf("a second root side: %d, %s", code, out)
	}
}

// The hand-over refuses an offer that does not come from an ancestor
// running as SUDO_UID, started when the arguments say, through its own
// sealed memory files.
func TestHandoverRefuses(t *testing.T) {
	o, err := NewOffer([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	a := o.Args()[1:] // PID START SPEC RESULT
	with := func(i int, v string) []string {
		b := append([]string(nil), a...)
		b[i] = v
		return b
	}
	// A sibling process: alive, but not an ancestor.
	sib := exec.Command("sleep", "60")
	if err := sib.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sib.Process.Kill(); sib.Wait() }()
	// A file the caller may only read: the answer must never land there.
	passwd, err := os.Open("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	defer passwd.Close()
	// A memory file with the step's name, not sealed.
	fd, err := unix.MemfdCreate(specName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	unsealed := os.NewFile(uintptr(fd), "unsealed")
	defer unsealed.Close()
	other := os.Getuid() + 1
	for _, tc := range []struct {
		name string
		args []string
		uid  int
		want string
	}{
		{"another uid than SUDO_UID", a, other, "not SUDO_UID " + strconv.Itoa(other)},
		{"not an ancestor", with(0, strconv.Itoa(sib.Process.Pid)), os.Getuid(), "is not an ancestor"},
		{"another start time", with(1, "1"), os.Getuid(), "did not start at 1"},
		{"a file, not a memory file", with(3, strconv.Itoa(int(passwd.Fd()))), os.Getuid(), "not a memory file"},
		{"the answer's file as the step", with(2, a[3]), os.Getuid(), "not the memory file " + specName},
		{"an unsealed step", with(2, strconv.Itoa(int(unsealed.Fd()))), os.Getuid(), "not sealed"},
		{"a closed fd", with(2, "999"), os.Getuid(), "open the caller's fd 999"},
		{"too few arguments", a[:3], os.Getuid(), "want PID START SPEC RESULT"},
		{"not numbers", with(0, "x"), os.Getuid(), "is not a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if os.Getuid() != 0 && tc.uid == os.Getuid() && strings.HasPrefix(tc.name, "a file") {
				// Not root, the root side cannot open the read-only
				// file for writing: refused a step earlier.
				want = "open the caller's fd"
			}
			out, code := rootSide(t, tc.args, tc.uid)
			if code != 3 || !strings.Contains(out, want) {
				t.Errorf("root side: %d, %q; want refused: …%s…", code, out, want)
			}
		})
	}
	if taken, _, err := o.Result(); taken || err != nil {
		t.Errorf("after refusals: taken %v, %v", taken, err)
	}
	if b, _ := os.ReadFile("/etc/passwd"); len(b) == 0 {
		t.Error("/etc/passwd is empty")
	}
}

// Accept needs SUDO_UID and SUDO_GID as sudo sets them.
func TestAcceptNeedsSudo(t *testing.T) {
	t.Parallel()
	for _, ids := range [][2]string{{"", "0"}, {"0", ""}, {"x", "0"}, {"-1", "0"}} {
		if _, err := accept([]string{"1", "1", "3", "4"}, ids[0], ids[1], os.Getpid()); err == nil || !strings.Contains(err.Error(), "not started by sudo") {
			t.Errorf("SUDO_UID %q SUDO_GID %q: %v", ids[0], ids[1], err)
		}
	}
}

func validSpecs() []Spec {
	return []Spec{
		{Argv: []string{"bash", "-c", "sudo true"}, Path: "/bin/bash", Dir: "/home/u/ws", Env: []string{"HOME=/home/u", "A="}, Step: 3},
		{Argv: []string{"bash", "-c", "x"}, Dir: "/", Env: []string{}, Verify: "make test", VerifyDir: "/w", Shell: "/bin/bash",
			Timeout: time.Minute, VerifyTimeout: time.Second, Include: []string{"/w"}, Protected: []string{"/etc/undosh"}, Hide: []string{"/home/u/.local/state/undosh"}, Step: 1},
	}
}

func TestSpecRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range validSpecs() {
		b, err := EncodeSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSpec(b)
		s.Version = Version
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	for _, bad := range []string{
		``, `null`, `{}`, `{"version":1}`, `{"version":2,"argv":["x"]}`,
		`{"version":1,"argv":["x"]} {}`, `{"version":1,"argv":["x"]}}`,
		`{"version":1,"argv":["x"],"unknown":1}`,
		`{"version":1,"argv":["x"],"dir":"rel"}`,
		`{"version":1,"argv":["x\u0000"]}`,
		`{"version":1,"argv":["x"],"timeout":-1}`,
		`{"version":1,"argv":["x"],"hide":["rel"]}`,
	} {
		if _, err := DecodeSpec([]byte(bad)); err == nil {
			t.Errorf("DecodeSpec(%s): no error", bad)
		}
	}
	r := Result{Status: 1, Signal: 9, VerifyStatus: -1, VerifyOutput: []byte("out\x00"), Commits: []Commit{{Target: "/", JournalDir: "/.undosh-fork/journal", ID: "x", Paths: []string{"etc/f"}}},
		Changes: 2, Conflict: &Conflict{Problems: []Problem{{Path: "/etc/f", Reason: "changed"}}}, Mapped: []Mapping{{PID: 1, Comm: "init"}},
		Leftovers: []Leftover{{PID: 3, PPID: 1, Comm: "sleep", Argv: []string{"sleep", "9"}, State: "started", NewPID: 4567, NewStart: 1 << 33, Log: "/var/lib/undosh/started/1-1.log", Ended: true}}, LeftoversUnread: 2}
	b, err := EncodeResult(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeResult(b)
	r.Version = Version
	if err != nil || !cmp.Equal(r, got) {
		t.Errorf("result round trip: %v\n%s", err, cmp.Diff(r, got))
	}
}

// The root side decodes what a user handed it: any bytes give a step
// that passes the checks, or an error, never a panic; a step decoded
// encodes to one that decodes the same.
func FuzzDecodeSpec(f *testing.F) {
	for _, s := range validSpecs() {
		b, _ := EncodeSpec(s)
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"argv":[""],"env":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSpec(b)
		if err != nil {
			return
		}
		again, err := EncodeSpec(s)
		if err != nil {
			t.Fatalf("a decoded step does not encode: %v", err)
		}
		s2, err := DecodeSpec(again)
		if err != nil {
			t.Fatalf("a re-encoded step does not decode: %v", err)
		}
		if diff := cmp.Diff(s, s2); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}
