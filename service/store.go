package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/procs"
)

// Store holds the service checkpoints of one state directory, in
// services/ beside the journal: a directory for each point with its
// record (meta.json, written last: a directory without one is a copy
// that did not finish) and its data (data/N is a copy of the service's
// Nth data path). A file unchanged since the service's previous point
// is a hard link to that point's copy.
type Store struct {
	dir string
}

// Point is a checkpoint of one service.
type Point struct {
	ID      string  `json:"id"`
	Service Service `json:"service"`
	// Time is when the copy began: a data file whose ctime is before it
	// (less the clock's margin) is as the point holds it.
	Time time.Time `json:"time"`
	// Bytes are the bytes this point copied; what it shares with the
	// point before it (hard links) is not counted again.
	Bytes int64 `json:"bytes"`
	// Frozen is how long the service answered no one; Took the whole
	// checkpoint.
	Frozen time.Duration `json:"frozen"`
	Took   time.Duration `json:"took"`
	// Method is how the copy was made consistent: "freeze" (the
	// service's processes stopped for the last pass of the copy),
	// "save" (Redis wrote its snapshot: BGSAVE), or "stopped" (the service was
	// not running: the copy a restore takes first).
	Method string `json:"method"`
	// Absent lists the data paths that did not exist (a restore removes
	// them).
	Absent []string `json:"absent,omitempty"`
}

// metaFile is a point's record.
const metaFile = "meta.json"

