package fork

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/procs"
)

// uniqueSleep is an argv no other process has: sleep with a unique
// duration, which no one mistakes for another's.
func uniqueSleep() string { return fmt.Sprintf("1000.%d%d", time.Now().UnixNano()%1e6, rand.IntN(1e6)) }

// A session that leaves a process running reports it, with its argv,
// cwd, environment and credentials, and the process is gone by the time
// Run returns. Its parent is the init, or another leftover. A subshell
// of the session's bash (the list `cd && sleep` in the background) is
// Forked: its argv is the whole script's.
func TestLeftovers(t *testing.T) {
	c := newCopy(t, Options{})
	secs := uniqueSleep()
	killMarked(t, secs)
	start := time.Now()
	s := runWith(t, c, RunOptions{
		Argv:      []string{"bash", "-c", "cd /tmp && MARK=left setsid sleep " + secs + " & sh -c 'sleep " + secs + "7 & wait' & exit 3"},
		Env:       []string{"PATH=/usr/bin:/bin", "HOME=/root"},
		Timeout:   time.Minute,
		Leftovers: true,
	})
	took := time.Since(start)
	if s.err != nil || s.ExitCode != 3 {
		t.Fatalf("session: %+v, %v, %s", s.Result, s.err, s.stderr)
	}
	if p := processesWith(secs); len(p) > 0 {
		t.Errorf("left running after Run: %v", p)
	}
	var sleep, sh, child, sub procs.Proc
	for _, p := range s.Leftovers {
		switch {
		case p.Comm == "bash":
			sub = p
		case slices.Equal(p.Argv, []string{"sleep", secs}):
			sleep = p
		case len(p.Argv) == 3 && p.Argv[0] == "sh":
			sh = p
		case slices.Equal(p.Argv, []string{"sleep", secs + "7"}):
			child = p
		}
	}
	if sleep.PID == 0 || sh.PID == 0 || child.PID == 0 || sub.PID == 0 || len(s.Leftovers) != 4 {
		t.Fatalf("leftovers: %+v", s.Leftovers)
	}
	if sleep.Cwd != "/tmp" || !slices.Contains(sleep.Env, "MARK=left") || !strings.HasSuffix(sleep.Exe, "/sleep") ||
		sleep.UID != 0 || sleep.GID != 0 || sleep.Session != sleep.PID || sleep.PPID != sub.PID || sleep.Forked || sleep.Start == 0 {
		t.Errorf("the setsid sleep: %+v", sleep)
	}
	at := func(q procs.Proc) int { return slices.IndexFunc(s.Leftovers, q.Same) }
	if !sub.Forked || sub.PPID != 1 || sh.Forked || sub.Cwd != "/tmp" {
		t.Errorf("the subshell: %+v; sh: %+v", sub, sh)
	}
	if child.PPID != sh.PID || sh.PPID != 1 || at(sh) > at(child) || at(sub) > at(sleep) {
		t.Errorf("parents first, and the sh's sleep is its child: sh %+v, child %+v", sh, child)
	}
	if took > 5*time.Second {
		t.Errorf("ending them took %v", took)
	}

	// Without Leftovers, nothing is listed.
	s = runWith(t, c, RunOptions{Argv: []string{"bash", "-c", "sleep " + secs + " &"}})
	if s.err != nil || s.ExitCode != 0 || len(s.Leftovers) != 0 {
		t.Errorf("without Leftovers: %+v, %v", s.Result, s.err)
	}
	// Nor when nothing is left.
	s = runWith(t, c, RunOptions{Argv: []string{"bash", "-c", "sleep 0.001 & wait"}, Leftovers: true})
	if s.err != nil || s.ExitCode != 0 || len(s.Leftovers) != 0 {
		t.Errorf("nothing left: %+v, %v", s.Result, s.err)
	}
}

