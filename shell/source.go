package shell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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
	// pipe, relayed so that commands reading the rest of it still do.
	stdin *os.File
	// script is the script file read, for `bash -n`.
	script string
}

// readSource reads the commands of inv.
func readSource(inv Invocation, e *Env) (source, error) {
	switch inv.Mode {
	case ModeCommand:
		return source{text: inv.Command}, nil
	case ModeScript:
		return readScript(inv.Script, "", e.Getenv)
	case ModeStdin:
		return readStdin(inv, e)
	}
	return source{passThrough: true}, nil
}

// readScript reads a script operand the way bash finds it: as given, and
// for a bare name in the working directory, then on PATH. Relative paths
// are taken from cwd ("" for the process's own).
func readScript(name, cwd string, getenv func(string) string) (source, error) {
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
		data, err := os.ReadFile(c)
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
// pipe is read to its end and relayed through a memory file.
func readStdin(inv Invocation, e *Env) (source, error) {
	if e.Closed(0) {
		return source{passThrough: true}, nil
	}
	fd := 0
	if isTerminal(fd) {
		// An interactive session: the real shell owns the terminal.
		return source{passThrough: true}, nil
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
	// A pipe, a socket or a device: read it all and hand the shell a
	// seekable copy. Commands that read the rest of their script see the
	// same bytes.
	mfd, err := unix.MemfdCreate("undosh-stdin", unix.MFD_CLOEXEC)
	if err != nil {
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	mem := os.NewFile(uintptr(mfd), "/dev/stdin")
	in := os.NewFile(uintptr(fd), "/dev/stdin")
	n, err := io.Copy(mem, in)
	if err != nil {
		mem.Close()
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	if _, err := mem.Seek(0, io.SeekStart); err != nil {
		mem.Close()
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	s := source{stdin: mem}
	if n > maxText {
		s.unseen = "the script on standard input is larger than 1 MiB"
		return s, nil
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(io.NewSectionReader(mem, 0, n), buf); err != nil {
		mem.Close()
		return source{}, fmt.Errorf("relay standard input: %w", err)
	}
	s.text = string(buf)
	return s, nil
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// bashRejects reports whether the real shell finds a syntax error in the
// step too (bash -n), so that nothing after it will run.
func bashRejects(real string, inv Invocation, src source) bool {
	args := []string{real, "-n"}
	if inv.POSIX && inv.Personality == "bash" {
		args = append(args, "--posix")
	}
	var stdin *os.File
	switch {
	case inv.Mode == ModeCommand:
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
	p, err := os.StartProcess(real, args, &os.ProcAttr{Files: []*os.File{stdin, null, null}})
	if err != nil {
		return false
	}
	st, err := p.Wait()
	return err == nil && !st.Success()
}
