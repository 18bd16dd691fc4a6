package watch

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/pathglob"
)

// Options configure a Tree. The zero value watches everything.
type Options struct {
	// Exclude lists globs, relative to the root, of paths checkpoints
	// leave out (matched with pathglob.Match: ** crosses directories). An
	// excluded directory is not watched and changes under it are not
	// reported.
	Exclude []string
	// MaxPaths bounds the dirty set: past it the set is dropped and the
	// snapshot is Full "too many changes". Zero means 1<<20.
	MaxPaths int
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger

	// hooks is set only by this package's tests.
	hooks *hooks
}

// hooks let tests force what the kernel cannot be made to do safely.
type hooks struct {
	// beforeRead runs in the reader goroutine before it reads events; a
	// test blocks in it to let the kernel queue overflow.
	beforeRead func()
	// addWatch replaces unix.InotifyAddWatch.
	addWatch func(fd int, path string, mask uint32) (int, error)
}

// Path is one path that may have changed, relative to the root and
// slash-separated; "." is the root directory itself (its permissions).
type Path struct {
	Rel string
	// Tree says everything below this directory may have changed too (it
	// was created or moved in, or its watch was set up after it may have
	// been written): a checkpoint must read it whole.
	Tree bool
}

// Snapshot is what changed since the tree was last Recorded.
type Snapshot struct {
	// Epoch is handed back to [Tree.Recorded].
	Epoch uint64
	// Base is the tree id last Recorded; "" when none, and then Full is
	// set.
	Base string
	// Paths is sorted by Rel, without duplicates, and has no path below a
	// Tree path. It means nothing when Full is set.
	Paths []Path
	// Full, when not empty, says the set cannot be trusted and why, for
	// people: the checkpoint must walk everything.
	Full string
}

// Status describes a Tree, for people and for tests.
type Status struct {
	Root      string
	Watches   int           // directories watched
	Dirty     int           // paths marked since the base, counted once per segment
	Full      string        // the reason the next snapshot would give, "" if none
	Events    uint64        // inotify events read
	Overflows uint64        // kernel queue overflows seen
	MemBytes  int64         // approximate size of the Go-side structures
	Idle      time.Duration // time since the last Snapshot
}

// Reasons a snapshot is Full.
const (
	reasonStarting = "watch starting"
	reasonOverflow = "event queue overflowed"
	reasonMounts   = "mounts under the workspace changed"
	reasonRootGone = "workspace moved or deleted"
	reasonTooMany  = "too many changes"
	reasonNoBase   = "no tree recorded yet"
)

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR |
	unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// maxSegments bounds the segments kept when Recorded is not called: the
// two oldest are merged, which only makes later snapshots report more.
const maxSegments = 64

// dir is one watched directory. It keeps only its name and its parent's
// watch descriptor, so that a directory moved within the tree moves its
// whole subtree by one update, and memory per directory stays small.
type dir struct {
	parent int32 // -1 for the root
	name   string
	dev    uint64
}

type childKey struct {
	parent int32
	name   string
}

// segment holds what changed between two snapshots.
type segment struct {
	epoch uint64          // 0 while open
	paths map[string]bool // rel → Tree; nil once a gap makes it useless
	gap   string
}

// Tree watches one directory tree with inotify. Its methods are safe for
// concurrent use. Callers must Close it.
type Tree struct {
	root    string
	exclude []string
	max     int
	log     *slog.Logger
	hooks   hooks

	ifd    int // inotify
	efd    int // eventfd, written by Close
	mounts *mountTable
	done   chan struct{}

	mu        sync.Mutex
	dirs      map[int32]*dir
	children  map[childKey]int32
	rootWd    int32
	rootIno   [2]uint64 // dev, ino of the root at set-up
	mountList []string
	starting  bool
	// walking is set while a walk of the whole tree holds mu, and
	// walkWhy says why it walks: a snapshot meanwhile is Full with it.
	walking   atomic.Bool
	walkWhy   atomic.Value // string
	permanent string       // a gap every new segment starts with
	base      string
	baseEpoch uint64
	epoch     uint64
	segs      []*segment // closed ones, then the open one last
	dirty     int        // sum of len(paths) over segs
	events    uint64
	overflows uint64
	lastSnap  time.Time
	closed    bool
	buf       []byte
	evs       []event
	rescan    bool
	// sawLinks says a regular file with several hard links was seen in
	// the tree: a change through one name changes the others, with no
	// event naming them.
	sawLinks bool
}

