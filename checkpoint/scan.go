package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/pathglob"
)

// LeftOut is a path a checkpoint does not hold, and why.
type LeftOut struct {
	Path   string `json:"path"`
	Reason string `json:"reason"` // "excluded", "too large", "special file", "unreadable"
	Dir    bool   `json:"dir,omitempty"`
}

// escape gives the name a path element has in the shadow repository: git
// trees cannot hold ".git", so it becomes "~.git", and a name that starts
// with "~" gets one more, so that the mapping is one to one.
func escape(name string) string {
	if name == ".git" || strings.HasPrefix(name, "~") {
		return "~" + name
	}
	return name
}

// unescape reverses escape.
func unescape(name string) string {
	if strings.HasPrefix(name, "~") {
		return name[1:]
	}
	return name
}

// permsName names, in a tree, the blob that records the permission bits
// of the tree's entries that differ from what their git mode implies (see
// [defaultPerm]). escape never gives this name: a real name that starts
// with "~" gets a second one, and ".git" becomes "~.git".
const permsName = "~perms"

// permBits are the bits of a mode a checkpoint records: the permissions,
// setuid, setgid and sticky.
const permBits = 0o7777

// defaultPerm is what a tree entry's git mode implies when no record says
// otherwise: 0644 for a file, 0755 for an executable file or a directory.
// A symlink has none (Linux ignores a symlink's own permissions).
func defaultPerm(m filemode.FileMode) uint32 {
	switch m {
	case filemode.Regular:
		return 0o644
	case filemode.Executable, filemode.Dir:
		return 0o755
	}
	return 0
}

// perm is the permission bits of a scanned file or symlink.
func (e *entry) perm() uint32 {
	if e.mode == filemode.Symlink {
		return 0
	}
	return e.st.mode & permBits
}

// permRecord is one line of a tree's permissions blob.
type permRecord struct {
	name string // the real name; "." is the directory itself (the root only)
	perm uint32
}

// encodePerms writes a permissions blob: lines of a Go-quoted name, a tab
// and the bits in octal, sorted by name, like the left-out list.
func encodePerms(l []permRecord) []byte {
	sort.Slice(l, func(i, j int) bool { return l[i].name < l[j].name })
	var b strings.Builder
	for _, r := range l {
		b.WriteString(strconv.Quote(r.name))
		b.WriteByte('\t')
		b.WriteString(fmt.Sprintf("%04o\n", r.perm))
	}
	return []byte(b.String())
}

func decodePerms(data []byte) (map[string]uint32, error) {
	out := map[string]uint32{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		q, bits, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("bad line %q", line)
		}
		name, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("bad name in %q: %w", line, err)
		}
		v, err := strconv.ParseUint(bits, 8, 32)
		if err != nil || v&^permBits != 0 {
			return nil, fmt.Errorf("bad permissions in %q", line)
		}
		out[name] = uint32(v)
	}
	return out, nil
}

// entry is one item found by the walk.
type entry struct {
	name string // the real name
	rel  string // the real relative path
	mode filemode.FileMode
	st   fileStat
	hash plumbing.Hash
	need bool   // must be hashed
	link string // symlink target
}

// dirScan is one directory found by the walk.
type dirScan struct {
	rel     string
	depth   int
	mode    uint32 // its stat mode
	files   []*entry
	subdirs []string // real names
	tree    plumbing.Hash
	n       int  // tree entries
	dirty   bool // its tree differs from the cache's
	skip    bool // could not be read: left out
	// fixed: not read, because nothing in it changed since the base of
	// a watched checkpoint (changes.go); tree is the base's.
	fixed bool
	// deep: read whole, trusting nothing of the base below it.
	deep bool
	// synth: not read either, but made from the base, with a subtree
	// that changed (changes.go).
	synth bool
}

// scan is the result of walking the workspace.
type scan struct {
	dirs    map[string]*dirScan
	leftOut []LeftOut
	started int64
	hashed  int
	files   int
	// watched: the scan read only what a watcher saw change; full says
	// why a scan walked everything instead.
	watched bool
	full    string
}

