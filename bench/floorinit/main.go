// Command floorinit is bench/floor linked with every package undosh
// imports: it runs their init functions and then only replaces itself
// with /bin/bash. Between floor and floorinit lies the cost of the
// imports alone (package init, runtime start of a larger binary); between
// floorinit and undosh, the work undosh does before its exec.
package main

import (
	"os"
	"syscall"

	_ "github.com/undosh/undosh/internal/procstate"
	_ "github.com/undosh/undosh/shell"
)

func main() {
	err := syscall.Exec("/bin/bash", os.Args, os.Environ())
	os.Stderr.WriteString("floorinit: " + err.Error() + "\n")
	os.Exit(127)
}
