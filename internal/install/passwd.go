package install

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
)

// Files of the root that hold users and shells.
const (
	PasswdFile = "/etc/passwd"
	ShellsFile = "/etc/shells"
	pwdLock    = "/etc/.pwd.lock"
)

// User is one line of the passwd file.
type User struct {
	Name  string `json:"name"`
	UID   int    `json:"uid"`
	Home  string `json:"home"`
	Shell string `json:"shell"`
}

// passwdLine splits a passwd line into its seven fields; ok is false for
// anything else (comments, NIS "+" lines, blank lines).
func passwdLine(line string) ([]string, bool) {
	if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
		return nil, false
	}
	f := strings.Split(line, ":")
	return f, len(f) == 7
}

func userOf(f []string) User {
	uid, _ := strconv.Atoi(f[2])
	return User{Name: f[0], UID: uid, Home: f[5], Shell: f[6]}
}

// lookupUser finds a user in the root's passwd file by name, or by uid
// when name is "".
func (r fsRoot) lookupUser(name string, uid int) (User, error) {
	h, err := r.target(PasswdFile)
	if err != nil {
		return User{}, err
	}
	data, err := os.ReadFile(h)
	if err != nil {
		return User{}, fmt.Errorf("read %s: %w", PasswdFile, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f, ok := passwdLine(line)
		if !ok {
			continue
		}
		u := userOf(f)
		if name != "" && u.Name == name || name == "" && u.UID == uid {
			return u, nil
		}
	}
	if name == "" {
		name = "uid " + strconv.Itoa(uid)
	}
	return User{}, &Error{Msg: fmt.Sprintf("no user %s in %s", name, PasswdFile),
		Fix: "name a user of that passwd file with --user NAME (users from LDAP or NIS cannot be changed here)", Err: ErrNoUser}
}

// ErrNoUser is a user missing from the passwd file.
var ErrNoUser = errors.New("no such user")

// setShell sets the login shell of user in the root's passwd file and
// returns the shell it had. The file is rewritten durably and keeps its
// mode and owner; every other byte stays as it was. If want is set, the
// shell is only changed when it is want (it returns the shell it found).
func (r fsRoot) setShell(user, shell, want string) (string, error) {
	unlock, err := r.lockPasswd()
	if err != nil {
		return "", err
	}
	defer unlock()
	h, err := r.target(PasswdFile)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(h)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", PasswdFile, err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i, line := range lines {
		body := strings.TrimSuffix(line, "\n")
		f, ok := passwdLine(body)
		if !ok || f[0] != user {
			continue
		}
		old := f[6]
		if want != "" && old != want || old == shell {
			return old, nil
		}
		f[6] = shell
		lines[i] = strings.Join(f, ":") + line[len(body):]
		if err := writeLike(h, []byte(strings.Join(lines, ""))); err != nil {
			return "", err
		}
		return old, nil
	}
	return "", fmt.Errorf("set the shell of %s: %w in %s", user, ErrNoUser, PasswdFile)
}

// lockPasswd takes the lock shadow's tools take (lckpwdf) when the root
// has the lock file; without it there is nobody to exclude.
func (r fsRoot) lockPasswd() (func(), error) {
	h, err := r.target(pwdLock)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(h, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", pwdLock, err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EINTR) || time.Now().After(deadline) {
			f.Close()
			return nil, &Error{Msg: fmt.Sprintf("lock %s: %v", pwdLock, err),
				Fix: "another program (useradd, chsh, passwd) is changing the users; try again when it is done", Err: err}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hasLine reports whether the root's file name has a line that is line.
func (r fsRoot) hasLine(name, line string) (bool, error) {
	h, err := r.target(name)
	if err != nil {
		return false, err
	}
	data, err := os.ReadFile(h)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", name, err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == line {
			return true, nil
		}
	}
	return false, nil
}

// appendLine appends the line a.Target to a.Path (creating the file); a
// newline goes first when the file does not end with one.
func (r fsRoot) appendLine(a Action) error {
	h, err := r.target(a.Path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(h)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return atomicfile.Write(h, []byte(a.Target+"\n"), 0o644)
	case err != nil:
		return fmt.Errorf("read %s: %w", a.Path, err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	return writeLike(h, append(data, a.Target+"\n"...))
}

// removeLine undoes appendLine.
func (r fsRoot) removeLine(a Action) error {
	h, err := r.target(a.Path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(h)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", a.Path, err)
	}
	suffix := []byte(a.Target + "\n")
	if a.Newline {
		suffix = append([]byte{'\n'}, suffix...)
	}
	var out []byte
	switch {
	case bytes.HasSuffix(data, suffix) && (len(data) == len(suffix) || a.Newline || data[len(data)-len(suffix)-1] == '\n'):
		out = data[:len(data)-len(suffix)]
	default:
		// Lines were added after ours: take out our line where it is.
		lines := strings.SplitAfter(string(data), "\n")
		found := false
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.TrimSuffix(lines[i], "\n") == a.Target {
				lines = append(lines[:i], lines[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			return nil
		}
		out = []byte(strings.Join(lines, ""))
	}
	if !a.Existed && len(out) == 0 {
		if err := os.Remove(h); err != nil {
			return fmt.Errorf("remove %s: %w", a.Path, err)
		}
		return nil
	}
	return writeLike(h, out)
}
