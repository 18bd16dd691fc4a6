package hostlink

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/undosh/undosh/internal/atomicfile"
)

// ErrNotFound is wrapped by a [Backend] for an unknown checkpoint.
var ErrNotFound = errors.New("hostlink: not found")

// ErrServerClosed is returned by [Server.Serve] after [Server.Shutdown].
var ErrServerClosed = errors.New("hostlink: server closed")

// Options configure a [Server]. The zero value of every field but StateDir
// and Backend is a sensible default.
type Options struct {
	StateDir string  // required: where sandboxes and operations are kept
	Backend  Backend // required
	Logger   *slog.Logger

	// RequestTimeout bounds the time a client has to send its hello and
	// request, and to read a reply; default 10 s.
	RequestTimeout time.Duration
	// MaxConns bounds the connections served at once per listener; more
	// wait in the listen backlog. Default 256.
	MaxConns int
	// MaxOutput bounds the bytes kept per stream of an operation; the rest
	// is counted in Op.Dropped. Default 64 MiB.
	MaxOutput int64
	// Defaults fills in the budgets a request leaves zero. Defaults:
	// capture 120 s, step 10 min, verify 5 min, promote 60 s.
	Defaults Timeouts
	// KeepOps is how long finished operations, and so their keys, are
	// kept; default 7 days (at least 24 h).
	KeepOps time.Duration
}

