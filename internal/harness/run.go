package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/fork"
)

// Modes of a run.
const (
	Plain  = "plain"  // /bin/bash is the real bash: the control
	Undosh = "undosh" // /bin/bash is undosh-fast, as undoctl install makes it
)

// InnerEnv names the spec file of a run in the environment of the process
// [Run] starts in the run's namespaces: the test binary, started again,
// which calls [Inner] when it finds it.
const InnerEnv = "UNDOSH_HARNESS_INNER"

// User is who the harness runs as; the zero value is root.
type User struct {
	Name string `json:"name,omitempty"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
}

// Root reports whether u is root.
func (u User) Root() bool { return u.UID == 0 }

// Label is "root" or "non-root", for tables.
func (u User) Label() string {
	if u.Root() {
		return "root"
	}
	return "non-root"
}

// Spec says what one run is: which harness, with which bash, as whom.
// Every path in it must be reachable by User.
type Spec struct {
	Client string `json:"client"`
	Mode   string `json:"mode"`
	User   User   `json:"user"`
	// Dir is the run's own directory (made by [Run]): the project, the
	// home, the state directory, the logs and the outcome go there.
	Dir string `json:"dir"`
	// Bin holds undosh, undosh-fast and undoctl.
	Bin string `json:"bin"`
	// RealBash is a copy of bash that is not the front end.
	RealBash string `json:"real_bash"`
	// Prefix is the npm prefix the harnesses are installed in.
	Prefix  string        `json:"prefix"`
	Script  []string      `json:"script"`
	Timeout time.Duration `json:"timeout"`
	// InHome puts the project under /home, where a developer's is: in
	// the user's home (/home/NAME/proj), or /home/proj for root, on the
	// run's tmpfs over /home. Otherwise it is in the run's directory.
	InHome bool `json:"in_home,omitempty"`
	// Bench, when above zero, is how many times an undosh run times the
	// harness's wrapper around a read-only command after the session,
	// with undosh and with the real bash ([Bench]).
	Bench int `json:"bench,omitempty"`
}

// Outcome is what one run did.
type Outcome struct {
	Spec    Spec     `json:"spec"`
	Results []Result `json:"results"`
	// Bench is the harness's wrapper timed without the harness (undosh
	// runs with Spec.Bench set).
	Bench *Bench `json:"bench,omitempty"`
	// Started and Wall are when the harness started and how long it ran.
	Started  time.Time     `json:"started"`
	Wall     time.Duration `json:"wall_ns"`
	Exit     int           `json:"exit"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Journal  []Record      `json:"journal,omitempty"`
	// IndexJS and Src are the project's index.js and whether src/ is
	// there, after the run.
	IndexJS string `json:"index_js"`
	Src     bool   `json:"src"`
	// RemoteBefore and RemoteAfter are the remote's main before and after.
	RemoteBefore string `json:"remote_before"`
	RemoteAfter  string `json:"remote_after"`
	// Etc lists what changed in /etc during the run ("+path", "-path",
	// "~path"), before the clean-up.
	Etc []string `json:"etc,omitempty"`
	// Netns is the inode of the run's network namespace.
	Netns uint64 `json:"netns"`
	// Swept lists the processes that were still in the namespace when
	// the harness had exited, and were killed.
	Swept []string `json:"swept,omitempty"`
	// Scaffolds are the harness scaffolds undosh kept (wrappers/ in the
	// state directory), by id, with the command's place marked
	// [ScaffoldMark].
	Scaffolds    map[string]string `json:"scaffolds,omitempty"`
	ServerErrors []string          `json:"server_errors,omitempty"`
	Requests     int               `json:"requests"`
}

// Record is the part of an undosh journal record the suite reads.
type Record struct {
	ID       int       `json:"id"`
	Time     time.Time `json:"time"`
	Duration float64   `json:"duration_ms"`
	Command  string    `json:"command"`
	Class    string    `json:"class"`
	Verdict  string    `json:"verdict"`
	Parent   int       `json:"parent,omitempty"`
	Exit     int       `json:"exit"`
	Outcome  string    `json:"outcome"`
	Notice   string    `json:"notice,omitempty"`
	// Wrapper is set when undosh recognised a harness's scaffolding
	// around the command: Command is then the command alone, and the
	// scaffold is in the state directory (Outcome.Scaffolds).
	Wrapper *struct {
		Harness  string `json:"harness"`
		Scaffold string `json:"scaffold"`
	} `json:"wrapper,omitempty"`
}

