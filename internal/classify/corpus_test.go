package classify

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undosh/undosh/policy"
)

type corpusLine struct {
	file   string
	line   int
	class  policy.Class
	egress bool
	cmd    string
}

func loadCorpus(t testing.TB) []corpusLine {
	t.Helper()
	files, err := filepath.Glob("../../testdata/classify/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	var out []corpusLine
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			text := sc.Text()
			if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
				continue
			}
			label, cmd, ok := strings.Cut(text, "\t")
			if !ok {
				t.Fatalf("%s:%d: no tab", name, n)
			}
			if strings.HasPrefix(cmd, `"`) {
				if err := json.Unmarshal([]byte(cmd), &cmd); err != nil {
					t.Fatalf("%s:%d: %v", name, n, err)
				}
			}
			cl := corpusLine{file: filepath.Base(name), line: n, cmd: cmd}
			label, cl.egress = strings.CutSuffix(label, "+egress")
			c, ok := policy.ParseClass(label)
			if !ok {
				t.Fatalf("%s:%d: bad label %q", name, n, label)
			}
			cl.class = c
			out = append(out, cl)
		}
		f.Close()
	}
	return out
}

// TestCorpus runs the labelled corpus: under-classification must be zero;
// over-classification is reported and bounded.
func TestCorpus(t *testing.T) {
	p := policy.Default()
	lines := loadCorpus(t)
	if len(lines) < 300 {
		t.Fatalf("corpus has %d commands, want at least 300", len(lines))
	}
	var readOnly, readOnlyOver, nonEgress, egressFalse, files, filesToFork int
	for _, l := range lines {
		d := Decide(l.cmd, ExampleOptions(p)).Decision
		if d.Class < l.class {
			t.Errorf("%s:%d: under-classified: got %s, want %s: %q\n%s", l.file, l.line, d.Class, l.class, l.cmd, reasons(d))
		}
		if l.egress && !d.Egress {
			t.Errorf("%s:%d: egress not flagged: %q\n%s", l.file, l.line, l.cmd, reasons(d))
		}
		if l.class == policy.None && !l.egress {
			readOnly++
			if d.Class > policy.None {
				readOnlyOver++
				t.Logf("%s:%d: read-only command classed %s: %q\n%s", l.file, l.line, d.Class, l.cmd, reasons(d))
			}
		}
		if !l.egress {
			nonEgress++
			if d.Egress {
				egressFalse++
				t.Logf("%s:%d: flagged egress: %q\n%s", l.file, l.line, l.cmd, reasons(d))
			}
		}
		if l.class == policy.Git {
			files++
			if d.Class == policy.Fork {
				filesToFork++
			}
		}
	}
	t.Logf("read-only classed above none: %d of %d (%.1f%%)", readOnlyOver, readOnly, pct(readOnlyOver, readOnly))
	t.Logf("non-egress flagged egress: %d of %d (%.1f%%)", egressFalse, nonEgress, pct(egressFalse, nonEgress))
	t.Logf("file-changing commands sent to fork: %d of %d (%.1f%%)", filesToFork, files, pct(filesToFork, files))
	if pct(readOnlyOver, readOnly) > 10 {
		t.Errorf("friction: %.1f%% of read-only commands classed above none, want at most 10%%", pct(readOnlyOver, readOnly))
	}
	if pct(egressFalse, nonEgress) > 3 {
		t.Errorf("friction: %.1f%% of non-egress commands flagged egress, want at most 3%%", pct(egressFalse, nonEgress))
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func reasons(d policy.Decision) string {
	var b strings.Builder
	for _, r := range d.Reasons {
		b.WriteString("    " + r.Class.String() + " " + r.Rule + " @" + r.Pos + ": " + r.Text + "\n")
	}
	return b.String()
}
