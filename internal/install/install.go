package install

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/realshell"
	"github.com/undosh/undosh/internal/state"
)

// Where undosh lives inside a root. ConfigFile is the file the shell
// package reads (shell.ConfigFile).
const (
	LibDir = "/usr/lib/undosh"
	Binary = LibDir + "/undosh"
	// FastBinary is the undosh-fast front end (front/undosh-fast.c),
	// which the shells link to when it is installed: it finds undosh
	// next to itself.
	FastBinary = LibDir + "/undosh-fast"
	// GuardBinary is the guard's entry point, a link to undosh, which
	// dispatches that name to the guard (internal/guard): dpkg's
	// pre-invoke hook runs it.
	GuardBinary = LibDir + "/undosh-guard"
	RealDir     = realshell.Dir
	RealBash    = realshell.Bash
	RealSh      = realshell.Sh
	ConfigDir   = "/etc/undosh"
	ConfigFile  = realshell.ConfigFile
	RecordFile  = ConfigDir + "/install.json"
	// LoginShell is the login shell --user sets: /bin/bash, which is
	// undosh once installed, so $BASH and argv[0] stay what bash users
	// expect.
	LoginShell = "/bin/bash"
)

// The paths undosh takes over, in the order their files are looked for.
var (
	BashPaths = []string{"/bin/bash", "/usr/bin/bash"}
	ShPaths   = []string{"/bin/sh", "/usr/bin/sh"}
)

// Options say what to install where. Undosh is required by Install; the
// zero value of the rest means: on /, bash only, no login shell.
type Options struct {
	// Root is the tree to act on; "" means /.
	Root string
	// Undosh is the undosh binary to install (a path on this machine).
	Undosh string
	// Fast is the undosh-fast front end to install (a path on this
	// machine) and make the shells link to. "" keeps what is installed:
	// the front end of an earlier run, or none.
	Fast string
	// NoFast removes an installed front end: the shells link to undosh
	// again.
	NoFast bool
	// User is a user whose login shell becomes undosh.
	User string
	// Sh takes over /bin/sh too.
	Sh bool
	// NoGuards removes the guards at the actors (dpkg, pip), and keeps
	// them off in later runs; Guards puts them back. With neither, a
	// first install puts them in place and a later run keeps what the
	// record says.
	NoGuards, Guards bool
	// Log gets one line per change; nil discards them.
	Log io.Writer
}

// Result says what a run did.
type Result struct {
	// Root is the root acted on.
	Root string
	// Changed reports whether anything was changed.
	Changed bool
	// Already reports, for Install, that undosh was installed before the
	// run; for Uninstall, that there was nothing to undo.
	Already bool
}

