package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/sys/unix"
)

// node is one tree entry: a file, a symlink or a directory.
type node struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// Change is one path that differs between two states.
type Change struct {
	Path string `json:"path"`
	// Kind is "added", "removed", "modified" (content), "mode" (the
	// executable bit), "type" (file, symlink or directory swapped),
	// "dir added" or "dir removed".
	Kind string `json:"kind"`
	old  node
	new  node
}

// side lists the entries of one directory of a state.
type side interface {
	entries(rel string, tree plumbing.Hash) (map[string]node, error)
}

// storeSide reads trees from the shadow repository.
type storeSide struct{ st storer.EncodedObjectStorer }

func (s storeSide) entries(rel string, tree plumbing.Hash) (map[string]node, error) {
	out := map[string]node{}
	if tree.IsZero() || tree == emptyTree {
		return out, nil
	}
	t, err := object.GetTree(s.st, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree %s of %q: %w", short(tree), rel, err)
	}
	for _, e := range t.Entries {
		out[unescape(e.Name)] = node{mode: e.Mode, hash: e.Hash}
	}
	return out, nil
}

// scanSide reads directories from a walk of the workspace.
type scanSide struct{ sc *scan }

func (s scanSide) entries(rel string, tree plumbing.Hash) (map[string]node, error) {
	out := map[string]node{}
	if tree.IsZero() {
		return out, nil
	}
	d, ok := s.sc.dirs[rel]
	if !ok {
		return out, nil
	}
	for _, e := range d.files {
		out[e.name] = node{mode: e.mode, hash: e.hash}
	}
	for _, name := range d.subdirs {
		sub, ok := s.sc.dirs[join(rel, name)]
		if ok && !sub.skip {
			out[name] = node{mode: filemode.Dir, hash: sub.tree}
		}
	}
	return out, nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// diff lists what differs between the directory rel of a (tree ta) and of
// b (tree tb), going only into subtrees whose ids differ.
func diff(rel string, ta, tb plumbing.Hash, a, b side, out *[]Change) error {
	if ta == tb {
		return nil
	}
	ea, err := a.entries(rel, ta)
	if err != nil {
		return err
	}
	eb, err := b.entries(rel, tb)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ea)+len(eb))
	for n := range ea {
		names = append(names, n)
	}
	for n := range eb {
		if _, ok := ea[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		p := join(rel, name)
		x, inA := ea[name]
		y, inB := eb[name]
		aDir, bDir := inA && x.mode == filemode.Dir, inB && y.mode == filemode.Dir
		switch {
		case aDir && bDir:
			if err := diff(p, x.hash, y.hash, a, b, out); err != nil {
				return err
			}
		case aDir:
			if err := diff(p, x.hash, plumbing.ZeroHash, a, b, out); err != nil {
				return err
			}
			*out = append(*out, Change{Path: p, Kind: "dir removed", old: x})
			if inB {
				*out = append(*out, Change{Path: p, Kind: "type", new: y})
			}
		case bDir:
			if inA {
				*out = append(*out, Change{Path: p, Kind: "type", old: x})
			}
			*out = append(*out, Change{Path: p, Kind: "dir added", new: y})
			if err := diff(p, plumbing.ZeroHash, y.hash, a, b, out); err != nil {
				return err
			}
		case !inB:
			*out = append(*out, Change{Path: p, Kind: "removed", old: x})
		case !inA:
			*out = append(*out, Change{Path: p, Kind: "added", new: y})
		case (x.mode == filemode.Symlink) != (y.mode == filemode.Symlink):
			*out = append(*out, Change{Path: p, Kind: "type", old: x, new: y})
		case x.hash != y.hash:
			*out = append(*out, Change{Path: p, Kind: "modified", old: x, new: y})
		case x.mode != y.mode:
			*out = append(*out, Change{Path: p, Kind: "mode", old: x, new: y})
		}
	}
	return nil
}

// Diff lists the paths that differ from checkpoint a to checkpoint b, or
// to the workspace as it is now when b is "".
func (s *Store) Diff(a, b string) ([]Change, error) {
	var out []Change
	err := s.locked(false, func() error {
		st := s.objects()
		ha, err := s.resolve(st, a)
		if err != nil {
			return err
		}
		ca, err := object.GetCommit(st, ha)
		if err != nil {
			return fmt.Errorf("read checkpoint %s: %w", short(ha), err)
		}
		if b != "" {
			hb, err := s.resolve(st, b)
			if err != nil {
				return err
			}
			cb, err := object.GetCommit(st, hb)
			if err != nil {
				return fmt.Errorf("read checkpoint %s: %w", short(hb), err)
			}
			return diff("", ca.TreeHash, cb.TreeHash, storeSide{st}, storeSide{st}, &out)
		}
		// Against the workspace as it is: walk and hash, storing nothing.
		cache := loadCache(s.cachePath())
		sc, err := s.walk(cache)
		if err != nil {
			return err
		}
		if err := s.hashFiles(sc, nil, nil); err != nil {
			return err
		}
		tree, err := s.buildTrees(sc, cache, nil)
		if err != nil {
			return err
		}
		return diff("", ca.TreeHash, tree, storeSide{st}, scanSide{sc}, &out)
	})
	if out == nil {
		out = []Change{}
	}
	return out, err
}

