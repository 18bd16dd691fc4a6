package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/flock"
	"github.com/undosh/undosh/internal/pathglob"
)

// Options configure a store. The zero value needs only StateDir.
type Options struct {
	// StateDir is the state directory; the store lives in
	// StateDir/checkpoints/<workspace id>. Required.
	StateDir string
	// Exclude lists globs, relative to the workspace root, of paths left
	// out of checkpoints (** crosses directories). A directory that
	// matches is left out whole.
	Exclude []string
	// MaxFileSize leaves out bigger files. Zero means 64 MiB.
	MaxFileSize int64
	// Home is the user's home directory, which is refused as a
	// workspace. Empty means $HOME is not checked.
	Home string
	// Progress, when set, receives progress lines for work that takes
	// over a second (set it to a terminal only).
	Progress io.Writer
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Workers is the number of files hashed at once. Zero means 4.
	Workers int
	// Watch, when set, tells a checkpoint what changed since the last
	// one it was told of, so that it reads only that; when it cannot
	// tell, the checkpoint walks everything.
	Watch Watcher
	// NoWait makes an operation that would wait for another process's
	// lock on the store fail at once with [ErrBusy]: for a caller that
	// the lock's holder may be waiting on (the watcher's own server).
	NoWait bool
}

// Store is the checkpoint store of one workspace.
type Store struct {
	root string // the workspace, absolute and clean
	dir  string // the store directory
	git  string // the shadow repository (bare)
	opts Options
	log  *slog.Logger
}

// Sentinel errors.
var (
	ErrBadWorkspace = errors.New("not a workspace undosh can checkpoint")
	ErrNotFound     = errors.New("no such checkpoint")
	ErrEmpty        = errors.New("no checkpoint yet")
	// ErrBusy is another process holding the store's lock, with
	// [Options].NoWait set.
	ErrBusy = errors.New("another process holds the checkpoint store's lock")
)

// headRef is the ref that names the newest checkpoint.
const headRef = "refs/heads/checkpoints"

// Open opens the store of workspace, creating it when it does not exist.
// It refuses / and the home directory, and a workspace that contains the
// state directory.
func Open(workspace string, o Options) (*Store, error) {
	if o.StateDir == "" {
		return nil, errors.New("checkpoint: no state directory given")
	}
	if o.MaxFileSize == 0 {
		o.MaxFileSize = 64 << 20
	}
	if o.Workers == 0 {
		o.Workers = 4
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace %s: %w: not a directory", workspace, ErrBadWorkspace)
	}
	if root == "/" {
		return nil, fmt.Errorf("workspace /: %w: it would hold the whole machine (hint: name the project directory with -C DIR)", ErrBadWorkspace)
	}
	if o.Home != "" {
		if home, err := filepath.EvalSymlinks(o.Home); err == nil && home == root {
			return nil, fmt.Errorf("workspace %s: %w: it is the home directory (hint: name the project directory with -C DIR)", workspace, ErrBadWorkspace)
		}
	}
	stateAbs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", o.StateDir, err)
	}
	stateAbs = resolveExisting(stateAbs)
	if pathglob.Within(stateAbs, root) {
		return nil, fmt.Errorf("workspace %s: %w: the state directory %s lies inside it (hint: keep state elsewhere with --state DIR or UNDOSH_STATE_DIR)", workspace, ErrBadWorkspace, stateAbs)
	}
	sum := sha256.Sum256([]byte(root))
	name := hex.EncodeToString(sum[:8]) + "-" + sanitize(filepath.Base(root))
	s := &Store{root: root, dir: filepath.Join(stateAbs, "checkpoints", name), opts: o, log: o.Logger}
	s.git = filepath.Join(s.dir, "git")
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.init(); err != nil {
		return nil, err
	}
	return s, nil
}

