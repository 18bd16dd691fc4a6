package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command a harness wrapped is journaled as the command alone, with
// the scaffolding kept once in the state directory, and undoctl show
// names it.
func TestJournalUnwrapsHarness(t *testing.T) {
	t.Parallel()
	w := seedWS(t)
	snap := filepath.Join(w.home, ".claude", "shell-snapshots", "snapshot-bash-1-ab.sh")
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snap, []byte("export PATH=\""+os.Getenv("PATH")+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cwdFile := filepath.Join(w.root, "claude-ab12-cwd")
	claude := func(cmd string) string {
		return "source " + snap + " 2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval '" +
			strings.ReplaceAll(cmd, "'", `'"'"'`) + "' < /dev/null && pwd -P >| " + cwdFile
	}
	r := w.run(claude("echo 'it''s' > index.js; exit 3"))
	if r.code != 3 || !strings.Contains(r.stderr, "rolled back") {
		t.Fatalf("the wrapped failing edit: %s", r)
	}
	w.run(claude("echo two > other.txt"))
	recs := journalRecords(t, w.env)
	if len(recs) != 2 {
		t.Fatalf("journal: %v", recs)
	}
	var scaffold string
	for i, want := range []string{"echo 'it''s' > index.js; exit 3", "echo two > other.txt"} {
		rec := recs[i]
		wr, _ := rec["wrapper"].(map[string]any)
		if rec["command"] != want || wr["harness"] != "claude-code" {
			t.Errorf("record %d: command %q, wrapper %v; want %q from claude-code", i, rec["command"], wr, want)
		}
		if i == 0 {
			scaffold = fmt.Sprint(wr["scaffold"])
		} else if wr["scaffold"] != scaffold {
			t.Errorf("two steps of one session keep two scaffolds: %s and %v", scaffold, wr["scaffold"])
		}
	}
	file := filepath.Join(w.state, "wrappers", scaffold+".sh")
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), "eval {{command}} < /dev/null && pwd -P >| "+cwdFile) {
		t.Errorf("scaffold file %s: %q, %v", file, b, err)
	}
	show := runWith(t, undoctlBin, w.dir, w.env, "undoctl", "show", "1")
	if !strings.Contains(show.stdout, "command:   echo 'it''s' > index.js; exit 3\n") ||
		!strings.Contains(show.stdout, "wrapper:   claude-code's scaffolding around it, "+file+"\n") {
		t.Errorf("undoctl show 1:\n%s%s", show.stdout, show.stderr)
	}
}