// prior tells a walk what it may take as already hashed: the stat cache
// for a full walk, the base checkpoint for a watched one (changes.go).
type prior interface {
	// file returns the hash that the file rel, stat st and mode mode, had
	// when it was last recorded, when the walk may take it unchanged.
	// nlink is its number of links.
	file(rel string, st fileStat, mode filemode.FileMode, nlink uint64) (plumbing.Hash, bool)
	// stored reports whether the blob h of rel (a symlink's target) is
	// in the store already.
	stored(rel string, h plumbing.Hash) bool
}

func (c *statCache) file(rel string, st fileStat, _ filemode.FileMode, _ uint64) (plumbing.Hash, bool) {
	return c.lookup(rel, st)
}

func (c *statCache) stored(rel string, h plumbing.Hash) bool {
	return c != nil && c.files[rel].hash == h
}

// walk stats every path of the workspace, in parallel, and decides which
// files must be hashed.
func (s *Store) walk(cache *statCache) (*scan, error) {
	return s.walkWith(cache, nil)
}

// walkWith walks the workspace taking hashes from p; with a plan, only
// the directories it names (changes.go).
func (s *Store) walkWith(p prior, pl *changePlan) (*scan, error) {
	sc := &scan{dirs: map[string]*dirScan{}, started: time.Now().UnixNano()}
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan *dirScan, 1024)
	var pending sync.WaitGroup
	workers := max(2, s.opts.Workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				var subs []*dirScan
				var left []LeftOut
				var err error
				if pl != nil && pl.fromBase(d) {
					subs = pl.baseDir(d)
				} else {
					subs, left, err = s.readDir(d, p)
				}
				if pl != nil {
					subs = pl.descend(d, subs)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				sc.leftOut = append(sc.leftOut, left...)
				for _, sub := range subs {
					sc.dirs[sub.rel] = sub
				}
				mu.Unlock()
				for _, sub := range subs {
					if sub.fixed {
						continue
					}
					pending.Add(1)
					// Never block a worker on a full queue: that could
					// stall every worker.
					select {
					case jobs <- sub:
					default:
						go func(sub *dirScan) { jobs <- sub }(sub)
					}
				}
				pending.Done()
			}
		}()
	}
	root := &dirScan{rel: ""}
	sc.dirs[""] = root
	pending.Add(1)
	jobs <- root
	pending.Wait()
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for _, d := range sc.dirs {
		sc.files += len(d.files)
	}
	return sc, nil
}

// readDir lists one directory and stats its entries relative to it.
func (s *Store) readDir(d *dirScan, p prior) ([]*dirScan, []LeftOut, error) {
	full := s.root
	if d.rel != "" {
		full = s.root + "/" + d.rel
	}
	// Raw open and getdents: os.Open registers every directory with the
	// poller and allocates a File, which a walk of thousands of
	// directories pays for in syscalls.
	fd, err := unix.Open(full, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if d.rel == "" {
			return nil, nil, fmt.Errorf("read workspace %s: %w", s.root, err)
		}
		d.skip = true
		return nil, []LeftOut{{Path: d.rel, Reason: "unreadable", Dir: true}}, nil
	}
	defer unix.Close(fd)
	if d.rel == "" {
		// A subdirectory's mode comes from its parent's listing; the
		// root's own permissions are recorded too.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, nil, fmt.Errorf("read workspace %s: %w", s.root, err)
		}
		d.mode = st.Mode
	}
	names, err := readDirNames(fd)
	if err != nil {
		if d.rel == "" {
			return nil, nil, fmt.Errorf("read workspace %s: %w", s.root, err)
		}
		d.skip = true
		return nil, []LeftOut{{Path: d.rel, Reason: "unreadable", Dir: true}}, nil
	}
	sort.Strings(names)
	var subs []*dirScan
	var left []LeftOut
	for _, name := range names {
		rel := name
		if d.rel != "" {
			rel = d.rel + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // gone since the listing
			}
			left = append(left, LeftOut{Path: rel, Reason: "unreadable"})
			continue
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if s.excluded(rel) {
			left = append(left, LeftOut{Path: rel, Reason: "excluded", Dir: isDir})
			continue
		}
		fs := fileStat{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino}
		e := &entry{name: name, rel: rel}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			d.subdirs = append(d.subdirs, name)
			subs = append(subs, &dirScan{rel: rel, depth: d.depth + 1, mode: st.Mode})
			continue
		case unix.S_IFREG:
			if st.Size > s.opts.MaxFileSize {
				left = append(left, LeftOut{Path: rel, Reason: "too large"})
				continue
			}
			e.mode = filemode.Regular
			if st.Mode&0o111 != 0 {
				e.mode = filemode.Executable
			}
		case unix.S_IFLNK:
			e.mode = filemode.Symlink
			buf := make([]byte, 4096)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				left = append(left, LeftOut{Path: rel, Reason: "unreadable"})
				continue
			}
			e.link = string(buf[:n])
		default:
			left = append(left, LeftOut{Path: rel, Reason: "special file"})
			continue
		}
		// The whole mode, permissions included: a chmod must make the
		// directory's tree dirty even when the content is the same.
		fs.mode = st.Mode
		e.st = fs
		if e.mode == filemode.Symlink {
			e.hash = objectHash(plumbing.BlobObject, []byte(e.link))
			e.need = !p.stored(rel, e.hash)
		} else if h, ok := p.file(rel, fs, e.mode, uint64(st.Nlink)); ok {
			e.hash = h
		} else {
			e.need = true
		}
		d.files = append(d.files, e)
	}
	return subs, left, nil
}

