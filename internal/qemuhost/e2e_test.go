package qemuhost_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/internal/qemu"
	"github.com/undosh/undosh/internal/qemuhost"
	"github.com/undosh/undosh/internal/shquote"
	"github.com/undosh/undosh/internal/undohost"
	"github.com/undosh/undosh/internal/vmtest"
)

// rig is a sandbox VM under `undohost qemu`, with undohost serving it
// by the worked example's configuration (docs/examples/qemu).
type rig struct {
	t                 *testing.T
	undohost          string
	root, state, conf string
	uh                *exec.Cmd
	starts            int
}

// hq runs `undohost qemu --root ROOT args…`.
func (r *rig) hq(args ...string) (string, error) {
	cmd := exec.Command(r.undohost, append([]string{"qemu", "--root", r.root}, args...)...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("%v: %s", err, ee.Stderr)
	}
	return string(out), err
}

// vm is the id of the sandbox's VM now.
func (r *rig) vm() string {
	r.t.Helper()
	h := qemuhost.Host{Root: r.root}
	sb, err := h.ReadSandbox("default")
	if err != nil {
		r.t.Fatal(err)
	}
	return sb.VM
}

// run runs script in the sandbox's VM, through its guest agent (the
// provider's exec): the console would do, but a capture can cut a
// script in flight on it.
func (r *rig) run(script string) string {
	r.t.Helper()
	out, st := r.try(script)
	if st != 0 {
		r.t.Fatalf("%q in the guest: %q, exit %d", script, out, st)
	}
	return strings.TrimSpace(out)
}

// try runs script in the sandbox's VM and returns its output and status.
func (r *rig) try(script string) (string, int) {
	r.t.Helper()
	cmd := exec.Command(r.undohost, "qemu", "--root", r.root, "exec", r.vm(), "/root", "--", "/bin/bash", "-c", script)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		r.t.Fatalf("exec in the guest: %v: %s", err, out)
	}
	return string(out), 0
}

