// Package frontend builds undosh-fast, the C front end (front/undosh-fast.c),
// for the tests and tools that need one: the compiler's flags live here
// once, and the README's set-up command spells the same ones but -Wall.
package frontend

import (
	"errors"
	"fmt"
	"os/exec"
)

// ErrNoCompiler is returned by [Build] when there is no C compiler (cc).
var ErrNoCompiler = errors.New("no C compiler (cc) here: the undosh-fast front end cannot be built")

// Flags are the compiler's flags. Static: without the dynamic loader, the
// front end starts about 0.1 ms sooner, a few percent of bash's own start
// (bench/exec.sh).
var Flags = []string{"-O2", "-Wall", "-static"}

// Build compiles src (front/undosh-fast.c) into out. Where the C library
// has no static archive, it links dynamically instead.
func Build(src, out string) error {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return ErrNoCompiler
	}
	b, err := exec.Command(cc, append(Flags, "-o", out, src)...).CombinedOutput()
	if err == nil {
		return nil
	}
	dyn := Flags[:len(Flags)-1]
	if b2, err2 := exec.Command(cc, append(dyn, "-o", out, src)...).CombinedOutput(); err2 == nil {
		return nil
	} else {
		b = append(b, b2...)
	}
	return fmt.Errorf("cc %s: %v\n%s", src, err, b)
}
