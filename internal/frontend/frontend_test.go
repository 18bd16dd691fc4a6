package frontend

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuild builds the real front end into an executable ELF file.
func TestBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "undosh-fast")
	err := Build("../../front/undosh-fast.c", out)
	if errors.Is(err, ErrNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("built front end: %v, %v", fi, err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(b), "\x7fELF") {
		t.Errorf("not an ELF executable: %v", err)
	}
}

// TestBuildError: a source that does not compile is an error that names
// it and carries the compiler's message.
func TestBuildError(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "bad.c")
	if err := os.WriteFile(src, []byte("int main(void) { return undeclared; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bad")
	err := Build(src, out)
	if err == nil {
		t.Fatal("a source that does not compile built")
	}
	if errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), "undeclared") {
		t.Errorf("Build error %q: want the source's name and the compiler's message", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed build left an output")
	}
}

// TestNoCompiler: without cc on $PATH, Build says so with ErrNoCompiler.
func TestNoCompiler(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if err := Build("../../front/undosh-fast.c", filepath.Join(t.TempDir(), "x")); !errors.Is(err, ErrNoCompiler) {
		t.Errorf("Build without cc = %v, want ErrNoCompiler", err)
	}
}

// TestFlagsStatic: the last flag is -static, which Build drops to link
// dynamically where there is no static C library.
func TestFlagsStatic(t *testing.T) {
	if Flags[len(Flags)-1] != "-static" {
		t.Errorf("Flags = %q: Build's dynamic fallback drops the last flag, which must be -static", Flags)
	}
}
