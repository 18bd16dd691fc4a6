package shell

import (
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

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/enforce"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/parser"
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
//	request:  "UNDOSHQ2" u32(len) payload
//	payload:  u32(argc) {u32(n) bytes}×argc u32(envc) {u32(n) bytes}×envc u32(n) cwd u32(n) execfn
//	answer:   'E', 'L', 'N' or 'U', u32(n), bytes
//
// 'E' names the real shell to exec, 'U' undosh; 'L' is the plan of the
// read-only limit (limit.h, with the real shell in it) that the front
// end applies before it execs the shell; 'N' is the same plan, sent with
// an fd (SCM_RIGHTS) on a mount namespace made under it, which the front
// end enters instead (serve_ns.go). The classifier closes the connection
// after the answer.
//
// The classifier trusts no field of the request for identity: it takes the
// caller's uid and pid from the socket (SO_PEERCRED), refuses other users,
// and answers 'U' when the caller sees another mount namespace or root
// directory, since it would then read other files than the caller's.

// RequestMagic begins a request to the classifier.
const RequestMagic = "UNDOSHQ2"

// ClassifierName is the argv[0] that starts undosh as the classifier.
const ClassifierName = "undosh-classifier"

// maxRequest bounds a request (Linux limits argv and environment to a few
// MiB together).
const maxRequest = 8 << 20

// SocketPath is where the classifier of a state directory listens.
func SocketPath(stateDir string) string { return state.SocketPath(stateDir) }

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
	if atomicfile.Replace(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600) == nil {
		defer os.Remove(pidFile)
	}
	exe, _ := os.Executable()
	exeInfo, _ := os.Stat("/proc/self/exe")
	c := newClassifier(o.StateDir, exe, log)
	if self, err := selfExe(); err == nil {
		if _, err := enforce.Probe(enforce.MountNS); err == nil {
			c.ns = &namespaces{self: self}
			defer c.ns.closeAll()
		}
	}
	defer c.watch.Close()
	written := make(chan struct{})
	go func() {
		defer close(written)
		c.writeRecords()
	}()
	// Every step answered is journaled before the classifier exits.
	defer func() {
		close(c.records)
		<-written
	}()
	log.Info("classifier started", "socket", sock, "pid", os.Getpid())
	// One request at a time, answered by the goroutine that accepted
	// it: an answer takes tens of microseconds, and what a front end
	// waits for is mostly wake-ups, which handing the connection to
	// another goroutine (or thread) would add to.
	lf, err := ln.File()
	if err != nil {
		return fmt.Errorf("classifier: %w", err)
	}
	defer lf.Close()
	lfd := int(lf.Fd())
	if err := unix.SetNonblock(lfd, false); err != nil {
		return fmt.Errorf("classifier: %w", err)
	}

	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(lfd), Events: unix.POLLIN}}, int(o.Idle/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("classifier: %w", err)
		}
		if n == 0 {
			log.Info("classifier idle: exiting")
			return nil
		}
		cfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			return fmt.Errorf("classifier: %w", err)
		}
		c.serve(cfd)
		// An upgraded undosh must not be answered for by the old one.
		if st, err := os.Stat(exe); err != nil || exeInfo == nil || !os.SameFile(st, exeInfo) {
			log.Info("classifier: executable replaced: exiting")
			return nil
		}
	}
}

// planTTL is how long the classifier reuses the writable paths it found
// for a read-only step's limit: finding them stats every scratch path
// and looks for the tools whose caches they are. A path made since is
// writable from the next answer on; until then a write there is refused,
// never let through.
const planTTL = 2 * time.Second

type cachedPaths struct {
	at    time.Time
	paths []string
	// inodes fingerprints the directories the paths are (serve_ns.go).
	inodes string
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

	// ns keeps the read-only namespaces handed to front ends (nil when
	// the classifier cannot make them: not root).
	ns *namespaces
	// parsed keeps the parse of large sources: a harness's shell
	// snapshot, sourced by every command, is parsed once per content.
	parsed *parser.Cache
	// watch keeps the workspace watchers (watchd); records queues the
	// journal records of the read-only steps passed (serve_watch.go).
	watch   *watchd.Service
	records chan pendingRecord

	mu       sync.Mutex
	policies map[string]cachedPolicy
	writable map[string]cachedPaths // by policy, home and state directory
	reals    map[string]cachedReal  // by personality, environment and front end
}