// Open starts watching root, which must be absolute with its symlinks
// resolved. Watches are set up in a goroutine: until that is done every
// snapshot is Full "watch starting".
func Open(root string, o Options) (*Tree, error) {
	if !strings.HasPrefix(root, "/") {
		return nil, fmt.Errorf("watch %s: root is not absolute", root)
	}
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("watch %s: not a directory", root)
	}
	t := &Tree{
		root:     strings.TrimSuffix(root, "/"),
		exclude:  o.Exclude,
		max:      o.MaxPaths,
		log:      o.Logger,
		done:     make(chan struct{}),
		dirs:     make(map[int32]*dir),
		children: make(map[childKey]int32),
		rootWd:   -1,
		rootIno:  [2]uint64{st.Dev, st.Ino},
		starting: true,
		lastSnap: time.Now(),
		buf:      make([]byte, 64<<10),
	}
	if t.root == "" {
		t.root = "/"
	}
	if t.max <= 0 {
		t.max = 1 << 20
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if o.hooks != nil {
		t.hooks = *o.hooks
	}
	var err error
	if t.ifd, err = unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err != nil {
		return nil, fmt.Errorf("watch %s: inotify: %w", root, err)
	}
	if t.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		unix.Close(t.ifd)
		return nil, fmt.Errorf("watch %s: eventfd: %w", root, err)
	}
	if t.mounts, err = openMountTable(); err != nil {
		unix.Close(t.ifd)
		unix.Close(t.efd)
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	if t.mountList, err = t.mounts.under(t.root); err != nil {
		t.closeFds()
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	t.segs = []*segment{{paths: map[string]bool{}, gap: reasonStarting}}
	t.walkWhy.Store(reasonStarting)
	t.walking.Store(true)
	go t.run()
	return t, nil
}

func (t *Tree) closeFds() {
	unix.Close(t.ifd)
	unix.Close(t.efd)
	t.mounts.close()
}

// Close stops watching and releases the inotify descriptor.
func (t *Tree) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	var one [8]byte
	one[0] = 1
	if _, err := unix.Write(t.efd, one[:]); err != nil {
		return fmt.Errorf("close watch %s: %w", t.root, err)
	}
	<-t.done
	t.closeFds()
	return nil
}

