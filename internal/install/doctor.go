package install

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/machine"
	"github.com/undosh/undosh/internal/realshell"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/policy"
	"github.com/undosh/undosh/watch"
)

// DoctorOptions say what Doctor looks at.
type DoctorOptions struct {
	// Root is the tree to look at; "" means /.
	Root string
	// User is the user whose login shell and state directory are
	// checked; "" means the user with UID.
	User string
	UID  int
	// Policy and State are the --policy and --state flags.
	Policy, State string
	// Getenv reads the environment; it is consulted only when Root is
	// this machine's / (an image does not run with this environment).
	Getenv func(string) string
}

// Report is what Doctor found. Problems is empty when all is well.
type Report struct {
	Root          string         `json:"root"`
	Installed     bool           `json:"installed"`
	Record        *RecordInfo    `json:"record,omitempty"`
	Binary        BinaryInfo     `json:"binary"`
	Fast          FastInfo       `json:"fast"`
	Paths         []PathInfo     `json:"paths"`
	Diversions    []Diversion    `json:"diversions"`
	Guards        []GuardInfo    `json:"guards"`
	Real          []RealShell    `json:"real_shells"`
	Login         *User          `json:"login,omitempty"`
	LoginIsUndosh bool           `json:"login_is_undosh"`
	Policy        PolicyInfo     `json:"policy"`
	State         StateInfo      `json:"state"`
	Server        ServerInfo     `json:"classifier"` // the key predates the name "server" (docs/front.md §1)
	Enforcement   Enforcement    `json:"enforcement"`
	Machine       MachineInfo    `json:"machine"`
	Examples      []ExampleCheck `json:"examples"`
	Problems      []Problem      `json:"problems"`
}

// RecordInfo sums up the install record.
type RecordInfo struct {
	Path     string    `json:"path"`
	Complete bool      `json:"complete"`
	Time     time.Time `json:"time"`
	Actions  int       `json:"actions"`
	Sh       bool      `json:"sh"`
	Users    []string  `json:"users,omitempty"`
}

// BinaryInfo is the installed undosh binary.
type BinaryInfo struct {
	Path    string `json:"path"`
	Present bool   `json:"present"`
	Undosh  bool   `json:"undosh"`
	Version string `json:"version,omitempty"`
}

// FastInfo is the undosh-fast front end.
type FastInfo struct {
	Path string `json:"path"`
	// Installed reports that the install record holds it.
	Installed bool `json:"installed"`
	Present   bool `json:"present"`
	// OK reports that the file is undosh-fast.
	OK bool `json:"ok"`
}

// PathInfo is one of the shell paths undosh takes over.
type PathInfo struct {
	Path string `json:"path"`
	Is   string `json:"is"`
	// Undosh reports that the path leads to undosh, directly or through
	// the front end; Fast, through the front end.
	Undosh bool `json:"undosh"`
	Fast   bool `json:"fast"`
}

// Diversion is a dpkg diversion of a shell path.
type Diversion struct {
	Path string `json:"path"`
	To   string `json:"to"`
	By   string `json:"by"`
}

// GuardInfo is one guard at an actor (docs/guards.md).
type GuardInfo struct {
	// Actor is "dpkg", "pip" or "npm"; "" stands for all of them, when
	// install --no-guards turned them off.
	Actor string `json:"actor"`
	// Path is the hook or marker.
	Path string `json:"path,omitempty"`
	// On reports that the guard is in place.
	On bool `json:"on"`
	// Is says what is there, for the report.
	Is string `json:"is"`
}

// RealShell is the shell undosh runs for a personality, found the way
// undosh finds it.
type RealShell struct {
	Personality string `json:"personality"`
	Path        string `json:"path,omitempty"`
	From        string `json:"from,omitempty"`
	Is          string `json:"is,omitempty"`
}