// newClassifier returns the classifier of stateDir, which answers 'U'
// with exe, without namespaces to hand out (ns). The caller closes its
// watchers (watch) and drains its records.
func newClassifier(stateDir, exe string, log *slog.Logger) *classifier {
	c := &classifier{stateDir: stateDir, exe: exe, log: log, policies: map[string]cachedPolicy{}, parsed: parser.NewCache(64)}
	c.self, _ = os.Stat("/proc/self/exe")
	c.mntNS, _ = os.Stat("/proc/self/ns/mnt")
	c.root, _ = os.Stat("/")
	c.watch = c.newWatchService()
	c.records = make(chan pendingRecord, 1024)
	return c
}

// readOnlyPaths is writablePaths of a read-only step, and the inodes of
// those directories, from a cache kept for planTTL.
func (c *classifier) readOnlyPaths(pol *policy.Policy, home, stateDir string) cachedPaths {
	key := fmt.Sprintf("%p\x00%s\x00%s", pol, home, stateDir)
	c.mu.Lock()
	cp, ok := c.writable[key]
	c.mu.Unlock()
	if ok && time.Since(cp.at) < planTTL {
		return cp
	}
	paths := writablePaths(policy.None, pol, nil, home, stateDir)
	cp = cachedPaths{at: time.Now(), paths: paths, inodes: inodes(paths)}
	c.mu.Lock()
	if c.writable == nil || len(c.writable) > 64 {
		c.writable = map[string]cachedPaths{}
	}
	c.writable[key] = cp
	c.mu.Unlock()
	return cp
}

// serve answers the request on connection fd, and closes it.
func (c *classifier) serve(fd int) {
	defer unix.Close(fd)
	start := time.Now()
	// A front end that stops half way through its request, or reading
	// the answer, is given up on after a second (it sends its request
	// whole, at once); it then gets undosh, and so do the front ends
	// that waited meanwhile.
	tv := unix.Timeval{Sec: 1}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	a := answer{verdict: 'U', text: c.exe}
	req, peer, err := c.read(fd)
	if errors.Is(err, errWatchRequest) {
		c.serveWatch(fd, peer, req.body)
		return
	}
	read := time.Since(start)
	if err == nil {
		a = c.answer(req, peer)
	}
	out := make([]byte, 5, 5+len(a.text))
	out[0] = a.verdict
	binary.LittleEndian.PutUint32(out[1:], uint32(len(a.text)))
	out = append(out, a.text...)
	var rights []byte
	if a.ns != nil {
		rights = unix.UnixRights(int(a.ns.Fd()))
	}
	if err := unix.Sendmsg(fd, out, rights, nil, unix.MSG_NOSIGNAL); err != nil {
		c.log.Warn("classifier: answer not sent", "err", err)
	}
	if err != nil {
		c.log.Warn("classifier: bad request", "err", err)
		return
	}
	c.log.Debug("answer", "verdict", string(a.verdict), "text", a.text, "pid", peer.Pid,
		"read_us", read.Microseconds(), "took_us", time.Since(start).Microseconds())
}

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

// read reads one request and the credentials of its sender.
func (c *classifier) read(fd int) (request, *unix.Ucred, error) {
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
	execfn, ok2 := next()
	if !ok || !ok2 || len(b) != 0 {
		return request{}, errors.New("malformed request")
	}
	req.cwd, req.execfn = cwd, execfn
	return req, nil
}

// answer is what the classifier tells a front end.
type answer struct {
	verdict byte
	// text is the real shell ('E'), undosh ('U') or the plan of the
	// read-only limit ('L', and 'N' when the front end cannot enter ns).
	text string
	// ns, with 'N', is a namespace made under the plan, to enter instead
	// of applying it.
	ns *os.File
}

