package checkpoint

import (
	"bytes"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// FuzzDecodeCache: no input makes the stat cache decoder panic, and what it
// accepts encodes back to the same bytes' meaning.
func FuzzDecodeCache(f *testing.F) {
	sc := &scan{started: 42, dirs: map[string]*dirScan{
		"":  {rel: "", n: 2, mode: 0o40700, files: []*entry{{rel: "a", st: fileStat{mode: 0o100644, size: 3, mtime: 1, ctime: 2, ino: 3}}}, subdirs: []string{"d"}},
		"d": {rel: "d", n: 1, mode: 0o42755, files: []*entry{{rel: "d/b", st: fileStat{mode: 0o120000, size: 1}}}},
	}}
	good := encodeScan(sc, plumbing.NewHash("1111111111111111111111111111111111111111"), emptyTree, plumbing.ZeroHash)
	f.Add(good)
	f.Add([]byte(cacheMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCache(data)
		if err != nil {
			return
		}
		// Re-encode through a scan and decode again: the same cache.
		again := &scan{started: c.at, dirs: map[string]*dirScan{}}
		for p, d := range c.dirs {
			again.dirs[p] = &dirScan{rel: p, tree: d.hash, n: int(d.n), mode: d.mode}
		}
		orphans := &dirScan{rel: "\x00orphans"}
		for p, e := range c.files {
			orphans.files = append(orphans.files, &entry{rel: p, st: e.fileStat, hash: e.hash})
		}
		again.dirs["\x00orphans"] = orphans
		c2, err := decodeCache(encodeScan(again, c.head, c.tree, c.left))
		if err != nil {
			t.Fatalf("re-encoded cache does not decode: %v", err)
		}
		if len(c2.files) != len(c.files) || c2.head != c.head || c2.at != c.at {
			t.Fatalf("round trip changed the cache: %d/%d files", len(c2.files), len(c.files))
		}
		for p, d := range c.dirs {
			if p != "\x00orphans" && c2.dirs[p] != d {
				t.Fatalf("round trip changed directory %q: %+v, want %+v", p, c2.dirs[p], d)
			}
		}
	})
}

// TestCacheCorrupt: a cache with any byte flipped is refused, never half
// trusted.
func TestCacheCorrupt(t *testing.T) {
	t.Parallel()
	sc := &scan{started: 7, dirs: map[string]*dirScan{"": {rel: "", n: 1, files: []*entry{{rel: "a", st: fileStat{mode: 0o100644, size: 1}}}}}}
	data := encodeScan(sc, plumbing.ZeroHash, emptyTree, plumbing.ZeroHash)
	if _, err := decodeCache(data); err != nil {
		t.Fatalf("a good cache does not decode: %v", err)
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		if _, err := decodeCache(bad); err == nil {
			t.Fatalf("a cache with byte %d flipped decodes", i)
		}
	}
	if _, err := decodeCache(data[:len(data)-1]); err == nil {
		t.Fatal("a truncated cache decodes")
	}
}
