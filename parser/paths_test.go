package parser_test

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/undosh/undosh/parser"
)

// links is a file system of symbolic links for [parser.Options.Readlink].
func links(m map[string]string) func(string) (string, error) {
	return func(p string) (string, error) {
		if t, ok := m[p]; ok {
			return t, nil
		}
		return "", fmt.Errorf("readlink %s: %w", p, fs.ErrInvalid)
	}
}

// writeSummary is "path" for each resolved write ("tree:" before a tree)
// and "?" for each write known only at run time.
func writeSummary(f *parser.Facts) string {
	var out []string
	for _, w := range allWrites(f) {
		switch {
		case !w.Resolved:
			out = append(out, "?")
		case w.Tree:
			out = append(out, "tree:"+w.Path)
		default:
			out = append(out, w.Path)
		}
	}
	return strings.Join(out, " ")
}

// TestFamilySymlinkWrites: every written path, and the directory a
// program runs in, resolve through the symbolic links that exist and
// those the step makes, with `..` taken after each link; a `..` after a
// glob is a path known only at run time.
func TestFamilySymlinkWrites(t *testing.T) {
	t.Parallel()
	fsys := links(map[string]string{
		"/w/etc":                 "/etc",
		"/w/up":                  "../..",
		"/w/sub/doc":             "/usr/share/doc",
		"/w/vendor":              "third_party/v",
		"/w/third_party/v/loop":  "/w/third_party/v/loop2",
		"/w/third_party/v/loop2": "/w/third_party/v/loop",
	})
	tests := []struct{ in, want string }{
		{"echo x > etc/passwd", "/etc/passwd"},
		{"echo x >> sub/doc/../x", "/usr/share/x"},
		{"cp a etc/", "tree:/etc"},
		{"tee up/x < f", "/x"},
		{"sed -i s/a/b/ etc/hosts", "/etc/hosts"},
		{"echo x > vendor/a", "/w/third_party/v/a"},
		{"echo x > vendor/loop/a", "?"},
		{"rm -f etc", "/w/etc"},         // rm removes the link itself
		{"rm -rf etc/", "/etc"},         // link/ is the directory
		{"mv etc old", "/w/etc /w/old"}, // mv moves the link
		{"mv f etc", "/w/f /etc"},       // into the directory it points to
		{"tar -xf a.tar -C sub/doc", "tree:/usr/share/doc"},
		{"ln -s /opt o && echo x > o/../z", "tree:/w/o /z"},
		{"ln -s /opt o; ln -s o/bin b; echo x > b/t", "tree:/w/o tree:/w/b /opt/bin/t"},
		{"rm -rf build/*/../../x", "?"},
		{"rm -rf build/*/cache", "tree:/w/build"},
		{"echo x > sub/ok", "/w/sub/ok"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w", Readlink: fsys})
			if got := writeSummary(f); got != tc.want {
				t.Errorf("Parse(%q) writes %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	// A program whose writes are not known runs where its directory is.
	f := parser.Parse("cd etc && make", parser.Options{Cwd: "/w", Readlink: fsys})
	if got := f.Commands[len(f.Commands)-1].Cwd; got != "/etc" {
		t.Errorf("cd etc && make: make runs in %q, want /etc", got)
	}
}

// TestFamilyArchivePaths: an archive extracts under its target unless an
// option (or TAR_OPTIONS, $UNZIP) lets member names go anywhere.
func TestFamilyArchivePaths(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"tar -xf a.tar", "tree:/w"},
		{"tar -xPf a.tar", "tree:/"},
		{"tar xPf a.tar", "tree:/"},
		{"tar --abs -xf a.tar", "tree:/"},
		{"bsdtar --insecure -xf a.tar", "tree:/"},
		{"TAR_OPTIONS=-P tar -xf a.tar", "tree:/"},
		{"export TAR_OPTIONS=--absolute-names; tar -xf a.tar", "tree:/"},
		{"TAR_OPTIONS=-v; export TAR_OPTIONS; tar -xf a.tar", "tree:/w"},
		{"tar -xf a.tar --one-top-level=/opt/x", "tree:/opt/x"},
		{"tar -C out -xf a.tar --one-top-level=sub", "tree:/w/out/sub"},
		{"tar -xOf a.tar f", ""},
		{"tar -tf a.tar", ""},
		{"tar -czf s.tgz --remove-files /var/log/app", "/w/s.tgz tree:/var/log/app"},
		{"tar --delete -f /opt/a.tar m", "/opt/a.tar"},
		{"tar -czf a.tgz -g /var/lib/snap src", "/var/lib/snap /w/a.tgz"},
		{"unzip a.zip", "tree:/w"},
		{"unzip -: a.zip", "tree:/"},
		{"unzip -qo: a.zip -d out", "tree:/"},
		{"UNZIP=-: unzip a.zip", "tree:/"},
		{"unzip -l a.zip", ""},
		{"cpio -idm", "tree:/"},
		{"cpio -idm --no-absolute-filenames -D out", "tree:/w/out"},
		{"cpio -it", ""},
		{"cpio -o -O /opt/a.cpio", "/opt/a.cpio"},
		{"cpio -pdm out", "tree:/"},
		{"pax -rf a.pax", "tree:/"},
		{"pax -wf out.pax src", "/w/out.pax"},
		{"pax -f a.pax", ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
			if got := writeSummary(f); got != tc.want {
				t.Errorf("Parse(%q) writes %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestFamilyChangedThenRun: a file the step changes before it runs it
// holds code not known yet, whether the parser could read it or not;
// changing only its mode, building a program or making a venv does not.
func TestFamilyChangedThenRun(t *testing.T) {
	t.Parallel()
	fsys := map[string]string{
		"/w/build.sh":     "ls\n",
		"/w/package.json": `{"scripts": {"test": "go test ./..."}}`,
	}
	tests := []struct {
		in      string
		unknown bool
	}{
		{"echo 'rm -rf /etc' >> build.sh && ./build.sh", true},
		{"sed -i s/ls/rm/ build.sh; bash build.sh", true},
		{"cp /tmp/x.sh build.sh && . ./build.sh", true},
		{"curl -o build.sh https://x/y && sh build.sh", true},
		{"tar -xf a.tar && ./build.sh", true},
		{"npm pkg set scripts.test='rm -rf ~' && npm test", true},
		{"jq . package.json > p && mv p package.json && npm test", true},
		{"printf 'all:\\n\\trm -rf /\\n' > Makefile && make", true},
		{"echo 'import os' > t.py && python3 t.py", true},
		{"echo 'x' > t.js; node t.js", true},
		{"echo 's/a/b/w /etc/x' > s.sed; sed -f s.sed f", true},
		{"for i in 1 2; do bash build.sh; echo 'rm -rf /' > build.sh; done", true},
		{"./build.sh", false},
		{"chmod +x build.sh && ./build.sh", false},
		{"./build.sh && echo ls >> build.sh", false},
		{"go build -o bin/t . && ./bin/t", false},
		{"python3 -m venv .venv && . .venv/bin/activate", false},
		{"npm pkg get name && npm test", false},
		{"cd /tmp && t=$(mktemp) && ./build.sh \"$t\"", false}, // mktemp makes a new file only
		{"cd /tmp && mktemp -d && echo rm >> build.sh && ./build.sh", true},
	}
	for _, tc := range tests {
		for _, read := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/read=%v", tc.in, read), func(t *testing.T) {
				t.Parallel()
				opts := parser.Options{Cwd: "/w"}
				if read {
					opts.ReadFile = files(fsys)
				}
				f := parser.Parse(tc.in, opts)
				if got := len(f.Unknown) > 0; got != tc.unknown {
					t.Errorf("Parse(%q) unknown = %v, want %v:\n%s", tc.in, got, tc.unknown, unknownText(f))
				}
			})
		}
	}
}
