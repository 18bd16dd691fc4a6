package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/scripttest"
)

// TestScript runs the end-to-end scripts in testdata/script: undosh is
// this test binary (TestMain), undoctl the one built for the package (the
// undosh built for the package is next to it, for a script that needs
// undosh under another path or name).
// Each script has its own HOME and state directory ($WORK/home,
// $WORK/state), and, besides testscript's commands and scripttest's
// status:
//
//	seedws DIR           makes DIR the repository of seedWS
//	tree [-git] [-time] [-skip PATH]... DIR
//	                     prints every path under DIR but those skipped:
//	                     mode, size, content (snapshot; with -git, the
//	                     modes gitModes keeps; with -time, the mtime)
//	gitstate DIR         prints gitState of the repository DIR
//	journal [-parallel] [-v] [STATE]
//	                     checks the journal of STATE ($WORK/state) as
//	                     checkJournal does, and prints a line a step:
//	                     id, outcome, exit status, signal, verify_ok and
//	                     the number of checkpoints; with -v, then its
//	                     parent step (if any), class and command, and a
//	                     line a checkpoint: its root, before and after
//	                     (each as "id" when a checkpoint's id, else as
//	                     written, "" as -); the script's directory is
//	                     $WORK in the command and the root
//
// and the condition [mountns]: a read-only step's limit holds its
// workspace though it lies in /tmp, as root's mount namespace does.
func TestScript(t *testing.T) {
	t.Parallel()
	cmds := scripttest.Cmds()
	cmds["seedws"] = cmdSeedWS
	cmds["tree"] = cmdTree
	cmds["gitstate"] = cmdGitState
	cmds["journal"] = cmdJournal
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			home, state := filepath.Join(env.WorkDir, "home"), filepath.Join(env.WorkDir, "state")
			env.Setenv("HOME", home)
			env.Setenv("UNDOSH_STATE_DIR", state)
			// undosh first; undoctl (and the rest of the package's
			// binaries) last, after the system's.
			env.Setenv("PATH", scriptBin+string(filepath.ListSeparator)+env.Getenv("PATH")+string(filepath.ListSeparator)+filepath.Dir(undoctlBin))
			for _, d := range []string{home, state} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			return nil
		},
		Cmds: cmds,
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "mountns":
				// A read-only step's limit can hold a workspace in a
				// scratch path ($WORK is in /tmp): root's mount
				// namespace; under Landlock the step is checkpointed.
				_, err := enforce.Probe(enforce.MountNS)
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// scriptEnv is the environment a script's git runs with.
func scriptEnv(ts *testscript.TestScript) []string {
	return []string{"HOME=" + ts.Getenv("HOME"), "PATH=" + ts.Getenv("PATH")}
}

func cmdSeedWS(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: seedws DIR")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	ts.Check(initRepo(dir, scriptEnv(ts)))
	ts.Check(seedRepo(dir, scriptEnv(ts)))
}

func cmdTree(ts *testscript.TestScript, neg bool, args []string) {
	var git, withTime bool
	var skip []string
	for len(args) > 1 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-git":
			git = true
		case "-time":
			withTime = true
		case "-skip":
			skip, args = append(skip, args[1]), args[1:]
		default:
			ts.Fatalf("tree: unknown flag %s", args[0])
		}
		args = args[1:]
	}
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tree [-git] [-time] [-skip PATH]... DIR")
	}
	m, err := snapshotOf(ts.MkAbs(args[0]), withTime)
	ts.Check(err)
	if git {
		m = gitModes(m)
	}
	for _, p := range skip {
		delete(m, p)
	}
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		e := m[p]
		line := fmt.Sprintf("%s %v %d %s", p, e.Mode, e.Size, e.Sum)
		if withTime {
			line += " " + e.MTime.Format(time.RFC3339Nano)
		}
		fmt.Fprintln(ts.Stdout(), line)
	}
}

func cmdGitState(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: gitstate DIR")
	}
	s, err := gitStateOf(ts.MkAbs(args[0]), scriptEnv(ts))
	ts.Check(err)
	fmt.Fprint(ts.Stdout(), s)
}

func cmdJournal(ts *testscript.TestScript, neg bool, args []string) {
	ordered, verbose := true, false
	if len(args) > 0 && args[0] == "-parallel" {
		ordered, args = false, args[1:]
	}
	if len(args) > 0 && args[0] == "-v" {
		verbose, args = true, args[1:]
	}
	if neg || len(args) > 1 {
		ts.Fatalf("usage: journal [-parallel] [-v] [STATE]")
	}
	state := ts.Getenv("UNDOSH_STATE_DIR")
	if len(args) == 1 {
		state = ts.MkAbs(args[0])
	}
	if probs := journalProblems(state, ordered); len(probs) > 0 {
		ts.Fatalf("journal of %s:\n%s", state, strings.Join(probs, "\n"))
	}
	recs, err := readJournalOf(state)
	ts.Check(err)
	for _, r := range recs {
		line := fmt.Sprintf("%d %s exit=%d", r.ID, r.Outcome, r.Exit)
		if r.Signal != "" {
			line += " signal=" + r.Signal
		}
		if r.VerifyOK != nil {
			line += fmt.Sprintf(" verify_ok=%v", *r.VerifyOK)
		}
		fmt.Fprintf(ts.Stdout(), "%s checkpoints=%d\n", line, len(r.Checkpoints))
		if !verbose {
			continue
		}
		if r.Parent != 0 {
			fmt.Fprintf(ts.Stdout(), "\tparent=%d\n", r.Parent)
		}
		fmt.Fprintf(ts.Stdout(), "\tclass=%s command=%s\n", r.Class, strings.ReplaceAll(r.Command, ts.Getenv("WORK"), "$WORK"))
		id := func(s string) string {
			switch {
			case checkpointID.MatchString(s):
				return "id"
			case s == "":
				return "-"
			}
			return s
		}
		for _, c := range r.Checkpoints {
			root := c.Root
			if rel, ok := strings.CutPrefix(root, ts.Getenv("WORK")); ok {
				root = "$WORK" + rel
			}
			fmt.Fprintf(ts.Stdout(), "\t%s before=%s after=%s\n", root, id(c.Before), id(c.After))
		}
	}
}

// checkpointID is a checkpoint's id in the journal.
var checkpointID = regexp.MustCompile(`^[0-9a-f]{40}$`)
