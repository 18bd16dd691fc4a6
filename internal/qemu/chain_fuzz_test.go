package qemu

import (
	"bytes"
	"testing"
)

// FuzzBacking: any header decodes to a name or an error, never a panic
// or a read past what the header says.
func FuzzBacking(f *testing.F) {
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\x68\x00\x00\x00\x04" + string(make([]byte, 84)) + "base"))
	f.Add([]byte("QFI\xfb\x00\x00\x00\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 20 {
			return
		}
		name, err := parseBacking(b[:20], bytes.NewReader(b), "fuzz")
		if err == nil && len(name) > 1023 {
			t.Fatalf("a name of %d bytes", len(name))
		}
	})
}
