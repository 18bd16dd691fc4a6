// Command undoctl is undosh's control CLI: it explains how undosh would
// protect a command, checks policy files, and (in later versions) walks
// the chain of checkpoints.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Getenv))
}