const (
	maxWait   = 30 * time.Second
	maxBudget = 24 * time.Hour
	oldTokens = 16
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Server serves the protocol for any number of sandboxes, each on its own
// listeners. Create it with [NewServer]; stop it with [Server.Shutdown].
type Server struct {
	opts  Options
	log   *slog.Logger
	root  context.Context // cancelled on shutdown: running operations end
	stop  context.CancelFunc
	conns sync.WaitGroup
	runs  sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	sandboxes map[string]*sandbox
}

type sandbox struct {
	name string
	dir  string

	submit sync.Mutex // serialises submissions, so the key check and the durable write are one step

	// guarded by Server.mu
	rec  sandboxRecord
	ops  map[string]*op
	keys map[string]*op
}

type sandboxRecord struct {
	Generation uint64   `json:"generation"`
	Role       Role     `json:"role"`
	Token      string   `json:"token"`
	Old        []string `json:"old_token_hashes,omitempty"`
}

type opRecord struct {
	Op
	Hash    string          `json:"request_hash"`
	Request json.RawMessage `json:"request"`
}

type op struct {
	sb      *sandbox
	persist sync.Mutex // orders writes of the record

	// guarded by Server.mu
	rec       opRecord
	changed   chan struct{}
	cancel    context.CancelFunc
	cancelled bool
	out       [2]*outFile
}

// NewServer opens the state directory, recovering what a previous server
// left: sandboxes keep their generation and token, and every operation
// that was not final becomes abandoned with code host_restarted.
func NewServer(opts Options) (*Server, error) {
	if opts.StateDir == "" || opts.Backend == nil {
		return nil, errors.New("hostlink: new server: StateDir and Backend are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 256
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = 64 << 20
	}
	if opts.KeepOps < 24*time.Hour {
		opts.KeepOps = 7 * 24 * time.Hour
	}
	d := &opts.Defaults
	for _, p := range []struct {
		v   *int64
		def time.Duration
	}{{&d.CaptureMS, 2 * time.Minute}, {&d.StepMS, 10 * time.Minute}, {&d.VerifyMS, 5 * time.Minute}, {&d.PromoteMS, time.Minute}} {
		if *p.v <= 0 {
			*p.v = p.def.Milliseconds()
		}
	}
	s := &Server{opts: opts, log: opts.Logger, listeners: map[net.Listener]struct{}{}, sandboxes: map[string]*sandbox{}}
	s.root, s.stop = context.WithCancel(context.Background())
	dir := filepath.Join(opts.StateDir, "sandboxes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("hostlink: new server: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("hostlink: new server: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || !nameRE.MatchString(e.Name()) {
			continue
		}
		if _, err := s.load(e.Name()); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// load reads or creates a sandbox's record and operations. s.mu need not
// be held: it is called before the server is shared, or under s.mu.
func (s *Server) load(name string) (*sandbox, error) {
	sb := &sandbox{name: name, dir: filepath.Join(s.opts.StateDir, "sandboxes", name), ops: map[string]*op{}, keys: map[string]*op{}}
	if err := os.MkdirAll(filepath.Join(sb.dir, "ops"), 0o700); err != nil {
		return nil, fmt.Errorf("hostlink: sandbox %s: %w", name, err)
	}
	b, err := os.ReadFile(filepath.Join(sb.dir, "sandbox.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		sb.rec = sandboxRecord{Generation: 1, Role: RolePrimary, Token: newToken()}
		if err := s.saveSandbox(sb, sb.rec); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("hostlink: sandbox %s: %w", name, err)
	default:
		if err := json.Unmarshal(b, &sb.rec); err != nil || sb.rec.Token == "" {
			return nil, fmt.Errorf("hostlink: sandbox %s: corrupt sandbox.json: %v", name, err)
		}
	}
	opsDir := filepath.Join(sb.dir, "ops")
	ents, err := os.ReadDir(opsDir)
	if err != nil {
		return nil, fmt.Errorf("hostlink: sandbox %s: %w", name, err)
	}
	now := time.Now()
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(id, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(opsDir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("hostlink: sandbox %s: %w", name, err)
		}
		o := &op{sb: sb, changed: make(chan struct{})}
		if err := json.Unmarshal(b, &o.rec); err != nil || o.rec.ID != id {
			s.log.Warn("skip corrupt operation record", "sandbox", name, "file", e.Name(), "err", err)
			continue
		}
		if o.rec.State.Final() && now.Sub(o.rec.Updated) > s.opts.KeepOps {
			for _, suf := range []string{".json", ".stdout", ".stderr"} {
				os.Remove(filepath.Join(opsDir, id+suf))
			}
			continue
		}
		for i, suf := range []string{".stdout", ".stderr"} {
			o.out[i] = &outFile{path: filepath.Join(opsDir, id+suf), limit: s.opts.MaxOutput}
			if fi, err := os.Stat(o.out[i].path); err == nil {
				o.out[i].size = min(fi.Size(), s.opts.MaxOutput)
			}
		}
		if !o.rec.State.Final() {
			o.rec.State = StateAbandoned
			o.rec.Error = &Error{Code: CodeHostRestarted, Message: "the host restarted while the operation ran"}
			o.rec.Updated = now
			o.rec.Stdout, o.rec.Stderr = o.out[0].size, o.out[1].size
			if err := s.saveOp(o, o.rec); err != nil {
				return nil, err
			}
			s.log.Info("operation abandoned at restart", "sandbox", name, "op", id)
		}
		sb.ops[id] = o
		sb.keys[o.rec.Key] = o
	}
	s.sandboxes[name] = sb
	return sb, nil
}

func (s *Server) saveSandbox(sb *sandbox, rec sandboxRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(sb.dir, "sandbox.json"), b, 0o600); err != nil {
		return fmt.Errorf("hostlink: sandbox %s: %w", sb.name, err)
	}
	return nil
}

// saveOp writes rec: durably, except the move from queued to running,
// which recovery need not see (it treats queued and running alike). The
// caller holds o.persist, or is alone.
func (s *Server) saveOp(o *op, rec opRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	write := atomicfile.Write
	if rec.State == StateRunning {
		write = atomicfile.Replace
	}
	if err := write(filepath.Join(o.sb.dir, "ops", rec.ID+".json"), b, 0o600); err != nil {
		return fmt.Errorf("hostlink: operation %s: %w", rec.ID, err)
	}
	return nil
}

func (s *Server) sandbox(name string) (*sandbox, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("hostlink: bad sandbox name %q", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[name]; sb != nil {
		return sb, nil
	}
	return s.load(name)
}

// Identity returns what the sandbox is now, with its token and fresh
// entropy, for the daemon to tell the VM on the control channel (at boot,
// or to a guest that lost it). It creates the sandbox if it is new.
func (s *Server) Identity(name string) (WhoYouAre, error) {
	sb, err := s.sandbox(name)
	if err != nil {
		return WhoYouAre{}, err
	}
	s.mu.Lock()
	rec := sb.rec
	s.mu.Unlock()
	return whoYouAre(name, rec, rec.Generation), nil
}

// Advance starts a new generation of the sandbox, as the daemon must after
// every resume of a captured VM, every restore and every promotion: a new
// token, the old one refused from now on. It returns what to tell the VM
// that now answers on the sandbox's listeners.
func (s *Server) Advance(name string, role Role, cause string) (WhoYouAre, error) {
	sb, err := s.sandbox(name)
	if err != nil {
		return WhoYouAre{}, err
	}
	sb.submit.Lock()
	defer sb.submit.Unlock()
	s.mu.Lock()
	rec := sb.rec
	s.mu.Unlock()
	parent := rec.Generation
	rec.Old = append([]string{hashToken(rec.Token)}, rec.Old...)
	rec.Old = rec.Old[:min(len(rec.Old), oldTokens)]
	rec.Generation++
	rec.Role = role
	rec.Token = newToken()
	if err := s.saveSandbox(sb, rec); err != nil {
		return WhoYouAre{}, err
	}
	s.mu.Lock()
	sb.rec = rec
	s.mu.Unlock()
	w := whoYouAre(name, rec, parent)
	w.Op = cause
	s.log.Info("generation advanced", "sandbox", name, "generation", rec.Generation, "role", role, "op", cause)
	return w, nil
}

func whoYouAre(name string, rec sandboxRecord, parent uint64) WhoYouAre {
	e := make([]byte, 32)
	rand.Read(e)
	return WhoYouAre{Sandbox: name, Generation: rec.Generation, Parent: parent, Role: rec.Role,
		Network: "on", HostTime: time.Now().UTC(), Token: rec.Token, Entropy: e}
}

func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func hashToken(t string) string {
	h := sha256.Sum256([]byte(t))
	return hex.EncodeToString(h[:])
}

// Serve accepts connections on ln and answers them as the sandbox named
// name: whoever reaches ln is that sandbox, whatever its messages say. It
// returns [ErrServerClosed] after [Server.Shutdown], and closes ln.
func (s *Server) Serve(ln net.Listener, name string) error {
	sb, err := s.sandbox(name)
	if err != nil {
		ln.Close()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	sem := make(chan struct{}, s.opts.MaxConns)
	backoff := 5 * time.Millisecond
	for {
		sem <- struct{}{}
		c, err := ln.Accept()
		if err != nil {
			<-sem
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// EMFILE and friends: wait and go on rather than spin or die.
			s.log.Warn("accept", "sandbox", name, "err", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			defer func() { <-sem }()
			s.handle(c, sb)
		}()
	}
}

// Shutdown stops accepting connections, waits for running operations until
// ctx is done, then cancels the rest (they end abandoned) and waits for
// them to stop.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.runs.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.stop()
	s.runs.Wait()
	s.conns.Wait()
	return nil
}

func (s *Server) handle(c net.Conn, sb *sandbox) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(s.opts.RequestTimeout))
	reply, rt, err := s.serve(c, sb)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return // the peer went away: nothing to say
		}
		s.log.Debug("refused", "sandbox", sb.name, "code", e.Code, "msg", e.Message)
		writeMsg(c, TypeError, e)
		// Drain what the peer pipelined, briefly, so that closing does not
		// reset the connection before it reads the error.
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		io.Copy(io.Discard, io.LimitReader(c, HeaderSize+MaxRequest))
		return
	}
	if rt != 0 {
		writeMsg(c, rt, reply)
	}
}

func frameError(err error) error {
	var ve *VersionError
	switch {
	case errors.Is(err, io.EOF):
		return err
	case errors.As(err, &ve):
		return &Error{Code: CodeUnsupportedVersion, Message: err.Error()}
	case errors.Is(err, ErrMagic), errors.Is(err, ErrTooLarge), errors.Is(err, ErrType), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Code: CodeBadFrame, Message: err.Error()}
	}
	return err
}

// serve reads the hello and the request, and returns the reply to write.
func (s *Server) serve(c net.Conn, sb *sandbox) (any, Type, error) {
	f, err := Decode(c, MaxRequest)
	if err != nil {
		return nil, 0, frameError(err)
	}
	if f.Type != TypeHello {
		return nil, 0, &Error{Code: CodeProtocol, Message: "first frame must be HELLO, got " + f.Type.String()}
	}
	var h Hello
	if err := json.Unmarshal(f.Body, &h); err != nil {
		return nil, 0, &Error{Code: CodeProtocol, Message: "hello: " + err.Error()}
	}
	if h.Version != Version {
		return nil, 0, &Error{Code: CodeUnsupportedVersion, Message: fmt.Sprintf("hello version %d, host speaks %d", h.Version, Version)}
	}
	s.mu.Lock()
	rec := sb.rec
	s.mu.Unlock()
	if subtle.ConstantTimeCompare([]byte(h.Token), []byte(rec.Token)) != 1 {
		hh := hashToken(h.Token)
		for _, old := range rec.Old {
			if old == hh && h.Token != "" {
				return nil, 0, &Error{Code: CodeStaleGeneration, Message: "token of an earlier generation", Generation: rec.Generation}
			}
		}
		return nil, 0, &Error{Code: CodeUnauthorized, Message: "no valid token"}
	}
	w := Welcome{Version: Version, Sandbox: sb.name, Generation: rec.Generation, Role: rec.Role,
		HostTime: time.Now().UTC(), MaxFrame: MaxFrame, MaxRequest: MaxRequest}
	if err := writeMsg(c, TypeWelcome, w); err != nil {
		return nil, 0, err
	}
	f, err = Decode(c, MaxRequest)
	if err != nil {
		return nil, 0, frameError(err)
	}
	switch f.Type {
	case TypeForkRun:
		var r ForkRun
		if err := unmarshal(f, &r); err != nil {
			return nil, 0, err
		}
		a, err := s.submit(sb, KindForkRun, r.Key, r)
		return a, TypeAccepted, err
	case TypeCheckpoint:
		var r Checkpoint
		if err := unmarshal(f, &r); err != nil {
			return nil, 0, err
		}
		a, err := s.submit(sb, KindCheckpoint, r.Key, r)
		return a, TypeAccepted, err
	case TypeRestore:
		var r Restore
		if err := unmarshal(f, &r); err != nil {
			return nil, 0, err
		}
		a, err := s.submit(sb, KindRestore, r.Key, r)
		return a, TypeAccepted, err
	case TypeListCheckpoints:
		ctx, cancel := context.WithTimeout(s.root, s.opts.RequestTimeout)
		defer cancel()
		items, err := s.opts.Backend.List(ctx, sb.name)
		if err != nil {
			return nil, 0, &Error{Code: CodeBackend, Message: err.Error()}
		}
		return Checkpoints{Items: items}, TypeCheckpoints, nil
	case TypeStatus:
		var r StatusRequest
		if err := unmarshal(f, &r); err != nil {
			return nil, 0, err
		}
		wait := clampWait(r.WaitMS)
		c.SetDeadline(time.Now().Add(wait + s.opts.RequestTimeout))
		o, err := s.status(sb, r.Op, wait)
		return o, TypeOp, err
	case TypeOutput:
		var r OutputRequest
		if err := unmarshal(f, &r); err != nil {
			return nil, 0, err
		}
		wait := clampWait(r.WaitMS)
		c.SetDeadline(time.Now().Add(wait + s.opts.RequestTimeout))
		ch, err := s.output(sb, r, wait)
		return ch, TypeChunk, err
	case TypeCancel:
		var r CancelRequest
		if err := unmarshal(f, &r); err != nil {
			return nil, 0, err
		}
		o, err := s.cancelOp(sb, r.Op)
		return o, TypeOp, err
	case TypeHello:
		return nil, 0, &Error{Code: CodeProtocol, Message: "one hello per connection"}
	}
	return nil, 0, &Error{Code: CodeProtocol, Message: f.Type.String() + " is not a request"}
}

func unmarshal(f Frame, v any) error {
	if err := json.Unmarshal(f.Body, v); err != nil {
		return &Error{Code: CodeProtocol, Message: fmt.Sprintf("%v: %v", f.Type, err)}
	}
	return nil
}

func clampWait(ms int64) time.Duration {
	return min(max(time.Duration(ms)*time.Millisecond, 0), maxWait)
}

func invalid(format string, a ...any) error {
	return &Error{Code: CodeInvalid, Message: fmt.Sprintf(format, a...)}
}

func checkBudget(name string, ms int64) error {
	if ms < 0 || time.Duration(ms)*time.Millisecond > maxBudget {
		return invalid("%s budget %d ms out of range", name, ms)
	}
	return nil
}

func checkCommand(name string, c *Command) error {
	if (c.Shell == "") == (len(c.Argv) == 0) {
		return invalid("%s: exactly one of shell and argv", name)
	}
	if c.Cwd != "" && !filepath.IsAbs(c.Cwd) {
		return invalid("%s: cwd must be absolute", name)
	}
	if c.Path != "" && (len(c.Argv) == 0 || !filepath.IsAbs(c.Path)) {
		return invalid("%s: path must be absolute and go with argv", name)
	}
	if c.Launcher != "" && (c.Path == "" || !filepath.IsAbs(c.Launcher)) {
		return invalid("%s: launcher must be absolute and go with path", name)
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return invalid("%s: env entry %q is not KEY=VALUE", name, kv)
		}
	}
	return nil
}