// Open opens (making it if need be) the service store of stateDir.
func Open(stateDir string) (*Store, error) {
	dir := filepath.Join(stateDir, "services")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("service checkpoints: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the directory point id's data is in.
func (st *Store) Dir(id string) string { return filepath.Join(st.dir, id) }

// Get reads point id.
func (st *Store) Get(id string) (Point, error) {
	if !validID(id) {
		return Point{}, fmt.Errorf("%q is not a service checkpoint (undoctl services lists them)", id)
	}
	b, err := os.ReadFile(filepath.Join(st.Dir(id), metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Point{}, fmt.Errorf("no service checkpoint %s in %s (undoctl services lists them)", id, st.dir)
	}
	if err != nil {
		return Point{}, err
	}
	var pt Point
	if err := json.Unmarshal(b, &pt); err != nil {
		return Point{}, fmt.Errorf("service checkpoint %s: %s: %w", id, filepath.Join(st.Dir(id), metaFile), err)
	}
	return pt, nil
}

// List returns the store's points, oldest first.
func (st *Store) List() ([]Point, error) {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, err
	}
	var out []Point
	for _, e := range entries {
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		if pt, err := st.Get(e.Name()); err == nil {
			out = append(out, pt)
		}
	}
	slices.SortFunc(out, func(a, b Point) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// Remove deletes point id.
func (st *Store) Remove(id string) error {
	if !validID(id) {
		return fmt.Errorf("%q is not a service checkpoint", id)
	}
	return os.RemoveAll(st.Dir(id))
}

// Size is the disk the store takes: each file once, however many points
// link it.
func (st *Store) Size() int64 { return treeSize(st.dir, map[uint64]bool{}) }

// newID names a new point: 12 hex digits.
func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func validID(id string) bool {
	if len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// latest is the newest point of the service named name, for links.
func (st *Store) latest(name string) (Point, bool) {
	pts, err := st.List()
	if err != nil {
		return Point{}, false
	}
	for i := len(pts) - 1; i >= 0; i-- {
		if pts[i].Service.Name == name {
			return pts[i], true
		}
	}
	return Point{}, false
}

// Checkpoint takes a consistent copy of s's data while it runs. Most
// of the data is copied with the service running; then its processes
// are stopped (SIGSTOP, the whole tree), what changed meanwhile is
// copied again, and they go on (SIGCONT, whatever happened). A Redis
// without an append-only file writes its snapshot instead (BGSAVE),
// which is copied once written. On an error nothing of the point is
// left.
func (st *Store) Checkpoint(ctx context.Context, s Service) (pt Point, err error) {
	if s.Unreadable != "" {
		return Point{}, fmt.Errorf("service %s cannot be checkpointed: %s", s.Name, s.Unreadable)
	}
	method := "freeze"
	if s.Kind == Redis && len(s.Data) == 1 {
		method = "save"
	}
	return st.take(ctx, s, method)
}

// take makes point s by method ("freeze", "save", or "stopped").
func (st *Store) take(ctx context.Context, s Service, method string) (pt Point, err error) {
	start := time.Now()
	pt = Point{ID: newID(), Service: s, Method: method}
	dir := st.Dir(pt.ID)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return Point{}, spaceHint(fmt.Errorf("checkpoint service %s: %w", s.Name, err), st.dir)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
			err = spaceHint(fmt.Errorf("checkpoint service %s: %w", s.Name, err), st.dir)
		}
	}()
	prev, hasPrev := st.latest(s.Name)
	c := newSyncer()
	copyAll := func(o syncOpts) error {
		for i, d := range s.Data {
			if err := ctx.Err(); err != nil {
				return err
			}
			o := o
			if hasPrev && slices.Equal(prev.Service.Data, s.Data) {
				o.link, o.linkStable = filepath.Join(st.Dir(prev.ID), "data", strconv.Itoa(i)), prev.Time.Add(-margin)
			}
			if err := c.syncTree(d, filepath.Join(dir, "data", strconv.Itoa(i)), o); errors.Is(err, fs.ErrNotExist) && !exists(d) {
				if !slices.Contains(pt.Absent, d) {
					pt.Absent = append(pt.Absent, d)
				}
			} else if err != nil {
				return err
			}
		}
		return nil
	}
	pt.Time = time.Now()
	switch method {
	case "save":
		frozen, err := redisSave(ctx, s.Port)
		if err != nil {
			return Point{}, fmt.Errorf("have it write its snapshot: %w", err)
		}
		pt.Frozen = frozen
		if err := copyAll(syncOpts{}); err != nil {
			return Point{}, err
		}
	case "freeze":
		if err := copyAll(syncOpts{}); err != nil {
			return Point{}, err
		}
		t := time.Now()
		f, err := freeze(s.Main)
		if err != nil {
			return Point{}, err
		}
		err = copyAll(syncOpts{stable: pt.Time.Add(-margin)})
		f.thaw()
		pt.Frozen = time.Since(t)
		if err != nil {
			return Point{}, err
		}
	case "stopped":
		if err := copyAll(syncOpts{}); err != nil {
			return Point{}, err
		}
	}
	if method != "stopped" && !s.Main.Alive() {
		return Point{}, fmt.Errorf("it ended (pid %d) while undosh copied its data; start it again, then the step", s.Main.PID)
	}
	pt.Bytes, pt.Took = ownBytes(filepath.Join(dir, "data")), time.Since(start)
	b, err := json.MarshalIndent(pt, "", "  ")
	if err != nil {
		return Point{}, err
	}
	if err := atomicfile.Write(filepath.Join(dir, metaFile), b, 0o600); err != nil {
		return Point{}, err
	}
	return pt, nil
}

// spaceHint adds to an error from a full disk what to do about it.
func spaceHint(err error, dir string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w (the disk that holds %s is full: free space there, or move undosh's state directory with UNDOSH_STATE_DIR; the copy was removed)", err, dir)
	}
	return err
}

// frozen is a process tree stopped by freeze.
type frozen struct {
	ps []procs.Proc
}

// freezeTimeout bounds the wait for a tree to stop.
const freezeTimeout = 5 * time.Second

// freeze stops main and every process below it, and waits until they
// all are stopped: a child forked meanwhile is stopped too, and a
// stopped process forks no more.
func freeze(main procs.Proc) (_ *frozen, err error) {
	f := &frozen{}
	defer func() {
		if err != nil {
			f.thaw()
		}
	}()
	for {
		all, err := procs.List()
		if err != nil {
			return nil, err
		}
		added := 0
		for _, p := range procs.Tree(all, main.PID) {
			if p.PID == main.PID && !p.Same(main) {
				return nil, fmt.Errorf("it ended (pid %d) before undosh could freeze it", main.PID)
			}
			if slices.ContainsFunc(f.ps, p.Same) {
				continue
			}
			if err := syscall.Kill(p.PID, syscall.SIGSTOP); err == nil {
				f.ps = append(f.ps, p)
				added++
			} else if p.PID == main.PID {
				return nil, fmt.Errorf("freeze it (pid %d): %w", main.PID, err)
			}
		}
		if len(f.ps) == 0 {
			return nil, fmt.Errorf("it ended (pid %d) before undosh could freeze it", main.PID)
		}
		if added == 0 {
			break
		}
	}
	deadline := time.Now().Add(freezeTimeout)
	for _, p := range f.ps {
		for {
			st := procState(p)
			if st == 'T' || st == 't' || st == 0 || st == 'Z' || st == 'X' {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("freeze it: pid %d did not stop within %s (state %c)", p.PID, freezeTimeout, st)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return f, nil
}

// thaw lets the frozen processes go on.
func (f *frozen) thaw() {
	for _, p := range f.ps {
		_ = syscall.Kill(p.PID, syscall.SIGCONT)
	}
}

// procState is p's state letter (R, S, D, T...), or 0 when p is gone.
func procState(p procs.Proc) byte {
	b, err := os.ReadFile(filepath.Join(procs.Root, strconv.Itoa(p.PID), "stat"))
	if err != nil {
		return 0
	}
	i := len(b) - 1
	for i >= 0 && b[i] != ')' {
		i--
	}
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
