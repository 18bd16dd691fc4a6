package parser

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// snapshotSource is a shell snapshot of about 300 lines, in the shape
// the harnesses source before every command.
func snapshotSource(tag string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# snapshot %s\n", tag)
	for i := range 40 {
		fmt.Fprintf(&b, "f%d () \n{ \n    command grep -n \"$1\" \"${@:2}\"\n}\n", i)
	}
	for i := range 100 {
		fmt.Fprintf(&b, "declare -x V%d=\"/opt/%d\"\n", i, i)
	}
	b.WriteString("alias ll='ls -alF'\nshopt -s expand_aliases\n")
	return b.String()
}

// A cached parse gives the facts a fresh one gives, for sources read
// through ReadFile and for the top-level source alike.
func TestCacheSameFacts(t *testing.T) {
	t.Parallel()
	snap := snapshotSource("a")
	read := func(name string) ([]byte, error) { return []byte(snap), nil }
	cache := NewCache(8)
	for _, src := range []string{"source /snap.sh && f3 x y; ll", snap + "\nf1 a b; rm -rf out"} {
		want := Parse(src, Options{Cwd: "/w", ReadFile: read})
		for range 3 {
			got := Parse(src, Options{Cwd: "/w", ReadFile: read, Cache: cache})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cached facts of %.40q (-fresh +cached):\n%s", src, diff)
			}
		}
	}
	if h := cache.Hits(); h != 4 {
		t.Errorf("%d hits, want 4 (the snapshot read twice more, the long source twice more)", h)
	}
}

// The cache keeps only the newest n sources, and none below MinCached.
func TestCacheBound(t *testing.T) {
	t.Parallel()
	cache := NewCache(2)
	a, b, c := snapshotSource("a"), snapshotSource("b"), snapshotSource("c")
	for _, src := range []string{a, b, c, b, a} {
		Parse(src, Options{Cache: cache})
	}
	if h := cache.Hits(); h != 1 { // b; a was dropped for c
		t.Errorf("%d hits, want 1", h)
	}
	Parse("ls", Options{Cache: cache})
	Parse("ls", Options{Cache: cache})
	if h := cache.Hits(); h != 1 {
		t.Errorf("a short source was cached: %d hits", h)
	}
}

// Concurrent Parse calls share entries (the race detector checks that a
// walk never writes to a shared parse).
func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	cache := NewCache(4)
	src := snapshotSource("a") + "\nf1 x; ll; echo done > out"
	want := Parse(src, Options{Cwd: "/w"})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := Parse(src, Options{Cwd: "/w", Cache: cache}); !cmp.Equal(want, got) {
				t.Error("a concurrent cached parse gave other facts")
			}
		})
	}
	wg.Wait()
}