func validate(req any) error {
	switch r := req.(type) {
	case ForkRun:
		if err := checkCommand("step", &r.Step); err != nil {
			return err
		}
		if r.Verify != nil {
			if err := checkCommand("verify", r.Verify); err != nil {
				return err
			}
		}
		switch r.Network.Mode {
		case "off":
			if len(r.Network.Allow) > 0 {
				return invalid("network: allow list with mode off")
			}
		case "allow":
			for _, a := range r.Network.Allow {
				if _, _, err := net.SplitHostPort(a); err != nil {
					return invalid("network: allow entry %q is not host:port", a)
				}
			}
		default:
			return invalid("network: mode must be off or allow, got %q", r.Network.Mode)
		}
		t := r.Timeouts
		for _, b := range []struct {
			n  string
			ms int64
		}{{"capture", t.CaptureMS}, {"step", t.StepMS}, {"verify", t.VerifyMS}, {"promote", t.PromoteMS}} {
			if err := checkBudget(b.n, b.ms); err != nil {
				return err
			}
		}
	case Checkpoint:
		if r.Retention.TTLSeconds < 0 || r.Retention.KeepLast < 0 {
			return invalid("retention must not be negative")
		}
		return checkBudget("checkpoint", r.TimeoutMS)
	case Restore:
		if r.Checkpoint == "" {
			return invalid("restore: no checkpoint")
		}
		return checkBudget("restore", r.TimeoutMS)
	}
	return nil
}

func validKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}

// budget fills in defaults and returns the request as the backend sees it
// and the total time the host allows.
func (s *Server) budget(req any) (any, time.Duration) {
	d := s.opts.Defaults
	or := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	switch r := req.(type) {
	case ForkRun:
		t := &r.Timeouts
		t.CaptureMS, t.StepMS, t.PromoteMS = or(t.CaptureMS, d.CaptureMS), or(t.StepMS, d.StepMS), or(t.PromoteMS, d.PromoteMS)
		total := ms(t.CaptureMS) + ms(t.StepMS) + ms(t.PromoteMS)
		if r.Verify != nil {
			t.VerifyMS = or(t.VerifyMS, d.VerifyMS)
			total += ms(t.VerifyMS)
		}
		return r, total
	case Checkpoint:
		r.TimeoutMS = or(r.TimeoutMS, d.CaptureMS)
		return r, ms(r.TimeoutMS)
	case Restore:
		r.TimeoutMS = or(r.TimeoutMS, d.CaptureMS)
		return r, ms(r.TimeoutMS)
	}
	panic("hostlink: budget of unknown request")
}

func (s *Server) submit(sb *sandbox, kind Kind, key string, req any) (Accepted, error) {
	if !validKey(key) {
		return Accepted{}, invalid("key must be 1 to 128 printable ASCII bytes")
	}
	if err := validate(req); err != nil {
		return Accepted{}, err
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return Accepted{}, &Error{Code: CodeInternal, Message: err.Error()}
	}
	sum := sha256.Sum256(append([]byte(kind+"\x00"), raw...))
	hash := hex.EncodeToString(sum[:])

	sb.submit.Lock()
	defer sb.submit.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Accepted{}, &Error{Code: CodeUnavailable, Message: "host shutting down", RetryAfterMS: 1000}
	}
	if o := sb.keys[key]; o != nil {
		defer s.mu.Unlock()
		if o.rec.Hash != hash {
			return Accepted{}, &Error{Code: CodeKeyConflict, Message: "key " + key + " was used for a different request (" + o.rec.ID + ")"}
		}
		return Accepted{Op: o.rec.ID, Replayed: true, State: o.rec.State}, nil
	}
	for _, o := range sb.ops {
		if !o.rec.State.Final() {
			s.mu.Unlock()
			return Accepted{}, &Error{Code: CodeBusy, Message: "operation " + o.rec.ID + " is running", RetryAfterMS: 1000}
		}
	}
	gen := sb.rec.Generation
	s.mu.Unlock()

	id := "op-" + newToken()[:24]
	now := time.Now().UTC()
	o := &op{sb: sb, changed: make(chan struct{})}
	o.rec = opRecord{Op: Op{ID: id, Kind: kind, Key: key, State: StateQueued, Generation: gen, Created: now, Updated: now}, Hash: hash, Request: raw}
	for i, suf := range []string{".stdout", ".stderr"} {
		o.out[i] = &outFile{path: filepath.Join(sb.dir, "ops", id+suf), limit: s.opts.MaxOutput}
	}
	// Durable before the acknowledgement: the connection carrying it may
	// be reset by the very snapshot this operation asks for.
	if err := s.saveOp(o, o.rec); err != nil {
		return Accepted{}, &Error{Code: CodeInternal, Message: err.Error()}
	}
	full, total := s.budget(req)
	ctx, cancel := context.WithTimeout(s.root, total)
	s.mu.Lock()
	o.cancel = cancel
	sb.ops[id] = o
	sb.keys[key] = o
	s.mu.Unlock()
	s.runs.Add(1)
	go s.run(ctx, o, full)
	s.log.Info("operation accepted", "sandbox", sb.name, "op", id, "kind", kind, "key", key)
	return Accepted{Op: id, State: StateQueued}, nil
}