// PolicyInfo is the policy in force.
type PolicyInfo struct {
	// Path is the file, "" for the embedded default.
	Path     string `json:"path"`
	From     string `json:"from"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
	Fallback string `json:"host_fallback,omitempty"`
}

// StateInfo is the state directory.
type StateInfo struct {
	Dir         string `json:"dir"`
	Exists      bool   `json:"exists"`
	Writable    bool   `json:"writable"`
	Bytes       int64  `json:"bytes"`
	Workspaces  int    `json:"workspaces"`
	Checkpoints int    `json:"checkpoints"`
	Steps       int    `json:"journal_steps"`
}

// ServerInfo is the front end's server of the state directory, which
// undosh-fast asks and starts. Doctor never starts it.
type ServerInfo struct {
	// Socket is where it listens; "" when there is no state directory.
	Socket  string `json:"socket,omitempty"`
	Running bool   `json:"running"`
	// PID is its process id, from run/classify.pid, when it is running.
	PID int `json:"pid,omitempty"`
	// Watches are the workspaces its watchers watch (watchd): a
	// checkpoint there reads only what changed, unless Full says why the
	// next one walks everything.
	Watches []watchd.Status `json:"watches,omitempty"`
	// MaxUserWatches is fs.inotify.max_user_watches: the directories one
	// user's watchers may watch, over every workspace.
	MaxUserWatches int `json:"max_user_watches,omitempty"`
}

// Enforcement says how steps are held to their class (docs/enforce.md).
type Enforcement struct {
	// On is the policy's enforce, or $UNDOSH_ENFORCE, which From names.
	On   bool   `json:"on"`
	From string `json:"from"`
	// Mechanism is the kernel's means in force here ("capture", "ns" or
	// "landlock"), "" when there is none (Missing says why), or when the
	// tree looked at is not this machine's.
	Mechanism string `json:"mechanism,omitempty"`
	Is        string `json:"is,omitempty"`
	Missing   string `json:"missing,omitempty"`
	// Escalate is what a step that wrote beyond its class gets.
	Escalate string `json:"escalate,omitempty"`
}

// ExampleCheck is what undosh would do with one command.
type ExampleCheck struct {
	What    string `json:"what"`
	Command string `json:"command"`
	Class   string `json:"class,omitempty"`
	Outcome string `json:"outcome"`
}

// Problem is something wrong, and how to fix it.
type Problem struct {
	What string `json:"what"`
	Fix  string `json:"fix"`
}

// The commands Doctor decides, one that changes files and one that
// changes the machine.
var doctorExamples = []struct{ what, cmd string }{
	{"file change", "sed -i s/a/b/ f"},
	{"machine change", "apt-get install -y jq"},
}

type doctor struct {
	r   fsRoot
	o   DoctorOptions
	rep *Report
}

func (d *doctor) problem(what, fix string, a ...any) {
	d.rep.Problems = append(d.rep.Problems, Problem{What: fmt.Sprintf(what, a...), Fix: fix})
}

func (d *doctor) getenv(k string) string {
	if !d.r.live() || d.o.Getenv == nil {
		return ""
	}
	return d.o.Getenv(k)
}

// Doctor looks at what is installed in the root and how undosh will
// behave there. It changes nothing. Its error is for a root it cannot
// look at; everything else is in the report.
func Doctor(o DoctorOptions) (Report, error) {
	r, err := newRoot(o.Root)
	if err != nil {
		return Report{}, err
	}
	d := &doctor{r: r, o: o, rep: &Report{Root: r.dir, Paths: []PathInfo{}, Diversions: []Diversion{}, Guards: []GuardInfo{}, Problems: []Problem{}}}
	rec := d.record()
	d.binary()
	d.fast(rec)
	d.paths(rec)
	d.diversions(rec)
	d.realShells()
	d.login(rec)
	p := d.policy()
	d.guards(rec, p)
	d.state()
	d.server()
	d.enforcement(p)
	d.machine(p)
	d.examples(p)
	return *d.rep, nil
}

func (d *doctor) record() *Record {
	rec, err := loadRecord(d.r)
	if err != nil {
		d.problem("%v", "compare with a fresh machine by hand; undoctl uninstall needs the record", err)
		return nil
	}
	if rec == nil {
		return nil
	}
	d.rep.Installed = true
	info := &RecordInfo{Path: RecordFile, Complete: rec.Complete, Time: rec.Time, Actions: len(rec.Actions)}
	for _, a := range rec.Actions {
		if a.Shell == "sh" {
			info.Sh = true
		}
		if a.Op == opShell {
			info.Users = append(info.Users, a.User)
		}
	}
	d.rep.Record = info
	if !rec.Complete {
		d.problem("the last undoctl install or uninstall was cut short (%s is not complete)", "run undoctl uninstall to put everything back, then undoctl install", RecordFile)
	}
	return rec
}

func (d *doctor) binary() {
	b := &d.rep.Binary
	b.Path = Binary
	h, err := d.r.target(Binary)
	if err != nil {
		return
	}
	if st, err := os.Stat(h); err == nil && st.Mode().IsRegular() {
		b.Present = true
		if bi, err := buildinfo.ReadFile(h); err == nil && strings.HasSuffix(bi.Path, "/cmd/undosh") {
			b.Undosh = true
			b.Version = strings.Trim(bi.Main.Version, "()")
		}
	}
	if !d.rep.Installed {
		return
	}
	switch {
	case !b.Present:
		d.problem("%s is missing: every command run through bash fails", "undoctl install --undosh PATH puts it back", Binary)
	case !b.Undosh:
		d.problem("%s is not undosh", "undoctl install --undosh PATH puts undosh back", Binary)
	}
}

func (d *doctor) fast(rec *Record) {
	f := &d.rep.Fast
	f.Path = FastBinary
	f.Installed = rec != nil && rec.hasFast()
	h, err := d.r.target(FastBinary)
	if err != nil {
		return
	}
	if st, err := os.Stat(h); err == nil && st.Mode().IsRegular() {
		f.Present = true
		f.OK = isFastFile(h)
	}
	if !f.Installed {
		return
	}
	fix := "undoctl install --fast PATH puts it back, or undoctl install --no-fast goes without it"
	switch {
	case !f.Present:
		d.problem("%s is missing: bash leads to nothing, every command run through it fails", fix, FastBinary)
	case !f.OK:
		d.problem("%s is not undosh-fast", fix, FastBinary)
	}
}

func (d *doctor) paths(rec *Record) {
	sh := d.rep.Record != nil && d.rep.Record.Sh
	for _, p := range append(append([]string{}, BashPaths...), ShPaths...) {
		if _, ok := d.r.entryOf(p); !ok {
			continue
		}
		info := PathInfo{Path: p, Undosh: d.r.isUndosh(p), Fast: d.r.isFast(p)}
		info.Is = d.r.describe(p)
		switch {
		case info.Fast:
			info.Is = "undosh through undosh-fast (" + info.Is + ")"
		case info.Undosh:
			info.Is = "undosh (" + info.Is + ")"
		}
		d.rep.Paths = append(d.rep.Paths, info)
		isSh := strings.HasSuffix(p, "/sh")
		switch {
		case rec == nil || info.Undosh:
		case !isSh:
			d.problem("%s is not undosh (%s): commands run through it are not protected",
				"a package upgrade or another program replaced it: run undoctl uninstall, then undoctl install", p, info.Is)
		case sh:
			d.problem("%s is not undosh (%s): sh scripts are not protected",
				"a dash upgrade puts /bin/sh back: run undoctl uninstall, then undoctl install --sh", p, info.Is)
		}
	}
	if rec == nil {
		what := "undosh is not installed"
		for _, p := range d.rep.Paths {
			if !p.Undosh && !strings.HasSuffix(p.Path, "/sh") {
				what += fmt.Sprintf(": %s is %s", p.Path, p.Is)
				break
			}
		}
		d.problem("%s", "undoctl install --undosh PATH (as root) makes undosh the shell", what)
	}
}

func (d *doctor) diversions(rec *Record) {
	dp, note := findDpkg(d.r)
	if note != "" && rec != nil {
		d.problem("%s", "install dpkg-divert, then run undoctl uninstall and undoctl install", note)
	}
	if dp == nil {
		return
	}
	seen := map[string]bool{}
	for _, p := range append(append([]string{}, BashPaths...), ShPaths...) {
		by, to, err := dp.diversion(p)
		if err != nil || by == "" {
			continue
		}
		seen[p] = true
		d.rep.Diversions = append(d.rep.Diversions, Diversion{Path: p, To: to, By: strings.ToLower(by)})
	}
	if rec == nil {
		return
	}
	for _, a := range rec.Actions {
		if a.Op == opDivert && !seen[a.Path] {
			d.problem("the diversion of %s to %s is gone: a %s upgrade will overwrite undosh",
				"run undoctl uninstall, then undoctl install", a.Path, a.Target, a.Shell)
			seen[a.Path] = true
		}
	}
	for _, p := range BashPaths {
		if seen[p] {
			continue
		}
		if pkg := dp.owner(p); pkg != "" {
			d.problem("%s belongs to package %s and is not diverted: a %s upgrade will overwrite undosh",
				"run undoctl uninstall, then undoctl install (it diverts the path the package owns)", p, pkg, pkg)
		}
	}
}

// realShells finds the real shells where shell.RealShell looks
// (realshell.Candidates), skipping anything that is undosh.
func (d *doctor) realShells() {
	for _, pers := range []string{"bash", "sh"} {
		rs := RealShell{Personality: pers}
		var config []byte
		if h, err := d.r.target(ConfigFile); err == nil {
			config, _ = os.ReadFile(h)
		}
		cands := realshell.Candidates(pers, d.getenv, config)
		var tried []string
		for _, c := range cands {
			tried = append(tried, c.Path)
			h, err := d.r.target(c.Path)
			if err != nil {
				continue
			}
			st, err := os.Stat(h)
			// undosh skips the front end too (undosh-fast names itself
			// in $UNDOSH_FRONT): it is never the real shell.
			if err != nil || st.IsDir() || st.Mode()&0o111 == 0 || d.r.isUndosh(c.Path) || isUndoshBinary(h) == nil || isFastFile(h) {
				continue
			}
			rs.Path, rs.From = c.Path, c.From
			rs.Is = d.whatShell(pers, c.Path, h)
			break
		}
		d.rep.Real = append(d.rep.Real, rs)
		if rs.Path == "" {
			d.problem("undosh cannot find the real %s (tried %s; each is missing, undosh or undosh-fast)",
				fmt.Sprintf("undoctl uninstall, then undoctl install, puts the real %s back in place", pers), pers, strings.Join(tried, ", "))
		}
	}
}

// whatShell says what the real shell at p (host path h) is, reading the
// file rather than running it: an image's programs are not run on this
// machine. A real bash that is not bash is a problem.
func (d *doctor) whatShell(pers, p, h string) string {
	t, _ := d.r.resolve(p, true)
	data, err := os.ReadFile(h)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if pers == "sh" {
		if t != p {
			return t
		}
		return filepath.Base(p)
	}
	if !bytes.Contains(data, []byte("GNU bash, version")) {
		d.problem("the real bash %s is not GNU bash", "point bash= in "+ConfigFile+" at the real bash", p)
		return "not bash"
	}
	v := "GNU bash"
	if _, rest, ok := bytes.Cut(data, []byte("@(#)Bash version ")); ok {
		if end := bytes.IndexAny(rest, " \x00"); end > 0 {
			v += " " + string(rest[:end])
		}
	}
	return v
}

func (d *doctor) login(rec *Record) {
	u, err := d.r.lookupUser(d.o.User, d.o.UID)
	if err != nil {
		if d.o.User != "" {
			d.problem("%v", "name a user of that root's passwd file", err)
		}
		return
	}
	d.rep.Login = &u
	d.rep.LoginIsUndosh = d.r.isLoginUndosh(u.Shell)
	if d.rep.LoginIsUndosh || rec == nil {
		return
	}
	set := false
	for _, a := range rec.Actions {
		if a.Op == opShell && a.User == u.Name {
			set = true
		}
	}
	if set || d.o.User != "" {
		d.problem("the login shell of %s is %s, not undosh: their logins and ssh commands are not protected",
			fmt.Sprintf("undoctl install --user %s", u.Name), u.Name, shellName(u.Shell))
	}
}

// policy finds and loads the policy undosh will use.
func (d *doctor) policy() *policy.Policy {
	pi := &d.rep.Policy
	switch {
	case d.o.Policy != "":
		pi.Path, pi.From = d.o.Policy, "--policy"
	case d.getenv("UNDOSH_POLICY") != "":
		pi.Path, pi.From = d.getenv("UNDOSH_POLICY"), "$UNDOSH_POLICY"
	}
	switch {
	case pi.Path == "-":
		pi.Path = "" // the embedded default, as classify.PolicyPath reads "-"
	case pi.Path != "":
	default:
		h, err := d.r.target("/etc/undosh/policy.yaml")
		if err == nil {
			if _, err := os.Stat(h); err == nil {
				pi.Path, pi.From = h, "/etc/undosh/policy.yaml"
			}
		}
	}
	if pi.Path == "" {
		pi.From = "embedded default"
	}
	p, err := classify.LoadPolicy(pi.Path, "")
	if err != nil {
		pi.Error = err.Error()
		fix := "fix the policy; undoctl policy check FILE lists every error"
		var le *policy.LoadError
		if errors.As(err, &le) && le.Hint != "" {
			fix = le.Hint
		}
		d.problem("the policy does not load, so undosh refuses every command (exit 2): %v", fix, err)
		return nil
	}
	pi.OK = true
	pi.Fallback = p.Host.Fallback
	return p
}

// MachineInfo says how machine steps run here, without a sandbox host.
type MachineInfo struct {
	// Engine is "root" (a copy of the machine as root), "rootless" (a
	// copy in a user namespace) or "" (none can run: Missing says why,
	// and Fallback, the policy's host.fallback for this user, applies).
	Engine   string `json:"engine,omitempty"`
	Missing  string `json:"missing,omitempty"`
	Fallback string `json:"fallback,omitempty"`
}

// machine says how machine steps run here: only a live machine is probed,
// as the user doctor looks at (a rootless copy is the user's).
func (d *doctor) machine(p *policy.Policy) {
	if p == nil || !d.r.live() || d.o.UID != os.Geteuid() {
		return
	}
	m := &d.rep.Machine
	if ok, why := machine.Engine(d.getenv); !ok {
		m.Missing, m.Fallback = why, p.Host.FallbackFor(d.o.UID)
		return
	}
	m.Engine = "root"
	if fork.Rootless() {
		m.Engine = "rootless"
	}
}

// enforcement says whether steps are held to their class, and how: the
// kernel's means are this machine's, so only a live root is probed.
func (d *doctor) enforcement(p *policy.Policy) {
	e := &d.rep.Enforcement
	if p == nil {
		return
	}
	e.On, e.From, e.Escalate = p.Enforce, "the policy's enforce", p.Escalate
	switch d.getenv("UNDOSH_ENFORCE") {
	case "1":
		e.On, e.From = true, "$UNDOSH_ENFORCE=1"
	case "0":
		e.On, e.From = false, "$UNDOSH_ENFORCE=0"
	}
	if !e.On || !d.r.live() {
		return
	}
	mode, ok, why := machine.Containment(d.getenv)
	if !ok {
		e.Missing = why
		d.problem("steps cannot be held to their class here (%s): read-only steps get a workspace checkpoint instead, and a workspace step that writes beyond its workspace is not caught",
			"run undosh as root (a mount namespace), or on Linux 5.13 or later with Landlock in lsm=", why)
		return
	}
	e.Mechanism, e.Is = mode.String(), machine.MechanismName(mode)
}

// state looks at the state directory of the user.
func (d *doctor) state() {
	si := &d.rep.State
	switch {
	case d.o.State != "":
		si.Dir = d.o.State
	case d.r.live() && d.o.User == "":
		si.Dir = state.Dir("", d.o.Getenv, d.o.UID)
	default:
		uid, home := d.o.UID, ""
		if d.rep.Login != nil {
			uid, home = d.rep.Login.UID, d.rep.Login.Home
		}
		if dir := state.Home(uid, home); dir != "" {
			si.Dir = d.r.host(dir)
		}
	}
	if si.Dir == "" {
		d.problem("no state directory: undosh refuses every command (exit 2)", "set UNDOSH_STATE_DIR, or give the user a home directory")
		return
	}
	st, err := os.Stat(si.Dir)
	if errors.Is(err, os.ErrNotExist) {
		// undosh creates it; the nearest existing parent must let it.
		dir := filepath.Dir(si.Dir)
		for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
			if _, err := os.Stat(dir); err == nil {
				break
			}
		}
		si.Writable = unix.Access(dir, unix.W_OK) == nil
		if !si.Writable {
			d.problem("the state directory %s does not exist and cannot be created (%s is not writable): undosh refuses every command (exit 2)",
				"create it, owned by the user, or set UNDOSH_STATE_DIR", si.Dir, dir)
		}
		return
	}
	if err != nil || !st.IsDir() {
		d.problem("the state directory %s is not a directory: undosh refuses every command (exit 2)", "remove it, or set UNDOSH_STATE_DIR", si.Dir)
		return
	}
	si.Exists = true
	si.Writable = unix.Access(si.Dir, unix.W_OK) == nil
	if !si.Writable {
		d.problem("the state directory %s is not writable: undosh refuses every command (exit 2)", "chown it to the user, or set UNDOSH_STATE_DIR", si.Dir)
	}
	_ = filepath.WalkDir(si.Dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				si.Bytes += info.Size()
			}
		}
		return nil
	})
	stores, _ := filepath.Glob(filepath.Join(si.Dir, "checkpoints", "*", "workspace.json"))
	si.Workspaces = len(stores)
	for _, s := range stores {
		si.Checkpoints += countCheckpoints(filepath.Dir(s))
	}
	si.Steps = countLines(filepath.Join(si.Dir, "journal.jsonl"))
}

// server says whether the front end's server serves the state directory.
// It asks the socket rather than trusting the pid file, which a server
// killed by a signal leaves behind.
func (d *doctor) server() {
	ci := &d.rep.Server
	if d.rep.State.Dir == "" {
		return
	}
	ci.Socket = state.SocketPath(d.rep.State.Dir)
	if len(ci.Socket) >= maxSocketPath && d.rep.Fast.Installed {
		d.problem("the server's socket %s is too long for a Unix socket: undosh-fast hands every step to undosh, which is slower",
			"set UNDOSH_STATE_DIR to a shorter path", ci.Socket)
	}
	ci.Running = serverAnswers(ci.Socket)
	if !ci.Running {
		return
	}
	if b, err := os.ReadFile(state.ServerFile(d.rep.State.Dir, "pid")); err == nil {
		ci.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	ci.MaxUserWatches = watch.MaxUserWatches()
	if a, err := watchd.Ask(ci.Socket, watchd.Request{Op: "status"}, 2*time.Second); err == nil {
		ci.Watches = a.Status
	}
	for _, w := range ci.Watches {
		if strings.HasPrefix(w.Full, "watch limit reached") {
			d.problem("the watcher of %s ran out of inotify watches (%s): every checkpoint there walks the whole workspace",
				"raise it: sysctl fs.inotify.max_user_watches=N (each watch costs the kernel about 1 KiB), or exclude large directories in the policy", w.Root, w.Full)
		}
	}
}

// maxSocketPath is the size of sun_path on Linux, with the final NUL.
const maxSocketPath = 108

// pingRequest is a request with no argv, in the front end's wire format
// (docs/front.md: its magic, the payload's length, then argc 0, envc 0,
// an empty cwd and an empty execfn): the server answers it ('U' and undosh's path)
// without deciding anything, so asking it is harmless and needs no
// credentials.
const pingRequest = "UNDOSHQ2\x10\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// serverAnswers reports whether the front end's server listens at sock
// and answers a request.
func serverAnswers(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return false
	}
	if _, err := io.WriteString(c, pingRequest); err != nil {
		return false
	}
	var verdict [1]byte
	if _, err := io.ReadFull(c, verdict[:]); err != nil {
		return false
	}
	return verdict[0] == 'U' || verdict[0] == 'E'
}

// countCheckpoints counts the checkpoints of one store by walking its
// chain, read-only, down to the oldest one gc kept (the layout of the
// checkpoint package: git/ holds refs/heads/checkpoints, boundary the
// oldest kept).
func countCheckpoints(store string) int {
	st := filesystem.NewStorage(osfs.New(filepath.Join(store, "git")), cache.NewObjectLRU(8<<20))
	ref, err := st.Reference(plumbing.NewBranchReferenceName("checkpoints"))
	if err != nil {
		return 0
	}
	var stop plumbing.Hash
	if b, err := os.ReadFile(filepath.Join(store, "boundary")); err == nil && plumbing.IsHash(strings.TrimSpace(string(b))) {
		stop = plumbing.NewHash(strings.TrimSpace(string(b)))
	}
	n := 0
	for h := ref.Hash(); !h.IsZero() && n < 1_000_000; {
		c, err := object.GetCommit(st, h)
		if err != nil {
			break
		}
		n++
		if h == stop || len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return n
}

// countLines counts the complete lines of a file (the journal's steps:
// one JSON line each; a torn last line does not count).
func countLines(name string) int {
	f, err := os.Open(name)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err != nil {
			return n
		}
	}
}

// examples says what undosh does with a file-changing and a
// machine-changing command under the policy in force.
func (d *doctor) examples(p *policy.Policy) {
	for _, ex := range doctorExamples {
		c := ExampleCheck{What: ex.what, Command: ex.cmd}
		if p == nil {
			c.Outcome = "refused: the policy does not load (undosh exits 2 before running anything)"
			d.rep.Examples = append(d.rep.Examples, c)
			continue
		}
		dec := classify.Decide(ex.cmd, classify.ExampleOptions(p)).Decision
		c.Class = dec.Class.String()
		c.Outcome = outcome(p, dec, d.o.UID)
		d.rep.Examples = append(d.rep.Examples, c)
	}
}

// outcome says in a few words what undosh does with a decision.
func outcome(p *policy.Policy, dec policy.Decision, uid int) string {
	if dec.Verdict == policy.Deny {
		for _, r := range dec.Reasons {
			if r.Verdict == policy.Deny {
				why := r.Message
				if why == "" {
					why = r.Text
				}
				return fmt.Sprintf("refused by rule %s: %s", r.Rule, why)
			}
		}
		return "refused"
	}
	var s string
	switch dec.Class {
	case policy.None:
		s = "runs straight through (reads only)"
	case policy.Git:
		s = "checkpoint of the workspace first, rolled back if it fails"
		if dec.Rollback == policy.RollbackNever {
			s = "checkpoint of the workspace first, kept if it fails (rollback: never)"
		}
	default:
		local := "runs in a copy of this machine (the local fork engine), committed only if it and verify pass"
		if err := fork.Probe(); err != nil {
			local = "refused: no sandbox host, and " + err.Error() + " (host.fallback: deny)"
			if p.Host.FallbackFor(uid) == "git" {
				local = "workspace checkpoint only: no fork engine can run here, the machine change stays (host.fallback: git)"
			}
		}
		s = local
		if p.Host.Address != "" {
			s = "sent to the sandbox host " + hostlink.HostName(p.Host.Address) + " to run in a fork of the sandbox; if it does not answer: " + local
		}
	}
	if dec.Verdict == policy.Constrain && dec.Condition != "" {
		s += "; only if " + dec.Condition
	}
	return s
}
