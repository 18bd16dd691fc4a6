package sudo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Entry is the first argument of the root side: `UNDOSH Entry PID START
// SPEC RESULT` (see the package documentation for why an argument).
const Entry = "--undosh-sudo-step"

// ErrPassword is returned (wrapped, with what sudo said) by [Probe] when
// sudo would ask for a password, or refuses this user: `sudo -n true`
// failed.
var ErrPassword = errors.New("sudo needs a password here")

// probes caches each sudo's answer for the life of the process: a
// session asks once, however many steps run sudo.
var probes sync.Map // path → error (nil: passwordless)

// Probe reports whether sudo at path runs commands for this user without
// a password: nil when `sudo -n true` succeeds, else an error that
// matches [ErrPassword]. It never prompts (standard input is /dev/null,
// output is discarded, and -n forbids a prompt), and asks once per
// process.
func Probe(path string) error {
	if v, ok := probes.Load(path); ok {
		err, _ := v.(error)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-n", "true")
	var out bytes.Buffer
	cmd.Stderr = &out // Stdin and Stdout nil: /dev/null
	var err error
	if rerr := cmd.Run(); rerr != nil {
		err = fmt.Errorf("%w (sudo -n true: %s)", ErrPassword, strings.TrimPrefix(firstLine(out.String(), rerr), "sudo: "))
	}
	probes.Store(path, err)
	return err
}

func firstLine(s string, err error) string {
	if l, _, _ := strings.Cut(strings.TrimSpace(s), "\n"); l != "" {
		return l
	}
	return err.Error()
}

// maxMessage bounds a step and an answer. A step is argv and environment
// (at most ARG_MAX, 2 MiB by default) and a few paths.
const maxMessage = 16 << 20

// Offer is the caller's end of a hand-over: the step, sealed, and the
// empty answer, both memory files open in this process. Callers must
// Close it.
type Offer struct {
	spec, result *os.File
	start        string // this process's start time
}

// NewOffer puts spec (an encoded [Spec]) in a sealed memory file and
// makes an empty one for the answer.
func NewOffer(spec []byte) (*Offer, error) {
	if len(spec) > maxMessage {
		return nil, fmt.Errorf("sudo hand-over: the step is %d bytes, more than %d", len(spec), maxMessage)
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("sudo hand-over: %w", err)
	}
	s, err := memfd(specName)
	if err != nil {
		return nil, err
	}
	if _, err := s.Write(spec); err != nil {
		s.Close()
		return nil, fmt.Errorf("sudo hand-over: %w", err)
	}
	if _, err := unix.FcntlInt(s.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		s.Close()
		return nil, fmt.Errorf("sudo hand-over: seal the step: %w", err)
	}
	r, err := memfd(resultName)
	if err != nil {
		s.Close()
		return nil, err
	}
	return &Offer{spec: s, result: r, start: start}, nil
}

// The memory files' names, as /proc/PID/fd shows them.
const (
	specName   = "undosh-sudo-spec"
	resultName = "undosh-sudo-result"
)

func memfd(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("sudo hand-over: memfd: %w", err)
	}
	return os.NewFile(uintptr(fd), "memfd:"+name), nil
}

// Args are the arguments of the root side after the program: [Entry],
// this process's pid and start time, and the two fds.
func (o *Offer) Args() []string {
	return []string{Entry, strconv.Itoa(os.Getpid()), o.start, strconv.Itoa(int(o.spec.Fd())), strconv.Itoa(int(o.result.Fd()))}
}

