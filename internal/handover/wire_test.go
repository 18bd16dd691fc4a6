package handover

import (
	"bytes"
	"os"
	"slices"
	"testing"
)

// TestRoundTrip sends each kind of instruction over a real socket pair,
// files included, and reads it back.
func TestRoundTrip(t *testing.T) {
	a, b, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	send, recv := NewConn(a), NewConn(b)
	defer send.Close()
	defer recv.Close()
	// sent sends in from another goroutine (a message may be larger than
	// the socket's buffer) and returns what Send returned, once it did.
	sent := func(in Instruction) <-chan error {
		done := make(chan error, 1)
		go func() { done <- send.Send(in) }()
		return done
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	in := Instruction{Kind: Exec, Path: "/bin/bash", Argv: []string{"-bash", "-c", "echo hi", ""}, Env: []string{"A=1", "B="}, Files: []*os.File{nil, w, w}}
	done := sent(in)
	got, err := recv.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.Kind != Exec || got.Path != in.Path || !slices.Equal(got.Argv, in.Argv) || !slices.Equal(got.Env, in.Env) {
		t.Errorf("received %+v, sent %+v", got, in)
	}
	if got.Files[0] != nil || got.Files[1] == nil || got.Files[2] == nil {
		t.Fatalf("files %v, want fd 0 closed and 1, 2 sent", got.Files)
	}
	// The file received is the pipe sent.
	if _, err := got.Files[1].Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := r.Read(buf); err != nil || buf[0] != 'x' {
		t.Errorf("read %q, %v through the file received", buf, err)
	}
	got.Files[1].Close()
	got.Files[2].Close()
	for _, want := range []Instruction{{Kind: Exit, Code: -3}, {Kind: Exit, Code: 130}, {Kind: Fallback}} {
		done := sent(want)
		got, err := recv.Receive()
		if err != nil || got.Kind != want.Kind || got.Code != want.Code {
			t.Errorf("sent %+v, received %+v, %v", want, got, err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// FuzzDecodeExec: the decoder never panics, and what it accepts encodes
// back to the same bytes.
func FuzzDecodeExec(f *testing.F) {
	f.Add(encodeExec([3]bool{false, true, true}, "/bin/bash", []string{"bash", "-c", "ls"}, []string{"HOME=/h"}))
	f.Add(encodeExec([3]bool{}, "", nil, nil))
	f.Add([]byte("ooo\x00p\x002\x00a\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		open, path, argv, env, err := decodeExec(b)
		if err != nil {
			return
		}
		if got := encodeExec(open, path, argv, env); !bytes.Equal(got, b) {
			t.Errorf("re-encoding %q gave %q", b, got)
		}
	})
}
