// Package docs holds undosh's documentation; its tests check that the
// documentation's links, and the markdown files that the documentation and
// the Go comments cite, resolve inside the repository.
package docs

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// inline is [text](target) or ![alt](target), with an optional title.
	inline = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(?:<([^>]*)>|([^)\s]+))(?:\s+"[^"]*")?\s*\)`)
	// reference is a link definition: [label]: target.
	reference = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// codeSpan is inline code, where brackets are not links.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	// scheme starts a URL (https:, mailto:).
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// link is one relative link of a markdown file.
type link struct {
	line   int
	target string
}

// links returns the relative links of markdown text: neither URLs nor
// anchors within the same file, and none inside code.
func links(text string) []link {
	var out []link
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		line = codeSpan.ReplaceAllString(line, "``")
		var targets []string
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1]+m[2])
		}
		if m := reference.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if scheme.MatchString(t) || strings.HasPrefix(t, "#") {
				continue
			}
			out = append(out, link{line: i + 1, target: t})
		}
	}
	return out
}

func TestLinks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     []string
	}{
		{"relative", "see [the policy](policy.md) and [x](../README.md#set-up)", []string{"policy.md", "../README.md#set-up"}},
		{"image and title", `![a](img/a.png "A") [b](<b c.md>)`, []string{"img/a.png", "b c.md"}},
		{"urls and anchors", "[a](https://x.org/a.md) [b](mailto:a@b) [c](#top)", nil},
		{"code", "`[a](no.md)` and\n```\n[b](no.md)\n```\n[c](yes.md)", []string{"yes.md"}},
		{"reference", "[a]: ref.md\n[b]: https://x.org", []string{"ref.md"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, l := range links(tc.in) {
				got = append(got, l.target)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("links(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// Every relative link in README.md and the other markdown files of the
// repository (docs/ above all) names a file or directory that is in the
// repository.
func TestLinksResolve(t *testing.T) {
	t.Parallel()
	root, files := walk(t, ".md")
	var broken []string
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, l := range links(string(text)) {
			target, _, _ := strings.Cut(l.target, "#")
			target, _, _ = strings.Cut(target, "?")
			if target == "" {
				continue
			}
			if u, err := url.PathUnescape(target); err == nil {
				target = u
			}
			var p string
			if strings.HasPrefix(target, "/") {
				p = filepath.Join(root, target) // from the repository's root, as GitHub reads it
			} else {
				p = filepath.Join(filepath.Dir(f), target)
			}
			in, err := filepath.Rel(root, p)
			switch {
			case err != nil || in == ".." || strings.HasPrefix(in, ".."+string(filepath.Separator)):
				broken = append(broken, fmt.Sprintf("%s:%d: %s (outside the repository)", rel, l.line, l.target))
			default:
				if _, err := os.Stat(p); err != nil {
					broken = append(broken, fmt.Sprintf("%s:%d: %s (no such file)", rel, l.line, l.target))
				}
			}
		}
	}
	if len(broken) > 0 {
		t.Errorf("%d broken links:\n\t%s", len(broken), strings.Join(broken, "\n\t"))
	}
}

// walk returns the module's root and its files whose names end in ext,
// leaving out hidden directories and testdata.
func walk(t *testing.T, ext string) (root string, files []string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root: %v", err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ext) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no %s files under %s", ext, root)
	}
	return root, files
}

var (
	// citedInCode is a code span that is a markdown file's path.
	citedInCode = regexp.MustCompile("`([\\w./-]+\\.md)`")
	// citedInComment is a markdown file's path in a Go comment, not part
	// of a URL.
	citedInComment = regexp.MustCompile(`(?:^|[\s("'])([\w.-][\w./-]*\.md)\b`)
)

// knownBroken are citations in Go code that this package's change may not
// fix (only doc.go files and markdown are its own): each is removed when
// it is fixed, and the test fails while one listed is no longer broken.
var knownBroken = map[string]string{}

// Every markdown file that the markdown (as `path.md`) or a Go comment
// names is in the repository, read from the citing file's directory or
// from the repository's root.
func TestCitationsResolve(t *testing.T) {
	t.Parallel()
	root, mds := walk(t, ".md")
	_, gos := walk(t, ".go")
	type citation struct {
		file, target string
		line         int
	}
	var cites []citation
	for _, f := range mds {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range citedInCode.FindAllStringSubmatch(line, -1) {
				cites = append(cites, citation{f, m[1], i + 1})
			}
		}
	}
	fset := token.NewFileSet()
	for _, f := range gos {
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, g := range file.Comments {
			for _, c := range g.List {
				for _, m := range citedInComment.FindAllStringSubmatchIndex(c.Text, -1) {
					if strings.HasSuffix(c.Text[:m[2]], "//") {
						continue
					}
					line := fset.Position(c.Pos()).Line + strings.Count(c.Text[:m[2]], "\n")
					cites = append(cites, citation{f, c.Text[m[2]:m[3]], line})
				}
			}
		}
	}
	if len(cites) == 0 {
		t.Fatal("no citations found")
	}
	var broken []string
	still := map[string]bool{}
	for _, c := range cites {
		if exists(filepath.Join(filepath.Dir(c.file), c.target)) || exists(filepath.Join(root, c.target)) {
			continue
		}
		rel, _ := filepath.Rel(root, c.file)
		key := filepath.ToSlash(rel) + ": " + c.target
		if _, ok := knownBroken[key]; ok {
			still[key] = true
			continue
		}
		broken = append(broken, fmt.Sprintf("%s:%d: %s", rel, c.line, c.target))
	}
	if len(broken) > 0 {
		t.Errorf("%d citations of markdown files that are not in the repository:\n\t%s", len(broken), strings.Join(broken, "\n\t"))
	}
	for key := range knownBroken {
		if !still[key] {
			t.Errorf("%s is fixed: remove it from knownBroken", key)
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