// Result returns what the root side answered. taken is false when it
// wrote nothing: it never took the step (sudo refused to run undosh),
// so nothing ran. answer is nil when it took the step but ended without
// saying how (it was killed). Call it once the root side has exited.
func (o *Offer) Result() (taken bool, answer []byte, err error) {
	b, err := io.ReadAll(io.NewSectionReader(o.result, 0, int64(len(takenMark))+maxMessage+1))
	if err != nil {
		return false, nil, fmt.Errorf("sudo hand-over: read the answer: %w", err)
	}
	if len(b) == 0 {
		return false, nil, nil
	}
	rest, ok := bytes.CutPrefix(b, []byte(takenMark))
	if !ok {
		return true, nil, errors.New("sudo hand-over: the answer is malformed")
	}
	if len(rest) > maxMessage {
		return true, nil, fmt.Errorf("sudo hand-over: the answer is more than %d bytes", maxMessage)
	}
	if len(rest) == 0 {
		return true, nil, nil
	}
	return true, rest, nil
}

// takenMark starts the answer as soon as the root side has taken the
// step; the answer proper follows it, written once. Neither write is
// ever undone, so the caller can tell "never ran" from "ran, and was
// cut short".
const takenMark = "taken\n"

// Close closes both memory files.
func (o *Offer) Close() {
	o.spec.Close()
	o.result.Close()
}

// Caller is the process that offered a step, as the root side found it.
type Caller struct {
	PID      int
	UID, GID int
	// Groups are its supplementary groups.
	Groups []int
}

// Handover is the root side's end: the step the caller offered, and
// where to answer. Callers must Close it.
type Handover struct {
	Caller Caller
	// Spec is the step, as the caller encoded it.
	Spec   []byte
	result *os.File
}

// RefusedError is returned by [Accept] when the offer does not pass its
// checks.
type RefusedError struct{ Why string }

func (e *RefusedError) Error() string { return "sudo hand-over refused: " + e.Why }

func refused(format string, a ...any) error { return &RefusedError{Why: fmt.Sprintf(format, a...)} }

// Accept takes the offer named by args (what follows [Entry]: PID START
// SPEC RESULT) for a root side that sudo started for sudoUID and sudoGID
// (SUDO_UID, SUDO_GID). It refuses (*[RefusedError]) unless PID is an
// ancestor of this process that started at START and runs with every uid
// sudoUID, and the two fds are its memory files (see the package
// documentation).
func Accept(args []string, sudoUID, sudoGID string) (*Handover, error) {
	return accept(args, sudoUID, sudoGID, os.Getpid())
}

func accept(args []string, sudoUID, sudoGID string, self int) (*Handover, error) {
	if len(args) != 4 {
		return nil, refused("want PID START SPEC RESULT, got %d arguments", len(args))
	}
	var n [4]int
	for i, a := range args {
		v, err := strconv.Atoi(a)
		if err != nil || v < 0 || (i != 1 && v == 0) {
			return nil, refused("argument %d (%q) is not a number", i+1, a)
		}
		n[i] = v
	}
	pid, start, specFD, resultFD := n[0], args[1], n[2], n[3]
	uid, err1 := strconv.Atoi(sudoUID)
	gid, err2 := strconv.Atoi(sudoGID)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return nil, refused("SUDO_UID and SUDO_GID (%q, %q) do not name a user: not started by sudo", sudoUID, sudoGID)
	}
	c, err := check(pid, start, uid, self)
	if err != nil {
		return nil, err
	}
	c.GID = gid
	spec, err := openMemfd(pid, specFD, specName, uid, true)
	if err != nil {
		return nil, err
	}
	defer spec.Close()
	result, err := openMemfd(pid, resultFD, resultName, uid, false)
	if err != nil {
		return nil, err
	}
	// The fds were opened from the process checked above, unless it died
	// and its pid was given to another meanwhile: check it again.
	if _, err := check(pid, start, uid, self); err != nil {
		result.Close()
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(spec, maxMessage+1))
	if err != nil || len(b) > maxMessage {
		result.Close()
		return nil, refused("read the step: %v (%d bytes)", err, len(b))
	}
	return &Handover{Caller: c, Spec: b, result: result}, nil
}

