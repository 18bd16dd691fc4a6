package checkpoint

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/sys/unix"
)

// A Watcher tells a checkpoint what changed in the workspace since a
// checkpoint it was told of, so that the checkpoint reads only that.
type Watcher interface {
	// Changes returns what changed in the workspace root since the
	// checkpoint last Recorded. It is called before the checkpoint reads
	// anything.
	Changes(root string) Changes
	// Recorded says that checkpoint id holds the workspace root as it
	// was when Changes returned the changes with this epoch.
	Recorded(root string, epoch uint64, id string)
}

// Changes is what a watcher saw change since a checkpoint.
type Changes struct {
	Epoch uint64
	// Base is the checkpoint the paths changed from: its tree and its
	// list of paths left out are the workspace as it was then.
	Base string
	// Paths may differ from Base; every other path is as Base has it.
	Paths []Changed
	// Full, when set, says why the watcher cannot tell what changed: the
	// checkpoint walks the whole workspace.
	Full string
	// Absent says that no watcher answered at all (Full says why).
	Absent bool
}

// none reports whether the watcher saw nothing change since checkpoint
// head, which then holds the workspace as it is.
func (c Changes) none(head plumbing.Hash) bool {
	return c.Full == "" && len(c.Paths) == 0 && !head.IsZero() && c.Base == head.String()
}

// Changed is one path that may have changed: relative to the workspace,
// "/" separated, "." for the workspace directory itself. Tree says that
// anything below it may have changed too.
type Changed struct {
	Rel  string
	Tree bool
}

// changePlan is what a watched checkpoint reads: the directories that
// hold a changed path and every directory above them, and whole the
// subtrees that may have changed anywhere. Every other directory keeps
// its tree from the base. It serves the walk as its prior: a file that
// no change names keeps the base's hash.
type changePlan struct {
	st   storer.EncodedObjectStorer
	base *object.Commit
	// baseFiles is the number of files the base records.
	baseFiles int
	dirty     map[string]bool
	reread    map[string]bool
	// direct are the directories that hold a changed path: the other
	// directories of reread only lead to them, and are made from the
	// base without reading them.
	direct map[string]bool
	deep   map[string]bool
	// entries are the base's entries of every directory in reread
	// (nil: none, it is no directory there), read before the walk,
	// which uses them from many goroutines.
	entries map[string]map[string]node
}

// planChanges reads what of the base the walk of ch needs.
func (s *Store) planChanges(st storer.EncodedObjectStorer, ch Changes) (*changePlan, error) {
	if !plumbing.IsHash(ch.Base) {
		return nil, fmt.Errorf("base %q is no checkpoint id", ch.Base)
	}
	base, err := object.GetCommit(st, plumbing.NewHash(ch.Base))
	if err != nil {
		return nil, fmt.Errorf("read base checkpoint %s: %w", ch.Base, err)
	}
	files, ok := filesOf(base)
	if !ok {
		return nil, fmt.Errorf("base checkpoint %s does not say how many files it holds", short(base.Hash))
	}
	pl := &changePlan{st: st, base: base, baseFiles: files, dirty: map[string]bool{}, reread: map[string]bool{"": true},
		deep: map[string]bool{}, direct: map[string]bool{}, entries: map[string]map[string]node{}}
	for _, c := range ch.Paths {
		rel := strings.Trim(path.Clean("/"+c.Rel), "/")
		if c.Tree {
			if rel == "" {
				return nil, fmt.Errorf("the whole workspace changed")
			}
			pl.deep[rel] = true
		} else {
			pl.dirty[rel] = true
		}
		if rel == "" {
			pl.direct[""] = true // the workspace's own permissions
		} else {
			pl.direct[parent(rel)] = true
		}
		for d := parent(rel); ; d = parent(d) {
			pl.reread[d] = true
			if d == "" {
				break
			}
		}
	}
	for rel := range pl.reread {
		ents, err := pl.baseEntries(rel)
		if err != nil {
			return nil, err
		}
		pl.entries[rel] = ents
	}
	return pl, nil
}

// baseEntries lists the base's directory rel, nil when it has none there.
func (pl *changePlan) baseEntries(rel string) (map[string]node, error) {
	side := storeSide{pl.st}
	tree := pl.base.TreeHash
	dir := ""
	for _, name := range strings.Split(rel, "/") {
		if name == "" {
			break
		}
		ents, err := side.entries(dir, tree)
		if err != nil {
			return nil, err
		}
		n, ok := ents[name]
		if !ok || n.mode != filemode.Dir {
			return nil, nil
		}
		tree, dir = n.hash, join(dir, name)
	}
	return side.entries(dir, tree)
}

// scanChanges reads what ch says changed, taking the rest from its base.
func (s *Store) scanChanges(st storer.EncodedObjectStorer, ch Changes, out sink) (*scan, error) {
	pl, err := s.planChanges(st, ch)
	if err != nil {
		return nil, err
	}
	sc, err := s.walkWith(pl, pl)
	if err != nil {
		return nil, err
	}
	sc.watched = true
	if err := s.hashFiles(sc, out, nil); err != nil {
		return nil, err
	}
	if err := pl.settle(sc); err != nil {
		return nil, err
	}
	sortLeftOut(sc.leftOut)
	return sc, nil
}

// fromBase reports whether the walk makes d from the base rather than
// read it: it holds no changed path itself, only leads to one.
func (pl *changePlan) fromBase(d *dirScan) bool {
	return !d.deep && !pl.direct[d.rel] && pl.entries[d.rel] != nil && !pl.inDeep(d.rel)
}

