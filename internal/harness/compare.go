package harness

import (
	"regexp"
	"strings"
)

// volatile are the parts of a tool result that change from run to run
// whatever the shell: harness bookkeeping (Codex's chunk ids, wall times
// and token counts, Gemini CLI's process group), git's object names and
// times.
var volatile = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`Chunk ID: [0-9a-f]+`), "Chunk ID: <id>"},
	{regexp.MustCompile(`Wall time: [0-9.]+ seconds`), "Wall time: <t>"},
	{regexp.MustCompile(`Original token count: \d+`), "Original token count: <n>"},
	{regexp.MustCompile(`Process Group PGID: \d+`), "Process Group PGID: <pgid>"},
	{regexp.MustCompile(`\b[0-9a-f]{7,40}\.\.[0-9a-f]{7,40}\b`), "<rev>..<rev>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d`), "<time>"},
}

// metaLine matches a line a harness adds after a command's output
// (Gemini CLI's "Exit Code: 1", "Process Group PGID: …", the closing tag).
var metaLine = regexp.MustCompile(`^([A-Z][A-Za-z ]+: |</)`)

// Normalize returns a tool result as the comparison sees it: the run's
// own paths (dirs, longest first) replaced by placeholders, the volatile
// parts of [volatile] replaced, and trailing spaces dropped.
func Normalize(text string, dirs map[string]string) string {
	for _, d := range sortedByLength(dirs) {
		text = strings.ReplaceAll(text, d, dirs[d])
	}
	for _, v := range volatile {
		text = v.re.ReplaceAllString(text, v.repl)
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

func sortedByLength(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			keys = append(keys, k)
		}
	}
	// Longest first, so that a path is replaced before its parent.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && len(keys[j]) > len(keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// StripNotices removes undosh's own lines from a tool result: every line
// that starts with "undosh: " (also after the "Output: " that Gemini CLI
// puts before a command's first line). empty is what the harness shows
// for a command that printed nothing ("" when it shows nothing): a
// result left empty by the stripping reads as that.
func StripNotices(text, empty string) string {
	var out []string
	pending := "" // a prefix whose line held only a notice
	for _, l := range strings.Split(text, "\n") {
		rest, prefix := l, ""
		if r, ok := strings.CutPrefix(l, "Output: "); ok {
			rest, prefix = r, "Output: "
		}
		if strings.HasPrefix(strings.TrimSpace(rest), "undosh: ") {
			if prefix != "" {
				pending = prefix
			}
			continue
		}
		if pending != "" {
			if metaLine.MatchString(l) {
				out = append(out, pending+"(empty)")
			} else {
				l = pending + l
			}
			pending = ""
		}
		out = append(out, l)
	}
	if pending != "" {
		out = append(out, pending+"(empty)")
	}
	s := strings.Join(out, "\n")
	if strings.TrimSpace(s) == "" && strings.TrimSpace(text) != "" {
		return empty
	}
	return s
}

// HasNotice reports whether a tool result holds a line of undosh's own.
func HasNotice(text string) bool {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimPrefix(l, "Output: ")
		if strings.HasPrefix(strings.TrimSpace(l), "undosh: ") {
			return true
		}
	}
	return false
}

// Refused reports whether a tool result holds undosh's refusal.
func Refused(text string) bool {
	return strings.Contains(text, "undosh: refused")
}

// harnessRejected matches a harness's own refusal to run a command
// (Codex: "… rejected: rm -f style commands are not permitted"; Gemini
// CLI: "Command injection detected").
var harnessRejected = regexp.MustCompile("` rejected: |(?i:command injection detected)")

// Difference is how the result of one step under undosh compares with
// plain bash's.
type Difference struct {
	Step int    `json:"step"`
	Kind string `json:"kind"`
	// Plain and Undosh are the normalised results, when they differ.
	Plain  string `json:"plain,omitempty"`
	Undosh string `json:"undosh,omitempty"`
	// Problem says what is wrong, when the difference is not one of the
	// intended ones or undosh's result lacks what it must hold.
	Problem string `json:"problem,omitempty"`
}

// Kinds of [Difference].
const (
	Same       = "same"
	NoticeOnly = "same but for undosh's notice"
	Intended   = "intended"
	Unexpected = "refused where bash runs it"
	After      = "after a refusal bash would not make"
	Unintended = "UNINTENDED"
)

// Compare compares, step by step, the results the model saw under plain
// bash and under undosh, for root or not. dirs are the two runs' paths and
// their placeholders; empty is the harness's text for no output.
func Compare(steps []Step, plain, undosh []Result, root bool, dirs map[string]string, empty string) []Difference {
	pr, ur := byStep(plain), byStep(undosh)
	var out []Difference
	lenient := false
	for i, s := range steps {
		p, okp := pr[i]
		u, oku := ur[i]
		d := Difference{Step: i}
		if !okp || !oku {
			d.Kind, d.Problem = Unintended, "no tool result"
			out = append(out, d)
			continue
		}
		pn := Normalize(p.Text, dirs)
		un := Normalize(StripNotices(u.Text, empty), dirs)
		// A refusal is never the same as what bash did, even when the
		// harness shows neither an exit status nor any output.
		refused := Refused(u.Text) && !Refused(p.Text)
		switch {
		case refused && s.Want != "refused" && !(s.Machine && !root):
			d.Kind, lenient = Unexpected, true
		case refused && s.Machine && !root:
			d.Kind = Intended + ": a machine step is refused without root (no fork engine)"
		case pn == un && HasNotice(u.Text):
			d.Kind = NoticeOnly
		case pn == un:
			d.Kind = Same
		case lenient:
			d.Kind = After
		case s.Differs != "":
			d.Kind = Intended + ": " + s.Differs
		default:
			d.Kind, d.Problem = Unintended, "the model saw a different result"
		}
		if s.Undosh != "" && !lenient && !harnessRejected.MatchString(u.Text) && !strings.Contains(u.Text, s.Undosh) {
			d.Problem = "undosh's result lacks " + `"` + s.Undosh + `"`
		}
		if (d.Kind != Same && d.Kind != NoticeOnly) || d.Problem != "" {
			d.Plain, d.Undosh = pn, Normalize(u.Text, dirs)
		}
		out = append(out, d)
	}
	return out
}

func byStep(rs []Result) map[int]Result {
	m := map[int]Result{}
	for _, r := range rs {
		m[r.Step] = r
	}
	return m
}
