package shell

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/policy"
)

// BenchmarkReadOnlyCheckpoint is what the classifier adds to a read-only
// step it answers, when nothing changed since the newest checkpoint.
func BenchmarkReadOnlyCheckpoint(b *testing.B) {
	ws, sd := b.TempDir(), b.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(ws, n), []byte(n), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	svc := &watchd.Service{}
	defer svc.Close()
	s := readOnlyStep{stateDir: sd, pol: policy.Default(), cwd: ws, command: "ls",
		watch: func(exclude []string, maxSize int64) watchd.Local {
			return watchd.Local{S: svc, Exclude: exclude, MaxSize: maxSize}
		}}
	// Until the watch is set up and has a base, the checkpoint walks.
	for i := 0; ; i++ {
		rec, ok := readOnlyCheckpoint(s)
		if ok && rec.Points[0].Walk == "" {
			break
		}
		if i > 1000 {
			b.Fatal("the watch never took over")
		}
	}
	for b.Loop() {
		if _, ok := readOnlyCheckpoint(s); !ok {
			b.Fatal("no checkpoint")
		}
	}
}