// RestoreResult says what a restore did.
type RestoreResult struct {
	// Before is the checkpoint of the workspace as it was just before the
	// restore: restoring it undoes the restore.
	Before  string   `json:"before"`
	Target  string   `json:"target"`
	Written []string `json:"written"`
	Removed []string `json:"removed"`
	// Kept lists paths the restore left as they are: paths left out now
	// (their content is in no checkpoint), directories that hold them, and
	// paths the target checkpoint left out (they existed then, unrecorded).
	Kept []string `json:"kept"`
}

// Restore puts the workspace back as it was at checkpoint id: changed
// files get their content and mode back, deleted ones are recreated, and
// only files that did not exist then are removed. Paths checkpoints leave
// out are never touched. The current state is checkpointed first, so the
// restore can be undone by restoring res.Before.
func (s *Store) Restore(id string) (RestoreResult, error) {
	var res RestoreResult
	err := s.locked(true, func() error {
		// One view of the objects serves the whole restore: what it reads
		// is the target's, which the checkpoint below does not add to.
		st := s.objects()
		target, err := s.resolve(st, id)
		if err != nil {
			return err
		}
		before, sc, err := s.checkpointLocked("before restoring " + short(target))
		if err != nil {
			return fmt.Errorf("checkpoint before restore: %w", err)
		}
		res.Before, res.Target = before.ID, target.String()
		c, err := object.GetCommit(st, target)
		if err != nil {
			return fmt.Errorf("read checkpoint %s: %w", short(target), err)
		}
		var changes []Change
		if err := diff("", sc.dirs[""].tree, c.TreeHash, scanSide{sc}, storeSide{st}, &changes); err != nil {
			return err
		}
		then, err := leftOutOf(st, c)
		if err != nil {
			return err
		}
		return s.apply(st, changes, newLeftSet(sc.leftOut), newLeftSet(then), &res)
	})
	return res, err
}

// leftSet holds the paths left out of a checkpoint.
type leftSet map[string]LeftOut

func newLeftSet(l []LeftOut) leftSet {
	s := leftSet{}
	for _, x := range l {
		s[x.Path] = x
	}
	return s
}

// existed reports whether p, whose mode now is mode, was left out of the
// target as the same kind of thing: a file too large (a regular file), a
// path excluded or unreadable of the same kind, or anything under a
// directory left out.
func (s leftSet) existed(p string, mode filemode.FileMode) bool {
	if x, ok := s[p]; ok && x.Dir == (mode == filemode.Dir) &&
		!(x.Reason == "too large" && mode == filemode.Symlink) && x.Reason != "special file" {
		return true
	}
	for q := p; ; {
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			return false
		}
		q = q[:i]
		if s[q].Dir {
			return true
		}
	}
}