// Run runs spec in a new mount and network namespace (only lo, up), by
// starting self (the test binary) again with [InnerEnv] set, and returns
// its outcome. Whatever happens, it removes the story's files in /etc
// and kills every process left in the run's network namespace.
func Run(ctx context.Context, self string, spec Spec) (Outcome, error) {
	defer removeEtc()
	specPath := filepath.Join(spec.Dir, "spec.json")
	b, err := json.Marshal(spec)
	if err != nil {
		return Outcome{}, fmt.Errorf("encode spec: %w", err)
	}
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return Outcome{}, fmt.Errorf("write spec: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), InnerEnv+"="+specPath)
	log, err := os.Create(filepath.Join(spec.Dir, "inner.log"))
	if err != nil {
		return Outcome{}, fmt.Errorf("run %s: %w", spec.Client, err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWNET,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		return Outcome{}, fmt.Errorf("start the run's namespaces: %w", err)
	}
	netns, nsErr := nsInode(cmd.Process.Pid)
	runErr := cmd.Wait()
	var swept []string
	if nsErr == nil {
		swept = sweep(netns, -1)
	}
	out, err := readOutcome(filepath.Join(spec.Dir, "outcome.json"))
	if err != nil {
		tail, _ := os.ReadFile(log.Name())
		return Outcome{}, fmt.Errorf("run %s %s: %v: %w\n%s", spec.Client, spec.Mode, runErr, err, lastLines(tail, 20))
	}
	if len(swept) > 0 {
		out.Swept = append(out.Swept, swept...)
		return out, fmt.Errorf("processes left in the run's namespace after it ended (killed): %v", swept)
	}
	return out, nil
}

func readOutcome(path string) (Outcome, error) {
	var out Outcome
	b, err := os.ReadFile(path)
	if err != nil {
		return out, fmt.Errorf("read outcome: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decode outcome: %w", err)
	}
	return out, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// removeEtc removes the files the story's machine steps write in /etc.
func removeEtc() {
	os.Remove(EtcTest)
	os.Remove(EtcKept)
}

// nsInode returns the inode of pid's network namespace.
func nsInode(pid int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		return 0, fmt.Errorf("network namespace of %d: %w", pid, err)
	}
	return st.Ino, nil
}

// sweep kills, by pid, every process in the network namespace netns but
// self, until none is left (at most a few rounds), and names them.
func sweep(netns uint64, self int) []string {
	var killed []string
	for range 20 {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return append(killed, "read /proc: "+err.Error())
		}
		n := 0
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self || pid == os.Getpid() {
				continue
			}
			if ino, err := nsInode(pid); err != nil || ino != netns {
				continue
			}
			if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); zombie(stat) {
				continue // gone already; killing its parent reaps it
			}
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			c := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
			if c == "" {
				// Exiting (its memory is gone): killed all the same, not named.
				syscall.Kill(pid, syscall.SIGKILL)
				continue
			}
			if len(c) > 120 {
				c = c[:120] + "…"
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
				if !slices.Contains(killed, c) {
					killed = append(killed, c)
				}
			}
		}
		if n == 0 {
			return killed
		}
		time.Sleep(50 * time.Millisecond) // let the killed be reaped
	}
	return killed
}

// zombie reports whether /proc/PID/stat says the process has exited
// and waits for its parent to reap it.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// Inner carries out the run whose spec is at specPath, in the namespaces
// [Run] made: it makes the mounts private, brings lo up, puts undosh-fast
// at /usr/bin/bash (an overlay, in [Undosh] mode), serves the scripted
// model on 127.0.0.1, makes the project, runs the harness, and writes the
// outcome next to the spec. It returns the exit status for the process.
func Inner(specPath string) int {
	var spec Spec
	b, err := os.ReadFile(specPath)
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: error: read spec: %v\n", err)
		return 2
	}
	out, err := inner(spec)
	out.Spec = spec
	b, jerr := json.MarshalIndent(out, "", "  ")
	if jerr == nil {
		jerr = os.WriteFile(filepath.Join(spec.Dir, "outcome.json"), b, 0o644)
	}
	if err != nil || jerr != nil {
		fmt.Fprintf(os.Stderr, "harness: error: %v %v\n", err, jerr)
		return 1
	}
	return 0
}

