package shell

import (
	"os"
	"path/filepath"
	"testing"
)

func TestShellDir(t *testing.T) {
	t.Parallel()
	dir, other := t.TempDir(), t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, pwd, want string }{
		{"link", dir, link, link},
		{"same", dir, dir, dir},
		{"another directory", dir, other, dir},
		{"relative", dir, "link", dir},
		{"unset", dir, "", dir},
		{"missing", dir, filepath.Join(other, "gone"), dir},
		{"no directory", "", link, ""},
	} {
		if got := shellDir(tc.dir, map[string]string{"PWD": tc.pwd}); got != tc.want {
			t.Errorf("%s: shellDir(%q) with PWD=%q = %q, want %q", tc.name, tc.dir, tc.pwd, got, tc.want)
		}
	}
}
