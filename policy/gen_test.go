package policy

import (
	"bytes"
	"go/format"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGenerated checks that default_gen.go and default_pos_gen.go hold
// exactly what policy.yaml says: gen.go writes them, and
// `go generate ./policy` runs gen.go.
func TestGenerated(t *testing.T) {
	code, pos, err := generateDefault(defaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string][]byte{"default_gen.go": code, "default_pos_gen.go": pos} {
		want, err := format.Source(src)
		if err != nil {
			t.Fatalf("generated %s does not format: %v\n%s", name, err, src)
		}
		cur, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cur, want) {
			t.Errorf("%s is out of date: run go generate ./policy", name)
		}
	}
	if t.Failed() {
		return
	}
	parsed, err := parseDefault(defaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(parsed, compiledDefault(), cmp.AllowUnexported(Policy{}, Rule{}, ruleIndex{}, nameRules{})); diff != "" {
		t.Fatalf("compiled default differs from policy.yaml (-parsed +compiled):\n%s", diff)
	}
}
