package classify

import (
	"testing"

	"github.com/undosh/undosh/policy"
)

// TestDefaultExamples checks every example written in the embedded
// policy.yaml.
func TestDefaultExamples(t *testing.T) {
	p := policy.Default()
	if len(p.Examples) < 30 {
		t.Fatalf("the default policy has %d examples, want at least 30", len(p.Examples))
	}
	for _, f := range p.CheckExamples(func(cmd string) policy.Decision {
		return Decide(cmd, ExampleOptions(p)).Decision
	}) {
		t.Errorf("%s\n%s", f.Error(), reasons(f.Got))
	}
}
