package state

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/undosh/undosh/policy"
)

func TestDir(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	home := t.TempDir()
	// Someone else made the one uid 54322 would get.
	theirs := filepath.Join(os.TempDir(), "undosh-54322")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(theirs) })
	tests := []struct {
		name   string
		flag   string
		getenv func(string) string
		uid    int
		want   string
	}{
		{"flag wins", "/s", env("UNDOSH_STATE_DIR", "/e", "HOME", "/h"), 0, "/s"},
		{"environment", "", env("UNDOSH_STATE_DIR", "/e", "HOME", "/h"), 1000, "/e"},
		{"root", "", env("HOME", "/root"), 0, "/var/lib/undosh"},
		{"xdg", "", env("XDG_STATE_HOME", "/x", "HOME", "/h"), 1000, "/x/undosh"},
		{"home", "", env("HOME", home), 1000, home + "/.local/state/undosh"},
		{"no home", "", env("HOME", "/nonexistent"), 54321, filepath.Join(os.TempDir(), "undosh-54321")},
		{"nothing", "", env(), 54321, filepath.Join(os.TempDir(), "undosh-54321")},
		{"another user's", "", env(), 54322, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Dir(tt.flag, tt.getenv, tt.uid); got != tt.want {
				t.Errorf("Dir = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHome(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		uid        int
		home, want string
	}{
		{0, "/root", "/var/lib/undosh"},
		{0, "", "/var/lib/undosh"},
		{1000, "/home/me", "/home/me/.local/state/undosh"},
		{1000, "", ""},
	} {
		if got := Home(tt.uid, tt.home); got != tt.want {
			t.Errorf("Home(%d, %q) = %q, want %q", tt.uid, tt.home, got, tt.want)
		}
	}
}

// The fork engine's directory is left out of every checkpoint, whatever
// the policy excludes, and the policy's own list is not changed.
func TestStoreOptions(t *testing.T) {
	t.Parallel()
	pol := &policy.Policy{Exclude: make([]string, 1, 4)}
	pol.Exclude[0] = "**/.cache/**"
	o := StoreOptions("/s", pol, "/h")
	if !slices.Equal(o.Exclude, []string{"**/.cache/**", "**/.undosh-fork/**"}) || o.StateDir != "/s" || o.Home != "/h" {
		t.Errorf("StoreOptions = %+v", o)
	}
	if len(pol.Exclude) != 1 {
		t.Errorf("the policy's excludes changed: %v", pol.Exclude)
	}
	StoreOptions("/s", pol, "/h")
	if got := pol.Exclude[:2][1]; got != "" {
		t.Errorf("StoreOptions wrote into the policy's array: %q", got)
	}
}

// TestHomeless: a homeless state directory of the user's own that others
// may read (as an older undosh made it) is made private and used; one
// that others may write is refused.
func TestHomeless(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	uid := os.Getuid()
	p := filepath.Join(os.TempDir(), "undosh-"+strconv.Itoa(uid))
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := homeless(uid); got != p {
		t.Errorf("readable by others: %q, want %q", got, p)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("after: %v, %v; want mode 0700", st.Mode(), err)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if got := homeless(uid); got != "" {
		t.Errorf("writable by others: %q, want it refused", got)
	}
}
