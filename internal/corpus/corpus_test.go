package corpus

import (
	"strings"
	"testing"
)

// TestRead reads the real corpus: every line has a label and a command.
func TestRead(t *testing.T) {
	lines, err := Read("../../testdata/classify")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 1000 {
		t.Fatalf("%d commands, want at least 1,000", len(lines))
	}
	for _, l := range lines {
		if l.Label == "" || l.Command == "" || l.Line < 1 || !strings.HasSuffix(l.File, ".txt") {
			t.Errorf("%s: %+v", l.At(), l)
		}
	}
}

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		text, label, cmd string
		ok, bad          bool
	}{
		{"# comment\tx", "", "", false, false},
		{"   ", "", "", false, false},
		{"none\tls -l", "none", "ls -l", true, false},
		{`git+egress` + "\t" + `"printf 'a\tb'"`, "git+egress", "printf 'a\tb'", true, false},
		{"none ls", "", "", false, true},
		{"none\t\"unterminated", "", "", false, true},
	} {
		label, cmd, ok, err := parseLine(tc.text)
		if label != tc.label || cmd != tc.cmd || ok != tc.ok || (err != nil) != tc.bad {
			t.Errorf("parseLine(%q) = %q, %q, %v, %v", tc.text, label, cmd, ok, err)
		}
	}
}

// FuzzParseLine: the line reader never panics, and a line it takes has
// its label before the first tab.
func FuzzParseLine(f *testing.F) {
	f.Add("none\tls")
	f.Add("fork\t\"a\\u0000b\"")
	f.Fuzz(func(t *testing.T, text string) {
		label, _, ok, err := parseLine(text)
		if ok && (err != nil || !strings.HasPrefix(text, label+"\t")) {
			t.Errorf("parseLine(%q): label %q, err %v", text, label, err)
		}
	})
}
