package pty

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// terminal is the caller's terminal and the settings it had before Run
// made it raw.
type terminal struct {
	fd    int
	saved unix.Termios
}

// terminalOf returns f as a terminal, or nil when f is nil or not a terminal.
func terminalOf(f *os.File) *terminal {
	if f == nil {
		return nil
	}
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil
	}
	return &terminal{fd: fd, saved: *t}
}

// makeRaw puts the terminal in raw mode, as cfmakeraw(3) does: every byte,
// including Ctrl-C and Ctrl-Z, passes through to the PTY, whose own line
// discipline gives it its meaning.
func (t *terminal) makeRaw() error {
	raw := Raw(t.saved)
	if err := unix.IoctlSetTermios(t.fd, ioctlSetTermios, &raw); err != nil {
		return fmt.Errorf("set terminal raw: %w", err)
	}
	return nil
}

// Raw returns the settings t in raw mode, as cfmakeraw(3) makes them:
// no echo, no line editing, no signals from keys, bytes as they are.
func Raw(t unix.Termios) unix.Termios {
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	return t
}

// restore gives the terminal back the settings it had before makeRaw.
func (t *terminal) restore() error {
	if err := unix.IoctlSetTermios(t.fd, ioctlSetTermios, &t.saved); err != nil {
		return fmt.Errorf("restore terminal: %w", err)
	}
	return nil
}

// size returns the terminal's window size.
func (t *terminal) size() (*unix.Winsize, error) {
	ws, err := unix.IoctlGetWinsize(t.fd, unix.TIOCGWINSZ)
	if err != nil {
		return nil, fmt.Errorf("get window size: %w", err)
	}
	return ws, nil
}
