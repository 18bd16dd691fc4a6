package undohost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mdlayher/vsock"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/atomicfile"
)

// DefaultStateDir is where undohost keeps its state when not told.
const DefaultStateDir = "/var/lib/undohost"

// Options are undohost's command line.
type Options struct {
	// Backend is "local" or "provider" (default: the config's, else local).
	Backend string
	// Listen is the listener of the sandbox "default"; Config may add more.
	Listen string
	// Config is the configuration file; optional for the local backend.
	Config string
	// StateDir holds operations, tokens, checkpoints and the log.
	// Default DefaultStateDir.
	StateDir string
}

// ConfigError is a command line or configuration that makes no sense:
// nothing was started.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Run starts undohost and serves until ctx is cancelled, then shuts down
// cleanly: no new connections, running operations get the grace period,
// then are cancelled (their copies deleted) and end abandoned.
func Run(ctx context.Context, o Options) error {
	cfg := &Config{}
	if o.Config != "" {
		var err error
		if cfg, err = LoadConfig(o.Config); err != nil {
			return &ConfigError{Msg: err.Error()}
		}
	}
	if o.Backend == "" {
		o.Backend = cfg.Backend
	}
	if o.Backend == "" {
		o.Backend = "local"
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	sandboxes := cfg.Sandboxes
	if o.Listen != "" {
		sandboxes = append([]Sandbox{{Name: "default", Listen: o.Listen}}, sandboxes...)
	}
	if len(sandboxes) == 0 {
		return &ConfigError{Msg: "no listener: give --listen URL or sandboxes in --config"}
	}
	seen := map[string]bool{}
	for _, sb := range sandboxes {
		if sb.Name == "" || sb.Listen == "" {
			return &ConfigError{Msg: fmt.Sprintf("sandbox %q: name and listen are required", sb.Name)}
		}
		if seen[sb.Name] {
			return &ConfigError{Msg: fmt.Sprintf("sandbox %q is listed twice", sb.Name)}
		}
		seen[sb.Name] = true
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(o.StateDir, "undohost.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open the log: %w", err)
	}
	defer logf.Close()
	log := slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))

	var backend hostlink.Backend
	var prov *Provider
	var cat *catalog
	switch o.Backend {
	case "local":
		l, err := NewLocal(filepath.Join(o.StateDir, "local"), log)
		if err != nil {
			return err
		}
		backend, cat = l, &l.catalog
	case "provider":
		if cfg.Provider == nil {
			return &ConfigError{Msg: "the provider backend needs a config file with a provider: section"}
		}
		if prov, err = NewProvider(*cfg.Provider, filepath.Join(o.StateDir, "provider"), log); err != nil {
			return &ConfigError{Msg: err.Error()}
		}
		backend, cat = prov, &prov.catalog
		prov.Recover(ctx)
	default:
		return &ConfigError{Msg: fmt.Sprintf("unknown backend %q (want local or provider)", o.Backend)}
	}
	srv, err := hostlink.NewServer(hostlink.Options{StateDir: o.StateDir, Backend: backend, Logger: log})
	if err != nil {
		return err
	}
	cat.generation = func(name string) uint64 {
		id, _ := srv.Identity(name)
		return id.Generation
	}
	if prov != nil {
		prov.advance = tokenPublisher{srv: srv, files: tokenFiles(o.StateDir, sandboxes)}.Advance
	}
	var lns []net.Listener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for _, sb := range sandboxes {
		ln, err := Listen(sb.Listen)
		if err != nil {
			closeAll()
			return fmt.Errorf("sandbox %s: %w", sb.Name, err)
		}
		lns = append(lns, ln)
		id, err := srv.Identity(sb.Name)
		if err == nil {
			err = writeToken(tokenFile(o.StateDir, sb), id.Token)
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("sandbox %s: %w", sb.Name, err)
		}
	}
	if prov != nil {
		// Before any operation can start a generation of its own.
		var names []string
		for _, sb := range sandboxes {
			names = append(names, sb.Name)
		}
		prov.Retell(ctx, names)
	}
	log.Info(startedMsg, "backend", o.Backend, "pid", os.Getpid(), "sandboxes", len(sandboxes))
	served := make(chan error, len(sandboxes))
	for i, sb := range sandboxes {
		go func() { served <- srv.Serve(lns[i], sb.Name) }()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
		if errors.Is(serveErr, hostlink.ErrServerClosed) {
			serveErr = nil
		}
	}
	grace := time.Duration(cfg.Grace)
	if grace <= 0 {
		grace = 10 * time.Second
	}
	log.Info("undohost stopping", "grace", grace.String(), "err", serveErr)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	srv.Shutdown(sctx)
	log.Info("undohost stopped")
	return serveErr
}

