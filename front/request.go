package front

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/watchd"
)

// The wire format is docs/front.md's; front/undosh-fast.c is the other
// end. Both ways little-endian, one request per connection.

// RequestMagic begins a request, and names the version of the format:
// a front end of another version gets no answer it could misread.
const RequestMagic = "UNDOSHQ2"

// maxRequest bounds a request's payload (Linux limits argv and
// environment to a few MiB together; the front end sends at most 8 MiB).
const maxRequest = 8 << 20

// The verdicts of an answer (docs/front.md §4).
const (
	verdictExec    = 'E' // exec the real shell named
	verdictLimit   = 'L' // exec the real shell under the read-only limit's plan
	verdictNS      = 'N' // the same, with an fd on a mount namespace made under it
	verdictUndosh  = 'U' // exec undosh
	answerHeadSize = 5   // the verdict and u32(n)
)

// request is what a front end sends.
type request struct {
	argv, env []string
	cwd       string
	// execfn is the file the front end was run as (AT_EXECFN).
	execfn string
	// body is the payload of a request to the watchers (watchd).
	body []byte
}

// errWatchRequest says that a request is for the watchers.
var errWatchRequest = errors.New("a request to the watchers")

// read reads one request from connection fd and the credentials of its
// sender, whose uid must be the server's.
func read(fd int) (request, *unix.Ucred, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return request{}, nil, err
	}
	if int(cred.Uid) != os.Getuid() {
		return request{}, nil, fmt.Errorf("peer uid %d is not ours", cred.Uid)
	}
	head := make([]byte, 12)
	if err := readFull(fd, head); err != nil {
		return request{}, nil, err
	}
	if string(head[:8]) == watchd.Magic {
		body, err := watchd.ReadBody(fdReader(fd), head)
		if err != nil {
			return request{}, nil, err
		}
		return request{body: body}, cred, errWatchRequest
	}
	if string(head[:8]) != RequestMagic {
		return request{}, nil, errors.New("bad magic")
	}
	n := binary.LittleEndian.Uint32(head[8:])
	if n > maxRequest {
		return request{}, nil, fmt.Errorf("request of %d bytes", n)
	}
	body := make([]byte, n)
	if err := readFull(fd, body); err != nil {
		return request{}, nil, err
	}
	req, err := decodeRequest(body)
	return req, cred, err
}

// fdReader reads from fd, which times out (SO_RCVTIMEO).
type fdReader int

func (f fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// readFull reads len(b) bytes from fd, which times out (SO_RCVTIMEO).
func readFull(fd int, b []byte) error {
	_, err := io.ReadFull(fdReader(fd), b)
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// decodeRequest decodes a request payload:
//
//	u32(argc) {u32(n) bytes}×argc u32(envc) {u32(n) bytes}×envc u32(n) cwd u32(n) execfn
//
// with nothing after it.
func decodeRequest(b []byte) (request, error) {
	var req request
	next := func() (string, bool) {
		if len(b) < 4 {
			return "", false
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return "", false
		}
		s := string(b[4 : 4+n])
		b = b[4+n:]
		return s, true
	}
	count := func() (int, bool) {
		if len(b) < 4 {
			return 0, false
		}
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		// Each entry takes at least 4 bytes.
		return int(n), uint64(n)*4 <= uint64(len(b))
	}
	for _, list := range []*[]string{&req.argv, &req.env} {
		n, ok := count()
		if !ok {
			return request{}, errors.New("truncated request")
		}
		*list = make([]string, 0, n)
		for range n {
			s, ok := next()
			if !ok {
				return request{}, errors.New("truncated request")
			}
			*list = append(*list, s)
		}
	}
	cwd, ok := next()
	execfn, ok2 := next()
	if !ok || !ok2 || len(b) != 0 {
		return request{}, errors.New("malformed request")
	}
	req.cwd, req.execfn = cwd, execfn
	return req, nil
}

// answer is what the server tells a front end.
type answer struct {
	verdict byte
	// text is the real shell ('E'), undosh ('U') or the plan of the
	// read-only limit ('L', and 'N' when the front end cannot enter ns).
	text string
	// ns, with 'N', is a namespace made under the plan, to enter instead
	// of applying it.
	ns *os.File
}

// encode is a's bytes: the verdict, u32(len(text)), text. An 'N'
// answer's fd goes with them (SCM_RIGHTS).
func (a answer) encode() []byte {
	out := make([]byte, answerHeadSize, answerHeadSize+len(a.text))
	out[0] = a.verdict
	binary.LittleEndian.PutUint32(out[1:], uint32(len(a.text)))
	return append(out, a.text...)
}
