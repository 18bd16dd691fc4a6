package machine

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
)

// TestReport: each way a machine step ends gives its outcome in the
// journal, its one line and its exit status.
func TestReport(t *testing.T) {
	t.Parallel()
	commits := []Commit{{Target: "/", JournalDir: "/j", ID: "c1", Paths: []string{"etc/x"}}}
	tests := []struct {
		name    string
		out     Outcome
		verify  string
		outcome string
		code    int
		notice  string // a substring; "" for no line at all
	}{
		{name: "committed", out: Outcome{VerifyStatus: -1, Commits: commits, Changes: 1}, outcome: journal.Committed},
		{name: "nothing to commit", out: Outcome{VerifyStatus: -1}, outcome: journal.Kept},
		{name: "failed with changes", out: Outcome{Status: 3, VerifyStatus: -1, Changes: 2}, outcome: journal.Discarded, code: 3,
			notice: "step 7 failed (exit 3) in a copy of the machine, so the copy was discarded (2 changes); the machine is unchanged"},
		{name: "failed without changes", out: Outcome{Status: 3, VerifyStatus: -1}, outcome: journal.Discarded, code: 3},
		{name: "one change", out: Outcome{Status: 1, VerifyStatus: -1, Changes: 1}, outcome: journal.Discarded, code: 1,
			notice: "(1 change)"},
		{name: "killed", out: Outcome{Status: 137, Signal: syscall.SIGKILL, VerifyStatus: -1, Changes: 1}, outcome: journal.Discarded, code: 137,
			notice: "step 7 failed (killed by SIGKILL)"},
		{name: "timed out", out: Outcome{Status: 137, TimedOut: true, VerifyStatus: -1, Changes: 1}, outcome: journal.Discarded, code: 137,
			notice: "step 7 ran out of time"},
		{name: "rootless setuid", out: Outcome{Status: 1, VerifyStatus: -1, Rootless: true, Setuid: []string{"/usr/bin/passwd"}}, outcome: journal.Discarded, code: 1,
			notice: "step 7 failed (exit 1) in a copy of the machine; the machine is unchanged (in a copy made without root, setuid programs run without privilege: /usr/bin/passwd)"},
		{name: "verify failed", out: Outcome{VerifyStatus: 4, VerifyOutput: []byte("no")}, verify: "make test", outcome: journal.Discarded, code: 4,
			notice: "step 7 passed in a copy of the machine, but verify `make test` failed (exit 4): the copy was discarded"},
		{name: "protected", out: Outcome{VerifyStatus: -1, Protected: []string{"/etc/undosh/policy.yaml"}}, outcome: journal.Refused, code: exit.Refused,
			notice: "refused: step 7 passed in a copy of the machine, but was not applied: this changes undosh itself (/etc/undosh/policy.yaml)"},
		{name: "unwritable", out: Outcome{VerifyStatus: -1, Unwritable: []fork.Problem{{Path: "/etc/shadow", Reason: "owned by root"}}}, outcome: journal.Refused, code: exit.Refused,
			notice: "it changed what you cannot change outside the copy (/etc/shadow: owned by root)"},
		{name: "conflict", out: Outcome{VerifyStatus: -1, Conflict: &fork.ConflictError{Problems: []fork.Problem{{Path: "/etc/a"}, {Path: "/etc/b"}}}}, outcome: journal.Discarded, code: 1,
			notice: "step 7 passed in a copy of the machine, but was not applied: 2 paths changed on the machine meanwhile (/etc/a, /etc/b); run it again"},
		{name: "kept failed", out: Outcome{Status: 2, VerifyStatus: -1, KeptFailed: true, Commits: commits}, outcome: journal.Committed, code: 2},
		{name: "still mapped", out: Outcome{VerifyStatus: -1, Commits: commits, Mapped: []fork.Mapping{{PID: 42, Comm: "nginx"}}}, outcome: journal.Committed,
			notice: "step 7 changed files that running processes still use: nginx[42] (restart them to pick up the change)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec journal.Record
			notice, code := Report(7, tt.out, tt.verify, &rec)
			if code != tt.code {
				t.Errorf("exit status %d, want %d", code, tt.code)
			}
			if rec.Outcome != tt.outcome {
				t.Errorf("outcome %q, want %q", rec.Outcome, tt.outcome)
			}
			if tt.notice == "" && notice != "" || !strings.Contains(notice, tt.notice) {
				t.Errorf("notice %q, want %q", notice, tt.notice)
			}
			if rec.Notice != notice {
				t.Errorf("journal notice %q, said %q", rec.Notice, notice)
			}
			if rec.Exit != tt.out.Status {
				t.Errorf("journal exit %d, want the step's %d", rec.Exit, tt.out.Status)
			}
			if len(rec.Machine) != len(tt.out.Commits) {
				t.Errorf("journal has %d commits, want %d", len(rec.Machine), len(tt.out.Commits))
			}
		})
	}
}