// update applies f to the record under s.mu, then persists it and wakes
// waiters.
func (s *Server) update(o *op, f func(r *opRecord)) {
	o.persist.Lock()
	defer o.persist.Unlock()
	s.mu.Lock()
	f(&o.rec)
	o.rec.Updated = time.Now().UTC()
	o.rec.Stdout, o.rec.Stderr = o.out[0].size, o.out[1].size
	o.rec.Dropped = o.out[0].dropped + o.out[1].dropped
	rec := o.rec
	s.mu.Unlock()
	if err := s.saveOp(o, rec); err != nil {
		s.log.Error("persist operation", "op", rec.ID, "err", err)
	}
	s.wake(o)
}

func (s *Server) wake(o *op) {
	s.mu.Lock()
	close(o.changed)
	o.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *Server) run(ctx context.Context, o *op, req any) {
	defer s.runs.Done()
	defer o.cancel()
	s.update(o, func(r *opRecord) { r.State = StateRunning })
	w := [2]*opWriter{{s: s, o: o, i: 0}, {s: s, o: o, i: 1}}
	var (
		res  Result
		kept bool
		err  error
	)
	switch r := req.(type) {
	case ForkRun:
		var out ForkOutcome
		out, err = s.opts.Backend.ForkAndRun(ctx, ForkJob{Sandbox: o.sb.name, Op: o.rec.ID, Request: r, Stdout: w[0], Stderr: w[1]})
		res, kept = out.Result, out.Kept
	case Checkpoint:
		var info CheckpointInfo
		info, err = s.opts.Backend.Checkpoint(ctx, CheckpointJob{Sandbox: o.sb.name, Op: o.rec.ID, Request: r})
		res.Checkpoint = info.ID
	case Restore:
		err = s.opts.Backend.Restore(ctx, RestoreJob{Sandbox: o.sb.name, Op: o.rec.ID, Request: r})
		res.Checkpoint = r.Checkpoint
	}
	for _, f := range o.out {
		if serr := f.close(); serr != nil && err == nil {
			err = serr
		}
	}
	s.mu.Lock()
	cancelled := o.cancelled
	s.mu.Unlock()
	state, e := StateDone, (*Error)(nil)
	switch {
	case err == nil && o.rec.Kind == KindForkRun && kept:
		state = StateKept
	case err == nil && o.rec.Kind == KindForkRun:
		state = StateDiscarded
	case err == nil:
	case cancelled:
		state = StateCancelled
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		state, e = StateFailed, &Error{Code: CodeTimeout, Message: "the host's budget for the operation ran out"}
	case s.root.Err() != nil:
		state, e = StateAbandoned, &Error{Code: CodeHostRestarted, Message: "the host stopped while the operation ran"}
	case errors.Is(err, ErrNotFound):
		state, e = StateFailed, &Error{Code: CodeNotFound, Message: err.Error()}
	default:
		state, e = StateFailed, &Error{Code: CodeBackend, Message: err.Error()}
	}
	s.update(o, func(r *opRecord) { r.State, r.Result, r.Error = state, res, e })
	s.log.Info("operation finished", "sandbox", o.sb.name, "op", o.rec.ID, "state", state)
}