var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readDirNames lists a directory open as fd, without . and ..
func readDirNames(fd int) ([]string, error) {
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// excluded reports whether the options leave rel out.
func (s *Store) excluded(rel string) bool {
	for _, p := range s.opts.Exclude {
		if pathglob.Match(p, rel) {
			return true
		}
	}
	return false
}

// hashFiles reads and hashes every file the walk could not take from the
// cache, storing its blob in out (when out is not nil). Files that cannot
// be read are left out.
func (s *Store) hashFiles(sc *scan, out sink, progress *progress) error {
	var todo []*entry
	for _, d := range sc.dirs {
		for _, e := range d.files {
			if e.need {
				todo = append(todo, e)
			}
		}
	}
	sc.hashed = len(todo)
	progress.total(len(todo))
	var mu sync.Mutex
	var firstErr error
	var unreadable []*entry
	ch := make(chan *entry)
	var wg sync.WaitGroup
	for range s.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range ch {
				var data []byte
				var err error
				if e.mode == filemode.Symlink {
					data = []byte(e.link)
				} else {
					data, err = readFile(s.root+"/"+e.rel, e.st.size)
				}
				if err != nil {
					mu.Lock()
					unreadable = append(unreadable, e)
					mu.Unlock()
					progress.add(1)
					continue
				}
				e.hash = objectHash(plumbing.BlobObject, data)
				if out != nil {
					if err := out.add(plumbing.BlobObject, e.hash, data); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				}
				progress.add(1)
			}
		}()
	}
	for _, e := range todo {
		ch <- e
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	// Drop what could not be read: it is left out, not recorded empty.
	sc.files -= len(unreadable)
	for _, bad := range unreadable {
		sc.leftOut = append(sc.leftOut, LeftOut{Path: bad.rel, Reason: "unreadable"})
		dir := path.Dir(bad.rel)
		if dir == "." {
			dir = ""
		}
		d := sc.dirs[dir]
		for i, e := range d.files {
			if e == bad {
				d.files = append(d.files[:i], d.files[i+1:]...)
				break
			}
		}
	}
	return nil
}

