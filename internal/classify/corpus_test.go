package classify

import (
	"strings"
	"testing"

	"github.com/undosh/undosh/internal/corpus"
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
	lines, err := corpus.Read("../../testdata/classify")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]corpusLine, 0, len(lines))
	for _, l := range lines {
		cl := corpusLine{file: l.File, line: l.Line, cmd: l.Command}
		label, egress := strings.CutSuffix(l.Label, "+egress")
		c, ok := policy.ParseClass(label)
		if !ok {
			t.Fatalf("%s: bad label %q", l.At(), l.Label)
		}
		cl.class, cl.egress = c, egress
		out = append(out, cl)
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