// startHost starts undohost and waits until its log says it has started
// (and so has told the VM who it is).
func (r *rig) startHost() {
	r.t.Helper()
	r.uh = exec.Command(r.undohost, "--backend", "provider", "--config", r.conf, "--state", r.state)
	log, _ := os.Create(filepath.Join(r.state, "stderr"))
	r.uh.Stdout, r.uh.Stderr = log, log
	if err := r.uh.Start(); err != nil {
		r.t.Fatal(err)
	}
	uh := r.uh
	r.t.Cleanup(func() { uh.Process.Kill(); uh.Wait() })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if n := undohost.Starts(r.state); n > r.starts {
			r.starts = n
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(r.state, "stderr"))
			b, _ := os.ReadFile(filepath.Join(r.state, "undohost.log"))
			r.t.Fatalf("undohost did not start: %s\n%s", out, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// step starts undosh -c script in the guest, detached (the VM that
// runs it may be replaced while it waits), and returns what it printed
// and its status, read from whichever VM is the sandbox's when it ends.
func (r *rig) step(name, verify, script string) (string, int) {
	r.t.Helper()
	r.detach(name, "UNDOSH_VERIFY="+shquote.Word(verify)+" undosh -c "+shquote.Word(script))
	return r.wait(name)
}

// detach starts command in the guest in a session of its own, its
// output to /root/NAME.out and its status to /root/NAME.st.
func (r *rig) detach(name, command string) {
	r.t.Helper()
	inner := "export UNDOSH_HOST=unix:///run/undosh-host.sock; " + command + " >/root/" + name + ".out 2>&1; echo $? > /root/" + name + ".st.new; mv /root/" + name + ".st.new /root/" + name + ".st"
	// The VM may be replaced before the agent's answer (undoctl back).
	r.try("cd /root && setsid sh -c " + shquote.Word(inner) + " </dev/null >/dev/null 2>&1 &")
}

// wait polls the sandbox's VM until step name has ended.
func (r *rig) wait(name string) (string, int) {
	r.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, code := r.try(fmt.Sprintf("cat /root/%s.st && cat /root/%[1]s.out", name))
		if code == 0 {
			st, rest, _ := strings.Cut(out, "\n")
			var n int
			fmt.Sscan(st, &n)
			return rest, n
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("step %s did not end within 3 minutes: %q", name, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// counter reads the guest's counter: its count and the secret it holds
// in memory only.
func (r *rig) counter() (int, string) {
	r.t.Helper()
	var n int
	var secret string
	fmt.Sscan(r.run("cat /dev/shm/counter"), &n, &secret)
	return n, secret
}

// who is what the guest's agent was told last.
func (r *rig) who() map[string]any {
	r.t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(r.run("cat /var/lib/undosh/host.json")), &w); err != nil {
		r.t.Fatal(err)
	}
	return w
}

func newRig(t *testing.T) *rig {
	bins := vmtest.GoBuild(t, "undosh", "undoctl", "undohost")
	g := vmtest.Build(t, bins[0], bins[1])
	r := &rig{t: t, undohost: bins[2]}
	base := vmtest.TempDir(t)
	r.root, r.state = filepath.Join(base, "qemu"), filepath.Join(base, "state")
	os.MkdirAll(r.state, 0o700)
	listener := filepath.Join(base, "default.sock")
	// The worked example, with this test's paths, and a qemu wrapper
	// that fails while fail-copy exists: a copy that never boots.
	wrapper := filepath.Join(base, "qemu-wrapper")
	os.WriteFile(wrapper, []byte("#!/bin/sh\n[ -e "+shquote.Word(filepath.Join(base, "fail-copy"))+" ] && { echo 'qemu-wrapper: failing as asked' >&2; exit 1; }\nexec qemu-system-x86_64 \"$@\"\n"), 0o755)
	ex, err := os.ReadFile("../../docs/examples/qemu/undohost.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer("unix:///run/undohost/default.sock", "unix://"+listener,
		"/usr/local/bin/undohost", r.undohost, "/var/lib/undohost/qemu", r.root, "qemu: qemu-system-x86_64", "qemu: "+wrapper).Replace(string(ex))
	r.conf = filepath.Join(base, "undohost.yaml")
	os.WriteFile(r.conf, []byte(conf), 0o600)
	t.Cleanup(func() {
		if t.Failed() {
			// Without its refusals of stale tokens, which an undosh in
			// the guest may repeat every second: counted instead.
			b, _ := os.ReadFile(filepath.Join(r.state, "undohost.log"))
			var kept []string
			refused := 0
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, `"msg":"refused"`) {
					refused++
					continue
				}
				kept = append(kept, l)
			}
			t.Logf("undohost.log (%d refusals left out):\n%s", refused, vmtest.Tail([]byte(strings.Join(kept, "\n")), 12000))
			b, _ = os.ReadFile(filepath.Join(r.root, "qemu.log"))
			t.Logf("qemu.log:\n%s", vmtest.Tail(b, 4000))
			logs, _ := filepath.Glob(filepath.Join(r.root, "logs", "*.log"))
			// The VMs still running: the sandbox's, what its agent said.
			cons, _ := filepath.Glob(filepath.Join(r.root, "vms", "*", "console.log"))
			logs = append(logs, cons...)
			for _, l := range logs {
				b, _ = os.ReadFile(l)
				t.Logf("%s:\n%s", strings.TrimPrefix(l, r.root+"/"), vmtest.Tail(b, 3000))
			}
		}
		if _, err := r.hq("stop", "default"); err != nil {
			t.Errorf("stop: %v", err)
		}
		// Whatever stop left running is ended by its recorded pid.
		dirs, _ := filepath.Glob(filepath.Join(r.root, "vms", "*"))
		for _, d := range dirs {
			if info, err := qemu.Inspect(d); err == nil && info.Running {
				t.Errorf("stop left %s running: killed", d)
				syscall.Kill(-info.PID, syscall.SIGKILL)
			}
		}
	})
	if _, err := r.hq("boot", "default", "--listener", listener, "--kernel", g.Kernel, "--initrd", g.Initrd,
		"--disk", g.Root, "--memory", "256"); err != nil {
		t.Fatal(err)
	}
	m, err := qemu.Open(filepath.Join(r.root, "vms", r.vm()))
	if err != nil {
		t.Fatal(err)
	}
	v := vmtest.Attach(t, m)
	m.QMP().Close() // QMP serves one client: undohost's commands need it
	if err := v.WaitReady(); err != nil {
		t.Fatal(err)
	}
	// The guest's side: its network (slirp's), the agent, and a counter
	// whose secret lives in its shell's memory only.
	rc, err := os.ReadFile("../../docs/examples/qemu/guest-rc.local")
	if err != nil {
		t.Fatal(err)
	}
	counter := `setsid bash -c 'n=0; s=$RANDOM$RANDOM; while :; do n=$((n+1)); echo "$n $s" > /dev/shm/counter.new; mv /dev/shm/counter.new /dev/shm/counter; sleep 0.2; done' </dev/null >/dev/null 2>&1 &
while [ ! -s /dev/shm/counter ]; do sleep 0.05; done`
	// What the agent logs reaches the console too, whose tail the
	// provider keeps of a VM that ends: the last words of a copy.
	tail := "setsid tail -qF /var/lib/undosh/run/agent.log /var/log/undoctl-agent.log </dev/null >/dev/console 2>&1 &"
	if out, code, err := v.Run(string(rc)+"\n"+tail+"\n"+counter, time.Minute); err != nil || code != 0 {
		t.Fatalf("guest-rc.local and the counter: %q %d %v", out, code, err)
	}
	r.startHost()
	return r
}

// undosh in a QEMU guest, undohost with the QEMU provider on the host:
// a machine step whose verify fails runs in a live fork that is
// discarded, leaving the sandbox's VM as it was, memory included; one
// whose verify passes is promoted, and the processes of the VM go on in
// the copy; undoctl back puts the VM back to a checkpoint, disk and
// memory; a copy that cannot boot, and an undohost killed during a step,
// each cost the step and leave the sandbox running, with one clear line.
func TestEndToEnd(t *testing.T) {
	r := newRig(t)
	if w := r.who(); w["role"] != "primary" || w["generation"].(float64) < 2 {
		t.Fatalf("the guest was not told who it is at undohost's start: %v", w)
	}
	vm0 := r.vm()
	n0, secret := r.counter()

	// A: verify fails.
	out, st := r.step("a", "grep -q good /etc/e2e", "echo bad > /etc/e2e")
	if st == 0 || !strings.Contains(out, "discarded") {
		t.Fatalf("step a: status %d, %q", st, out)
	}
	if vm := r.vm(); vm != vm0 {
		t.Errorf("step a replaced the sandbox's VM (%s, was %s)", vm, vm0)
	}
	if got := r.run("cat /etc/e2e 2>/dev/null || echo absent"); got != "absent" {
		t.Errorf("/etc/e2e after a discarded step: %q", got)
	}
	n1, s1 := r.counter()
	if s1 != secret || n1 <= n0 {
		t.Errorf("the counter after a discarded step: %d %s, was %d %s", n1, s1, n0, secret)
	}
	if left, _ := filepath.Glob(filepath.Join(r.root, "vms", "copy-*", "machine.json")); len(left) != 0 {
		t.Errorf("copies left after a discard: %v", left)
	}

	// B: verify passes: the copy is the sandbox now, and the counter
	// goes on in it.
	out, st = r.step("b", "grep -q good /etc/e2e", "echo good > /etc/e2e")
	if st != 0 {
		t.Fatalf("step b: status %d, %q", st, out)
	}
	vm1 := r.vm()
	if vm1 == vm0 || !strings.HasPrefix(vm1, "copy-") {
		t.Errorf("after a kept step the sandbox's VM is %s (was %s)", vm1, vm0)
	}
	if got := r.run("cat /etc/e2e"); got != "good" {
		t.Errorf("/etc/e2e after a kept step: %q", got)
	}
	n2, s2 := r.counter()
	if s2 != secret || n2 <= n1 {
		t.Errorf("the counter in the promoted VM: %d %s, was %d %s", n2, s2, n1, secret)
	}
	// undoctl cost counts the checkpoint with the bytes the provider
	// measured.
	if got := r.run("undoctl cost --json"); !strings.Contains(got, `"snapshot_bytes":`) {
		t.Errorf("undoctl cost after a kept step: %s", got)
	}

	// undoctl back 1: the VM from before step b, disk and memory.
	r.detach("back", "undoctl back 1")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if vm := r.vm(); vm != vm1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("undoctl back did not replace the VM: %s", r.run("cat /root/back.out /root/back.st 2>&1 || true"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := r.run("cat /etc/e2e 2>/dev/null || echo absent"); got != "absent" {
		t.Errorf("/etc/e2e after undoctl back 1: %q", got)
	}
	n3, s3 := r.counter()
	if s3 != secret || n3 >= n2 {
		t.Errorf("the counter after the restore: %d %s; it was %d before step b's end", n3, s3, n2)
	}
	if w := r.who(); w["role"] != "restored" {
		t.Errorf("the restored VM was told %v", w)
	}

	// C: the copy cannot boot.
	os.WriteFile(filepath.Join(filepath.Dir(r.root), "fail-copy"), nil, 0o600)
	vm2 := r.vm()
	out, st = r.step("c", "true", "echo c > /etc/e2e-c")
	os.Remove(filepath.Join(filepath.Dir(r.root), "fail-copy"))
	if st == 0 || strings.Count(strings.TrimSpace(out), "\n") > 2 {
		t.Errorf("step c whose copy cannot boot: status %d, %q", st, out)
	}
	t.Logf("step c: status %d: %s", st, out)
	if vm := r.vm(); vm != vm2 {
		t.Errorf("step c changed the sandbox's VM")
	}
	if got := r.run("cat /etc/e2e-c 2>/dev/null || echo absent"); got != "absent" {
		t.Errorf("/etc/e2e-c: %q", got)
	}

	// D: undohost killed while the step runs in the copy.
	r.detach("d", "UNDOSH_VERIFY=true undosh -c 'echo d > /etc/e2e-d; exec sleep 600'")
	deadline = time.Now().Add(2 * time.Minute)
	for running := false; !running; {
		owners, _ := filepath.Glob(filepath.Join(r.root, "vms", "copy-*", "owner.json"))
		for _, o := range owners {
			b, _ := os.ReadFile(o)
			running = running || strings.Contains(string(b), `"role":"copy"`)
		}
		if !running && time.Now().After(deadline) {
			t.Fatal("step d's copy never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.uh.Process.Signal(syscall.SIGKILL)
	r.uh.Wait()
	r.startHost()
	out, st = r.wait("d")
	if st == 0 {
		t.Errorf("step d after undohost's restart: status 0, %q", out)
	}
	t.Logf("step d: status %d: %s", st, out)
	if got := r.run("cat /etc/e2e-d 2>/dev/null || echo absent"); got != "absent" {
		t.Errorf("/etc/e2e-d: %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(r.root, "vms", "copy-*", "machine.json")); len(left) != 0 {
		t.Errorf("copies left after the restart: %v", left)
	}
	n4, s4 := r.counter()
	if s4 != secret || n4 <= n3 {
		t.Errorf("the counter at the end: %d %s", n4, s4)
	}
}