// Leftovers end on SIGTERM first, and what they write as they stop is in
// the copy; one that ignores SIGTERM is killed after LeftoverGrace. The
// session's timeout does not count that grace: the session has ended.
func TestLeftoversEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("waits LeftoverGrace")
	}
	c := newCopy(t, Options{})
	secs := uniqueSleep()
	killMarked(t, secs)
	start := time.Now()
	s := runWith(t, c, RunOptions{
		Argv: []string{"bash", "-c", `setsid bash -c 'trap "echo stopped > /tmp/undosh-test-bye; exit 0" TERM; while :; do sleep 0.05; done' &
(trap '' TERM; exec sleep ` + secs + `) &
sleep 0.1`},
		Timeout:   2 * time.Second,
		Leftovers: true,
	})
	took := time.Since(start)
	if s.err != nil || s.ExitCode != 0 || s.TimedOut {
		t.Fatalf("session: %+v, %v, %s", s.Result, s.err, s.stderr)
	}
	if took < LeftoverGrace || took > LeftoverGrace+5*time.Second {
		t.Errorf("took %v; want the grace, %v, and little more", took, LeftoverGrace)
	}
	if !slices.ContainsFunc(s.Leftovers, func(p procs.Proc) bool { return slices.Equal(p.Argv, []string{"sleep", secs}) }) {
		t.Errorf("leftovers: %+v", s.Leftovers)
	}
	if p := processesWith(secs); len(p) > 0 {
		t.Errorf("left running after Run: %v", p)
	}
	if v := run(t, c, "cat /tmp/undosh-test-bye"); v.stdout != "stopped\n" {
		t.Errorf("what the leftover wrote on SIGTERM: %+v, %q, %q", v.Result, v.stdout, v.stderr)
	}
}

// BenchmarkLeftovers is what RunOptions.Leftovers adds to a session, in
// one copy, alternating round by round with and without it: for a
// session that leaves nothing (`true`: one non-blocking wait4 in the
// init), and for one that leaves a process (`sleep 100 &`: the settle,
// reading it from /proc, SIGTERM and reaping, against the kernel's kill).
// It reports the medians: off-ms, on-ms and added-ms for each.
func BenchmarkLeftovers(b *testing.B) {
	if err := Probe(); err != nil || Rootless() {
		b.Skipf("needs the root engine: %v", err)
	}
	c, err := Create(Options{StateDir: testStateDir})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Discard()
	for _, tc := range []struct{ name, script string }{{"none-left", "true"}, {"one-left", "sleep 100 &"}} {
		b.Run(tc.name, func(b *testing.B) {
			var off, on, added []float64
			session := func(left bool) time.Duration {
				t0 := time.Now()
				res, err := c.Run(context.Background(), RunOptions{Argv: []string{"/bin/sh", "-c", tc.script}, Leftovers: left})
				if err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
				return time.Since(t0)
			}
			i := 0
			for b.Loop() {
				var a, o time.Duration
				if i%2 == 0 {
					a, o = session(false), session(true)
				} else {
					o, a = session(true), session(false)
				}
				i++
				off, on, added = append(off, ms(a)), append(on, ms(o)), append(added, ms(o)-ms(a))
			}
			b.ReportMetric(median(off), "off-ms")
			b.ReportMetric(median(on), "on-ms")
			b.ReportMetric(median(added), "added-ms")
			b.ReportMetric(slices.Max(off), "off-max-ms")
			b.ReportMetric(slices.Max(on), "on-max-ms")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// Past MaxLeftovers, the processes a session left are counted, not read,
// and ended all the same.
func TestLeftoversMany(t *testing.T) {
	c := newCopy(t, Options{})
	secs := uniqueSleep()
	killMarked(t, secs)
	n := MaxLeftovers + 20
	s := runWith(t, c, RunOptions{Argv: []string{"bash", "-c", fmt.Sprintf("for i in $(seq %d); do sleep %s & done", n, secs)},
		Timeout: time.Minute, Leftovers: true})
	if s.err != nil || s.ExitCode != 0 || len(s.Leftovers) != MaxLeftovers || s.LeftoversUnread != 20 {
		t.Fatalf("%d leftovers: %d read, %d unread, %v, %v", n, len(s.Leftovers), s.LeftoversUnread, s.err, s.ExitCode)
	}
	if p := processesWith(secs); len(p) > 0 {
		t.Errorf("left running after Run: %d", len(p))
	}
}
