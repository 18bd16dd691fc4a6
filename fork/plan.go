package fork

// The commit half of the engine, in brief (the copy half is in copy*.go):
//
//   - [Diff] reads a copy's upper layer and plans what committing it does
//     to the real tree: a [Plan] of operations, in the order of a sorted
//     pre-order walk. It changes nothing.
//   - [Commit] applies a plan: conflict check, dpkg and apt locks, staging,
//     a write-ahead journal, then renames. It returns a [Record].
//   - [Undo] reverses a commit; [Recover] reverses every commit that a
//     crash cut short; [List] shows the journal.
//   - [ChangedUnits] and [MappedDeleted] tell the caller what to restart.
//
// What stays true: the real tree is changed only in the apply window of
// Commit and in the reverse pass of Undo and Recover, and only after the
// journal that can reverse the change is durable. Nothing already on the
// real tree is ever deleted by a commit: what a commit replaces or
// removes is kept in the journal, by link or rename, until the journal
// is pruned. An undo or recovery deletes only inodes the commit put in
// place (matched by inode number).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/pathglob"
	"github.com/undosh/undosh/internal/unixmode"
	"github.com/undosh/undosh/internal/where"
)

// Layer is one overlay of a copy: the upper directory overlayfs wrote,
// and the real directory it shadows.
type Layer struct {
	// Target is the real directory the overlay shadows: "/" or a
	// submount such as "/home".
	Target string
	// Upper is the overlay's upper directory, as overlayfs leaves it.
	// Nothing may write to it while Diff and Commit run.
	Upper string
	// T0 is when the copy was made: a real path the commit replaces,
	// removes or changes the attributes of must not have changed since.
	T0 time.Time
}

// DiffOptions says what Diff leaves out. The zero value is right for a
// copy of the machine's root.
type DiffOptions struct {
	// Root is the directory that stands for "/": the excluded paths and
	// the lock files are found from it. Layer.Target must be Root or
	// below it. Default "/"; tests point it at a temporary tree.
	Root string
	// StateDir is the engine's state directory, from Root. Default
	// /var/lib/undosh. <Target>/.undosh-fork is always excluded too.
	StateDir string
	// Seeded lists paths, from Root, that the copy put in the upper
	// itself (such as /usr/sbin/policy-rc.d): never committed.
	Seeded []string
	// Exclude lists more paths, from Root, never to commit. The /run
	// /proc /sys /dev trees and the dpkg and apt lock files are always
	// excluded.
	Exclude []string
	// Include lists trees, from Root, committed even inside an excluded
	// one (a workspace under /run). Only the way down to them is walked in
	// the excluded tree.
	Include []string
	// Mirrored are the directories the copy made in the upper only to
	// hold seeded paths, with the real directories' mode and owner at T0
	// ([Copy].Mirrored). While an upper directory still has the mode and
	// owner of its record, the copy did not change them: they are not
	// committed, even when the real directory's changed since T0.
	Mirrored []Mirror
}

// Kind is what an operation does to the real tree.
type Kind string

// The kinds of operation.
const (
	// OpRemove moves the real entry (a whole tree for a directory) into the
	// journal.
	OpRemove Kind = "remove"
	// OpReplace puts a new file, symlink or fifo in place of a real one,
	// which is kept in the journal by a hard link.
	OpReplace Kind = "replace"
	// OpAdd puts a new file, symlink or fifo where nothing is.
	OpAdd Kind = "add"
	// OpMkdir puts a new, empty directory where nothing is; the operations
	// after it fill it.
	OpMkdir Kind = "mkdir"
	// OpMeta changes the mode, owner or xattrs of a real directory.
	OpMeta Kind = "meta"
)

// Type is the type of what an operation puts in place.
type Type string

// The types of entry a commit can put in place.
const (
	TypeFile    Type = "file"
	TypeDir     Type = "dir"
	TypeSymlink Type = "symlink"
	TypeFifo    Type = "fifo"
)

