package shell

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/policy"
)

// BenchmarkReadOnlyCheckpoint is what the front end's server adds to a read-only
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
	s := readOnlyStep{stateDir: sd, pol: policy.Default(), cwd: ws, command: "ls", watch: svc}
	// The server never walks for a read-only step: undosh does, once
	// the watch is set up, and from then on the watcher can tell.
	for i := 0; ; i++ {
		rec, ok, err := readOnlyCheckpoint(s)
		if ok && rec.Points[0].Walk == "" {
			break
		}
		if !errors.Is(err, checkpoint.ErrWouldWalk) || i > 1000 {
			b.Fatalf("the watch never took over: %v", err)
		}
		o := state.StoreOptions(sd, s.pol, "")
		o.Watch = svc.Watcher(o.Exclude, o.MaxFileSize)
		st, err := checkpoint.Open(ws, o)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Checkpoint("walk"); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, ok, err := readOnlyCheckpoint(s); !ok || err != nil {
			b.Fatal("no checkpoint", err)
		}
	}
}
