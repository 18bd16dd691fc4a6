package parser_test

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/parser"
)

// files returns an Options.ReadFile that serves an in-memory tree, so that
// no test touches the disk.
// unreadable, as a file's text in files, makes reading it fail with
// a permission error.
const unreadable = "\x00unreadable"

func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		s, ok := m[p]
		if !ok {
			return nil, fmt.Errorf("read %s: %w", p, fs.ErrNotExist)
		}
		if s == unreadable {
			return nil, fmt.Errorf("read %s: %w", p, fs.ErrPermission)
		}
		return []byte(s), nil
	}
}

// line renders a command as its argv joined by spaces, prefixed by how
// nested code reached it: "[bash -c] rm x".
func line(c parser.Command) string {
	vals := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		vals[i] = a.Value
	}
	s := strings.Join(vals, " ")
	if c.Via != "" {
		s = "[" + c.Via + "] " + s
	}
	return s
}

func lines(f *parser.Facts) []string {
	var out []string
	for _, c := range f.Commands {
		out = append(out, line(c))
	}
	return out
}

// args builds literal arguments.
func args(vals ...string) []parser.Arg {
	out := make([]parser.Arg, len(vals))
	for i, v := range vals {
		out[i] = parser.Arg{Value: v}
	}
	return out
}

func dyn(v string) parser.Arg { return parser.Arg{Value: v, Dynamic: true} }

func allWrites(f *parser.Facts) []parser.Write {
	var out []parser.Write
	for _, c := range f.Commands {
		out = append(out, c.Writes...)
	}
	return out
}

func unknownText(f *parser.Facts) string {
	var sb strings.Builder
	for _, u := range f.Unknown {
		fmt.Fprintf(&sb, "%s: %s: %q\n", u.Pos, u.Reason, u.Text)
	}
	return sb.String()
}

func TestParseCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"simple", "ls -l", []string{"ls -l"}},
		{"pipeline", "cat f | grep x | wc -l", []string{"cat f", "grep x", "wc -l"}},
		{"pipe all", "make |& tee log", []string{"make", "tee log"}},
		{"and or list", "a && b || c; d & e", []string{"a", "b", "c", "d", "e"}},
		{"newlines", "a\nb\n\nc", []string{"a", "b", "c"}},
		{"subshell", "(a; (b))", []string{"a", "b"}},
		{"block", "{ a; { b; }; }", []string{"a", "b"}},
		{"if elif else", "if a; then b; elif c; then d; else e; fi", []string{"a", "b", "c", "d", "e"}},
		{"while", "while a; do b; done", []string{"a", "b"}},
		{"until", "until a; do b; done", []string{"a", "b"}},
		{"for in", "for i in 1 2; do echo hi; done", []string{"echo hi"}},
		{"for in, once per item", "for i in 1 2; do echo hi; echo $i; done", []string{"echo hi", "echo 1", "echo 2"}},
		{"nested for in", "for a in x y; do for b in 1 2; do echo $a$b; done; done", []string{"echo x1", "echo x2", "echo y1", "echo y2"}},
		{"for items with substitution", "for f in $(ls); do echo hi; done", []string{"ls", "echo hi"}},
		{"c-style for", "for ((i=0; i<3; i++)); do b; done", []string{"b"}},
		{"case", "case $x in a) b;; *) c;; esac", []string{"b", "c"}},
		{"case word substitution", "case $(uname) in Linux) b;; esac", []string{"uname", "b"}},
		{"command substitution", "echo $(date) `uname`", []string{"date", "uname", "echo $(date) `uname`"}},
		{"nested command substitution", "echo $(echo $(id))", []string{"id", "echo $(id)", "echo $(echo $(id))"}},
		{"substitution in assignment", "x=$(id)", []string{"id"}},
		{"substitution in redirect", "echo > $(mktemp)", []string{"mktemp", "echo"}},
		{"process substitution", "diff <(ls a) >(cat)", []string{"ls a", "cat", "diff <(ls a) >(cat)"}},
		{"here-doc substitution", "cat <<EOF\n$(whoami)\nEOF", []string{"whoami", "cat"}},
		{"quoted here-doc runs nothing", "cat <<'EOF'\n$(whoami)\nEOF", []string{"cat"}},
		{"arithmetic substitution", "echo $(( $(id -u) + 1 ))", []string{"id -u", "echo $(( $(id -u) + 1 ))"}},
		{"test clause substitution", "[[ -f $(pwd)/x ]]", []string{"pwd", "[["}},
		{"function defined is not run", "f() { rm x; }", nil},
		{"function called", "f() { rm x; }; f", []string{"f", "rm x"}},
		{"function called before it is defined", "f; f() { rm x; }", []string{"f"}},
		{"function redefined", "f() { rm x; }; f() { rm y; }; f", []string{"f", "rm y"}},
		{"function keyword", "function f { rm x; }\nf", []string{"f", "rm x"}},
		{"function positional params", `f() { rm "$1" "$2"; echo $#; }; f a b`, []string{"f a b", "rm a b", "echo 2"}},
		{"function all params", `f() { rm "$@"; }; f a b`, []string{"f a b", "rm a b"}},
		{"function calls function", "f() { g; }; g() { rm z; }; f", []string{"f", "g", "rm z"}},
		{"recursive function stops", "f() { f; }; f", []string{"f", "f"}},
		{"bash -c", `bash -c "ls; rm x"`, []string{"bash -c ls; rm x", "[bash -c] ls", "[bash -c] rm x"}},
		{"sh -c", `sh -c 'touch y'`, []string{"sh -c touch y", "[sh -c] touch y"}},
		{"bash -c with options", `bash -ec 'rm y'`, []string{"bash -ec rm y", "[bash -c] rm y"}},
		{"nested bash -c", `bash -c "sh -c 'rm y'"`, []string{"bash -c sh -c 'rm y'", "[bash -c] sh -c rm y", "[bash -c > sh -c] rm y"}},
		{"bash here-doc", "bash <<EOF\nrm x\nEOF", []string{"bash", "[bash <<here-document] rm x"}},
		{"sh here-string", `sh <<< "rm y"`, []string{"sh", "[sh <<<] rm y"}},
		{"eval of a literal", `eval 'rm -rf a; ls'`, []string{"[eval] rm -rf a", "[eval] ls", "eval rm -rf a; ls"}},
		{"eval of words", `eval rm x`, []string{"[eval] rm x", "eval rm x"}},
		{"trap runs when the shell ends", `trap 'rm x' EXIT; ls`, []string{"trap rm x EXIT", "ls", "[trap] rm x"}},
		{"find -exec sh -c", `find . -name '*.sh' -exec sh -c 'chmod +x {}' \;`, []string{
			"find . -name *.sh -exec sh -c chmod +x {} ;",
			`sh -c chmod +x "$FIND_PATH"`,
			`[sh -c] chmod +x "$FIND_PATH"`,
		}},
		{"xargs sh -c", `xargs sh -c 'rm "$1"' _`, []string{
			`sh -c rm "$1" _ <xargs input>`,
			`[sh -c] rm "$1"`,
		}},
		{"watch", `watch -n 1 'ls; rm x'`, []string{"watch -n 1 ls; rm x", "[watch] ls", "[watch] rm x"}},
		{"alias", "alias ll='ls -l'; ll", []string{"alias ll=ls -l", "[alias ll] ls -l", "ll"}},
		{"background and coprocess", "a & b", []string{"a", "b"}},
		{"time keyword", "time a | b", []string{"a", "b"}},
		{"declare", "declare -x A=1", []string{"declare"}},
		{"only redirection", "> f", []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
			if diff := cmp.Diff(tc.want, lines(f)); diff != "" {
				t.Errorf("Parse(%q) commands (-want +got):\n%s", tc.in, diff)
			}
			if len(f.Unknown) > 0 {
				t.Errorf("Parse(%q) unknown code:\n%s", tc.in, unknownText(f))
			}
			if f.Err != nil {
				t.Errorf("Parse(%q) error: %v", tc.in, f.Err)
			}
		})
	}
}