// TestReportRecord: the journal keeps the signal's name, verify and, when
// it failed, its output; and every commit.
func TestReportRecord(t *testing.T) {
	t.Parallel()
	var rec journal.Record
	Report(1, Outcome{Status: 130, Signal: syscall.SIGINT, VerifyStatus: -1}, "", &rec)
	if rec.Signal != "SIGINT" || rec.VerifyOK != nil {
		t.Errorf("killed step: signal %q, verify_ok %v", rec.Signal, rec.VerifyOK)
	}

	rec = journal.Record{}
	Report(2, Outcome{VerifyStatus: 1, VerifyOutput: []byte("FAIL\n")}, "go test", &rec)
	if rec.Verify != "go test" || rec.VerifyOK == nil || *rec.VerifyOK || rec.VerifyOutput != "FAIL\n" {
		t.Errorf("failed verify: %+v", rec)
	}

	rec = journal.Record{}
	c := Commit{Target: "/", JournalDir: "/j", ID: "c1", Paths: []string{"etc/x", "etc/y"}}
	Report(3, Outcome{VerifyStatus: 0, VerifyOutput: []byte("ok\n"), Commits: []Commit{c}}, "true", &rec)
	if rec.VerifyOK == nil || !*rec.VerifyOK || rec.VerifyOutput != "" {
		t.Errorf("passed verify: verify_ok %v, output %q", rec.VerifyOK, rec.VerifyOutput)
	}
	want := []journal.MachineCommit{{Target: "/", JournalDir: "/j", ID: "c1", Paths: []string{"etc/x", "etc/y"}}}
	if d := cmp.Diff(want, rec.Machine); d != "" {
		t.Errorf("journal commits (-want +got):\n%s", d)
	}
}

// TestReportClips: a long list of paths is cut to one line.
func TestReportClips(t *testing.T) {
	t.Parallel()
	var paths []string
	for range 100 {
		paths = append(paths, "/etc/undosh/a-long-name\nwith-a-newline")
	}
	notice, _ := Report(1, Outcome{VerifyStatus: -1, Protected: paths}, "", &journal.Record{})
	if strings.Contains(notice, "\n") || !strings.Contains(notice, "…") || len(notice) > 600 {
		t.Errorf("notice not clipped to one short line (%d bytes): %q", len(notice), notice)
	}
}