func (s *Server) lookup(sb *sandbox, id string) (*op, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only this sandbox's table is searched: an id of another sandbox is
	// as unknown as a made-up one.
	if o := sb.ops[id]; o != nil {
		return o, nil
	}
	return nil, &Error{Code: CodeNotFound, Message: "no operation " + id}
}

// waitFor waits until cond (called under s.mu) holds or wait passes.
func (s *Server) waitFor(o *op, wait time.Duration, cond func() bool) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(), o.changed
		s.mu.Unlock()
		if ok || wait <= 0 {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-s.root.Done():
			return
		}
	}
}

func (s *Server) status(sb *sandbox, id string, wait time.Duration) (Op, error) {
	o, err := s.lookup(sb, id)
	if err != nil {
		return Op{}, err
	}
	s.waitFor(o, wait, func() bool { return o.rec.State.Final() })
	s.mu.Lock()
	defer s.mu.Unlock()
	return o.rec.Op, nil
}

func (s *Server) output(sb *sandbox, r OutputRequest, wait time.Duration) (Chunk, error) {
	o, err := s.lookup(sb, r.Op)
	if err != nil {
		return Chunk{}, err
	}
	max := r.Max
	if max <= 0 || max > MaxChunk {
		max = MaxChunk
	}
	s.mu.Lock()
	sizes := [2]int64{o.out[0].size, o.out[1].size}
	s.mu.Unlock()
	offs := [2]int64{r.Stdout, r.Stderr}
	for i := range offs {
		if offs[i] < 0 || offs[i] > sizes[i] {
			return Chunk{}, invalid("offset %d outside output of %d bytes", offs[i], sizes[i])
		}
	}
	s.waitFor(o, wait, func() bool {
		return o.rec.State.Final() || o.out[0].size > offs[0] || o.out[1].size > offs[1]
	})
	s.mu.Lock()
	state := o.rec.State
	sizes = [2]int64{o.out[0].size, o.out[1].size}
	s.mu.Unlock()
	var data [2][]byte
	left := max
	for i := range data {
		n := min(sizes[i]-offs[i], int64(left))
		if n <= 0 {
			continue
		}
		b, err := o.out[i].readAt(offs[i], int(n))
		if err != nil {
			return Chunk{}, &Error{Code: CodeInternal, Message: err.Error()}
		}
		data[i] = b
		left -= len(b)
	}
	end := state.Final() && offs[0]+int64(len(data[0])) == sizes[0] && offs[1]+int64(len(data[1])) == sizes[1]
	return Chunk{Op: r.Op, StdoutOffset: offs[0], Stdout: data[0], StderrOffset: offs[1], Stderr: data[1], State: state, End: end}, nil
}

