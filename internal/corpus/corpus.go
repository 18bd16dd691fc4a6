// Package corpus reads the labelled classification corpus
// (testdata/classify/*.txt): lines of LABEL, a tab, and a command, the
// command as it is or as a JSON string when it starts with a quote;
// blank lines and lines starting with # are comments. The classifier's
// corpus tests, the test that both deciders agree (shell) and
// bench/corpusjson read it here.
package corpus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Line is one command of the corpus.
type Line struct {
	File    string // the file's base name
	Line    int    // its line number there
	Label   string // none, git or fork, optionally +egress
	Command string
}

// At is where the line is, as file:line.
func (l Line) At() string { return fmt.Sprintf("%s:%d", l.File, l.Line) }

// Read reads every *.txt file of dir, in name order.
func Read(dir string) ([]Line, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("corpus: no *.txt files in %s", dir)
	}
	var out []Line
	for _, name := range files {
		lines, err := ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	return out, nil
}

// ReadFile reads one corpus file.
func ReadFile(name string) ([]Line, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		label, cmd, ok, err := parseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if ok {
			out = append(out, Line{File: filepath.Base(name), Line: n, Label: label, Command: cmd})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// parseLine reads one line: ok is false for a comment or a blank line.
func parseLine(text string) (label, cmd string, ok bool, err error) {
	if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
		return "", "", false, nil
	}
	label, cmd, ok = strings.Cut(text, "\t")
	if !ok {
		return "", "", false, fmt.Errorf("no tab")
	}
	if strings.HasPrefix(cmd, `"`) {
		if err := json.Unmarshal([]byte(cmd), &cmd); err != nil {
			return "", "", false, err
		}
	}
	return label, cmd, true, nil
}
