package parser

import (
	"fmt"
	"strings"
	"testing"
)

// Loops nested deeper than maxProbes are not probed (bash's own test
// suite nests 200): the walk ends, and the innermost body's variable is
// unknown, not a stale value.
func TestDeepLoops(t *testing.T) {
	var b strings.Builder
	b.WriteString("x=/tmp/a\n")
	for i := range 200 {
		fmt.Fprintf(&b, "for v%d in a b; do :\n", i)
	}
	b.WriteString("rm -rf \"$x\"; x=/\n")
	for range 200 {
		b.WriteString("done\n")
	}
	f := Parse(b.String(), Options{})
	var rm *Command
	for i := range f.Commands {
		if len(f.Commands[i].Argv) > 0 && f.Commands[i].Argv[0].Value == "rm" {
			rm = &f.Commands[i]
		}
	}
	if rm == nil || len(rm.Argv) < 3 || !rm.Argv[2].Dynamic {
		t.Errorf("rm in the innermost loop: %+v, want its path unknown (a later iteration sees x=/)", rm)
	}
}
