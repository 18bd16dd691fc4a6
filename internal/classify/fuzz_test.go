package classify

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// FuzzClassify checks that no input makes the parser or the policy panic,
// that an input that does not parse gets the most protective class, and
// that printing the syntax tree and parsing it again gives the same facts.
func FuzzClassify(f *testing.F) {
	for _, l := range loadCorpus(f) {
		f.Add(l.cmd)
	}
	for _, s := range []string{"", "(", "$(", "a=(", "cat <<EOF", "f() { f; }; f", "${x@P}", "eval \"$(echo $x)\""} {
		f.Add(s)
	}
	p := policy.Default()
	opts := ExampleOptions(p)
	// The same with every named script readable, so that the code that
	// reads scripts (path-qualified programs, bash x.sh) is fuzzed too.
	withFiles := opts
	withFiles.ReadFile = func(string) ([]byte, error) { return []byte("#!/bin/sh\necho x > out\n"), nil }
	withFiles.NoScripts = false
	f.Add(".venv/bin/python -m unittest")
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		Decide(src, withFiles)
		res := Decide(src, opts)
		if res.Facts.Err != nil && res.Decision.Class != p.UnknownCode && res.Decision.Class < p.UnknownCode {
			t.Fatalf("%q does not parse but got class %s", src, res.Decision.Class)
		}
		if res.Facts.Err != nil {
			return
		}
		for _, u := range res.Facts.Unknown {
			if strings.Contains(u.Reason, "line continuation") {
				// mvdan reads "$\<newline>(" as literal text and prints it
				// back as a substitution: the divergence the finding is for.
				return
			}
		}
		if strings.ContainsAny(src, "\f\v\r\x00") {
			// mvdan's printer drops these from words; bash keeps them
			// (NUL cannot reach bash at all).
			return
		}
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
		if err != nil {
			return // the streaming parser and the whole-file parser differ only on errors
		}
		if procSubstInWord(file) {
			return
		}
		var b strings.Builder
		if err := syntax.NewPrinter().Print(&b, file); err != nil {
			t.Fatalf("print %q: %v", src, err)
		}
		again := parser.Parse(b.String(), parser.Options{Cwd: opts.Cwd, Env: opts.Env, Knows: p.Knows})
		if again.Err != nil {
			// mvdan's printer can produce text it cannot parse back; that
			// is its bug, not ours, but the facts must still be protective.
			if d := Decide(b.String(), opts).Decision; d.Class < p.UnknownCode {
				t.Fatalf("printed form of %q does not parse but got class %s", src, d.Class)
			}
			return
		}
		if diff := cmp.Diff(essence(res.Facts), essence(again)); diff != "" {
			t.Fatalf("facts differ after printing %q as %q (-orig +printed):\n%s", src, b.String(), diff)
		}
	})
}

// procSubstInWord reports a word with a process substitution after other
// parts (x<(y)), which mvdan's printer splits into two words.
func procSubstInWord(file *syntax.File) bool {
	found := false
	syntax.Walk(file, func(n syntax.Node) bool {
		if w, ok := n.(*syntax.Word); ok {
			for i, p := range w.Parts {
				if _, ok := p.(*syntax.ProcSubst); ok && i > 0 {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// fact is what must survive printing: positions and source text do not.
type fact struct {
	Argv     []parser.Arg
	Wrappers []string
	Root     bool
	Cwd      string
	Writes   []parser.Write
	Opaque   bool
	Via      string
}

type essentials struct {
	Commands []fact
	Unknown  []string
}

func essence(f *parser.Facts) essentials {
	var out []fact
	for _, c := range f.Commands {
		// Dynamic words and unresolved paths keep their source text,
		// which printing may respell.
		// mvdan's printer may also split a word made only of
		// substitutions ($(a)<(b) becomes "$(a) <(b)"), so runs of
		// dynamic words count as one.
		var argv []parser.Arg
		for _, a := range c.Argv {
			if a.Dynamic {
				if len(argv) > 0 && argv[len(argv)-1].Dynamic {
					continue
				}
				a.Value = ""
			}
			argv = append(argv, a)
		}
		var writes []parser.Write
		for _, w := range c.Writes {
			if !w.Resolved {
				w.Path = ""
			}
			writes = append(writes, w)
		}
		out = append(out, fact{Argv: argv, Wrappers: c.Wrappers, Root: c.Root, Cwd: c.Cwd,
			Writes: writes, Opaque: c.Opaque, Via: c.Via})
	}
	var unknown []string
	for _, u := range f.Unknown {
		if strings.Contains(u.Reason, "line continuation") {
			continue // a property of the raw text, which printing changes
		}
		unknown = append(unknown, u.Reason)
	}
	return essentials{out, unknown}
}