// Error is a refusal, with advice for the operator.
type Error struct {
	Msg string
	// Fix says what to do about it; Hint returns it.
	Fix string
	Err error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Hint returns the advice, for the `undoctl: hint: …` line.
func (e *Error) Hint() string { return e.Fix }

// ErrNotRoot is a change to this machine by a user who is not root.
var ErrNotRoot = errors.New("not root")

// CheckRoot refuses to act on this machine's own / (root "" or "/") for
// any uid but 0.
func CheckRoot(root string, uid int) error {
	r, err := newRoot(root)
	if err != nil {
		return err
	}
	if r.live() && uid != 0 {
		return &Error{Msg: "this changes /bin/bash, /usr/bin/bash and /etc of this machine: it must run as root",
			Fix: "run it as root (sudo), or act on another tree (an image, a chroot) with --root DIR", Err: ErrNotRoot}
	}
	return nil
}

// Action is one change install made, with what is needed to undo it.
type Action struct {
	Op string `json:"op"`
	// Path is the path changed, inside the root.
	Path string `json:"path,omitempty"`
	// Target is where a link points, where a file was moved or diverted
	// to, the line added, or the new login shell.
	Target string `json:"target,omitempty"`
	// Shell is "bash" or "sh" for the changes that take a shell over.
	Shell string `json:"shell,omitempty"`
	User  string `json:"user,omitempty"`
	// Old is the link target or login shell there was before.
	Old string `json:"old,omitempty"`
	// Existed reports whether Path was there before.
	Existed bool `json:"existed,omitempty"`
	// Data and Mode are a file's content and mode before.
	Data []byte      `json:"data,omitempty"`
	Mode os.FileMode `json:"mode,omitempty"`
	// Newline reports that a newline was added before a line.
	Newline bool `json:"newline,omitempty"`
	// Guard is "dpkg" or "pip" for the changes that put a guard in
	// place: install --no-guards undoes them.
	Guard string `json:"guard,omitempty"`
}

// The operations of actions. A link "to undosh" (opTakeover, and opLink
// with Target Binary) points at Binary, or at FastBinary while the front
// end is installed: a later run switches it, so undoing one accepts
// either.
const (
	opDir      = "mkdir"       // created a directory
	opFile     = "write"       // wrote a file (Data: what it held)
	opTakeover = "move"        // moved a shell to Target, then made Path a link to undosh
	opDivert   = "divert"      // dpkg-divert --local --divert Target --add Path
	opLink     = "symlink"     // made Path a link to Target (Old: the link before)
	opLine     = "append-line" // appended the line Target to Path
	opShell    = "login-shell" // set User's login shell to Target (Old: before)
	// opGuardFile wrote a guard into a file a package may own (a PEP 668
	// marker; Data: what it held). It is undone only while the file is
	// still the guard: a package upgrade that replaced it wins.
	opGuardFile = "guard-file"
)

// Record is everything an install did, in order: uninstall undoes it in
// reverse. It is written before each change (so a run cut short is still
// undone in full) and is Complete only once a run has finished.
type Record struct {
	Version  int       `json:"version"`
	Complete bool      `json:"complete"`
	Time     time.Time `json:"time"`
	Undosh   string    `json:"undosh_sha256"`
	// Fast is the sha256 of the installed front end, "" for none.
	Fast string `json:"undosh_fast_sha256,omitempty"`
	// NoGuards records install --no-guards: later runs put no guards
	// in place until install --guards.
	NoGuards bool     `json:"no_guards,omitempty"`
	Actions  []Action `json:"actions"`
}

// LoadRecord reads the install record of root; it returns nil, nil when
// there is none.
func LoadRecord(root string) (*Record, error) {
	r, err := newRoot(root)
	if err != nil {
		return nil, err
	}
	return loadRecord(r)
}

func loadRecord(r fsRoot) (*Record, error) {
	h, err := r.target(RecordFile)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(h)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", RecordFile, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil || rec.Version != 1 {
		if err == nil {
			err = fmt.Errorf("version %d", rec.Version)
		}
		return nil, &Error{Msg: fmt.Sprintf("the install record %s is damaged: %v", RecordFile, err),
			Fix: "undoctl cannot know what to undo; compare with a fresh machine by hand", Err: err}
	}
	return &rec, nil
}

// installer carries one run of Install or Uninstall.
type installer struct {
	r        fsRoot
	rec      *Record
	log      io.Writer
	dpkg     *dpkg
	saveable bool // the record's directory exists
	begun    bool // the record says a run is in progress
	changed  bool
}

func (in *installer) say(format string, a ...any) {
	fmt.Fprintf(in.log, format+"\n", a...)
}

func (in *installer) save() error {
	if !in.saveable {
		return nil
	}
	data, err := json.MarshalIndent(in.rec, "", "  ")
	if err != nil {
		return err
	}
	h, err := in.r.target(RecordFile)
	if err != nil {
		return err
	}
	return atomicfile.Write(h, append(data, '\n'), 0o644)
}

// begin marks the record as in progress before the first change.
func (in *installer) begin() error {
	in.changed = true
	if in.begun {
		return nil
	}
	in.begun = true
	in.rec.Complete = false
	in.rec.Time = time.Now().UTC().Truncate(time.Second)
	return in.save()
}

// step records a, then does it: a run cut short after the record was
// written is undone by uninstall, whose undo of each action copes with
// the action not having happened.
func (in *installer) step(a Action, do func() error) error {
	if err := in.begin(); err != nil {
		return err
	}
	in.rec.Actions = append(in.rec.Actions, a)
	if err := in.save(); err != nil {
		return err
	}
	return do()
}

