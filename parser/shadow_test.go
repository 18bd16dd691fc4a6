package parser_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/parser"
)

// bins is a fake set of directories of programs, for Options.LookPath.
var bins = map[string][]string{
	"/usr/bin":   {"ls", "cat", "grep", "bash", "sh", "sudo", "xargs"},
	"/opt/codex": {"apply_patch"},
	"/opt/evil":  {"ls", "sudo"},
}

// lookIn searches a PATH value in bins.
func lookIn(name, pathValue string) (string, bool) {
	for _, dir := range strings.Split(pathValue, ":") {
		if slices.Contains(bins[dir], name) {
			return dir + "/" + name, true
		}
	}
	return "", false
}

// marked renders a command as [line] with what it is: "(function)" for a
// call of a function of the source, "(shadowed)" for a program whose name
// may not mean the program it spells.
func marked(f *parser.Facts) []string {
	var out []string
	for _, c := range f.Commands {
		s := line(c)
		switch {
		case c.Function:
			s += " (function)"
		case c.Shadowed && !c.Builtin:
			s += " (shadowed)"
		}
		out = append(out, s)
	}
	return out
}

// TestParseShadowing checks which names may not mean the program they
// spell: after PATH changes (decided per name when the new PATH is known
// and Options.LookPath is set), and where functions and aliases of the
// source are seen (this shell and its subshells, not the programs it
// starts, but for exported functions).
func TestParseShadowing(t *testing.T) {
	t.Parallel()
	fsys := map[string]string{
		"/w/fn.sh":    "grep() {\n  local b=\"${CLAUDE_CODE_EXECPATH:-}\"\n  \"$b\" \"$@\"\n}\n",
		"/w/test.sh":  "#!/bin/bash\ngrep -q x index.js\n",
		"/w/alias.sh": "alias ls='rm -rf /w/src'\n",
	}
	env := map[string]string{"PATH": "/usr/bin", "HOME": "/h"}
	tests := []struct {
		name    string
		in      string
		env     map[string]string // nil means env
		noLook  bool
		stands  bool // fn.sh's functions stand for their programs
		want    []string
		unknown bool
	}{
		// PATH set to the value it has.
		{name: "PATH re-set to the environment's value", in: "export PATH=/usr/bin; ls", want: []string{"export", "ls"}},
		{name: "PATH given its own value", in: `PATH="$PATH"; ls`, want: []string{"ls"}},
		{name: "PATH=$PATH before a command", in: "PATH=$PATH ls", want: []string{"ls"}},
		{name: "PATH re-set to its value, no lookup", in: "export PATH=/usr/bin; ls", noLook: true, want: []string{"export", "ls"}},
		{name: "declare -p PATH keeps PATH", in: "declare -p PATH; declare -x PATH; ls", noLook: true, want: []string{"declare", "declare", "ls"}},
		{name: "a preload variable given the value it has", in: `export LD_LIBRARY_PATH="$LD_LIBRARY_PATH"; declare -x LD_LIBRARY_PATH="/opt/lib"; ls`,
			env: map[string]string{"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/lib"}, want: []string{"export", "declare", "ls"}},
		{name: "a preload variable given another value", in: `export LD_LIBRARY_PATH=/x; ls`,
			env: map[string]string{"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/lib"}, want: []string{"export", "ls (shadowed)"}, unknown: true},
		// A name with a slash is not looked up in PATH.
		{name: "path-qualified after a PATH change", in: "export PATH=/x:$PATH; exec '/bin/bash' -c 'pwd'", noLook: true,
			want: []string{"export", "/bin/bash -c pwd", "[bash -c] pwd"}},
		{name: "path-qualified with PATH before it", in: "PATH=/opt/evil:$PATH /bin/ls", noLook: true, want: []string{"/bin/ls"}},
		{name: "LD_PRELOAD still shadows a path", in: "export LD_PRELOAD=/x.so; /bin/ls", want: []string{"export", "/bin/ls (shadowed)"}, unknown: true},
		// A known new PATH: decided per name.
		{name: "a new directory without the name", in: "export PATH=/opt/codex:\"$PATH\"; ls; cat f; apply_patch",
			want: []string{"export", "ls", "cat f", "apply_patch (shadowed)"}},
		{name: "a new directory with the name", in: "export PATH=/opt/evil:$PATH; ls; cat f",
			want: []string{"export", "ls (shadowed)", "cat f"}},
		{name: "the name found under neither", in: "export PATH=/opt/codex:$PATH; nosuch", want: []string{"export", "nosuch (shadowed)"}},
		{name: "builtins are not looked up", in: "export PATH=/nowhere; echo hi; cd /; pwd", want: []string{"export", "echo hi", "cd /", "pwd"}},
		{name: "a shadowed wrapper shadows what it runs", in: "export PATH=/opt/evil:$PATH; sudo cat f", want: []string{"export", "cat f (shadowed)"}},
		{name: "Codex's wrapper", in: "export PATH='/opt/codex':\"$PATH\"\nexec '/bin/bash' -c 'ls -la; grep -n x f'",
			want: []string{"export", "/bin/bash -c ls -la; grep -n x f", "[bash -c] ls -la", "[bash -c] grep -n x f"}},
		{name: "PATH before a shell reaches its code", in: "PATH=/opt/evil:$PATH bash -c 'ls; cat f'; ls",
			want: []string{"bash -c ls; cat f", "[bash -c] ls (shadowed)", "[bash -c] cat f", "ls"}},
		{name: "PATH saved and restored around a snapshot", in: "if [ -n \"${PATH+x}\" ]; then __saved_PATH=\"$PATH\"; fi\n" +
			"export PATH=/opt/snap\n" +
			"if [ -n \"${__saved_PATH+x}\" ]; then export PATH=\"$__saved_PATH\"; else unset PATH; fi\n" +
			"export PATH=/opt/codex:\"$PATH\"\nls",
			want: []string{"[ -n x ]", "export", "[ -n x ]", "export", "export", "ls"}},
		{name: "no lookup", in: "export PATH=/opt/codex:$PATH; ls", noLook: true, want: []string{"export", "ls (shadowed)"}},
		{name: "PATH known only at run time", in: "export PATH=$(cat p); ls", want: []string{"cat p", "export", "ls (shadowed)"}},
		{name: "a relative directory", in: "export PATH=bin:$PATH; ls", want: []string{"export", "ls (shadowed)"}},
		{name: "no PATH in the environment", in: "export PATH=/usr/bin; ls", env: map[string]string{}, want: []string{"export", "ls (shadowed)"}},
		{name: "PATH changed in a branch", in: "if t; then export PATH=/opt/codex:$PATH; fi; ls",
			want: []string{"t", "export", "ls (shadowed)"}},
		// Functions and aliases are this shell's.
		{name: "a function that runs its program", in: `grep() { command grep --color=auto "$@"; }; grep x f`,
			want: []string{"grep x f (function)", "grep --color=auto x f"}},
		{name: "a function that runs its program by path", in: `ls() { /bin/ls -F "$@"; }; ls`,
			want: []string{"ls (function)", "/bin/ls -F"}},
		{name: "a subshell sees the function", in: `grep() { rm x; }; (grep y)`, want: []string{"grep y (function)", "rm x"}},
		{name: "a child shell does not", in: `grep() { rm x; }; bash -c 'grep y f'`,
			want: []string{"bash -c grep y f", "[bash -c] grep y f"}},
		{name: "nor a script", in: "source fn.sh && ./test.sh",
			want: []string{"source fn.sh", "[script ./test.sh] grep -q x index.js", "./test.sh"}},
		{name: "nor xargs sh -c", in: `grep() { rm x; }; xargs sh -c 'grep "$1" f' _`,
			want: []string{`sh -c grep "$1" f _ <xargs input>`, `[sh -c] grep "$1" f`}},
		{name: "eval does", in: `grep() { rm x; }; eval 'grep y'`, want: []string{"[eval] grep y (function)", "rm x", "eval grep y"}},
		{name: "an exported function reaches a child shell, which may not import it", in: `grep() { rm x; }; export -f grep; sh -c 'grep y'`,
			want: []string{"export", "sh -c grep y", "[sh -c] grep y (function)", "rm x", "[sh -c] grep y"}},
		{name: "declare -fx exports", in: `grep() { rm x; }; declare -fx grep; bash -c 'grep y'`,
			want: []string{"declare", "bash -c grep y", "[bash -c] grep y (function)", "rm x", "[bash -c] grep y"}},
		{name: "a function defined in a child shell stays there", in: "bash -c 'rm() { :; }'; rm -rf x",
			want: []string{"bash -c rm() { :; }", "rm -rf x"}},
		{name: "a function defined in a subshell stays there", in: "(rm() { :; }); rm -rf x", want: []string{"rm -rf x"}},
		{name: "a function defined in a branch may not be", in: "if t; then rm() { :; }; fi; rm -rf x",
			want: []string{"t", "rm -rf x (function)", ":", "rm -rf x"}},
		{name: "unset -f", in: "rm() { :; }; unset -f rm; rm -rf x", want: []string{"unset -f rm", "rm -rf x"}},
		{name: "an alias of its own name", in: "alias ls='ls -F'; ls", want: []string{"alias ls=ls -F", "[alias ls] ls -F", "ls"}},
		// eval of a setup tool's output is the assignments it prints.
		{name: "eval of dircolors' output", in: `eval "$(dircolors -b)"; ls`,
			want: []string{"dircolors -b", `eval "$(dircolors -b)"`, "ls"}},
		{name: "eval of output that sets PATH", in: `eval "$(brew shellenv)"; ls`,
			want: []string{"brew shellenv", `eval "$(brew shellenv)"`, "ls (shadowed)"}},
		{name: "eval of another program's output", in: `eval "$(tool init)"; ls`, unknown: true,
			want: []string{"tool init", `eval "$(tool init)"`, "ls"}},
		{name: "eval of more than the output", in: `eval "$(dircolors -b) x"`, unknown: true,
			want: []string{"dircolors -b", `eval "$(dircolors -b) x"`}},
		// A harness snapshot's function stands for its program.
		{name: "a snapshot's grep", in: "source fn.sh && grep -n x f", unknown: true,
			want: []string{"source fn.sh", "grep -n x f (function)", "[source fn.sh] local", `[source fn.sh] "$b" -n x f`}},
		{name: "a snapshot's grep that stands for grep", in: "source fn.sh && grep -n x f", stands: true,
			want: []string{"source fn.sh", "grep -n x f"}},
		{name: "a function of the step's own does not", in: "grep() { rm x; }; grep y", stands: true,
			want: []string{"grep y (function)", "rm x"}},
		{name: "a child shell sees no alias", in: "source alias.sh; bash -c ls",
			want: []string{"[source alias.sh] alias ls=rm -rf /w/src", "source alias.sh", "bash -c ls", "[bash -c] ls"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := parser.Options{Cwd: "/w", Env: env, ReadFile: files(fsys), LookPath: lookIn}
			if tc.env != nil {
				opts.Env = tc.env
			}
			if tc.noLook {
				opts.LookPath = nil
			}
			if tc.stands {
				opts.Stands = func(file, name string) bool { return file == "/w/fn.sh" }
			}
			opts.Emits = func(argv []string) ([]string, bool) {
				switch strings.Join(argv, " ") {
				case "dircolors -b":
					return []string{"LS_COLORS"}, true
				case "brew shellenv":
					return []string{"PATH", "HOMEBREW_PREFIX"}, true
				}
				return nil, false
			}
			f := parser.Parse(tc.in, opts)
			if diff := cmp.Diff(tc.want, marked(f)); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
			}
			if got := len(f.Unknown) > 0; got != tc.unknown {
				t.Errorf("Parse(%q) unknown = %v, want %v:\n%s", tc.in, got, tc.unknown, unknownText(f))
			}
		})
	}
}
