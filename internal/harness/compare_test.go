package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStripNotices(t *testing.T) {
	t.Parallel()
	notice := "undosh: step 3 failed (exit 1): rolled back 1 file to checkpoint 0123456789ab"
	tests := []struct {
		name, in, empty, want string
	}{
		{"claude", "Exit code 1\nFAIL: x is not 1\n" + notice, "(Bash completed with no output)", "Exit code 1\nFAIL: x is not 1"},
		{"claude, only the notice", notice, "(Bash completed with no output)", "(Bash completed with no output)"},
		{"opencode, only the notice", notice + "\n", "(no output)", "(no output)"},
		{"codex", "Process exited with code 1\nOutput:\n" + notice + "\n", "", "Process exited with code 1\nOutput:\n"},
		{"gemini, notice after output", "<untrusted_context>\nOutput: FAIL\n" + notice + "\nExit Code: 1\n</untrusted_context>", "",
			"<untrusted_context>\nOutput: FAIL\nExit Code: 1\n</untrusted_context>"},
		{"gemini, only the notice", "<untrusted_context>\nOutput: " + notice + "\nExit Code: 1\n</untrusted_context>", "",
			"<untrusted_context>\nOutput: (empty)\nExit Code: 1\n</untrusted_context>"},
		{"gemini, notice then output", "Output: " + notice + "\nmore\nExit Code: 1", "", "Output: more\nExit Code: 1"},
		{"gemini, notice last", "Output: " + notice, "", "Output: (empty)"},
		{"two notice lines", "x\nundosh: refused: no\nundosh: hint: yes", "", "x"},
		{"not a notice", "the undosh: word\n  undosh: indented", "", "the undosh: word"},
		{"nothing", "", "(no output)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := StripNotices(tt.in, tt.empty); got != tt.want {
				t.Errorf("StripNotices(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	dirs := map[string]string{"/tmp/h-1/codex-0-plain": "<run>", "/tmp/h-1": "<base>"}
	tests := []struct{ name, in, want string }{
		{"codex bookkeeping", "Chunk ID: a72455\nWall time: 0.1331 seconds\nProcess exited with code 0\nOriginal token count: 52\nOutput:\nx\n",
			"Chunk ID: <id>\nWall time: <t>\nProcess exited with code 0\nOriginal token count: <n>\nOutput:\nx"},
		{"gemini pgid", "Output: x\nProcess Group PGID: 13281", "Output: x\nProcess Group PGID: <pgid>"},
		{"paths, longest first", "To /tmp/h-1/codex-0-plain/remote.git\n   3b8344d..24b334a  main -> main",
			"To <run>/remote.git\n   <rev>..<rev>  main -> main"},
		{"base", "/tmp/h-1/bin/undoctl", "<base>/bin/undoctl"},
		{"kept as it is", "let x = 1;  \n", "let x = 1;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Normalize(tt.in, dirs); got != tt.want {
				t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func results(texts ...string) []Result {
	var out []Result
	for i, s := range texts {
		out = append(out, Result{Step: i, Text: s})
	}
	return out
}

func TestCompare(t *testing.T) {
	t.Parallel()
	steps := []Step{
		{Command: "ls", Want: "none"},
		{Command: "sed … && ./test.sh", Want: "git"},
		{Command: "git push origin main", Want: "refused", Differs: "refused", Undosh: "undosh: refused"},
		{Command: "cat index.js", Want: "none", Differs: "rolled back", Undosh: "x = 1;"},
		{Command: "echo > /etc/f", Want: "fork", Machine: true},
		{Command: "pwd", Want: "none"},
	}
	dirs := map[string]string{"/p": "<run>", "/u": "<run>"}
	kinds := func(ds []Difference) []string {
		var out []string
		for _, d := range ds {
			k := d.Kind
			if d.Problem != "" {
				k += " (" + d.Problem + ")"
			}
			out = append(out, k)
		}
		return out
	}
	t.Run("as intended", func(t *testing.T) {
		t.Parallel()
		plain := results("a", "FAIL", "pushed", "x =;", "denied", "/p")
		undosh := results("a", "FAIL\nundosh: step 2 failed", "undosh: refused: no", "x = 1;", "undosh: refused: machine", "/u")
		got := kinds(Compare(steps, plain, undosh, false, dirs, ""))
		want := []string{Same, NoticeOnly, Intended + ": refused", Intended + ": rolled back",
			Intended + ": a machine step is refused without root (no fork engine)", Same}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("kinds (-want +got):\n%s", diff)
		}
	})
	t.Run("not as intended", func(t *testing.T) {
		t.Parallel()
		plain := results("a", "FAIL", "pushed", "x =;", "", "/p")
		undosh := results("b", "FAIL", "Everything up-to-date", "x =;", "undosh: refused: machine", "/u")
		got := kinds(Compare(steps, plain, undosh, true, dirs, ""))
		want := []string{Unintended + " (the model saw a different result)", Same,
			Intended + ": refused (undosh's result lacks \"undosh: refused\")",
			Same + " (undosh's result lacks \"x = 1;\")", Unexpected, Same}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("kinds (-want +got):\n%s", diff)
		}
	})
	t.Run("after a refusal bash would not make", func(t *testing.T) {
		t.Parallel()
		plain := results("a", "FAIL", "pushed", "x =;", "", "/p")
		undosh := results("undosh: refused: all", "undosh: refused: all", "undosh: refused: all", "undosh: refused: all", "undosh: refused: all", "undosh: refused: all")
		got := kinds(Compare(steps, plain, undosh, true, dirs, ""))
		want := []string{Unexpected, Unexpected, After, Unexpected, Unexpected, Unexpected}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("kinds (-want +got):\n%s", diff)
		}
	})
	t.Run("missing result", func(t *testing.T) {
		t.Parallel()
		got := Compare(steps[:1], results("a"), nil, true, dirs, "")
		if got[0].Kind != Unintended || got[0].Problem != "no tool result" {
			t.Errorf("got %+v", got[0])
		}
	})
}

func TestMatchesAndTemplate(t *testing.T) {
	t.Parallel()
	cmd := "sed -i 's/var /let /g' index.js"
	tests := []struct {
		name, given string
		match       bool
		tmpl        string
	}{
		{"bare (opencode, or undosh journalling the command alone)", cmd, true, placeholder},
		{"claude eval", `source S 2>/dev/null || true && eval 'sed -i '"'"'s/var /let /g'"'"' index.js' < /dev/null && pwd -P >| /tmp/c`, true,
			`source S 2>/dev/null || true && eval '` + placeholder + `' < /dev/null && pwd -P >| /tmp/c`},
		{"codex exec", "X=1\nexec '/bin/bash' -c 'sed -i '\\''s/var /let /g'\\'' index.js'", true, "X=1\nexec '/bin/bash' -c '" + placeholder + "'"},
		{"gemini subshell", "shopt -u a; f=/tmp/g\n(\n  trap 'jobs -p > \"$f\"' EXIT\n" + cmd + "\n)\nexit $?", true,
			"shopt -u a; f=/tmp/g\n(\n  trap 'jobs -p > \"$f\"' EXIT\n" + placeholder + "\n)\nexit $?"},
		{"another command", "sed -i 's/var /let /g' other.js", false, ""},
		{"the command inside a longer word", "xsed -i 's/var /let /g' index.jsx", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Matches(tt.given, cmd); got != tt.match {
				t.Errorf("Matches = %v, want %v", got, tt.match)
			}
			tmpl, ok := Template(tt.given, cmd)
			if ok != tt.match || tmpl != tt.tmpl {
				t.Errorf("Template = %q, %v; want %q", tmpl, ok, tt.tmpl)
			}
		})
	}
	t.Run("ls is not alias ls=", func(t *testing.T) {
		t.Parallel()
		if Matches("alias ls='ls --color=auto'\nls -l", "ls") {
			t.Error("matched ls in an alias")
		}
	})
}

func TestFromScaffold(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"inside quotes", "eval '{{command}}' < /dev/null", "eval '" + placeholder + "' < /dev/null"},
		{"on its own line", "(\ntrap 'x' EXIT\n{{command}}\n)", "(\ntrap 'x' EXIT\n" + placeholder + "\n)"},
		{"for the quoted word", "exec /bin/bash -c {{command}}", "exec /bin/bash -c '" + placeholder + "'"},
		{"no mark", "ls", "ls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fromScaffold(tt.in); got != tt.want {
				t.Errorf("fromScaffold(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []Step{{Command: "ls"}, {Command: "sed -i s/a/b/ f"}, {Command: "rm -rf src"}, {Command: "cat f"}, {Command: "pwd"}}
	res := []Result{
		{Step: 0, Sent: at(0), Got: at(100), Text: "f"},
		{Step: 1, Sent: at(200), Got: at(300)},
		{Step: 2, Sent: at(400), Got: at(500), Text: "exec_command failed: `rm -rf src` rejected: rm -f style commands are not permitted"},
		{Step: 3, Sent: at(600), Got: at(700)},
		// step 4 never came back
	}
	wrap := func(c string) string { return "X=1\nexec bash -c '" + c + "'" }
	clipped := "X=1\nexec bash …"
	journal := []Record{
		{ID: 1, Time: at(-50), Command: "snapshot script", Class: "fork", Outcome: "committed"},
		{ID: 2, Time: at(10), Command: "SNAPSHOT_FILE=… ls …", Class: "fork", Outcome: "committed"}, // the harness's, during step 1
		{ID: 3, Time: at(210), Command: wrap("sed -i s/a/b/ f"), Class: "git", Outcome: "kept"},
		{ID: 4, Time: at(220), Command: "./test.sh", Class: "git", Parent: 3},
		{ID: 5, Time: at(610), Command: clipped, Class: "git", Outcome: "kept"},
		{ID: 6, Time: at(800), Command: clipped, Class: "git", Outcome: "kept"},
	}
	cells, extras := Classify(steps, res, journal)
	var labels []string
	for _, c := range cells {
		labels = append(labels, c.Label())
	}
	want := []string{"none", "git", "(harness refused)", "git", "no result"}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("cells (-want +got):\n%s", diff)
	}
	if !cells[3].ByTime {
		t.Errorf("step 4 was not told by time: %+v", cells[3])
	}
	var ids []int
	for _, e := range extras {
		ids = append(ids, e.Record.ID)
	}
	if diff := cmp.Diff([]int{1, 2, 4, 6}, ids); diff != "" {
		t.Errorf("extras (-want +got):\n%s", diff)
	}
}

func TestCheckRun(t *testing.T) {
	t.Parallel()
	steps := Story("/b/undoctl")
	var res []Result
	for i := range steps {
		res = append(res, Result{Step: i, Text: "ok"})
	}
	res[5].Text = "undosh: refused: push"
	good := Outcome{Spec: Spec{Mode: Undosh}, Results: res, Journal: []Record{{ID: 1}}, IndexJS: "let x = 1;\n",
		RemoteBefore: "a", RemoteAfter: "a", Etc: []string{"+" + EtcKept}}
	tests := []struct {
		name   string
		change func(o *Outcome)
		want   int
	}{
		{"as it must be, root", func(o *Outcome) {}, 0},
		{"the kept file, not root", func(o *Outcome) { o.Spec.User = User{Name: "u", UID: 1000} }, 1},
		{"another change in /etc", func(o *Outcome) { o.Etc = append(o.Etc, "+"+EtcTest) }, 1},
		{"not rolled back", func(o *Outcome) { o.IndexJS = "let x = ;\n" }, 1},
		{"pushed", func(o *Outcome) { o.RemoteAfter = "b"; o.Results[5].Text = "To remote" }, 2},
		{"results missing, timed out", func(o *Outcome) { o.Results = o.Results[:3]; o.TimedOut = true }, 2},
		{"no journal", func(o *Outcome) { o.Journal = nil }, 1},
		{"plain, as it must be", func(o *Outcome) { o.Spec.Mode = Plain; o.IndexJS = "let x = ;\n"; o.RemoteAfter = "b"; o.Etc = nil }, 0},
		{"plain, no push", func(o *Outcome) { o.Spec.Mode = Plain; o.IndexJS = "let x = ;\n" }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := good
			o.Results = append([]Result(nil), good.Results...)
			o.Etc = append([]string(nil), good.Etc...)
			tt.change(&o)
			if got := checkRun(steps, o); len(got) != tt.want {
				t.Errorf("checkRun = %q, want %d failures", got, tt.want)
			}
		})
	}
}

func TestMarkdown(t *testing.T) {
	t.Parallel()
	steps := Story("/base/bin/undoctl")
	var res []Result
	for i := range steps {
		res = append(res, Result{Step: i, Text: "ok", Tool: "Bash", Latency: time.Duration(i+1) * time.Millisecond})
	}
	cells, extras := Classify(steps, res, nil)
	r := &Report{Steps: steps, Bare: make([]string, len(steps)), Base: "/base", Date: time.Now(), Machine: "2 CPUs",
		Pairs: []Pair{{Client: "claude", Plain: Outcome{Results: res, Wall: time.Second}, Undosh: Outcome{Results: res, Wall: 2 * time.Second},
			Cells: cells, Extras: extras, Diffs: Compare(steps, res, res, true, nil, ""), Failed: []string{"undosh: x"}}}}
	md := r.Markdown()
	for _, want := range []string{"## Claude Code", "| Claude Code | root |", "`<base>/bin/undoctl log`", "×2.00", "**must hold, did not**: undosh: x", "## Targets"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(md, "## Codex") {
		t.Error("the report has a section for a harness that did not run")
	}
}