// resolveExisting resolves the symlinks of the longest part of p that
// exists, so that a state directory not made yet is still compared by
// where it will really be.
func resolveExisting(p string) string {
	rest := ""
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		if q == filepath.Dir(q) {
			return p
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// init creates the store's directories and its shadow repository. Its
// files are written under the lock: another writer's clean-up of
// temporary files must not catch them half made.
func (s *Store) init() error {
	for _, d := range []string{s.dir, filepath.Join(s.git, "objects", "pack"), filepath.Join(s.git, "refs", "heads")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create store %s: %w", s.dir, err)
		}
	}
	head := filepath.Join(s.git, "HEAD")
	meta := filepath.Join(s.dir, "workspace.json")
	_, errHead := os.Stat(head)
	_, errMeta := os.Stat(meta)
	if errHead == nil && errMeta == nil {
		return nil
	}
	return s.locked(true, func() error { return s.initLocked(head, meta) })
}

func (s *Store) initLocked(head, meta string) error {
	if _, err := os.Stat(head); errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(head, []byte("ref: "+headRef+"\n")); err != nil {
			return err
		}
	}
	if _, err := os.Stat(meta); errors.Is(err, os.ErrNotExist) {
		data, _ := json.Marshal(map[string]string{"workspace": s.root})
		if err := writeFileAtomic(meta, data); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the store.
func (s *Store) Close() error { return nil }

// Workspace returns the workspace root.
func (s *Store) Workspace() string { return s.root }

// Dir returns the store directory.
func (s *Store) Dir() string { return s.dir }

// locked runs fn holding the store's lock: exclusive for writers, shared
// for readers. The kernel drops the lock of a process that dies.
func (s *Store) locked(exclusive bool, fn func() error) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if s.opts.NoWait {
		how |= unix.LOCK_NB
	}
	f, err := flock.Lock(filepath.Join(s.dir, "lock"), how)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("lock store %s: %w", s.dir, ErrBusy)
	}
	if err != nil {
		return fmt.Errorf("lock store: %w", err)
	}
	defer f.Close()
	if exclusive {
		// Say who holds it, for people looking at a stuck store.
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
		s.cleanTemp()
	}
	return fn()
}

// cleanTemp removes temporary files a killed writer left behind. It runs
// under the exclusive lock, so no writer is using them.
func (s *Store) cleanTemp() {
	for _, dir := range []string{s.dir, filepath.Join(s.git, "objects", "pack"), filepath.Join(s.git, "refs", "heads")} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if strings.HasPrefix(name, ".tmp-") {
				_ = os.Remove(filepath.Join(dir, name))
			}
			// An index whose pack never arrived.
			if base, ok := strings.CutSuffix(name, ".idx"); ok {
				if _, err := os.Stat(filepath.Join(dir, base+".pack")); errors.Is(err, os.ErrNotExist) {
					_ = os.Remove(filepath.Join(dir, name))
				}
			}
			// A pack without its index would stop go-git reading any
			// object: set it aside, where check reports it.
			if base, ok := strings.CutSuffix(name, ".pack"); ok {
				if _, err := os.Stat(filepath.Join(dir, base+".idx")); errors.Is(err, os.ErrNotExist) {
					_ = os.Rename(filepath.Join(dir, name), filepath.Join(dir, name+".orphan"))
				}
			}
		}
	}
}

// head returns the newest checkpoint, or the zero hash when there is none.
func (s *Store) head() (plumbing.Hash, error) {
	data, err := os.ReadFile(filepath.Join(s.git, filepath.FromSlash(headRef)))
	if errors.Is(err, os.ErrNotExist) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read checkpoint ref: %w", err)
	}
	h := strings.TrimSpace(string(data))
	if !plumbing.IsHash(h) {
		return plumbing.ZeroHash, fmt.Errorf("checkpoint ref %s holds %q, not a commit id", headRef, h)
	}
	return plumbing.NewHash(h), nil
}

// setHead moves the checkpoint ref from old to h, refusing if another
// writer moved it (compare and swap), durably.
func (s *Store) setHead(old, h plumbing.Hash) error {
	cur, err := s.head()
	if err != nil {
		return err
	}
	if cur != old {
		return fmt.Errorf("checkpoint ref moved from %s to %s while writing", old, cur)
	}
	return writeFileAtomic(filepath.Join(s.git, filepath.FromSlash(headRef)), []byte(h.String()+"\n"))
}

// writeFileAtomic writes data to name by temp file, fsync, rename and
// fsync of the directory.
func writeFileAtomic(name string, data []byte) error {
	return atomicfile.Write(name, data, 0o600)
}

// writeCache writes data to name whole (temp file and rename) without
// fsync: caches need not be durable, a lost one is rebuilt.
func writeCache(name string, data []byte) error {
	return atomicfile.Replace(name, data, 0o600)
}

// now is the time used for new commits.
func now() time.Time { return time.Now() }