// has reports whether the record holds an action matching match.
func (in *installer) has(match func(Action) bool) bool {
	for _, a := range in.rec.Actions {
		if match(a) {
			return true
		}
	}
	return false
}

// isUndosh reports whether p, followed inside the root, is the installed
// undosh binary or its front end.
func (r fsRoot) isUndosh(p string) bool {
	return r.is(p, Binary) || r.isFast(p)
}

// isFast reports whether p, followed inside the root, is the installed
// front end.
func (r fsRoot) isFast(p string) bool { return r.is(p, FastBinary) }

// is reports whether p and installed, followed inside the root, are one
// file.
func (r fsRoot) is(p, installed string) bool {
	t, err := r.resolve(p, true)
	if err != nil {
		return false
	}
	b, err := r.resolve(installed, true)
	if err != nil {
		return false
	}
	return t == b || sameFile(r.host(t), r.host(b))
}

// isEntry reports whether a link target is one of undosh's entry points.
func isEntry(target string) bool { return target == Binary || target == FastBinary }

// isLoginUndosh reports whether the login shell is undosh as bash: undosh
// started as sh (/bin/sh taken over) passes every command through.
func (r fsRoot) isLoginUndosh(shell string) bool {
	return filepath.Base(shell) == "bash" && r.isUndosh(shell)
}

// Install makes undosh the shell of the root (see the package
// documentation). Run again, it installs a new undosh binary and adds
// what the options ask for that is not there yet.
func Install(o Options) (Result, error) {
	r, err := newRoot(o.Root)
	if err != nil {
		return Result{}, err
	}
	res := Result{Root: r.dir}
	if err := CheckRoot(r.dir, os.Geteuid()); err != nil {
		return res, err
	}
	if o.Fast != "" && o.NoFast {
		return res, &Error{Msg: "a front end to install and none at once",
			Fix: "give either --fast PATH or --no-fast"}
	}
	if o.Guards && o.NoGuards {
		return res, &Error{Msg: "guards and no guards at once", Fix: "give either --guards or --no-guards"}
	}
	// The front end first: a refusal of a binary named by default is
	// more useful than one about undosh.
	var fast []byte
	if o.Fast != "" {
		if fast, err = readFast(o.Fast); err != nil {
			return res, err
		}
	}
	bin, err := readUndosh(o.Undosh)
	if err != nil {
		return res, err
	}
	rec, err := loadRecord(r)
	if err != nil {
		return res, err
	}
	if rec != nil && !rec.Complete {
		return res, &Error{Msg: fmt.Sprintf("a previous install or uninstall was cut short (%s is not complete)", RecordFile),
			Fix: "run undoctl uninstall to put everything back, then install again"}
	}
	in := &installer{r: r, rec: rec, log: o.Log}
	if in.log == nil {
		in.log = io.Discard
	}
	d, note := findDpkg(r)
	in.dpkg = d
	if note != "" {
		in.say("warning: %s", note)
	}

	// Everything that can refuse is decided before the first change.
	var bash, sh *plan
	if rec == nil {
		in.rec = &Record{Version: 1, NoGuards: o.NoGuards}
		if bash, err = in.plan("bash", BashPaths, RealBash, nil); err != nil {
			return res, err
		}
	} else {
		res.Already = true
		in.saveable = true
		for _, p := range BashPaths {
			if _, ok := r.entryOf(p); ok && !in.r.isUndosh(p) {
				return res, &Error{Msg: fmt.Sprintf("undosh is installed, but %s is not undosh any more (%s)", p, in.r.describe(p)),
					Fix: "a package upgrade or another program replaced it; see undoctl doctor, then undoctl uninstall and install again"}
			}
		}
	}
	if o.Sh && !in.has(func(a Action) bool { return a.Shell == "sh" }) {
		if sh, err = in.plan("sh", ShPaths, RealSh, bash); err != nil {
			return res, err
		}
	}
	var user *User
	if o.User != "" {
		u, err := r.lookupUser(o.User, 0)
		if err != nil {
			return res, err
		}
		user = &u
	}

	if err := in.mkdirs(ConfigDir); err != nil {
		return res, err
	}
	in.saveable = true
	if in.begun {
		if err := in.save(); err != nil {
			return res, err
		}
	}
	if err := in.mkdirs(RealDir); err != nil {
		return res, err
	}
	if err := in.installBinary(bin); err != nil {
		return res, err
	}
	switch {
	case fast != nil:
		if err := in.installFast(fast); err != nil {
			return res, err
		}
	case o.NoFast:
		if err := in.removeFast(); err != nil {
			return res, err
		}
	}
	for _, p := range []*plan{bash, sh} {
		if p != nil {
			if err := in.takeover(p); err != nil {
				return res, err
			}
		}
	}
	// The links of an earlier run, after a switch to or from the front
	// end.
	if err := in.relink(in.entry()); err != nil {
		return res, err
	}
	if err := in.writeConfig(); err != nil {
		return res, err
	}
	if err := in.guards(o); err != nil {
		return res, err
	}
	if user != nil {
		if err := in.setLogin(*user); err != nil {
			return res, err
		}
	}
	if in.begun {
		in.rec.Complete = true
		if err := in.save(); err != nil {
			return res, err
		}
	}
	res.Changed = in.changed
	return res, nil
}

