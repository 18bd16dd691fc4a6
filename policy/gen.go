//go:build ignore

// gen.go compiles ../policy.yaml, the default policy, into default_gen.go.
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
	code, err := policy.GenerateDefault(src)
	if err != nil {
		return err
	}
	out, err := format.Source(code)
	if err != nil {
		return fmt.Errorf("default_gen.go does not format: %v", err)
	}
	return os.WriteFile("default_gen.go", out, 0o644)
}
