package state

import "testing"

func TestDir(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
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
		{"home", "", env("HOME", "/h"), 1000, "/h/.local/state/undosh"},
		{"nothing", "", env(), 1000, ""},
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
