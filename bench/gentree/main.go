// Command gentree writes a deterministic source-like tree of N files for
// the checkpoint benchmarks: word-like text of 0.25–12 KiB (median about
// 2 KiB), 4–20 files per directory, filled breadth first.
//
//	gentree -n 10000 DIR
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

var words = strings.Fields(`func return package import type struct interface map chan go defer
if else for range switch case default break continue var const nil true false error string
int byte rune len cap make new append copy delete panic recover select fallthrough goto the
of and to in is that for it with as was on be at by this had not are but from or have an they
which one you were her all she there would their we him been has when who will more no if out`)

func main() {
	n := flag.Int("n", 10000, "number of files")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gentree [-n N] [-seed S] DIR")
		os.Exit(2)
	}
	root := flag.Arg(0)
	r := rand.New(rand.NewPCG(*seed, 2))
	queue := []string{root}
	made := 0
	for made < *n {
		dir := queue[0]
		queue = queue[1:]
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "gentree:", err)
			os.Exit(1)
		}
		files := 4 + r.IntN(17)
		for i := 0; i < files && made < *n; i++ {
			size := 256 + int(float64(12<<10-256)*r.Float64()*r.Float64())
			var b strings.Builder
			for b.Len() < size {
				b.WriteString(words[r.IntN(len(words))])
				if r.IntN(12) == 0 {
					b.WriteByte('\n')
				} else {
					b.WriteByte(' ')
				}
			}
			name := filepath.Join(dir, fmt.Sprintf("f%04d.go", i))
			if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "gentree:", err)
				os.Exit(1)
			}
			made++
		}
		for i := range 2 + r.IntN(3) {
			queue = append(queue, filepath.Join(dir, fmt.Sprintf("d%02d", i)))
		}
	}
}