// check finds pid among self's ancestors and checks its start time and
// its uids.
func check(pid int, start string, uid, self int) (Caller, error) {
	p := self
	for range 64 {
		st, err := readStat(p)
		if err != nil {
			return Caller{}, refused("read process %d: %v", p, err)
		}
		p = st.ppid
		if p == pid || p <= 1 {
			break
		}
	}
	if p != pid {
		return Caller{}, refused("process %d is not an ancestor of this one", pid)
	}
	st, err := readStat(pid)
	if err != nil || st.start != start {
		return Caller{}, refused("process %d did not start at %s: it is not the caller", pid, start)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Caller{}, refused("read process %d: %v", pid, err)
	}
	uids := field(status, "Uid:")
	if len(uids) != 4 {
		return Caller{}, refused("process %d: no Uid line", pid)
	}
	for _, u := range uids {
		if u != strconv.Itoa(uid) {
			return Caller{}, refused("process %d runs as uid %s, not SUDO_UID %d", pid, strings.Join(uids, "/"), uid)
		}
	}
	c := Caller{PID: pid, UID: uid, Groups: []int{}}
	for _, g := range field(status, "Groups:") {
		n, err := strconv.Atoi(g)
		if err != nil {
			return Caller{}, refused("process %d: groups %q", pid, g)
		}
		c.Groups = append(c.Groups, n)
	}
	return c, nil
}

// field returns the words after name at the start of a line of a
// /proc/PID/status file.
func field(status []byte, name string) []string {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// openMemfd opens fd of process pid and checks that it is a memory file
// made by uid with the name given, sealed against writes when sealed is
// set, and writable otherwise.
func openMemfd(pid, fd int, name string, uid int, sealed bool) (*os.File, error) {
	flags := unix.O_RDONLY
	if !sealed {
		flags = unix.O_WRONLY
	}
	p := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	f, err := os.OpenFile(p, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refused("open the caller's fd %d: %v", fd, err)
	}
	fail := func(format string, a ...any) (*os.File, error) {
		f.Close()
		return nil, refused("the caller's fd %d: "+format, append([]any{fd}, a...)...)
	}
	// Only a memory file answers F_GET_SEALS: not a file the caller may
	// read but not write, which the answer would otherwise overwrite.
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		return fail("not a memory file (%v)", err)
	}
	if link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err != nil || !strings.HasPrefix(link, "/memfd:"+name+" ") {
		return fail("not the memory file %s (%q)", name, link)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != uid {
		return fail("not a memory file of uid %d (uid %d, mode %o)", uid, st.Uid, st.Mode)
	}
	want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	switch {
	case sealed && seals&want != want:
		return fail("the step is not sealed against changes (seals %#x)", seals)
	case !sealed && seals&(unix.F_SEAL_WRITE|unix.F_SEAL_GROW) != 0:
		return fail("the answer cannot be written (seals %#x)", seals)
	case !sealed && st.Size != 0:
		return fail("the answer is not empty")
	}
	return f, nil
}

// Taken tells the caller that the root side has taken the step: from
// now on, the step may run, and the caller must never run it itself.
func (h *Handover) Taken() error {
	if _, err := h.result.WriteAt([]byte(takenMark), 0); err != nil {
		return fmt.Errorf("sudo hand-over: answer: %w", err)
	}
	return nil
}

// Reply writes the answer (an encoded [Result]), after [Handover.Taken],
// once.
func (h *Handover) Reply(b []byte) error {
	if len(b) > maxMessage {
		return fmt.Errorf("sudo hand-over: the answer is %d bytes, more than %d", len(b), maxMessage)
	}
	if _, err := h.result.WriteAt(b, int64(len(takenMark))); err != nil {
		return fmt.Errorf("sudo hand-over: answer: %w", err)
	}
	return nil
}

// Close closes the answer's file.
func (h *Handover) Close() { h.result.Close() }

// procStat is what the hand-over reads of /proc/PID/stat.
type procStat struct {
	ppid  int
	start string
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStat{}, errors.New("malformed stat")
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, errors.New("malformed stat")
	}
	return procStat{ppid: ppid, start: f[19]}, nil
}

func startTime(pid int) (string, error) {
	st, err := readStat(pid)
	return st.start, err
}
