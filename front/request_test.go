package front

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func encodeRequest(r request) []byte {
	var b []byte
	put := func(s string) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	for _, list := range [][]string{r.argv, r.env} {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(list)))
		for _, s := range list {
			put(s)
		}
	}
	put(r.cwd)
	put(r.execfn)
	return b
}

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	want := request{argv: []string{"-bash", "-c", "ls\x00x", ""}, env: []string{"A=1", "BASH_FUNC_f%%=() { :; }", "\xff"}, cwd: "/w", execfn: "/usr/bin/bash"}
	got, err := decodeRequest(encodeRequest(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(request{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range [][]byte{
		nil,
		{1, 0, 0, 0},                     // one argument, missing
		{1, 0, 0, 0, 9, 0, 0, 0, 'a'},    // argument longer than the request
		{255, 255, 255, 255, 0, 0, 0, 0}, // a count no request can hold
		append(encodeRequest(want), 'x'), // trailing bytes
	} {
		if _, err := decodeRequest(bad); err == nil {
			t.Errorf("decodeRequest(%q) accepted a malformed request", bad)
		}
	}
}

// FuzzDecodeRequest: the decoder never panics, and what it accepts
// encodes back to the same bytes.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(encodeRequest(request{argv: []string{"bash", "-c", "ls"}, env: []string{"HOME=/h"}, cwd: "/", execfn: "/bin/sh"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			return
		}
		if got := encodeRequest(r); string(got) != string(b) {
			t.Errorf("re-encoding %q gave %q", b, got)
		}
	})
}
