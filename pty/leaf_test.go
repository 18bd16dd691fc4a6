package pty

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeaf keeps pty a leaf: of undosh's packages it may import only
// internal helpers.
func TestLeaf(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const mod = "github.com/undosh/undosh/"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, mod) && dep != mod+"pty" && !strings.HasPrefix(dep, mod+"internal/") {
			t.Errorf("pty imports %s", dep)
		}
	}
}
