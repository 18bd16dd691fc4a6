package enforce

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeaf keeps enforce a leaf: it imports none of undosh's packages, so
// that every binary can link it without pulling anything else in.
func TestLeaf(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const mod = "github.com/undosh/undosh/"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, mod) && dep != mod+"internal/enforce" {
			t.Errorf("enforce imports %s", dep)
		}
	}
}
