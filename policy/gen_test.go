package policy

import (
	"bytes"
	"go/format"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGenerated checks that default_gen.go holds exactly what policy.yaml
// says: gen.go writes it, and `go generate ./policy` runs gen.go.
func TestGenerated(t *testing.T) {
	code, err := generateDefault(defaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	want, err := format.Source(code)
	if err != nil {
		t.Fatalf("generated code does not format: %v\n%s", err, code)
	}
	cur, err := os.ReadFile("default_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cur, want) {
		t.Fatalf("default_gen.go is out of date: run go generate ./policy")
	}
	parsed, err := parseDefault(defaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(parsed, compiledDefault(), cmp.AllowUnexported(Policy{}, Rule{}, ruleIndex{}, nameRules{})); diff != "" {
		t.Fatalf("compiled default differs from policy.yaml (-parsed +compiled):\n%s", diff)
	}
}