// baseDir fills d from the base's entries, and returns its
// subdirectories for descend.
func (pl *changePlan) baseDir(d *dirScan) []*dirScan {
	d.synth = true
	ents := pl.entries[d.rel]
	if d.rel == "" {
		d.mode = typeBits(filemode.Dir) | ents["."].perm
	}
	var subs []*dirScan
	names := make([]string, 0, len(ents))
	for name := range ents {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := ents[name]
		if name == "." && d.rel == "" {
			continue
		}
		rel := join(d.rel, name)
		if n.mode == filemode.Dir {
			d.subdirs = append(d.subdirs, name)
			subs = append(subs, &dirScan{rel: rel, depth: d.depth + 1, mode: typeBits(n.mode) | n.perm})
			continue
		}
		d.files = append(d.files, &entry{name: name, rel: rel, mode: n.mode, hash: n.hash, st: fileStat{mode: typeBits(n.mode) | n.perm}})
	}
	return subs
}

// typeBits are the stat type bits of a git mode.
func typeBits(m filemode.FileMode) uint32 {
	switch m {
	case filemode.Dir:
		return unix.S_IFDIR
	case filemode.Symlink:
		return unix.S_IFLNK
	}
	return unix.S_IFREG
}

// inDeep reports whether rel lies in a subtree read whole.
func (pl *changePlan) inDeep(rel string) bool {
	for d := rel; d != ""; d = parent(d) {
		if pl.deep[d] {
			return true
		}
	}
	return false
}

func (pl *changePlan) file(rel string, _ fileStat, mode filemode.FileMode, nlink uint64) (plumbing.Hash, bool) {
	// A file with other links can change through a path that no watch
	// on the workspace sees.
	if nlink != 1 || pl.dirty[rel] {
		return plumbing.ZeroHash, false
	}
	dir := parent(rel)
	ents := pl.entries[dir]
	if ents == nil || pl.inDeep(dir) {
		return plumbing.ZeroHash, false
	}
	n, ok := ents[path.Base(rel)]
	if !ok || n.mode != mode {
		return plumbing.ZeroHash, false
	}
	return n.hash, true
}

func (pl *changePlan) stored(rel string, h plumbing.Hash) bool {
	n, ok := pl.entries[parent(rel)][path.Base(rel)]
	return ok && n.hash == h
}

// descend decides, for the subdirectories of d that the walk found,
// which it reads: those the plan names, those below a subtree read whole
// and those the base has not as directories. The others keep the base's
// tree.
func (pl *changePlan) descend(d *dirScan, subs []*dirScan) []*dirScan {
	for _, sub := range subs {
		switch {
		case d.deep || pl.deep[sub.rel]:
			sub.deep = true
		case pl.reread[sub.rel]:
		default:
			n, ok := pl.entries[d.rel][path.Base(sub.rel)]
			if !ok || n.mode != filemode.Dir {
				sub.deep = true
				continue
			}
			sub.fixed, sub.tree = true, n.hash
		}
	}
	return subs
}

// settle completes a scan of the plan: the number of files the
// workspace holds, and the paths it leaves out, the base's outside what
// the walk read.
func (pl *changePlan) settle(sc *scan) error {
	gone := 0 // the base's files in what the walk read, or below it and gone
	for rel, d := range sc.dirs {
		if d.fixed || d.skip {
			continue
		}
		ents, ok := pl.entries[rel]
		if !ok {
			var err error
			if ents, err = pl.baseEntries(rel); err != nil {
				return err
			}
		}
		for name, n := range ents {
			switch {
			case name == ".":
			case n.mode != filemode.Dir:
				gone++
			default:
				if sub, ok := sc.dirs[join(rel, name)]; !ok || sub.skip {
					c, err := pl.countFiles(join(rel, name), n.hash)
					if err != nil {
						return err
					}
					gone += c
				}
			}
		}
	}
	sc.files = pl.baseFiles - gone + sc.files
	then, err := leftOutOf(pl.st, pl.base)
	if err != nil {
		return err
	}
	for _, x := range then {
		if pl.keeps(sc, x.Path) {
			sc.leftOut = append(sc.leftOut, x)
		}
	}
	return nil
}

// keeps reports whether the base's left-out path p is still left out
// unread: the nearest directory above it that the scan holds was not
// read, and it is p's own parent or holds p's way down.
func (pl *changePlan) keeps(sc *scan, p string) bool {
	for d := parent(p); ; d = parent(d) {
		if x, ok := sc.dirs[d]; ok {
			return x.fixed || x.synth
		}
		if d == "" {
			return false
		}
	}
}

// countFiles counts the files of the base's subtree rel.
func (pl *changePlan) countFiles(rel string, tree plumbing.Hash) (int, error) {
	ents, err := storeSide{pl.st}.entries(rel, tree)
	if err != nil {
		return 0, err
	}
	n := 0
	for name, e := range ents {
		switch {
		case name == "." && rel == "":
		case e.mode == filemode.Dir:
			c, err := pl.countFiles(join(rel, name), e.hash)
			if err != nil {
				return 0, err
			}
			n += c
		default:
			n++
		}
	}
	return n, nil
}

// filesOf reads the number of files a checkpoint's message records.
func filesOf(c *object.Commit) (int, bool) {
	if !strings.Contains(c.Message, "\nundosh-files: ") {
		return 0, false
	}
	return info(c).Files, true
}
