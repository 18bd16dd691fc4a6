package service

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSyncTree copies $UNDOSH_BENCH_TREE (a directory) anew each
// round; cp -a of it is the baseline bench/service.sh prints beside it.
func BenchmarkSyncTree(b *testing.B) {
	src := os.Getenv("UNDOSH_BENCH_TREE")
	if src == "" {
		b.Skip("UNDOSH_BENCH_TREE names no tree to copy")
	}
	dir := b.TempDir()
	for i := 0; b.Loop(); i++ {
		dst := filepath.Join(dir, "copy")
		if err := newSyncer().syncTree(src, dst, syncOpts{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(dst)
		b.StartTimer()
	}
}
