package checkpoint

import (
	"errors"
	"fmt"
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

	"github.com/undosh/undosh/internal/pathglob"
	"github.com/undosh/undosh/internal/unixmode"
)

// node is one tree entry: a file, a symlink or a directory.
type node struct {
	mode filemode.FileMode
	hash plumbing.Hash
	perm uint32 // permission bits (mode & 07777); 0 for a symlink
}

// Change is one path that differs between two states.
type Change struct {
	// Path is relative to the workspace; "." is the workspace itself,
	// whose only possible change is "perm".
	Path string `json:"path"`
	// Kind is "added", "removed", "modified" (content), "mode" (the
	// executable bit), "perm" (only the other permission bits, setuid,
	// setgid or sticky, of a file or a directory), "type" (file, symlink
	// or directory swapped), "dir added" or "dir removed".
	Kind string `json:"kind"`
	old  node
	new  node
}

// side lists the entries of one directory of a state. At the root, the
// key "." holds the root directory itself, for its permissions.
type side interface {
	entries(rel string, tree plumbing.Hash) (map[string]node, error)
}

// storeSide reads trees from the shadow repository.
type storeSide struct{ st storer.EncodedObjectStorer }

func (s storeSide) entries(rel string, tree plumbing.Hash) (map[string]node, error) {
	out := map[string]node{}
	if rel == "" {
		out["."] = node{mode: filemode.Dir, perm: defaultPerm(filemode.Dir)}
	}
	if tree.IsZero() || tree == emptyTree {
		return out, nil
	}
	t, err := object.GetTree(s.st, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree %s of %q: %w", short(tree), rel, err)
	}
	var perms plumbing.Hash
	for _, e := range t.Entries {
		if e.Name == permsName {
			perms = e.Hash
			continue
		}
		out[unescape(e.Name)] = node{mode: e.Mode, hash: e.Hash, perm: defaultPerm(e.Mode)}
	}
	if perms.IsZero() {
		return out, nil // no record (or a checkpoint older than records): the defaults
	}
	obj, err := s.st.EncodedObject(plumbing.BlobObject, perms)
	if err != nil {
		return nil, fmt.Errorf("read the permissions of %q: %w", rel, err)
	}
	data, err := readAll(obj)
	if err != nil {
		return nil, fmt.Errorf("read the permissions of %q: %w", rel, err)
	}
	rec, err := decodePerms(data)
	if err != nil {
		return nil, fmt.Errorf("the permissions of %q do not decode: %w", rel, err)
	}
	for name, perm := range rec {
		n, ok := out[name]
		if !ok || n.mode == filemode.Symlink {
			return nil, fmt.Errorf("the permissions of %q name %q, which is no file or directory in it", rel, name)
		}
		n.perm = perm
		out[name] = n
	}
	return out, nil
}

// scanSide reads directories from a walk of the workspace, and from the
// store those a watched scan did not read (changes.go).
type scanSide struct {
	sc *scan
	st storer.EncodedObjectStorer
}

