package undosh_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/undosh/undosh"
	"github.com/undosh/undosh/policy"
)

// TestPolicyYAML: the embedded text is policy.yaml as it is in the
// repository, the policy package serves that same text, and it loads as
// a policy on its own (extends: none) with the rules, path rules and
// examples of the compiled default.
func TestPolicyYAML(t *testing.T) {
	t.Parallel()
	disk, err := os.ReadFile("policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(undosh.PolicyYAML, disk) {
		t.Error("undosh.PolicyYAML is not policy.yaml")
	}
	if !bytes.Equal(policy.DefaultSource(), undosh.PolicyYAML) {
		t.Error("policy.DefaultSource is not undosh.PolicyYAML")
	}
	p, err := policy.Load("policy.yaml", append([]byte("extends: none\n"), undosh.PolicyYAML...))
	if err != nil {
		t.Fatalf("policy.yaml does not load: %v", err)
	}
	if len(p.Files) != 1 || p.Files[0] != "policy.yaml" {
		t.Errorf("policy files %q, want only policy.yaml", p.Files)
	}
	d := policy.Default()
	if len(p.Rules) == 0 || len(p.Rules) != len(d.Rules) || len(p.Paths) != len(d.Paths) || len(p.Examples) != len(d.Examples) {
		t.Errorf("policy.yaml has %d rules, %d path rules, %d examples; the compiled default %d, %d, %d",
			len(p.Rules), len(p.Paths), len(p.Examples), len(d.Rules), len(d.Paths), len(d.Examples))
	}
}
