package qemuhost_test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/qemu"
	"github.com/undosh/undosh/internal/qemuhost"
	"github.com/undosh/undosh/internal/vmtest"
)

// BenchmarkProvider times the provider's commands as undohost runs them
// (a process each), at 256 MiB, 512 MiB and 1 GiB, idle and with 64 MiB
// of memory written between forks (dirty): fork (until the copy runs),
// the original's pause in it, discard (delete), promote, checkpoint and
// restore, and a command that does nothing (network off): what the
// helper itself costs over the QMP operations.
func BenchmarkProvider(b *testing.B) {
	bins := vmtest.GoBuild(b, "undohost")
	g := vmtest.Build(b)
	for _, mem := range []int{256, 512, 1024} {
		for _, dirty := range []bool{false, true} {
			name := strconv.Itoa(mem) + "MiB"
			if dirty {
				name += "-dirty"
			}
			b.Run(name, func(b *testing.B) {
				root := filepath.Join(vmtest.TempDir(b), "qemu")
				hq := func(args ...string) (string, time.Duration) {
					b.Helper()
					began := time.Now()
					out, err := exec.Command(bins[0], append([]string{"qemu", "--root", root}, args...)...).CombinedOutput()
					took := time.Since(began)
					if err != nil {
						b.Fatalf("undohost qemu %v: %v: %s", args, err, out)
					}
					return strings.TrimSpace(string(out)), took
				}
				hq("boot", "sb", "--listener", filepath.Join(root, "none.sock"), "--kernel", g.Kernel, "--initrd", g.Initrd,
					"--disk", g.Root, "--memory", strconv.Itoa(mem))
				b.Cleanup(func() { hq("stop", "sb") })
				h := &qemuhost.Host{Root: root}
				vm := func() *vmtest.VM {
					sb, err := h.ReadSandbox("sb")
					if err != nil {
						b.Fatal(err)
					}
					m, err := qemu.Open(filepath.Join(root, "vms", sb.VM))
					if err != nil {
						b.Fatal(err)
					}
					v := vmtest.Attach(b, m)
					m.QMP().Close()
					return v
				}
				v := vm()
				if err := v.WaitReady(); err != nil {
					b.Fatal(err)
				}
				var fork, discard, promote, snap, restore, noop []time.Duration
				i := 0
				for b.Loop() {
					i++
					if dirty {
						if _, code, err := v.Run("dd if=/dev/urandom of=/dev/shm/dirty bs=1M count=64 2>/dev/null", time.Minute); err != nil || code != 0 {
							b.Fatalf("dirty: %d %v", code, err)
						}
					}
					c, d := hq("fork", "sb", "d"+strconv.Itoa(i))
					fork = append(fork, d)
					_, d = hq("network", c, "off")
					noop = append(noop, d)
					_, d = hq("delete", c)
					discard = append(discard, d)
					c, _ = hq("fork", "sb", "p"+strconv.Itoa(i))
					_, d = hq("promote", "sb", c)
					promote = append(promote, d)
					_, d = hq("snapshot", "sb", "s"+strconv.Itoa(i))
					snap = append(snap, d)
					_, d = hq("restore", "sb", "s"+strconv.Itoa(i))
					restore = append(restore, d)
					hq("delete-snapshot", "sb", "s"+strconv.Itoa(i))
					v = vm()
				}
				b.ReportMetric(vmtest.MS(vmtest.Median(fork)), "fork-ms")
				b.ReportMetric(vmtest.MS(vmtest.Median(discard)), "discard-ms")
				b.ReportMetric(vmtest.MS(vmtest.Median(promote)), "promote-ms")
				b.ReportMetric(vmtest.MS(vmtest.Median(snap)), "checkpoint-ms")
				b.ReportMetric(vmtest.MS(vmtest.Median(restore)), "restore-ms")
				b.ReportMetric(vmtest.MS(vmtest.Median(noop)), "helper-ms")
			})
		}
	}
}
