package vmagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestReadLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxLine+1)
	most := strings.Repeat("b", MaxLine)
	in := "one\n" + long + "\n" + most + "\n\ntwo\nthree"
	br := bufio.NewReaderSize(strings.NewReader(in), 64)
	type got struct {
		line string
		long bool
	}
	var all []got
	for {
		b, l, err := readLine(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got{string(b), l})
	}
	want := []got{{"one", false}, {"", true}, {most, false}, {"", false}, {"two", false}}
	if d := cmp.Diff(want, all, cmp.AllowUnexported(got{})); d != "" {
		t.Errorf("lines (-want +got):\n%.2000s", d)
	}
}

// norm is r as its encoding has it: who as compact JSON, an empty list
// as none.
func norm(r Request) Request {
	if len(r.Argv) == 0 {
		r.Argv = nil
	}
	if len(r.Env) == 0 {
		r.Env = nil
	}
	if len(r.Who) == 0 {
		r.Who = nil
	} else {
		var b bytes.Buffer
		if json.Compact(&b, r.Who) == nil {
			r.Who = b.Bytes()
		}
	}
	return r
}

// A request line that decodes encodes to one line that decodes to the
// same request; one that does not decode gets no panic.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"0123456789abcdef","op":"ping"}`,
		`{"id":"a","op":"exec","argv":["sh","-c","echo hi"],"cwd":"/tmp","env":["A=b"]}`,
		`{"id":"b","op":"notify","who":{"generation":2, "token":"t","role":"copy"}}`,
		`{"id":"c","op":"notify","who":null}`,
		`{"id":"d","op":5}`,
		`{"id":"e\u2028\n","argv":[]}`,
		`not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseRequest(line)
		if err != nil {
			return
		}
		b, err := encodeLine(r)
		if err != nil {
			if errors.Is(err, errTooLong) {
				return
			}
			t.Fatalf("encode %+v: %v", r, err)
		}
		if bytes.IndexByte(b, '\n') != len(b)-1 {
			t.Fatalf("encoding %q is not one line", b)
		}
		r2, err := parseRequest(b[:len(b)-1])
		if err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		if d := cmp.Diff(norm(r), norm(r2)); d != "" {
			t.Errorf("round trip of %q (-first +again):\n%s", line, d)
		}
	})
}

// The same of a reply line.
func FuzzReply(f *testing.F) {
	for _, s := range []string{
		`{"id":"0123456789abcdef","stream":"out","data":"aGkK"}`,
		`{"id":"a","exit":137}`,
		`{"id":"b","noted":{"generation":5},"error":"refused"}`,
		`{"id":"c","pong":true}`,
		`{"id":"d","done":true,"data":""}`,
		`{"id":"e","data":"!"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseReply(line)
		if err != nil {
			return
		}
		b, err := encodeLine(r)
		if err != nil {
			if errors.Is(err, errTooLong) {
				return
			}
			t.Fatalf("encode %+v: %v", r, err)
		}
		if bytes.IndexByte(b, '\n') != len(b)-1 {
			t.Fatalf("encoding %q is not one line", b)
		}
		r2, err := parseReply(b[:len(b)-1])
		if err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		if d := cmp.Diff(r, r2, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("round trip of %q (-first +again):\n%s", line, d)
		}
	})
}
