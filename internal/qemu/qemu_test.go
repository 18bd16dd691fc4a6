package qemu_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/qemu"
	"github.com/undosh/undosh/internal/vmtest"
)

// run runs script in v and fails t unless it exits 0.
func run(t *testing.T, v *vmtest.VM, script string) string {
	t.Helper()
	out, code, err := v.Run(script, time.Minute)
	if err != nil || code != 0 {
		t.Fatalf("%q in %s: %q, exit %d, %v", script, v.Dir, out, code, err)
	}
	return strings.TrimSpace(out)
}

// A live fork copies the running guest: the copy has the original's
// processes and what they hold in memory, and its disk from the moment
// of the fork; what each does afterwards the other does not see, and the
// original goes on.
func TestFork(t *testing.T) {
	g := vmtest.Build(t)
	orig := vmtest.Boot(t, g, vmtest.Options{})
	// A counter whose secret lives only in its shell's memory, and a
	// file on the disk.
	run(t, orig, `(n=0; s=$RANDOM$RANDOM; while :; do n=$((n+1)); echo "$n $s" > /dev/shm/counter.new; mv /dev/shm/counter.new /dev/shm/counter; sleep 0.1; done) </dev/null >/dev/null 2>&1 &
echo before > /root/f; sync
while [ ! -s /dev/shm/counter ]; do sleep 0.05; done`)
	before := strings.Fields(run(t, orig, "cat /dev/shm/counter"))
	if len(before) != 2 {
		t.Fatalf("the counter: %q", before)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, times, err := orig.Fork(ctx, vmtest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork: the original paused %s, the copy ran after %s, %d MiB sent", times.Paused.Round(time.Millisecond),
		times.Running.Round(time.Millisecond), times.RAM>>20)
	copy := vmtest.Attach(t, c)
	after := strings.Fields(run(t, copy, "cat /dev/shm/counter"))
	if len(after) != 2 || after[1] != before[1] {
		t.Fatalf("the copy's counter %q, the original's before the fork %q: not the same process", after, before)
	}
	if got := run(t, copy, "cat /root/f; echo copy > /root/f; sync; cat /root/f"); got != "before\ncopy" {
		t.Errorf("the copy's disk: %q", got)
	}
	if got := run(t, orig, "cat /root/f"); got != "before" {
		t.Errorf("the original's disk after the copy wrote: %q", got)
	}
	// Both counters go on, each in its own machine.
	for _, v := range []*vmtest.VM{orig, copy} {
		now := strings.Fields(run(t, v, "n=$(cut -d' ' -f1 /dev/shm/counter); while [ \"$(cut -d' ' -f1 /dev/shm/counter)\" = \"$n\" ]; do sleep 0.05; done; cat /dev/shm/counter"))
		if len(now) != 2 || now[1] != before[1] {
			t.Errorf("the counter in %s after the fork: %q", v.Dir, now)
		}
	}
}

// A checkpoint and its restore: the restored machine has the disk and
// the memory of the moment of the checkpoint (the counter resumes from
// there, with its secret), not what came after.
func TestCheckpointRestore(t *testing.T) {
	g := vmtest.Build(t)
	orig := vmtest.Boot(t, g, vmtest.Options{})
	// The counter jumps by 1000 once /root/bump appears: after the
	// checkpoint, the original's does; the restored one, whose disk has
	// no bump, does not.
	run(t, orig, `(n=0; s=$RANDOM$RANDOM; while :; do [ -e /root/bump ] && rm /root/bump && n=$((n+1000)); n=$((n+1)); echo "$n $s" > /dev/shm/counter.new; mv /dev/shm/counter.new /dev/shm/counter; sleep 0.1; done) </dev/null >/dev/null 2>&1 &
echo one > /root/f; sync
while [ ! -s /dev/shm/counter ]; do sleep 0.05; done`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	at := strings.Fields(run(t, orig, "cat /dev/shm/counter"))
	cp, err := orig.Checkpoint(ctx, vmtest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint: paused %s", cp.Paused.Round(time.Millisecond))
	later := strings.Fields(run(t, orig, "echo two > /root/f; n=$(cut -d' ' -f1 /dev/shm/counter); touch /root/bump; sync; while [ \"$(cut -d' ' -f1 /dev/shm/counter)\" -lt $((n + 1000)) ]; do sleep 0.05; done; cat /dev/shm/counter"))
	start := time.Now()
	m, err := qemu.Restore(ctx, cp, vmtest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: running after %s", time.Since(start).Round(time.Millisecond))
	r := vmtest.Attach(t, m)
	if got := run(t, r, "cat /root/f"); got != "one" {
		t.Errorf("the restored disk: %q, want one", got)
	}
	now := strings.Fields(run(t, r, "cat /dev/shm/counter"))
	if len(now) != 2 || now[1] != at[1] {
		t.Fatalf("the restored counter %q, at the checkpoint %q", now, at)
	}
	n, _ := strconv.Atoi(now[0])
	a, _ := strconv.Atoi(at[0])
	if l, _ := strconv.Atoi(later[0]); l < a+1000 || n >= a+1000 {
		t.Errorf("the restored counter is at %d; at the checkpoint it was %d, and the original's went on to %d: not the checkpoint's memory", n, a, l)
	}
}

// BenchmarkFork forks a running guest of 256 MiB, 512 MiB and 1 GiB, and
// checkpoints and restores it, reporting the medians bench/host-qemu.sh
// prints: how long the original paused, when the copy ran, and the
// checkpoint's pause and the restore's time.
func BenchmarkFork(b *testing.B) {
	g := vmtest.Build(b)
	for _, mem := range []int{256, 512, 1024} {
		b.Run(strconv.Itoa(mem)+"MiB", func(b *testing.B) {
			orig := vmtest.Boot(b, g, vmtest.Options{Memory: mem})
			var paused, running, cpPaused, restored []time.Duration
			ctx := context.Background()
			for b.Loop() {
				c, t, err := orig.Fork(ctx, vmtest.TempDir(b))
				if err != nil {
					b.Fatal(err)
				}
				paused, running = append(paused, t.Paused), append(running, t.Running)
				c.Quit(10 * time.Second)
				cp, err := orig.Checkpoint(ctx, vmtest.TempDir(b))
				if err != nil {
					b.Fatal(err)
				}
				cpPaused = append(cpPaused, cp.Paused)
				start := time.Now()
				r, err := qemu.Restore(ctx, cp, vmtest.TempDir(b))
				if err != nil {
					b.Fatal(err)
				}
				restored = append(restored, time.Since(start))
				r.Quit(10 * time.Second)
			}
			b.ReportMetric(vmtest.MS(vmtest.Median(paused)), "paused-ms")
			b.ReportMetric(vmtest.MS(vmtest.Median(running)), "copy-running-ms")
			b.ReportMetric(vmtest.MS(vmtest.Median(cpPaused)), "checkpoint-paused-ms")
			b.ReportMetric(vmtest.MS(vmtest.Median(restored)), "restore-ms")
		})
	}
}

// The copy's qemu dies during the fork's migration: the fork fails with
// an error that says so, and the original runs on, its processes and
// disk as they were. A second fork while one runs is refused.
func TestForkCopyDies(t *testing.T) {
	g := vmtest.Build(t)
	orig := vmtest.Boot(t, g, vmtest.Options{})
	run(t, orig, `(n=0; s=$RANDOM$RANDOM; while :; do n=$((n+1)); echo "$n $s" > /dev/shm/counter.new; mv /dev/shm/counter.new /dev/shm/counter; sleep 0.1; done) </dev/null >/dev/null 2>&1 &
while [ ! -s /dev/shm/counter ]; do sleep 0.05; done`)
	before := strings.Fields(run(t, orig, "cat /dev/shm/counter"))
	second := make(chan error, 1)
	qemu.SetForkHook(func(stage string, c *qemu.Machine) {
		if stage == "migrating" {
			_, _, err := orig.Fork(context.Background(), vmtest.TempDir(t))
			second <- err
			c.Kill()
		}
	})
	defer qemu.SetForkHook(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, _, err := orig.Fork(ctx, vmtest.TempDir(t)); err == nil {
		t.Fatal("a fork whose copy died succeeded")
	} else {
		t.Logf("the fork: %v", err)
	}
	if err := <-second; !errors.Is(err, qemu.ErrBusy) {
		t.Errorf("a second fork during the first: %v, want ErrBusy", err)
	}
	if st, err := orig.QMP().Status(10 * time.Second); err != nil || st != "running" {
		t.Fatalf("the original after the failed fork: %s, %v", st, err)
	}
	now := strings.Fields(run(t, orig, "n=$(cut -d' ' -f1 /dev/shm/counter); while [ \"$(cut -d' ' -f1 /dev/shm/counter)\" = \"$n\" ]; do sleep 0.05; done; cat /dev/shm/counter"))
	if len(now) != 2 || now[1] != before[1] {
		t.Errorf("the original's counter after the failed fork: %q, before %q", now, before)
	}
	if got := run(t, orig, "echo after > /root/g; sync; cat /root/g"); got != "after" {
		t.Errorf("the original's disk after the failed fork: %q", got)
	}
}

// TestOpenStart is the other process of TestOpen: it starts a machine
// and ends, leaving it running.
func TestOpenStart(t *testing.T) {
	dir := os.Getenv("UNDOSH_QEMU_OPEN_DIR")
	if dir == "" {
		t.Skip("run by TestOpen")
	}
	var cfg qemu.Config
	if err := json.Unmarshal([]byte(os.Getenv("UNDOSH_QEMU_OPEN_CONFIG")), &cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := qemu.Start(cfg, dir, os.Getenv("UNDOSH_QEMU_OPEN_ROOT")); err != nil {
		t.Fatal(err)
	}
}

// A machine outlives the process that started it (a provider's command,
// an undohost restarted): another process opens it by its directory and
// forks it.
func TestOpen(t *testing.T) {
	g := vmtest.Build(t)
	dir := vmtest.TempDir(t)
	cfg, _ := json.Marshal(g.Config(vmtest.Options{}))
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenStart$", "-test.v")
	cmd.Env = append(os.Environ(), "UNDOSH_QEMU_OPEN_DIR="+dir, "UNDOSH_QEMU_OPEN_ROOT="+g.Root, "UNDOSH_QEMU_OPEN_CONFIG="+string(cfg))
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		// Whatever happens, the machine the other process left goes.
		var r struct {
			PID int `json:"pid"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "machine.json")); err == nil && json.Unmarshal(b, &r) == nil && r.PID > 0 {
			syscall.Kill(-r.PID, syscall.SIGKILL)
		}
	})
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOpenStart") {
		t.Fatalf("the process that starts the machine: %v\n%s", err, out)
	}
	m, err := qemu.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v := vmtest.Attach(t, m)
	if err := v.WaitReady(); err != nil {
		t.Fatal(err)
	}
	if got := run(t, v, "echo opened"); got != "opened" {
		t.Fatalf("the opened machine's shell: %q", got)
	}
	c, _, err := m.Fork(context.Background(), vmtest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, vmtest.Attach(t, c), "echo copy"); got != "copy" {
		t.Errorf("the copy of the opened machine: %q", got)
	}
	if _, err := qemu.Open(t.TempDir()); err == nil {
		t.Error("Open of a directory with no machine succeeded")
	}
}

// Chain reads qcow2 headers as qemu-img does.
func TestChain(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	mid := filepath.Join(dir, "mid.qcow2")
	top := filepath.Join(dir, "top.qcow2")
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("no qemu-img here (apt-get install qemu-utils)")
	}
	for _, c := range [][]string{{"create", "-q", "-f", "qcow2", base, "1M"},
		{"create", "-q", "-f", "qcow2", "-b", "base.qcow2", "-F", "qcow2", mid},
		{"create", "-q", "-f", "qcow2", "-b", mid, "-F", "qcow2", top}} {
		if out, err := exec.Command("qemu-img", c...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v %s", c, err, out)
		}
	}
	got, err := qemu.Chain(top)
	if want := []string{top, mid, base}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Chain: %v %v, want %v", got, err, want)
	}
	raw := filepath.Join(dir, "raw")
	os.WriteFile(raw, []byte("not an image"), 0o600)
	if got, err := qemu.Chain(raw); err != nil || len(got) != 1 {
		t.Errorf("Chain of a raw file: %v %v", got, err)
	}
}