func (s scanSide) entries(rel string, tree plumbing.Hash) (map[string]node, error) {
	if d, ok := s.sc.dirs[rel]; s.sc.watched && (!ok || d.fixed) {
		return storeSide{s.st}.entries(rel, tree)
	}
	out := map[string]node{}
	if rel == "" {
		out["."] = node{mode: filemode.Dir, perm: s.sc.dirs[""].mode & permBits}
	}
	if tree.IsZero() {
		return out, nil
	}
	d, ok := s.sc.dirs[rel]
	if !ok {
		return out, nil
	}
	for _, e := range d.files {
		out[e.name] = node{mode: e.mode, hash: e.hash, perm: e.perm()}
	}
	for _, name := range d.subdirs {
		sub, ok := s.sc.dirs[join(rel, name)]
		if ok && !sub.skip {
			out[name] = node{mode: filemode.Dir, hash: sub.tree, perm: sub.mode & permBits}
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
	if rel == "" {
		// The root's own permissions, after everything in it, as for any
		// directory.
		x, y := ea["."], eb["."]
		delete(ea, ".")
		delete(eb, ".")
		defer func() {
			if x.perm != y.perm {
				*out = append(*out, Change{Path: ".", Kind: "perm", old: x, new: y})
			}
		}()
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
			if x.perm != y.perm {
				*out = append(*out, Change{Path: p, Kind: "perm", old: x, new: y})
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
		case x.perm != y.perm:
			*out = append(*out, Change{Path: p, Kind: "perm", old: x, new: y})
		}
	}
	return nil
}

// Diff lists the paths that differ from checkpoint a to checkpoint b, or
// to the workspace as it is now when b is "".
func (s *Store) Diff(a, b string) ([]Change, error) {
	var out []Change
	err := s.locked(false, func() error {
		st, err := s.readPacks()
		if err != nil {
			return err
		}
		defer st.Close()
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
		// Against the workspace as it is: read and hash, storing nothing.
		head, err := s.head()
		if err != nil {
			return err
		}
		sc, cache, err := s.scanNow(st, head, s.changes(), nil, false)
		if err != nil {
			return err
		}
		tree, err := s.buildTrees(sc, cache, nil)
		if err != nil {
			return err
		}
		return diff("", ca.TreeHash, tree, storeSide{st}, scanSide{sc, st}, &out)
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
	Before string `json:"before"`
	Target string `json:"target"`
	// Written lists the files written or whose permissions were set, and
	// the directories (with a final "/"; "./" is the workspace) whose
	// permissions were set.
	Written []string `json:"written"`
	Removed []string `json:"removed"`
	// Kept lists paths the restore left as they are: paths left out now
	// (their content is in no checkpoint), directories that hold them, and
	// paths the target checkpoint left out (they existed then, unrecorded).
	Kept []string `json:"kept"`
}

// Restore puts the workspace back as it was at checkpoint id: changed
// files get their content and permissions back, deleted ones are
// recreated, files and directories whose permissions alone changed get
// the recorded ones back, and only files that did not exist then are
// removed. Paths checkpoints leave out are never touched. The current
// state is checkpointed first, so the restore can be undone by restoring
// res.Before.
func (s *Store) Restore(id string) (RestoreResult, error) {
	var res RestoreResult
	err := s.locked(true, func() error {
		// One view of the objects serves the whole restore: what it reads
		// is the target's, which the checkpoint below does not add to.
		st, err := s.readPacks()
		if err != nil {
			return err
		}
		defer st.Close()
		target, err := s.resolve(st, id)
		if err != nil {
			return err
		}
		before, sc, err := s.checkpointLocked("before restoring "+short(target), false, WalkAlways)
		if err != nil {
			return fmt.Errorf("checkpoint before restore: %w", err)
		}
		res.Before, res.Target = before.ID, target.String()
		c, err := object.GetCommit(st, target)
		if err != nil {
			return fmt.Errorf("read checkpoint %s: %w", short(target), err)
		}
		var changes []Change
		if err := diff("", sc.dirs[""].tree, c.TreeHash, scanSide{sc, st}, storeSide{st}, &changes); err != nil {
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
		if pathglob.Below(x, p) {
			return true
		}
	}
	return false
}

// apply makes the workspace match the "new" side of changes. It never
// touches a path left out now (excluded, too large, unreadable: its
// content is in no checkpoint), and never removes one that was left out
// of the target (it existed then, unrecorded).
//
// Permissions: a file is written with its recorded permissions (never
// looser while its content is written), and a directory is created with
// its own, so that a kill leaves each path as it was or as the checkpoint
// has it. A directory whose permissions change gets them at the end,
// after its contents; so does one its owner may not write in (0500):
// the restore raises its owner's bits meanwhile, and lowers them again at
// the end, even after an error.
func (s *Store) apply(st storer.EncodedObjectStorer, changes []Change, now, then leftSet, res *RestoreResult) error {
	d := &dirPerms{root: s.root, final: map[string]uint32{}, opened: map[string]bool{}}
	err := s.applyChanges(st, changes, now, then, d, res)
	if ferr := d.finish(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
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

func (s *Store) applyChanges(st storer.EncodedObjectStorer, changes []Change, now, then leftSet, dirs *dirPerms, res *RestoreResult) error {
	abs := dirs.abs
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
			if err := dirs.open(parent(ch.Path)); err != nil {
				return err
			}
			if err := os.Remove(abs(ch.Path)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("restore: remove %s: %w", ch.Path, err)
			}
			res.Removed = append(res.Removed, ch.Path)
		case ch.Kind == "dir removed":
			// Its files are gone now (they sort first); the directory
			// itself goes only if nothing left out remains in it.
			if err := dirs.open(parent(ch.Path)); err != nil {
				return err
			}
			if err := os.Remove(abs(ch.Path)); err != nil && !errors.Is(err, os.ErrNotExist) {
				if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
					keep(ch.Path)
					continue
				}
				return fmt.Errorf("restore: remove directory %s: %w", ch.Path, err)
			}
			dirs.forget(ch.Path)
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
			fi, err := os.Lstat(p)
			if err == nil && !fi.IsDir() {
				blocked[ch.Path] = LeftOut{Path: ch.Path, Dir: true}
				keep(ch.Path)
				continue
			}
			dirs.set(ch.Path, ch.new.perm)
			if err == nil {
				continue // there already: it gets only its permissions
			}
			if err := dirs.open(parent(ch.Path)); err != nil {
				return err
			}
			if err := makeDir(p, ch.new.perm); err != nil {
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
			if err := dirs.open(parent(ch.Path)); err != nil {
				return err
			}
			if err := s.writeEntry(st, p, ch.new); err != nil {
				return fmt.Errorf("restore: %s: %w", ch.Path, err)
			}
			res.Written = append(res.Written, ch.Path)
		case "mode", "perm":
			if ch.new.mode == filemode.Dir {
				dirs.set(ch.Path, ch.new.perm)
				res.Written = append(res.Written, ch.Path+"/")
				continue
			}
			if err := setPerm(p, ch.new.perm); err != nil {
				return fmt.Errorf("restore: %s: %w", ch.Path, err)
			}
			res.Written = append(res.Written, ch.Path)
		}
	}
	return nil
}

func depth(p string) int { return strings.Count(p, "/") }

// parent is the directory that holds p, "" for the root.
func parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func containsPath(l []string, p string) bool {
	for _, x := range l {
		if x == p {
			return true
		}
	}
	return false
}

// dirPerms holds the permissions a restore gives directories at its end:
// the recorded ones of the directories it creates or whose permissions
// differ, and the original ones of those it had to open for writing.
type dirPerms struct {
	root   string
	final  map[string]uint32 // path ("" or "." for the root) → permissions
	opened map[string]bool
}

func (d *dirPerms) abs(rel string) string {
	if rel == "" || rel == "." {
		return d.root
	}
	return filepath.Join(d.root, filepath.FromSlash(rel))
}

func (d *dirPerms) key(rel string) string {
	if rel == "." {
		return ""
	}
	return rel
}

// set gives the directory rel its permissions perm at the end.
func (d *dirPerms) set(rel string, perm uint32) { d.final[d.key(rel)] = perm }

// forget drops a directory the restore removed.
func (d *dirPerms) forget(rel string) {
	delete(d.final, d.key(rel))
	delete(d.opened, d.key(rel))
}

// open makes the directory rel writable and searchable by its owner, if
// it is not, until the end of the restore. It adds no permission for
// anyone else.
func (d *dirPerms) open(rel string) error {
	rel = d.key(rel)
	if d.opened[rel] {
		return nil
	}
	d.opened[rel] = true
	var st unix.Stat_t
	if err := unix.Lstat(d.abs(rel), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o300 == 0o300 {
		return nil // nothing to open: what is done in it reports its own error
	}
	if _, ok := d.final[rel]; !ok {
		d.final[rel] = st.Mode & permBits
	}
	if err := unix.Chmod(d.abs(rel), st.Mode&permBits|0o300); err != nil {
		return fmt.Errorf("restore: open directory %s for writing: %w", d.abs(rel), err)
	}
	return nil
}

// finish gives every directory its final permissions, deepest first: a
// directory made unsearchable must not hide the ones under it.
func (d *dirPerms) finish() error {
	rels := make([]string, 0, len(d.final))
	for rel := range d.final {
		rels = append(rels, rel)
	}
	level := func(rel string) int {
		if rel == "" {
			return -1 // the root, above "a"
		}
		return depth(rel)
	}
	sort.Slice(rels, func(i, j int) bool {
		if a, b := level(rels[i]), level(rels[j]); a != b {
			return a > b
		}
		return rels[i] < rels[j]
	})
	var first error
	for _, rel := range rels {
		var st unix.Stat_t
		if err := unix.Lstat(d.abs(rel), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue // gone, or no longer a directory
		}
		if st.Mode&permBits == d.final[rel] {
			continue
		}
		if err := unix.Chmod(d.abs(rel), d.final[rel]); err != nil && first == nil {
			name := rel
			if name == "" {
				name = "."
			}
			first = fmt.Errorf("restore: set the permissions of %s: %w", name, err)
		}
	}
	return first
}

// writeEntry writes a file or symlink by temp file and rename. A file's
// temporary copy is its owner's alone (0600) until its content is written,
// then gets the recorded permissions before it takes the real name.
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
	f, err := os.CreateTemp(dir, ".undosh-restore-") // 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	// After the write: writing clears setuid and setgid.
	if err := f.Chmod(unixmode.Perm(n.perm)); err != nil {
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

// makeDir creates the directory p with the permissions perm, whatever the
// umask or a setgid parent would make of them: it is made under a
// temporary name, given perm and renamed into place. If perm would keep
// its owner from filling it, the owner's bits are raised until
// [dirPerms.finish] sets perm.
func makeDir(p string, perm uint32) error {
	if perm&0o300 != 0o300 {
		perm |= 0o700
	}
	tmp, err := os.MkdirTemp(filepath.Dir(p), ".undosh-restore-")
	if err != nil {
		return err
	}
	if err := unix.Chmod(tmp, perm); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// setPerm sets the permissions of the file p, refusing to follow a
// symlink that has taken its place.
func setPerm(p string, perm uint32) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("set permissions: no longer a regular file (%v)", fi.Mode().Type())
	}
	return os.Chmod(p, unixmode.Perm(perm))
}
