package fork

import (
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/undosh/undosh/internal/procs"
)

// The init's instructions and report travel as fields ended by NUL bytes,
// which no path, argument or environment string can hold: a decoder of a
// dozen lines, and no reflection in the init's start-up, on every
// session's critical path.
const (
	specMagic   = "undosh-fork-spec-1"
	reportMagic = "undosh-fork-report-1"
)

type wire struct{ b []byte }

func (w *wire) str(s string) { w.b = append(append(w.b, s...), 0) }
func (w *wire) num(n int64)  { w.str(strconv.FormatInt(n, 10)) }
func (w *wire) flag(v bool) {
	if v {
		w.str("1")
	} else {
		w.str("0")
	}
}
func (w *wire) strs(l []string) {
	w.num(int64(len(l)))
	for _, s := range l {
		w.str(s)
	}
}

// unwire reads fields; the first error sticks.
type unwire struct {
	f   []string
	err error
}

var errWire = errors.New("malformed message")

func newUnwire(b []byte) *unwire {
	s := string(b)
	if !strings.HasSuffix(s, "\x00") {
		return &unwire{err: errWire}
	}
	return &unwire{f: strings.Split(s[:len(s)-1], "\x00")}
}

func (u *unwire) str() string {
	if u.err != nil || len(u.f) == 0 {
		u.err = errWire
		return ""
	}
	s := u.f[0]
	u.f = u.f[1:]
	return s
}

func (u *unwire) num() int64 {
	n, err := strconv.ParseInt(u.str(), 10, 64)
	if err != nil && u.err == nil {
		u.err = errWire
	}
	return n
}

// id reads a uid or gid: 0 to 2^32-2 (-1 means "unchanged" to the kernel).
func (u *unwire) id() int {
	n := u.num()
	if u.err == nil && (n < 0 || n >= 1<<32-1) {
		u.err = errWire
	}
	return int(n)
}

// unum reads a number that is never negative (a start time in clock
// ticks).
func (u *unwire) unum() uint64 {
	n, err := strconv.ParseUint(u.str(), 10, 64)
	if err != nil && u.err == nil {
		u.err = errWire
	}
	return n
}

// count reads a count of items that each take at least one field.
func (u *unwire) count() int {
	n := u.num()
	if u.err == nil && (n < 0 || n > int64(len(u.f))) {
		u.err = errWire
	}
	if u.err != nil {
		return 0
	}
	return int(n)
}

func (u *unwire) flag() bool { return u.str() == "1" }

func (u *unwire) strs() []string {
	n := u.num()
	if u.err != nil || n < 0 || n > int64(len(u.f)) {
		u.err = errWire
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = u.str()
	}
	return l
}

func (u *unwire) end() error {
	if u.err == nil && len(u.f) != 0 {
		u.err = errWire
	}
	return u.err
}

func (s *initSpec) encode() []byte {
	var w wire
	w.str(specMagic)
	w.str(s.Root)
	w.str(s.HostMountNS)
	w.str(s.Hostname)
	w.str(s.Dir)
	w.str(s.Path)
	w.strs(s.Argv)
	w.strs(s.Env)
	w.flag(s.Rootless)
	w.strs(s.Binds)
	w.num(int64(len(s.Layers)))
	for _, l := range s.Layers {
		w.str(l.Mount)
		w.str(l.Upper)
		w.str(l.Work)
		w.flag(l.ReadOnly)
	}
	w.flag(s.User != nil)
	if s.User != nil {
		w.num(int64(s.User.UID))
		w.num(int64(s.User.GID))
		w.num(int64(len(s.User.Groups)))
		for _, g := range s.User.Groups {
			w.num(int64(g))
		}
	}
	w.flag(s.Leftovers)
	return w.b
}

func decodeSpec(b []byte) (*initSpec, error) {
	u := newUnwire(b)
	if u.str() != specMagic {
		return nil, errWire
	}
	s := &initSpec{
		Root:        u.str(),
		HostMountNS: u.str(),
		Hostname:    u.str(),
		Dir:         u.str(),
		Path:        u.str(),
		Argv:        u.strs(),
		Env:         u.strs(),
		Rootless:    u.flag(),
		Binds:       u.strs(),
	}
	n := u.num()
	if u.err == nil && (n < 0 || n > int64(len(u.f))) {
		u.err = errWire
	}
	for i := int64(0); i < n && u.err == nil; i++ {
		s.Layers = append(s.Layers, specLayer{Mount: u.str(), Upper: u.str(), Work: u.str(), ReadOnly: u.flag()})
	}
	if u.flag() {
		s.User = &User{UID: u.id(), GID: u.id()}
		n := u.num()
		if u.err == nil && (n < 0 || n > int64(len(u.f))) {
			u.err = errWire
		}
		for i := int64(0); i < n && u.err == nil; i++ {
			s.User.Groups = append(s.User.Groups, u.id())
		}
	}
	s.Leftovers = u.flag()
	return s, u.end()
}

func (r *initReport) encode() []byte {
	var w wire
	w.str(reportMagic)
	w.num(int64(r.Status))
	w.num(int64(r.Signal))
	w.num(r.SetupNS)
	w.flag(r.NotFound)
	w.str(noNul(r.Error))
	w.num(int64(len(r.Leftovers)))
	for _, p := range r.Leftovers {
		w.num(int64(p.PID))
		w.num(int64(p.PPID))
		w.str(strconv.FormatUint(p.Start, 10))
		w.str(noNul(p.Comm))
		w.strs(noNuls(p.Argv))
		w.str(noNul(p.Exe))
		w.str(noNul(p.Cwd))
		w.strs(noNuls(p.Env))
		w.num(int64(p.UID))
		w.num(int64(p.GID))
		w.num(int64(len(p.Groups)))
		for _, g := range p.Groups {
			w.num(int64(g))
		}
		w.num(int64(p.Session))
		w.num(int64(p.Group))
		w.flag(p.Forked)
	}
	w.num(int64(r.Unread))
	return w.b
}

// noNul drops the NUL bytes of s, which the wire cannot carry; what the
// init reads from /proc has none.
func noNul(s string) string { return strings.ReplaceAll(s, "\x00", "") }

func noNuls(l []string) []string {
	if !slices.ContainsFunc(l, func(s string) bool { return strings.IndexByte(s, 0) >= 0 }) {
		return l
	}
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = noNul(s)
	}
	return out
}

func decodeReport(b []byte) (initReport, error) {
	u := newUnwire(b)
	if u.str() != reportMagic {
		return initReport{}, errWire
	}
	r := initReport{Status: int(u.num()), Signal: int(u.num()), SetupNS: u.num(), NotFound: u.flag(), Error: u.str()}
	n := u.count()
	for i := 0; i < n && u.err == nil; i++ {
		p := procs.Proc{PID: int(u.num()), PPID: int(u.num()), Start: u.unum(), Comm: u.str(), Argv: u.strs(),
			Exe: u.str(), Cwd: u.str(), Env: u.strs(), UID: u.id(), GID: u.id()}
		for g := u.count(); g > 0 && u.err == nil; g-- {
			p.Groups = append(p.Groups, u.id())
		}
		p.Session, p.Group, p.Forked = int(u.num()), int(u.num()), u.flag()
		r.Leftovers = append(r.Leftovers, p)
	}
	if r.Unread = int(u.num()); r.Unread < 0 && u.err == nil {
		u.err = errWire
	}
	return r, u.end()
}

// maxReport bounds the init's report; the init leaves out processes a
// session left (initReport.Unread) rather than write more.
const maxReport = 8 << 20

// readReport reads the init's report, until the init closes it or exits.
// What passes maxReport is drained, so that the init never blocks on a
// full pipe, and fails to decode.
func readReport(r io.Reader) (initReport, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxReport+1))
	if err == nil && len(b) > maxReport {
		_, _ = io.Copy(io.Discard, r)
		return initReport{}, errors.New("the report is too long")
	}
	if err != nil {
		return initReport{}, err
	}
	if len(b) == 0 {
		return initReport{}, io.ErrUnexpectedEOF
	}
	return decodeReport(b)
}
