package classify

import (
	"os/exec"
	"strings"
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

// TestLeafImports guards the import direction: the leaf packages never
// import each other or the glue; only the glue and cmd/ see more than one.
// Small helpers in internal/ are shared.
func TestLeafImports(t *testing.T) {
	leaves := []string{"parser", "policy", "checkpoint", "fork", "hostlink", "pty"}
	for _, leaf := range leaves {
		out, err := exec.Command("go", "list", "-deps", "github.com/undosh/undosh/"+leaf).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", leaf, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, other := range leaves {
				if other != leaf && dep == "github.com/undosh/undosh/"+other {
					t.Errorf("%s imports %s: leaf packages must not import each other", leaf, other)
				}
			}
			switch strings.TrimPrefix(dep, "github.com/undosh/undosh/") {
			case "internal/classify", "shell", "internal/machine", "internal/journal", "internal/install":
				t.Errorf("%s imports the glue package %s", leaf, dep)
			}
		}
	}
}
