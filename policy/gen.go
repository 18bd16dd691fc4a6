//go:build ignore

// gen.go compiles ../policy.yaml, the default policy, into default_gen.go,
// and where policy.yaml says each of its parts into default_pos_gen.go.
// Run it with
//
//	go generate ./policy
//
// after editing policy.yaml; TestGenerated fails while they are stale.
package main

import (
	"fmt"
	"go/format"
	"os"

	"github.com/undosh/undosh/policy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "gen.go: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	src, err := os.ReadFile("../policy.yaml")
	if err != nil {
		return err
	}
	code, pos, err := policy.GenerateDefault(src)
	if err != nil {
		return err
	}
	if err := write("default_gen.go", code); err != nil {
		return err
	}
	return write("default_pos_gen.go", pos)
}

func write(name string, src []byte) error {
	out, err := format.Source(src)
	if err != nil {
		return fmt.Errorf("%s does not format: %v", name, err)
	}
	return os.WriteFile(name, out, 0o644)
}
