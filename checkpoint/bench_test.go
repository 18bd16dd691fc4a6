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
