package classify

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// fakeBin makes a directory of empty programs under dir.
func fakeBin(t *testing.T, dir string, names ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPathLookup(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	a := fakeBin(t, filepath.Join(tmp, "a"), "tool", "both")
	b := fakeBin(t, filepath.Join(tmp, "b"), "both", "other")
	if err := os.WriteFile(filepath.Join(a, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(a, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	fakeBin(t, filepath.Join(b, "adir"))
	if err := os.WriteFile(filepath.Join(b, "noexec"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       string // "" for not found
	}{
		{"tool", a + ":" + b, filepath.Join(a, "tool")},
		{"both", b + ":" + a, filepath.Join(b, "both")},
		{"other", a + ":" + b, filepath.Join(b, "other")},
		{"noexec", a + ":" + b, filepath.Join(b, "noexec")}, // a's is not executable
		{"adir", a, ""},                          // a directory
		{"tool", link, filepath.Join(a, "tool")}, // the same file through a symlink
		{"missing", a + ":" + b, ""},
		{"tool", "", ""},
		{"a/tool", tmp, ""},
	}
	look := PathLookup()
	for _, tc := range tests {
		got, ok := look(tc.name, tc.path)
		if !ok {
			got = ""
		}
		want := tc.want
		if want != "" {
			want, _ = filepath.EvalSymlinks(want)
		}
		if got != want || ok != (tc.want != "") {
			t.Errorf("lookup(%q, %q) = %q, %v; want %q", tc.name, tc.path, got, ok, want)
		}
	}
}

// claudeSnapshot is the part of Claude Code 2.1's shell snapshot that
// shadows find and grep with the ugrep and bfs built into its binary.
const claudeSnapshot = `# Snapshot file
unalias -a 2>/dev/null || true
shopt -u extglob
set -o hashall
unalias find 2>/dev/null || true
unalias grep 2>/dev/null || true
function find {
  local _cc_bin="${CLAUDE_CODE_EXECPATH:-}"
  [[ -x $_cc_bin ]] || _cc_bin=/root/.local/bin/claude
  if [[ ! -x $_cc_bin ]]; then command find ${1+"$@"}; return; fi
  if [[ -n ${ZSH_VERSION:-} ]]; then
    ARGV0=bfs "$_cc_bin" -S dfs -regextype findutils-default ${1+"$@"}
  else
    (exec -a bfs "$_cc_bin" -S dfs -regextype findutils-default ${1+"$@"})
  fi
}
function grep {
  local _cc_a
  for _cc_a in ${1+"$@"}; do
    case "$_cc_a" in -*-filter*|-*-pager*|-*-config*|--null) command grep ${1+"$@"}; return ;; esac
  done
  local _cc_bin="${CLAUDE_CODE_EXECPATH:-}"
  [[ -x $_cc_bin ]] || _cc_bin=/root/.local/bin/claude
  if [[ ! -x $_cc_bin ]]; then command grep ${1+"$@"}; return; fi
  (exec -a ugrep "$_cc_bin" -G --ignore-files --hidden -I --exclude-dir=.git ${1+"$@"})
}
`

// debianBashrc is the part of Debian's /etc/skel/.bashrc that is not
// comments or prompt settings: it evaluates dircolors' output and sources
// files that need not exist.
const debianBashrc = `case $- in
    *i*) ;;
      *) return;;
esac
HISTCONTROL=ignoreboth
shopt -s histappend
HISTSIZE=1000
HISTFILESIZE=2000
shopt -s checkwinsize
if [ -z "${debian_chroot:-}" ] && [ -r /etc/debian_chroot ]; then
    debian_chroot=$(cat /etc/debian_chroot)
fi
if [ -x /usr/bin/dircolors ]; then
    test -r ~/.dircolors && eval "$(dircolors -b ~/.dircolors)" || eval "$(dircolors -b)"
    alias ls='ls --color=auto'
    alias grep='grep --color=auto'
fi
alias ll='ls -alF'
if [ -f ~/.bash_aliases ]; then
    . ~/.bash_aliases
fi
if ! shopt -oq posix; then
  if [ -f /usr/share/bash-completion/bash_completion ]; then
    . /usr/share/bash-completion/bash_completion
  elif [ -f /etc/bash_completion ]; then
    . /etc/bash_completion
  fi
fi
`

// TestDecideHarness decides the scaffolding real harnesses wrap around a
// command (trial of issue 14) with PATH looked up for real: the command
// must class as it would bare.
func TestDecideHarness(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	bin := fakeBin(t, filepath.Join(tmp, "bin"), "ls", "cat", "grep", "bash", "sed")
	codex := fakeBin(t, filepath.Join(tmp, "codex"), "apply_patch", "codex-linux-sandbox")
	const snap = "/home/agent/.claude/shell-snapshots/snapshot-bash-1-x.sh"
	const codexSnap = "/home/agent/.codex/shell_snapshots/0199.sh"
	scripts := map[string]string{
		// Claude Code's snapshot ends with PATH re-set to its value, and
		// defines grep to run a binary named at run time.
		snap: claudeSnapshot + "export PATH=" + bin + "\n",
		// Codex's snapshot of a login shell, whose PATH differs.
		codexSnap: "# Snapshot file\nunalias -a 2>/dev/null || true\nmkcd () \n{ \n    mkdir -p \"$1\" && cd \"$1\"\n}\n" +
			"shopt -s expand_aliases\nalias ll='ls -alF'\ndeclare -x LANG=\"C.UTF-8\"\ndeclare -x PATH=\"/usr/games:" + bin + "\"\n",
		"/work/proj/test.sh":   "#!/bin/bash\ngrep -q 'x = 1;' index.js || { echo FAIL; exit 1; }\n",
		"/work/proj/index.js":  "var x = 1;\n",
		"/work/proj/script.sh": "#!/bin/sh\nls\n",
		"/home/agent/.bashrc":  debianBashrc,
	}
	read := func(p string) ([]byte, error) {
		if s, ok := scripts[p]; ok {
			return []byte(s), nil
		}
		if strings.HasPrefix(p, "/work/") || strings.HasPrefix(p, "/home/") || strings.Contains(p, "bash_completion") {
			return nil, fmt.Errorf("read %s: %w", p, fs.ErrNotExist)
		}
		return ReadScript(p) // /bin/ls and the like
	}
	claude := func(cmd string) string {
		q := "'" + strings.ReplaceAll(cmd, "'", `'"'"'`) + "'"
		return "source " + snap + " 2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval " + q +
			" < /dev/null && pwd -P >| /tmp/claude-ab12-cwd"
	}
	codexWrap := func(cmd string) string {
		var b strings.Builder
		for _, v := range []string{"PATH", "LANG", "CODEX_THREAD_ID"} {
			fmt.Fprintf(&b, "if [ -n \"${%s+x}\" ]; then __codex_saved_%s=\"$%s\"; __codex_had_%s=1; fi\n", v, v, v, v)
		}
		b.WriteString("if . '" + codexSnap + "' >/dev/null 2>&1; then :; fi\n")
		for _, v := range []string{"PATH", "LANG", "CODEX_THREAD_ID"} {
			fmt.Fprintf(&b, "if [ -n \"${__codex_had_%s+x}\" ]; then export %s=\"$__codex_saved_%s\"; else unset %s; fi\n", v, v, v, v)
		}
		b.WriteString("export PATH='" + codex + "':\"$PATH\"\n")
		b.WriteString("exec '/bin/bash' -c '" + strings.ReplaceAll(cmd, "'", `'"'"'`) + "'")
		return b.String()
	}
	gemini := func(cmd string) string {
		return "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-Ab12Cd/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n" +
			cmd + "\n)\n__code=$?\nexit $__code"
	}
	tests := []struct {
		name string
		in   string
		want policy.Class
		// same, when set, is a command that must get the same class.
		same string
	}{
		{name: "Codex: ls", in: codexWrap("ls -la"), want: policy.None},
		{name: "Codex: pwd", in: codexWrap("pwd"), want: policy.None},
		{name: "Codex: grep", in: codexWrap("grep -n x index.js"), want: policy.None},
		{name: "Codex: an edit", in: codexWrap("sed -i 's/var /let /g' index.js"), want: policy.Git},
		{name: "Codex's helper is not the program it names", in: codexWrap("apply_patch"), want: policy.Git},
		{name: "PATH=$PATH before a path", in: "PATH=$PATH /bin/ls", want: policy.None},
		{name: "a path after a new PATH", in: "export PATH=/x:$PATH; exec '/bin/bash' -c 'pwd'", want: policy.None},
		{name: "Claude: ls", in: claude("ls"), want: policy.None},
		{name: "Claude: cat", in: claude("cat index.js"), want: policy.None},
		{name: "Debian's stock .bashrc", in: "source /home/agent/.bashrc; ls", want: policy.None},
		{name: "a missing script a program of the step may make", in: "make gen; source ./gen.sh", want: policy.Git},
		{name: "Claude: grep is the snapshot's grep, which stands for grep", in: claude("grep -rn TODO ."), want: policy.None},
		{name: "Claude: find too", in: claude("find . -name '*.js'"), want: policy.None},
		{name: "Claude: find -delete is still a write", in: claude("find . -name '*.tmp' -delete"), want: policy.Git},
		{name: "a function of the model's own is walked", in: claude("grep() { rm -rf src; }; grep x"), want: policy.Git},
		{name: "Claude: a script runs grep, not the snapshot's function", in: claude("sed -i 's/var /let /' index.js && ./test.sh"), want: policy.Git},
		{name: "Claude: bash -c runs grep, not the snapshot's function", in: claude("bash -c 'grep x index.js'"), want: policy.None},
		{name: "Claude: a script after the snapshot", in: claude("./script.sh"), want: policy.None},
		{name: "Codex's snapshot: declare -xp", in: "(\n  while IFS= read -r __codex_snapshot_export_name; do\n    declare -xp \"$__codex_snapshot_export_name\" 2>/dev/null || true\n  done < <(compgen -e)\n)", want: policy.None},
		{name: "Claude's snapshot: declare -f", in: `for func in $(declare -F | cut -d' ' -f3); do declare -f "$func"; done`, want: policy.None},
		{name: "Gemini: the trap writes what a plain redirect writes", in: gemini("ls"),
			same: "( ls; jobs -p > /tmp/gemini-shell-Ab12Cd/bgpids.tmp )"},
		{name: "a literal variable in a trap", in: `x=/tmp/f; trap 'echo a > "$x"' EXIT; ls`, same: `x=/tmp/f; echo a > "$x"; ls`},
		{name: "a function that runs its program", in: `grep() { command grep --color=auto "$@"; }; grep -n x index.js`, want: policy.None},
		{name: "a function that runs its program by path", in: `ls() { /bin/ls -F "$@"; }; ls -la`, want: policy.None},
		{name: "an alias of its own name", in: "shopt -s expand_aliases\nalias ls='ls --color=auto'\nls -la", want: policy.None},
	}
	p := policy.Default()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := Options{Policy: p, Cwd: "/work/proj", Roots: []string{"/work/proj"}, ReadFile: read,
				Env: map[string]string{"HOME": "/home/agent", "PATH": bin}}
			want := tc.want
			if tc.same != "" {
				want = Decide(tc.same, o).Decision.Class
				if want >= policy.Fork {
					t.Fatalf("%q is %s: pick a plainer command", tc.same, want)
				}
			}
			if d := Decide(tc.in, o).Decision; d.Class != want {
				t.Errorf("Decide(%q) = %s, want %s\n%s", tc.in, d.Class, want, reasons(d))
			}
		})
	}
}

// A step of undosh's own tools alone runs outside any limit, and so does
// one a harness wraps in its read-only scaffolding; anything else beside
// them does not.
func TestDecideOwn(t *testing.T) {
	t.Parallel()
	claude := func(cmd string) string {
		return "source /home/agent/.claude/shell-snapshots/snapshot-bash-1-x.sh 2>/dev/null || true && shopt -u extglob 2>/dev/null || true && eval '" +
			cmd + "' < /dev/null && pwd -P >| /tmp/claude-ab12-cwd"
	}
	snap := []byte("unalias -a 2>/dev/null || true\nshopt -s expand_aliases\nexport PATH=/usr/bin:/bin\n")
	o := Options{Policy: policy.Default(), Cwd: "/work/proj", Roots: []string{"/work/proj"},
		Env:      map[string]string{"HOME": "/home/agent", "PATH": "/usr/bin:/bin"},
		ReadFile: func(string) ([]byte, error) { return snap, nil }}
	for in, want := range map[string]bool{
		"undoctl log":                     true,
		"undoctl back 3":                  true,
		claude("undoctl log"):             true,
		claude("undoctl back 3"):          true,
		claude("undoctl log; rm -rf src"): false,
		"undoctl log | head":              false,
		claude("ls"):                      false,
		"echo x > f; undoctl log":         false,
		"shopt -s extglob; true":          false,
	} {
		if got := Decide(in, o).Decision.Own; got != want {
			t.Errorf("Decide(%q).Own = %v, want %v", in, got, want)
		}
	}
}

// A root agent's project under /root is a workspace like any other; the
// rest of root's home is still outside it.
func TestDecideProjectUnderRoot(t *testing.T) {
	t.Parallel()
	o := Options{Policy: policy.Default(), Cwd: "/root/proj", Roots: []string{"/root/proj"},
		Env: map[string]string{"HOME": "/root"}, NoScripts: true}
	for in, want := range map[string]policy.Class{
		"sed -i s/a/b/ index.js":  policy.Git,
		"rm -rf src":              policy.Git,
		"echo x >> /root/.bashrc": policy.Fork,
		"cp a /opt/app/":          policy.Fork,
		"echo x > /etc/motd":      policy.Fork,
	} {
		if d := Decide(in, o).Decision; d.Class != want {
			t.Errorf("in /root/proj, Decide(%q) = %s, want %s\n%s", in, d.Class, want, reasons(d))
		}
	}
}

// undosh's own tools named by path, in the directory undosh runs from,
// are those tools; the same name elsewhere is not.
func TestDecideOwnToolByPath(t *testing.T) {
	t.Parallel()
	o := Options{Policy: policy.Default(), Cwd: "/work/proj", Roots: []string{"/work/proj"},
		Env: map[string]string{"HOME": "/home/agent"}, ReadFile: func(p string) ([]byte, error) { return nil, fmt.Errorf("%s: %w", p, parser.ErrBinary) }}
	own := filepath.Join(ownDirs()[0], "undoctl")
	if d := Decide(own+" log", o).Decision; !d.Own || d.Class != policy.None {
		t.Errorf("Decide(%s log) = %s, own %v\n%s", own, d.Class, d.Own, reasons(d))
	}
	if d := Decide("/work/proj/undoctl log", o).Decision; d.Own || d.Class == policy.None {
		t.Errorf("a program named undoctl in the workspace: %s, own %v", d.Class, d.Own)
	}
}

// TestDecideCodexWrapper decides Codex 0.171's real wrapper (captured by
// the harness suite, testdata/harness) around commands: each must class
// as it would bare.
func TestDecideCodexWrapper(t *testing.T) {
	t.Parallel()
	wrapper, err := os.ReadFile("../../testdata/harness/codex-0.171/wrapper.sh")
	if err != nil {
		t.Fatal(err)
	}
	snapshot, err := os.ReadFile("../../testdata/harness/codex-0.171/snapshot.sh")
	if err != nil {
		t.Fatal(err)
	}
	const execLine = "exec '/bin/bash' -c 'ls'"
	if !strings.HasSuffix(string(wrapper), execLine) {
		t.Fatalf("the fixture does not end in %s", execLine)
	}
	o := Options{Policy: policy.Default(), Cwd: "/work/proj", Roots: []string{"/work/proj"}, EnvComplete: true,
		Env: map[string]string{"HOME": "/root", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		ReadFile: func(p string) ([]byte, error) {
			if strings.HasPrefix(p, "/root/.codex/shell_snapshots/") {
				return snapshot, nil
			}
			return nil, fmt.Errorf("read %s: %w", p, fs.ErrNotExist)
		}}
	for _, cmd := range []string{"ls", "pwd", "cat index.js", "grep -n x index.js", "sed -i 's/var /let /g' index.js",
		"git push origin main", "echo kept > /etc/undosh-harness-kept", "rm -rf src && false"} {
		in := strings.TrimSuffix(string(wrapper), execLine) + "exec '/bin/bash' -c " + shellQuote(cmd)
		bare := Decide(cmd, o).Decision
		got := Decide(in, o).Decision
		if got.Class != bare.Class || got.Verdict != bare.Verdict {
			t.Errorf("%q in Codex's wrapper: %s/%s, bare %s/%s\n%s", cmd, got.Class, got.Verdict, bare.Class, bare.Verdict, reasons(got))
		}
		if w, ok := parser.Unwrap(in); !ok || w.Command != cmd || w.Harness != "codex" {
			t.Errorf("Unwrap(Codex's wrapper around %q) = %+v, %v", cmd, w.Command, ok)
		}
	}
}

// shellQuote quotes s as the harnesses do.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }
