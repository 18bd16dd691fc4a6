package handover

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Kind is what an [Instruction] tells the shell-to-be to do.
type Kind byte

const (
	// Exec: install Files as fds 0, 1 and 2 and exec Path with Argv
	// and Env.
	Exec Kind = 'X'
	// Exit: exit with Code; nothing (more) runs here.
	Exit Kind = 'Q'
	// Fallback: the supervisor cannot hold the shell: run the step as
	// before, as a child.
	Fallback Kind = 'F'
)

const (
	ready   = 'R'
	failed  = 'E'
	maxBody = 64 << 20 // argv and environment are bounded far below this
)

// Instruction is one message from the supervisor.
type Instruction struct {
	Kind Kind
	Path string
	Argv []string
	Env  []string
	// Files are fds 0, 1 and 2; nil closes the fd. The receiver owns
	// the files it gets.
	Files []*os.File
	Code  int
}

// Conn is one end of the socket pair.
type Conn struct{ f *os.File }

// Pair returns the two ends of a new socket pair, both close-on-exec.
func Pair() (a, b *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "handover"), os.NewFile(uintptr(fds[1]), "handover"), nil
}

// NewConn wraps one end of a [Pair].
func NewConn(f *os.File) *Conn { return &Conn{f: f} }

// Close closes the connection.
func (c *Conn) Close() error { return c.f.Close() }

func (c *Conn) fd() int { return int(c.f.Fd()) }

// Ready tells the supervisor that it may trace this process now.
func (c *Conn) Ready() error { return c.write([]byte{ready}) }

// AwaitReady waits for [Conn.Ready].
func (c *Conn) AwaitReady() error {
	var b [1]byte
	if err := c.readFull(b[:]); err != nil {
		return err
	}
	if b[0] != ready {
		return fmt.Errorf("handover: unexpected message %q", b[0])
	}
	return nil
}

// Send sends in.
func (c *Conn) Send(in Instruction) error {
	switch in.Kind {
	case Exit:
		var b [5]byte
		b[0] = byte(Exit)
		binary.BigEndian.PutUint32(b[1:], uint32(int32(in.Code)))
		return c.write(b[:])
	case Fallback:
		return c.write([]byte{byte(Fallback)})
	case Exec:
	default:
		return fmt.Errorf("handover: unknown instruction %q", in.Kind)
	}
	var fds []int
	var open [3]bool
	for i := range 3 {
		if i < len(in.Files) && in.Files[i] != nil {
			open[i] = true
			fds = append(fds, int(in.Files[i].Fd()))
		}
	}
	body := encodeExec(open, in.Path, in.Argv, in.Env)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	// The files travel with the first byte alone, so that no read of
	// the body can take them.
	if err := unix.Sendmsg(c.fd(), []byte{byte(Exec)}, oob, nil, 0); err != nil {
		return fmt.Errorf("handover: send: %w", err)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(body)))
	return c.write(append(n[:], body...))
}

// Receive waits for the supervisor's instruction. It returns io.EOF when
// the supervisor went away without one.
func (c *Conn) Receive() (Instruction, error) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(3*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(c.fd(), b[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return Instruction{}, fmt.Errorf("handover: receive: %w", err)
	}
	if n == 0 {
		return Instruction{}, io.EOF
	}
	var got []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return Instruction{}, fmt.Errorf("handover: receive: %w", err)
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err == nil {
				got = append(got, fds...)
			}
		}
	}
	in := Instruction{Kind: Kind(b[0])}
	switch in.Kind {
	case Exit:
		var code [4]byte
		if err := c.readFull(code[:]); err != nil {
			return Instruction{}, err
		}
		in.Code = int(int32(binary.BigEndian.Uint32(code[:])))
		return in, nil
	case Fallback:
		return in, nil
	case Exec:
	default:
		return Instruction{}, fmt.Errorf("handover: unknown instruction %q", b[0])
	}
	body, err := c.readBody()
	if err != nil {
		closeAll(got)
		return Instruction{}, err
	}
	open, path, argv, env, err := decodeExec(body)
	if err != nil {
		closeAll(got)
		return Instruction{}, err
	}
	in.Path, in.Argv, in.Env = path, argv, env
	in.Files = make([]*os.File, 3)
	for i, o := range open {
		if !o {
			continue
		}
		if len(got) == 0 {
			closeAll(got)
			return Instruction{}, errors.New("handover: exec instruction without its files")
		}
		in.Files[i] = os.NewFile(uintptr(got[0]), "fd"+strconv.Itoa(i))
		got = got[1:]
	}
	closeAll(got)
	return in, nil
}

// Failed tells the supervisor that the exec it asked for failed, and why.
func (c *Conn) Failed(why string) error {
	var n [5]byte
	n[0] = failed
	binary.BigEndian.PutUint32(n[1:], uint32(len(why)))
	return c.write(append(n[:], why...))
}

// ExecFailure returns what the shell-to-be said with [Conn.Failed], once
// it has ended: "" when it said nothing (its exec succeeded, and closed
// its end).
func (c *Conn) ExecFailure() string {
	var b [1]byte
	if n, err := unix.Read(c.fd(), b[:]); err != nil || n == 0 || b[0] != failed {
		return ""
	}
	body, err := c.readBody()
	if err != nil {
		return ""
	}
	return string(body)
}

func (c *Conn) readBody() ([]byte, error) {
	var n [4]byte
	if err := c.readFull(n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxBody {
		return nil, fmt.Errorf("handover: message of %d bytes", size)
	}
	body := make([]byte, size)
	if err := c.readFull(body); err != nil {
		return nil, err
	}
	return body, nil
}

func (c *Conn) readFull(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Read(c.fd(), b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("handover: read: %w", err)
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b = b[n:]
	}
	return nil
}

func (c *Conn) write(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(c.fd(), b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("handover: write: %w", err)
		}
		b = b[n:]
	}
	return nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// encodeExec is an exec instruction's body: which of fds 0-2 travel
// ('o') or are closed ('c'), then the path, argc, argv and environment,
// each ended by a NUL.
func encodeExec(open [3]bool, path string, argv, env []string) []byte {
	var body bytes.Buffer
	for _, o := range open {
		if o {
			body.WriteByte('o')
		} else {
			body.WriteByte('c')
		}
	}
	body.WriteByte(0)
	for _, s := range append(append([]string{path, strconv.Itoa(len(argv))}, argv...), env...) {
		body.WriteString(s)
		body.WriteByte(0)
	}
	return body.Bytes()
}

// decodeExec reads what encodeExec wrote.
func decodeExec(body []byte) (open [3]bool, path string, argv, env []string, err error) {
	bad := errors.New("handover: malformed exec instruction")
	if len(body) == 0 || body[len(body)-1] != 0 {
		return open, "", nil, nil, bad
	}
	fields := bytes.Split(body[:len(body)-1], []byte{0})
	if len(fields) < 3 || len(fields[0]) != 3 {
		return open, "", nil, nil, bad
	}
	for i, m := range fields[0] {
		switch m {
		case 'o':
			open[i] = true
		case 'c':
		default:
			return open, "", nil, nil, bad
		}
	}
	argc, err := strconv.Atoi(string(fields[2]))
	if err != nil || argc < 0 || argc > len(fields)-3 || strconv.Itoa(argc) != string(fields[2]) {
		return open, "", nil, nil, bad
	}
	path = string(fields[1])
	for _, f := range fields[3 : 3+argc] {
		argv = append(argv, string(f))
	}
	for _, f := range fields[3+argc:] {
		env = append(env, string(f))
	}
	return open, path, argv, env, nil
}