// run sets up the watches, then reads events until Close.
func (t *Tree) run() {
	defer close(t.done)
	t.mu.Lock()
	t.walk(-1, "", ".", 0, nil)
	t.drain()
	t.starting = false
	t.walking.Store(false)
	t.log.Debug("watch set up", "root", t.root, "watches", len(t.dirs))
	t.mu.Unlock()

	fds := []unix.PollFd{{Fd: int32(t.ifd), Events: unix.POLLIN}, {Fd: int32(t.efd), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if fds[1].Revents != 0 {
			return
		}
		if err != nil {
			t.mu.Lock()
			t.gap(fmt.Sprintf("poll inotify: %v", err))
			t.mu.Unlock()
			return
		}
		if t.hooks.beforeRead != nil {
			t.hooks.beforeRead()
		}
		t.mu.Lock()
		t.drain()
		t.mu.Unlock()
	}
}

// open returns the open segment.
func (t *Tree) open() *segment { return t.segs[len(t.segs)-1] }

// gap marks the open segment as untrustworthy, keeping its first reason,
// and drops its paths.
func (t *Tree) gap(reason string) {
	s := t.open()
	if s.gap == "" {
		s.gap = reason
		t.log.Debug("watch gap", "root", t.root, "reason", reason)
	}
	t.dirty -= len(s.paths)
	s.paths = nil
}

// setPermanent records a state the watch cannot recover from: the open
// segment and every later one carry reason.
// Broken returns why every snapshot of t will be Full from now on (the
// root gone, the watch limit reached, a filesystem that does not report),
// "" when nothing says so: a caller may open a new Tree once the cause is
// gone.
func (t *Tree) Broken() string {
	if t.walking.Load() {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.permanent
}

func (t *Tree) setPermanent(reason string) {
	if t.permanent == "" {
		t.permanent = reason
		t.log.Warn("watch incomplete", "root", t.root, "reason", reason)
	}
	t.gap(reason)
}

// mark adds rel to the open segment.
func (t *Tree) mark(rel string, tree bool) {
	s := t.open()
	if s.paths == nil {
		return
	}
	if old, ok := s.paths[rel]; ok {
		if tree && !old {
			s.paths[rel] = true
		}
		return
	}
	s.paths[rel] = tree
	t.dirty++
	if t.dirty > t.max {
		for _, s := range t.segs {
			if s.gap == "" {
				s.gap = reasonTooMany
			}
			s.paths = nil
		}
		t.dirty = 0
		t.log.Debug("watch gap", "root", t.root, "reason", reasonTooMany)
	}
}

func (t *Tree) excluded(rel string) bool {
	for _, p := range t.exclude {
		if pathglob.Match(p, rel) {
			return true
		}
	}
	return false
}

func (t *Tree) abs(rel string) string {
	if rel == "." {
		return t.root
	}
	if t.root == "/" {
		return "/" + rel
	}
	return t.root + "/" + rel
}

// relOf returns the path of a watched directory; ok is false for a
// descriptor that is not (or no longer) known.
func (t *Tree) relOf(wd int32) (string, bool) {
	d, ok := t.dirs[wd]
	if !ok {
		return "", false
	}
	if d.parent < 0 {
		return ".", true
	}
	var names []string
	for d.parent >= 0 {
		names = append(names, d.name)
		p, ok := t.dirs[d.parent]
		if !ok {
			return "", false
		}
		d = p
	}
	slices.Reverse(names)
	return strings.Join(names, "/"), true
}

func join(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}

// walk watches the directory rel (named name in the directory watched by
// parent, whose device is pdev) and every directory under it. Each
// directory is listed after its watch is added, so that nothing made in
// it in between is missed. seen, when not nil, collects the descriptors.
func (t *Tree) walk(parent int32, name, rel string, pdev uint64, seen map[int32]bool) {
	type pending struct {
		parent int32
		name   string
		rel    string
		pdev   uint64
	}
	stack := []pending{{parent, name, rel, pdev}}
	n := 0
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		wd, dev, ok := t.add(p.parent, p.name, p.rel, p.pdev)
		if !ok {
			continue
		}
		if seen != nil {
			seen[wd] = true
		}
		f, err := os.Open(t.abs(p.rel))
		if err != nil {
			if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
				t.gap(fmt.Sprintf("list %s: %v", p.rel, err))
			}
			continue
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil && !errors.Is(err, unix.ENOENT) {
			t.gap(fmt.Sprintf("list %s: %v", p.rel, err))
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				// A file written before its directory was watched is
				// covered by the Tree path, but not its names elsewhere.
				if fi, err := e.Info(); err == nil {
					if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
						t.sawLinks = true
						t.gap(fmt.Sprintf("%s has hard-linked files", p.rel))
					}
				}
			}
			if !e.IsDir() {
				continue // symlinks are entries, never followed
			}
			crel := join(p.rel, e.Name())
			if t.excluded(crel) {
				continue
			}
			stack = append(stack, pending{wd, e.Name(), crel, dev})
		}
		// A big walk must not let the kernel queue overflow meanwhile.
		if n++; n%256 == 0 {
			t.drainOnce()
		}
	}
}

