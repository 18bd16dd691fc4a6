package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitFor waits until cond holds: an event the test can only poll for.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the event never came")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// needForkEngine skips when the local fork engine cannot run here.
func needForkEngine(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("machine steps need root (the local fork engine mounts overlays in new namespaces)")
	}
	if data, err := os.ReadFile("/proc/filesystems"); err != nil || !bytes.Contains(data, []byte("overlay")) {
		if exec.Command("modprobe", "overlay").Run() != nil {
			t.Skip("machine steps need overlayfs, which this kernel does not offer")
		}
	}
}

// machineEnv is an environment for machine steps with its own state
// directory and workspace.
func machineEnv(t *testing.T) (env []string, ws string) {
	ws = t.TempDir()
	return append(os.Environ(), "UNDOSH_STATE_DIR="+t.TempDir(), "HOME="+t.TempDir(), "UNDOSH_POLICY=-"), ws
}

// harmless is a path under /etc that no one else uses, removed at the end
// whatever happens.
func harmless(t *testing.T) string {
	p := fmt.Sprintf("/etc/undosh-test-%d-%x", os.Getpid(), rand.Uint64())
	t.Cleanup(func() { os.Remove(p) })
	return p
}

func lastRecord(t *testing.T, env []string) map[string]any {
	t.Helper()
	recs := journalRecords(t, env)
	return recs[len(recs)-1]
}

// A machine-changing step runs in a copy of the machine: committed when it
// passes, discarded when it or verify fails, and undone by undoctl back.
func TestMachineSteps(t *testing.T) {
	needForkEngine(t)
	env, ws := machineEnv(t)

	p := harmless(t)
	got := runWith(t, undoshBin, ws, env, "bash", "-c", "echo committed > "+p+"; cat "+p)
	if got.code != 0 || got.stdout != "committed\n" || got.stderr != "" {
		t.Fatalf("passing machine step: %+v", got)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "committed\n" {
		t.Fatalf("%s after the commit: %q, %v", p, b, err)
	}
	rec := lastRecord(t, env)
	if rec["class"] != "fork" || rec["outcome"] != "committed" || rec["machine"] == nil {
		t.Errorf("journal: %v", rec)
	}
	id := fmt.Sprint(rec["id"])

	// undoctl back takes it away again.
	back := runWith(t, undoctlBin, ws, env, "undoctl", "back", id)
	if back.code != 0 {
		t.Fatalf("undoctl back %s: %+v", id, back)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s is still there after undoctl back: %v", p, err)
	}

	// The step's bash has the caller's argv[0]: $0 and $BASH are what
	// bash alone gives.
	want := runWith(t, "/bin/bash", ws, env, "bash", "-c", `echo "$0|$BASH"`)
	got = runWith(t, undoshBin, ws, env, "bash", "-c", `echo "$0|$BASH" | tee `+harmless(t))
	if got.stdout != want.stdout || got.code != 0 || lastRecord(t, env)["class"] != "fork" {
		t.Errorf("$0|$BASH in a machine step: %+v, bash gives %q", got, want.stdout)
	}

	// What a kept step writes in /tmp and /var/tmp is kept with it: a
	// harness reads its cwd file from there after the step.
	for _, dir := range []string{"/tmp", "/var/tmp"} {
		scratch := filepath.Join(dir, filepath.Base(harmless(t)))
		t.Cleanup(func() { os.Remove(scratch) })
		got = runWith(t, undoshBin, ws, env, "bash", "-c", "echo kept > "+harmless(t)+"; pwd -P > "+scratch)
		if got.code != 0 || got.stderr != "" {
			t.Fatalf("machine step writing %s: %+v", scratch, got)
		}
		if b, err := os.ReadFile(scratch); err != nil || string(b) != ws+"\n" {
			t.Errorf("%s after the commit: %q, %v (want the step's cwd)", scratch, b, err)
		}
	}

	// A failing step is discarded: the machine never sees it.
	q := harmless(t)
	got = runWith(t, undoshBin, ws, env, "bash", "-c", "echo x > "+q+"; exit 3")
	if got.code != 3 || !strings.Contains(got.stderr, "in a copy of the machine, so the copy was discarded") {
		t.Errorf("failing machine step: %+v", got)
	}
	if _, err := os.Lstat(q); !os.IsNotExist(err) {
		t.Errorf("a failed step's file reached the machine: %v", err)
	}
	if rec := lastRecord(t, env); rec["outcome"] != "discarded" {
		t.Errorf("journal: %v", rec)
	}

	// A step that passes but whose verify fails is discarded too, with
	// verify's status.
	got = runWith(t, undoshBin, ws, append(env, "UNDOSH_VERIFY=test -s "+q), "bash", "-c", "touch "+q)
	if got.code != 1 || !strings.Contains(got.stderr, "verify `test -s") {
		t.Errorf("machine step whose verify fails: %+v", got)
	}
	if _, err := os.Lstat(q); !os.IsNotExist(err) {
		t.Errorf("a step whose verify failed reached the machine: %v", err)
	}

	// The copy is offline: a listener on the machine's loopback cannot be
	// reached from inside (it can from outside).
	if _, err := exec.LookPath("curl"); err == nil {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }))
		defer srv.Close()
		got = runWith(t, undoshBin, ws, env, "bash", "-c", "echo > "+q+"; curl -s "+srv.URL+" || echo offline")
		if got.stdout != "offline\n" {
			t.Errorf("network inside the copy: %+v", got)
		}
		undoLast(t, env, ws)
		if out, _ := exec.Command("curl", "-s", srv.URL).Output(); string(out) != "reached" {
			t.Errorf("the server is not reachable from the machine either (%q): the test proves nothing", out)
		}
	}
}

