package front

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
	"github.com/undosh/undosh/shell"
)

// Options configure the server. StateDir must be set.
type Options struct {
	// StateDir is the state directory served: the socket is
	// state.SocketPath of it.
	StateDir string
	// Idle ends the server after this long without a request. Zero
	// means 15 minutes.
	Idle time.Duration
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
}

// Serve runs the server of o.StateDir until it has been idle for o.Idle,
// or its own executable is replaced. Only one server serves a state
// directory: a second one returns nil at once.
func Serve(o Options) error {
	if o.Idle == 0 {
		o.Idle = 15 * time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sock := state.SocketPath(o.StateDir)
	run := filepath.Dir(sock)
	if err := os.MkdirAll(run, 0o700); err != nil {
		return fmt.Errorf("front: %w", err)
	}
	lock, err := os.OpenFile(state.ServerFile(o.StateDir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("front: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // another server serves this state directory
	}
	os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("front: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()
	// The pid file appears whole (write, then rename), for doctor and tests.
	pidFile := state.ServerFile(o.StateDir, "pid")
	if atomicfile.Replace(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600) == nil {
		defer os.Remove(pidFile)
	}
	exe, _ := os.Executable()
	exeInfo, _ := os.Stat("/proc/self/exe")
	s := newServer(o.StateDir, exe, log)
	if self, err := enforce.Self(); err == nil {
		if _, err := enforce.Probe(enforce.MountNS); err == nil {
			s.ns = &namespaces{self: self}
			defer s.ns.closeAll()
		}
	}
	defer s.watch.Close()
	written := make(chan struct{})
	go func() {
		defer close(written)
		s.writeRecords()
	}()
	// Every step answered is journaled before the server exits.
	defer func() {
		close(s.records)
		<-written
	}()
	log.Info("front end's server started", "socket", sock, "pid", os.Getpid())
	// One request at a time, answered by the goroutine that accepted
	// it: an answer takes tens of microseconds, and what a front end
	// waits for is mostly wake-ups, which handing the connection to
	// another goroutine (or thread) would add to.
	lf, err := ln.File()
	if err != nil {
		return fmt.Errorf("front: %w", err)
	}
	defer lf.Close()
	lfd := int(lf.Fd())
	if err := unix.SetNonblock(lfd, false); err != nil {
		return fmt.Errorf("front: %w", err)
	}

	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(lfd), Events: unix.POLLIN}}, int(o.Idle/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("front: %w", err)
		}
		if n == 0 {
			log.Info("front end's server idle: exiting")
			return nil
		}
		cfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			return fmt.Errorf("front: %w", err)
		}
		s.serve(cfd)
		// An upgraded undosh must not be answered for by the old one.
		if st, err := os.Stat(exe); err != nil || exeInfo == nil || !os.SameFile(st, exeInfo) {
			log.Info("front end's server: executable replaced: exiting")
			return nil
		}
	}
}

// cacheTTL is how long the server reuses the writable paths it found
// for a read-only step's limit, and the real shells it found: finding
// them stats every scratch path and looks for the tools whose caches
// they are. A path made since is writable from the next answer on; until
// then a write there is refused, never let through.
const cacheTTL = 2 * time.Second

type cachedPaths struct {
	at    time.Time
	paths []string
	// inodes fingerprints the directories the paths are (namespaces.go).
	inodes string
}

type cachedPolicy struct {
	mod  time.Time
	size int64
	ino  uint64
	pol  *policy.Policy
}

// server answers the front ends of one state directory.
type server struct {
	stateDir string
	exe      string
	log      *slog.Logger
	self     os.FileInfo
	mntNS    os.FileInfo
	root     os.FileInfo

	// ns keeps the read-only namespaces handed to front ends (nil when
	// the server cannot make them: not root).
	ns *namespaces
	// parsed keeps the parse of large sources: a harness's shell
	// snapshot, sourced by every command, is parsed once per content.
	parsed *parser.Cache
	// watch keeps the workspace watchers (watchd); records queues the
	// journal records of the read-only steps passed (watch.go).
	watch   *watchd.Service
	records chan pendingRecord

	mu       sync.Mutex
	policies map[string]cachedPolicy
	writable map[string]cachedPaths // by policy, home and state directory
	reals    map[string]cachedReal  // by personality, environment and front end
}

