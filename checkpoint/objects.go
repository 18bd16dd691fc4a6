package checkpoint

import (
	"bytes"
	"os"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// objects opens the shadow repository's objects for reading. It is opened
// afresh for each operation so that it sees packs written since.
func (s *Store) objects() *filesystem.Storage {
	return filesystem.NewStorageWithOptions(idxFS{osfs.New(s.git)}, cache.NewObjectLRU(32<<20), filesystem.Options{})
}

// idxFS hands go-git pack indexes read into memory in one go: go-git
// decodes them with reads of a few bytes each, a syscall apiece, which
// cost milliseconds per operation once there are a few dozen packs.
type idxFS struct{ billy.Filesystem }

func (f idxFS) Open(name string) (billy.File, error) {
	if !strings.HasSuffix(name, ".idx") {
		return f.Filesystem.Open(name)
	}
	file, err := f.Filesystem.Open(name)
	if err != nil {
		return nil, err
	}
	data, err := readAllFile(file)
	file.Close()
	if err != nil {
		return nil, err
	}
	return &memFile{name: name, Reader: bytes.NewReader(data)}, nil
}

func readAllFile(f billy.File) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.Bytes(), err
}

// memFile is a read-only billy.File over bytes in memory.
type memFile struct {
	name string
	*bytes.Reader
}

func (m *memFile) Name() string                       { return m.name }
func (m *memFile) Write([]byte) (int, error)          { return 0, os.ErrPermission }
func (m *memFile) WriteAt([]byte, int64) (int, error) { return 0, os.ErrPermission }
func (m *memFile) Close() error                       { return nil }
func (m *memFile) Lock() error                        { return nil }
func (m *memFile) Unlock() error                      { return nil }
func (m *memFile) Truncate(int64) error               { return os.ErrPermission }
