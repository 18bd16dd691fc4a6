package checkpoint

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// GCOptions say what gc keeps. The zero value keeps a day.
type GCOptions struct {
	// MaxAge drops checkpoints older than this (the newest is always
	// kept). Zero means 24 hours.
	MaxAge time.Duration
	// MaxBytes, when positive, drops the oldest checkpoints until the
	// objects the rest need fit.
	MaxBytes int64
}

// GCResult says what gc did.
type GCResult struct {
	Kept        int   `json:"kept"`
	Dropped     int   `json:"dropped"`
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
}

// packInfo is one pack and the size of each object in it.
type packInfo struct {
	name  string // pack-<id>, without extension
	size  int64  // .pack + .idx bytes
	sizes map[plumbing.Hash]int64
	// entries are its objects by offset, as stored.
	entries []packEntry
}

// packEntry is one object of a pack as it is stored: its header and
// compressed data take size bytes from offset.
type packEntry struct {
	hash   plumbing.Hash
	offset int64
	size   int64
	crc    uint32
}

// GC drops old checkpoints and the objects nothing needs any more. It
// rewrites one pack at a time, so the extra disk it uses while it runs is
// at most the live part of one pack.
func (s *Store) GC(o GCOptions) (GCResult, error) {
	if o.MaxAge == 0 {
		o.MaxAge = 24 * time.Hour
	}
	var res GCResult
	err := s.locked(true, func() error {
		packs, err := s.packs()
		if err != nil {
			return err
		}
		for _, p := range packs {
			res.BytesBefore += p.size
		}
		head, err := s.head()
		if err != nil || head.IsZero() {
			res.BytesAfter = res.BytesBefore
			return err
		}
		st := s.objects()
		chain, err := s.chain(st, head)
		if err != nil {
			return err
		}
		cutoff := now().Add(-o.MaxAge)
		keep := 1
		for keep < len(chain) && chain[keep].Committer.When.After(cutoff) {
			keep++
		}
		live, err := s.reachable(st, chain[:keep])
		if err != nil {
			return err
		}
		if o.MaxBytes > 0 {
			for keep > 1 && liveBytes(packs, live) > o.MaxBytes {
				keep--
				if live, err = s.reachable(st, chain[:keep]); err != nil {
					return err
				}
			}
		}
		res.Kept, res.Dropped = keep, len(chain)-keep
		if res.Dropped > 0 {
			if err := writeFileAtomic(filepath.Join(s.dir, "boundary"), []byte(chain[keep-1].Hash.String()+"\n")); err != nil {
				return err
			}
		}
		// The stat cache may name objects of an older checkpoint (after a
		// restore): keep those too.
		if c := loadCache(s.cachePath()); c != nil {
			for _, f := range c.files {
				live[f.hash] = true
			}
			for _, d := range c.dirs {
				if live[d.hash] {
					continue
				}
				live[d.hash] = true
				// No file of the cache names a tree's permissions blob.
				if t, err := object.GetTree(st, d.hash); err == nil {
					for _, e := range t.Entries {
						if e.Name == permsName {
							live[e.Hash] = true
						}
					}
				}
			}
		}
		if err := s.repack(packs, live); err != nil {
			return err
		}
		after, err := s.packs()
		if err != nil {
			return err
		}
		for _, p := range after {
			res.BytesAfter += p.size
		}
		return nil
	})
	return res, err
}

func liveBytes(packs []packInfo, live map[plumbing.Hash]bool) int64 {
	var n int64
	for _, p := range packs {
		for h, sz := range p.sizes {
			if live[h] {
				n += sz
			}
		}
	}
	return n
}