// newServer returns the server of stateDir, which answers 'U' with exe,
// without namespaces to hand out (ns). The caller closes its watchers
// (watch) and drains its records.
func newServer(stateDir, exe string, log *slog.Logger) *server {
	s := &server{stateDir: stateDir, exe: exe, log: log, policies: map[string]cachedPolicy{}, parsed: parser.NewCache(64)}
	s.self, _ = os.Stat("/proc/self/exe")
	s.mntNS, _ = os.Stat("/proc/self/ns/mnt")
	s.root, _ = os.Stat("/")
	s.watch = s.newWatchService()
	s.records = make(chan pendingRecord, 1024)
	return s
}

// readOnlyPaths is shell.ReadOnlyWritable, and the inodes of those
// directories, from a cache kept for cacheTTL.
func (s *server) readOnlyPaths(pol *policy.Policy, home, stateDir string) cachedPaths {
	key := fmt.Sprintf("%p\x00%s\x00%s", pol, home, stateDir)
	s.mu.Lock()
	cp, ok := s.writable[key]
	s.mu.Unlock()
	if ok && time.Since(cp.at) < cacheTTL {
		return cp
	}
	paths := shell.ReadOnlyWritable(pol, home, stateDir)
	cp = cachedPaths{at: time.Now(), paths: paths, inodes: inodes(paths)}
	s.mu.Lock()
	if s.writable == nil || len(s.writable) > 64 {
		s.writable = map[string]cachedPaths{}
	}
	s.writable[key] = cp
	s.mu.Unlock()
	return cp
}

// serve answers the request on connection fd, and closes it.
func (s *server) serve(fd int) {
	defer unix.Close(fd)
	start := time.Now()
	// A front end that stops half way through its request, or reading
	// the answer, is given up on after a second (it sends its request
	// whole, at once); it then gets undosh, and so do the front ends
	// that waited meanwhile.
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	a := answer{verdict: verdictUndosh, text: s.exe}
	req, peer, err := read(fd)
	if errors.Is(err, errWatchRequest) {
		s.serveWatch(fd, peer, req.body)
		return
	}
	took := time.Since(start)
	if err == nil {
		a = s.answer(req, peer)
	}
	var rights []byte
	if a.ns != nil {
		rights = unix.UnixRights(int(a.ns.Fd()))
	}
	if err := unix.Sendmsg(fd, a.encode(), rights, nil, unix.MSG_NOSIGNAL); err != nil {
		s.log.Warn("front: answer not sent", "err", err)
	}
	if err != nil {
		s.log.Warn("front: bad request", "err", err)
		return
	}
	s.log.Debug("answer", "verdict", string(a.verdict), "text", a.text, "pid", peer.Pid,
		"read_us", took.Microseconds(), "took_us", time.Since(start).Microseconds())
}