// undoLast undoes the last step with undoctl back, so that the machine
// and the fork engine's journal are left as they were.
func undoLast(t *testing.T, env []string, ws string) {
	t.Helper()
	id := fmt.Sprint(lastRecord(t, env)["id"])
	if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", id); back.code != 0 {
		t.Errorf("undoctl back %s: %+v", id, back)
	}
}

func journalRecords(t *testing.T, env []string) []map[string]any {
	t.Helper()
	var sd string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "UNDOSH_STATE_DIR="); ok {
			sd = v
		}
	}
	data, err := os.ReadFile(filepath.Join(sd, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// dpkg -i of a tiny package built here is committed, then undone: dpkg
// forgets it and its audit is clean.
func TestMachineStepDpkg(t *testing.T) {
	needForkEngine(t)
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb is not installed")
	}
	env, ws := machineEnv(t)
	name, deb := buildDeb(t, t.TempDir())
	got := runWith(t, undoshBin, ws, append(env, "UNDOSH_VERIFY=dpkg -s "+name), "bash", "-c", "dpkg -i "+deb)
	if got.code != 0 {
		t.Fatalf("dpkg -i in a machine step: %+v", got)
	}
	if out, err := exec.Command("dpkg", "-s", name).CombinedOutput(); err != nil || !strings.Contains(string(out), "install ok installed") {
		t.Fatalf("after the commit, dpkg -s: %v\n%s", err, out)
	}
	id := fmt.Sprint(lastRecord(t, env)["id"])
	back := runWith(t, undoctlBin, ws, env, "undoctl", "back", id)
	if back.code != 0 {
		t.Fatalf("undoctl back %s: %+v", id, back)
	}
	debUndone(t, name)
}

// debUndone checks that undoctl back took the package name off the
// machine: dpkg no longer knows it, has nothing half-done, and its files
// are gone.
func debUndone(t *testing.T, name string) {
	t.Helper()
	if err := exec.Command("dpkg", "-s", name).Run(); err == nil {
		t.Errorf("dpkg still knows %s after undoctl back", name)
	}
	if out, _ := exec.Command("dpkg", "--audit").CombinedOutput(); len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("dpkg --audit after the undo:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join("/usr/share", name)); !os.IsNotExist(err) {
		t.Errorf("the package's files are still there: %v", err)
	}
}

// buildDeb builds, in dir, a tiny package with one file,
// /usr/share/NAME/hello, and purges it when the test ends; it returns
// the package's name and the .deb.
func buildDeb(t *testing.T, dir string) (name, deb string) {
	t.Helper()
	name = fmt.Sprintf("undosh-test-pkg-%x", rand.Uint32())
	t.Cleanup(func() { exec.Command("dpkg", "--purge", name).Run() })
	pkg := filepath.Join(dir, "pkg")
	os.MkdirAll(filepath.Join(pkg, "DEBIAN"), 0o755)
	os.MkdirAll(filepath.Join(pkg, "usr/share", name), 0o755)
	os.WriteFile(filepath.Join(pkg, "DEBIAN/control"), []byte("Package: "+name+"\nVersion: 1.0\nArchitecture: all\nMaintainer: undosh tests <tests@example.invalid>\nDescription: a package undosh's tests install and remove\n"), 0o644)
	os.WriteFile(filepath.Join(pkg, "usr/share", name, "hello"), []byte("hello\n"), 0o644)
	deb = filepath.Join(dir, name+".deb")
	if out, err := exec.Command("dpkg-deb", "--build", "--root-owner-group", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	os.RemoveAll(pkg)
	return name, deb
}

// Two machine steps at once: the second waits for the first (its copy is
// made after the first is committed, so it sees its file), and nothing
// corrupts. Both are undone, last first.
func TestMachineStepsQueue(t *testing.T) {
	needForkEngine(t)
	env, ws := machineEnv(t)
	a, b := harmless(t), harmless(t)
	// The first step waits for a line on its stdin, which reaches the
	// copy as it is (a file on the machine would not: the copy does not
	// see changes to the machine once it has looked).
	first := exec.Command(undoshBin, "-c", fmt.Sprintf("echo a > %s; echo started; read -r line", a))
	first.Args[0] = "bash"
	first.Dir, first.Env = ws, env
	gate, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("started\n"))
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "started\n" {
		t.Fatalf("first step: %q, %v", line, err)
	}
	// The first step is inside its copy now; the second must wait for it.
	second := exec.Command(undoshBin, "-c", fmt.Sprintf("cat %s 2>/dev/null || echo missing; echo b > %s", a, b))
	second.Args[0] = "bash"
	second.Dir, second.Env = ws, env
	var out2 bytes.Buffer
	second.Stdout = &out2
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	// Release the first only once the second has begun its step (its mark
	// is in the journal's active directory), so that it really waits.
	var sd string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "UNDOSH_STATE_DIR="); ok {
			sd = v
		}
	}
	waitFor(t, func() bool {
		ents, _ := os.ReadDir(filepath.Join(sd, "active"))
		n := 0
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				n++
			}
		}
		return n >= 2
	})
	if _, err := gate.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first step: %v", err)
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("second step: %v", err)
	}
	if out2.String() != "a\n" {
		t.Errorf("the second step saw %q: it did not wait for the first to be committed", out2.String())
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was not committed: %v", p, err)
		}
	}
	recs := journalRecords(t, env)
	if len(recs) != 2 || recs[0]["outcome"] != "committed" || recs[1]["outcome"] != "committed" {
		t.Fatalf("journal: %v", recs)
	}
	// Last first.
	for _, i := range []int{1, 0} {
		id := fmt.Sprint(recs[i]["id"])
		if back := runWith(t, undoctlBin, ws, env, "undoctl", "back", id); back.code != 0 {
			t.Errorf("undoctl back %s: %+v", id, back)
		}
	}
	for _, p := range []string{a, b} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after undoing both: %v", p, err)
		}
	}
}

