// Command floor is the floor for any exec-based proxy of bash: it does
// nothing but replace itself with /bin/bash, passing its own argv and
// environment, as undosh does for a read-only step.
package main

import (
	"os"
	"syscall"
)

func main() {
	err := syscall.Exec("/bin/bash", os.Args, os.Environ())
	os.Stderr.WriteString("floor: " + err.Error() + "\n")
	os.Exit(127)
}
