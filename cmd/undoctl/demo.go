package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/journal"
)

// demoSteps is the seed's story, run through undosh in a throwaway
// project.
var demoSteps = []struct{ cmd, says string }{
	{"ls", "read-only: passes straight to the real bash"},
	{"sed -i 's/var /let /g' index.js", "a good edit: checkpoint first, and it is kept"},
	{"sed -i 's/= 1/=/' index.js && ./test.sh", "a bad edit: the test fails, so the edit is rolled back"},
	{"rm -rf src && false", "a deletion in a failing step: src comes back"},
	{"git push origin main", "a push to main: no snapshot can undo it, so it is refused"},
}

// demo runs the seed's story through undosh in a temporary git repository.
func demo(args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	undosh := fs.String("undosh", "", "the undosh binary (default: next to undoctl, then $PATH)")
	keep := fs.Bool("keep", false, "keep the demo directory")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	bin, err := findUndosh(*undosh)
	if err != nil {
		return err
	}
	top, err := os.MkdirTemp("", "undosh-demo-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(top)
	}
	proj, sd := filepath.Join(top, "project"), filepath.Join(top, "state")
	if err := demoProject(proj); err != nil {
		return err
	}
	env := demoEnv(sd)
	w := io.out
	fmt.Fprintf(w, "undosh demo: a throwaway git project in %s, undo state in %s\n", proj, sd)
	fmt.Fprintf(w, "each command runs through %s, exactly as an agent's shell would\n\n", bin)
	j, err := journal.Open(sd)
	if err != nil {
		return err
	}
	seen, goodEdit := 0, 0
	for i, s := range demoSteps {
		fmt.Fprintf(w, "## %s\n$ %s\n", s.says, s.cmd)
		cmd := exec.Command(bin, "-c", s.cmd)
		cmd.Args[0] = "bash"
		cmd.Dir, cmd.Env = proj, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			return fmt.Errorf("run %s: %w", bin, err)
		}
		w.Write(indent(out.Bytes()))
		recs, _ := j.Read()
		summary := "class none: no checkpoint, bash ran it directly"
		if len(recs) > seen {
			r := recs[len(recs)-1]
			seen = len(recs)
			if i == 1 {
				goodEdit = r.ID
			}
			summary = fmt.Sprintf("class %s, step %d: %s", r.Class, r.ID, r.Outcome)
			if len(r.Points) > 0 {
				summary += ", checkpoint " + shortID(r.Points[0].Before)
			}
		}
		fmt.Fprintf(w, "→ exit %d; %s\n\n", code, summary)
	}
	fmt.Fprintf(w, "## the journal: undoctl log\n")
	if err := journalCmd("log", []string{"--state", sd}, io, getenv); err != nil {
		return err
	}
	if goodEdit == 0 {
		return fmt.Errorf("the good edit left no step in the journal %s", j.Path())
	}
	fmt.Fprintf(w, "\n## going back several steps: undoctl back %d puts index.js as it was before the good edit\n$ cat index.js\n", goodEdit)
	w.Write(indent(mustRead(filepath.Join(proj, "index.js"))))
	var backErr bytes.Buffer
	if err := journalCmd("back", []string{"--state", sd, "-C", proj, strconv.Itoa(goodEdit)}, stdio{in: io.in, out: w, err: &backErr}, getenv); err != nil {
		return err
	}
	w.Write(backErr.Bytes())
	fmt.Fprintf(w, "$ cat index.js\n")
	w.Write(indent(mustRead(filepath.Join(proj, "index.js"))))
	fmt.Fprintf(w, "\nEvery rollback and every `undoctl back` first checkpoints the current state,\n")
	fmt.Fprintf(w, "so the line above that starts `undoctl: to undo this` undoes the undo.\n")
	if *keep {
		fmt.Fprintf(w, "kept: %s (UNDOSH_STATE_DIR=%s undoctl log)\n", top, sd)
	}
	return nil
}

func findUndosh(flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "undosh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("undosh"); err == nil {
		return p, nil
	}
	return "", &exit.UsageError{Msg: "cannot find the undosh binary next to undoctl or on $PATH (build it: go build -o bin/ ./cmd/...; or pass --undosh PATH)"}
}

// demoEnv is the environment of the demo's steps: the caller's, with its
// own state directory and the embedded policy.
func demoEnv(sd string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "UNDOSH_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "UNDOSH_STATE_DIR="+sd, "UNDOSH_POLICY=-")
}

// demoProject makes the throwaway project: a git repository with a
// committed file, a test, and a source directory.
func demoProject(dir string) error {
	files := map[string]string{
		"index.js":    "var x = 1;\nvar y = 2;\nconsole.log(x + y);\n",
		"test.sh":     "#!/bin/sh\n# the project's tests\ngrep -q 'x = 1' index.js || { echo 'test.sh: FAIL: x is not 1' >&2; exit 1; }\n",
		"src/util.js": "export const add = (a, b) => a + b;\n",
		"src/main.js": "import { add } from './util.js';\n",
		"README.md":   "# demo\n",
		".gitignore":  "node_modules/\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "test.sh"), 0o755); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=demo", "-c", "user.email=demo@example.invalid", "commit", "-q", "-m", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func indent(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	s := "  " + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n  ") + "\n"
	return []byte(s)
}

func mustRead(name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		return []byte(err.Error() + "\n")
	}
	return b
}
