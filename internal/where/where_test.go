package where

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/undosh/undosh/hostlink"
)

func TestInCopy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cmdline string // "" for none
		want    bool
	}{
		{"the engine's init", InitName + "\x00", true},
		{"systemd", "/sbin/init\x00splash\x00", false},
		{"the name with arguments", InitName + "\x00x\x00", false},
		{"the name as a prefix", InitName + "-not\x00", false},
		{"no pid 1", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			proc := t.TempDir()
			if tt.cmdline != "" {
				if err := os.Mkdir(filepath.Join(proc, "1"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(proc, "1", "cmdline"), []byte(tt.cmdline), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			if got := InCopy(proc); got != tt.want {
				t.Errorf("InCopy = %v, want %v", got, tt.want)
			}
		})
	}
	// The machine the tests run on is no copy, unless they run in one.
	self, _ := os.ReadFile("/proc/1/cmdline")
	if got, want := InCopy(""), string(self) == InitName+"\x00"; got != want {
		t.Errorf("InCopy(\"\") = %v, want %v", got, want)
	}
}

func TestInHostCopy(t *testing.T) {
	t.Parallel()
	const copyRole = `{"generation":3,"role":"copy","token":"t"}`
	tests := []struct {
		name  string
		data  string // "" for no file
		mode  os.FileMode
		owner int // -1: whoever runs the test
		want  bool
	}{
		{"a copy, from root", copyRole, 0o600, -1, true},
		{"the primary", `{"generation":3,"role":"primary","token":"t"}`, 0o600, -1, false},
		{"restored", `{"generation":3,"role":"restored","token":"t"}`, 0o600, -1, false},
		{"anyone may write it", copyRole, 0o666, -1, false},
		{"the group may write it", copyRole, 0o620, -1, false},
		{"not root's", copyRole, 0o600, 65534, false},
		{"not JSON", "copy", 0o600, -1, false},
		{"no file", "", 0, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if os.Geteuid() != 0 && (tt.want || tt.owner >= 0) {
				t.Skip("only root can make a file root owns, or give one away")
			}
			dir := t.TempDir()
			if tt.data != "" {
				name := filepath.Join(dir, "host.json")
				if err := os.WriteFile(name, []byte(tt.data), tt.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(name, tt.mode); err != nil {
					t.Fatal(err)
				}
				if tt.owner >= 0 {
					if err := os.Chown(name, tt.owner, tt.owner); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := InHostCopy(dir); got != tt.want {
				t.Errorf("InHostCopy = %v, want %v", got, tt.want)
			}
		})
	}
	if InHostCopy("") {
		t.Error(`InHostCopy("") = true`)
	}
}

func TestParent(t *testing.T) {
	if got := Parent("", os.Getpid()); got != os.Getppid() {
		t.Errorf("Parent(self) = %d, want %d", got, os.Getppid())
	}
	// A name with spaces and parentheses: the fields follow the last ')'.
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "42", "stat"), []byte("42 (a) b (c) S 7 42 42 0"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Parent(proc, 42); got != 7 {
		t.Errorf("Parent of a process named \"a) b (c\" = %d, want 7", got)
	}
	if got := Parent(proc, 43); got != 0 {
		t.Errorf("Parent of a missing process = %d, want 0", got)
	}
}

// where reads the role from host.json itself, being a leaf: the name of
// a copy's role is hostlink's.
func TestRoleCopy(t *testing.T) {
	if roleCopy != string(hostlink.RoleCopy) {
		t.Errorf("roleCopy %q, hostlink.RoleCopy %q", roleCopy, hostlink.RoleCopy)
	}
}