// readUndosh reads the undosh binary to install, refusing anything that
// is not undosh.
func readUndosh(name string) ([]byte, error) {
	hint := "build it (go build -o DIR/ ./cmd/undosh) and name it with --undosh PATH, or put it next to undoctl"
	if name == "" {
		return nil, &Error{Msg: "no undosh binary given", Fix: hint}
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("undosh binary %s: %v", name, errors.Unwrap(err)), Fix: hint, Err: err}
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return nil, &Error{Msg: fmt.Sprintf("undosh binary %s: not an executable file", name), Fix: hint}
	}
	if err := isUndoshBinary(name); err != nil {
		return nil, &Error{Msg: fmt.Sprintf("%s is not undosh: %v", name, err), Fix: hint, Err: err}
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// isUndoshBinary checks, by the build information Go puts in every
// binary, that name is undosh's command.
func isUndoshBinary(name string) error {
	bi, err := buildinfo.ReadFile(name)
	if err != nil {
		return errors.New("not a Go program")
	}
	if !strings.HasSuffix(bi.Path, "/cmd/undosh") {
		return fmt.Errorf("it is %s", bi.Path)
	}
	return nil
}

// maxFast bounds the size of a front end: undosh-fast is a few kilobytes
// of C (a static build, under a megabyte).
const maxFast = 4 << 20

// readFast reads the front end to install, refusing anything that is not
// undosh-fast.
func readFast(name string) ([]byte, error) {
	hint := "build it (cc -O2 -static -o DIR/undosh-fast front/undosh-fast.c) and name it with --fast PATH, or install without it: --no-fast"
	st, err := os.Stat(name)
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("undosh-fast binary %s: %v", name, errors.Unwrap(err)), Fix: hint, Err: err}
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return nil, &Error{Msg: fmt.Sprintf("undosh-fast binary %s: not an executable file", name), Fix: hint}
	}
	data, err := readFastFile(name)
	var nf *notFastError
	if errors.As(err, &nf) {
		return nil, &Error{Msg: fmt.Sprintf("%s is not undosh-fast: %s", name, nf.why), Fix: hint, Err: err}
	}
	return data, err
}

// notFastError is the error of readFastFile for a file that is no front
// end; its others are I/O errors.
type notFastError struct{ why string }

func (e *notFastError) Error() string { return "not undosh-fast: " + e.why }