// answer decides one invocation by [shell.Ask]: 'E' and the real shell
// when undosh would exec it unprotected, 'L' or 'N' when it would exec
// it under the read-only limit, else 'U' and undosh itself.
func (s *server) answer(req request, peer *unix.Ucred) answer {
	undosh := answer{verdict: verdictUndosh, text: s.exe}
	if len(req.argv) == 0 {
		return undosh
	}
	// A caller in one of the read-only namespaces the server keeps is a
	// command nested in a read-only step (Codex's wrapper ends in exec
	// bash -c CMD): it sees the machine's files, and the kernel already
	// holds it to that namespace's plan.
	same, held := s.view(int(peer.Pid))
	if !same && held == nil {
		return undosh
	}
	p := shell.Ask(shell.Query{Argv: req.argv, Env: req.env, Cwd: req.cwd, Execfn: req.execfn, UID: int(peer.Uid),
		RealShell: s.realShell, Policy: s.policy, Cache: s.parsed})
	execReal := answer{verdict: verdictExec, text: p.Real}
	// A read-only step passed to the real shell has a checkpoint of its
	// workspace first; one nested in a read-only step has the outer one's.
	pass := func(a answer) answer {
		if p.Checkpoint && held == nil && !s.beforeReadOnly(p, int(peer.Pid)) {
			return undosh // its checkpoint walks: not here
		}
		return a
	}
	switch p.Route {
	case shell.RoutePlain:
		return pass(execReal)
	case shell.RouteLimited:
	default:
		return undosh
	}
	// The front end applies the read-only limit itself, or enters a
	// namespace made under it, then execs.
	writable := s.readOnlyPaths(p.Policy, p.Home, p.StateDir)
	// A workspace in a writable path (a project in /tmp) is held
	// read-only where a mount namespace is made (Landlock cannot; the
	// checkpoint that pass takes covers it then).
	roots := shell.HeldRoots(nil, req.cwd, p.Home, writable.paths)
	plan, err := enforce.Encode(enforce.Plan{Class: policy.None.String(), Shell: p.Real, Writable: writable.paths, Held: roots})
	if err != nil {
		return undosh
	}
	if s.ns != nil && peer.Uid == 0 {
		fingerprint := writable.inodes
		if len(roots) > 0 {
			fingerprint += inodes(roots)
		}
		if fd := s.ns.get(plan, writable.paths, roots, fingerprint); fd == held && held != nil {
			return execReal // already held to this very plan
		} else if fd != nil && held == nil {
			return pass(answer{verdict: verdictNS, text: plan, ns: fd})
		}
	}
	if held != nil {
		return undosh // another limit than the one it is held to: undosh decides
	}
	return pass(answer{verdict: verdictLimit, text: plan})
}

// view reports whether process pid sees the files the server sees: the
// same mount namespace and root directory (same), or the same root in
// one of the read-only namespaces the server keeps (held, its fd).
func (s *server) view(pid int) (same bool, held *os.File) {
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(dir)
	var ns, root unix.Stat_t
	if unix.Fstatat(dir, "ns/mnt", &ns, 0) != nil || unix.Fstatat(dir, "root", &root, 0) != nil ||
		s.mntNS == nil || s.root == nil || !sameInode(&root, s.root) {
		return false, nil
	}
	if sameInode(&ns, s.mntNS) {
		return true, nil
	}
	return false, s.ns.holding(&ns)
}

func sameInode(st *unix.Stat_t, fi os.FileInfo) bool {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == uint64(sys.Dev) && st.Ino == sys.Ino
}

// realShell is shell.RealShell for a request, from a cache kept for
// cacheTTL: it stats every candidate and reads shell.ConfigFile. The
// front end itself (the server's own executable's file) is never the
// real shell.
func (s *server) realShell(personality string, getenv func(string) string) (string, error) {
	key := personality + "\x00" + getenv("UNDOSH_REAL_BASH") + "\x00" + getenv("UNDOSH_REAL_SH")
	s.mu.Lock()
	r, ok := s.reals[key]
	s.mu.Unlock()
	if ok && time.Since(r.at) < cacheTTL {
		return r.path, r.err
	}
	path, err := shell.RealShell(personality, getenv, shell.ConfigFile, s.self)
	s.mu.Lock()
	if s.reals == nil || len(s.reals) > 64 {
		s.reals = map[string]cachedReal{}
	}
	s.reals[key] = cachedReal{at: time.Now(), path: path, err: err}
	s.mu.Unlock()
	return path, err
}

type cachedReal struct {
	at   time.Time
	path string
	err  error
}

// policy loads the policy the caller's environment names, from a cache
// kept while the file does not change.
func (s *server) policy(getenv func(string) string, stateDir string) (*policy.Policy, bool) {
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
	s.mu.Lock()
	cp, hit := s.policies[name]
	s.mu.Unlock()
	if hit && cp.mod.Equal(st.ModTime()) && cp.size == st.Size() && cp.ino == ino {
		return cp.pol, true
	}
	p, err := classify.LoadPolicy(name, filepath.Join(stateDir, "cache"))
	if err != nil {
		return nil, false // undosh itself reports the broken policy
	}
	s.mu.Lock()
	s.policies[name] = cachedPolicy{mod: st.ModTime(), size: st.Size(), ino: ino, pol: p}
	s.mu.Unlock()
	return p, true
}