// Inside a machine step's copy, a nested undosh (bash, once installed)
// takes the copy as its protection: a machine-changing command there runs
// as part of the step, and is committed with it.
func TestMachineStepNested(t *testing.T) {
	needForkEngine(t)
	env, ws := machineEnv(t)
	a, b := harmless(t), harmless(t)
	got := runWith(t, undoshBin, ws, append(env, "UNDOSH="+undoshBin), "bash", "-c",
		fmt.Sprintf(`echo a > %s; "$UNDOSH" -c 'echo b > %s'`, a, b))
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("nested machine step: %+v", got)
	}
	for _, p := range []string{a, b} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was not committed: %v", p, err)
		}
	}
	if recs := journalRecords(t, env); len(recs) != 1 {
		t.Errorf("the nested command made %d journal records, want the outer step's only", len(recs))
	}
	undoLast(t, env, ws)
}

// Through the front end, as a harness's wrapper runs it: the nested
// front end in the copy must not reach the machine's server or write
// the state directory that the commit would carry (the copy hides it).
func TestMachineStepNestedFront(t *testing.T) {
	needForkEngine(t)
	needFast(t)
	env, ws := machineEnv(t)
	state := strings.TrimPrefix(env[slices.IndexFunc(env, func(s string) bool { return strings.HasPrefix(s, "UNDOSH_STATE_DIR=") })], "UNDOSH_STATE_DIR=")
	serverFor(t, state)
	// bash in PATH is the front end, as an install makes it.
	bin := t.TempDir()
	if err := os.Symlink(fastBin, filepath.Join(bin, "bash")); err != nil {
		t.Fatal(err)
	}
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + bin + ":" + v
		}
	}
	p := harmless(t)
	got := runWith(t, fastBin, ws, env, "bash", "-c", "export PATH=/x:$PATH; exec bash -c 'echo kept > "+p+"'")
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("a machine step through a nested front end: %+v", got)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "kept\n" {
		t.Fatalf("%s was not committed: %q, %v", p, b, err)
	}
	if rec := lastRecord(t, env); rec["outcome"] != "committed" || len(rec["machine"].([]any)) != 1 {
		t.Errorf("journal: %v", rec)
	}
	undoLast(t, env, ws)
}

// With rollback: never, a machine step that fails keeps what it did, as
// it would without undosh, and says nothing: in the local engine's copy
// and in a host's fork alike. The policy's verify does not run.
func TestMachineStepRollbackNever(t *testing.T) {
	needForkEngine(t)
	env, ws := machineEnv(t)
	env = append(env, writePolicy(t, "version: 1\nrollback: never\nverify: \"exit 9\"\n"))
	for _, host := range []string{"", startHost(t)} {
		p := harmless(t)
		got := runWith(t, undoshBin, ws, append(env, "UNDOSH_HOST="+host), "bash", "-c", "echo kept > "+p+"; cat "+p+"; exit 3")
		if got.code != 3 || got.stdout != "kept\n" || got.stderr != "" {
			t.Errorf("host %q: a failing machine step under rollback: never: %+v, want exit 3, its output and no notice", host, got)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "kept\n" {
			t.Errorf("host %q: %s after the step: %q, %v; want it kept", host, p, b, err)
		}
		if rec := lastRecord(t, env); rec["outcome"] != "committed" || (host != "") != (rec["host_op"] != nil) {
			t.Errorf("host %q: journal: %v", host, rec)
		}
		undoCommitOf(t, strings.TrimPrefix(p, "/"))
	}
}
