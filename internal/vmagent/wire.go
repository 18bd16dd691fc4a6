package vmagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/undosh/undosh/hostlink"
)

// The limits of the wire.
const (
	// MaxLine is the longest line either side sends or reads, without its
	// newline. A longer request is answered with an error.
	MaxLine = 1 << 20
	// Chunk is the most exec output one [Reply] carries.
	Chunk = 32 << 10
)

// The operations of a [Request].
const (
	OpPing   = "ping"   // answered with Pong
	OpExec   = "exec"   // answered with output chunks, then Exit
	OpNotify = "notify" // answered with Noted
	OpReset  = "reset"  // answered with Done once the relays are closed
)

// The streams of exec output in a [Reply].
const (
	StreamOut = "out"
	StreamErr = "err"
)

// Request is one line from the host.
type Request struct {
	ID   string          `json:"id"`             // random, chosen by the host; every reply carries it
	Op   string          `json:"op"`             // "ping", "exec", "notify", "reset"
	Argv []string        `json:"argv,omitempty"` // exec
	Cwd  string          `json:"cwd,omitempty"`  // exec; "" = "/"
	Env  []string        `json:"env,omitempty"`  // exec: KEY=VALUE, added to the agent's environment
	Who  json.RawMessage `json:"who,omitempty"`  // notify: a hostlink.WhoYouAre as JSON
}

// Reply is one line from the guest.
type Reply struct {
	ID     string          `json:"id"`
	Stream string          `json:"stream,omitempty"` // exec output: "out" or "err", with Data
	Data   []byte          `json:"data,omitempty"`
	Exit   *int            `json:"exit,omitempty"`  // exec's end: its status (128+signal if killed)
	Noted  *hostlink.Noted `json:"noted,omitempty"` // notify's answer
	Pong   bool            `json:"pong,omitempty"`
	Done   bool            `json:"done,omitempty"`  // reset's answer
	Error  string          `json:"error,omitempty"` // the request failed: why (the last reply for that id)
}

// errTooLong is a line longer than [MaxLine].
var errTooLong = fmt.Errorf("a line longer than %d bytes", MaxLine)

// encodeLine is v as one line, newline included.
func encodeLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxLine {
		return nil, errTooLong
	}
	return append(b, '\n'), nil
}

// readLine reads one line and returns it without its newline. A line
// longer than [MaxLine] is read to its end and dropped: it comes back as
// nil with long set. At the end of the input, a last line without a
// newline is dropped too (its writer hung up in the middle of it), and
// the error is io.EOF.
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !long && len(line)+len(frag) > MaxLine+1 {
			line, long = nil, true
		}
		if !long {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if long {
			return nil, true, nil
		}
		return line[:len(line)-1], false, nil
	}
}

// blank reports whether line holds nothing but white space: such lines
// are skipped, not answered.
func blank(line []byte) bool { return len(bytes.TrimSpace(line)) == 0 }

// parseRequest decodes one request line. When the line does not decode,
// the request returned still carries its id if one could be read, for the
// error's reply.
func parseRequest(line []byte) (Request, error) {
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		var id struct {
			ID string `json:"id"`
		}
		json.Unmarshal(line, &id)
		return Request{ID: id.ID}, err
	}
	return r, nil
}

// parseReply decodes one reply line.
func parseReply(line []byte) (Reply, error) {
	var r Reply
	err := json.Unmarshal(line, &r)
	return r, err
}
