package vmtest

import (
	"strings"
	"testing"
	"time"
)

// A guest built from Debian's packages boots under TCG, runs its shell
// on the console, answers QMP, and runs undosh: a machine step whose
// verify fails is discarded by the local engine in the guest's own
// kernel, one that passes is kept.
func TestGuest(t *testing.T) {
	g := Build(t, GoBuild(t, "undosh", "undoctl")...)
	start := time.Now()
	v := Boot(t, g, Options{})
	t.Logf("booted in %s", time.Since(start).Round(time.Millisecond))
	if out, code, err := v.Run("uname -r", time.Minute); err != nil || code != 0 || strings.TrimSpace(out) != g.KernelVersion {
		t.Fatalf("uname -r in the guest: %q, %d, %v; want %s", out, code, err, g.KernelVersion)
	}
	if out, code, err := v.Run("exit 7", time.Minute); err != nil || code != 7 {
		t.Errorf("exit 7 in the guest: %q, %d, %v", out, code, err)
	}
	if st, err := v.QMP().Status(10 * time.Second); err != nil || st != "running" {
		t.Errorf("query-status: %s, %v", st, err)
	}
	out, code, err := v.Run(`cd /root && UNDOSH_VERIFY=false undosh -c 'echo bad > /etc/undosh-vm; cat /etc/undosh-vm'; echo "status $?"; test -e /etc/undosh-vm && echo present || echo absent`, 2*time.Minute)
	if err != nil || !strings.Contains(out, "bad\n") || !strings.Contains(out, "discarded") || !strings.Contains(out, "absent") {
		t.Fatalf("a machine step that fails verify, in the guest: %q, %d, %v", out, code, err)
	}
	out, code, err = v.Run(`cd /root && undosh -c 'echo good > /etc/undosh-vm'; echo "status $?"; cat /etc/undosh-vm`, 2*time.Minute)
	if err != nil || !strings.Contains(out, "status 0") || !strings.Contains(out, "good") {
		t.Fatalf("a machine step that passes, in the guest: %q, %d, %v", out, code, err)
	}
}
