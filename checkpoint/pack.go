package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/klauspost/compress/zlib"

	"github.com/undosh/undosh/internal/atomicfile"
)

// objectHash computes a git object id without go-git's collision-detecting
// SHA-1, which is several times slower.
func objectHash(t plumbing.ObjectType, data []byte) plumbing.Hash {
	h := sha1.New()
	h.Write([]byte(t.String()))
	h.Write([]byte{' '})
	h.Write([]byte(strconv.Itoa(len(data))))
	h.Write([]byte{0})
	h.Write(data)
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}

// sink receives new objects. A packSink writes them; a nil sink (for
// dry runs) only hashes.
type sink interface {
	add(t plumbing.ObjectType, h plumbing.Hash, data []byte) error
}

// packSink writes one pack file: objects are compressed in parallel by
// callers and appended under a mutex.
type packSink struct {
	mu      sync.Mutex
	f       *os.File
	w       *bufio.Writer
	off     int64
	idx     idxfile.Writer
	count   uint32
	seen    map[plumbing.Hash]bool
	dir     string
	zpool   sync.Pool
	written int64 // compressed bytes
}

func newPackSink(dir string) (*packSink, error) {
	f, err := os.CreateTemp(dir, ".tmp-pack-")
	if err != nil {
		return nil, fmt.Errorf("create pack: %w", err)
	}
	p := &packSink{f: f, w: bufio.NewWriterSize(f, 256<<10), seen: map[plumbing.Hash]bool{}, dir: dir}
	p.zpool.New = func() any {
		z, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
		return z
	}
	// The count is patched in when the pack is finished.
	if _, err := p.w.Write([]byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, 0, 0, 0, 0}); err != nil {
		p.abort()
		return nil, fmt.Errorf("write pack: %w", err)
	}
	p.off = 12
	return p, nil
}

// add compresses data and appends it to the pack, once per object id.
func (p *packSink) add(t plumbing.ObjectType, h plumbing.Hash, data []byte) error {
	p.mu.Lock()
	dup := p.seen[h]
	p.seen[h] = true
	p.mu.Unlock()
	if dup {
		return nil
	}
	var buf bytes.Buffer
	// Object header: type and size, 7 bits at a time.
	size := uint64(len(data))
	b := byte(t)<<4 | byte(size&0x0f)
	size >>= 4
	for size != 0 {
		buf.WriteByte(b | 0x80)
		b = byte(size & 0x7f)
		size >>= 7
	}
	buf.WriteByte(b)
	z := p.zpool.Get().(*zlib.Writer)
	z.Reset(&buf)
	if _, err := z.Write(data); err != nil {
		return fmt.Errorf("compress object: %w", err)
	}
	if err := z.Close(); err != nil {
		return fmt.Errorf("compress object: %w", err)
	}
	p.zpool.Put(z)
	crc := crc32.ChecksumIEEE(buf.Bytes())
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	p.idx.Add(h, uint64(p.off), crc)
	p.off += int64(buf.Len())
	p.written += int64(buf.Len())
	p.count++
	return nil
}

// addRaw appends an object as another pack stores it (header and
// compressed data), once per object id.
func (p *packSink) addRaw(h plumbing.Hash, raw []byte, crc uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[h] {
		return nil
	}
	p.seen[h] = true
	if _, err := p.w.Write(raw); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	p.idx.Add(h, uint64(p.off), crc)
	p.off += int64(len(raw))
	p.written += int64(len(raw))
	p.count++
	return nil
}

// finish completes the pack and its index and moves both into place:
// index first, then pack, each durably. It returns the pack's name, or ""
// when the pack held nothing.
func (p *packSink) finish() (string, error) {
	if p.count == 0 {
		p.abort()
		return "", nil
	}
	if err := p.w.Flush(); err != nil {
		p.abort()
		return "", fmt.Errorf("write pack: %w", err)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], p.count)
	if _, err := p.f.WriteAt(n[:], 8); err != nil {
		p.abort()
		return "", fmt.Errorf("write pack: %w", err)
	}
	// The trailer is the SHA-1 of everything before it.
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		p.abort()
		return "", fmt.Errorf("write pack: %w", err)
	}
	h := sha1.New()
	if _, err := io.Copy(h, p.f); err != nil {
		p.abort()
		return "", fmt.Errorf("read back pack: %w", err)
	}
	sum := h.Sum(nil)
	if _, err := p.f.Write(sum); err != nil {
		p.abort()
		return "", fmt.Errorf("write pack: %w", err)
	}
	if err := p.f.Sync(); err != nil {
		p.abort()
		return "", fmt.Errorf("sync pack: %w", err)
	}
	if err := p.f.Close(); err != nil {
		os.Remove(p.f.Name())
		return "", fmt.Errorf("write pack: %w", err)
	}
	var packHash plumbing.Hash
	copy(packHash[:], sum)
	name := "pack-" + packHash.String()
	// The index goes in first: go-git lists packs by their .pack file
	// and cannot read one whose index is missing.
	p.idx.OnFooter(packHash)
	mi, err := p.idx.Index()
	if err != nil {
		os.Remove(p.f.Name())
		return "", fmt.Errorf("index pack: %w", err)
	}
	var ib bytes.Buffer
	if _, err := idxfile.NewEncoder(&ib).Encode(mi); err != nil {
		os.Remove(p.f.Name())
		return "", fmt.Errorf("index pack: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(p.dir, name+".idx"), ib.Bytes()); err != nil {
		os.Remove(p.f.Name())
		return "", err
	}
	if err := os.Rename(p.f.Name(), filepath.Join(p.dir, name+".pack")); err != nil {
		os.Remove(p.f.Name())
		return "", fmt.Errorf("install pack: %w", err)
	}
	if err := atomicfile.SyncDir(p.dir); err != nil {
		return "", err
	}
	return name, nil
}

// abort drops an unfinished pack.
func (p *packSink) abort() {
	p.f.Close()
	os.Remove(p.f.Name())
}
