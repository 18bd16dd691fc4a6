package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// fileStat is what the stat cache compares to decide that a file has not
// changed since it was hashed.
type fileStat struct {
	mode  uint32 // stat mode: type and permission bits
	size  int64
	mtime int64 // ns
	ctime int64 // ns
	ino   uint64
}

type cachedFile struct {
	fileStat
	hash plumbing.Hash
}

type cachedDir struct {
	hash plumbing.Hash // the tree
	n    uint32        // its number of entries, besides a permissions blob
	mode uint32        // the directory's stat mode, recorded in its parent's tree
}

// statCache maps paths to what they were when last hashed. It is thrown
// away, never trusted, when it does not decode.
type statCache struct {
	at    int64 // ns: when the walk that made it started
	head  plumbing.Hash
	tree  plumbing.Hash // head's tree, so that a checkpoint need not read it
	left  plumbing.Hash // head's list of left-out paths, or zero
	files map[string]cachedFile
	dirs  map[string]cachedDir
}

const cacheMagic = "undosh-statcache-5\n"

// crc32c is hardware-assisted: the checksum costs little next to the walk.
// castagnoli is made on first use: making it costs 0.16 ms, which every
// undosh start would pay as a package variable.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// racyWindow: a file whose mtime or ctime is this close to (or after) the
// start of the walk that cached it may have changed again within the same
// timestamp tick, so it is hashed again (git's racy-git rule). File times
// come from the kernel's coarse clock, which lags by at most one tick (10
// ms at HZ=100); twice that is safe.
const racyWindow = int64(20e6)

// lookup returns the cached hash of rel if st matches and the entry is not
// racy.
func (c *statCache) lookup(rel string, st fileStat) (plumbing.Hash, bool) {
	if c == nil {
		return plumbing.ZeroHash, false
	}
	e, ok := c.files[rel]
	if !ok || e.fileStat != st || st.mtime >= c.at-racyWindow || st.ctime >= c.at-racyWindow {
		return plumbing.ZeroHash, false
	}
	return e.hash, true
}

func loadCache(name string) *statCache {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	c, err := decodeCache(data)
	if err != nil {
		return nil // a cache that does not decode means "hash again"
	}
	return c
}

func decodeCache(data []byte) (*statCache, error) {
	bad := errors.New("corrupt stat cache")
	if len(data) < len(cacheMagic)+4+76 || !bytes.HasPrefix(data, []byte(cacheMagic)) {
		return nil, bad
	}
	body, sum := data[:len(data)-4], data[len(data)-4:]
	if crc32.Checksum(body, castagnoli()) != binary.LittleEndian.Uint32(sum) {
		return nil, bad
	}
	b := body[len(cacheMagic):]
	c := &statCache{}
	c.at = int64(binary.LittleEndian.Uint64(b))
	copy(c.head[:], b[8:28])
	copy(c.tree[:], b[28:48])
	copy(c.left[:], b[48:68])
	nf := binary.LittleEndian.Uint32(b[68:])
	nd := binary.LittleEndian.Uint32(b[72:])
	b = b[76:]
	c.files = make(map[string]cachedFile, nf)
	c.dirs = make(map[string]cachedDir, nd)
	str := func() (string, bool) {
		if len(b) < 2 {
			return "", false
		}
		n := int(binary.LittleEndian.Uint16(b))
		if len(b) < 2+n {
			return "", false
		}
		s := string(b[2 : 2+n])
		b = b[2+n:]
		return s, true
	}
	for range nf {
		p, ok := str()
		if !ok || len(b) < 4+8*4+20 {
			return nil, bad
		}
		var e cachedFile
		e.mode = binary.LittleEndian.Uint32(b)
		e.size = int64(binary.LittleEndian.Uint64(b[4:]))
		e.mtime = int64(binary.LittleEndian.Uint64(b[12:]))
		e.ctime = int64(binary.LittleEndian.Uint64(b[20:]))
		e.ino = binary.LittleEndian.Uint64(b[28:])
		copy(e.hash[:], b[36:56])
		b = b[56:]
		c.files[p] = e
	}
	for range nd {
		p, ok := str()
		if !ok || len(b) < 28 {
			return nil, bad
		}
		var d cachedDir
		copy(d.hash[:], b[:20])
		d.n = binary.LittleEndian.Uint32(b[20:])
		d.mode = binary.LittleEndian.Uint32(b[24:])
		b = b[28:]
		c.dirs[p] = d
	}
	if len(b) != 0 {
		return nil, bad
	}
	return c, nil
}

// encodeScan writes the cache of what a scan found, straight from the
// scan: building a map first would double the cost. Paths longer than
// 65535 bytes are not cached: they are hashed each time.
func encodeScan(sc *scan, head, tree, left plumbing.Hash) []byte {
	nf, nd := 0, 0
	for _, d := range sc.dirs {
		if d.skip || len(d.rel) > 0xffff {
			continue
		}
		nd++
		for _, e := range d.files {
			if len(e.rel) <= 0xffff {
				nf++
			}
		}
	}
	var b bytes.Buffer
	b.Grow(len(cacheMagic) + 80 + nf*(56+2+48) + nd*(28+2+32))
	b.WriteString(cacheMagic)
	var u [8]byte
	binary.LittleEndian.PutUint64(u[:], uint64(sc.started))
	b.Write(u[:])
	b.Write(head[:])
	b.Write(tree[:])
	b.Write(left[:])
	binary.LittleEndian.PutUint32(u[:4], uint32(nf))
	b.Write(u[:4])
	binary.LittleEndian.PutUint32(u[:4], uint32(nd))
	b.Write(u[:4])
	str := func(s string) {
		var l [2]byte
		binary.LittleEndian.PutUint16(l[:], uint16(len(s)))
		b.Write(l[:])
		b.WriteString(s)
	}
	var e [56]byte
	for _, d := range sc.dirs {
		if d.skip || len(d.rel) > 0xffff {
			continue
		}
		for _, f := range d.files {
			if len(f.rel) > 0xffff {
				continue
			}
			str(f.rel)
			binary.LittleEndian.PutUint32(e[0:], f.st.mode)
			binary.LittleEndian.PutUint64(e[4:], uint64(f.st.size))
			binary.LittleEndian.PutUint64(e[12:], uint64(f.st.mtime))
			binary.LittleEndian.PutUint64(e[20:], uint64(f.st.ctime))
			binary.LittleEndian.PutUint64(e[28:], f.st.ino)
			copy(e[36:], f.hash[:])
			b.Write(e[:])
		}
	}
	var dd [28]byte
	for _, d := range sc.dirs {
		if d.skip || len(d.rel) > 0xffff {
			continue
		}
		str(d.rel)
		copy(dd[:20], d.tree[:])
		binary.LittleEndian.PutUint32(dd[20:], uint32(d.n))
		binary.LittleEndian.PutUint32(dd[24:], d.mode)
		b.Write(dd[:])
	}
	binary.LittleEndian.PutUint32(u[:4], crc32.Checksum(b.Bytes(), castagnoli()))
	b.Write(u[:4])
	return b.Bytes()
}
