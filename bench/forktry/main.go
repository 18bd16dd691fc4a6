// Command forktry is the `undoctl try -- CMD` path of the local fork
// engine, reduced to the engine: it makes a copy of the machine, runs
// CMD in it (stdin, stdout and stderr passed through), discards the copy
// and exits with CMD's status. Started as fork.InitName, it is the
// copy's init. bench/fork.sh times it.
//
//	forktry [-state DIR] [-ondisk] [-timing] -- CMD ARG...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/undosh/undosh/fork"
)

func main() {
	if filepath.Base(os.Args[0]) == fork.InitName {
		os.Exit(fork.Init())
	}
	os.Exit(run())
}

func run() int {
	state := flag.String("state", "", "the copies' directory (default "+fork.DefaultCopiesDir+")")
	onDisk := flag.Bool("ondisk", false, "keep the copy on disk, not on a tmpfs")
	timing := flag.Bool("timing", false, "print the time of each phase to stderr")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: forktry [-state DIR] [-ondisk] [-timing] -- CMD ARG...")
		return 2
	}
	t0 := time.Now()
	c, err := fork.Create(fork.Options{StateDir: *state, OnDisk: *onDisk})
	if err != nil {
		fmt.Fprintln(os.Stderr, "forktry: error:", err)
		return 1
	}
	t1 := time.Now()
	res, err := c.Run(context.Background(), fork.RunOptions{
		Argv:   flag.Args(),
		Env:    os.Environ(),
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	})
	t2 := time.Now()
	if derr := c.Discard(); derr != nil {
		fmt.Fprintln(os.Stderr, "forktry: error:", derr)
		return 1
	}
	t3 := time.Now()
	if err != nil {
		fmt.Fprintln(os.Stderr, "forktry: error:", err)
		return 1
	}
	if *timing {
		fmt.Fprintf(os.Stderr, "create %v run %v (setup %v) discard %v\n", t1.Sub(t0), t2.Sub(t1), res.Setup, t3.Sub(t2))
	}
	return res.ExitCode
}
