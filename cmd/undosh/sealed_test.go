package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A sandbox around undosh (Codex's -s workspace-write, a read-only bind
// mount) may keep the state directory read-only. A step that may write
// its workspace is then refused, saying why and what to change; one
// whose workspace is read-only too runs as bash runs it, since nothing
// it can change needs undoing. The sandbox is a private mount namespace
// with read-only bind mounts, so the test leaves nothing behind.
func TestSealedStateDir(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("read-only bind mounts in a private mount namespace need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	t.Parallel()
	state, ws, ro := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sandbox := func(t *testing.T, dir, shell, step string) ran {
		t.Helper()
		script := `set -e
for d in "$STATE" "$RO"; do mount --bind "$d" "$d"; mount -o remount,bind,ro "$d"; done
cd "$DIR"
set +e
exec -a bash "$SHELL_UNDER_TEST" -c "$STEP"
`
		env := append(os.Environ(), "STATE="+state, "RO="+ro, "DIR="+dir, "SHELL_UNDER_TEST="+shell, "STEP="+step,
			"UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), "UNDOSH_POLICY=-")
		return runWith(t, "/usr/bin/unshare", dir, env, "unshare", "--mount", "--propagation", "private", "/bin/bash", "-c", script)
	}

	got := sandbox(t, ws, undoshBin, "echo x > f")
	if got.code != 2 || !strings.Contains(got.stderr, "undosh's state directory "+state+" is not writable here (read-only file system)") ||
		!strings.Contains(got.stderr, "writable_roots") || !strings.Contains(got.stderr, "nothing ran") {
		t.Errorf("a workspace step with the store read-only: %+v", got)
	}
	if _, err := os.Lstat(filepath.Join(ws, "f")); !os.IsNotExist(err) {
		t.Errorf("the refused step ran: %v", err)
	}

	for _, step := range []string{"./run.sh", "echo x > f", "touch f", "./run.sh && git init -q"} {
		want := sandbox(t, ro, "/bin/bash", step)
		got := sandbox(t, ro, undoshBin, step)
		if got != want {
			t.Errorf("%q with the store and the workspace read-only: undosh gave %+v, bash %+v", step, got, want)
		}
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("the read-only state directory has %d entries", len(ents))
	}
}