// Attrs are the attributes an operation gives an entry.
type Attrs struct {
	// Mode is the permission bits with setuid, setgid and sticky
	// (st_mode & 07777).
	Mode uint32 `json:"mode"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	// Xattrs are the extended attributes, without overlayfs's own
	// (trusted.overlay.* and user.overlay.*).
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
	// Atime and Mtime are in nanoseconds since the epoch. An OpMeta
	// operation leaves a directory's times alone.
	Atime int64 `json:"atime"`
	Mtime int64 `json:"mtime"`
}

// Op is one operation of a plan.
type Op struct {
	Kind Kind `json:"kind"`
	// Path is relative to the plan's Target, slash-separated; "." is the
	// target directory itself.
	Path string `json:"path"`
	// Type, Attrs, Size, Link and Src describe what OpAdd, OpReplace and
	// OpMkdir put in place, and the attributes OpMeta sets.
	Type  Type   `json:"type,omitempty"`
	Attrs *Attrs `json:"attrs,omitempty"`
	Size  int64  `json:"size,omitempty"`
	Link  string `json:"link,omitempty"` // a symlink's target
	Src   string `json:"src,omitempty"`  // the entry in the upper
	// LinkOf is the Path of an earlier operation of the plan whose new
	// file this one is a hard link to ("" for none): a pair of links made
	// in the copy stays a pair.
	LinkOf string `json:"link_of,omitempty"`
}

// Skip is an entry of the upper that the plan leaves out, and why.
type Skip struct {
	Path   string `json:"path"` // from the plan's Root
	Reason string `json:"reason"`
}

// Plan is what committing a layer does, operation by operation, in the
// order Commit applies them: every directory before what is in it, and a
// OpRemove before whatever takes its place.
type Plan struct {
	Root   string    `json:"root"`
	Target string    `json:"target"`
	Upper  string    `json:"upper"`
	T0     time.Time `json:"t0"`
	Ops    []Op      `json:"ops"`
	// Skipped lists excluded paths, sockets and copied-up entries that
	// are unchanged.
	Skipped []Skip `json:"skipped,omitempty"`
}

// Problem is one path that stops a diff, a commit or an undo.
type Problem struct {
	Path   string `json:"path"` // from the Root, as a person sees it
	Reason string `json:"reason"`
}

func (p Problem) String() string { return p.Path + ": " + p.Reason }

// RefusedError is returned by [Diff] when the upper holds entries that
// the engine must not commit: device nodes, and overlayfs redirects or
// metacopy files (the copy's mount options rule them out).
type RefusedError struct {
	Problems []Problem
}

func (e *RefusedError) Error() string {
	return "cannot commit " + listProblems(e.Problems)
}

func listProblems(ps []Problem) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Paths excluded under every root, from the root. /tmp and /var/tmp are
// not: a step kept keeps everything it wrote, scratch included (a
// harness's cwd file, a build's output).
var defaultExcluded = []string{
	"/run", "/proc", "/sys", "/dev",
	"/var/lib/dpkg/lock", "/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/triggers/Lock",
	"/var/lib/apt/lists/lock", "/var/cache/apt/archives/lock",
}

// DefaultStateDir is undosh's state directory when it runs as root.
const DefaultStateDir = where.StateDir

// Diff plans the commit of layer: it walks the upper in sorted pre-order
// and compares each entry with the real one under layer.Target. It
// returns a *[RefusedError] listing every entry that cannot be committed.
//
// The rules: a whiteout (a 0:0 character device) removes the real
// entry; an opaque directory, or one in place of a non-directory,
// removes the real entry and makes a new directory, whose content is
// then all added; a directory over a real directory changes its mode,
// owner and xattrs when they differ, and its content is compared in
// turn; a file, symlink or fifo is added, or replaces the real entry,
// unless it is a copy-up identical to it in content and attributes.
// Sockets are skipped.
func Diff(layer Layer, o DiffOptions) (Plan, error) {
	root := o.Root
	if root == "" {
		root = "/"
	}
	root = filepath.Clean(root)
	target := filepath.Clean(layer.Target)
	within, err := filepath.Rel(root, target)
	if err != nil || within == ".." || strings.HasPrefix(within, "../") || !filepath.IsAbs(target) {
		return Plan{}, fmt.Errorf("diff: target %s is not under root %s", layer.Target, root)
	}
	d := &differ{
		plan: Plan{
			Root:   root,
			Target: target,
			Upper:  filepath.Clean(layer.Upper),
			T0:     layer.T0,
		},
		within:   within,
		excluded: map[string]bool{},
		included: map[string]bool{},
		links:    map[[2]uint64]string{},
		mirrored: map[string]Mirror{},
	}
	for _, m := range o.Mirrored {
		d.mirrored[path.Clean("/"+m.Path)] = m
	}
	state := o.StateDir
	if state == "" {
		state = DefaultStateDir
	}
	for _, l := range [][]string{defaultExcluded, {state}, o.Seeded, o.Exclude} {
		for _, p := range l {
			d.excluded[path.Clean("/"+p)] = true
		}
	}
	for _, p := range o.Include {
		if p := path.Clean("/" + p); !d.excluded[p] {
			d.included[p] = true
		}
	}
	d.excluded[d.name(HiddenName)] = true

	var ust unix.Stat_t
	if err := unix.Lstat(d.plan.Upper, &ust); err != nil {
		return Plan{}, fmt.Errorf("diff: upper %s: %w", layer.Upper, err)
	}
	if ust.Mode&unix.S_IFMT != unix.S_IFDIR {
		return Plan{}, fmt.Errorf("diff: upper %s is not a directory", layer.Upper)
	}
	var tst unix.Stat_t
	if err := unix.Lstat(target, &tst); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			return Plan{}, fmt.Errorf("diff: target %s: %w", layer.Target, err)
		}
		// The mount point was removed on the real machine while the
		// step ran (by something else: another test's tmpfs, a
		// container's volume). That is no change of the step's if all
		// its upper holds is what the copy put there itself (mirrored
		// directories, the hidden engine directory); else the step's
		// writes there have nowhere to go.
		wrote, err := d.wroteBelow(".")
		if err != nil {
			return Plan{}, err
		}
		if wrote || len(d.refused) > 0 {
			d.refuse(".", "removed on the real machine while the step ran, which wrote below it")
			return Plan{}, &RefusedError{Problems: d.refused}
		}
		d.skip(".", "removed on the real machine while the step ran")
		return d.plan, nil
	}
	if tst.Mode&unix.S_IFMT != unix.S_IFDIR {
		return Plan{}, fmt.Errorf("diff: target %s is not a directory", layer.Target)
	}
	if err := d.entry(".", false); err != nil {
		return Plan{}, err
	}
	if len(d.refused) > 0 {
		return Plan{}, &RefusedError{Problems: d.refused}
	}
	return d.plan, nil
}

type differ struct {
	plan     Plan
	within   string // Target relative to Root
	excluded map[string]bool
	included map[string]bool
	refused  []Problem
	links    map[[2]uint64]string // upper (dev, ino) → Path of the first op
	mirrored map[string]Mirror    // by name
}

// changedDir reports whether the copy changed the attributes of a
// directory it shares with the real tree: a, the upper's, differ from
// the real one's (tst, at dst), unless a directory the copy only mirrored
// still has its recorded mode and owner (then only xattrs count).
func (d *differ) changedDir(rel string, a *Attrs, tst *unix.Stat_t, dst string) bool {
	if d.unchangedMirror(rel, a) {
		x, _, err := readXattrs(dst)
		return err != nil || !sameXattrs(a.Xattrs, x)
	}
	return differentDir(a, tst, dst)
}

// unchangedMirror reports whether rel is a directory the copy only
// mirrored and whose mode and owner (a, the upper's) are still those of
// its record.
func (d *differ) unchangedMirror(rel string, a *Attrs) bool {
	m, ok := d.mirrored[d.name(rel)]
	return ok && a.Mode == unixmode.Bits(m.Mode) && a.UID == m.UID && a.GID == m.GID
}

// goneMirror plans rel, a directory the copy only mirrored whose real
// one something else removed while the step ran. That is no change of
// the step's when all the step left below it are mirrored directories
// (and paths never committed): nothing is planned. When the step wrote
// below it, recreating the directory would undo the other removal, so
// the plan is refused.
func (d *differ) goneMirror(rel string) error {
	wrote, err := d.wroteBelow(rel)
	if err != nil {
		return err
	}
	if wrote {
		d.refuse(rel, "removed on the real machine while the step ran, which wrote below it")
		return nil
	}
	d.skip(rel, "removed on the real machine while the step ran")
	return nil
}

// wroteBelow plans the content of rel, whose real directory is gone, as
// new, and reports whether the step left anything there but directories
// the copy only mirrored and paths never committed. The plan is left as
// it was.
func (d *differ) wroteBelow(rel string) (bool, error) {
	n := len(d.plan.Ops)
	if err := d.children(rel, true); err != nil {
		return false, err
	}
	wrote := false
	for _, op := range d.plan.Ops[n:] {
		if op.Kind != OpMkdir || !d.unchangedMirror(op.Path, op.Attrs) {
			wrote = true
		}
	}
	d.plan.Ops = d.plan.Ops[:n]
	return wrote, nil
}

// name is how a person sees rel (relative to the target): from the root.
func (d *differ) name(rel string) string {
	return path.Join("/", d.within, rel)
}

// isExcluded reports whether name is never committed: it is in an
// excluded tree, and not in an included tree inside that one.
func (d *differ) isExcluded(name string) bool {
	if path.Base(name) == userHiddenName() {
		return true // a user's commit journal (UserJournalDir)
	}
	for p := name; ; p = path.Dir(p) {
		if d.included[p] {
			return false
		}
		if d.excluded[p] {
			return true
		}
		if p == "/" {
			return false
		}
	}
}

// leadsToIncluded reports whether an included tree lies below name.
func (d *differ) leadsToIncluded(name string) bool {
	for p := range d.included {
		if pathglob.Below(p, name) {
			return true
		}
	}
	return false
}

func (d *differ) refuse(rel, reason string) {
	d.refused = append(d.refused, Problem{Path: d.name(rel), Reason: reason})
}

func (d *differ) skip(rel, reason string) {
	d.plan.Skipped = append(d.plan.Skipped, Skip{Path: d.name(rel), Reason: reason})
}

func (d *differ) add(op Op) { d.plan.Ops = append(d.plan.Ops, op) }

// entry plans rel (relative to both the upper and the target). fresh
// says that rel's parent is new, so nothing of the real tree is there.
func (d *differ) entry(rel string, fresh bool) error {
	src := filepath.Join(d.plan.Upper, rel)
	if rel != "." && d.isExcluded(d.name(rel)) {
		var st unix.Stat_t
		if d.leadsToIncluded(d.name(rel)) && unix.Lstat(src, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			// Only the way down to an included tree: nothing of this
			// directory's own is committed.
			return d.children(rel, fresh)
		}
		d.skip(rel, "excluded")
		return nil
	}
	dst := filepath.Join(d.plan.Target, rel)
	var ust unix.Stat_t
	if err := unix.Lstat(src, &ust); err != nil {
		return fmt.Errorf("diff: %w", &os.PathError{Op: "lstat", Path: src, Err: err})
	}
	attrs, ovl, err := readXattrs(src)
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	for _, k := range []string{"redirect", "metacopy", "whiteout"} {
		if _, ok := ovl[k]; ok {
			d.refuse(rel, "overlayfs "+k+" xattr (the copy must be mounted with redirect_dir=off,metacopy=off)")
			return nil
		}
	}
	opaque := string(ovl["opaque"])
	if opaque != "" && opaque != "y" {
		d.refuse(rel, fmt.Sprintf("overlayfs opaque=%q xattr", opaque))
		return nil
	}

	var tst unix.Stat_t
	exists := false
	if !fresh {
		switch err := unix.Lstat(dst, &tst); {
		case err == nil:
			exists = true
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		default:
			return fmt.Errorf("diff: %w", &os.PathError{Op: "lstat", Path: dst, Err: err})
		}
	}
	tdir := exists && tst.Mode&unix.S_IFMT == unix.S_IFDIR

	switch ust.Mode & unix.S_IFMT {
	case unix.S_IFCHR, unix.S_IFBLK:
		if ust.Mode&unix.S_IFMT == unix.S_IFCHR && ust.Rdev == 0 {
			if exists {
				d.remove(rel, tdir)
			}
			return nil
		}
		d.refuse(rel, "device node")
		return nil
	case unix.S_IFSOCK:
		d.skip(rel, "socket")
		return nil
	case unix.S_IFDIR:
		a := attrsOf(&ust, attrs)
		switch {
		case rel == ".":
			// The mount point itself is never replaced; only its
			// attributes can change.
			if d.changedDir(rel, a, &tst, dst) {
				d.add(Op{Kind: OpMeta, Path: rel, Type: TypeDir, Attrs: a})
			}
			return d.children(rel, fresh)
		case !fresh && !exists && d.unchangedMirror(rel, a):
			return d.goneMirror(rel)
		case fresh || !exists:
			fresh = true
		case opaque == "y" || !tdir:
			d.remove(rel, tdir)
			fresh = true
		default:
			if d.changedDir(rel, a, &tst, dst) {
				d.add(Op{Kind: OpMeta, Path: rel, Type: TypeDir, Attrs: a})
			}
			return d.children(rel, false)
		}
		d.add(Op{Kind: OpMkdir, Path: rel, Type: TypeDir, Attrs: a, Src: src})
		return d.children(rel, fresh)
	}

	op := Op{Kind: OpAdd, Path: rel, Attrs: attrsOf(&ust, attrs), Src: src}
	switch ust.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		op.Type, op.Size = TypeFile, ust.Size
	case unix.S_IFLNK:
		op.Type = TypeSymlink
		l, err := os.Readlink(src)
		if err != nil {
			return fmt.Errorf("diff: %w", err)
		}
		op.Link, op.Size = l, int64(len(l))
	case unix.S_IFIFO:
		op.Type = TypeFifo
	default:
		d.refuse(rel, fmt.Sprintf("unknown file type %#o", ust.Mode&unix.S_IFMT))
		return nil
	}
	if exists {
		if tdir {
			d.remove(rel, true)
		} else {
			same, err := sameEntry(&op, &tst, dst)
			if err != nil {
				return fmt.Errorf("diff: %w", err)
			}
			if same {
				d.skip(rel, "unchanged")
				return nil
			}
			op.Kind = OpReplace
		}
	}
	if op.Type == TypeFile && ust.Nlink > 1 {
		key := [2]uint64{ust.Dev, ust.Ino}
		if first, ok := d.links[key]; ok {
			op.LinkOf = first
		} else {
			d.links[key] = rel
		}
	}
	d.add(op)
	return nil
}

// remove plans the removal of the real rel, refusing it when an excluded
// path lives under it (a lock file, the state directory…).
func (d *differ) remove(rel string, dir bool) {
	if dir {
		prefix := d.name(rel) + "/"
		var under []string
		for p := range d.excluded {
			if strings.HasPrefix(p, prefix) {
				under = append(under, p)
			}
		}
		slices.Sort(under)
		for _, p := range under {
			rp, _ := filepath.Rel(path.Join("/", d.within), p)
			if _, err := os.Lstat(filepath.Join(d.plan.Target, rp)); err == nil {
				d.refuse(rel, "removing it would remove "+p+", which is never committed")
				return
			}
		}
	}
	d.add(Op{Kind: OpRemove, Path: rel})
}

func (d *differ) children(rel string, fresh bool) error {
	ents, err := os.ReadDir(filepath.Join(d.plan.Upper, rel))
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	for _, e := range ents { // sorted by name
		if err := d.entry(path.Join(rel, e.Name()), fresh); err != nil {
			return err
		}
	}
	return nil
}

func attrsOf(st *unix.Stat_t, xattrs map[string][]byte) *Attrs {
	return &Attrs{
		Mode:   st.Mode & 0o7777,
		UID:    int(st.Uid),
		GID:    int(st.Gid),
		Xattrs: xattrs,
		Atime:  st.Atim.Nano(),
		Mtime:  st.Mtim.Nano(),
	}
}

// differentDir reports whether a directory's mode, owner or xattrs
// differ from the real one's.
func differentDir(a *Attrs, tst *unix.Stat_t, dst string) bool {
	if a.Mode != tst.Mode&0o7777 || a.UID != int(tst.Uid) || a.GID != int(tst.Gid) {
		return true
	}
	x, _, err := readXattrs(dst)
	return err != nil || !sameXattrs(a.Xattrs, x)
}

// sameEntry reports whether the real entry (tst, at dst) is identical to
// what op would put there: a copy-up that changed nothing.
func sameEntry(op *Op, tst *unix.Stat_t, dst string) (bool, error) {
	a := op.Attrs
	var typ uint32
	switch op.Type {
	case TypeFile:
		typ = unix.S_IFREG
	case TypeSymlink:
		typ = unix.S_IFLNK
	case TypeFifo:
		typ = unix.S_IFIFO
	}
	if tst.Mode&unix.S_IFMT != typ || a.Mode != tst.Mode&0o7777 || a.UID != int(tst.Uid) ||
		a.GID != int(tst.Gid) || a.Mtime != tst.Mtim.Nano() {
		return false, nil
	}
	switch op.Type {
	case TypeFile:
		if tst.Size != op.Size {
			return false, nil
		}
	case TypeSymlink:
		l, err := os.Readlink(dst)
		if err != nil || l != op.Link {
			return false, err
		}
	}
	x, _, err := readXattrs(dst)
	if err != nil {
		return false, err
	}
	if !sameXattrs(a.Xattrs, x) {
		return false, nil
	}
	if op.Type == TypeFile {
		return sameContent(op.Src, dst)
	}
	return true, nil
}

// sameContent compares two files byte by byte, without touching their
// access times.
func sameContent(a, b string) (bool, error) {
	fa, err := openNoatime(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := openNoatime(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba := make([]byte, 64<<10)
	bb := make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == io.EOF || eb == io.ErrUnexpectedEOF, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil {
			if eb == io.EOF || eb == io.ErrUnexpectedEOF {
				return false, nil
			}
			return false, eb
		}
	}
}

// openNoatime opens a file for reading without updating its atime where
// the kernel allows it (root may; others only on their own files).
func openNoatime(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		f, err = os.Open(name)
	}
	return f, err
}

// Name is how a person sees the path of an operation of the plan: from
// the Root, such as /etc/passwd.
func (p Plan) Name(op Op) string {
	within, err := filepath.Rel(p.Root, p.Target)
	if err != nil {
		within = p.Target
	}
	return path.Join("/", within, op.Path)
}

// Paths lists the paths the plan changes, as [Plan.Name] shows them, in
// plan order, each once.
func (p Plan) Paths() []string {
	var out []string
	seen := map[string]bool{}
	for _, op := range p.Ops {
		n := p.Name(op)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Summary describes the plan for people: the counts, then one line per
// operation.
func (p Plan) Summary() string {
	var b strings.Builder
	counts := map[Kind]int{}
	var total int64
	for _, op := range p.Ops {
		counts[op.Kind]++
		if op.Type == TypeFile && op.Kind != OpRemove && op.LinkOf == "" {
			total += op.Size
		}
	}
	unchanged := 0
	for _, s := range p.Skipped {
		if s.Reason == "unchanged" {
			unchanged++
		}
	}
	fmt.Fprintf(&b, "%d changes to %s: %d added, %d replaced, %d removed, %d directories made, %d with new attributes; %s of new data",
		len(p.Ops), p.Target, counts[OpAdd], counts[OpReplace], counts[OpRemove], counts[OpMkdir], counts[OpMeta], sizeString(total))
	if unchanged > 0 {
		fmt.Fprintf(&b, "; %d copied up unchanged", unchanged)
	}
	b.WriteString("\n")
	for _, op := range p.Ops {
		n := p.Name(op)
		switch op.Kind {
		case OpRemove:
			fmt.Fprintf(&b, "  remove   %s\n", n)
		case OpMkdir:
			fmt.Fprintf(&b, "  mkdir    %s/ (%s)\n", strings.TrimSuffix(n, "/"), modeString(op))
		case OpMeta:
			fmt.Fprintf(&b, "  attrs    %s (%s)\n", n, modeString(op))
		default:
			detail := modeString(op)
			switch {
			case op.Type == TypeSymlink:
				detail = "-> " + op.Link
			case op.Type == TypeFifo:
				detail = "fifo, " + detail
			case op.LinkOf != "":
				detail = "hard link to " + p.Name(Op{Path: op.LinkOf})
			case op.Type == TypeFile:
				detail = sizeString(op.Size) + ", " + detail
			}
			fmt.Fprintf(&b, "  %-8s %s (%s)\n", op.Kind, n, detail)
		}
	}
	return b.String()
}

func modeString(op Op) string {
	if op.Attrs == nil {
		return ""
	}
	return fmt.Sprintf("%04o %d:%d", op.Attrs.Mode, op.Attrs.UID, op.Attrs.GID)
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
