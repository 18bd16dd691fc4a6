package classify

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadPolicyCacheIsPrivate: the cache LoadPolicy writes, and the
// state directory above it when it makes that too, are the user's alone
// (state.Dir refuses a homeless state directory others can read).
func TestLoadPolicyCacheIsPrivate(t *testing.T) {
	dir := t.TempDir()
	state, pol := filepath.Join(dir, "state"), filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(pol, filepath.Join(state, "cache")); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(state, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want no access for others", p, fi.Mode())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
