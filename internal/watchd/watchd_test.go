package watchd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/undosh/undosh/checkpoint"
)

// settle asks for changes until the watcher has a base and can tell,
// recording each answer as a checkpoint would.
func settle(t *testing.T, l *Watcher, root string) checkpoint.Changes {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		ch := l.Changes(root)
		if ch.Full == "" {
			return ch
		}
		l.Recorded(root, ch.Epoch, "0123456789012345678901234567890123456789")
	}
	t.Fatal("the watcher never took over")
	return checkpoint.Changes{}
}

// A watcher whose workspace is removed walks from then on; once the
// workspace is back where it was, a new watcher takes over.
func TestServiceWatchesAgainAfterTheWorkspaceCameBack(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Service{RetryBroken: time.Nanosecond}
	defer s.Close()
	l := s.Watcher(nil, 0)
	settle(t, l, root)
	if err := os.WriteFile(filepath.Join(root, "sub", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ch := l.Changes(root); ch.Full != "" || len(ch.Paths) != 1 || ch.Paths[0].Rel != "sub/f" {
		t.Fatalf("a write: %+v", ch)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if ch := l.Changes(root); ch.Full == "" {
		t.Fatalf("the workspace is gone, yet the watcher can tell: %+v", ch)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	settle(t, l, root)
	if err := os.WriteFile(filepath.Join(root, "g"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ch := l.Changes(root); ch.Full != "" || len(ch.Paths) != 1 || ch.Paths[0].Rel != "g" {
		t.Fatalf("a write in the workspace that came back: %+v", ch)
	}
}

// With no server, a client says so: no watcher, and every checkpoint
// walks.
func TestClientWithoutServer(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "classify.sock")
	if ch := Client(sock, nil, 0).Changes("/x"); !ch.Absent || ch.Full == "" {
		t.Errorf("no server: %+v", ch)
	}
	if Answers(sock) {
		t.Error("Answers with no server")
	}
}

// A caller that sees other files than the watcher is told it cannot be
// watched; an unknown op and a relative root are errors.
func TestServiceRefuses(t *testing.T) {
	t.Parallel()
	s := &Service{InView: func(int) bool { return false }}
	defer s.Close()
	if a := s.Do(Request{Op: "changes", Root: t.TempDir()}, 42); a.Changes == nil || a.Changes.Full == "" {
		t.Errorf("a caller in another mount namespace: %+v", a)
	}
	if a := s.Do(Request{Op: "changes", Root: "rel"}, 0); a.Err == "" {
		t.Errorf("a relative root: %+v", a)
	}
	if a := s.Do(Request{Op: "frobnicate"}, 0); a.Err == "" {
		t.Errorf("an unknown op: %+v", a)
	}
}

func FuzzReadBody(f *testing.F) {
	msg, _ := Encode(Request{Op: "changes", Root: "/w", Exclude: []string{"node_modules/**"}, MaxSize: 1 << 20})
	f.Add(msg)
	f.Add([]byte("UNDOSHW1\xff\xff\xff\xff"))
	f.Add([]byte("UNDOSHQ1\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 12 {
			return
		}
		body, err := ReadBody(bytes.NewReader(data[12:]), data[:12])
		if err != nil {
			return
		}
		var r Request
		if json.Unmarshal(body, &r) != nil {
			return
		}
		// What decodes encodes again and decodes the same.
		again, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		body2, err := ReadBody(bytes.NewReader(again[12:]), again[:12])
		if err != nil {
			t.Fatal(err)
		}
		var r2 Request
		if err := json.Unmarshal(body2, &r2); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(r2)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s became %s", a, b)
		}
	})
}
