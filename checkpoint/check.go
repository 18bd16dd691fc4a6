package checkpoint

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// CheckResult says what check found.
type CheckResult struct {
	Checkpoints int      `json:"checkpoints"`
	Objects     int      `json:"objects"`
	Packs       int      `json:"packs"`
	Problems    []string `json:"problems"`
	// Notes are findings that lose nothing, such as a stat cache that
	// will be rebuilt.
	Notes []string `json:"notes"`
}

// Check verifies the store: every pack's checksum and index, the
// checkpoint ref, and that every object each checkpoint needs is there
// and decodes. It returns a result listing the problems; an error means
// the check itself could not run.
func (s *Store) Check() (CheckResult, error) {
	res := CheckResult{Problems: []string{}, Notes: []string{}}
	err := s.locked(false, func() error {
		dir := filepath.Join(s.git, "objects", "pack")
		packs, err := s.packs()
		if err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
		res.Packs = len(packs)
		if orphans, _ := filepath.Glob(filepath.Join(dir, "*.orphan")); len(orphans) > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d packs had no index and were set aside as *.orphan in %s", len(orphans), dir))
		}
		for _, p := range packs {
			if err := verifyPack(filepath.Join(dir, p.name+".pack")); err != nil {
				res.Problems = append(res.Problems, err.Error())
			}
		}
		head, err := s.head()
		if err != nil {
			res.Problems = append(res.Problems, err.Error())
			return nil
		}
		if head.IsZero() {
			return nil
		}
		st := s.objects()
		chain, err := s.chain(st, head)
		if err != nil {
			res.Problems = append(res.Problems, err.Error())
			return nil
		}
		res.Checkpoints = len(chain)
		live, err := s.reachable(st, chain)
		if err != nil {
			res.Problems = append(res.Problems, err.Error())
			return nil
		}
		res.Objects = len(live)
		for h := range live {
			if h == emptyTree {
				continue
			}
			obj, err := st.EncodedObject(plumbing.AnyObject, h)
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("object %s is missing: %v", short(h), err))
				continue
			}
			data, err := readAll(obj)
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("object %s does not decode: %v", short(h), err))
				continue
			}
			if got := objectHash(obj.Type(), data); got != h {
				res.Problems = append(res.Problems, fmt.Sprintf("object %s holds content of %s", short(h), short(got)))
			}
		}
		if data, err := os.ReadFile(s.cachePath()); err == nil {
			if _, err := decodeCache(data); err != nil {
				res.Notes = append(res.Notes, "the stat cache is corrupt: the next checkpoint hashes every file again")
			}
		}
		return nil
	})
	return res, err
}

// verifyPack checks a pack's trailing checksum.
func verifyPack(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("pack %s: %w", filepath.Base(name), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("pack %s: %w", filepath.Base(name), err)
	}
	if fi.Size() < 12+sha1.Size {
		return fmt.Errorf("pack %s is truncated (%d bytes)", filepath.Base(name), fi.Size())
	}
	h := sha1.New()
	if _, err := io.CopyN(h, f, fi.Size()-sha1.Size); err != nil {
		return fmt.Errorf("pack %s: %w", filepath.Base(name), err)
	}
	sum := make([]byte, sha1.Size)
	if _, err := io.ReadFull(f, sum); err != nil {
		return fmt.Errorf("pack %s: %w", filepath.Base(name), err)
	}
	if !bytes.Equal(sum, h.Sum(nil)) {
		return fmt.Errorf("pack %s: checksum mismatch", filepath.Base(name))
	}
	return nil
}

// Status describes a store.
type Status struct {
	Workspace   string    `json:"workspace"`
	Store       string    `json:"store"`
	Bytes       int64     `json:"bytes"`
	Checkpoints int       `json:"checkpoints"`
	Newest      string    `json:"newest,omitempty"`
	LeftOut     []LeftOut `json:"left_out"` // as of the newest checkpoint
}

// Status reports the workspace, the store's size, the number of
// checkpoints and what the newest one left out.
func (s *Store) Status() (Status, error) {
	st := Status{Workspace: s.root, Store: s.dir, LeftOut: []LeftOut{}}
	err := s.locked(false, func() error {
		_ = filepath.Walk(s.dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				st.Bytes += fi.Size()
			}
			return nil
		})
		head, err := s.head()
		if err != nil || head.IsZero() {
			return err
		}
		st.Newest = head.String()
		chain, err := s.chain(s.objects(), head)
		if err != nil {
			return err
		}
		st.Checkpoints = len(chain)
		if data, err := os.ReadFile(filepath.Join(s.dir, "left-out.json")); err == nil {
			_ = json.Unmarshal(data, &st.LeftOut)
		}
		return nil
	})
	return st, err
}
