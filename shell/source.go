package shell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/classify"
)

// maxText is the most text undosh classifies; a longer script is unknown
// code.
const maxText = 1 << 20

// source is what a step will run, as far as undosh can read it.
type source struct {
	text string
	// unseen says why the text cannot be read; the step is unknown code.
	unseen string
	// passThrough: nothing undosh could judge runs (an interactive
	// session, a missing script): the real shell handles it.
	passThrough bool
	// stdin replaces fd 0 for the real shell: the script read from a
	// pipe, relayed (see [relay]) so that commands reading the rest of it
	// still do. nil leaves fd 0 as it is.
	stdin *os.File
	// script is the script file read, for `bash -n`.
	script string
	// session: standard input is a pipe that went quiet before its end,
	// as when a harness writes one command at a time and waits for its
	// output. text holds what came so far; the rest is relayed to the
	// shell as it comes (see [feedSession]).
	session bool
	feed    *os.File // the write end of stdin's pipe, for a session
	// interactive: bash would read commands from its terminal; undosh
	// runs it on a PTY and protects each line (see [run.interactive]).
	interactive bool
}

// quiet is how long a pipe on standard input may stay silent, before its
// end, until undosh takes it for a session fed one command at a time
// rather than a script: waiting for the end would wait for ever.
const quiet = 300 * time.Millisecond

// readSource reads the commands of inv.
func readSource(inv invocation, p *Process) (source, error) {
	switch inv.Mode {
	case modeCommand:
		return source{text: inv.Command}, nil
	case modeScript:
		if fd, ok := fdName(inv.Script); ok {
			return readScriptFd(fd, inv.Script, p.Getenv)
		}
		return readScript(inv.Script, "", p.Getenv)
	case modeStdin:
		return readStdin(inv, p)
	}
	return source{passThrough: true}, nil
}

// readScript reads a script operand the way bash finds it: as given, and
// for a bare name in the working directory, then on PATH. Relative paths
// are taken from cwd ("" for the process's own). A name that stands for
// one of the shell's open files (/dev/fd/N, /dev/stdin, as from
// `bash <(…)`) is unseen: only the process that holds the file can read
// it, and it is [readScriptFd]'s to read.
func readScript(name, cwd string, getenv func(string) string) (source, error) {
	if _, ok := fdName(name); ok {
		return source{unseen: name + " is a file descriptor of the shell that runs it"}, nil
	}
	return findScript(name, cwd, getenv)
}

// fdName reports whether name stands for an open file of the process
// that opens it, and which fd.
func fdName(name string) (int, bool) {
	if name == "/dev/stdin" {
		return 0, true
	}
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(name, dir); ok {
			fd, err := strconv.Atoi(n)
			return fd, err == nil && fd >= 0 && strconv.Itoa(fd) == n
		}
	}
	return 0, false
}

// readScriptFd reads the script on the shell's fd, named name. A pipe or
// a socket (`bash <(…)`) is read to its end and replaced by a relay of
// the same bytes (see [relay]), so that the shell reads exactly what it
// would have; any other file is read by its name.
func readScriptFd(fd int, name string, getenv func(string) string) (source, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return source{passThrough: true}, nil // bash cannot open it either
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFSOCK {
		return findScript(name, "", getenv)
	}
	mfd, err := unix.MemfdCreate("undosh-script", unix.MFD_CLOEXEC)
	if err != nil {
		return source{}, fmt.Errorf("relay the script %s: %w", name, err)
	}
	mem := os.NewFile(uintptr(mfd), name)
	n, err := copyFd(mem, fd)
	if err != nil {
		mem.Close()
		return source{unseen: "cannot read the script " + name + ": " + err.Error()}, nil
	}
	var s source
	if n > maxText {
		s.unseen = fmt.Sprintf("the script %s is larger than %d bytes", name, maxText)
	} else {
		buf := make([]byte, n)
		if _, err := io.ReadFull(io.NewSectionReader(mem, 0, n), buf); err != nil {
			mem.Close()
			return source{}, fmt.Errorf("relay the script %s: %w", name, err)
		}
		s.text = string(buf)
	}
	f, err := relay(mem, n)
	if err != nil {
		return source{}, fmt.Errorf("relay the script %s: %w", name, err)
	}
	defer f.Close()
	// Dup3 without O_CLOEXEC: the fd must reach the shell as it was.
	if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
		return source{}, fmt.Errorf("relay the script %s: %w", name, err)
	}
	return s, nil
}