// add adds the watch of one directory and records it.
func (t *Tree) add(parent int32, name, rel string, pdev uint64) (int32, uint64, bool) {
	addWatch := unix.InotifyAddWatch
	if t.hooks.addWatch != nil {
		addWatch = t.hooks.addWatch
	}
	path := t.abs(rel)
	w, err := addWatch(t.ifd, path, watchMask)
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return 0, 0, false // gone: its parent's watch has the event
	case errors.Is(err, unix.ENOSPC):
		limit := "?"
		if n := MaxUserWatches(); n > 0 {
			limit = strconv.Itoa(n)
		}
		t.setPermanent("watch limit reached (fs.inotify.max_user_watches = " + limit + ")")
		return 0, 0, false
	default:
		t.gap(fmt.Sprintf("watch %s: %v", rel, err))
		return 0, 0, false
	}
	wd := int32(w)
	dev := pdev
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		dev = st.Dev
	}
	if parent < 0 || dev != pdev {
		var fs unix.Statfs_t
		if err := unix.Statfs(path, &fs); err == nil {
			if kind := unreporting(fs.Type); kind != "" {
				t.setPermanent(fmt.Sprintf("%s at %s does not report changes", kind, rel))
			}
		} else if !errors.Is(err, unix.ENOENT) {
			t.gap(fmt.Sprintf("statfs %s: %v", rel, err))
		}
	}
	if parent < 0 {
		t.rootWd = wd
	}
	if d, ok := t.dirs[wd]; ok {
		// The same directory, seen again: it moved here.
		if t.children[childKey{d.parent, d.name}] == wd {
			delete(t.children, childKey{d.parent, d.name})
		}
		d.parent, d.name, d.dev = parent, name, dev
	} else {
		t.dirs[wd] = &dir{parent: parent, name: name, dev: dev}
	}
	if parent >= 0 {
		t.children[childKey{parent, name}] = wd
	}
	return wd, dev, true
}

// forget drops a directory and everything watched under it, removing
// their watches: it was moved out of its place.
func (t *Tree) forget(wd int32) {
	var gone []int32
	for w := range t.dirs {
		for a := w; a >= 0; {
			if a == wd {
				gone = append(gone, w)
				break
			}
			d, ok := t.dirs[a]
			if !ok {
				break
			}
			a = d.parent
		}
	}
	for _, w := range gone {
		t.drop(w)
		unix.InotifyRmWatch(t.ifd, uint32(w))
	}
}

func (t *Tree) drop(wd int32) {
	d, ok := t.dirs[wd]
	if !ok {
		return
	}
	if t.children[childKey{d.parent, d.name}] == wd {
		delete(t.children, childKey{d.parent, d.name})
	}
	delete(t.dirs, wd)
}

// drain reads and handles every event already queued, then does the
// rescan an overflow asked for.
func (t *Tree) drain() {
	for t.drainOnce() {
	}
	if t.rescan {
		t.rescan = false
		t.rewalk()
	}
}

// drainOnce handles one read's worth of events and reports whether there
// may be more.
func (t *Tree) drainOnce() bool {
	n, err := unix.Read(t.ifd, t.buf)
	if err == unix.EINTR {
		return true
	}
	if err == unix.EAGAIN {
		return false
	}
	if err != nil {
		t.gap(fmt.Sprintf("read inotify: %v", err))
		t.rescan = true
		return false
	}
	if n <= 0 {
		return false
	}
	var perr error
	t.evs, perr = parseEvents(t.buf[:n], t.evs[:0])
	for _, ev := range t.evs {
		t.handle(ev)
	}
	if perr != nil {
		t.gap(perr.Error())
		t.rescan = true
	}
	return true
}

// rewalk adds watches for every directory, after events were lost, and
// removes the watches of directories no longer in the tree.
func (t *Tree) rewalk() {
	why := t.open().gap
	if why == "" {
		why = reasonStarting
	}
	t.walkWhy.Store(why)
	t.walking.Store(true)
	defer t.walking.Store(false)
	seen := make(map[int32]bool, len(t.dirs))
	t.walk(-1, "", ".", 0, seen)
	for wd := range t.dirs {
		if !seen[wd] {
			t.drop(wd)
			unix.InotifyRmWatch(t.ifd, uint32(wd))
		}
	}
}

