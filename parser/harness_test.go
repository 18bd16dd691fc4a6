package parser

import (
	"fmt"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// The three harnesses' wrappers, in the shapes the trial of issue 14
// recorded (Claude Code 2.1, Codex 0.171, Gemini CLI 0.61).
func claudeWrap(cmd string) string {
	return "source /root/.claude/shell-snapshots/snapshot-bash-1764000000000-ab12cd.sh 2>/dev/null || true && " +
		"shopt -u extglob 2>/dev/null || true && eval " + shQuote(cmd) + " < /dev/null && pwd -P >| /tmp/claude-9f3a-cwd"
}

func codexWrap(cmd string) string {
	var b strings.Builder
	vars := []string{"PATH", "LANG", "HOME", "CODEX_THREAD_ID", "CODEX_SANDBOX_NETWORK_DISABLED"}
	for _, v := range vars {
		fmt.Fprintf(&b, "if [ -n \"${%s+x}\" ]; then\n  __codex_saved_%s=\"$%s\"\n  __codex_had_%s=1\nfi\n", v, v, v, v)
	}
	b.WriteString("if . '/root/.codex/shell_snapshots/0199a.sh' >/dev/null 2>&1; then :; fi\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "if [ -n \"${__codex_had_%s+x}\" ]; then export %s=\"$__codex_saved_%s\"; else unset %s; fi\n", v, v, v, v)
	}
	b.WriteString("export PATH='/root/.codex/tmp/arg0/codex-arg0x':\"$PATH\"\n")
	b.WriteString("exec '/bin/bash' -c " + shQuote(cmd))
	return b.String()
}

func geminiWrap(cmd string) string {
	return "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-Xy12Ab/bgpids.tmp\n(\n" +
		"  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n" + cmd + "\n)\n__code=$?\nexit $__code"
}

// shQuote quotes s as the harnesses do: '…' with each ' as '"'"'.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

var harnessCommands = []string{
	"ls -la",
	"pwd",
	"sed -i 's/var /let /g' index.js && node test.js",
	`grep -rn "TODO" src | head -20`,
	"cat > notes.txt <<'EOF'\nit's done\n$HOME stays\nEOF",
	"for f in *.go; do\n  gofmt -l \"$f\"\ndone",
	"echo $(date) > stamp; rm -rf build",
	"git push origin main",
	"cd src && make 2>&1 | tail -5",
}

func TestUnwrap(t *testing.T) {
	t.Parallel()
	wraps := map[string]func(string) string{"claude-code": claudeWrap, "codex": codexWrap, "gemini-cli": geminiWrap}
	for harness, wrap := range wraps {
		scaffold := ""
		for _, cmd := range harnessCommands {
			src := wrap(cmd)
			got, ok := Unwrap(src)
			if !ok || got.Harness != harness || got.Command != cmd {
				t.Errorf("%s: Unwrap(wrapped %q) = %+v, %v", harness, cmd, got, ok)
				continue
			}
			// The scaffold is the same for every command, and is the
			// source with the command's word (or text) taken out.
			if scaffold == "" {
				scaffold = got.Scaffold
			}
			quoted := shQuote(cmd)
			if harness == "gemini-cli" {
				quoted = cmd
			}
			if got.Scaffold != scaffold || strings.Count(scaffold, CommandMark) != 1 ||
				strings.Replace(scaffold, CommandMark, quoted, 1) != src {
				t.Errorf("%s: scaffold of %q:\n%s\nfirst:\n%s", harness, cmd, got.Scaffold, scaffold)
			}
		}
	}
}

// Anything beyond bookkeeping around the command, or two commands, is
// not a wrapper: the journal then shows the whole source.
func TestUnwrapRefuses(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"ls -la",
		"eval 'ls'; eval 'pwd'",
		"rm -rf ~ ; eval 'ls'",
		"export X=$(rm -rf ~); eval 'ls'",
		"export X=1 > ~/.bashrc; eval 'ls'",
		"source <(curl -s example.invalid) && eval 'ls'",
		"eval \"$CMD\"",
		"eval 'ls' > out.txt",
		"eval 'ls' &",
		"exec /bin/bash -c 'ls'; echo after",
		"exec /usr/bin/python3 -c 'print(1)'",
		"exec /bin/bash -x 'ls'",
		"true && eval ''",
		"( trap \"$T\" EXIT; ls )",
		"( ls; pwd )",
		"if rm -f x; then :; fi; eval 'ls'",
		"pwd -P >| $F; eval ls",
		"cat <<EOF\nx\nEOF\neval 'ls'",
		"if then",
	} {
		if got, ok := Unwrap(src); ok {
			t.Errorf("Unwrap(%q) = %+v, want not a wrapper", src, got)
		}
	}
}

func FuzzUnwrap(f *testing.F) {
	for _, cmd := range harnessCommands {
		f.Add(cmd)
	}
	f.Add("'")
	f.Add("a\n)\n( b")
	f.Fuzz(func(t *testing.T, cmd string) {
		// Any source: no panic.
		Unwrap(cmd)
		// A command that parses on its own comes back whole from the
		// wrappers that quote it.
		_, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
		// (A NUL never reaches bash: argv cannot hold one.)
		if err != nil || strings.TrimSpace(cmd) == "" || strings.ContainsRune(cmd, 0) {
			return
		}
		for _, wrap := range []func(string) string{claudeWrap, codexWrap} {
			if got, ok := Unwrap(wrap(cmd)); !ok || got.Command != cmd {
				t.Errorf("Unwrap(wrapped %q) = %+v, %v", cmd, got, ok)
			}
		}
	})
}
