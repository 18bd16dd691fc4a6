// Package classify wires the parser to the policy: it parses one step's
// source, converts the facts into the policy's input, and decides. It also
// finds the workspace roots and loads the policy a caller asked for.
package classify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/pathglob"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
)

// Options say where a step runs and under which policy.
type Options struct {
	Policy *policy.Policy
	// Cwd is the absolute working directory.
	Cwd string
	// Env is the environment the step runs with: HOME, OLDPWD, TMPDIR,
	// VIRTUAL_ENV and the like resolve paths.
	Env map[string]string
	// Roots are the workspace roots; nil means [WorkspaceRoots] of Cwd.
	Roots []string
	// ReadFile reads scripts the step runs; nil means [ReadScript].
	ReadFile func(string) ([]byte, error)
	// LookPath finds the file a command name runs under a PATH value;
	// nil means [PathLookup]. See [parser.Options].
	LookPath func(name, pathValue string) (string, bool)
	// NoScripts stops the parser from reading any file or looking any
	// name up in PATH.
	NoScripts bool
	// Cache, when set, keeps the parse of large sources across calls
	// (see [parser.Cache]).
	Cache *parser.Cache
	// EnvComplete says that Env is all the shell starts with (see
	// [parser.Options.EnvComplete] and [StartsWith]).
	EnvComplete bool
	// POSIX parses as sh rather than bash.
	POSIX bool
	// BashRejects says the real shell also rejects the syntax error the
	// parser finds: nothing after it runs, so only what comes before it
	// is classified.
	BashRejects bool
	// Terminal: standard input is the user's terminal (a line typed at
	// an interactive prompt); see [parser.Options].
	Terminal bool
	// Unseen, when not "", says why the step's text cannot be read (a
	// script too large to parse): the step is unknown code.
	Unseen string
	// StateDir is undosh's state directory, which a step may not write
	// (the policy's self_protect).
	StateDir string
}

// Result is a decision and the facts behind it.
type Result struct {
	Decision policy.Decision
	Facts    *parser.Facts
}

// Decide parses src and decides it under o.Policy.
func Decide(src string, o Options) Result {
	read, look := o.ReadFile, o.LookPath
	if read == nil && !o.NoScripts {
		read = ReadScript
	}
	if look == nil && !o.NoScripts {
		look = PathLookup()
	}
	var readlink func(string) (string, error)
	if !o.NoScripts {
		readlink = os.Readlink
	}
	var stands func(file, name string) bool
	var emits func(argv []string) ([]string, bool)
	var knows func(string) bool
	if o.Policy != nil {
		stands, emits, knows = o.Policy.Stands, o.Policy.Emits, o.Policy.Knows
	}
	facts := parser.Parse(src, parser.Options{Cwd: o.Cwd, Env: o.Env, ReadFile: read, POSIX: o.POSIX,
		Terminal: o.Terminal, LookPath: look, Cache: o.Cache, Stands: stands, Emits: emits, Knows: knows, EnvComplete: o.EnvComplete,
		Readlink: readlink})
	if o.BashRejects {
		facts.Err = nil
	}
	roots := o.Roots
	if roots == nil {
		roots = WorkspaceRoots(o.Cwd, o.Env["HOME"])
	}
	in := Input(facts)
	if o.Unseen != "" {
		in.Unknown = append(in.Unknown, policy.Unknown{Pos: "1:1", Reason: o.Unseen})
	}
	ctx := policy.Context{Cwd: o.Cwd, Roots: roots, Home: o.Env["HOME"]}
	if !o.NoScripts {
		ctx.Trusted = ownDirs()
		// What a write is judged against is resolved through links (a
		// few lstat each) only when a write is judged: a read-only step,
		// the classifier's hot path, pays none of it.
		base := ctx
		ctx.Resolve = sync.OnceValues(func() ([]string, map[string]string) {
			var real map[string]string
			if o.Policy != nil {
				real = realPlaces(o.Policy.Places(base))
			}
			return SelfPaths(o.Policy, o.StateDir), real
		})
	} else if o.StateDir != "" {
		ctx.Self = []string{o.StateDir}
	}
	d := o.Policy.Decide(in, ctx)
	return Result{Decision: d, Facts: facts}
}