// findScript is [readScript] for a name that is not a file descriptor.
func findScript(name, cwd string, getenv func(string) string) (source, error) {
	candidates := []string{name}
	if !strings.Contains(name, "/") {
		for _, dir := range filepath.SplitList(getenv("PATH")) {
			if dir == "" {
				dir = "."
			}
			candidates = append(candidates, filepath.Join(dir, name))
		}
	}
	for _, c := range candidates {
		if cwd != "" && !filepath.IsAbs(c) {
			c = filepath.Join(cwd, c)
		}
		st, err := os.Stat(c)
		if err != nil || st.IsDir() && c != name {
			continue
		}
		if !st.Mode().IsRegular() {
			// A directory or a device: bash refuses it or reads it.
			return source{passThrough: st.IsDir(), unseen: c + " is not a regular file"}, nil
		}
		if st.Size() > maxText {
			return source{unseen: fmt.Sprintf("the script %s is larger than %d bytes", c, maxText)}, nil
		}
		data, err := classify.ReadScript(c)
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				return source{passThrough: true}, nil // bash cannot read it either
			}
			return source{unseen: "cannot read the script: " + err.Error()}, nil
		}
		return source{text: string(data), script: c}, nil
	}
	// bash reports the missing file (127) and runs nothing.
	return source{passThrough: true}, nil
}

// readStdin reads a script from fd 0 without taking it from the shell: a
// regular file is read in place (bash reads it from the same offset), a
// pipe is read to its end and relayed through a new pipe (a memory file
// when it is too large for one).
func readStdin(inv invocation, p *Process) (source, error) {
	if p.Closed(0) {
		return source{passThrough: true}, nil
	}
	fd := 0
	if isTerminal(fd) {
		// An interactive session: undosh protects it line by line when
		// the real shell is bash and would be interactive (stderr a
		// terminal too, or -i); sh is left to itself.
		return source{passThrough: true, interactive: inv.Personality == "bash" && (inv.Interactive || isTerminal(2)) && !p.Closed(2)}, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return source{passThrough: true}, nil
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		off, err := unix.Seek(fd, 0, io.SeekCurrent)
		if err != nil {
			return source{unseen: "cannot read the script on standard input: " + err.Error()}, nil
		}
		if st.Size-off > maxText {
			return source{unseen: "the script on standard input is larger than 1 MiB"}, nil
		}
		buf := make([]byte, st.Size-off)
		n, err := unix.Pread(fd, buf, off)
		if err != nil {
			return source{unseen: "cannot read the script on standard input: " + err.Error()}, nil
		}
		return source{text: string(buf[:n])}, nil
	}
	// A pipe, a socket or a device: read it all, then hand the shell the
	// same bytes again, on a pipe when they fit in one.
	mfd, err := unix.MemfdCreate("undosh-stdin", unix.MFD_CLOEXEC)
	if err != nil {
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	mem := os.NewFile(uintptr(mfd), "/dev/stdin")
	n, err := copyFd(mem, fd)
	if errors.Is(err, errQuiet) {
		return sessionSource(mem, n)
	}
	if err != nil {
		mem.Close()
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	if n == 0 {
		// Nothing was read: fd 0 is at its end already and can stay as
		// it is (/dev/null stays /dev/null).
		mem.Close()
		return source{}, nil
	}
	var s source
	if n > maxText {
		s.unseen = "the script on standard input is larger than 1 MiB"
	} else {
		buf := make([]byte, n)
		if _, err := io.ReadFull(io.NewSectionReader(mem, 0, n), buf); err != nil {
			mem.Close()
			return source{}, fmt.Errorf("relay standard input: %w", err)
		}
		s.text = string(buf)
	}
	s.stdin, err = relay(mem, n)
	if err != nil {
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	return s, nil
}

// errQuiet: the input went quiet for [quiet] before its end.
var errQuiet = errors.New("standard input went quiet before its end")

// copyFd copies fd to its end into w, or until it stays silent for
// [quiet] (errQuiet). It reads fd with plain system calls: an *os.File for
// fd 0 would close it when collected.
func copyFd(w io.Writer, fd int) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		ready, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(quiet/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && ready == 0 {
			return n, errQuiet
		}
		k, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, nil
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return n, err
		}
		n += int64(k)
	}
}

// relay returns what the shell gets as fd 0 in place of the n bytes read
// from a pipe, now held in mem. It is a pipe holding them, with its write
// end closed, when they fit in one: the shell then reads its script byte
// by byte as it reads a pipe, and a command that reads the rest of stdin
// consumes what it reads (head on a seekable file would seek back, and the
// shell would run the lines head printed). Otherwise it is mem itself,
// rewound. relay closes mem unless it returns it.
func relay(mem *os.File, n int64) (*os.File, error) {
	if f, ok := pipeOf(mem, n); ok {
		mem.Close()
		return f, nil
	}
	if _, err := mem.Seek(0, io.SeekStart); err != nil {
		mem.Close()
		return nil, err
	}
	return mem, nil
}

// pipeOf copies the n bytes of mem into a new pipe and returns its read
// end, or false when the pipe cannot hold them all.
func pipeOf(mem *os.File, n int64) (*os.File, bool) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, false
	}
	r, w := p[0], p[1]
	fail := func() (*os.File, bool) {
		unix.Close(r)
		unix.Close(w)
		return nil, false
	}
	size, err := unix.FcntlInt(uintptr(w), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		return fail()
	}
	if int64(size) < n {
		if n > 1<<30 {
			return fail()
		}
		// Past /proc/sys/fs/pipe-max-size this needs CAP_SYS_RESOURCE.
		size, err = unix.FcntlInt(uintptr(w), unix.F_SETPIPE_SZ, int(n))
		if err != nil || int64(size) < n {
			return fail()
		}
	}
	buf := make([]byte, 64<<10)
	for off := int64(0); off < n; {
		k, err := unix.Pread(int(mem.Fd()), buf[:min(int64(len(buf)), n-off)], off)
		if err != nil || k == 0 {
			return fail()
		}
		for b := buf[:k]; len(b) > 0; {
			m, err := unix.Write(w, b)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return fail()
			}
			b = b[m:]
		}
		off += int64(k)
	}
	unix.Close(w)
	return os.NewFile(uintptr(r), "/dev/stdin"), true
}