func (t *Tree) handle(ev event) {
	t.events++
	if ev.mask&unix.IN_Q_OVERFLOW != 0 {
		t.overflows++
		t.gap(reasonOverflow)
		t.rescan = true
		return
	}
	if ev.wd == t.rootWd && ev.mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT|unix.IN_IGNORED) != 0 {
		t.setPermanent(reasonRootGone)
		return
	}
	if ev.mask&unix.IN_UNMOUNT != 0 {
		t.gap(reasonMounts)
		t.rescan = true
	}
	if ev.mask&unix.IN_IGNORED != 0 {
		t.drop(ev.wd)
		return
	}
	rel, ok := t.relOf(ev.wd)
	if !ok {
		// Removed, or moved out: its paths are covered by its parent's
		// event, but not the other names of a file it changed.
		if t.sawLinks && ev.mask&(unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE) != 0 && ev.mask&unix.IN_ISDIR == 0 {
			t.gap("a file changed in a directory no longer watched, and the tree has hard-linked files")
		}
		return
	}
	if ev.name == "" {
		if ev.mask&(unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MODIFY) != 0 {
			t.mark(rel, false)
		}
		return
	}
	crel := join(rel, ev.name)
	if t.excluded(crel) {
		// A checkpoint lists the excluded paths it leaves out: one made,
		// removed or moved changes that list. What happens under it does
		// not, and is not watched.
		if ev.mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
			t.mark(crel, false)
		}
		return
	}
	isDir := ev.mask&unix.IN_ISDIR != 0
	switch {
	case isDir && ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		t.mark(crel, true)
		if d := t.dirs[ev.wd]; d != nil {
			t.walk(ev.wd, ev.name, crel, d.dev, nil)
		}
	case isDir && ev.mask&(unix.IN_MOVED_FROM|unix.IN_DELETE) != 0:
		t.mark(crel, true)
		if ev.mask&unix.IN_MOVED_FROM != 0 {
			if w, ok := t.children[childKey{ev.wd, ev.name}]; ok {
				t.forget(w)
			}
		}
	default:
		t.mark(crel, false)
		switch {
		case isDir:
		case ev.mask&(unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE) != 0:
			t.checkLinks(crel)
		case ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && !t.sawLinks:
			var st unix.Stat_t
			if unix.Lstat(t.abs(crel), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
				t.sawLinks = true
			}
		}
	}
}

// checkLinks makes the open segment untrustworthy when rel is a file
// with other hard links: they changed too, and no event names them.
func (t *Tree) checkLinks(rel string) {
	s := t.open()
	if s.paths == nil {
		return
	}
	var st unix.Stat_t
	if err := unix.Lstat(t.abs(rel), &st); err != nil {
		if t.sawLinks {
			// Gone before its links could be counted.
			t.gap(fmt.Sprintf("%s changed and is gone, and the tree has hard-linked files", rel))
		}
		return
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
		t.sawLinks = true
		t.gap(fmt.Sprintf("%s, which has %d hard links, changed", rel, st.Nlink))
	}
}

// checkOutside notices what no inotify event reports: the root moved or
// deleted (an ancestor can be renamed without an event), and mounts made
// or removed under the root.
func (t *Tree) checkOutside() {
	var st unix.Stat_t
	if err := unix.Lstat(t.root, &st); err != nil || st.Dev != t.rootIno[0] || st.Ino != t.rootIno[1] {
		t.setPermanent(reasonRootGone)
	}
	if !t.mounts.changed() {
		return
	}
	list, err := t.mounts.under(t.root)
	if err != nil {
		t.gap(err.Error())
		return
	}
	if !slices.Equal(list, t.mountList) {
		t.mountList = list
		t.gap(reasonMounts)
		t.rewalk()
	}
}