// readFile reads a regular file without following a symlink that may
// have replaced it since the walk.
func readFile(name string, size int64) ([]byte, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var b bytes.Buffer
	b.Grow(int(size) + 512)
	if _, err := b.ReadFrom(f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// emptyTree is the id of the tree with no entries.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

// buildTrees computes the tree of every directory, bottom up, encoding and
// storing only the directories that changed since the cache. A directory
// whose entries (or, for the root, itself) have permissions other than
// their defaults gets a permsName blob listing them.
func (s *Store) buildTrees(sc *scan, cache *statCache, out sink) (plumbing.Hash, error) {
	order := make([]*dirScan, 0, len(sc.dirs))
	for _, d := range sc.dirs {
		order = append(order, d)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].depth > order[j].depth })
	for _, d := range order {
		if d.fixed {
			continue // its tree is the base's
		}
		entries := make([]object.TreeEntry, 0, len(d.files)+len(d.subdirs))
		dirty := false
		for _, e := range d.files {
			entries = append(entries, object.TreeEntry{Name: escape(e.name), Mode: e.mode, Hash: e.hash})
			if cache == nil {
				dirty = true
				continue
			}
			if c, ok := cache.files[e.rel]; !ok || c.hash != e.hash || c.mode != e.st.mode {
				dirty = true
			}
		}
		for _, name := range d.subdirs {
			rel := name
			if d.rel != "" {
				rel = d.rel + "/" + name
			}
			sub, ok := sc.dirs[rel]
			if !ok || sub.skip {
				continue
			}
			entries = append(entries, object.TreeEntry{Name: escape(name), Mode: filemode.Dir, Hash: sub.tree})
			// A subdirectory's permissions are recorded here, in its
			// parent's tree.
			if c, ok := cache.dir(rel); sub.dirty || !ok || c.mode != sub.mode {
				dirty = true
			}
		}
		d.n = len(entries)
		if c, ok := cache.dir(d.rel); !ok || c.n != uint32(len(entries)) || d.rel == "" && c.mode != d.mode {
			dirty = true
		} else if !dirty {
			d.tree = c.hash
			continue
		}
		d.dirty = true
		if perms := sc.perms(d); len(perms) > 0 {
			data := encodePerms(perms)
			h := objectHash(plumbing.BlobObject, data)
			if out != nil {
				if err := out.add(plumbing.BlobObject, h, data); err != nil {
					return plumbing.ZeroHash, err
				}
			}
			entries = append(entries, object.TreeEntry{Name: permsName, Mode: filemode.Regular, Hash: h})
		}
		if len(entries) == 0 {
			d.tree = emptyTree
			if out != nil {
				if err := out.add(plumbing.TreeObject, emptyTree, nil); err != nil {
					return plumbing.ZeroHash, err
				}
			}
			continue
		}
		sort.Sort(object.TreeEntrySorter(entries))
		data, err := encodeTree(entries)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("encode tree %s: %w", d.rel, err)
		}
		d.tree = objectHash(plumbing.TreeObject, data)
		if out != nil {
			if err := out.add(plumbing.TreeObject, d.tree, data); err != nil {
				return plumbing.ZeroHash, err
			}
		}
	}
	return sc.dirs[""].tree, nil
}

// perms lists the entries of d whose permissions are not their defaults,
// and the root itself as ".".
func (sc *scan) perms(d *dirScan) []permRecord {
	var out []permRecord
	if d.rel == "" && d.mode&permBits != defaultPerm(filemode.Dir) {
		out = append(out, permRecord{name: ".", perm: d.mode & permBits})
	}
	for _, e := range d.files {
		if p := e.perm(); p != defaultPerm(e.mode) {
			out = append(out, permRecord{name: e.name, perm: p})
		}
	}
	for _, name := range d.subdirs {
		sub, ok := sc.dirs[join(d.rel, name)]
		if ok && !sub.skip && sub.mode&permBits != defaultPerm(filemode.Dir) {
			out = append(out, permRecord{name: name, perm: sub.mode & permBits})
		}
	}
	return out
}

func (c *statCache) dir(rel string) (cachedDir, bool) {
	if c == nil {
		return cachedDir{}, false
	}
	d, ok := c.dirs[rel]
	return d, ok
}

// encodeTree encodes sorted entries in git's tree format.
func encodeTree(entries []object.TreeEntry) ([]byte, error) {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 && entries[i-1].Name == e.Name {
			return nil, fmt.Errorf("two entries named %q", e.Name)
		}
		fmt.Fprintf(&b, "%o %s\x00", e.Mode, e.Name)
		b.Write(e.Hash[:])
	}
	return []byte(b.String()), nil
}