// sessionSource is a session on standard input: the n bytes that came so
// far are in mem, and the shell gets a pipe that [feedSession] fills.
func sessionSource(mem *os.File, n int64) (source, error) {
	buf := make([]byte, n)
	if _, err := io.ReadFull(io.NewSectionReader(mem, 0, n), buf); err != nil {
		mem.Close()
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	mem.Close()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	return source{session: true, text: string(buf), stdin: os.NewFile(uintptr(p[0]), "/dev/stdin"),
		feed: os.NewFile(uintptr(p[1]), "stdin-feed")}, nil
}

// feedSession writes what came so far, then everything that comes on fd 0
// until its end, into w, and closes w. It returns when the shell stops
// reading (EPIPE) too.
func feedSession(w *os.File, first []byte) {
	defer w.Close()
	if _, err := w.Write(first); err != nil {
		return
	}
	buf := make([]byte, 64<<10)
	for {
		k, err := unix.Read(0, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			unix.Poll([]unix.PollFd{{Fd: 0, Events: unix.POLLIN}}, -1)
			continue
		}
		if err != nil || k == 0 {
			return
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
	}
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// bashRejects reports whether the real shell finds a syntax error in the
// step too (bash -n), so that nothing after it will run. It runs in cwd
// with the step's environment env ($POSIXLY_CORRECT changes what bash
// parses), whoever asks: undosh, or the front end's server.
func bashRejects(real string, inv invocation, src source, env []string, cwd string) bool {
	args := []string{real, "-n"}
	if inv.POSIX && inv.Personality == "bash" {
		args = append(args, "--posix")
	}
	var stdin *os.File
	switch {
	case inv.Mode == modeCommand:
		args = append(args, "-c", src.text)
	case src.script != "":
		args = append(args, src.script)
	default:
		f, err := os.CreateTemp("", "undosh-n-")
		if err != nil {
			return false
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := f.WriteString(src.text); err != nil {
			return false
		}
		f.Seek(0, io.SeekStart)
		stdin = f
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer null.Close()
	if stdin == nil {
		stdin = null
	}
	if env == nil {
		env = []string{} // not the asker's own
	}
	p, err := os.StartProcess(real, args, &os.ProcAttr{Dir: cwd, Env: env, Files: []*os.File{stdin, null, null}})
	if err != nil {
		return false
	}
	st, err := p.Wait()
	return err == nil && !st.Success()
}