// covers reports whether p or a directory above it is in the set.
func (s leftSet) covers(p string) bool {
	for {
		if _, ok := s[p]; ok {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// holds reports whether something below the directory p is in the set.
func (s leftSet) holds(p string) bool {
	for x := range s {
		if strings.HasPrefix(x, p+"/") {
			return true
		}
	}
	return false
}

// apply makes the workspace match the "new" side of changes. It never
// touches a path left out now (excluded, too large, unreadable: its
// content is in no checkpoint), and never removes one that was left out
// of the target (it existed then, unrecorded).
func (s *Store) apply(st storer.EncodedObjectStorer, changes []Change, now, then leftSet, res *RestoreResult) error {
	abs := func(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }
	keep := func(p string) {
		if !containsPath(res.Kept, p) {
			res.Kept = append(res.Kept, p)
		}
	}
	blocked := leftSet{} // directories that cannot be created: a left-out file is in the way
	// 1. Remove what the checkpoint does not have, deepest first.
	sort.SliceStable(changes, func(i, j int) bool { return depth(changes[i].Path) > depth(changes[j].Path) })
	for _, ch := range changes {
		switch {
		case ch.Kind == "removed" && then.existed(ch.Path, ch.old.mode):
			keep(ch.Path) // it existed at the checkpoint, unrecorded
		case ch.Kind == "dir removed" && (then.existed(ch.Path, filemode.Dir) || now.holds(ch.Path)):
			keep(ch.Path)
		case ch.Kind == "removed" || ch.Kind == "type" && ch.old.mode != 0 && ch.old.mode != filemode.Dir:
			if err := os.Remove(abs(ch.Path)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("restore: remove %s: %w", ch.Path, err)
			}
			res.Removed = append(res.Removed, ch.Path)
		case ch.Kind == "dir removed":
			// Its files are gone now (they sort first); the directory
			// itself goes only if nothing left out remains in it.
			if err := os.Remove(abs(ch.Path)); err != nil && !errors.Is(err, os.ErrNotExist) {
				if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
					keep(ch.Path)
					continue
				}
				return fmt.Errorf("restore: remove directory %s: %w", ch.Path, err)
			}
			res.Removed = append(res.Removed, ch.Path+"/")
		}
	}
	// 2. Create directories and write files, shallowest first.
	sort.SliceStable(changes, func(i, j int) bool { return depth(changes[i].Path) < depth(changes[j].Path) })
	for _, ch := range changes {
		p := abs(ch.Path)
		if now.covers(ch.Path) || blocked.covers(ch.Path) {
			// A path left out now stands here: its content is in no
			// checkpoint, so it stays, and so does what is under it.
			keep(ch.Path)
			if ch.Kind == "dir added" {
				blocked[ch.Path] = LeftOut{Path: ch.Path, Dir: true}
			}
			continue
		}
		switch ch.Kind {
		case "dir added":
			if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
				blocked[ch.Path] = LeftOut{Path: ch.Path, Dir: true}
				keep(ch.Path)
				continue
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("restore: create directory %s: %w", ch.Path, err)
			}
		case "added", "modified", "type":
			if ch.new.mode == 0 || ch.new.mode == filemode.Dir {
				continue
			}
			if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
				keep(ch.Path) // a directory kept for the left-out paths in it
				continue
			}
			if err := s.writeEntry(st, p, ch.new); err != nil {
				return fmt.Errorf("restore: %s: %w", ch.Path, err)
			}
			res.Written = append(res.Written, ch.Path)
		case "mode":
			if err := setExec(p, ch.new.mode == filemode.Executable); err != nil {
				return fmt.Errorf("restore: %s: %w", ch.Path, err)
			}
			res.Written = append(res.Written, ch.Path)
		}
	}
	// One sync for the whole restore: the checkpoint taken before it is
	// what makes it safe to repeat.
	if f, err := os.Open(s.root); err == nil {
		_ = unix.Syncfs(int(f.Fd()))
		f.Close()
	}
	for _, l := range []*[]string{&res.Written, &res.Removed, &res.Kept} {
		if *l == nil {
			*l = []string{}
		}
	}
	return nil
}

func depth(p string) int { return strings.Count(p, "/") }

func containsPath(l []string, p string) bool {
	for _, x := range l {
		if x == p {
			return true
		}
	}
	return false
}

// writeEntry writes a file or symlink by temp file and rename, keeping the
// permissions of a regular file it replaces.
func (s *Store) writeEntry(st storer.EncodedObjectStorer, p string, n node) error {
	obj, err := st.EncodedObject(plumbing.BlobObject, n.hash)
	if err != nil {
		return fmt.Errorf("read content %s: %w", short(n.hash), err)
	}
	data, err := readAll(obj)
	if err != nil {
		return fmt.Errorf("read content %s: %w", short(n.hash), err)
	}
	dir := filepath.Dir(p)
	if n.mode == filemode.Symlink {
		// A short temporary name: the real one may be 255 bytes.
		var tmp string
		for i := 0; ; i++ {
			tmp = filepath.Join(dir, fmt.Sprintf(".undosh-restore-%s-%d", n.hash.String()[:8], i))
			err := os.Symlink(string(data), tmp)
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrExist) || i > 100 {
				return err
			}
		}
		if err := os.Rename(tmp, p); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		perm = fi.Mode().Perm() &^ 0o111
	}
	if n.mode == filemode.Executable {
		perm |= (perm & 0o444) >> 2 // x wherever r
	}
	f, err := os.CreateTemp(dir, ".undosh-restore-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := io.Copy(f, strings.NewReader(string(data))); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func setExec(p string, exec bool) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	perm := fi.Mode().Perm() &^ 0o111
	if exec {
		perm |= (perm & 0o444) >> 2
	}
	return os.Chmod(p, perm)
}
