package hostlink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	for _, f := range []Frame{
		{Type: TypeHello, Body: []byte(`{"version":1}`)},
		{Type: TypeListCheckpoints, Body: []byte{}},
		{Type: TypeChunk, Body: bytes.Repeat([]byte("x"), MaxFrame)},
	} {
		var buf bytes.Buffer
		if err := Encode(&buf, f); err != nil {
			t.Fatal(err)
		}
		got, err := Decode(&buf, MaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(f, got); diff != "" {
			t.Errorf("%v: round trip (-want +got):\n%.200s", f.Type, diff)
		}
	}
	if err := Encode(io.Discard, Frame{Type: TypeChunk, Body: make([]byte, MaxFrame+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("encode oversized: %v, want ErrTooLarge", err)
	}
	if err := Encode(io.Discard, Frame{Type: 200}); !errors.Is(err, ErrType) {
		t.Errorf("encode unknown type: %v, want ErrType", err)
	}
}

func header(v byte, t Type, n uint32) []byte {
	h := []byte{'U', 'H', v, byte(t), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[4:], n)
	return h
}

func TestDecodeHostile(t *testing.T) {
	t.Parallel()
	var ve *VersionError
	tests := []struct {
		name  string
		in    []byte
		limit int
		check func(error) bool
	}{
		{"empty", nil, 0, func(err error) bool { return err == io.EOF }},
		{"short header", []byte("UH\x01"), 0, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"bad magic", []byte("GET / HTTP/1.1\r\n"), 0, func(err error) bool { return errors.Is(err, ErrMagic) }},
		{"version 2", header(2, TypeHello, 0), 0, func(err error) bool { return errors.As(err, &ve) && ve.Got == 2 }},
		{"unknown type", header(1, 99, 0), 0, func(err error) bool { return errors.Is(err, ErrType) }},
		{"over max frame", header(1, TypeChunk, MaxFrame+1), 0, func(err error) bool { return errors.Is(err, ErrTooLarge) }},
		{"over request limit", header(1, TypeForkRun, MaxRequest+1), MaxRequest, func(err error) bool { return errors.Is(err, ErrTooLarge) }},
		{"max uint32", header(1, TypeForkRun, 1<<32-1), 0, func(err error) bool { return errors.Is(err, ErrTooLarge) }},
		{"truncated body", append(header(1, TypeHello, 10), "abc"...), 0, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode(bytes.NewReader(tt.in), tt.limit)
			if !tt.check(err) {
				t.Errorf("Decode(%q) error %v", tt.in, err)
			}
		})
	}
}

// A header that claims the largest body but sends a few bytes must cost
// about what was sent, not what was claimed.
func TestDecodeAllocatesWhatArrives(t *testing.T) {
	in := append(header(1, TypeChunk, MaxFrame), "short"...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := Decode(bytes.NewReader(in), 0); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 16<<10 {
		t.Errorf("a truncated frame claiming %d bytes allocated %d bytes", MaxFrame, per)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte(nil), uint8(TypeHello), []byte(`{"version":1,"token":"t"}`))
	f.Add(header(1, TypeOp, 3), uint8(TypeChunk), []byte("{}"))
	f.Add([]byte("UH\x01\x25\x00\x00\x00\x02{}"), uint8(TypeError), []byte(nil))
	f.Add(header(1, TypeChunk, MaxFrame), uint8(TypeStatus), []byte{0})
	f.Fuzz(func(t *testing.T, raw []byte, typ uint8, body []byte) {
		// Garbage never panics, never yields a body over the bound, and a
		// frame it accepts encodes back to the bytes it read.
		r := bytes.NewReader(raw)
		fr, err := Decode(r, MaxRequest)
		if err == nil {
			if len(fr.Body) > MaxRequest || cap(fr.Body) > MaxRequest {
				t.Fatalf("body len %d cap %d over %d", len(fr.Body), cap(fr.Body), MaxRequest)
			}
			consumed := raw[:len(raw)-r.Len()]
			again, err := AppendFrame(nil, fr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, consumed) {
				t.Fatalf("re-encoding %q gave %q", consumed, again)
			}
		}
		// An encoding decodes to the original.
		want := Frame{Type: Type(typ), Body: body}
		enc, err := AppendFrame(nil, want)
		if err != nil {
			if want.Type.Known() {
				t.Fatalf("encode %v: %v", want.Type, err)
			}
			return
		}
		got, err := Decode(bytes.NewReader(enc), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != want.Type || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("round trip: got %v %q, want %v %q", got.Type, got.Body, want.Type, want.Body)
		}
	})
}
