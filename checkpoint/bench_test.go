package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchTree makes a tree of n files of about 2 KiB in dirs of 10.
func benchTree(b *testing.B, n int) string {
	b.Helper()
	root := b.TempDir()
	body := strings.Repeat("func main() { return }\n", 90)
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("d%03d/e%02d", i/100, (i/10)%10))
		if i%10 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), []byte(body+fmt.Sprint(i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkCheckpointNoChange: a checkpoint of 10,000 files where nothing
// changed (compare with BenchmarkStatWalk, the floor).
func BenchmarkCheckpointNoChange(b *testing.B) {
	ws := benchTree(b, 10000)
	s := openStore(b, ws, Options{})
	if _, err := s.Checkpoint(""); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Checkpoint(""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointOneChange: a checkpoint of 10,000 files after one
// file changed.
func BenchmarkCheckpointOneChange(b *testing.B) {
	ws := benchTree(b, 10000)
	s := openStore(b, ws, Options{})
	if _, err := s.Checkpoint(""); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if err := os.WriteFile(filepath.Join(ws, "d000/e00/f0.go"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Checkpoint(""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatWalk is the floor: list and lstat every path, one walker.
func BenchmarkStatWalk(b *testing.B) {
	ws := benchTree(b, 10000)
	for b.Loop() {
		err := filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error { return err })
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchWatched times a checkpoint of a tree of n files after one file
// changed, which a watcher reports, and after nothing changed.
func benchWatched(b *testing.B, n int, change bool) {
	ws := benchTree(b, n)
	w := &oracleWatcher{}
	s := openStore(b, ws, Options{Watch: w})
	if _, err := s.Checkpoint(""); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		w.next = Changes{}
		if change {
			if err := os.WriteFile(filepath.Join(ws, "d000/e00/f0.go"), []byte(fmt.Sprint(i)), 0o644); err != nil {
				b.Fatal(err)
			}
			w.next.Paths = []Changed{{Rel: "d000/e00/f0.go"}}
		}
		r, err := s.Checkpoint("")
		if err != nil {
			b.Fatal(err)
		}
		if r.Walk != "" {
			b.Fatalf("walked: %s", r.Walk)
		}
	}
}

func BenchmarkWatchedOneChange(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchWatched(b, n, true) })
	}
}

func BenchmarkWatchedNoChange(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchWatched(b, n, false) })
	}
}
