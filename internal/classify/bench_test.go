package classify

import (
	"fmt"
	"strings"
	"testing"

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