// answer decides one invocation: 'E' and the real shell when undosh would
// exec it unprotected, 'L' or 'N' when it would exec it under the
// read-only limit, else 'U' and undosh itself.
func (c *classifier) answer(req request, peer *unix.Ucred) answer {
	undosh := func() answer { return answer{verdict: 'U', text: c.exe} }
	execReal := func(real string) answer { return answer{verdict: 'E', text: real} }
	if len(req.argv) == 0 {
		return undosh()
	}
	// A caller in one of the read-only namespaces the classifier keeps
	// is a command nested in a read-only step (Codex's wrapper ends in
	// exec bash -c CMD): it sees the machine's files, and the kernel
	// already holds it to that namespace's plan.
	same, held := c.view(int(peer.Pid))
	if !same && held == nil {
		return undosh()
	}
	env := environ(req.env)
	getenv := func(k string) string { return env[k] }
	inv := ParseArgsFrom(req.argv, req.execfn, req.cwd, getenv)
	// The front end itself never execs itself as the real shell.
	real, err := c.realShell(inv.Personality, getenv)
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
	var src source
	switch inv.Mode {
	case ModeNothing:
		return execReal(real)
	case ModeCommand:
		src = source{text: inv.Command}
	case ModeScript:
		if _, ok := fdName(inv.Script); ok {
			return undosh() // a file only the caller holds: undosh reads it
		}
		src, err = readScript(inv.Script, req.cwd, getenv)
		if err != nil {
			return undosh()
		}
		if src.passThrough {
			return execReal(real)
		}
	default:
		return undosh() // the script is on the caller's stdin
	}
	pol, ok := c.policy(getenv, stateDir)
	if !ok || req.cwd == "" {
		return undosh()
	}
	// The same rule as undosh's own (decide.go).
	d := decideStep(step{inv: inv, src: src, cwd: req.cwd, env: req.env, envMap: env, pol: pol, stateDir: stateDir,
		real: real, uid: int(peer.Uid), cache: c.parsed})
	if d.route != routePlain && d.route != routeLimited {
		return undosh()
	}
	text, cwd := src.text, d.cwd
	// A read-only step passed to the real shell has a checkpoint of its
	// workspace first (readonly.go); one nested in a read-only step has
	// the outer one's.
	pass := func(a answer) answer {
		if held == nil && !d.res.Decision.Own && !c.beforeReadOnly(stateDir, pol, getenv, cwd, text, int(peer.Pid)) {
			return undosh() // its checkpoint walks: not here
		}
		return a
	}
	if d.route == routePlain {
		return pass(execReal(real))
	}
	// The front end applies the read-only limit itself, or enters a
	// namespace made under it, then execs.
	writable := c.readOnlyPaths(pol, getenv("HOME"), stateDir)
	plan, err := enforce.Encode(enforce.Plan{Class: policy.None.String(), Shell: real, Writable: writable.paths})
	if err != nil {
		return undosh()
	}
	if c.ns != nil && peer.Uid == 0 {
		if fd := c.ns.get(plan, writable.paths, writable.inodes); fd == held && held != nil {
			return execReal(real) // already held to this very plan
		} else if fd != nil && held == nil {
			return pass(answer{verdict: 'N', text: plan, ns: fd})
		}
	}
	if held != nil {
		return undosh() // another limit than the one it is held to: undosh decides
	}
	return pass(answer{verdict: 'L', text: plan})
}

// view reports whether process pid sees the files the classifier sees:
// the same mount namespace and root directory (same), or the same root
// in one of the read-only namespaces the classifier keeps (held, its fd).
func (c *classifier) view(pid int) (same bool, held *os.File) {
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(dir)
	var ns, root unix.Stat_t
	if unix.Fstatat(dir, "ns/mnt", &ns, 0) != nil || unix.Fstatat(dir, "root", &root, 0) != nil ||
		c.mntNS == nil || c.root == nil || !sameInode(&root, c.root) {
		return false, nil
	}
	if sameInode(&ns, c.mntNS) {
		return true, nil
	}
	return false, c.ns.holding(&ns)
}

func sameInode(st *unix.Stat_t, fi os.FileInfo) bool {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == uint64(sys.Dev) && st.Ino == sys.Ino
}

// realShell is RealShell for a request, from a cache kept for planTTL:
// it stats every candidate and reads ConfigFile.
func (c *classifier) realShell(personality string, getenv func(string) string) (string, error) {
	key := personality + "\x00" + getenv("UNDOSH_REAL_BASH") + "\x00" + getenv("UNDOSH_REAL_SH")
	c.mu.Lock()
	r, ok := c.reals[key]
	c.mu.Unlock()
	if ok && time.Since(r.at) < planTTL {
		return r.path, r.err
	}
	path, err := RealShell(personality, getenv, ConfigFile, c.self)
	c.mu.Lock()
	if c.reals == nil || len(c.reals) > 64 {
		c.reals = map[string]cachedReal{}
	}
	c.reals[key] = cachedReal{at: time.Now(), path: path, err: err}
	c.mu.Unlock()
	return path, err
}

type cachedReal struct {
	at   time.Time
	path string
	err  error
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
