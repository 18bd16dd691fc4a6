package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/klauspost/compress/zlib"
)

// packReader reads objects from the store's packs in place. undosh writes
// every object whole (pack.go, gc.go), so an object is a binary search of
// one index and one inflate. go-git, by contrast, decodes every index
// whole and hashes every object it reads, which costs a watched
// checkpoint of a large workspace O(objects) before it reads anything.
// Anything it cannot read (a delta, say) it asks go-git for.
// It opens the packs on its first read: many checkpoints read no object.
type packReader struct {
	storer.EncodedObjectStorer // go-git's, for everything else
	dir                        string
	names                      []string // newest first
	opened                     bool
	packs                      []*packFile
}

// packFile is one pack and its index (version 2), open.
type packFile struct {
	idx, pack *os.File
	fanout    [256]uint32
}

// readPacks lists the packs of the store for reading; callers must close
// the reader.
func (s *Store) readPacks() (*packReader, error) {
	dir := filepath.Join(s.git, "objects", "pack")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read packs: %w", err)
	}
	r := &packReader{EncodedObjectStorer: s.objects(), dir: dir}
	type named struct {
		name string
		mod  int64
	}
	var names []named
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok || strings.HasPrefix(base, ".tmp-") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		names = append(names, named{base, info.ModTime().UnixNano()})
	}
	// The newest first: what a checkpoint reads was mostly written lately.
	sort.Slice(names, func(i, j int) bool { return names[i].mod > names[j].mod })
	for _, n := range names {
		r.names = append(r.names, n.name)
	}
	return r, nil
}

// open opens the packs listed, once.
func (r *packReader) open() {
	if r.opened {
		return
	}
	r.opened = true
	for _, name := range r.names {
		p, err := openPackFile(filepath.Join(r.dir, name))
		if err != nil {
			continue // go-git, the fallback, reports it if it matters
		}
		r.packs = append(r.packs, p)
	}
}

func openPackFile(base string) (*packFile, error) {
	idx, err := os.Open(base + ".idx")
	if err != nil {
		return nil, err
	}
	pack, err := os.Open(base + ".pack")
	if err != nil {
		idx.Close()
		return nil, err
	}
	p := &packFile{idx: idx, pack: pack}
	var head [8 + 1024]byte
	if _, err := idx.ReadAt(head[:], 0); err != nil || !bytes.Equal(head[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		p.close()
		return nil, errors.New("not a version 2 pack index")
	}
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(head[8+4*i:])
	}
	return p, nil
}

func (p *packFile) close() {
	p.idx.Close()
	p.pack.Close()
}

// Close closes the packs.
func (r *packReader) Close() {
	for _, p := range r.packs {
		p.close()
	}
	r.packs = nil
}

// offset finds h in the pack's index.
func (p *packFile) offset(h plumbing.Hash) (int64, bool) {
	n := p.fanout[255]
	lo := uint32(0)
	if h[0] > 0 {
		lo = p.fanout[h[0]-1]
	}
	hi := p.fanout[h[0]]
	var name [20]byte
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := p.idx.ReadAt(name[:], int64(8+1024+20*mid)); err != nil {
			return 0, false
		}
		switch c := bytes.Compare(name[:], h[:]); {
		case c == 0:
			var b [8]byte
			at := int64(8+1024) + int64(n)*24 + int64(mid)*4 // past names and CRCs
			if _, err := p.idx.ReadAt(b[:4], at); err != nil {
				return 0, false
			}
			off := binary.BigEndian.Uint32(b[:4])
			if off&0x80000000 == 0 {
				return int64(off), true
			}
			at = int64(8+1024) + int64(n)*28 + int64(off&0x7fffffff)*8
			if _, err := p.idx.ReadAt(b[:], at); err != nil {
				return 0, false
			}
			return int64(binary.BigEndian.Uint64(b[:])), true
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return 0, false
}

var inflaters sync.Pool

// read reads the whole object at off, or says it cannot (a delta).
func (p *packFile) read(off int64) (plumbing.ObjectType, []byte, error) {
	var head [16]byte
	n, err := p.pack.ReadAt(head[:], off)
	if n == 0 {
		return 0, nil, fmt.Errorf("read pack: %w", err)
	}
	t := plumbing.ObjectType(head[0] >> 4 & 7)
	size := uint64(head[0] & 0x0f)
	i, shift := 0, 4
	for head[i]&0x80 != 0 {
		i++
		if i >= n || shift > 56 {
			return 0, nil, errors.New("bad object header")
		}
		size |= uint64(head[i]&0x7f) << shift
		shift += 7
	}
	switch t {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	default:
		return 0, nil, fmt.Errorf("object of type %d", t)
	}
	src := io.NewSectionReader(p.pack, off+int64(i)+1, 1<<62)
	var z io.ReadCloser
	if v := inflaters.Get(); v != nil {
		z = v.(io.ReadCloser)
		err = z.(zlib.Resetter).Reset(src, nil)
	} else {
		z, err = zlib.NewReader(src)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("inflate: %w", err)
	}
	defer inflaters.Put(z)
	data := make([]byte, size)
	if _, err := io.ReadFull(z, data); err != nil {
		return 0, nil, fmt.Errorf("inflate: %w", err)
	}
	return t, data, nil
}

// EncodedObject reads object h of type t (plumbing.AnyObject: any).
func (r *packReader) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	r.open()
	for _, p := range r.packs {
		off, ok := p.offset(h)
		if !ok {
			continue
		}
		ot, data, err := p.read(off)
		if err != nil {
			break // go-git reads what this cannot
		}
		if t != plumbing.AnyObject && ot != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return &packObject{h: h, t: ot, data: data}, nil
	}
	return r.EncodedObjectStorer.EncodedObject(t, h)
}

// packObject is an object read whole, whose id is known.
type packObject struct {
	h    plumbing.Hash
	t    plumbing.ObjectType
	data []byte
}

func (o *packObject) Hash() plumbing.Hash           { return o.h }
func (o *packObject) Type() plumbing.ObjectType     { return o.t }
func (o *packObject) SetType(t plumbing.ObjectType) { o.t = t }
func (o *packObject) Size() int64                   { return int64(len(o.data)) }
func (o *packObject) SetSize(int64)                 {}
func (o *packObject) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.data)), nil
}
func (o *packObject) Writer() (io.WriteCloser, error) { return nil, os.ErrPermission }
