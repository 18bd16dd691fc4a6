package hostlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Wire constants. docs/hostlink.md is the normative description; these are
// its numbers.
const (
	// Version is the protocol version carried in every frame header.
	Version = 1
	// HeaderSize is the fixed size of a frame header: magic "UH" (2 bytes),
	// version (1), type (1), body length (4, big-endian).
	HeaderSize = 8
	// MaxFrame bounds the body of any frame.
	MaxFrame = 1 << 20
	// MaxRequest bounds the body of a frame sent by the guest; a host reads
	// no more than this from a connection before it has authenticated it.
	MaxRequest = 256 << 10
	// MaxChunk bounds the output bytes carried by one CHUNK reply, so that
	// their base64 form stays well under MaxFrame.
	MaxChunk = 256 << 10

	// DefaultPort is the vsock port the host listens on for requests, and
	// DefaultControlPort the one the guest agent listens on for
	// WHO_YOU_ARE; a deployment may configure others.
	DefaultPort        = 5757
	DefaultControlPort = 5758
)

const magic0, magic1 = 'U', 'H'

// Type is a frame's message type.
type Type uint8

// Message types. Requests (guest to host) are below 32, replies are 32 to
// 63, and control-channel messages (host to guest) are 64 and above.
const (
	TypeHello           Type = 1
	TypeForkRun         Type = 2
	TypeCheckpoint      Type = 3
	TypeListCheckpoints Type = 4
	TypeRestore         Type = 5
	TypeStatus          Type = 6
	TypeOutput          Type = 7
	TypeCancel          Type = 8

	TypeWelcome     Type = 32
	TypeAccepted    Type = 33
	TypeOp          Type = 34
	TypeChunk       Type = 35
	TypeCheckpoints Type = 36
	TypeError       Type = 37

	TypeWhoYouAre Type = 64
	TypeNoted     Type = 65
)

var typeNames = map[Type]string{
	TypeHello: "HELLO", TypeForkRun: "FORK_RUN", TypeCheckpoint: "CHECKPOINT",
	TypeListCheckpoints: "LIST_CHECKPOINTS", TypeRestore: "RESTORE",
	TypeStatus: "STATUS", TypeOutput: "OUTPUT", TypeCancel: "CANCEL",
	TypeWelcome: "WELCOME", TypeAccepted: "ACCEPTED", TypeOp: "OP",
	TypeChunk: "CHUNK", TypeCheckpoints: "CHECKPOINTS", TypeError: "ERROR",
	TypeWhoYouAre: "WHO_YOU_ARE", TypeNoted: "NOTED",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("TYPE(%d)", uint8(t))
}

// Known reports whether t is a type of this protocol version.
func (t Type) Known() bool {
	_, ok := typeNames[t]
	return ok
}

// Frame is one framed message: a type and an opaque body (JSON in this
// version of the protocol).
type Frame struct {
	Type Type
	Body []byte
}

// Errors from [Decode] and [Encode].
var (
	ErrMagic    = errors.New("hostlink: bad frame magic")
	ErrTooLarge = errors.New("hostlink: frame too large")
	ErrType     = errors.New("hostlink: unknown frame type")
)

// VersionError reports a frame of a protocol version this package does not
// speak.
type VersionError struct {
	Got uint8
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("hostlink: unsupported protocol version %d (speak %d)", e.Got, Version)
}

// AppendFrame appends the encoding of f to dst.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if len(f.Body) > MaxFrame {
		return dst, fmt.Errorf("encode %v: %d bytes: %w", f.Type, len(f.Body), ErrTooLarge)
	}
	if !f.Type.Known() {
		return dst, fmt.Errorf("encode %v: %w", f.Type, ErrType)
	}
	dst = append(dst, magic0, magic1, Version, byte(f.Type))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(f.Body)))
	return append(dst, f.Body...), nil
}

// Encode writes f to w in a single Write.
func Encode(w io.Writer, f Frame) error {
	b, err := AppendFrame(make([]byte, 0, HeaderSize+len(f.Body)), f)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Decode reads one frame from r whose body is at most limit bytes (at most
// [MaxFrame]; 0 means MaxFrame). It returns io.EOF only when r ends before
// the first byte, and io.ErrUnexpectedEOF for a truncated frame. The body
// is allocated as it arrives, so a header that claims more than the peer
// sends costs no more memory than what was sent (within a factor of two).
func Decode(r io.Reader, limit int) (Frame, error) {
	if limit <= 0 || limit > MaxFrame {
		limit = MaxFrame
	}
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	if h[0] != magic0 || h[1] != magic1 {
		return Frame{}, ErrMagic
	}
	if h[2] != Version {
		return Frame{}, &VersionError{Got: h[2]}
	}
	t := Type(h[3])
	if !t.Known() {
		return Frame{}, fmt.Errorf("decode %v: %w", t, ErrType)
	}
	n := binary.BigEndian.Uint32(h[4:])
	if uint64(n) > uint64(limit) {
		return Frame{}, fmt.Errorf("decode %v: %d bytes over %d: %w", t, n, limit, ErrTooLarge)
	}
	body, err := readBody(r, int(n))
	if err != nil {
		return Frame{}, fmt.Errorf("decode %v: %w", t, err)
	}
	return Frame{Type: t, Body: body}, nil
}

func readBody(r io.Reader, n int) ([]byte, error) {
	const first = 4 << 10
	body := make([]byte, 0, min(n, first))
	for len(body) < n {
		if len(body) == cap(body) {
			grown := make([]byte, len(body), min(n, 2*cap(body)))
			copy(grown, body)
			body = grown
		}
		m, err := r.Read(body[len(body):cap(body)])
		body = body[:len(body)+m]
		if err != nil {
			if errors.Is(err, io.EOF) && len(body) < n {
				return nil, io.ErrUnexpectedEOF
			}
			if len(body) < n {
				return nil, err
			}
		}
	}
	return body, nil
}
