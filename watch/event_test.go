package watch

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// appendEvent encodes ev as the kernel does, its name NUL-padded to pad
// bytes past its length.
func appendEvent(buf []byte, ev event, pad int) []byte {
	n := 0
	if ev.name != "" || pad > 0 {
		n = len(ev.name) + 1 + pad
	}
	buf = binary.NativeEndian.AppendUint32(buf, uint32(ev.wd))
	buf = binary.NativeEndian.AppendUint32(buf, ev.mask)
	buf = binary.NativeEndian.AppendUint32(buf, ev.cookie)
	buf = binary.NativeEndian.AppendUint32(buf, uint32(n))
	buf = append(buf, ev.name...)
	for i := len(ev.name); i < n; i++ {
		buf = append(buf, 0)
	}
	return buf
}

// FuzzParseEvents checks that decoding never panics, and that what it
// decodes encodes back to a buffer that decodes the same.
func FuzzParseEvents(f *testing.F) {
	f.Add(appendEvent(appendEvent(nil, event{1, 0x100, 0, "a"}, 2), event{-1, 0x4000, 0, ""}, 0))
	f.Add(appendEvent(nil, event{3, 0x40, 7, "name"}, 11))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, buf []byte) {
		evs, err := parseEvents(buf, nil)
		var again []byte
		for _, ev := range evs {
			again = appendEvent(again, ev, 3)
		}
		evs2, err2 := parseEvents(again, nil)
		if err2 != nil {
			t.Fatalf("re-encoded events do not decode: %v", err2)
		}
		if diff := cmp.Diff(evs, evs2, cmp.AllowUnexported(event{})); diff != "" {
			t.Errorf("round trip (-first +again):\n%s", diff)
		}
		if err == nil && len(buf) > 0 && len(evs) == 0 {
			t.Errorf("%d bytes decoded to no events and no error", len(buf))
		}
	})
}

// TestOpenMemory measures the Go heap a Tree of 50,000 directories takes
// (the shape of a 500,000-file workspace, ten files to a directory).
func TestOpenMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 50,000 directories")
	}
	root := tempRoot(t)
	const top, sub = 250, 200
	for i := range top {
		for j := range sub {
			if err := os.MkdirAll(fmt.Sprintf("%s/dir%03d/sub%03d", root, i, j), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := openReady(t, root, Options{})
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := tr.Status()
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d watches: heap grew %d bytes, %d per directory; Status.MemBytes %d", st.Watches, growth, growth/int64(st.Watches), st.MemBytes)
	if st.Watches != top*sub+top+1 {
		t.Errorf("Watches = %d, want %d", st.Watches, top*sub+top+1)
	}
	if growth > 64<<20 {
		t.Errorf("heap grew %d bytes, want well under 64 MiB", growth)
	}
}