// TestParseCommandFields checks the fields, beyond argv, that say where a
// command came from.
func TestParseCommandFields(t *testing.T) {
	t.Parallel()
	type fields struct {
		Line     string
		Pos      parser.Pos
		Text     string
		Depth    int
		Function bool
		Builtin  bool
		Env      []string
	}
	tests := []struct {
		name string
		in   string
		want []fields
	}{
		{
			name: "positions across lines",
			in:   "ls\n  rm x",
			want: []fields{
				{Line: "ls", Pos: parser.Pos{Line: 1, Col: 1}, Text: "ls"},
				{Line: "rm x", Pos: parser.Pos{Line: 2, Col: 3}, Text: "rm x"},
			},
		},
		{
			name: "nested code takes the outer position",
			in:   "true\nbash -c 'rm x'",
			want: []fields{
				{Line: "true", Pos: parser.Pos{Line: 1, Col: 1}, Text: "true", Builtin: true},
				{Line: "bash -c rm x", Pos: parser.Pos{Line: 2, Col: 1}, Text: "bash -c 'rm x'"},
				{Line: "[bash -c] rm x", Pos: parser.Pos{Line: 2, Col: 1}, Text: "rm x", Depth: 1},
			},
		},
		{
			name: "function call and body",
			in:   "f() { rm x; }\nf",
			want: []fields{
				{Line: "f", Pos: parser.Pos{Line: 2, Col: 1}, Text: "f", Function: true, Builtin: true},
				{Line: "rm x", Pos: parser.Pos{Line: 1, Col: 7}, Text: "rm x"},
			},
		},
		{
			name: "prefix assignments",
			in:   "A=1 B=2 rm x",
			want: []fields{{Line: "rm x", Pos: parser.Pos{Line: 1, Col: 1}, Text: "A=1 B=2 rm x", Env: []string{"A", "B"}}},
		},
		{
			name: "text excludes the list separator",
			in:   "cd x; ls",
			want: []fields{
				{Line: "cd x", Pos: parser.Pos{Line: 1, Col: 1}, Text: "cd x", Builtin: true},
				{Line: "ls", Pos: parser.Pos{Line: 1, Col: 7}, Text: "ls"},
			},
		},
		{
			name: "coproc of a simple command",
			in:   "coproc rm x",
			want: []fields{{Line: "rm x", Pos: parser.Pos{Line: 1, Col: 8}, Text: "rm x"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
			var got []fields
			for _, c := range f.Commands {
				got = append(got, fields{Line: line(c), Pos: c.Pos, Text: c.Text, Depth: c.Depth,
					Function: c.Function, Builtin: c.Builtin, Env: c.Env})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// wsum renders writes as "path" when resolved and "?path" when not, so
// that cwd tests read as a list of where things land.
func wsum(f *parser.Facts) []string {
	var out []string
	for _, w := range allWrites(f) {
		if w.Resolved {
			out = append(out, w.Path)
		} else {
			out = append(out, "?"+w.Path)
		}
	}
	return out
}

func TestParseCwd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		cwd  string
		env  map[string]string
		want []string // every write, in order
		// wantCwd is the Cwd of the last command.
		wantCwd string
	}{
		{name: "relative against Cwd", in: "echo x > out", cwd: "/w", want: []string{"/w/out"}, wantCwd: "/w"},
		{name: "append and stderr", in: "echo x >> a 2> b &> c", cwd: "/w", want: []string{"/w/a", "/w/b", "/w/c"}, wantCwd: "/w"},
		{name: "cleaned", in: "echo x > ./d/../out", cwd: "/w/", want: []string{"/w/out"}, wantCwd: "/w"},
		{name: "absolute without Cwd", in: "echo x > /abs/out", want: []string{"/abs/out"}},
		{name: "relative without Cwd", in: "echo x > out", want: []string{"?out"}},
		{name: "relative Options.Cwd is ignored", in: "echo x > out", cwd: "w", want: []string{"?out"}},
		{name: "cd relative", in: "cd sub && echo > a", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "cd absolute", in: "cd /tmp; echo > a", cwd: "/w", want: []string{"/tmp/a"}, wantCwd: "/tmp"},
		{name: "cd absolute without Cwd", in: "cd /tmp; echo > a", want: []string{"/tmp/a"}, wantCwd: "/tmp"},
		{name: "cd ..", in: "cd ..; echo > a", cwd: "/w/x", want: []string{"/w/a"}, wantCwd: "/w"},
		{name: "cd to a literal variable", in: "d=sub; cd $d; echo > a", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "cd to an unknown variable", in: `cd "$d"; echo > a`, cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "cd - returns", in: "cd a; cd b; cd -; echo > x", cwd: "/w", want: []string{"/w/a/x"}, wantCwd: "/w/a"},
		{name: "cd - to OLDPWD from Env", in: "cd -; echo > x", cwd: "/w", env: map[string]string{"OLDPWD": "/prev"}, want: []string{"/prev/x"}, wantCwd: "/prev"},
		{name: "cd - without OLDPWD", in: "cd -; echo > x", cwd: "/w", want: []string{"?x"}, wantCwd: ""},
		{name: "cd home", in: "cd; echo > a", cwd: "/w", env: map[string]string{"HOME": "/home/u"}, want: []string{"/home/u/a"}, wantCwd: "/home/u"},
		{name: "cd home unknown", in: "cd; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "cd tilde", in: "cd ~/p; echo > a", cwd: "/w", env: map[string]string{"HOME": "/home/u"}, want: []string{"/home/u/p/a"}, wantCwd: "/home/u/p"},
		{
			name: "cd tilde without HOME", in: "cd ~/p; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: "",
		},
		{name: "cd with CDPATH set", in: "CDPATH=/x; cd sub; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "cd in a block carries on", in: "{ cd sub; }; echo > a", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "cd in a function carries on", in: "f() { cd sub; }; f; echo > a", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "cd in a function with its argument", in: `f() { cd "$1"; }; f sub; echo > a`, cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "cd in eval carries on", in: "eval 'cd sub'; echo > a", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "builtin cd", in: "builtin cd sub; echo > a", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "pushd popd", in: "pushd a; echo > x; popd; echo > y", cwd: "/w", want: []string{"/w/a/x", "/w/y"}, wantCwd: "/w"},
		{name: "pushd twice popd twice", in: "pushd a; pushd /t; popd; echo > x; popd; echo > y", cwd: "/w", want: []string{"/w/a/x", "/w/y"}, wantCwd: "/w"},
		{name: "pushd swaps", in: "pushd a; pushd; echo > x", cwd: "/w", want: []string{"/w/x"}, wantCwd: "/w"},
		{name: "popd of an empty stack", in: "popd; echo > x", cwd: "/w", want: []string{"?x"}, wantCwd: ""},
		{name: "pushd of an unknown", in: `pushd "$d"; echo > x`, cwd: "/w", want: []string{"?x"}, wantCwd: ""},
		{name: "subshell restores", in: "(cd sub; echo > a); echo > b", cwd: "/w", want: []string{"/w/sub/a", "/w/b"}, wantCwd: "/w"},
		{name: "pipeline restores", in: "cd sub | cat; echo > a", cwd: "/w", want: []string{"/w/a"}, wantCwd: "/w"},
		{name: "background restores", in: "cd sub & echo > a", cwd: "/w", want: []string{"/w/a"}, wantCwd: "/w"},
		{name: "command substitution restores", in: "echo $(cd sub; echo > a) > b", cwd: "/w", want: []string{"/w/sub/a", "/w/b"}, wantCwd: "/w"},
		{name: "bash -c restores", in: "bash -c 'cd sub; echo > a'; echo > b", cwd: "/w", want: []string{"/w/sub/a", "/w/b"}, wantCwd: "/w"},
		{name: "bash -c starts in the cwd", in: "cd sub; bash -c 'echo > a'", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "if that changes cwd", in: "if t; then cd sub; fi; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "if that does not change cwd", in: "if t; then echo > a; fi; echo > b", cwd: "/w", want: []string{"/w/a", "/w/b"}, wantCwd: "/w"},
		{name: "inside the if branch", in: "if t; then cd sub; echo > a; fi", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "else branch", in: "if t; then :; else cd sub; fi; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "or list", in: "t || cd sub; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "and list", in: "t && cd sub; echo > a", cwd: "/w", want: []string{"/w/sub/a"}, wantCwd: "/w/sub"},
		{name: "case", in: "case a in a) cd sub;; esac; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "for loop", in: "for i in 1; do cd sub; done; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "while loop", in: "while t; do cd sub; done; echo > a", cwd: "/w", want: []string{"?a"}, wantCwd: ""},
		{name: "loop body sees the previous iteration", in: "for i in a b; do echo > x; cd sub; done", cwd: "/w", want: []string{"?x"}, wantCwd: ""},
		{name: "loop that does not change cwd", in: "while t; do echo > x; done; echo > y", cwd: "/w", want: []string{"/w/x", "/w/y"}, wantCwd: "/w"},
		{name: "compound redirect", in: "{ ls; } > out; while t; do :; done >> log", cwd: "/w", want: []string{"/w/out", "/w/log"}, wantCwd: "/w"},
		{name: "fd duplication writes nothing", in: "echo x 2>&1 >&3 3>&-", cwd: "/w", want: nil, wantCwd: "/w"},
		{name: "harmless devices", in: "echo x > /dev/null 2> /dev/stderr", cwd: "/w", want: nil, wantCwd: "/w"},
		{name: "input is not a write", in: "cat < in", cwd: "/w", want: nil, wantCwd: "/w"},
		{name: "dynamic target", in: `echo x > "$f"`, cwd: "/w", want: []string{`?"$f"`}, wantCwd: "/w"},
		{name: "exec redirect", in: "exec > log", cwd: "/w", want: []string{"/w/log"}, wantCwd: "/w"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: tc.cwd, Env: tc.env})
			if diff := cmp.Diff(tc.want, wsum(f)); diff != "" {
				t.Errorf("Parse(%q) writes (-want +got):\n%s", tc.in, diff)
			}
			if len(f.Commands) == 0 {
				t.Fatalf("Parse(%q) found no commands", tc.in)
			}
			if got := f.Commands[len(f.Commands)-1].Cwd; got != tc.wantCwd {
				t.Errorf("Parse(%q) last command Cwd = %q, want %q", tc.in, got, tc.wantCwd)
			}
		})
	}
}

// wrapped is what a wrapper test checks of each command.
type wrapped struct {
	Argv     []parser.Arg
	Wrappers []string
	Root     bool
	Cwd      string
	Env      []string
}

func TestParseWrappers(t *testing.T) {
	t.Parallel()
	const cwd = "/w"
	tests := []struct {
		name    string
		in      string
		want    []wrapped
		unknown bool
	}{
		{name: "sudo -u", in: "sudo -u bob rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"sudo"}, Root: true, Cwd: cwd}}},
		{name: "sudo --user=", in: "sudo --user=bob rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"sudo"}, Root: true, Cwd: cwd}}},
		{name: "sudo --user VALUE", in: "sudo --user bob -- rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"sudo"}, Root: true, Cwd: cwd}}},
		{name: "sudo -D", in: "sudo -D /srv rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"sudo"}, Root: true, Cwd: "/srv"}}},
		{name: "sudo -i with a command", in: "sudo -i rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"sudo"}, Root: true, Cwd: cwd}}},
		{name: "sudo -i alone", in: "sudo -i", want: []wrapped{{Argv: args("sudo", "-i"), Cwd: cwd}}, unknown: true},
		{name: "sudo -u -s alone", in: "sudo -u bob -s", want: []wrapped{{Argv: args("sudo", "-u", "bob", "-s"), Cwd: cwd}}, unknown: true},
		{name: "sudo with a dynamic word", in: `sudo "$opt" rm x`, want: []wrapped{{Argv: []parser.Arg{dyn(`"$opt"`), {Value: "rm"}, {Value: "x"}}, Wrappers: []string{"sudo"}, Root: true, Cwd: cwd}}, unknown: true},
		{name: "sudo with a dynamic option", in: `sudo $opts rm x`, want: []wrapped{{Argv: []parser.Arg{{Value: "sudo"}, dyn(`$opts`), {Value: "rm"}, {Value: "x"}}, Cwd: cwd}}, unknown: true},
		{name: "doas -u", in: "doas -u bob rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"doas"}, Root: true, Cwd: cwd}}},
		{name: "doas -s alone", in: "doas -s", want: []wrapped{{Argv: args("doas", "-s"), Cwd: cwd}}, unknown: true},
		{name: "su -c", in: `su -c 'rm x' bob`, want: []wrapped{
			{Argv: args("su", "-c", "rm x", "bob"), Root: true, Cwd: cwd},
			{Argv: args("rm", "x"), Root: true, Cwd: cwd},
		}},
		{name: "su - user -c", in: `su - bob -c 'rm x'`, want: []wrapped{
			{Argv: args("su", "-", "bob", "-c", "rm x"), Root: true, Cwd: cwd},
			{Argv: args("rm", "x"), Root: true, Cwd: cwd},
		}},
		{name: "su alone", in: "su bob", want: []wrapped{{Argv: args("su", "bob"), Cwd: cwd}}, unknown: true},
		{name: "runuser -u", in: "runuser -u bob -- rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"runuser"}, Root: true, Cwd: cwd}}},
		{name: "sudo bash -c", in: `sudo bash -c 'rm x'`, want: []wrapped{
			{Argv: args("bash", "-c", "rm x"), Wrappers: []string{"sudo"}, Root: true, Cwd: cwd},
			{Argv: args("rm", "x"), Root: true, Cwd: cwd},
		}},
		{name: "env NAME=VAL", in: "env FOO=bar BAZ=q rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: cwd, Env: []string{"FOO", "BAZ"}}}},
		{name: "env -i", in: "env -i A=1 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: cwd, Env: []string{"A"}}}},
		{name: "env -", in: "env - rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: cwd}}},
		{name: "env -u NAME", in: "env -u HOME rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: cwd}}},
		{name: "env --unset NAME", in: "env --unset HOME rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: cwd}}},
		{name: "env -C absolute", in: "env -C /tmp rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: "/tmp"}}},
		{name: "env -C relative", in: "env -C sub rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: "/w/sub"}}},
		{name: "env -S", in: `env -S "rm -f" x`, want: []wrapped{{Argv: args("rm", "-f", "x"), Wrappers: []string{"env"}, Cwd: cwd}}},
		{name: "env -S with an assignment", in: `env -S "A=1 rm" x`, want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"env"}, Cwd: cwd, Env: []string{"A"}}}},
		{name: "env alone", in: "env", want: []wrapped{{Argv: args("env"), Cwd: cwd}}},
		{name: "nice -n", in: "nice -n 10 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"nice"}, Cwd: cwd}}},
		{name: "nice --adjustment=", in: "nice --adjustment=5 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"nice"}, Cwd: cwd}}},
		{name: "ionice -c -n", in: "ionice -c 2 -n7 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"ionice"}, Cwd: cwd}}},
		{name: "ionice -p runs nothing", in: "ionice -p 123", want: []wrapped{{Argv: args("ionice", "-p", "123"), Cwd: cwd}}},
		{name: "chrt", in: "chrt -f 10 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"chrt"}, Cwd: cwd}}},
		{name: "chrt -p runs nothing", in: "chrt -p 123", want: []wrapped{{Argv: args("chrt", "-p", "123"), Cwd: cwd}}},
		{name: "taskset mask", in: "taskset 0x1 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"taskset"}, Cwd: cwd}}},
		{name: "taskset -c list", in: "taskset -c 1 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"taskset"}, Cwd: cwd}}},
		{name: "timeout DUR", in: "timeout 5s rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"timeout"}, Cwd: cwd}}},
		{name: "timeout -s SIG DUR", in: "timeout -s KILL 10 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"timeout"}, Cwd: cwd}}},
		{name: "timeout -k DUR -s SIG DUR", in: "timeout -k 5 --signal=TERM 10 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"timeout"}, Cwd: cwd}}},
		{name: "nohup", in: "nohup rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"nohup"}, Cwd: cwd}}},
		{name: "setsid", in: "setsid -f rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"setsid"}, Cwd: cwd}}},
		{name: "stdbuf", in: "stdbuf -oL -e 0 rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"stdbuf"}, Cwd: cwd}}},
		{name: "time keyword", in: "time -p rm x", want: []wrapped{{Argv: args("rm", "x"), Cwd: cwd}}},
		{name: "time program", in: `\time -o t.txt rm x`, want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"time"}, Cwd: cwd}}},
		{name: "command", in: "command rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"command"}, Cwd: cwd}}},
		{name: "command -v runs nothing", in: "command -v rm", want: []wrapped{{Argv: args("command", "-v", "rm"), Cwd: cwd}}},
		{name: "command skips functions", in: "rm() { :; }; command rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"command"}, Cwd: cwd}}},
		{name: "builtin", in: "builtin echo x", want: []wrapped{{Argv: args("echo", "x"), Wrappers: []string{"builtin"}, Cwd: cwd}}},
		{name: "exec", in: "exec rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"exec"}, Cwd: cwd}}},
		{name: "exec -a", in: "exec -a name rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"exec"}, Cwd: cwd}}},
		{name: "xargs", in: "xargs rm", want: []wrapped{{Argv: []parser.Arg{{Value: "rm"}, dyn("<xargs input>")}, Wrappers: []string{"xargs"}, Cwd: cwd}}},
		{name: "xargs -0 -n", in: "xargs -0 -n 1 rm -f", want: []wrapped{{Argv: []parser.Arg{{Value: "rm"}, {Value: "-f"}, dyn("<xargs input>")}, Wrappers: []string{"xargs"}, Cwd: cwd}}},
		{name: "xargs -I", in: "xargs -I % mv % dst", want: []wrapped{{Argv: []parser.Arg{{Value: "mv"}, dyn("%"), {Value: "dst"}}, Wrappers: []string{"xargs"}, Cwd: cwd}}},
		{name: "xargs -I attached", in: "xargs -0 -I{} cp {}.bak /dst", want: []wrapped{{Argv: []parser.Arg{{Value: "cp"}, dyn("{}.bak"), {Value: "/dst"}}, Wrappers: []string{"xargs"}, Cwd: cwd}}},
		{name: "xargs alone runs echo", in: "xargs", want: []wrapped{{Argv: []parser.Arg{{Value: "echo"}, dyn("<xargs input>")}, Wrappers: []string{"xargs"}, Cwd: cwd}}},
		{name: "find -exec", in: `find d -exec rm {} \;`, want: []wrapped{
			{Argv: args("find", "d", "-exec", "rm", "{}", ";"), Cwd: cwd},
			{Argv: []parser.Arg{{Value: "rm"}, {Value: "d/*", Glob: true}}, Wrappers: []string{"find -exec"}, Cwd: cwd},
		}},
		{name: "find -exec +", in: `find . -exec rm {} +`, want: []wrapped{
			{Argv: args("find", ".", "-exec", "rm", "{}", "+"), Cwd: cwd},
			{Argv: []parser.Arg{{Value: "rm"}, {Value: "./*", Glob: true}}, Wrappers: []string{"find -exec"}, Cwd: cwd},
		}},
		{name: "find -ok", in: `find d -ok rm {} \;`, want: []wrapped{
			{Argv: args("find", "d", "-ok", "rm", "{}", ";"), Cwd: cwd},
			{Argv: []parser.Arg{{Value: "rm"}, {Value: "d/*", Glob: true}}, Wrappers: []string{"find -ok"}, Cwd: cwd},
		}},
		{name: "find -execdir", in: `find d -execdir touch stamp \;`, want: []wrapped{
			{Argv: args("find", "d", "-execdir", "touch", "stamp", ";"), Cwd: cwd},
			{Argv: args("touch", "stamp"), Wrappers: []string{"find -execdir"}, Cwd: "/w/d"},
		}},
		{name: "sudo find -exec", in: `sudo find d -exec rm {} \;`, want: []wrapped{
			{Argv: args("find", "d", "-exec", "rm", "{}", ";"), Wrappers: []string{"sudo"}, Root: true, Cwd: cwd},
			{Argv: []parser.Arg{{Value: "rm"}, {Value: "d/*", Glob: true}}, Wrappers: []string{"sudo", "find -exec"}, Root: true, Cwd: cwd},
		}},
		{name: "parallel", in: "parallel -j 4 gzip -9 {} ::: a b", want: []wrapped{
			{Argv: args("parallel", "-j", "4", "gzip", "-9", "{}", ":::", "a", "b"), Cwd: cwd},
			{Argv: []parser.Arg{{Value: "gzip"}, {Value: "-9"}, dyn(`"$PARALLEL_ARG"`)}, Cwd: cwd},
		}},
		{name: "parallel reading commands", in: "parallel", want: []wrapped{{Argv: args("parallel"), Cwd: cwd}}, unknown: true},
		{name: "watch", in: "watch -n 1 'rm x'", want: []wrapped{
			{Argv: args("watch", "-n", "1", "rm x"), Cwd: cwd},
			{Argv: args("rm", "x"), Cwd: cwd},
		}},
		{name: "watch -x", in: "watch -x rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"watch"}, Cwd: cwd}}},
		{name: "flock -c before the file", in: `flock -c 'rm x' /tmp/l`, want: []wrapped{
			{Argv: args("flock", "-c", "rm x", "/tmp/l"), Cwd: cwd},
			{Argv: args("rm", "x"), Cwd: cwd},
		}},
		{name: "flock FILE CMD", in: "flock /tmp/l rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"flock"}, Cwd: cwd}}},
		{name: "flock -w FILE CMD", in: "flock -w 5 /tmp/l rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"flock"}, Cwd: cwd}}},
		{name: "flock FILE -c", in: `flock /tmp/l -c 'rm x'`, want: []wrapped{
			{Argv: args("flock", "/tmp/l", "-c", "rm x"), Cwd: cwd},
			{Argv: args("rm", "x"), Cwd: cwd},
		}},
		{name: "chroot", in: "chroot /srv rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"chroot"}, Root: true}}},
		{name: "chroot --userspec", in: "chroot --userspec=bob /srv rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"chroot"}, Root: true}}},
		{name: "chroot alone", in: "chroot /srv", want: []wrapped{{Argv: args("chroot", "/srv"), Cwd: cwd}}, unknown: true},
		{name: "script -c", in: "script -q -c 'rm x' log", want: []wrapped{
			{Argv: args("script", "-q", "-c", "rm x", "log"), Cwd: cwd},
			{Argv: args("rm", "x"), Cwd: cwd},
		}},
		{name: "script alone", in: "script", want: []wrapped{{Argv: args("script"), Cwd: cwd}}, unknown: true},
		{name: "unbuffer", in: "unbuffer rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"unbuffer"}, Cwd: cwd}}},
		{name: "busybox", in: "busybox rm x", want: []wrapped{{Argv: args("rm", "x"), Wrappers: []string{"busybox"}, Cwd: cwd}}},
		{name: "busybox --list", in: "busybox --list", want: []wrapped{{Argv: args("busybox", "--list"), Cwd: cwd}}},
		{name: "stacked", in: "sudo -u bob env A=1 nice -n 5 timeout 10 rm x", want: []wrapped{
			{Argv: args("rm", "x"), Wrappers: []string{"sudo", "env", "nice", "timeout"}, Root: true, Cwd: cwd, Env: []string{"A"}},
		}},
		{name: "wrapper by path", in: "/usr/bin/nice rm x", want: []wrapped{
			{Argv: args("/usr/bin/nice", "rm", "x"), Cwd: cwd},
			{Argv: args("rm", "x"), Wrappers: []string{"nice"}, Cwd: cwd},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: cwd})
			var got []wrapped
			for _, c := range f.Commands {
				got = append(got, wrapped{Argv: c.Argv, Wrappers: c.Wrappers, Root: c.Root, Cwd: c.Cwd, Env: c.Env})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
			}
			if got := len(f.Unknown) > 0; got != tc.unknown {
				t.Errorf("Parse(%q) unknown = %v, want %v:\n%s", tc.in, got, tc.unknown, unknownText(f))
			}
		})
	}
}

func TestParseUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"command name from a variable", "$cmd x", true},
		{"command name from a substitution", "$(which rm) x", true},
		{"eval of a variable", `eval "$x"`, true},
		{"eval of a literal", `eval 'ls'`, false},
		{"prompt expansion", `echo ${x@P}`, true},
		{"indirect expansion", `echo ${!x}`, true},
		{"subscript in a literal", `i='a[$(id)]'`, true},
		{"subscript with backquotes", "i='a[`id`]'", true},
		{"line continuation after $", "echo \"$\\\n(id)\"", true},
		{"extglob", `ls !(x)`, true},
		{"sed e command", `sed -n '1e id' f`, true},
		{"sed s///e", `sed 's/x/y/e' f`, true},
		{"sed print", `sed -n 1,5p f`, false},
		{"sed substitute", `sed 's/a/b/g' f`, false},
		{"awk system", `awk 'BEGIN{system("id")}'`, true},
		{"awk pipe", `awk '{print | "sh"}'`, true},
		{"awk print", `awk '{print $1}' f`, false},
		{"awk or", `awk '$1 || $2' f`, false},
		{"python os.system", `python3 -c 'import os; os.system("x")'`, true},
		{"python subprocess", `python3 -c 'import subprocess'`, true},
		{"python print", `python3 -c 'print(1)'`, false},
		{"python json", `python3 -c 'import json,sys; print(json.load(sys.stdin))'`, false},
		{"node child_process", `node -e 'require("child_process")'`, true},
		{"node console.log", `node -e 'console.log(1)'`, false},
		{"perl unlink", `perl -e 'unlink "x"'`, true},
		{"perl print", `perl -ne 'print if /x/' f`, false},
		{"ruby -e", `ruby -e 'puts 1'`, true},
		{"curl piped to sh", `curl x | sh`, true},
		{"curl piped to bash -s", `curl x | bash -s`, true},
		{"bash -c of a variable", `bash -c "$x"`, true},
		{"source of a variable", `source "$f"`, true},
		{"BASH_ENV", `BASH_ENV=x bash -c ls`, true},
		{"LD_PRELOAD", `LD_PRELOAD=/x.so ls`, true},
		{"nested code that does not parse", `bash -c 'if'`, true},
		{"plain commands", `ls -l | grep x > out`, false},
		{"command name from a loop over words", `for c in ls pwd; do $c; done`, false},
		{"command name from a loop over a glob", `for c in *; do $c; done`, true},
		{"git status", `git status`, false},
		{"declare -p of a variable", `declare -p "$n"`, false},
		{"declare -xp of a variable (Codex's snapshot)", `declare -xp "$__codex_snapshot_export_name" 2>/dev/null || true`, false},
		{"declare -f of a variable (Claude's snapshot)", `declare -f "$func"`, false},
		{"declare -F", `declare -F`, false},
		{"typeset -p of a variable", `typeset -p "$n"`, false},
		{"local -p in a function", `f() { local -p "$n"; }; f`, false},
		{"declare -fx of a variable", `declare -fx "$f"`, false},
		{"export -f of a variable", `export -f "$f"`, false},
		{"declare assigning a non-literal name", `declare "$n=v"`, true},
		{"declare -n of a non-literal name", `declare -n "$r"`, true},
		{"export -p assigns", `export -p "$n"`, true},
		{"an option known only at run time before -p", `declare $o -p x`, true},
		{"PATH re-set", `export PATH=$PATH; ls`, false},
		{"a here-document with more on its line", "python3 <<'EOF'; ls\nimport os; os.system('id')\nEOF", true},
		{"a here-document of a background job", "python3 <<'EOF' & ls\nimport os; os.system('id')\nEOF", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
			if got := len(f.Unknown) > 0; got != tc.want {
				t.Errorf("Parse(%q) unknown = %v, want %v:\n%s", tc.in, got, tc.want, unknownText(f))
			}
		})
	}
}

func TestParseUnknownPos(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []parser.Pos
	}{
		{"command name", "ls\n  $cmd x", []parser.Pos{{Line: 2, Col: 3}}},
		{"prompt expansion", "echo ${x@P}", []parser.Pos{{Line: 1, Col: 6}}},
		{"line continuation", "true\necho \"$\\\n(id)\"", []parser.Pos{{Line: 2, Col: 7}}},
		{"inside bash -c", "true\nbash -c 'eval \"$x\"'", []parser.Pos{{Line: 2, Col: 1}}},
		{"two findings", "$a; $b", []parser.Pos{{Line: 1, Col: 1}, {Line: 1, Col: 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{})
			var got []parser.Pos
			for _, u := range f.Unknown {
				got = append(got, u.Pos)
				if u.Reason == "" {
					t.Errorf("Parse(%q) finding at %s has no reason", tc.in, u.Pos)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) finding positions (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseWrites(t *testing.T) {
	t.Parallel()
	const cwd = "/w"
	file := func(p string) parser.Write { return parser.Write{Path: p, Resolved: true} }
	tree := func(p string) parser.Write { return parser.Write{Path: p, Resolved: true, Tree: true} }
	// into: a write into the file's content only (Write.Stream).
	into := func(w parser.Write) parser.Write { w.Stream = true; return w }
	tests := []struct {
		name string
		in   string
		env  map[string]string
		want []parser.Write
		// partial is set when the program is not one whose writes the
		// parser knows completely (WritesKnown false).
		partial bool
	}{
		{name: "rm -rf", in: "rm -rf build", want: []parser.Write{file("/w/build")}},
		{name: "rm several", in: "rm -f a /tmp/b -- -c", want: []parser.Write{file("/w/a"), file("/tmp/b"), file("/w/-c")}},
		{name: "rm -- first", in: "rm -- -rf", want: []parser.Write{file("/w/-rf")}},
		{name: "rm -f --", in: "rm -f -- -x a", want: []parser.Write{file("/w/-x"), file("/w/a")}},
		{name: "touch --", in: "touch -- -n", want: []parser.Write{file("/w/-n")}},
		{name: "truncate -s --", in: "truncate -s 0 -- -f", want: []parser.Write{into(file("/w/-f"))}},
		{name: "chmod --", in: "chmod -R 600 -- -d", want: []parser.Write{file("/w/-d")}},
		{name: "chmod -- mode", in: "chmod -- 644 -x", want: []parser.Write{file("/w/-x")}},
		{name: "chmod -- dash mode", in: "chmod -- -x f", want: []parser.Write{file("/w/f")}},
		{name: "chmod dash mode", in: "chmod -x f", want: []parser.Write{file("/w/f")}},
		{name: "rm glob", in: "rm -f build/*.o", want: []parser.Write{tree("/w/build")}},
		{name: "cp", in: "cp a b", want: []parser.Write{into(tree("/w/b"))}},
		{name: "cp into a directory", in: "cp -r a b dir", want: []parser.Write{into(tree("/w/dir"))}},
		{name: "cp -t", in: "cp -t dir a b", want: []parser.Write{tree("/w/dir")}},
		{name: "mv", in: "mv a b", want: []parser.Write{file("/w/a"), file("/w/b")}},
		{name: "tee -a", in: "echo x | tee -a log", want: []parser.Write{into(file("/w/log"))}},
		{name: "sed -i", in: "sed -i s/a/b/ f", want: []parser.Write{file("/w/f")}},
		{name: "sed -i.bak", in: "sed -i.bak -e s/a/b/ f g", want: []parser.Write{file("/w/f"), file("/w/g")}},
		{name: "sed without -i", in: "sed s/a/b/ f", want: nil},
		{name: "sed w command", in: "sed -n 'w out' f", want: []parser.Write{file("/w/out")}},
		{name: "dd of=", in: "dd if=/dev/zero of=x bs=1M", want: []parser.Write{into(file("/w/x"))}},
		{name: "sort -o", in: "sort -o out in", want: []parser.Write{into(file("/w/out"))}},
		{name: "sort without -o", in: "sort in", want: nil},
		{name: "tar x -C", in: "tar xzf a.tgz -C dir", want: []parser.Write{tree("/w/dir")}},
		{name: "tar -x into cwd", in: "tar -xzf a.tgz", want: []parser.Write{tree("/w")}},
		{name: "tar c", in: "tar czf out.tgz src", want: []parser.Write{file("/w/out.tgz")}},
		{name: "tar t writes nothing", in: "tar tzf a.tgz", want: nil},
		{name: "unzip -d", in: "unzip a.zip -d d", want: []parser.Write{tree("/w/d")}},
		{name: "unzip into cwd", in: "unzip -q a.zip", want: []parser.Write{tree("/w")}},
		{name: "unzip -l writes nothing", in: "unzip -l a.zip", want: nil},
		{name: "curl -o", in: "curl -o f https://x", want: []parser.Write{file("/w/f")}},
		{name: "curl -O", in: "curl -O https://x/f", want: []parser.Write{tree("/w")}},
		{name: "curl to stdout", in: "curl -s https://x", want: nil},
		{name: "curl -sSLo", in: "curl -sSLo f https://x", want: []parser.Write{file("/w/f")}},
		{name: "wget -O", in: "wget -O f https://x", want: []parser.Write{file("/w/f")}},
		{name: "wget -qO-", in: "wget -qO- https://x", want: nil},
		{name: "wget into cwd", in: "wget https://x/f", want: []parser.Write{tree("/w")}},
		{name: "find -delete", in: "find . -delete", want: []parser.Write{tree("/w")}},
		{name: "find -delete absolute", in: "find /tmp/x -name '*.o' -delete", want: []parser.Write{tree("/tmp/x")}},
		{name: "find -exec rm", in: `find build -exec rm {} \;`, want: []parser.Write{tree("/w/build")}},
		{name: "find -execdir rm", in: `find d -execdir rm {} \;`, want: []parser.Write{tree("/w/d")}},
		{name: "git clone URL DEST", in: "git clone https://h/r.git dest", want: []parser.Write{tree("/w/dest")}},
		{name: "git clone URL", in: "git clone https://h/r.git", want: []parser.Write{tree("/w/r")}},
		{name: "git -C clone", in: "git -C repo clone URL dest", want: []parser.Write{tree("/w/repo/dest")}},
		{name: "symlink then append", in: "ln -s /etc/hosts h && echo x >> h", want: []parser.Write{
			tree("/w/h"),
			{Path: "/etc/hosts", Resolved: true, Redirect: true, Append: true},
		}},
		{name: "symlink to a directory then write under it", in: "ln -sf /etc d; echo x > d/passwd", want: []parser.Write{
			tree("/w/d"),
			{Path: "/etc/passwd", Resolved: true, Redirect: true},
		}},
		{name: "write to /dev/null", in: "echo x > /dev/null", want: nil},
		{name: "here-doc to a file", in: "cat <<EOF > out\nhi\nEOF", want: []parser.Write{{Path: "/w/out", Resolved: true, Redirect: true}}, partial: true},
		{name: "nohup writes nohup.out", in: "nohup rm x", want: []parser.Write{file("/w/nohup.out"), file("/w/x")}},
		{name: "nohup of an unknown program", in: "nohup ./server", want: []parser.Write{file("/w/nohup.out")}, partial: true},
		{name: "time -o", in: `\time -o t.txt rm x`, want: []parser.Write{file("/w/t.txt"), file("/w/x")}},
		{name: "script log file", in: "script -c ls log", want: []parser.Write{file("/w/log")}},
		{name: "rm under HOME", in: "rm ~/x", env: map[string]string{"HOME": "/home/u"}, want: []parser.Write{file("/home/u/x")}},
		{name: "rm under an unknown HOME", in: "rm ~/x", want: []parser.Write{{Path: "~/x"}}},
		{name: "redirect under an unknown HOME", in: "echo x > ~/.bashrc", want: []parser.Write{{Path: "~/.bashrc", Redirect: true}}},
		{name: "mkdir -p", in: "mkdir -p a/b", want: []parser.Write{file("/w/a/b")}},
		{name: "touch after cd", in: "cd sub && touch c", want: []parser.Write{file("/w/sub/c")}},
		{name: "sudo tee", in: "echo x | sudo tee /etc/motd", want: []parser.Write{into(file("/etc/motd"))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: cwd, Env: tc.env})
			if diff := cmp.Diff(tc.want, allWrites(f)); diff != "" {
				t.Errorf("Parse(%q) writes (-want +got):\n%s", tc.in, diff)
			}
			for _, c := range f.Commands {
				if len(c.Writes) > 0 && c.WritesKnown == tc.partial {
					t.Errorf("Parse(%q): %q WritesKnown = %v, want %v", tc.in, c.Text, c.WritesKnown, !tc.partial)
				}
			}
		})
	}
}

// TestParseDynamicWrites checks that operands known only at run time give
// writes that are not resolved, whatever else they give.
func TestParseDynamicWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{name: "variable", in: `rm "$f"`},
		{name: "command substitution", in: `rm $(cat list)`},
		{name: "loop variable", in: `for f in *.o; do rm "$f"; done`},
		{name: "xargs input", in: `xargs rm`},
		{name: "xargs -I", in: `xargs -I{} rm {}`},
		{name: "parallel with {}", in: `parallel rm {} ::: a b`},
		{name: "parallel without {}", in: `parallel rm ::: a b`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w"})
			ws := allWrites(f)
			if len(ws) == 0 {
				t.Fatalf("Parse(%q) reports no writes", tc.in)
			}
			for _, w := range ws {
				if w.Resolved {
					t.Errorf("Parse(%q) write %+v is resolved, want unresolved", tc.in, w)
				}
			}
		})
	}
}

// scripted is what a script test checks of each command.
type scripted struct {
	Line   string
	Cwd    string
	Script string
	Opaque bool
	Root   bool
	// Missing, for a script that does not exist.
	Missing bool
}

func TestParseScripts(t *testing.T) {
	t.Parallel()
	fsys := map[string]string{
		"/w/x.sh":      "rm -rf a\ncd sub\ntouch b\n",
		"/w/secret.sh": unreadable,
		"/w/posix.sh":  "#!/bin/sh\nrm p\n",
		"/w/arr.sh":    "#!/bin/sh\na=(1 2)\nrm a\n",
		"/w/barr.sh":   "#!/usr/bin/env bash\na=(1 2)\nrm a\n",
		"/w/noshe":     "rm n\n",
		"/w/tool":      "#!/usr/bin/env python3\nimport os\nos.remove('z')\n",
		"/w/bin/b.sh":  "touch here\n",
		"/w/bin/elf":   "\x7fELF\x02\x01\x01\x00\x00\x00",
		"/w/self.sh":   "rm s\nbash self.sh\n",
		"/w/src.sh":    "cd sub\nX=1\n",
		"/w/bad.sh":    "echo (\n",
		"/w/nested.sh": "sh posix.sh\n",
		"/w/package.json": `{"scripts": {
			"prebuild": "rm -rf dist",
			"build": "tsc && touch built",
			"postbuild": "echo done > log",
			"test": "go test ./..."
		}}`,
		"/w/web/package.json":    `{"scripts": {"build": "vite build"}}`,
		"/w/broken/package.json": `{"scripts":`,
	}
	tests := []struct {
		name     string
		in       string
		noRead   bool
		maxDepth int
		want     []scripted
		unknown  bool
	}{
		{name: "bash x.sh", in: "bash x.sh", want: []scripted{
			{Line: "[bash x.sh] rm -rf a", Cwd: "/w"},
			{Line: "[bash x.sh] cd sub", Cwd: "/w"},
			{Line: "[bash x.sh] touch b", Cwd: "/w/sub"},
			{Line: "bash x.sh", Cwd: "/w", Script: "/w/x.sh"},
		}},
		{name: "bash x.sh does not change the caller's cwd", in: "bash x.sh; touch after", want: []scripted{
			{Line: "[bash x.sh] rm -rf a", Cwd: "/w"},
			{Line: "[bash x.sh] cd sub", Cwd: "/w"},
			{Line: "[bash x.sh] touch b", Cwd: "/w/sub"},
			{Line: "bash x.sh", Cwd: "/w", Script: "/w/x.sh"},
			{Line: "touch after", Cwd: "/w"},
		}},
		{name: "sudo bash x.sh", in: "sudo bash x.sh", want: []scripted{
			{Line: "[bash x.sh] rm -rf a", Cwd: "/w", Root: true},
			{Line: "[bash x.sh] cd sub", Cwd: "/w", Root: true},
			{Line: "[bash x.sh] touch b", Cwd: "/w/sub", Root: true},
			{Line: "bash x.sh", Cwd: "/w", Script: "/w/x.sh", Root: true},
		}},
		{name: "./x.sh without shebang", in: "./noshe", want: []scripted{
			{Line: "[script ./noshe] rm n", Cwd: "/w"},
			{Line: "./noshe", Cwd: "/w", Script: "/w/noshe"},
		}},
		{name: "./x.sh does not change the caller's cwd", in: "./x.sh; touch after", want: []scripted{
			{Line: "[script ./x.sh] rm -rf a", Cwd: "/w"},
			{Line: "[script ./x.sh] cd sub", Cwd: "/w"},
			{Line: "[script ./x.sh] touch b", Cwd: "/w/sub"},
			{Line: "./x.sh", Cwd: "/w", Script: "/w/x.sh"},
			{Line: "touch after", Cwd: "/w"},
		}},
		{name: "path to a script in a directory", in: "cd bin && ./b.sh", want: []scripted{
			{Line: "cd bin", Cwd: "/w"},
			{Line: "[script ./b.sh] touch here", Cwd: "/w/bin"},
			{Line: "./b.sh", Cwd: "/w/bin", Script: "/w/bin/b.sh"},
		}},
		{name: "sh shebang", in: "./posix.sh", want: []scripted{
			{Line: "[script ./posix.sh] rm p", Cwd: "/w"},
			{Line: "./posix.sh", Cwd: "/w", Script: "/w/posix.sh"},
		}},
		{name: "sh shebang parses as POSIX", in: "./arr.sh", want: []scripted{
			{Line: "./arr.sh", Cwd: "/w", Script: "/w/arr.sh"},
		}, unknown: true},
		{name: "bash shebang parses as bash", in: "./barr.sh", want: []scripted{
			{Line: "[script ./barr.sh] rm a", Cwd: "/w"},
			{Line: "./barr.sh", Cwd: "/w", Script: "/w/barr.sh"},
		}},
		{name: "sh x.sh parses as POSIX", in: "sh arr.sh", want: []scripted{
			{Line: "sh arr.sh", Cwd: "/w", Script: "/w/arr.sh"},
		}, unknown: true},
		{name: "python shebang", in: "./tool", want: []scripted{
			{Line: "./tool", Cwd: "/w", Opaque: true},
		}},
		{name: "a binary is the program its path names", in: "bin/elf -l", want: []scripted{
			{Line: "bin/elf -l", Cwd: "/w"},
		}},
		{name: "source", in: "source x.sh; touch after", want: []scripted{
			{Line: "[source x.sh] rm -rf a", Cwd: "/w"},
			{Line: "[source x.sh] cd sub", Cwd: "/w"},
			{Line: "[source x.sh] touch b", Cwd: "/w/sub"},
			{Line: "source x.sh", Cwd: "/w", Script: "/w/x.sh"},
			{Line: "touch after", Cwd: "/w/sub"},
		}},
		{name: "dot", in: ". ./src.sh; touch after", want: []scripted{
			{Line: "[. ./src.sh] cd sub", Cwd: "/w"},
			{Line: ". ./src.sh", Cwd: "/w", Script: "/w/src.sh"},
			{Line: "touch after", Cwd: "/w/sub"},
		}},
		{name: "script that does not parse", in: "bash bad.sh", want: []scripted{
			{Line: "bash bad.sh", Cwd: "/w", Script: "/w/bad.sh"},
		}, unknown: true},
		{name: "script running a script", in: "bash nested.sh", want: []scripted{
			{Line: "[bash nested.sh > sh posix.sh] rm p", Cwd: "/w"},
			{Line: "[bash nested.sh] sh posix.sh", Cwd: "/w", Script: "/w/posix.sh"},
			{Line: "bash nested.sh", Cwd: "/w", Script: "/w/nested.sh"},
		}},
		{name: "npm run with pre and post scripts", in: "npm run build", want: []scripted{
			{Line: "npm run build", Cwd: "/w", Script: "/w/package.json"},
			{Line: "[npm run prebuild] rm -rf dist", Cwd: "/w"},
			{Line: "[npm run build] tsc", Cwd: "/w"},
			{Line: "[npm run build] touch built", Cwd: "/w"},
			{Line: "[npm run postbuild] echo done", Cwd: "/w"},
		}},
		{name: "npm test", in: "npm test", want: []scripted{
			{Line: "npm test", Cwd: "/w", Script: "/w/package.json"},
			{Line: "[npm run test] go test ./...", Cwd: "/w"},
		}},
		{name: "npm --prefix", in: "npm --prefix web run build", want: []scripted{
			{Line: "npm --prefix web run build", Cwd: "/w/web", Script: "/w/web/package.json"},
			{Line: "[npm run build] vite build", Cwd: "/w/web"},
		}},
		{name: "npm run of a missing script", in: "npm run lint", want: []scripted{
			{Line: "npm run lint", Cwd: "/w", Script: "/w/package.json"},
		}},
		{name: "package.json that does not parse", in: "cd broken && npm run build", want: []scripted{
			{Line: "cd broken", Cwd: "/w"},
			{Line: "npm run build", Cwd: "/w/broken"},
		}, unknown: true},
		{name: "bash of an unreadable script", in: "bash secret.sh", want: []scripted{
			{Line: "bash secret.sh", Cwd: "/w", Opaque: true},
		}},
		{name: "source of an unreadable script", in: "source secret.sh", want: []scripted{
			{Line: "source secret.sh", Cwd: "/w", Opaque: true},
		}},
		{name: "./ of an unreadable script", in: "./secret.sh", want: []scripted{
			{Line: "./secret.sh", Cwd: "/w", Opaque: true},
		}},
		// A script missing now runs nothing, unless the step may make it.
		{name: "bash of a missing script", in: "bash missing.sh", want: []scripted{
			{Line: "bash missing.sh", Cwd: "/w", Script: "/w/missing.sh", Missing: true},
		}},
		{name: "source of a missing script", in: "[ -f missing.sh ] && source missing.sh", want: []scripted{
			{Line: "[ -f missing.sh ]", Cwd: "/w"},
			{Line: "source missing.sh", Cwd: "/w", Script: "/w/missing.sh", Missing: true},
		}},
		{name: "a missing script the step writes first: its text is not known", in: "echo 'rm -rf ~' > missing.sh; source missing.sh", want: []scripted{
			{Line: "echo rm -rf ~", Cwd: "/w"},
			{Line: "source missing.sh", Cwd: "/w", Opaque: true},
		}, unknown: true},
		{name: "a missing script after a program that may write anything", in: "python3 gen.py; ./missing.sh", want: []scripted{
			{Line: "python3 gen.py", Cwd: "/w", Opaque: true},
			{Line: "./missing.sh", Cwd: "/w", Opaque: true},
		}},
		{name: "a missing script in a tree the step extracts: its text is not known", in: "tar -xf a.tar -C /w; bash /w/out/run.sh", want: []scripted{
			{Line: "tar -xf a.tar -C /w", Cwd: "/w"},
			{Line: "bash /w/out/run.sh", Cwd: "/w", Opaque: true},
		}, unknown: true},
		{name: "no ReadFile", in: "bash x.sh", noRead: true, want: []scripted{
			{Line: "bash x.sh", Cwd: "/w", Opaque: true},
		}},
		{name: "no ReadFile for npm", in: "npm run build", noRead: true, want: []scripted{
			{Line: "npm run build", Cwd: "/w"},
		}},
		{name: "self-recursive script hits MaxDepth", in: "bash self.sh", maxDepth: 2, want: []scripted{
			{Line: "[bash self.sh] rm s", Cwd: "/w"},
			{Line: "[bash self.sh > bash self.sh] rm s", Cwd: "/w"},
			{Line: "[bash self.sh > bash self.sh] bash self.sh", Cwd: "/w", Script: "/w/self.sh"},
			{Line: "[bash self.sh] bash self.sh", Cwd: "/w", Script: "/w/self.sh"},
			{Line: "bash self.sh", Cwd: "/w", Script: "/w/self.sh"},
		}, unknown: true},
		{name: "self-recursive script hits the default depth", in: "bash self.sh", unknown: true},
		{name: "python script is opaque", in: "python3 tool.py", want: []scripted{
			{Line: "python3 tool.py", Cwd: "/w", Opaque: true},
		}},
		{name: "node script is opaque", in: "node app.js", want: []scripted{
			{Line: "node app.js", Cwd: "/w", Opaque: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := parser.Options{Cwd: "/w", MaxDepth: tc.maxDepth}
			if !tc.noRead {
				opts.ReadFile = files(fsys)
			}
			f := parser.Parse(tc.in, opts)
			if got := len(f.Unknown) > 0; got != tc.unknown {
				t.Errorf("Parse(%q) unknown = %v, want %v:\n%s", tc.in, got, tc.unknown, unknownText(f))
			}
			if tc.want == nil {
				return
			}
			var got []scripted
			for _, c := range f.Commands {
				got = append(got, scripted{Line: line(c), Cwd: c.Cwd, Script: c.Script, Opaque: c.Opaque, Root: c.Root, Missing: c.Missing})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestParseForeignShebang checks, apart from the Opaque bug above, that a
// script for another interpreter is not walked as shell.
func TestParseForeignShebang(t *testing.T) {
	t.Parallel()
	fsys := map[string]string{"/w/tool": "#!/usr/bin/env python3\nimport os\nos.remove('z')\n"}
	f := parser.Parse("./tool", parser.Options{Cwd: "/w", ReadFile: files(fsys)})
	if diff := cmp.Diff([]string{"./tool"}, lines(f)); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	if got := f.Commands[0].Script; got != "" {
		t.Errorf("Script = %q, want none", got)
	}
	if f.Err != nil || len(f.Unknown) > 0 {
		t.Errorf("err = %v, unknown:\n%s", f.Err, unknownText(f))
	}
}

// TestParseReadFilePaths checks that ReadFile is only ever given absolute
// paths, and only for files a command runs.
func TestParseReadFilePaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		cwd  string
		want []string
	}{
		{"bash script", "bash x.sh", "/w", []string{"/w/x.sh"}},
		{"relative path after cd", "cd /t && ./run", "/w", []string{"/t/run"}},
		{"source", "source ../lib.sh", "/w/a", []string{"/w/lib.sh"}},
		{"npm", "npm run build", "/w", []string{"/w/package.json"}},
		{"unknown cwd reads nothing relative", "bash x.sh; ./run", "", nil},
		{"unknown cwd reads absolute", "bash /opt/x.sh", "", []string{"/opt/x.sh"}},
		{"programs on PATH are not read", "ls; git status", "/w", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string // Parse calls ReadFile from this goroutine only.
			read := func(p string) ([]byte, error) {
				got = append(got, p)
				return nil, fs.ErrNotExist
			}
			parser.Parse(tc.in, parser.Options{Cwd: tc.cwd, ReadFile: read})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(%q) ReadFile calls (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		opts    parser.Options
		wantErr *parser.ParseError // Msg is checked to be non-empty only
		want    []string
		unknown bool
	}{
		{name: "no error", in: "ls", want: []string{"ls"}},
		{
			name:    "late syntax error",
			in:      "echo ok; rm x\ntouch y\nif then\nrm z",
			wantErr: &parser.ParseError{Pos: parser.Pos{Line: 3, Col: 1}},
			want:    []string{"echo ok", "rm x", "touch y"},
		},
		{
			name:    "unterminated quote",
			in:      "echo a\necho \"b",
			wantErr: &parser.ParseError{Pos: parser.Pos{Line: 2, Col: 6}},
			want:    []string{"echo a"},
		},
		{
			name:    "stray paren",
			in:      "ls; )",
			wantErr: &parser.ParseError{Pos: parser.Pos{Line: 1, Col: 5}},
			want:    []string{"ls"},
		},
		{
			name:    "name is kept",
			in:      "ls\n)",
			opts:    parser.Options{Name: "x.sh"},
			wantErr: &parser.ParseError{Name: "x.sh", Pos: parser.Pos{Line: 2, Col: 1}},
			want:    []string{"ls"},
		},
		{
			name:    "bash syntax in POSIX mode",
			in:      "ls\na=(1 2)",
			opts:    parser.Options{POSIX: true},
			wantErr: &parser.ParseError{Pos: parser.Pos{Line: 2, Col: 3}},
			want:    []string{"ls"},
		},
		{name: "bash syntax in bash mode", in: "ls\na=(1 2)", want: []string{"ls"}},
		{
			name:    "error in nested code is unknown code",
			in:      "bash -c 'if'; rm x",
			want:    []string{"bash -c if", "rm x"},
			unknown: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := tc.opts
			opts.Cwd = "/w"
			f := parser.Parse(tc.in, opts)
			if diff := cmp.Diff(tc.want, lines(f)); diff != "" {
				t.Errorf("Parse(%q) commands (-want +got):\n%s", tc.in, diff)
			}
			if got := len(f.Unknown) > 0; got != tc.unknown {
				t.Errorf("Parse(%q) unknown = %v, want %v:\n%s", tc.in, got, tc.unknown, unknownText(f))
			}
			if tc.wantErr == nil {
				if f.Err != nil {
					t.Errorf("Parse(%q) error = %v, want none", tc.in, f.Err)
				}
				return
			}
			if f.Err == nil {
				t.Fatalf("Parse(%q) error = nil, want one at %s", tc.in, tc.wantErr.Pos)
			}
			if f.Err.Msg == "" {
				t.Errorf("Parse(%q) error has no message", tc.in)
			}
			got := *f.Err
			got.Msg = ""
			if diff := cmp.Diff(*tc.wantErr, got); diff != "" {
				t.Errorf("Parse(%q) error (-want +got):\n%s", tc.in, diff)
			}
			prefix := tc.wantErr.Pos.String() + ": "
			if tc.wantErr.Name != "" {
				prefix = tc.wantErr.Name + ":" + prefix
			}
			if msg := f.Err.Error(); !strings.HasPrefix(msg, prefix) {
				t.Errorf("Parse(%q) error = %q, want prefix %q", tc.in, msg, prefix)
			}
		})
	}
}

func TestParseMaxCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		max     int
		want    int // commands recorded
		unknown bool
	}{
		{name: "under the bound", in: "a; b", max: 3, want: 2},
		{name: "exceeded", in: "a; b; c; d; e", max: 3, want: 3, unknown: true},
		{name: "exceeded in nested code", in: "a; bash -c 'b; c; d'", max: 3, want: 3, unknown: true},
		{name: "exceeded in a loop", in: "while a; do b; c; d; done", max: 3, want: 3, unknown: true},
		{name: "zero means 10000", in: strings.Repeat("a\n", 10000), want: 10000},
		{name: "zero means 10000, exceeded", in: strings.Repeat("a\n", 10001), want: 10000, unknown: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{MaxCommands: tc.max})
			if got := len(f.Commands); got != tc.want {
				t.Errorf("Parse: %d commands, want %d", got, tc.want)
			}
			if got := len(f.Unknown) > 0; got != tc.unknown {
				t.Errorf("Parse: unknown = %v, want %v:\n%s", got, tc.unknown, unknownText(f))
			}
		})
	}
}

func TestParseMaxDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		unknown bool
	}{
		{name: "within the bound", in: `eval "eval 'rm x'"`, max: 2, want: []string{"[eval > eval] rm x", "[eval] eval rm x", `eval eval 'rm x'`}},
		{name: "eval too deep", in: `eval "eval 'rm x'"`, max: 1, want: []string{"[eval] eval rm x", `eval eval 'rm x'`}, unknown: true},
		{name: "bash -c too deep", in: `bash -c "bash -c 'rm x'"`, max: 1, want: []string{"bash -c bash -c 'rm x'", "[bash -c] bash -c rm x"}, unknown: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{MaxDepth: tc.max})
			if diff := cmp.Diff(tc.want, lines(f)); diff != "" {
				t.Errorf("Parse(%q) commands (-want +got):\n%s", tc.in, diff)
			}
			if got := len(f.Unknown) > 0; got != tc.unknown {
				t.Errorf("Parse(%q) unknown = %v, want %v:\n%s", tc.in, got, tc.unknown, unknownText(f))
			}
		})
	}
}

func TestOwnSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{"kill $$", true},
		{"kill -TERM $$", true},
		{"kill -9 $!", true},
		{"kill -s TERM $$", true},
		{"kill -- $!", true},
		{"kill %1 %2", true},
		{"kill $$ $!", true},
		{"kill 1234", false},
		{"kill -TERM -1", false},
		{"kill $! -1", false},
		{"kill -- -$$", false},
		{"kill $pid", false},
		{"kill %", false},
		{"kill -l", false},
		{"kill", false},
		// The policy relies on it: only the builtin kill has it.
		{"/bin/kill $$", false},
		{"command kill $$", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tt.in, parser.Options{Cwd: "/w"})
			c := f.Commands[len(f.Commands)-1]
			if c.OwnSignal != tt.want {
				t.Errorf("OwnSignal(%q) = %v, want %v", tt.in, c.OwnSignal, tt.want)
			}
		})
	}
}

// A variable assigned $(mktemp …) names a path in mktemp's directory, so
// that writes under it are known.
func TestMktempVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want: the path of the last command's write, or "" for unresolved
	}{
		{`tmp=$(mktemp -d); echo x > "$tmp/out"`, "/tmp/tmp.XXXXXXXXXX/out"},
		{`f="$(mktemp)"; echo x > "$f"`, "/tmp/tmp.XXXXXXXXXX"},
		{`f=$(mktemp -p /var/cache/x); echo x > $f`, "/var/cache/x/tmp.XXXXXXXXXX"},
		{`f=$(mktemp /etc/y.XXXX); echo x > $f`, "/etc/tmp.XXXXXXXXXX"},
		{`f=$(mktemp -u); echo x > $f`, ""},
		{`f=$(mktemp $D); echo x > $f`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tt.in, parser.Options{Cwd: "/w", Env: map[string]string{"HOME": "/h"}})
			c := f.Commands[len(f.Commands)-1]
			if len(c.Writes) != 1 {
				t.Fatalf("writes %+v", c.Writes)
			}
			got := c.Writes[0].Path
			if !c.Writes[0].Resolved {
				got = ""
			}
			if got != tt.want {
				t.Errorf("write %q, want %q", got, tt.want)
			}
		})
	}
}

// TestParseForLoop checks that `for NAME in WORDS` walks its body once per
// item when every item is known, so that the paths it writes are known, and
// that NAME stays unknown where its value is not known before the loop runs.
func TestParseForLoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string // every write, as wsum renders it
	}{
		{"literal items", "for i in 1 2 3; do echo $i > n$i; done", []string{"/w/n1", "/w/n2", "/w/n3"}},
		{"sed -i on each file", `for f in a.txt b.txt; do sed -i s/x/y/ "$f"; done`, []string{"/w/a.txt", "/w/b.txt"}},
		{"touch in each directory", `for d in src tests; do touch "$d/__init__.py"; done`, []string{"/w/src/__init__.py", "/w/tests/__init__.py"}},
		{"quoted items", `for f in 'a b' "c"; do rm -- "$f"; done`, []string{"/w/a b", "/w/c"}},
		{"unquoted use splits an item", `for f in 'a b'; do rm $f; done`, []string{"/w/a", "/w/b"}},
		{"brace sequence", "for i in {1..3}; do touch f$i; done", []string{"/w/f1", "/w/f2", "/w/f3"}},
		{"brace list", "for f in x.{c,h}; do rm $f; done", []string{"/w/x.c", "/w/x.h"}},
		{"known variables in items", `d=build; for f in $d/a "$d/b"; do rm $f; done`, []string{"/w/build/a", "/w/build/b"}},
		{"known variable split into items", "l='a b'; for f in $l; do rm $f; done", []string{"/w/a", "/w/b"}},
		{"tilde item", "for f in ~/x; do rm $f; done", []string{"/h/x"}},
		{"function arguments as items", `f() { for x in "$@"; do rm $x; done; }; f a b`, []string{"/w/a", "/w/b"}},
		{"nested loops", "for a in x y; do for b in 1 2; do touch $a$b; done; done", []string{"/w/x1", "/w/x2", "/w/y1", "/w/y2"}},
		{"inner items from the outer variable", "for d in a b; do for f in $d/1 $d/2; do rm $f; done; done", []string{"/w/a/1", "/w/a/2", "/w/b/1", "/w/b/2"}},
		{"body assigns from the variable", `for f in a.txt b.txt; do n=${f%.txt}; mv "$f" "$n.md"; done`, []string{"/w/a.txt", "/w/a.md", "/w/b.txt", "/w/b.md"}},
		{"eval sees the variable", `for f in a b; do eval 'rm "$f"'; done`, []string{"/w/a", "/w/b"}},
		{"a command that does not use the variable is reported once", "for i in 1 2; do date >> log; done", []string{"/w/log"}},
		{"last item after the loop", "for i in a b; do :; done; echo x > $i", []string{"/w/b"}},
		{"last item after a plain continue", "for i in a b; do continue; done; echo x > $i", []string{"/w/b"}},
		{"loop in a directory", "cd sub; for f in a b; do rm $f; done", []string{"/w/sub/a", "/w/sub/b"}},

		{"glob item", `for f in *.txt; do rm "$f"; done`, []string{`?"$f"`}},
		{"glob item in a directory", `for f in src/*.go; do sed -i s/a/b/ "$f"; done`, []string{`?"$f"`}},
		{"quoted pattern item (it globs where used unquoted)", `for f in "*.txt"; do rm "$f"; done`, []string{`?"$f"`}},
		{"command substitution item", `for f in $(ls); do rm "$f"; done`, []string{`?"$f"`}},
		{"unknown variable item", `for f in $FILES; do rm "$f"; done`, []string{`?"$f"`}},
		{"positional parameters", `for f; do rm "$f"; done`, []string{`?"$f"`}},
		{"no items", `for f in; do rm "$f"; done`, []string{`?"$f"`}},
		{"select", `select f in a b; do rm "$f"; done`, []string{`?"$f"`}},
		{"c-style loop", "for ((i = 0; i < 3; i++)); do touch f$i; done", []string{"?f$i"}},
		{"too many items", "for i in {1..65}; do touch f$i; done", []string{"?f$i"}},
		{"too many items nested", "for a in {1..8}; do for b in {1..9}; do touch \"$a$b\"; done; done", []string{`?"$a$b"`}},
		{"body assigns the variable", `for f in a b; do f=$f.bak; rm "$f"; done`, []string{`?"$f"`}},
		{"body reads the variable", `for f in a b; do read -r f; rm "$f"; done`, []string{`?"$f"`}},
		{"arithmetic on the variable", "for i in 1 2; do ((i++)); touch f$i; done", []string{"?f$i"}},
		{"let on the variable", "for i in 1 2; do let i+=1; touch f$i; done", []string{"?f$i"}},
		{"quoted let on the variable", `for i in 1 2; do let "i = i + 1"; touch f$i; done`, []string{"?f$i"}},
		{"quoted let on another variable", `for i in 1 2; do let "n += 1"; touch f$i; done`, []string{"/w/f1", "/w/f2"}},
		{"default assignment to the variable", "for i in 1 2; do : ${i:=3}; touch f$i; done", []string{"?f$i"}},
		{"function assigns the variable", `g() { f=x; }; for f in a b; do g; rm "$f"; done`, []string{"/w/x"}},
		{"function reads the variable", `g() { read -r f; }; for f in a b; do g; rm "$f"; done`, []string{`?"$f"`}},
		{"nameref", `declare -n r=f; for f in a b; do r=x; rm "$f"; done`, []string{`?"$f"`}},
		{"inner loop over the same name", "for i in a b; do for i in c d; do :; done; rm $i; done", []string{"/w/d"}},
		{"after a break", "for i in a b; do break; done; echo x > $i", []string{"?$i"}},
		{"after a continue to an outer loop", "for i in a b; do continue 2; done; echo x > $i", []string{"?$i"}},
		{"after a return", "f() { for i in a b; do return; done; }; f; echo x > $i", []string{"?$i"}},
		{"arithmetic on the variable after the loop", "for i in 1 2; do :; done; ((i++)); touch f$i", []string{"?f$i"}},
		{"loop redirection opens before the first item", "for i in a b; do :; done > $i", []string{"?$i"}},
		{"child shell does not see the variable", `for i in a b; do bash -c 'rm -rf "/$i"'; done`, []string{`?"/$i"`}},
		{"child shell after the loop", `for i in a b; do :; done; sh -c 'rm "$i"'`, []string{`?"$i"`}},
		{"trap runs later", `for i in a b; do trap 'rm "$i"' EXIT; done`, []string{`?"$i"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w", Env: map[string]string{"HOME": "/h"}})
			if diff := cmp.Diff(tc.want, wsum(f)); diff != "" {
				t.Errorf("Parse(%q) writes (-want +got):\n%s", tc.in, diff)
			}
			if f.Err != nil {
				t.Errorf("Parse(%q) error: %v", tc.in, f.Err)
			}
		})
	}
}

// TestParseTrap checks that trap code is walked at the end of the shell
// that sets it, with a variable's value when nothing after the trap can
// change it, and unresolved otherwise.
func TestParseTrap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string // every write, as wsum renders it
	}{
		{"a variable set before", `x=/tmp/f; trap 'echo a > "$x"' EXIT; ls`, []string{"/tmp/f"}},
		{"Gemini CLI's wrapper", "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-XXXXXX/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\nls -la\n)\n__code=$?\nexit $__code",
			[]string{"/tmp/gemini-shell-XXXXXX/bgpids.tmp"}},
		{"a variable assigned after", `x=/tmp/f; trap 'echo a > "$x"' EXIT; x=/etc/passwd; ls`, []string{`?"$x"`}},
		{"a variable assigned after, in a subshell", `x=/tmp/f; trap 'rm "$x"' EXIT; (x=/etc/passwd)`, []string{`?"$x"`}},
		{"a variable read after", `x=/tmp/f; trap 'rm "$x"' EXIT; read -r x`, []string{`?"$x"`}},
		{"a name not known assigned after", `x=/tmp/f; trap 'rm "$x"' EXIT; let "$n = 1"`, []string{`?"$x"`}},
		{"a variable set after", `trap 'rm "$x"' EXIT; x=/tmp/f`, []string{`?"$x"`}},
		{"a signal trap", `x=/tmp/f; trap 'rm "$x"' INT TERM; sleep 10`, []string{"/tmp/f"}},
		{"a subshell's trap runs when it ends", `(x=/tmp/a; trap 'rm "$x"' EXIT; ls); x=/etc/b`, []string{"/tmp/a"}},
		{"a child shell's trap", `bash -c 'x=/tmp/q; trap "rm \$x" EXIT'; ls`, []string{"/tmp/q"}},
		{"no cd after", "cd sub; trap 'rm f' EXIT; ls", []string{"/w/sub/f"}},
		{"a cd after", "cd sub; trap 'rm f' EXIT; cd /", []string{"?f"}},
		{"a function defined after", "trap cleanup EXIT; cleanup() { rm -rf /w/tmp; }", []string{"/w/tmp"}},
		{"an alias that sets a trap", `alias t='trap "rm \"\$x\"" EXIT'; x=/tmp/a; t; x=/tmp/b`, []string{`?"$x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w", Env: map[string]string{"HOME": "/h"}})
			if diff := cmp.Diff(tc.want, wsum(f)); diff != "" {
				t.Errorf("Parse(%q) writes (-want +got):\n%s", tc.in, diff)
			}
			if f.Err != nil || len(f.Unknown) > 0 {
				t.Errorf("Parse(%q) error %v, unknown:\n%s", tc.in, f.Err, unknownText(f))
			}
		})
	}
}

// TestParseBinary checks that a file ReadFile reports as a binary is a
// program, not code the parser could not read.
func TestParseBinary(t *testing.T) {
	t.Parallel()
	read := func(p string) ([]byte, error) { return nil, fmt.Errorf("%s: %w", p, parser.ErrBinary) }
	f := parser.Parse("/usr/bin/git status", parser.Options{Cwd: "/w", ReadFile: read})
	if len(f.Commands) != 1 || f.Commands[0].Opaque || len(f.Unknown) > 0 {
		t.Errorf("Parse: %+v, unknown:\n%s", f.Commands, unknownText(f))
	}
}

// TestParseIfDecided checks that an if whose condition tests text the
// parser knows walks the branch that runs, as a sequence; any other if
// may or may not run each branch.
func TestParseIfDecided(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string // every write, as wsum renders it
		// complete: Env is all there is (Options.EnvComplete).
		complete bool
	}{
		{"-n of a set variable", `if [ -n "$HOME" ]; then cd sub; fi; echo > a`, []string{"/w/sub/a"}, false},
		{"-z of a set variable", `if [ -z "$HOME" ]; then cd sub; fi; echo > a`, []string{"/w/a"}, false},
		{"${X+x} of a set variable", `if [ -n "${HOME+x}" ]; then d=/w/s; fi; echo > "$d/f"`, []string{"/w/s/f"}, false},
		{"test", `if test "$HOME" != /h; then cd sub; fi; echo > a`, []string{"/w/a"}, false},
		{"elif", `if [ "$HOME" = /x ]; then cd a; elif [ "$HOME" = /h ]; then cd b; else cd c; fi; echo > f`, []string{"/w/b/f"}, false},
		{"else", `if [ "$HOME" == /x ]; then cd a; else cd c; fi; echo > f`, []string{"/w/c/f"}, false},
		{"[[ -n ]]", `if [[ -n $HOME ]]; then cd a; fi; echo > f`, []string{"/w/a/f"}, false},
		{"negated", `if ! [ -n "$HOME" ]; then cd a; fi; echo > f`, []string{"/w/f"}, false},
		{"an unknown variable", `if [ -n "$U" ]; then cd sub; fi; echo > a`, []string{"?a"}, false},
		{"an unknown elif", `if [ "$HOME" = /x ]; then cd a; elif t; then cd b; fi; echo > f`, []string{"?f"}, false},
		{"an unquoted word that may split", `if [ -n $HOME ]; then cd a; fi; echo > f`, []string{"/w/a/f"}, false},
		{"a function named [", `[() { :; }; if [ -n x ]; then cd a; fi; echo > f`, []string{"?f"}, false},
		{"a condition with a redirection", `if [ -n x ] > log; then cd a; fi; echo > f`, []string{"/w/log", "?f"}, false},
		{"A || B", `if [ -z "$HOME" ] || [ "$HOME" = /h ]; then cd a; fi; echo > f`, []string{"/w/a/f"}, false},
		{"A && B, A false", `if [ -z "$HOME" ] && [ -n "$U" ]; then cd a; fi; echo > f`, []string{"/w/f"}, false},
		{"A && B, B unknown", `if [ -n "$HOME" ] && [ -n "$U" ]; then cd a; fi; echo > f`, []string{"?f"}, false},
		{"A || a command", `if [ -z "$HOME" ] || t; then cd a; fi; echo > f`, []string{"?f"}, false},
		// With the whole environment, a name not in it is unset.
		{"${U+x} of a name not in a complete environment", `if [ -n "${U+x}" ]; then cd a; fi; echo > f`, []string{"/w/f"}, true},
		{"${U-d} of a name not in a complete environment", `echo > "${U-/w/d}/f"`, []string{"/w/d/f"}, true},
		{"not without a complete environment", `if [ -n "${U+x}" ]; then cd a; fi; echo > f`, []string{"?f"}, false},
		{"a name bash sets", `if [ -n "${BASH_VERSION+x}" ]; then cd a; fi; echo > f`, []string{"?f"}, true},
		{"a name the source unsets", `unset HOME; if [ -n "${HOME+x}" ]; then cd a; fi; echo > f`, []string{"/w/f"}, false},
		{"a name read at run time", `read U; if [ -n "${U+x}" ]; then cd a; fi; echo > f`, []string{"?f"}, true},
		{"a name assigned in a branch", `if t; then U=1; fi; if [ -n "${U+x}" ]; then cd a; fi; echo > f`, []string{"?f"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w", Env: map[string]string{"HOME": "/h"}, EnvComplete: tc.complete})
			if diff := cmp.Diff(tc.want, wsum(f)); diff != "" {
				t.Errorf("Parse(%q) writes (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestParseForLoopBudget checks that a loop walked once per item counts
// its commands once against Options.MaxCommands, and that a loop whose
// items spend the budget is walked as a whole, as any loop is.
func TestParseForLoopBudget(t *testing.T) {
	t.Parallel()
	reasons := func(f *parser.Facts) []string {
		var out []string
		for _, u := range f.Unknown {
			out = append(out, u.Reason)
		}
		return out
	}
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string // commands
		unknown []string // reasons
	}{
		{
			name: "the items count once",
			in:   "for i in 1 2 3; do echo x; touch f$i; done",
			max:  2,
			want: []string{"echo x", "touch f1", "touch f2", "touch f3"},
		},
		{
			name:    "an item spends the budget",
			in:      `for c in 'a; b; c; d; e; f' z; do bash -c "$c"; done; ls`,
			max:     5,
			want:    []string{`bash -c "$c"`, "ls"},
			unknown: []string{"bash with a non-literal argument"},
		},
		{
			name:    "an item of an inner loop spends the budget",
			in:      `for a in x y; do for c in 'a; b; c; d; e; f; g; h; i' z; do bash -c "$c"; done; done; ls`,
			max:     8,
			want:    []string{`bash -c "$c"`, "ls"},
			unknown: []string{"bash with a non-literal argument"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := parser.Parse(tc.in, parser.Options{Cwd: "/w", MaxCommands: tc.max})
			if diff := cmp.Diff(tc.want, lines(f)); diff != "" {
				t.Errorf("Parse(%q) commands (-want +got):\n%s", tc.in, diff)
			}
			if diff := cmp.Diff(tc.unknown, reasons(f)); diff != "" {
				t.Errorf("Parse(%q) unknown code (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// At a terminal, a program that reads its code from standard input is an
// interactive session of it: an unknown program, not unknown code; with
// its input piped or redirected it stays unknown code.
func TestParseTerminal(t *testing.T) {
	for _, tt := range []struct {
		src    string
		opaque bool // reported as an unknown program
	}{
		{"python3", true},
		{"node", true},
		{"bash", true},
		{"perl", true},
		{"ruby", true},
		{"sudo python3", true},
		{"echo \"$code\" | python3", false},
		{"python3 < x.py", false},
		{"python3 <<< \"$code\"", false},
		{"{ python3; } < x.py", false},
		{"cat x | { bash; }", false},
		{"bash -c python3", true},
	} {
		f := parser.Parse(tt.src, parser.Options{Cwd: "/w", Terminal: true})
		opaque := false
		for _, c := range f.Commands {
			opaque = opaque || c.Opaque
		}
		if opaque != tt.opaque || tt.opaque && len(f.Unknown) > 0 {
			t.Errorf("%q at a terminal: opaque %v, unknown %v; want opaque %v and no unknown", tt.src, opaque, f.Unknown, tt.opaque)
		}
		if !tt.opaque && len(f.Unknown) == 0 {
			t.Errorf("%q at a terminal: no unknown code", tt.src)
		}
		if g := parser.Parse(tt.src, parser.Options{Cwd: "/w"}); tt.opaque && len(g.Unknown) == 0 {
			t.Errorf("%q without a terminal: no unknown code", tt.src)
		}
	}
}

// A program named by path whose handler hands it on (python -m) left an
// empty argv that the path-qualified check then read: a panic.
func TestParsePathInterpreterModule(t *testing.T) {
	for _, src := range []string{".venv/bin/python -m unittest", "/usr/bin/python3 -m venv x", "./python -m pip --version"} {
		f := parser.Parse(src, parser.Options{Cwd: "/w", ReadFile: func(string) ([]byte, error) { return []byte("#!/bin/sh\n"), nil }})
		if len(f.Commands) == 0 {
			t.Errorf("%q: no commands", src)
		}
	}
}

// A variable the source sets without exporting it is not seen by the
// programs it starts: `x=a; bash -c 'rm -rf /$x'` removes /, not /a.
func TestParseUnexportedVariable(t *testing.T) {
	for _, tt := range []struct {
		src     string
		write   string // the write reported, or "" for an unresolved one
		unknown bool
	}{
		{`x=a; bash -c 'rm -rf /w/$x'`, "", true},
		{`export x=a; bash -c 'rm -rf /w/$x'`, "/w/a", false},
		{`x=a; export x; bash -c 'rm -rf /w/$x'`, "/w/a", false},
		{`declare -x x=a; bash -c 'rm -rf /w/$x'`, "/w/a", false},
		{`x=a; rm -rf /w/$x`, "/w/a", false},
		{`x=a; eval 'rm -rf /w/$x'`, "/w/a", false},
		{`HOME=/w/h; bash -c 'rm -rf $HOME/x'`, "/w/h/x", false},
	} {
		f := parser.Parse(tt.src, parser.Options{Cwd: "/w", Env: map[string]string{"HOME": "/root"}})
		var writes []string
		unresolved := false
		for _, c := range f.Commands {
			for _, wr := range c.Writes {
				if wr.Resolved {
					writes = append(writes, wr.Path)
				} else {
					unresolved = true
				}
			}
		}
		if tt.write != "" && !slices.Contains(writes, tt.write) {
			t.Errorf("%s: writes %v, want %s", tt.src, writes, tt.write)
		}
		if tt.write == "" && (len(writes) > 0 || !unresolved && len(f.Unknown) == 0) {
			t.Errorf("%s: writes %v (unresolved %v, unknown %v), want it unresolved", tt.src, writes, unresolved, f.Unknown)
		}
	}
}
