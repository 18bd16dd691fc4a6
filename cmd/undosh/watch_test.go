package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With the front end's server running, steps' checkpoints ask its
// watcher what changed and read only that once it watches the workspace;
// a step the classifier wrongly passes as read-only, which changes the
// workspace, has a checkpoint from just before it, and undoctl back N
// undoes it, whether undosh or the fast front end passed it.
func TestWatchedSteps(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for i := range 40 {
		p := filepath.Join(ws, fmt.Sprintf("src/d%d/f%d.txt", i%5, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "seed.txt"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	state := t.TempDir()
	serverFor(t, state)
	// A program the policy wrongly calls read-only, and enforcement off,
	// so that the wrong guess reaches the workspace.
	bin := t.TempDir()
	pol := writePolicy(t, "version: 1\ntrusted_dirs: ["+bin+"]\nrules:\n  - name: report-is-read-only\n    programs: [undosh-report]\n    class: none\n")
	script := "#!/bin/bash\necho \"$1\" > report-$1.txt\necho \"$1\" >> seed.txt\n"
	if err := os.WriteFile(filepath.Join(bin, "undosh-report"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), pol, "UNDOSH_ENFORCE=0",
		"UNDOSH_REAL_BASH=/bin/bash", "PATH="+bin+":"+os.Getenv("PATH"))
	step := func(bin, cmd string) {
		t.Helper()
		if r := runWith(t, bin, ws, env, "bash", "-c", cmd); r.code != 0 {
			t.Fatalf("%s: %+v", cmd, r)
		}
	}
	// The watch is set up while the first steps run: within a few steps
	// a checkpoint reads only what changed, and so does every one after.
	watched := 0
	for i := range 6 {
		step(undoshBin, fmt.Sprintf("echo %d > a.txt", i))
		recs := readJournal(t, state)
		last := recs[len(recs)-1]
		if last.Class != "git" || len(last.Checkpoints) != 1 {
			t.Fatalf("step %d: %+v", last.ID, last)
		}
		switch walk := last.Checkpoints[0].Walk; {
		case walk == "":
			watched++
		case watched > 0:
			t.Errorf("step %d walked (%s) after a watched one", last.ID, walk)
		}
	}
	if watched < 3 {
		t.Fatalf("only %d of 6 steps read only what changed: the watch never took over", watched)
	}
	for _, front := range []struct{ name, bin string }{{"undosh", undoshBin}, {"undosh-fast", fastBin}} {
		if front.bin == "" {
			t.Logf("%s not built: skipped", front.name)
			continue
		}
		n := len(readJournal(t, state))
		step(front.bin, "undosh-report "+front.name)
		step(undoshBin, "echo after > after-"+front.name+".txt")
		// The server journals a step it passed just after its answer.
		var recs []journalRecord
		for try := 0; ; try++ {
			recs = readJournal(t, state)
			if len(recs) >= n+2 || try == 100 {
				break
			}
			waitJournalGrow(state)
		}
		var report *journalRecord
		for i := range recs {
			if strings.HasPrefix(recs[i].Command, "undosh-report") {
				report = &recs[i]
			}
		}
		if report == nil || report.Outcome != "passed through" || report.Class != "none" || len(report.Checkpoints) != 1 {
			t.Fatalf("%s: the read-only step's record: %+v", front.name, report)
		}
		diff := runWith(t, undoctlBin, ws, env, "undoctl", "diff", fmt.Sprint(report.ID))
		if want := "added       report-" + front.name + ".txt\nmodified    seed.txt\n"; diff.stdout != want {
			t.Errorf("%s: undoctl diff %d = %q, want %q (%s)", front.name, report.ID, diff.stdout, want, diff.stderr)
		}
		back := runWith(t, undoctlBin, ws, env, "undoctl", "back", fmt.Sprint(report.ID))
		if back.code != 0 {
			t.Fatalf("%s: undoctl back %d: %+v", front.name, report.ID, back)
		}
		if _, err := os.Lstat(filepath.Join(ws, "report-"+front.name+".txt")); !os.IsNotExist(err) {
			t.Errorf("%s: undoctl back %d left report-%s.txt", front.name, report.ID, front.name)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "seed.txt")); string(b) != "seed\n" {
			t.Errorf("%s: seed.txt after undoctl back %d: %q", front.name, report.ID, b)
		}
		// What came after the step goes too: back N is the workspace as
		// it was before step N.
		if _, err := os.Lstat(filepath.Join(ws, "after-"+front.name+".txt")); !os.IsNotExist(err) {
			t.Errorf("%s: undoctl back %d kept a later step's file", front.name, report.ID)
		}
	}
}

// waitJournalGrow waits a little for the journal to grow: the server
// writes it from another process, and the file is the only event.
func waitJournalGrow(state string) {
	name := filepath.Join(state, "journal.jsonl")
	before, _ := os.Stat(name)
	for range 100 {
		if now, err := os.Stat(name); err == nil && (before == nil || now.Size() != before.Size()) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A server killed in the middle of a read-only step's checkpoint loses
// nothing. That checkpoint walks (the first in the workspace), so the
// server hands the step to undosh, which asked the server's watcher what
// changed and is writing its pack when the server dies: the step runs,
// the store checks clean and takes the next checkpoint.
func TestServerKilledMidCheckpoint(t *testing.T) {
	needFast(t)
	t.Parallel()
	ws := t.TempDir()
	body := []byte(strings.Repeat("the server walks the whole tree on its very first checkpoint\n", 30))
	for i := range 20000 {
		p := filepath.Join(ws, fmt.Sprintf("d%02d/e%02d/f%d.txt", i/1000, i/50%20, i))
		if i%50 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	state := t.TempDir()
	cmd := serverFor(t, state)
	env := append(os.Environ(), "UNDOSH_STATE_DIR="+state, "HOME="+t.TempDir(), "UNDOSH_POLICY=-", "UNDOSH_REAL_BASH=/bin/bash")
	done := make(chan ran, 1)
	go func() { done <- runWith(t, fastBin, ws, env, "bash", "-c", "echo read-only") }()
	// The checkpoint writes its pack as it hashes: kill the server
	// once the pack is being written, before undosh tells it the result.
	packs := filepath.Join(state, "checkpoints")
	killed := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !killed; time.Sleep(time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(packs, "*", "git", "objects", "pack", ".tmp-pack-*"))
		if len(m) > 0 {
			cmd.Process.Kill()
			killed = true
		}
	}
	got := <-done
	if !killed {
		t.Skip("the server finished its first checkpoint before it could be killed in it")
	}
	if got.code != 0 || got.stdout != "read-only\n" {
		t.Fatalf("the step whose server was killed: %+v", got)
	}
	check := runWith(t, undoctlBin, ws, env, "undoctl", "check")
	if check.code != 0 || !strings.Contains(check.stdout, ": ok") {
		t.Errorf("undoctl check after the kill: %+v", check)
	}
	if c := runWith(t, undoctlBin, ws, env, "undoctl", "checkpoint"); c.code != 0 {
		t.Errorf("undoctl checkpoint after the kill: %+v", c)
	}
}
