package parser

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"mvdan.cc/sh/v3/syntax"
)

// TestPush: what a push updates, as its words say. The policy's tests
// decide from these same readings (policy/decide_test.go).
func TestPush(t *testing.T) {
	t.Parallel()
	branch := func(b string) Refspec { return Refspec{Text: b, Dst: b} }
	tests := []struct {
		in   string
		want *Push // nil: not a push
	}{
		{"git push origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git push origin HEAD:refs/heads/master", &Push{Refs: []Refspec{{Text: "HEAD:refs/heads/master", Dst: "master"}}}},
		{"git -C /work/proj push origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git push --force origin feature/x", &Push{Refs: []Refspec{branch("feature/x")}, Force: true}},
		{"git push -fu origin feature/x", &Push{Refs: []Refspec{branch("feature/x")}, Force: true}},
		{"git push origin +feature/x", &Push{Refs: []Refspec{{Text: "+feature/x", Forced: true, Dst: "feature/x"}}}},
		{"git push origin :feature/x", &Push{Refs: []Refspec{{Text: ":feature/x", Delete: true, Dst: "feature/x"}}}},
		{"git push -u origin feature/x", &Push{Refs: []Refspec{branch("feature/x")}}},
		{"git push", &Push{Current: true}},
		{"git push origin", &Push{Current: true}},
		{"git push origin HEAD", &Push{Refs: []Refspec{{Text: "HEAD", Current: true, Dst: "HEAD"}}, Current: true}},
		{"git push origin $BRANCH", &Push{Refs: []Refspec{{Text: "$BRANCH", Dynamic: true}}}},
		{"git push --force origin main", &Push{Refs: []Refspec{branch("main")}, Force: true}},
		{"git push origin prod", &Push{Refs: []Refspec{branch("prod")}}},
		{"git $SUB", &Push{Current: true}},
		// Options and their values.
		{"git push --force-with-lease=main:abc origin x", &Push{Refs: []Refspec{branch("x")}, Force: true}},
		{"git push --delete origin x", &Push{Refs: []Refspec{branch("x")}, Force: true}},
		{"git push --mirror origin", &Push{Force: true, Current: true}},
		{"git push -o ci.skip origin", &Push{Current: true}},
		{"git push --push-option main origin x", &Push{Refs: []Refspec{branch("x")}}},
		{"git push -q origin x", &Push{Refs: []Refspec{branch("x")}}},
		{"git push --repo=origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git push --repo origin main dev", &Push{Refs: []Refspec{branch("main"), branch("dev")}}},
		{"git push origin -- -x", &Push{Refs: []Refspec{branch("-x")}}},
		{"git push origin -- $B", &Push{Refs: []Refspec{{Text: "$B", Dynamic: true}}}},
		{"git push origin ''", &Push{Refs: []Refspec{{Dynamic: true}}}},
		{"git push $REMOTE main", &Push{Refs: []Refspec{branch("main")}}},
		// Refspecs.
		{"git push origin :", &Push{Refs: []Refspec{{Text: ":", Matching: true}}}},
		{"git push origin +:", &Push{Refs: []Refspec{{Text: "+:", Forced: true, Matching: true}}}},
		{"git push origin @", &Push{Refs: []Refspec{{Text: "@", Current: true, Dst: "@"}}, Current: true}},
		{"git push origin x:heads/main", &Push{Refs: []Refspec{{Text: "x:heads/main", Dst: "main"}}}},
		{"git push origin 'refs/heads/*:refs/heads/*'", &Push{Refs: []Refspec{{Text: "refs/heads/*:refs/heads/*", Dst: "*"}}}},
		{"git push origin a:b:c", &Push{Refs: []Refspec{{Text: "a:b:c", Dst: "c"}}}},
		// Its other names.
		{"git send-pack origin x", &Push{Refs: []Refspec{branch("x")}}},
		{"git http-push https://example.com/x.git", &Push{Current: true, Config: []Refspec{{Text: ":", Matching: true}}}},
		{"git PUSH origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git subtree push -P docs origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git subtree -P docs push origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git lfs push origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git lfs -x push origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git lfs $X origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"/usr/lib/git-core/git-push origin main", &Push{Refs: []Refspec{branch("main")}}},
		{"git -c push.default=matching push", &Push{Current: true, Config: []Refspec{{Text: ":", Matching: true}}}},
		// Not pushes.
		{"git", nil},
		{"git --version", nil},
		{"git status", nil},
		{"git branch -d main", nil},
		{"git stash push -m wip", nil},
		{"git lfs pull origin main", nil},
		{"git subtree split -P docs", nil},
		{"git lfs", nil},
		{"hg push origin main", nil},
		{"$GIT push origin main", nil},
	}
	for _, tt := range tests {
		f := Parse(tt.in, Options{Cwd: "/w"})
		if len(f.Commands) == 0 {
			t.Errorf("%q: no command", tt.in)
			continue
		}
		c := f.Commands[len(f.Commands)-1]
		if diff := cmp.Diff(tt.want, c.Push); diff != "" {
			t.Errorf("%q: Push (-want +got):\n%s", tt.in, diff)
		}
	}
}

// FuzzPush: the reading of a push's words never panics, says the same
// again of the words it reports, and of the command printed and parsed
// again.
func FuzzPush(f *testing.F) {
	for _, s := range []string{"origin main", "-fu origin x", "--repo=o a b", "o -- -x", "o +:", "o :", "o :x", "o HEAD:refs/heads/m",
		"-o x origin", "--repo", "o a:b:c", "o ''", "-", "--", "o @", "o refs/heads/*"} {
		f.Add("push", s)
	}
	f.Add("subtree", "-P d push o main")
	f.Add("lfs", "push o main")
	f.Fuzz(func(t *testing.T, sub, words string) {
		if len(sub)+len(words) > 256 {
			return
		}
		argv := []Arg{{Value: "git"}, {Value: sub}}
		for _, w := range strings.Fields(words) {
			argv = append(argv, Arg{Value: w, Dynamic: strings.HasPrefix(w, "$")})
		}
		c := Command{Argv: argv, Sub: 1}
		pushWords(&c)
		p := c.Push
		if p == nil {
			return
		}
		current := len(p.Refs) == 0
		for _, r := range p.Refs {
			current = current || r.Current
			if r.Dynamic {
				continue
			}
			if again := refspec(Arg{Value: r.Text}); again != r {
				t.Errorf("%q: refspec %+v read again is %+v", words, r, again)
			}
			if !strings.Contains(words, r.Text) {
				t.Errorf("%q: refspec %q is not one of the words", words, r.Text)
			}
		}
		if current != p.Current {
			t.Errorf("%q: Current = %v with refs %+v", words, p.Current, p.Refs)
		}
		// The same command, printed as shell words and parsed again.
		quoted := make([]string, len(argv))
		for i, a := range argv {
			q, err := syntax.Quote(a.Value, syntax.LangBash)
			if err != nil || a.Dynamic {
				return
			}
			quoted[i] = q
		}
		src := strings.Join(quoted, " ")
		facts := Parse(src, Options{Cwd: "/w"})
		if facts.Err != nil || len(facts.Unknown) > 0 || len(facts.Commands) != 1 {
			return
		}
		// The walk may read more into it (a subcommand that may be an
		// alias git cannot see here is dynamic): compare the same words.
		if got := facts.Commands[0]; got.Sub == 1 && cmp.Equal(got.Argv, argv) {
			if diff := cmp.Diff(p, got.Push); diff != "" {
				t.Errorf("%s: Push after parsing (-read +parsed):\n%s", src, diff)
			}
		}
	})
}