// ownDirs is the directory of the running executable, as named and with
// symbolic links resolved: undosh's own tools live there (undoctl beside
// undosh), and a step that names one by path is that tool.
var ownDirs = sync.OnceValue(func() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	dirs := []string{filepath.Dir(exe)}
	if real, err := filepath.EvalSymlinks(exe); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	return dirs
})

// SelfPaths are undosh's own files besides [policy.SelfDirs]: the state
// directory, the policy files in force, and the installed shells that
// are undosh's front end (links into /usr/lib/undosh or undosh's own
// directory).
func SelfPaths(p *policy.Policy, stateDir string) []string {
	var out []string
	add := func(p string) {
		out = append(out, filepath.Clean(p))
		// Written paths are resolved through links: so is each of these.
		if real, err := filepath.EvalSymlinks(p); err == nil && real != filepath.Clean(p) {
			out = append(out, real)
		}
	}
	if stateDir != "" {
		add(stateDir)
	}
	if p != nil {
		for _, f := range p.Files {
			if filepath.IsAbs(f) {
				add(f)
			}
		}
	}
	return append(out, frontEnds()...)
}

// frontEnds are the installed shells that are links into /usr/lib/undosh
// or undosh's own directory, looked up at most once a second: every
// decision asks.
func frontEnds() []string {
	frontEndsMu.Lock()
	defer frontEndsMu.Unlock()
	if time.Since(frontEndsAt) < time.Second {
		return frontEndsSeen
	}
	dirs := append([]string{"/usr/lib/undosh"}, ownDirs()...)
	var out []string
	for _, sh := range []string{"/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"} {
		if real, err := filepath.EvalSymlinks(sh); err == nil {
			for _, d := range dirs {
				if real != sh && pathglob.Below(real, d) {
					out = append(out, sh)
					break
				}
			}
		}
	}
	frontEndsSeen, frontEndsAt = out, time.Now()
	return out
}

var (
	frontEndsMu   sync.Mutex
	frontEndsAt   time.Time
	frontEndsSeen []string
)

// realPlaces maps each directory that is reached through a symbolic
// link to the directory itself, as the parser resolves written paths.
func realPlaces(dirs []string) map[string]string {
	var m map[string]string
	for _, d := range dirs {
		real, err := filepath.EvalSymlinks(d)
		if err != nil || real == filepath.Clean(d) {
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[d] = real
	}
	return m
}

// maxScript bounds the size of a script the parser reads.
const maxScript = 1 << 20

// Environ is env (NAME=value entries) as the map [Options.Env] takes:
// the first entry of a name wins, as it does for bash.
func Environ(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		}
	}
	return m
}

// StartsWith reports whether a shell started with env, as a login or
// interactive shell or not, has exactly env's variables when the step's
// code begins: no start-up file runs first (~/.profile for a login
// shell, ~/.bashrc for an interactive one, $BASH_ENV or $ENV otherwise).
func StartsWith(env map[string]string, login, interactive bool) bool {
	return !login && !interactive && env["BASH_ENV"] == "" && env["ENV"] == ""
}

// ReadScript reads a file for the parser (a script the step runs or
// sources), refusing anything that is not a regular file or is larger
// than 1 MiB. What is not a regular file is never opened: opening a fifo
// waits for a writer, and would hold up the front end's server, which
// reads for every front end. The open itself does not wait either, for a
// fifo put in the file's place after the stat, which is then refused.
func ReadScript(name string) ([]byte, error) {
	f, st, err := openRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > maxScript {
		// A large binary is a program, not a script the parser missed.
		magic := make([]byte, 4)
		if _, err := io.ReadFull(f, magic); err == nil && string(magic) == "\x7fELF" {
			return nil, fmt.Errorf("%s: %w", name, parser.ErrBinary)
		}
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxScript)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxScript+1))
	if err == nil && len(data) > maxScript {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxScript)
	}
	return data, err
}

// errNotRegular is a file read for a step's decision that is not a
// regular file.
var errNotRegular = errors.New("not a regular file")