func inner(spec Spec) (out Outcome, err error) {
	defer removeEtc()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return out, fmt.Errorf("make mounts private: %w", err)
	}
	if err := fork.LoopbackUp(); err != nil {
		return out, err
	}
	if out.Netns, err = nsInode(os.Getpid()); err != nil {
		return out, err
	}
	defer func() { out.Swept = sweep(out.Netns, os.Getpid()) }()
	if spec.Mode == Undosh {
		if err := overlayBash(spec); err != nil {
			return out, err
		}
	}
	client, ok := clientNamed(spec.Client)
	if !ok {
		return out, fmt.Errorf("no client %q", spec.Client)
	}

	// The model, on loopback in this namespace.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return out, fmt.Errorf("listen: %w", err)
	}
	reqLog, err := os.Create(filepath.Join(spec.Dir, "requests.jsonl"))
	if err != nil {
		return out, fmt.Errorf("request log: %w", err)
	}
	defer reqLog.Close()
	srv := &Server{Script: spec.Script, Log: reqLog}
	keep := filepath.Join(spec.Dir, "snapshots")
	home := filepath.Join(spec.Dir, "home")
	srv.OnDone = func() { keepSnapshots(home, keep) }
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	// The home is made in the run's directory, then mounted where a
	// real one is (/root, /home/NAME): Codex, for one, will not put its
	// helpers in a home under /tmp. The project is in the run's
	// directory, not under /root, which the policy holds to be the
	// machine's (its writes would all be machine steps).
	state := filepath.Join(spec.Dir, "state")
	for _, d := range []string{home, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return out, fmt.Errorf("make %s: %w", d, err)
		}
	}
	if err := copySkel(home); err != nil {
		return out, err
	}
	proj, err := WriteProject(spec.Dir, spec.Dir)
	if err != nil {
		return out, err
	}
	remote := filepath.Join(spec.Dir, "remote.git")
	out.RemoteBefore = revParse(remote, "main")
	homeIn, err := mountHome(home, spec.User)
	if err != nil {
		return out, err
	}
	if spec.InHome {
		if proj, err = mountProject(proj, homeIn, spec.User); err != nil {
			return out, err
		}
	}
	args, cenv, err := client.Setup(homeIn, port, Prompt)
	if err != nil {
		return out, err
	}
	if !spec.User.Root() {
		for _, d := range []string{home, state, proj, remote} {
			if err := chownTree(d, spec.User.UID, spec.User.GID); err != nil {
				return out, err
			}
		}
	}

	etcBefore, err := snapshotEtc()
	if err != nil {
		return out, err
	}
	cmd := exec.Command(filepath.Join(spec.Prefix, "node_modules", ".bin", client.Bin), args...)
	cmd.Dir = proj
	name := spec.User.Name
	if spec.User.Root() {
		name = "root"
	}
	cmd.Env = append([]string{
		"PATH=" + filepath.Join(spec.Prefix, "node_modules", ".bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + homeIn, "USER=" + name, "LOGNAME=" + name,
		"SHELL=/bin/bash", "LANG=C.UTF-8", "TERM=dumb",
		"UNDOSH_STATE_DIR=" + state, "UNDOSH_REAL_BASH=" + spec.RealBash,
	}, cenv...)
	stdout, err := os.Create(filepath.Join(spec.Dir, "stdout"))
	if err != nil {
		return out, fmt.Errorf("harness output: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(spec.Dir, "stderr"))
	if err != nil {
		return out, fmt.Errorf("harness output: %w", err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Pdeathsig: should this process die, the harness goes too (what it
	// started is swept by Run, in the test process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if !spec.User.Root() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(spec.User.UID), Gid: uint32(spec.User.GID)}
	}
	out.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return out, fmt.Errorf("start %s: %w", client.Bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(spec.Timeout):
		out.TimedOut = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-done
	}
	out.Wall = time.Since(out.Started)
	if ee := (*exec.ExitError)(nil); errors.As(werr, &ee) {
		out.Exit = ee.ExitCode()
	} else if werr != nil {
		return out, fmt.Errorf("run %s: %w", client.Bin, werr)
	}
	// What the harness left running in its process group goes first,
	// then whatever else is in the namespace (the deferred sweep).
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	out.Results = srv.Results()
	out.ServerErrors = srv.Errors()
	out.Requests = srv.Requests()
	etcAfter, err := snapshotEtc()
	if err != nil {
		return out, err
	}
	out.Etc = diffEtc(etcBefore, etcAfter)
	if out.Journal, err = readJournal(filepath.Join(state, "journal.jsonl")); err != nil {
		return out, err
	}
	out.Scaffolds = readScaffolds(filepath.Join(state, "wrappers"))
	idx, err := os.ReadFile(filepath.Join(proj, "index.js"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return out, fmt.Errorf("read index.js: %w", err)
	}
	out.IndexJS = string(idx)
	if _, err := os.Stat(filepath.Join(proj, "src")); err == nil {
		out.Src = true
	}
	out.RemoteAfter = revParse(remote, "main")
	if spec.Mode == Undosh && spec.Bench > 0 {
		if tmpl, ok := wrapperOf(spec.Script, out.Results, out.Journal, out.Scaffolds); ok {
			restoreSnapshots(home, keep, spec.User)
			b := bench(tmpl, spec.Bench, cmd.Env, proj, cmd.SysProcAttr.Credential, state)
			out.Bench = &b
		}
	}
	return out, nil
}

func clientNamed(name string) (Client, bool) {
	for _, c := range Clients {
		if c.Name == name {
			return c, true
		}
	}
	return Client{}, false
}

// overlayBash mounts an overlay on /usr/bin (in this mount namespace
// only) whose upper layer holds bash -> undosh-fast, the layout undoctl
// install makes: undosh-fast finds undosh next to its own path. /bin is
// usr/bin on a merged-/usr system, so /bin/bash is covered too.
func overlayBash(spec Spec) error {
	upper := filepath.Join(spec.Dir, "usrbin", "upper")
	work := filepath.Join(spec.Dir, "usrbin", "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("overlay on /usr/bin: %w", err)
		}
	}
	fast := filepath.Join(spec.Bin, "undosh-fast")
	if err := os.Symlink(fast, filepath.Join(upper, "bash")); err != nil {
		return fmt.Errorf("overlay on /usr/bin: %w", err)
	}
	opts := fmt.Sprintf("lowerdir=/usr/bin,upperdir=%s,workdir=%s", upper, work)
	if err := unix.Mount("overlay", "/usr/bin", "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay on /usr/bin: %w", err)
	}
	for _, p := range []string{"/usr/bin/bash", "/bin/bash"} {
		if got, err := filepath.EvalSymlinks(p); err != nil || got != fast {
			return fmt.Errorf("overlay on /usr/bin: %s is %q (%v), want %s", p, got, err, fast)
		}
	}
	return nil
}

// mountHome mounts home where u's home is, in this mount namespace:
// /root, or /home/NAME on a tmpfs over /home (so that nothing is made on
// the machine's /home). It returns that path.
func mountHome(home string, u User) (string, error) {
	at := "/root"
	if !u.Root() {
		if err := unix.Mount("tmpfs", "/home", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
			return "", fmt.Errorf("mount a tmpfs on /home: %w", err)
		}
		at = filepath.Join("/home", u.Name)
		if err := os.Mkdir(at, 0o755); err != nil {
			return "", fmt.Errorf("make %s: %w", at, err)
		}
	}
	if err := unix.Mount(home, at, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("mount the run's home on %s: %w", at, err)
	}
	return at, nil
}

// mountProject mounts the project proj under /home ([Spec].InHome), in
// this mount namespace, and returns where.
func mountProject(proj, homeIn string, u User) (string, error) {
	at := filepath.Join(homeIn, "proj")
	if u.Root() {
		if err := unix.Mount("tmpfs", "/home", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
			return "", fmt.Errorf("mount a tmpfs on /home: %w", err)
		}
		at = "/home/proj"
	}
	if err := os.Mkdir(at, 0o755); err != nil {
		return "", fmt.Errorf("make %s: %w", at, err)
	}
	if err := unix.Mount(proj, at, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("mount the project on %s: %w", at, err)
	}
	return at, nil
}

// copySkel puts the distribution's start-up files (/etc/skel) in home,
// as useradd -m would.
func copySkel(home string) error {
	ents, err := os.ReadDir("/etc/skel")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read /etc/skel: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/etc/skel", e.Name()))
		if err != nil {
			return fmt.Errorf("copy /etc/skel: %w", err)
		}
		if err := os.WriteFile(filepath.Join(home, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("copy /etc/skel: %w", err)
		}
	}
	return nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
		return nil
	})
}

// etcEntry is what snapshotEtc keeps of a path under /etc.
type etcEntry struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	link  string
}

