package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Result says what a checkpoint did.
type Result struct {
	ID string `json:"id"`
	// Tree is the id of the tree the checkpoint records: checkpoints of
	// the same state of the workspace have the same tree.
	Tree    string    `json:"tree"`
	Changed bool      `json:"changed"`  // false: nothing changed, ID is the existing checkpoint
	Files   int       `json:"files"`    // files and symlinks recorded
	Hashed  int       `json:"hashed"`   // files read and hashed this time
	LeftOut []LeftOut `json:"left_out"` // paths not recorded, with the reason
	Bytes   int64     `json:"bytes"`    // compressed bytes written
	// Walk says why the checkpoint walked the whole workspace rather
	// than read what its watcher saw change ("" when it did not).
	Walk     string        `json:"walk,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Checkpoint records the workspace. When nothing changed since the newest
// checkpoint it writes nothing and returns that checkpoint's id.
func (s *Store) Checkpoint(msg string) (Result, error) {
	var res Result
	err := s.locked(true, func() error {
		r, _, err := s.checkpointLocked(msg, true, WalkAlways)
		res = r
		return err
	})
	return res, err
}

// Current returns the newest checkpoint when the watcher saw nothing
// change since it, without taking the store's lock or reading any object:
// the checkpoint before a read-only step, on the path that answers it.
// ok is false when a checkpoint must be taken (CheckpointIf).
func (s *Store) Current() (id string, ok bool) {
	if s.opts.Watch == nil {
		return "", false
	}
	head, err := s.head()
	if err != nil || head.IsZero() {
		return "", false
	}
	if !s.opts.Watch.Changes(s.root).none(head) {
		return "", false
	}
	return head.String(), true
}

// ErrWouldWalk says that CheckpointIf did nothing: it would have walked
// the workspace, which its Walks forbade.
var ErrWouldWalk = errors.New("the checkpoint would walk the whole workspace")

// Walks says when CheckpointIf may walk the whole workspace.
type Walks int

const (
	// WalkAlways walks whenever the watcher cannot tell what changed:
	// Checkpoint.
	WalkAlways Walks = iota
	// WalkWhenWatched walks when a watcher answered but cannot tell
	// (the first checkpoint it sees, a gap in its events), and does
	// nothing when none answered.
	WalkWhenWatched
	// WalkNever checkpoints only when the watcher can tell what changed.
	WalkNever
)

// CheckpointIf is Checkpoint, except that it does nothing, and returns
// an error wrapping ErrWouldWalk with the watcher's reason, where w
// forbids the walk it would take.
func (s *Store) CheckpointIf(msg string, w Walks) (Result, error) {
	var res Result
	err := s.locked(true, func() error {
		r, _, err := s.checkpointLocked(msg, true, w)
		res = r
		return err
	})
	return res, err
}

func (s *Store) cachePath() string { return filepath.Join(s.dir, "statcache") }

// checkpointLocked takes a checkpoint under the exclusive lock and returns
// the scan it made, for a restore to compare against (when quick, none
// when the watcher saw nothing change since the newest checkpoint).
func (s *Store) checkpointLocked(msg string, quick bool, w Walks) (Result, *scan, error) {
	start := time.Now()
	head, err := s.head()
	if err != nil {
		return Result{}, nil, err
	}
	ch := s.changes()
	switch walks := ch.Full != "" || head.IsZero(); {
	case walks && w == WalkNever, ch.Absent && w == WalkWhenWatched:
		return Result{}, nil, fmt.Errorf("%w: %s", ErrWouldWalk, ch.Full)
	}
	st, err := s.readPacks()
	if err != nil {
		return Result{}, nil, err
	}
	defer st.Close()
	if quick && ch.none(head) {
		// Nothing changed since the newest checkpoint: it is this one.
		if c, err := object.GetCommit(st, head); err == nil {
			if left, err := leftOutOf(st, c); err == nil {
				files, _ := filesOf(c)
				if left == nil {
					left = []LeftOut{}
				}
				return Result{ID: head.String(), Tree: c.TreeHash.String(), Files: files, LeftOut: left, Duration: time.Since(start)}, nil, nil
			}
		}
	}
	pack, err := newPackSink(filepath.Join(s.git, "objects", "pack"))
	if err != nil {
		return Result{}, nil, err
	}
	sc, cache, err := s.scanNow(st, head, ch, pack, true)
	if err != nil {
		pack.abort()
		return Result{}, nil, err
	}
	tree, err := s.buildTrees(sc, cache, pack)
	if err != nil {
		pack.abort()
		return Result{}, nil, err
	}
	res, err := s.record(st, msg, head, sc, cache, tree, pack, start)
	if err == nil && s.opts.Watch != nil {
		s.opts.Watch.Recorded(s.root, ch.Epoch, res.ID)
	}
	if err == nil && res.Changed && len(st.names) >= maxPacks {
		if err := s.consolidate(); err != nil {
			s.log.Debug("packs not merged", "err", err)
		}
	}
	return res, sc, err
}

// changes asks the watcher what changed since its base.
func (s *Store) changes() Changes {
	if s.opts.Watch == nil {
		return Changes{Full: "no watcher", Absent: true}
	}
	return s.opts.Watch.Changes(s.root)
}

// scanNow finds the workspace as it is: what the watcher said changed
// since its base (ch), or, when there is no watcher or it cannot tell, a
// walk of everything with the stat cache. It hashes what it must, into
// out when out is not nil, and returns the scan with its paths left out
// sorted and the cache it used (nil after a watched scan). report says
// whether to report progress.
func (s *Store) scanNow(st storer.EncodedObjectStorer, head plumbing.Hash, ch Changes, out sink, report bool) (*scan, *statCache, error) {
	if ch.Full == "" && !head.IsZero() {
		sc, err := s.scanChanges(st, ch, out)
		if err == nil {
			return sc, nil, nil
		}
		// The base may be gone (gc) or damaged: walk instead.
		s.log.Debug("watched checkpoint: walking instead", "err", err)
		ch.Full = err.Error()
	}
	var cache *statCache
	if !head.IsZero() {
		cache = loadCache(s.cachePath())
	}
	sc, err := s.walk(cache)
	if err != nil {
		return nil, nil, err
	}
	sc.full = ch.Full
	var prog *progress
	if report {
		prog = newProgress(s.opts.Progress, "checkpoint")
	}
	err = s.hashFiles(sc, out, prog)
	prog.done()
	if err != nil {
		return nil, nil, err
	}
	sortLeftOut(sc.leftOut)
	return sc, cache, nil
}

func sortLeftOut(l []LeftOut) {
	sort.Slice(l, func(i, j int) bool { return l[i].Path < l[j].Path })
}

// record writes the checkpoint of scan sc, whose root tree is tree, as a
// child of head, unless head already records it.
func (s *Store) record(st storer.EncodedObjectStorer, msg string, head plumbing.Hash, sc *scan, cache *statCache, tree plumbing.Hash, pack *packSink, start time.Time) (Result, error) {
	res := Result{Files: sc.files, Hashed: sc.hashed, LeftOut: sc.leftOut, Walk: sc.full, Tree: tree.String()}
	if res.LeftOut == nil {
		res.LeftOut = []LeftOut{}
	}
	// The paths left out go with the checkpoint, so that a restore can
	// tell "did not exist" from "existed but was not recorded".
	var leftList plumbing.Hash
	var leftData []byte
	if len(sc.leftOut) > 0 {
		leftData = encodeLeftOut(sc.leftOut)
		leftList = objectHash(plumbing.BlobObject, leftData)
	}
	if !head.IsZero() {
		var prevTree, prevLeft plumbing.Hash
		if cache != nil && cache.head == head {
			prevTree, prevLeft = cache.tree, cache.left
		} else {
			prev, err := object.GetCommit(st, head)
			if err != nil {
				pack.abort()
				return Result{}, fmt.Errorf("read newest checkpoint %s: %w", short(head), err)
			}
			prevTree, prevLeft = prev.TreeHash, leftListOf(prev)
		}
		if prevTree == tree && prevLeft == leftList {
			pack.abort()
			res.ID = head.String()
			res.Duration = time.Since(start)
			if sc.watched || sc.hashed == 0 && cache != nil && cache.head == head {
				return res, nil // the cache already says all of this, or cannot
			}
			return res, s.saveCache(sc, head, tree, leftList)
		}
	}
	if len(leftData) > 0 {
		if err := pack.add(plumbing.BlobObject, leftList, leftData); err != nil {
			pack.abort()
			return Result{}, err
		}
	}
	when := now()
	c := &object.Commit{
		Author:    object.Signature{Name: "undosh", Email: "undosh@localhost", When: when},
		Committer: object.Signature{Name: "undosh", Email: "undosh@localhost", When: when},
		Message:   commitMessage(msg, sc, leftList),
		TreeHash:  tree,
	}
	if !head.IsZero() {
		c.ParentHashes = []plumbing.Hash{head}
	}
	mo := &plumbing.MemoryObject{}
	if err := c.Encode(mo); err != nil {
		pack.abort()
		return Result{}, fmt.Errorf("encode checkpoint: %w", err)
	}
	data, err := readAll(mo)
	if err != nil {
		pack.abort()
		return Result{}, err
	}
	newHead := objectHash(plumbing.CommitObject, data)
	if err := pack.add(plumbing.CommitObject, newHead, data); err != nil {
		pack.abort()
		return Result{}, err
	}
	res.Bytes = pack.written
	if _, err := pack.finish(); err != nil {
		return Result{}, err
	}
	// The ref moves last, and only from the head this checkpoint read.
	if err := s.setHead(head, newHead); err != nil {
		return Result{}, err
	}
	res.ID = newHead.String()
	res.Changed = true
	res.Duration = time.Since(start)
	s.log.Debug("checkpoint", "id", short(newHead), "files", res.Files, "hashed", res.Hashed, "bytes", res.Bytes, "took", res.Duration)
	if sc.watched {
		// The stat cache stays as the last walk left it: older, so
		// a walk hashes again what changed since, never less.
		return res, nil
	}
	return res, s.saveCache(sc, newHead, tree, leftList)
}

func (s *Store) saveCache(sc *scan, head, tree, left plumbing.Hash) error {
	if err := writeCache(s.cachePath(), encodeScan(sc, head, tree, left)); err != nil {
		// The cache only saves time: losing it is not an error.
		s.log.Debug("stat cache not saved", "err", err)
	}
	list, _ := json.Marshal(sc.leftOut)
	if err := writeCache(filepath.Join(s.dir, "left-out.json"), list); err != nil {
		s.log.Debug("left-out list not saved", "err", err)
	}
	return nil
}

func commitMessage(msg string, sc *scan, leftList plumbing.Hash) string {
	if msg == "" {
		msg = "checkpoint"
	}
	msg = strings.TrimRight(msg, "\n")
	out := fmt.Sprintf("%s\n\nundosh-files: %d\nundosh-left-out: %d\n", msg, sc.files, len(sc.leftOut))
	if !leftList.IsZero() {
		out += "undosh-left-out-list: " + leftList.String() + "\n"
	}
	return out
}

// leftListOf returns the id of the list of paths a checkpoint left out,
// or the zero hash when it left out nothing.
func leftListOf(c *object.Commit) plumbing.Hash {
	for _, line := range strings.Split(c.Message, "\n") {
		if v, ok := strings.CutPrefix(line, "undosh-left-out-list: "); ok && plumbing.IsHash(v) {
			return plumbing.NewHash(v)
		}
	}
	return plumbing.ZeroHash
}

// leftOutOf returns the paths a checkpoint left out.
func leftOutOf(st storer.EncodedObjectStorer, c *object.Commit) ([]LeftOut, error) {
	if h := leftListOf(c); !h.IsZero() {
		obj, err := st.EncodedObject(plumbing.BlobObject, h)
		if err != nil {
			return nil, fmt.Errorf("read the left-out list of %s: %w", short(c.Hash), err)
		}
		data, err := readAll(obj)
		if err != nil {
			return nil, fmt.Errorf("read the left-out list of %s: %w", short(c.Hash), err)
		}
		out, err := decodeLeftOut(data)
		if err != nil {
			return nil, fmt.Errorf("the left-out list of %s does not decode: %w", short(c.Hash), err)
		}
		return out, nil
	}
	return nil, nil
}

// encodeLeftOut writes a left-out list as lines of reason, kind and a
// Go-quoted path: JSON would turn bytes that are not UTF-8 into U+FFFD.
func encodeLeftOut(l []LeftOut) []byte {
	var b strings.Builder
	for _, x := range l {
		kind := "f"
		if x.Dir {
			kind = "d"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\n", x.Reason, kind, strconv.Quote(x.Path))
	}
	return []byte(b.String())
}

func decodeLeftOut(data []byte) ([]LeftOut, error) {
	var out []LeftOut
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("bad line %q", line)
		}
		p, err := strconv.Unquote(f[2])
		if err != nil {
			return nil, fmt.Errorf("bad path in %q: %w", line, err)
		}
		out = append(out, LeftOut{Reason: f[0], Dir: f[1] == "d", Path: p})
	}
	return out, nil
}

func readAll(o plumbing.EncodedObject) ([]byte, error) {
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func (s *Store) commit(h plumbing.Hash) (*object.Commit, error) {
	return object.GetCommit(s.objects(), h)
}

func short(h plumbing.Hash) string { return h.String()[:12] }

// Info describes one checkpoint.
type Info struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
	Files   int       `json:"files"`
	LeftOut int       `json:"left_out"`
}

// Log lists the checkpoints, newest first.
func (s *Store) Log() ([]Info, error) {
	var out []Info
	err := s.locked(false, func() error {
		head, err := s.head()
		if err != nil || head.IsZero() {
			return err
		}
		stop := s.boundary()
		st := s.objects()
		for h := head; !h.IsZero(); {
			c, err := object.GetCommit(st, h)
			if err != nil {
				return fmt.Errorf("read checkpoint %s: %w", short(h), err)
			}
			out = append(out, info(c))
			if h == stop || len(c.ParentHashes) == 0 {
				break
			}
			h = c.ParentHashes[0]
		}
		return nil
	})
	if out == nil {
		out = []Info{}
	}
	return out, err
}

func info(c *object.Commit) Info {
	i := Info{ID: c.Hash.String(), Time: c.Committer.When}
	title, body, _ := strings.Cut(c.Message, "\n")
	i.Message = title
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "undosh-files: "); ok {
			i.Files, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(line, "undosh-left-out: "); ok {
			i.LeftOut, _ = strconv.Atoi(v)
		}
	}
	return i
}

// boundary is the oldest checkpoint gc kept: the chain stops there.
func (s *Store) boundary() plumbing.Hash {
	data, err := os.ReadFile(filepath.Join(s.dir, "boundary"))
	if err != nil {
		return plumbing.ZeroHash
	}
	h := strings.TrimSpace(string(data))
	if !plumbing.IsHash(h) {
		return plumbing.ZeroHash
	}
	return plumbing.NewHash(h)
}

// resolve finds a checkpoint by id prefix, or by "~N" (N back from the
// newest, ~0 being the newest).
func (s *Store) resolve(st storer.EncodedObjectStorer, ref string) (plumbing.Hash, error) {
	head, err := s.head()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if head.IsZero() {
		return plumbing.ZeroHash, ErrEmpty
	}
	ref = strings.TrimSpace(ref)
	back := -1
	if n, ok := strings.CutPrefix(ref, "~"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return plumbing.ZeroHash, fmt.Errorf("%q: %w (use an id, or ~N for N back from the newest)", ref, ErrNotFound)
		}
		back = v
	} else if len(ref) < 4 || strings.Trim(strings.ToLower(ref), "0123456789abcdef") != "" {
		return plumbing.ZeroHash, fmt.Errorf("%q: %w (use an id of at least 4 hex digits, or ~N)", ref, ErrNotFound)
	}
	if back == 0 {
		return head, nil
	}
	stop := s.boundary()
	if back < 0 && len(ref) == 40 && plumbing.IsHash(ref) {
		// A whole id needs no walk: gc removes dropped checkpoints.
		h := plumbing.NewHash(ref)
		if _, err := object.GetCommit(st, h); err == nil {
			return h, nil
		}
		return plumbing.ZeroHash, fmt.Errorf("%q: %w", ref, ErrNotFound)
	}
	var found []plumbing.Hash
	i := 0
	for h := head; !h.IsZero(); i++ {
		if back == i || back < 0 && strings.HasPrefix(h.String(), strings.ToLower(ref)) {
			if back >= 0 {
				return h, nil
			}
			found = append(found, h)
		}
		c, err := object.GetCommit(st, h)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read checkpoint %s: %w", short(h), err)
		}
		if h == stop || len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	switch len(found) {
	case 0:
		return plumbing.ZeroHash, fmt.Errorf("%q: %w", ref, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return plumbing.ZeroHash, fmt.Errorf("%q names %d checkpoints: give more digits", ref, len(found))
}