// openRegular opens name, which must be a regular file, for reading: what
// is not one is never opened, and the open does not wait (for a fifo put
// in its place after the stat, which is then refused). Its errors are
// *os.PathError.
func openRegular(name string) (*os.File, os.FileInfo, error) {
	if st, err := os.Stat(name); err != nil {
		return nil, nil, err
	} else if !st.Mode().IsRegular() {
		return nil, nil, &os.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = &os.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// PathLookup returns a [parser.Options.LookPath] that searches PATH as
// bash does: the first file of that name in PATH's directories that is a
// regular file the user may run. It names the file by its path with
// symlinks resolved, so that /bin/ls and /usr/bin/ls are one file when
// /bin links to /usr/bin. It remembers what it found; use one per step.
func PathLookup() func(name, pathValue string) (string, bool) {
	type key struct{ name, path string }
	type found struct {
		file string
		ok   bool
	}
	seen := map[key]found{}
	return func(name, pathValue string) (string, bool) {
		k := key{name, pathValue}
		if f, ok := seen[k]; ok {
			return f.file, f.ok
		}
		file, ok := lookPath(name, pathValue)
		seen[k] = found{file, ok}
		return file, ok
	}
}

func lookPath(name, pathValue string) (string, bool) {
	if name == "" || strings.Contains(name, "/") {
		return "", false
	}
	for _, dir := range filepath.SplitList(pathValue) {
		if !filepath.IsAbs(dir) {
			continue // the parser never asks for these
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS) != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real, true
		}
		return p, true
	}
	return "", false
}

// Input converts the parser's facts into the policy's input.
func Input(f *parser.Facts) policy.Input {
	in := policy.Input{Commands: make([]policy.Command, 0, len(f.Commands))}
	if f.Err != nil {
		in.SyntaxError = &policy.Unknown{Pos: f.Err.Pos.String(), Reason: f.Err.Msg}
	}
	for _, u := range f.Unknown {
		in.Unknown = append(in.Unknown, policy.Unknown{Pos: u.Pos.String(), Reason: u.Reason, Text: u.Text})
	}
	for _, c := range f.Commands {
		pc := policy.Command{
			Pos: c.Pos.String(), Text: c.Text, Sub: c.Sub, Root: c.Root, Shadowed: c.Shadowed,
			Builtin: c.Builtin, Function: c.Function, WritesKnown: c.WritesKnown, Script: c.Script,
			Opaque: c.Opaque, Missing: c.Missing, Network: c.Network, SQL: c.SQL, Push: push(c.Push), Diverts: c.Diverts, NamedPaths: c.NamedPaths, Cwd: c.Cwd, Via: c.Via, OwnSignal: c.OwnSignal,
			Argv: make([]policy.Arg, len(c.Argv)),
		}
		for i, a := range c.Argv {
			pc.Argv[i] = policy.Arg{Value: a.Value, Dynamic: a.Dynamic}
		}
		for _, h := range c.Hosts {
			pc.Hosts = append(pc.Hosts, policy.Server{Value: h.Value, Dynamic: h.Dynamic, Loopback: h.Loopback})
		}
		for _, w := range c.Writes {
			pc.Writes = append(pc.Writes, policy.Write{Path: w.Path, Resolved: w.Resolved, Tree: w.Tree,
				Stream: w.Redirect || w.Stream})
		}
		in.Commands = append(in.Commands, pc)
	}
	return in
}

// push converts the parser's reading of a push.
func push(p *parser.Push) *policy.Push {
	if p == nil {
		return nil
	}
	refs := func(l []parser.Refspec) []policy.Refspec {
		if l == nil {
			return nil
		}
		out := make([]policy.Refspec, len(l))
		for i, r := range l {
			out[i] = policy.Refspec(r)
		}
		return out
	}
	return &policy.Push{Refs: refs(p.Refs), Config: refs(p.Config), Force: p.Force, Current: p.Current}
}

// WorkspaceRoots returns the workspace of cwd: the top level of the git
// repository that holds it, else cwd itself; never / or home.
func WorkspaceRoots(cwd, home string) []string {
	if cwd == "" {
		return []string{}
	}
	cwd = filepath.Clean(cwd)
	root := cwd
	for dir := cwd; ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			root = dir
			break
		}
		if dir == "/" || dir == filepath.Dir(dir) {
			break
		}
	}
	if root == "/" || home != "" && root == filepath.Clean(home) {
		root = cwd
	}
	if root == "/" || home != "" && root == filepath.Clean(home) {
		return []string{}
	}
	return []string{root}
}

