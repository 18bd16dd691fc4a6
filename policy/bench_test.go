package policy

import "testing"

// BenchmarkParseDefault measures parsing and indexing the embedded
// policy.yaml, which every process that classifies pays once.
func BenchmarkParseDefault(b *testing.B) {
	for b.Loop() {
		f, err := parseFile(DefaultName, defaultYAML)
		if err != nil {
			b.Fatal(err)
		}
		p := builtin()
		f.applyTo(p)
		p.buildIndex()
	}
}

// BenchmarkCompiledDefault measures what Default costs at start-up: the
// policy compiled into default_gen.go, indexed.
func BenchmarkCompiledDefault(b *testing.B) {
	for b.Loop() {
		compiledDefault()
	}
}