// chain lists the checkpoints from h back to the boundary.
func (s *Store) chain(st storer.EncodedObjectStorer, h plumbing.Hash) ([]*object.Commit, error) {
	stop := s.boundary()
	var out []*object.Commit
	for !h.IsZero() {
		c, err := object.GetCommit(st, h)
		if err != nil {
			return nil, fmt.Errorf("read checkpoint %s: %w", short(h), err)
		}
		out = append(out, c)
		if h == stop || len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return out, nil
}

// reachable returns every object the commits need.
func (s *Store) reachable(st storer.EncodedObjectStorer, commits []*object.Commit) (map[plumbing.Hash]bool, error) {
	live := map[plumbing.Hash]bool{emptyTree: true}
	var walkTree func(h plumbing.Hash) error
	walkTree = func(h plumbing.Hash) error {
		if live[h] {
			return nil
		}
		live[h] = true
		t, err := object.GetTree(st, h)
		if err != nil {
			return fmt.Errorf("read tree %s: %w", short(h), err)
		}
		for _, e := range t.Entries {
			if e.Mode.IsFile() {
				live[e.Hash] = true
				continue
			}
			if err := walkTree(e.Hash); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range commits {
		live[c.Hash] = true
		if h := leftListOf(c); !h.IsZero() {
			live[h] = true
		}
		if err := walkTree(c.TreeHash); err != nil {
			return nil, err
		}
	}
	return live, nil
}

// packs lists the store's packs with the size of each object.
func (s *Store) packs() ([]packInfo, error) {
	dir := filepath.Join(s.git, "objects", "pack")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list packs: %w", err)
	}
	var out []packInfo
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		pi, err := readPackInfo(dir, base)
		if err != nil {
			return nil, err
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func readPackInfo(dir, base string) (packInfo, error) {
	pi := packInfo{name: base, sizes: map[plumbing.Hash]int64{}}
	packFI, err := os.Stat(filepath.Join(dir, base+".pack"))
	if err != nil {
		return pi, fmt.Errorf("pack %s: %w", base, err)
	}
	idxData, err := os.ReadFile(filepath.Join(dir, base+".idx"))
	if err != nil {
		return pi, fmt.Errorf("pack %s has no index: %w", base, err)
	}
	pi.size = packFI.Size() + int64(len(idxData))
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bytes.NewReader(idxData)).Decode(idx); err != nil {
		return pi, fmt.Errorf("pack %s: index does not decode: %w", base, err)
	}
	entries, err := idx.EntriesByOffset()
	if err != nil {
		return pi, fmt.Errorf("pack %s: %w", base, err)
	}
	var list []*idxfile.Entry
	for {
		e, err := entries.Next()
		if err != nil {
			break
		}
		list = append(list, e)
	}
	end := packFI.Size() - sha1.Size
	pi.entries = make([]packEntry, len(list))
	for i := len(list) - 1; i >= 0; i-- {
		pi.sizes[list[i].Hash] = end - int64(list[i].Offset)
		pi.entries[i] = packEntry{hash: list[i].Hash, offset: int64(list[i].Offset), size: end - int64(list[i].Offset), crc: list[i].CRC32}
		end = int64(list[i].Offset)
	}
	return pi, nil
}

// repack rewrites, one at a time, each pack that holds dead objects: a
// pack with nothing live is deleted, a mixed one is replaced by a pack of
// its live objects. Small packs are merged, a batch at a time.
func (s *Store) repack(packs []packInfo, live map[plumbing.Hash]bool) error {
	dir := filepath.Join(s.git, "objects", "pack")
	var small []packInfo
	var smallBytes int64
	flush := func() error {
		if len(small) < 2 {
			small, smallBytes = nil, 0
			return nil
		}
		if err := s.rewrite(small, live); err != nil {
			return err
		}
		small, smallBytes = nil, 0
		return nil
	}
	for _, p := range packs {
		n := 0
		for h := range p.sizes {
			if live[h] {
				n++
			}
		}
		switch {
		case n == 0:
			if err := removePack(dir, p.name); err != nil {
				return err
			}
		case n < len(p.sizes):
			if err := s.rewrite([]packInfo{p}, live); err != nil {
				return err
			}
		case p.size < 1<<20:
			small = append(small, p)
			smallBytes += p.size
			if smallBytes > 64<<20 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// rewrite copies the live objects of some packs into one new pack, then
// removes the old ones. It copies each object as it is stored, without
// inflating it: undosh writes every object whole, and an object stored as
// a delta (which would name another by its offset) stops the rewrite
// before anything is removed.
func (s *Store) rewrite(old []packInfo, live map[plumbing.Hash]bool) error {
	dir := filepath.Join(s.git, "objects", "pack")
	out, err := newPackSink(dir)
	if err != nil {
		return err
	}
	for _, p := range old {
		if err := copyLive(out, filepath.Join(dir, p.name+".pack"), p.entries, live); err != nil {
			out.abort()
			return fmt.Errorf("rewrite %s: %w", p.name, err)
		}
	}
	name, err := out.finish()
	if err != nil {
		return err
	}
	for _, p := range old {
		if p.name == name {
			continue // the same objects: the same pack
		}
		if err := removePack(dir, p.name); err != nil {
			return err
		}
	}
	return nil
}

// copyLive copies the live objects among entries of the pack file name
// into out, as stored.
func copyLive(out *packSink, name string, entries []packEntry, live map[plumbing.Hash]bool) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, e := range entries {
		if !live[e.hash] {
			continue
		}
		raw := make([]byte, e.size)
		if _, err := f.ReadAt(raw, e.offset); err != nil {
			return fmt.Errorf("read object %s: %w", short(e.hash), err)
		}
		switch plumbing.ObjectType(raw[0] >> 4 & 7) {
		case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
		default:
			return fmt.Errorf("object %s is stored as a delta", short(e.hash))
		}
		if err := out.addRaw(e.hash, raw, e.crc); err != nil {
			return err
		}
	}
	return nil
}

// maxPacks is how many packs a store keeps before it merges the small
// ones: every checkpoint writes one, and every read looks in each.
const maxPacks = 32

// smallPack is the size under which a pack is merged with the others.
const smallPack = 1 << 20

// consolidate merges the small packs into one when there are more than
// maxPacks, under the exclusive lock. It only saves time: on any error
// the packs stay as they are, every object in at least one of them.
func (s *Store) consolidate() error {
	dir := filepath.Join(s.git, "objects", "pack")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var small []packInfo
	packs := 0
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		packs++
		if fi, err := e.Info(); err != nil || fi.Size() >= smallPack {
			continue
		}
		pi, err := readPackInfo(dir, base)
		if err != nil {
			return err
		}
		small = append(small, pi)
	}
	if packs <= maxPacks || len(small) < 2 {
		return nil
	}
	live := map[plumbing.Hash]bool{}
	for _, p := range small {
		for h := range p.sizes {
			live[h] = true
		}
	}
	return s.rewrite(small, live)
}

// removePack deletes a pack: the pack first, so that an index is never
// left to name a missing pack.
func removePack(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name+".pack")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove pack: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, name+".idx")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove pack index: %w", err)
	}
	return nil
}