func TestPassed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		out  Outcome
		want bool
	}{
		{"no verify", Outcome{VerifyStatus: -1}, true},
		{"verify passed", Outcome{VerifyStatus: 0}, true},
		{"step failed", Outcome{Status: 1, VerifyStatus: -1}, false},
		{"verify failed", Outcome{VerifyStatus: 1}, false},
		{"timed out", Outcome{VerifyStatus: -1, TimedOut: true}, false},
	}
	for _, tt := range tests {
		if got := tt.out.Passed(); got != tt.want {
			t.Errorf("%s: Passed() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestTouched: a protected path is matched itself and below, never by a
// sibling that shares its prefix.
func TestTouched(t *testing.T) {
	t.Parallel()
	plans := []fork.Plan{{Target: "/", Ops: []fork.Op{{Path: "etc/undosh/policy.yaml"}, {Path: "etc/undosh-other"}, {Path: "var/lib/undosh"}}}}
	got := touched(plans, []string{"/etc/undosh/", "/var/lib/undosh"})
	want := []string{"/etc/undosh/policy.yaml", "/var/lib/undosh"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("touched (-want +got):\n%s", d)
	}
	if got := touched(plans, nil); got != nil {
		t.Errorf("nothing protected: touched %q", got)
	}
}

// TestEngineOff: UNDOSH_NO_FORK_ENGINE turns the engine off whatever the
// machine can do, and says so; without it, Engine agrees with fork.Probe.
func TestEngineOff(t *testing.T) {
	t.Parallel()
	off := func(k string) string {
		if k == "UNDOSH_NO_FORK_ENGINE" {
			return "1"
		}
		return ""
	}
	if ok, why := Engine(off); ok || !strings.Contains(why, "UNDOSH_NO_FORK_ENGINE") {
		t.Errorf("Engine with UNDOSH_NO_FORK_ENGINE=1 = %v, %q", ok, why)
	}
	none := func(string) string { return "" }
	ok, why := Engine(none)
	perr := fork.Probe()
	if ok != (perr == nil) {
		t.Errorf("Engine = %v, %q; fork.Probe = %v", ok, why, perr)
	}
	if !ok && why != perr.Error() || ok && why != "" {
		t.Errorf("Engine's reason %q, fork.Probe's %v", why, perr)
	}
}

// TestContainment: the mode Containment names is one enforce can apply
// here; with the fork engine off it is never the view (Capture), which
// commits through the engine.
func TestContainment(t *testing.T) {
	t.Parallel()
	off := func(k string) string {
		if k == "UNDOSH_NO_FORK_ENGINE" {
			return "1"
		}
		return ""
	}
	mode, ok, why := Containment(off)
	if !ok {
		if why == "" {
			t.Error("no containment, and no reason given")
		}
		if _, err := enforce.Probe(enforce.Auto); err == nil {
			t.Errorf("no containment (%s), but enforce can apply a limit here", why)
		}
		return
	}
	if why != "" {
		t.Errorf("containment %v with a reason %q", mode, why)
	}
	if mode == enforce.Capture {
		t.Error("the view of the machine chosen with the fork engine off")
	}
	if got, err := enforce.Probe(mode); err != nil || got != mode {
		t.Errorf("enforce.Probe(%v) = %v, %v", mode, got, err)
	}
	if full, ok, _ := Containment(func(string) string { return "" }); ok && full != enforce.Capture && mode != full {
		t.Errorf("with the engine on, containment %v; off, %v: only Capture may differ", full, mode)
	}
}

func TestMechanismName(t *testing.T) {
	t.Parallel()
	names := map[string]enforce.Mode{}
	for _, m := range []enforce.Mode{enforce.Capture, enforce.MountNS, enforce.Landlock} {
		n := MechanismName(m)
		if n == "" || n == m.String() {
			t.Errorf("MechanismName(%v) = %q: not said for people", m, n)
		}
		if prev, dup := names[n]; dup {
			t.Errorf("%v and %v have the same name %q", prev, m, n)
		}
		names[n] = m
	}
	if got := MechanismName(enforce.Landlock); !strings.Contains(got, "Landlock") {
		t.Errorf("MechanismName(Landlock) = %q", got)
	}
	if got, want := MechanismName(enforce.Auto), enforce.Auto.String(); got != want {
		t.Errorf("MechanismName(Auto) = %q, want its String %q", got, want)
	}
}

func TestSize(t *testing.T) {
	t.Parallel()
	cpus, mem := Size()
	if cpus != runtime.NumCPU() {
		t.Errorf("Size: %d vCPUs, runtime.NumCPU %d", cpus, runtime.NumCPU())
	}
	if _, err := os.Stat("/proc/meminfo"); err == nil && (mem <= 0 || mem > 1<<20) {
		t.Errorf("Size: %v GiB of memory", mem)
	}
}

// TestKeepNothing: keeping no plans takes the machine lock in the state
// directory, commits nothing and reports nothing to restart.
func TestKeepNothing(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	out, err := Keep(nil, Step{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if out.Changes != 0 || out.Commits != nil || out.Protected != nil || out.Conflict != nil || out.VerifyStatus != -1 {
		t.Errorf("Keep(nil) = %+v", out)
	}
	if fi, err := os.Stat(filepath.Join(state, "machine.lock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("machine lock: %v, %v", fi, err)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v, %v", fi, err)
	}
}

// TestKeepProtected: a plan that changes a protected path is refused
// before anything is committed.
func TestKeepProtected(t *testing.T) {
	t.Parallel()
	plans := []fork.Plan{{Target: "/", Ops: []fork.Op{{Path: "etc/undosh/policy.yaml"}, {Path: "etc/hosts"}}}}
	out, err := Keep(plans, Step{StateDir: t.TempDir(), Protected: []string{"/etc/undosh"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"/etc/undosh/policy.yaml"}, out.Protected); d != "" {
		t.Errorf("protected (-want +got):\n%s", d)
	}
	if out.Changes != 2 || len(out.Commits) != 0 {
		t.Errorf("changes %d, commits %v", out.Changes, out.Commits)
	}
}

// TestUndoNothing: undoing no commits does nothing; a commit that does
// not exist is an error that names it.
func TestUndoNothing(t *testing.T) {
	t.Parallel()
	if err := Undo(nil, false); err != nil {
		t.Errorf("Undo(nil) = %v", err)
	}
	err := Undo([]Commit{{Target: "/", JournalDir: t.TempDir(), ID: "nosuch"}}, false)
	if err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("Undo of a commit that is not there = %v", err)
	}
	var ce *fork.ConflictError
	if errors.As(err, &ce) {
		t.Errorf("a missing commit is not a conflict: %v", err)
	}
}

// A step that names no state directory uses this user's, as undosh
// does: $UNDOSH_STATE_DIR here, and never root's for a user who is not
// root (undohost's local backend names none).
func TestStepStateDir(t *testing.T) {
	if got := (Step{StateDir: "/s"}).stateDir(); got != "/s" {
		t.Errorf("a step naming /s: %q", got)
	}
	dir := t.TempDir()
	t.Setenv("UNDOSH_STATE_DIR", dir)
	if got := (Step{}).stateDir(); got != dir {
		t.Errorf("a step naming none, with UNDOSH_STATE_DIR=%s: %q", dir, got)
	}
}