func (s *Server) cancelOp(sb *sandbox, id string) (Op, error) {
	o, err := s.lookup(sb, id)
	if err != nil {
		return Op{}, err
	}
	s.mu.Lock()
	if !o.rec.State.Final() {
		o.cancelled = true
		o.cancel()
	}
	s.mu.Unlock()
	s.waitFor(o, s.opts.RequestTimeout/2, func() bool { return o.rec.State.Final() })
	s.mu.Lock()
	defer s.mu.Unlock()
	return o.rec.Op, nil
}

// outFile keeps one output stream of an operation, by offset.
type outFile struct {
	path  string
	limit int64

	wmu sync.Mutex // serialises writes
	f   *os.File

	// guarded by Server.mu
	size, dropped int64
}

func (f *outFile) readAt(off int64, n int) ([]byte, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	defer fh.Close()
	b := make([]byte, n)
	m, err := fh.ReadAt(b, off)
	if m == n {
		return b, nil
	}
	return nil, fmt.Errorf("read output %s at %d: %w", f.path, off, err)
}

func (f *outFile) close() error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.f == nil {
		return nil
	}
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	f.f = nil
	return err
}

// opWriter is the io.Writer a backend streams one output stream into.
type opWriter struct {
	s *Server
	o *op
	i int
}

func (w *opWriter) Write(p []byte) (int, error) {
	f := w.o.out[w.i]
	f.wmu.Lock()
	defer f.wmu.Unlock()
	w.s.mu.Lock()
	size := f.size
	w.s.mu.Unlock()
	keep := min(int64(len(p)), max(f.limit-size, 0))
	if keep > 0 {
		if f.f == nil {
			fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				return 0, fmt.Errorf("write output: %w", err)
			}
			f.f = fh
		}
		if _, err := f.f.Write(p[:keep]); err != nil {
			return 0, fmt.Errorf("write output: %w", err)
		}
	}
	w.s.mu.Lock()
	f.size += keep
	f.dropped += int64(len(p)) - keep
	w.s.mu.Unlock()
	w.s.wake(w.o)
	return len(p), nil
}
