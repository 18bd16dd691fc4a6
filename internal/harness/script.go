package harness

import (
	"fmt"
	"strings"
)

// Step is one step of the story: the command the model runs, and what
// the harness test expects of the result the model sees.
type Step struct {
	Command string
	// What says what the step is for, for people.
	What string
	// Want is the class the command has when typed bare (none, git,
	// fork, refused): what undosh should give it under every harness.
	Want string
	// Differs, when set, says why the result under undosh may differ from
	// plain bash's. A step without it must show the model the same result
	// in both, once undosh's notice lines are left out.
	Differs string
	// Undosh, when set, is text the result under undosh must hold.
	Undosh string
	// Machine marks a step that changes the machine: a non-root user
	// gets it refused (there is no fork engine without root).
	Machine bool
	// Commits marks the machine step that passes: as root, undosh
	// commits its copy onto the machine.
	Commits bool
}

// The files the story's machine steps write, removed after every run.
const (
	EtcTest = "/etc/undosh-harness-test"
	EtcKept = "/etc/undosh-harness-kept"
)

// Story is the seed's story, as a model would tell it through a harness's
// shell tool, in a fresh project (see [WriteProject]): read-only steps, a
// good edit, a bad edit rolled back, rm -rf and a failure, a refused push,
// a machine step discarded and one kept, and undoctl log. undoctl is the
// path of undoctl (called by its full path, since Codex's login shell
// resets PATH).
func Story(undoctl string) []Step {
	return []Step{
		{Command: "ls", What: "read-only", Want: "none"},
		{Command: "sed -i 's/var /let /g' index.js", What: "good edit", Want: "git"},
		{Command: "sed -i 's/1;/;/' index.js && ./test.sh", What: "bad edit, the test fails: rolled back", Want: "git"},
		{Command: "rm -rf src && false", What: "rm -rf, then a failure: rolled back", Want: "git"},
		{Command: "rm -r src && false", What: "rm -r, then a failure (Codex refuses rm -rf itself)", Want: "git",
			Differs: "src is back after the rollback of rm -rf"},
		{Command: "git push origin main", What: "push to the protected branch: refused", Want: "refused",
			Differs: "refused (exit 126) in place of the push", Undosh: "undosh: refused"},
		{Command: "cat index.js", What: "read-only", Want: "none",
			Differs: "the bad edit was rolled back", Undosh: "let x = 1;"},
		{Command: "grep -n x index.js", What: "read-only", Want: "none",
			Differs: "the bad edit was rolled back", Undosh: "let x = 1;"},
		{Command: "cat > notes.txt <<'EOF'\nnotes\nEOF\nfor i in 1 2 3; do echo \"line $i\" >> notes.txt; done\nwc -l notes.txt", What: "heredoc and a loop", Want: "git"},
		{Command: "cd src && pwd", What: "read-only, changes the harness's directory", Want: "none",
			Differs: "src is back after the rollbacks", Undosh: "/proj/src"},
		{Command: "pwd", What: "read-only", Want: "none",
			Differs: "a harness that keeps the directory is in src"},
		{Command: fmt.Sprintf("echo hello > %s && false", EtcTest), What: "machine step that fails: discarded", Want: "fork", Machine: true},
		{Command: fmt.Sprintf("echo kept > %s", EtcKept), What: "machine step that passes: committed", Want: "fork", Machine: true, Commits: true},
		{Command: fmt.Sprintf("test -e %s && echo PRESENT || echo ABSENT", EtcTest), What: "read-only: is the discarded write there?", Want: "none",
			Differs: "the failed machine step was discarded", Undosh: "ABSENT"},
		{Command: undoctl + " log", What: "the journal", Want: "none",
			Differs: "the journal"},
	}
}

// Commands returns the commands of steps, for [Server.Script].
func Commands(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Command
	}
	return out
}

// Short is a step's command on one line, for tables.
func (s Step) Short() string {
	c := s.Command
	if i := strings.IndexByte(c, '\n'); i >= 0 {
		c = c[:i] + " …"
	}
	return c
}