// Snapshot drains the events already queued, closes the current segment
// and returns what changed since the base. The caller reads the paths
// and then reports what it recorded with [Tree.Recorded].
func (t *Tree) Snapshot() Snapshot {
	if t.walking.Load() {
		// A walk holds the lock for seconds in a large tree: do not wait
		// for it. No epoch: what a checkpoint records now is not kept.
		return Snapshot{Full: t.walkWhy.Load().(string)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.drain()
		t.checkOutside()
	} else {
		t.gap("watch closed")
	}
	if t.starting {
		t.gap(reasonStarting)
	}
	t.epoch++
	t.open().epoch = t.epoch
	snap := Snapshot{Epoch: t.epoch, Base: t.base}
	union := map[string]bool{}
	for _, s := range t.segs {
		if s.gap != "" && snap.Full == "" {
			snap.Full = s.gap
		}
		if snap.Full == "" {
			for rel, tree := range s.paths {
				union[rel] = union[rel] || tree
			}
		}
	}
	if t.base == "" {
		// Without a base any snapshot is Full; say why this interval was
		// bad if it was ("watch starting"), else that there is no base.
		snap.Full = t.open().gap
		if snap.Full == "" {
			snap.Full = reasonNoBase
		}
	}
	if snap.Full == "" {
		snap.Paths = minimise(union)
	}
	next := &segment{paths: map[string]bool{}}
	t.segs = append(t.segs, next)
	if t.starting {
		t.gap(reasonStarting)
	} else if t.permanent != "" {
		t.gap(t.permanent)
	}
	if len(t.segs) > maxSegments {
		t.mergeOldest()
	}
	t.lastSnap = time.Now()
	return snap
}

// mergeOldest merges the two oldest closed segments into the later one,
// which makes a Recorded of the older epoch keep the paths of both: more
// to read, never less.
func (t *Tree) mergeOldest() {
	a, b := t.segs[0], t.segs[1]
	if b.gap == "" {
		b.gap = a.gap
	}
	if b.gap != "" {
		t.dirty -= len(a.paths) + len(b.paths)
		b.paths = nil
	} else {
		for rel, tree := range a.paths {
			if old, ok := b.paths[rel]; ok {
				t.dirty--
				b.paths[rel] = old || tree
			} else {
				b.paths[rel] = tree
			}
		}
	}
	t.segs = t.segs[1:]
}

// minimise sorts the paths and drops those below a Tree path.
func minimise(set map[string]bool) []Path {
	out := make([]Path, 0, len(set))
	for rel, tree := range set {
		covered := false
		for p := rel; ; {
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				if p != "." && set["."] {
					covered = true
				}
				break
			}
			p = p[:i]
			if set[p] {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, Path{Rel: rel, Tree: tree})
		}
	}
	slices.SortFunc(out, func(a, b Path) int { return strings.Compare(a.Rel, b.Rel) })
	return out
}

// Recorded tells the tree that a checkpoint recorded tree as the state of
// the workspace as of the snapshot with this epoch. An epoch older than
// the base, or one never handed out, is ignored, so checkpoints may
// finish out of order.
func (t *Tree) Recorded(epoch uint64, tree string) {
	if t.walking.Load() {
		// A walk holds the lock for seconds in a large tree, and the
		// walk that follows a gap makes the next snapshot Full anyway:
		// forgetting this base only makes it read more.
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if epoch <= t.baseEpoch || epoch > t.epoch {
		return
	}
	t.base, t.baseEpoch = tree, epoch
	i := 0
	for i < len(t.segs)-1 && t.segs[i].epoch <= epoch {
		t.dirty -= len(t.segs[i].paths)
		i++
	}
	t.segs = slices.Delete(t.segs, 0, i)
}

// Status reports the state of the tree. It handles the events already
// queued, into the open segment.
func (t *Tree) Status() Status {
	if t.walking.Load() {
		return Status{Root: t.root, Full: t.walkWhy.Load().(string)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.drain()
		t.checkOutside()
	}
	st := Status{
		Root:      t.root,
		Watches:   len(t.dirs),
		Dirty:     t.dirty,
		Events:    t.events,
		Overflows: t.overflows,
		Idle:      time.Since(t.lastSnap),
	}
	for _, s := range t.segs {
		if s.gap != "" {
			st.Full = s.gap
			break
		}
	}
	if st.Full == "" && t.starting {
		st.Full = reasonStarting
	}
	if st.Full == "" && t.base == "" {
		st.Full = reasonNoBase
	}
	// Per directory: the dir struct (32), its name, a dirs entry (~40
	// with the pointer) and a children entry (~48).
	for _, d := range t.dirs {
		st.MemBytes += 32 + 40 + 48 + 2*int64(len(d.name))
	}
	for _, s := range t.segs {
		for rel := range s.paths {
			st.MemBytes += 48 + int64(len(rel))
		}
	}
	return st
}