// PolicyPath returns the policy file a caller should load: the flag, then
// $UNDOSH_POLICY, then /etc/undosh/policy.yaml if it exists, else "" for
// the embedded default. "-" in the flag or the variable names the
// embedded default.
func PolicyPath(flag string, getenv func(string) string) string {
	if flag == "-" {
		return ""
	}
	if flag != "" {
		return flag
	}
	if p := getenv("UNDOSH_POLICY"); p == "-" {
		return ""
	} else if p != "" {
		return p
	}
	if _, err := os.Stat("/etc/undosh/policy.yaml"); err == nil {
		return "/etc/undosh/policy.yaml"
	}
	return ""
}

// ExamplesError is a policy whose examples do not hold.
type ExamplesError struct {
	Failures []policy.ExampleFailure
}

// Usage reports true: a policy whose examples fail is a usage error,
// and nothing ran.
func (e *ExamplesError) Usage() bool { return true }

func (e *ExamplesError) Error() string {
	var b strings.Builder
	for i, f := range e.Failures {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

// LoadPolicy loads the policy at name ("" for the embedded default) and
// checks its examples. A passing check is remembered in cacheDir (if not
// "") by the hash of the policy's text, so the next load pays nothing.
func LoadPolicy(name, cacheDir string) (*policy.Policy, error) {
	if name == "" {
		return policy.Default(), nil
	}
	// The caller names the file: in the front end's server, a fifo there
	// must not hold up the other front ends.
	f, _, err := openRegular(name)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(f)
		f.Close()
	}
	if err != nil {
		return nil, &policy.LoadError{File: name, Msg: "cannot read the policy: " + errors.Unwrap(err).Error(),
			Hint: "check the path given by --policy or $UNDOSH_POLICY", Err: err}
	}
	p, err := policy.Load(name, data)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	sum.Write(policy.DefaultSource())
	sum.Write([]byte{0})
	sum.Write(data)
	key := hex.EncodeToString(sum.Sum(nil))
	marker := ""
	if cacheDir != "" {
		marker = filepath.Join(cacheDir, "policy-ok", key)
		if _, err := os.Stat(marker); err == nil {
			return p, nil
		}
	}
	if err := CheckExamples(p); err != nil {
		return nil, err
	}
	if marker != "" {
		// A cache that cannot be written only costs the next check.
		// Private, as the state directory it may create is: undosh
		// refuses a homeless state directory that others can read.
		if os.MkdirAll(filepath.Dir(marker), 0o700) == nil {
			_ = os.WriteFile(marker, nil, 0o600)
		}
	}
	return p, nil
}

// CheckExamples decides every example of p in a neutral place (cwd
// /work/proj, HOME /home/agent, no files read) and returns an
// *ExamplesError when any fails.
func CheckExamples(p *policy.Policy) error {
	fails := p.CheckExamples(func(cmd string) policy.Decision {
		return Decide(cmd, ExampleOptions(p)).Decision
	})
	if len(fails) > 0 {
		return &ExamplesError{Failures: fails}
	}
	return nil
}

// ExampleOptions is the neutral place where examples are decided.
func ExampleOptions(p *policy.Policy) Options {
	return Options{Policy: p, Cwd: "/work/proj", Env: map[string]string{"HOME": "/home/agent"},
		Roots: []string{"/work/proj"}, NoScripts: true}
}

// IsPolicyError reports whether err means the policy itself is broken.
func IsPolicyError(err error) bool {
	var le *policy.LoadError
	var ee *ExamplesError
	return errors.As(err, &le) || errors.As(err, &ee)
}
