package shell

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/policy"
)

// The classifier is undosh's fast path. undosh-fast, a small C front end
// installed as bash, sends each invocation (argv, environment, cwd) over a
// Unix socket to a resident classifier, which answers "exec the real
// shell at PATH" for plainly read-only steps and "exec undosh" for
// everything else. A Go process start costs more than bash itself on a
// small machine; the front end and the warm classifier together cost less
// than one (bench/exec.sh).
//
// Wire format, both ways little-endian, one request per connection:
//
//	request:  "UNDOSHQ1" u32(len) payload
//	payload:  u32(argc) {u32(n) bytes}×argc u32(envc) {u32(n) bytes}×envc u32(n) cwd
//	answer:   'E', 'L' or 'U', u32(n), bytes
//
// 'E' names the real shell to exec, 'U' undosh; 'L' is the plan of the
// read-only limit (limit.h, with the real shell in it) that the front
// end applies before it execs the shell. The classifier closes the
// connection after the answer.
//
// The classifier trusts no field of the request for identity: it takes the
// caller's uid and pid from the socket (SO_PEERCRED), refuses other users,
// and answers 'U' when the caller sees another mount namespace or root
// directory, since it would then read other files than the caller's.

// ClassifierName is the argv[0] that starts undosh as the classifier.
const ClassifierName = "undosh-classifier"

// maxRequest bounds a request (Linux limits argv and environment to a few
// MiB together).
const maxRequest = 8 << 20

// SocketPath is where the classifier of a state directory listens.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, "run", "classify.sock") }

// ServeOptions configure the classifier.
type ServeOptions struct {
	StateDir string
	// Idle ends the classifier after this long without a request. Zero
	// means 15 minutes.
	Idle   time.Duration
	Logger *slog.Logger
}