// readFastFile reads the file at host path name and checks that it is
// undosh-fast: an ELF program that is not a Go one (undosh itself holds
// the server's name too) and that starts the front end's server by name
// (state.ServerName, the argv[0] with which undosh-fast starts undosh as
// its server, docs/front.md: a string every build of the front end holds).
// That is cheap (no run, so it works for another architecture's image)
// and holds for any compiler and flags: the name is a C string the front
// end passes to execve.
func readFastFile(name string) ([]byte, error) {
	notFast := func(format string, a ...any) error {
		return &notFastError{why: fmt.Sprintf(format, a...)}
	}
	if bi, err := buildinfo.ReadFile(name); err == nil {
		return nil, notFast("it is the Go program %s", bi.Path)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFast+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxFast {
		return nil, notFast("it is over %d MB", maxFast>>20)
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil || (ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN) {
		return nil, notFast("not an ELF program")
	}
	if !bytes.Contains(data, []byte(state.ServerName+"\x00")) {
		return nil, notFast("it does not start %s", state.ServerName)
	}
	return data, nil
}

// isFastFile reports whether the file at host path name is undosh-fast.
func isFastFile(name string) bool {
	_, err := readFastFile(name)
	return err == nil
}

// describe says what p is, for messages.
func (r fsRoot) describe(p string) string {
	st, err := r.lstat(p)
	switch {
	case err != nil:
		return "missing"
	case st.Mode()&os.ModeSymlink != 0:
		return "a link to " + r.readlink(p)
	case st.Mode().IsRegular():
		return fmt.Sprintf("a file of %d bytes", st.Size())
	}
	return st.Mode().Type().String()
}

// plan is how one shell is taken over.
type plan struct {
	shell string
	// path is the name whose file moves (or, for a link, is replaced).
	path string
	// real is where the real shell goes: RealBash or RealSh.
	real string
	// linkTo, when path is a link (/bin/sh -> dash), is what real links
	// to instead of a file being moved; old is path's link before.
	linkTo, old string
	// divert is the path dpkg-divert diverts ("" for none).
	divert string
	// same are other names of path's entry (/usr/bin/bash when /bin links
	// to usr/bin) and links to it: they follow it.
	same []string
	// links are the other paths, made links to undosh.
	links []Action
	// entry is path's directory entry.
	entry entry
}

type found struct {
	path string
	st   os.FileInfo // nil when missing
	e    entry
	dir  bool // the directory exists
}

// plan decides how to take a shell over. bash, when not nil, is the plan
// for bash, which runs first: an sh that is bash must lead to the real
// bash, not to undosh.
func (in *installer) plan(shell string, paths []string, real string, bash *plan) (*plan, error) {
	r := in.r
	var fs []found
	for _, p := range paths {
		f := found{path: p}
		f.e, f.dir = r.entryOf(p)
		f.st, _ = r.lstat(p)
		fs = append(fs, f)
	}
	primary := -1
	for i, f := range fs {
		if f.st != nil && f.st.Mode().IsRegular() {
			primary = i
			break
		}
	}
	if primary < 0 {
		for i, f := range fs {
			if f.st != nil && f.st.Mode()&os.ModeSymlink != 0 {
				primary = i
				break
			}
		}
	}
	if primary < 0 {
		return nil, &Error{Msg: fmt.Sprintf("no %s in %s: %s missing", shell, r.dir, strings.Join(paths, " and ")+" are"),
			Fix: fmt.Sprintf("install %s in that root first", shell)}
	}
	p := &plan{shell: shell, path: fs[primary].path, real: real, entry: fs[primary].e}
	notRecorded := &Error{Msg: fmt.Sprintf("%s is undosh already, but there is no install record (%s)", p.path, RecordFile),
		Fix: "it was not installed by undoctl install, or the record was removed: put the real shell back by hand first"}
	tgt, err := r.resolve(p.path, true)
	if err != nil {
		return nil, err
	}
	if in.r.isUndosh(p.path) {
		if shell == "bash" || !in.has(func(a Action) bool { return a.Shell == "bash" }) {
			return nil, notRecorded
		}
		// sh is a link to bash, which undosh took over.
		tgt = RealBash
	}
	if fs[primary].st.Mode().IsRegular() {
		if isUndoshBinary(r.host(tgt)) == nil || isFastFile(r.host(tgt)) {
			return nil, notRecorded
		}
	} else {
		st, err := os.Stat(r.host(tgt))
		if err != nil || !st.Mode().IsRegular() {
			return nil, &Error{Msg: fmt.Sprintf("%s is a link to %s, which is not a file", p.path, r.readlink(p.path)),
				Fix: fmt.Sprintf("repair %s first", p.path)}
		}
		p.old = r.readlink(p.path)
		p.linkTo = tgt
		if e, ok := r.entryOf(tgt); ok && bash != nil && e == bash.entry {
			p.linkTo = bash.real
		}
	}
	loc, err := r.resolve(p.path, false)
	if err != nil {
		return nil, err
	}
	var names []string // the names of the primary's entry
	for i, f := range fs {
		switch {
		case i == primary:
			names = append(names, f.path)
		case !f.dir:
			// No such directory (/usr/bin on a minimal image): nothing to do.
		case f.e == fs[primary].e:
			names = append(names, f.path)
		case f.st == nil:
			p.links = append(p.links, Action{Op: opLink, Path: f.path, Target: Binary, Shell: shell})
		case f.st.Mode()&os.ModeSymlink != 0:
			if r.hop(f.path) == loc {
				p.same = append(p.same, f.path)
				continue
			}
			p.links = append(p.links, Action{Op: opLink, Path: f.path, Target: Binary, Shell: shell, Existed: true, Old: r.readlink(f.path)})
		default:
			return nil, &Error{Msg: fmt.Sprintf("%s and %s are two different files", p.path, f.path),
				Fix: fmt.Sprintf("make %s a link to %s (or remove it) first: undoctl install takes over one real %s", f.path, p.path, shell)}
		}
	}
	if in.dpkg != nil && p.linkTo == "" {
		// Divert the name the package owns: under usrmerge dpkg knows
		// /bin/bash, while /usr/bin/bash is the same file and not in
		// its database. One entry is diverted once.
		p.divert = p.path
		for _, n := range names {
			if in.dpkg.owner(n) != "" {
				p.divert = n
				break
			}
		}
		by, to, err := in.dpkg.diversion(p.divert)
		if err != nil {
			return nil, err
		}
		if by != "" {
			return nil, &Error{Msg: fmt.Sprintf("%s is already diverted to %s by %s", p.divert, to, strings.ToLower(by)),
				Fix: fmt.Sprintf("dpkg-divert --list shows it; remove that diversion (dpkg-divert --remove %s) if it is a leftover", p.divert)}
		}
		p.path = p.divert
	}
	for _, n := range names {
		if n != p.path {
			p.same = append(p.same, n)
		}
	}
	if _, err := r.lstat(real); err == nil {
		return nil, &Error{Msg: fmt.Sprintf("%s exists, but there is no install record (%s)", real, RecordFile),
			Fix: fmt.Sprintf("a leftover of an earlier install: put it back at %s or remove it, then run undoctl install again", p.path)}
	}
	return p, nil
}

// hop returns where the link p leads in one step, with directories
// resolved and the last element not followed ("" when p is no link).
func (r fsRoot) hop(p string) string {
	t := r.readlink(p)
	if t == "" {
		return ""
	}
	if !filepath.IsAbs(t) {
		loc, err := r.resolve(p, false)
		if err != nil {
			return ""
		}
		t = filepath.Join(filepath.Dir(loc), t)
	}
	q, err := r.resolve(t, false)
	if err != nil {
		return ""
	}
	return q
}

// mkdirs creates p and its missing parents, recording each.
func (in *installer) mkdirs(p string) error { return in.mkdirsFor(p, "") }

// mkdirsFor is mkdirs for a guard: the directories go with it.
func (in *installer) mkdirsFor(p, guard string) error {
	q, err := in.r.resolve(p, true)
	if err != nil {
		return err
	}
	cur := "/"
	for _, name := range splitPath(q) {
		cur = filepath.Join(cur, name)
		st, err := os.Lstat(in.r.host(cur))
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s: not a directory", cur)
			}
			continue
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		dir := cur
		if err := in.step(Action{Op: opDir, Path: dir, Guard: guard}, func() error {
			if err := os.Mkdir(in.r.host(dir), 0o755); err != nil {
				return err
			}
			return atomicfile.SyncDir(filepath.Dir(in.r.host(dir)))
		}); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes data to p, recording what p held before unless the
// record already has p (a later run rewriting its own file).
// It reports whether it wrote.
func (in *installer) writeFile(p string, data []byte, mode os.FileMode) (bool, error) {
	return in.writeFileAs(Action{Op: opFile, Path: p}, data, mode)
}

// writeFileAs is writeFile with the action to record: its Op and Path,
// and Guard.
func (in *installer) writeFileAs(a Action, data []byte, mode os.FileMode) (bool, error) {
	p := a.Path
	h, err := in.r.target(p)
	if err != nil {
		return false, err
	}
	old, err := os.ReadFile(h)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	write := func() error { return atomicfile.Write(h, data, mode) }
	if in.has(func(b Action) bool { return b.Op == a.Op && b.Path == p }) {
		if err := in.begin(); err != nil {
			return false, err
		}
		return true, write()
	}
	if err == nil {
		st, serr := os.Stat(h)
		if serr != nil {
			return false, serr
		}
		a.Existed, a.Data, a.Mode = true, old, st.Mode().Perm()
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	return true, in.step(a, write)
}

func (in *installer) installBinary(bin []byte) error {
	sum := sha256.Sum256(bin)
	in.rec.Undosh = hex.EncodeToString(sum[:])
	verb := "installed"
	if in.has(func(a Action) bool { return a.Op == opFile && a.Path == Binary }) {
		verb = "updated"
	}
	wrote, err := in.writeFile(Binary, bin, 0o755)
	if err != nil {
		return err
	}
	if wrote {
		in.say("%s undosh at %s", verb, Binary)
	}
	return nil
}

// hasFast reports whether the record holds the front end.
func (rec *Record) hasFast() bool {
	for _, a := range rec.Actions {
		if a.Op == opFile && a.Path == FastBinary {
			return true
		}
	}
	return false
}

// entry returns what the shells link to: the front end when it is
// installed, else undosh.
func (in *installer) entry() string {
	if in.rec.hasFast() {
		return FastBinary
	}
	return Binary
}

// installFast installs or updates the front end. It is written before any
// link is made to it, so no shell ever points at nothing.
func (in *installer) installFast(data []byte) error {
	sum := sha256.Sum256(data)
	in.rec.Fast = hex.EncodeToString(sum[:])
	verb := "installed"
	if in.rec.hasFast() {
		verb = "updated"
	}
	wrote, err := in.writeFile(FastBinary, data, 0o755)
	if err != nil {
		return err
	}
	if wrote {
		in.say("%s undosh-fast at %s", verb, FastBinary)
	}
	return nil
}

// removeFast points the shells at undosh again, then removes the front
// end and drops it from the record.
func (in *installer) removeFast() error {
	i := -1
	for j, a := range in.rec.Actions {
		if a.Op == opFile && a.Path == FastBinary {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	if err := in.begin(); err != nil {
		return err
	}
	if err := in.relink(Binary); err != nil {
		return err
	}
	// The file goes before its action: a run cut short in between
	// leaves an action whose undo copes with the file being gone,
	// never a file nothing will remove.
	if err := in.undo(in.rec.Actions[i]); err != nil {
		return err
	}
	in.rec.Actions = append(in.rec.Actions[:i:i], in.rec.Actions[i+1:]...)
	in.rec.Fast = ""
	return in.save()
}

// shellLinks returns the paths the record made links to undosh.
func (in *installer) shellLinks() []string {
	var out []string
	for _, a := range in.rec.Actions {
		if a.Op == opTakeover || (a.Op == opLink && a.Shell != "" && a.Target == Binary) {
			out = append(out, a.Path)
		}
	}
	return out
}

// relink points every link to undosh the record made at to (Binary or
// FastBinary), each in one rename. A link that leads elsewhere (a package
// upgrade replaced it) is left for doctor to report.
func (in *installer) relink(to string) error {
	for _, p := range in.shellLinks() {
		cur := in.r.readlink(p)
		if cur == to || !isEntry(cur) {
			continue
		}
		h, err := in.r.at(p)
		if err != nil {
			return err
		}
		if err := in.begin(); err != nil {
			return err
		}
		if err := atomicfile.Symlink(to, h); err != nil {
			return err
		}
		in.say("%s -> %s (was %s)", p, to, cur)
	}
	return nil
}

func (in *installer) writeConfig() error {
	var b strings.Builder
	b.WriteString("# The real shells undosh runs, written by undoctl install.\n")
	fmt.Fprintf(&b, "bash=%s\n", RealBash)
	if in.has(func(a Action) bool { return a.Shell == "sh" }) {
		fmt.Fprintf(&b, "sh=%s\n", RealSh)
	}
	wrote, err := in.writeFile(ConfigFile, []byte(b.String()), 0o644)
	if err != nil {
		return err
	}
	if wrote {
		in.say("wrote %s", ConfigFile)
	}
	return nil
}

// takeover moves the real shell aside and puts undosh in its place. The
// shell's name is replaced by a link to undosh in one rename, so it never
// goes missing.
func (in *installer) takeover(p *plan) error {
	r := in.r
	to := in.entry()
	at := func(q string) (string, error) { return r.at(q) }
	src, err := at(p.path)
	if err != nil {
		return err
	}
	dst, err := at(p.real)
	if err != nil {
		return err
	}
	if p.linkTo == "" {
		if err := in.step(Action{Op: opTakeover, Path: p.path, Target: p.real, Shell: p.shell}, func() error {
			return keepFile(src, dst)
		}); err != nil {
			return err
		}
		if p.divert != "" {
			if err := in.step(Action{Op: opDivert, Path: p.divert, Target: p.real, Shell: p.shell}, func() error {
				return in.dpkg.add(p.divert, p.real)
			}); err != nil {
				return err
			}
		}
		if err := atomicfile.Symlink(to, src); err != nil {
			return err
		}
		in.say("moved %s to %s", p.path, p.real)
		if p.divert != "" {
			in.say("diverted %s to %s (dpkg-divert --local: %s upgrades install there)", p.divert, p.real, p.shell)
		}
	} else {
		if err := in.step(Action{Op: opLink, Path: p.real, Target: p.linkTo, Shell: p.shell}, func() error {
			return atomicfile.Symlink(p.linkTo, dst)
		}); err != nil {
			return err
		}
		in.say("%s -> %s (the real %s)", p.real, p.linkTo, p.shell)
		if err := in.step(Action{Op: opLink, Path: p.path, Target: Binary, Shell: p.shell, Existed: true, Old: p.old}, func() error {
			return atomicfile.Symlink(to, src)
		}); err != nil {
			return err
		}
	}
	also := ""
	if len(p.same) > 0 {
		also = " (so is " + strings.Join(p.same, ", ") + ")"
	}
	in.say("%s -> %s%s", p.path, to, also)
	for _, a := range p.links {
		h, err := at(a.Path)
		if err != nil {
			return err
		}
		if err := in.step(a, func() error { return atomicfile.Symlink(to, h) }); err != nil {
			return err
		}
		in.say("%s -> %s", a.Path, to)
	}
	return nil
}

// setLogin makes undosh the login shell of u.
func (in *installer) setLogin(u User) error {
	if in.r.isLoginUndosh(u.Shell) {
		in.say("user %s: login shell %s is undosh already", u.Name, u.Shell)
		return nil
	}
	ok, err := in.r.hasLine(ShellsFile, LoginShell)
	if err != nil {
		return err
	}
	if !ok {
		a := Action{Op: opLine, Path: ShellsFile, Target: LoginShell}
		h, err := in.r.target(ShellsFile)
		if err != nil {
			return err
		}
		if data, err := os.ReadFile(h); err == nil {
			a.Existed = true
			a.Newline = len(data) > 0 && data[len(data)-1] != '\n'
		}
		if err := in.step(a, func() error { return in.r.appendLine(a) }); err != nil {
			return err
		}
		in.say("added %s to %s", LoginShell, ShellsFile)
	}
	a := Action{Op: opShell, User: u.Name, Old: u.Shell, Target: LoginShell}
	if err := in.step(a, func() error {
		_, err := in.r.setShell(u.Name, LoginShell, u.Shell)
		return err
	}); err != nil {
		return err
	}
	in.say("user %s: login shell %s (was %s)", u.Name, LoginShell, shellName(u.Shell))
	return nil
}

func shellName(s string) string {
	if s == "" {
		return "empty: /bin/sh"
	}
	return s
}