// startedMsg is the log line Run writes once it serves: every VM has
// been told who it is and every token file is current.
const startedMsg = "undohost started"

// Starts counts the starts that the log of the state directory
// stateDir records, for a program that starts undohost and waits
// until it serves.
func Starts(stateDir string) int {
	b, _ := os.ReadFile(filepath.Join(stateDir, "undohost.log"))
	return bytes.Count(b, []byte(`"msg":"`+startedMsg+`"`))
}

// Listen opens a listener for a URL: unix:///PATH (a stale socket file
// at PATH is replaced), tcp://IP:PORT with a loopback IP only, or
// vsock://PORT.
func Listen(raw string) (net.Listener, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", raw, err)
	}
	switch u.Scheme {
	case "unix":
		path := u.Path
		if path == "" {
			return nil, fmt.Errorf("listen %q: no path", raw)
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
			// Left by an undohost that was killed: nobody answers there.
			if c, err := net.Dial("unix", path); err == nil {
				c.Close()
				return nil, fmt.Errorf("listen %q: another process already serves it", raw)
			}
			os.Remove(path)
		}
		return net.Listen("unix", path)
	case "tcp":
		host, _, err := net.SplitHostPort(u.Host)
		if err != nil {
			return nil, fmt.Errorf("listen %q: %w", raw, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("listen %q: tcp is for tests and must be a loopback address (127.0.0.1, ::1)", raw)
		}
		return net.Listen("tcp", u.Host)
	case "vsock":
		port, err := strconv.ParseUint(u.Port(), 10, 32)
		if u.Port() == "" {
			port, err = strconv.ParseUint(u.Host, 10, 32)
		}
		if err != nil {
			return nil, fmt.Errorf("listen %q: want vsock://PORT", raw)
		}
		return vsock.Listen(uint32(port), nil)
	}
	return nil, fmt.Errorf("listen %q: want unix:///PATH, tcp://127.0.0.1:PORT or vsock://PORT", raw)
}

func tokenFile(state string, sb Sandbox) string {
	if sb.TokenFile != "" {
		return sb.TokenFile
	}
	return filepath.Join(state, "tokens", sb.Name)
}

func tokenFiles(state string, sbs []Sandbox) map[string]string {
	m := map[string]string{}
	for _, sb := range sbs {
		m[sb.Name] = tokenFile(state, sb)
	}
	return m
}

func writeToken(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(token+"\n"), 0o600)
}

// tokenPublisher advances a sandbox's generation and rewrites its token
// file, which holds the token of the VM behind the sandbox's listener: a
// copy's generation leaves it alone.
type tokenPublisher struct {
	srv   *hostlink.Server
	files map[string]string
}

func (t tokenPublisher) Advance(name string, role hostlink.Role, cause string) (hostlink.WhoYouAre, error) {
	w, err := t.srv.Advance(name, role, cause)
	if err != nil {
		return w, err
	}
	if f := t.files[name]; f != "" && role != hostlink.RoleCopy {
		if err := writeToken(f, w.Token); err != nil {
			return w, err
		}
	}
	return w, nil
}
