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
	raw := t.saved
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(t.fd, ioctlSetTermios, &raw); err != nil {
		return fmt.Errorf("set terminal raw: %w", err)
	}
	return nil
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