// Serve runs the classifier until it has been idle for o.Idle, or its own
// executable is replaced. Only one classifier serves a state directory: a
// second one returns nil at once.
func Serve(o ServeOptions) error {
	if o.Idle == 0 {
		o.Idle = 15 * time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	run := filepath.Dir(SocketPath(o.StateDir))
	if err := os.MkdirAll(run, 0o700); err != nil {
		return fmt.Errorf("classifier: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(run, "classify.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("classifier: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // another classifier serves this state directory
	}
	sock := SocketPath(o.StateDir)
	os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("classifier: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()
	// The pid file appears whole (write, then rename), for doctor and tests.
	pidFile := filepath.Join(run, "classify.pid")
	if err := os.WriteFile(pidFile+".tmp", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err == nil {
		if os.Rename(pidFile+".tmp", pidFile) == nil {
			defer os.Remove(pidFile)
		}
	}
	exe, _ := os.Executable()
	exeInfo, _ := os.Stat("/proc/self/exe")
	c := &classifier{stateDir: o.StateDir, exe: exe, log: log, policies: map[string]cachedPolicy{}}
	c.self, _ = os.Stat("/proc/self/exe")
	c.mntNS, _ = os.Stat("/proc/self/ns/mnt")
	c.root, _ = os.Stat("/")
	log.Info("classifier started", "socket", sock, "pid", os.Getpid())
	for {
		ln.SetDeadline(time.Now().Add(o.Idle))
		conn, err := ln.AcceptUnix()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				log.Info("classifier idle: exiting")
				return nil
			}
			return fmt.Errorf("classifier: %w", err)
		}
		go c.serve(conn)
		// An upgraded undosh must not be answered for by the old one.
		if st, err := os.Stat(exe); err != nil || exeInfo == nil || !os.SameFile(st, exeInfo) {
			log.Info("classifier: executable replaced: exiting")
			return nil
		}
	}
}

type cachedPolicy struct {
	mod  time.Time
	size int64
	ino  uint64
	pol  *policy.Policy
}

type classifier struct {
	stateDir string
	exe      string
	log      *slog.Logger
	self     os.FileInfo
	mntNS    os.FileInfo
	root     os.FileInfo

	mu       sync.Mutex
	policies map[string]cachedPolicy
}

func (c *classifier) serve(conn *net.UnixConn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	verdict, path := byte('U'), c.exe
	req, peer, err := c.read(conn)
	if err != nil {
		c.log.Warn("classifier: bad request", "err", err)
	} else {
		verdict, path = c.answer(req, peer)
		c.log.Debug("answer", "verdict", string(verdict), "path", path, "pid", peer.Pid)
	}
	out := make([]byte, 5, 5+len(path))
	out[0] = verdict
	binary.LittleEndian.PutUint32(out[1:], uint32(len(path)))
	conn.Write(append(out, path...))
}

type request struct {
	argv, env []string
	cwd       string
}

// read reads one request and the credentials of its sender.
func (c *classifier) read(conn *net.UnixConn) (request, *unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return request{}, nil, err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return request{}, nil, cerr
	}
	if int(cred.Uid) != os.Getuid() {
		return request{}, nil, fmt.Errorf("peer uid %d is not ours", cred.Uid)
	}
	br := bufio.NewReader(conn)
	head := make([]byte, 12)
	if _, err := io.ReadFull(br, head); err != nil {
		return request{}, nil, err
	}
	if string(head[:8]) != "UNDOSHQ1" {
		return request{}, nil, errors.New("bad magic")
	}
	n := binary.LittleEndian.Uint32(head[8:])
	if n > maxRequest {
		return request{}, nil, fmt.Errorf("request of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return request{}, nil, err
	}
	req, err := decodeRequest(body)
	return req, cred, err
}

// decodeRequest decodes a request payload.
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
	if !ok || len(b) != 0 {
		return request{}, errors.New("malformed request")
	}
	req.cwd = cwd
	return req, nil
}

// answer decides one invocation: 'E' and the real shell when undosh would
// exec it unprotected, else 'U' and undosh itself.
func (c *classifier) answer(req request, peer *unix.Ucred) (byte, string) {
	undosh := func() (byte, string) { return 'U', c.exe }
	if len(req.argv) == 0 || !c.sameView(int(peer.Pid)) {
		return undosh()
	}
	env := environ(req.env)
	getenv := func(k string) string { return env[k] }
	inv := ParseArgs(req.argv)
	front, _ := os.Stat("/proc/" + strconv.Itoa(int(peer.Pid)) + "/exe")
	real, err := RealShell(inv.Personality, getenv, ConfigFile, c.self, front)
	if err != nil {
		return undosh()
	}
	stateDir := state.Dir("", getenv, int(peer.Uid))
	if stateDir == "" {
		return undosh()
	}
	if _, err := os.Lstat(journal.PendingDir(stateDir)); err == nil {
		return undosh() // a rollback to finish first
	}
	var text string
	switch inv.Mode {
	case ModeNothing:
		return 'E', real
	case ModeCommand:
		text = inv.Command
	case ModeScript:
		src, err := readScript(inv.Script, req.cwd, getenv)
		if err != nil || src.unseen != "" {
			return undosh()
		}
		if src.passThrough {
			return 'E', real
		}
		text = src.text
	default:
		return undosh() // the script is on the caller's stdin
	}
	pol, ok := c.policy(getenv, stateDir)
	if !ok || req.cwd == "" {
		return undosh()
	}
	res := classify.Decide(text, classify.Options{Policy: pol, Cwd: req.cwd, Env: env, POSIX: inv.POSIX})
	if res.Decision.Class != policy.None || res.Decision.Verdict != policy.Run || res.Decision.SyntaxErr != "" {
		return undosh()
	}
	if !enforcingIn(getenv, pol) {
		return 'E', real
	}
	if runsAsRoot(res.Facts) && peer.Uid != 0 {
		return undosh() // Landlock would stop its sudo: undosh checkpoints it instead
	}
	// The front end applies the read-only limit itself, then execs.
	plan, err := enforce.Encode(enforce.Plan{Class: policy.None.String(), Shell: real,
		Writable: writablePaths(policy.None, pol, nil, getenv("HOME"), stateDir)})
	if err != nil {
		return undosh()
	}
	return 'L', plan
}

// sameView reports whether process pid sees the files the classifier
// sees: the same mount namespace and root directory.
func (c *classifier) sameView(pid int) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	ns, err1 := os.Stat(proc + "/ns/mnt")
	root, err2 := os.Stat(proc + "/root")
	return err1 == nil && err2 == nil && c.mntNS != nil && c.root != nil &&
		os.SameFile(ns, c.mntNS) && os.SameFile(root, c.root)
}

// policy loads the policy the caller's environment names, from a cache
// kept while the file does not change.
func (c *classifier) policy(getenv func(string) string, stateDir string) (*policy.Policy, bool) {
	name := classify.PolicyPath("", getenv)
	if name == "" {
		return policy.Default(), true
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, false
	}
	var ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	c.mu.Lock()
	cp, hit := c.policies[name]
	c.mu.Unlock()
	if hit && cp.mod.Equal(st.ModTime()) && cp.size == st.Size() && cp.ino == ino {
		return cp.pol, true
	}
	p, err := classify.LoadPolicy(name, filepath.Join(stateDir, "cache"))
	if err != nil {
		return nil, false // undosh itself reports the broken policy
	}
	c.mu.Lock()
	c.policies[name] = cachedPolicy{mod: st.ModTime(), size: st.Size(), ino: ino, pol: p}
	c.mu.Unlock()
	return p, true
}