func snapshotEtc() (map[string]etcEntry, error) {
	m := map[string]etcEntry{}
	err := filepath.WalkDir("/etc", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone since it was listed
		}
		e := etcEntry{mode: info.Mode(), size: info.Size(), mtime: info.ModTime()}
		if info.IsDir() {
			e.size, e.mtime = 0, time.Time{} // a directory's own times follow its entries
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			e.link, _ = os.Readlink(p)
		}
		m[p] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list /etc: %w", err)
	}
	return m, nil
}

func diffEtc(before, after map[string]etcEntry) []string {
	var out []string
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			out = append(out, "+"+p)
		case a != b:
			out = append(out, "~"+p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, "-"+p)
		}
	}
	slices.Sort(out)
	return out
}

// ScaffoldMark stands for the command in a scaffold undosh kept (the
// parser's CommandMark).
const ScaffoldMark = "{{command}}"

// readScaffolds reads the scaffolds undosh kept in dir, by id.
func readScaffolds(dir string) map[string]string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	m := map[string]string{}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".sh"); ok {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
				m[id] = string(b)
			}
		}
	}
	return m
}

// readJournal reads an undosh journal; a missing one is empty (no step
// was protected).
func readJournal(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r Record
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			recs = append(recs, r)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	return recs, nil
}
