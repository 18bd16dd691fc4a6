package fork

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/internal/procs"
)

// The init's instructions decode to what was encoded, a session's user
// included; any other bytes decode to an error, never a panic.
func FuzzDecodeSpec(f *testing.F) {
	for _, s := range []initSpec{
		{Root: "/r", Argv: []string{"true"}, Layers: []specLayer{{Mount: "/"}}},
		{Root: "/r", Dir: "/w", Path: "/bin/bash", Argv: []string{"bash", "-c", "id"}, Env: []string{"A=1"},
			Layers: []specLayer{{Mount: "/", Upper: "/u", Work: "/w", ReadOnly: true}}, User: &User{UID: 1000, GID: 1000, Groups: []int{27, 1000}}},
		{Root: "/r", Argv: []string{"x"}, User: &User{UID: 65534, GID: 65534}, Leftovers: true},
		{Root: "/r", Argv: []string{"x"}, Rootless: true, Binds: []string{"/mnt/f", "/etc/hosts"},
			Layers: []specLayer{{Mount: "/", Upper: "/s"}, {Mount: "/usr", Upper: "/u", Work: "/w"}}},
	} {
		f.Add(s.encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSpec(b)
		if err != nil {
			return
		}
		again, err := decodeSpec(s.encode())
		if err != nil {
			t.Fatalf("re-encoded spec does not decode: %v", err)
		}
		if diff := cmp.Diff(s, again); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

// A session with a User runs as that user, with those groups only; the
// copy is still made and read as root.
func TestRunAsUser(t *testing.T) {
	c := newCopy(t, Options{})
	s := runWith(t, c, RunOptions{Argv: []string{"sh", "-c", "id -u; id -g; id -G"}, User: &User{UID: 65534, GID: 65534, Groups: []int{65534, 100}}})
	if s.err != nil || s.ExitCode != 0 || s.stdout != "65534\n65534\n65534 100\n" {
		t.Fatalf("id as nobody in a copy: %+v, %v, stdout %q, stderr %q", s.Result, s.err, s.stdout, s.stderr)
	}
}

// The init's report decodes to what was encoded, the processes the
// session left included; any other bytes decode to an error, never a
// panic.
func FuzzDecodeReport(f *testing.F) {
	for _, r := range []initReport{
		{Status: 0, SetupNS: 1234},
		{Status: 137, Signal: 9, NotFound: true, Error: "start x: no\x00such"},
		{Status: 3, Leftovers: []procs.Proc{
			{PID: 7, PPID: 1, Start: 1 << 40, Comm: "redis-server", Argv: []string{"redis-server", "*:6379"}, Exe: "/usr/bin/redis-server",
				Cwd: "/var/lib/redis", Env: []string{"A=1", ""}, UID: 100, GID: 101, Groups: []int{101, 4}, Session: 7, Group: 7, Forked: true},
			{PID: 8, PPID: 7, Comm: "a) b", Argv: []string{}},
		}, Unread: 3},
	} {
		f.Add(r.encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeReport(b)
		if err != nil {
			return
		}
		again, err := decodeReport(r.encode())
		if err != nil {
			t.Fatalf("re-encoded report does not decode: %v", err)
		}
		if diff := cmp.Diff(r, again); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

// A report with processes decodes to them.
func TestReportLeftovers(t *testing.T) {
	want := initReport{Status: 1, Leftovers: []procs.Proc{{PID: 2, PPID: 1, Start: 5, Comm: "sleep", Argv: []string{"sleep", "9"},
		Exe: "/bin/sleep", Cwd: "/", Env: []string{"X=1"}, UID: 1000, GID: 1000, Groups: []int{27}, Session: 2, Group: 2}}}
	got, err := decodeReport(want.encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
