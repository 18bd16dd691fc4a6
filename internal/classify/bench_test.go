package classify

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

var typical = []string{
	"ls -la",
	"git status",
	"grep -rn TODO src | head -20",
	"rm -rf build && mkdir build",
	"cd src && go test ./...",
	"sed -i 's/foo/bar/g' main.go",
	"sudo apt-get install -y jq",
	"git push origin feature/x",
	"curl -sSfL https://example.com/x.tgz -o x.tgz",
	`python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])' < package.json`,
}

// BenchmarkOneLine parses and decides typical one-line commands
// (target: at most 50 µs each).
func BenchmarkOneLine(b *testing.B) {
	opts := ExampleOptions(policy.Default())
	for _, cmd := range typical {
		b.Run(strings.Fields(cmd)[0]+"-"+fmt.Sprint(len(cmd)), func(b *testing.B) {
			for b.Loop() {
				Decide(cmd, opts)
			}
		})
	}
}

// script1000 is a 1,000-line script made of the typical lines.
func script1000() string {
	var b strings.Builder
	for i := range 1000 {
		b.WriteString(typical[i%len(typical)])
		b.WriteByte('\n')
	}
	return b.String()
}

// BenchmarkScript1000 parses and decides a 1,000-line script (target: at
// most 10 ms).
func BenchmarkScript1000(b *testing.B) {
	opts := ExampleOptions(policy.Default())
	src := script1000()
	for b.Loop() {
		Decide(src, opts)
	}
}

// BenchmarkCorpus decides every command of the labelled corpus, as
// `undoctl explain --json-lines` does (target: a few hundred in under 1 s).
func BenchmarkCorpus(b *testing.B) {
	opts := ExampleOptions(policy.Default())
	lines := loadCorpus(b)
	b.ReportMetric(float64(len(lines)), "commands/op")
	for b.Loop() {
		for _, l := range lines {
			Decide(l.cmd, opts)
		}
	}
}

// BenchmarkLoadDefault measures loading the embedded policy, which every
// undosh invocation pays once.
func BenchmarkLoadDefault(b *testing.B) {
	for b.Loop() {
		if _, err := policy.Load("p.yaml", []byte("version: 1\n")); err != nil {
			b.Fatal(err)
		}
	}
}

// wrapperScript is a harness wrapper of about 350 lines in the shape of
// Codex's: the environment saved, a snapshot's exports and functions,
// the environment restored, PATH re-set, and the command exec'd last.
func wrapperScript() string {
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "if [ -n \"${V%d+x}\" ]; then __saved_V%d=\"$V%d\"; __had_V%d=1; fi\n", i, i, i, i)
	}
	for i := range 150 {
		fmt.Fprintf(&b, "declare -x V%d=\"/opt/value/%d:/usr/lib/%d\"\n", i, i, i)
	}
	for i := range 20 {
		fmt.Fprintf(&b, "f%d () \n{ \n    local x=\"$1\";\n    command grep -n \"$x\" \"${@:2}\"\n}\n", i)
	}
	for i := range 60 {
		fmt.Fprintf(&b, "if [ -n \"${__had_V%d+x}\" ]; then export V%d=\"$__saved_V%d\"; else unset V%d; fi\n", i, i, i, i)
	}
	b.WriteString("export PATH='/home/agent/.codex/tmp/arg0/codex-arg0Ab12':\"$PATH\"\n")
	b.WriteString("exec '/bin/bash' -c 'ls -la'\n")
	return b.String()
}

// BenchmarkWrapper parses and decides a harness wrapper of about 350
// lines (the trial measured 26–29 ms for Codex's 345-line one), with the
// variables it saves unset (every if may or may not run) and set in the
// environment (the parser decides each if).
func BenchmarkWrapper(b *testing.B) {
	src := wrapperScript()
	for _, set := range []bool{false, true} {
		opts := ExampleOptions(policy.Default())
		name := "unset"
		if set {
			name = "set"
			opts.Env = map[string]string{"HOME": "/home/agent", "PATH": "/usr/bin:/bin"}
			for i := range 60 {
				opts.Env[fmt.Sprintf("V%d", i)] = "x"
			}
		}
		b.Run(name, func(b *testing.B) {
			b.ReportMetric(float64(strings.Count(src, "\n")), "lines")
			for b.Loop() {
				Decide(src, opts)
			}
		})
	}
}

// BenchmarkSnapshot decides a command that sources a 300-line shell
// snapshot first, as Claude Code and Codex send every command, parsing
// the snapshot each time (cold) or once (cached, as the front end's
// server does).
func BenchmarkSnapshot(b *testing.B) {
	var snap strings.Builder
	for i := range 40 {
		fmt.Fprintf(&snap, "f%d () \n{ \n    command grep -n \"$1\" \"${@:2}\"\n}\n", i)
	}
	for i := range 150 {
		fmt.Fprintf(&snap, "declare -x V%d=\"/opt/value/%d\"\n", i, i)
	}
	data := []byte(snap.String())
	src := "source /home/agent/.claude/shell-snapshots/snapshot-bash-1-ab.sh 2>/dev/null || true && eval 'ls -la' < /dev/null && pwd -P >| /tmp/claude-ab12-cwd"
	for _, cached := range []bool{false, true} {
		opts := ExampleOptions(policy.Default())
		opts.ReadFile = func(string) ([]byte, error) { return data, nil }
		name := "cold"
		if cached {
			name, opts.Cache = "cached", parser.NewCache(8)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if d := Decide(src, opts).Decision; d.Class != policy.None {
					b.Fatalf("class %s", d.Class)
				}
			}
		})
	}
}

// BenchmarkCodexWrapper decides Codex 0.171's real 344-line wrapper
// around ls, with its snapshot, as the front end's server does (the
// snapshot's parse cached).
func BenchmarkCodexWrapper(b *testing.B) {
	wrapper, err := os.ReadFile("../../testdata/harness/codex-0.171/wrapper.sh")
	if err != nil {
		b.Fatal(err)
	}
	snapshot, err := os.ReadFile("../../testdata/harness/codex-0.171/snapshot.sh")
	if err != nil {
		b.Fatal(err)
	}
	o := Options{Policy: policy.Default(), Cwd: "/work/proj", Roots: []string{},
		Env:      map[string]string{"HOME": "/root", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		ReadFile: func(string) ([]byte, error) { return snapshot, nil }, Cache: parser.NewCache(8), EnvComplete: true}
	src := string(wrapper)
	for b.Loop() {
		if d := Decide(src, o).Decision; d.Class != policy.None {
			b.Fatal(d.Class)
		}
	}
}
