package undohost

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/machine"
)

// The cost of the protocol around a local-backend fork: compare
// BenchmarkLocalForkHostlink with BenchmarkLocalForkDirect (bench/host.sh).
// Both run /bin/true in a copy of the machine, which changes nothing.

// BenchmarkLocalForkOverhead alternates, round by round, the engine
// called directly (machine.Run) and the same step through hostlink (a
// Client.Run over a Unix socket to a Server with the Local backend, in
// this process), and reports the medians of each and of their difference:
// direct-ms, hostlink-ms, overhead-ms.
func BenchmarkLocalForkOverhead(b *testing.B) {
	if err := fork.Probe(); err != nil {
		b.Skipf("needs the fork engine: %v", err)
	}
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	c, stop := localServer(b)
	defer stop()
	direct := func() {
		out, err := machine.Run(context.Background(), machine.Step{Argv: []string{"/bin/true"}, Dir: "/", Env: fork.DefaultEnv,
			Stdout: null, Stderr: null, Shell: "/bin/sh"}, true)
		if err != nil || !out.Passed() {
			b.Fatal(out, err)
		}
	}
	i := 0
	viaHost := func() {
		i++
		op, err := c.Run(context.Background(), hostlink.ForkRun{Key: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i),
			Network: hostlink.Network{Mode: "off"}, Step: hostlink.Command{Argv: []string{"/bin/true"}, Cwd: "/"}}, nil, nil)
		if err != nil || op.State != hostlink.StateKept {
			b.Fatal(op, err)
		}
	}
	var ds, hs, diffs []float64
	for b.Loop() {
		t0 := time.Now()
		var d, h time.Duration
		if i%2 == 0 {
			direct()
			t1 := time.Now()
			viaHost()
			d, h = t1.Sub(t0), time.Since(t1)
		} else {
			viaHost()
			t1 := time.Now()
			direct()
			h, d = t1.Sub(t0), time.Since(t1)
		}
		ds, hs, diffs = append(ds, ms(d)), append(hs, ms(h)), append(diffs, ms(h-d))
	}
	b.ReportMetric(median(ds), "direct-ms")
	b.ReportMetric(median(hs), "hostlink-ms")
	b.ReportMetric(median(diffs), "overhead-ms")
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

// localServer serves the Local backend on a Unix socket in this process.
func localServer(b *testing.B) (*hostlink.Client, func()) {
	state := b.TempDir()
	l, err := NewLocal(filepath.Join(state, "local"), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return serve(b, state, l)
}

func serve(b *testing.B, state string, be hostlink.Backend) (*hostlink.Client, func()) {
	srv, err := hostlink.NewServer(hostlink.Options{StateDir: state, Backend: be})
	if err != nil {
		b.Fatal(err)
	}
	dir, _ := os.MkdirTemp("", "uhb")
	sock := filepath.Join(dir, "v.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln, "default")
	id, _ := srv.Identity("default")
	c, err := hostlink.NewClient("unix://"+sock, hostlink.ClientOptions{Token: id.Token})
	if err != nil {
		b.Fatal(err)
	}
	return c, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		os.RemoveAll(dir)
	}
}

// noop is a backend that does nothing: what is left is the protocol's own
// cost (connections, frames, the durable operation record).
type noop struct{}

func (noop) ForkAndRun(context.Context, hostlink.ForkJob) (hostlink.ForkOutcome, error) {
	z := 0
	return hostlink.ForkOutcome{Kept: true, Result: hostlink.Result{StepExit: &z}}, nil
}
func (noop) Checkpoint(context.Context, hostlink.CheckpointJob) (hostlink.CheckpointInfo, error) {
	return hostlink.CheckpointInfo{}, nil
}
func (noop) List(context.Context, string) ([]hostlink.CheckpointInfo, error) { return nil, nil }
func (noop) Restore(context.Context, hostlink.RestoreJob) error              { return nil }

// BenchmarkHostlinkNoop is the protocol alone, around a backend that
// does nothing: connections, frames and the durable operation record
// (whose fsyncs dominate on a disk; set TMPDIR to a tmpfs to see the rest).
func BenchmarkHostlinkNoop(b *testing.B) {
	c, stop := serve(b, b.TempDir(), noop{})
	defer stop()
	i := 0
	for b.Loop() {
		i++
		op, err := c.Run(context.Background(), hostlink.ForkRun{Key: fmt.Sprintf("noop-%d", i),
			Network: hostlink.Network{Mode: "off"}, Step: hostlink.Command{Argv: []string{"/bin/true"}, Cwd: "/"}}, nil, nil)
		if err != nil || op.State != hostlink.StateKept {
			b.Fatal(op, err)
		}
	}
}
