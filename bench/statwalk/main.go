// Command statwalk is the floor for any checkpoint that looks at every
// file: it lists every directory of a tree and lstats every entry, in
// one process, and prints the count.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func main() {
	n := 0
	err := filepath.WalkDir(os.Args[1], func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, err := os.Lstat(p); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "statwalk:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}
