package fork

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/procs"
)

// Init is the copy's pid 1. A main whose argv[0] (base name) is
// [InitName] must call it first thing and exit with its result. It reads
// its instructions from fd 3, builds the copy's view of the machine (see
// docs/fork.md, "A session", for the sequence), runs the session as its
// child, reaps every process, writes a report to fd 4 and returns the
// session's exit status (128+n for signal n), or 125 when it could not
// build the copy or start the session. It refuses to do anything unless
// it is pid 1 of a new pid namespace and in a mount namespace of its own.
func Init() int {
	// Capabilities are per thread: drop them on the thread that forks the
	// session, and keep every namespace call on it.
	runtime.LockOSThread()
	start := time.Now()
	// Run gives pipes on both; anything else is somebody starting the
	// init by hand, and fd 4 may then be a file not to write to.
	for _, fd := range []int{specFD, reportFD} {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			fmt.Fprintln(os.Stderr, InitName+": must be started by fork.Run")
			return 125
		}
	}
	unix.CloseOnExec(specFD)
	unix.CloseOnExec(reportFD)
	rep := os.NewFile(reportFD, "report")
	report := func(r initReport) {
		_, _ = rep.Write(r.encode())
		rep.Close()
	}
	fail := func(err error) int {
		r := initReport{Error: err.Error()}
		var nf *notFoundError
		if errors.As(err, &nf) {
			r.NotFound = true
		}
		report(r)
		return 125
	}
	spec, err := readSpec()
	if err != nil {
		return fail(err)
	}
	if err := checkInit(spec); err != nil {
		return fail(err)
	}
	if err := enter(spec); err != nil {
		return fail(err)
	}
	path := spec.Path
	if path == "" {
		var err error
		if path, err = lookPath(spec.Argv[0], spec.Env); err != nil {
			return fail(err)
		}
	}
	if st, err := os.Stat(spec.Dir); err != nil || !st.IsDir() {
		return fail(fmt.Errorf("working directory %s: not a directory in the copy", spec.Dir))
	}
	setup := time.Since(start)
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: spec.Env, Files: []uintptr{0, 1, 2}}
	if u := spec.User; u != nil {
		cred := &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}
		for _, g := range u.Groups {
			cred.Groups = append(cred.Groups, uint32(g))
		}
		attr.Sys = &syscall.SysProcAttr{Credential: cred}
	}
	pid, err := syscall.ForkExec(path, spec.Argv, attr)
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", spec.Argv[0], err))
	}
	// Catch the terminal's signals, to pass some on: as pid 1, Go's
	// default (exit) would end the whole copy on a ^C that the session
	// handles itself. Done once the session runs, being off the critical
	// path (Notify starts a thread); until then a ^C ends the copy.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM, unix.SIGHUP)
	go func() {
		for s := range sigs {
			// ^C and ^\ from the terminal reach the session directly.
			if s == unix.SIGTERM || s == unix.SIGHUP {
				_ = unix.Kill(pid, s.(syscall.Signal))
			}
		}
	}()
	r := initReport{SetupNS: int64(setup)}
	for {
		var ws unix.WaitStatus
		p, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("wait for the session: %w", err))
		}
		if p != pid {
			continue // an orphan the session left
		}
		switch {
		case ws.Exited():
			r.Status = ws.ExitStatus()
		case ws.Signaled():
			r.Signal = int(ws.Signal())
			r.Status = 128 + r.Signal
		}
		break
	}
	if !spec.Leftovers || !anyLeft() {
		// Returning ends pid 1, and the kernel kills whatever the
		// session left running.
		report(r)
		return r.Status
	}
	time.Sleep(LeftoverSettle)
	r.Leftovers = leftovers()
	if n := len(r.Leftovers); n > MaxLeftovers {
		r.Leftovers, r.Unread = r.Leftovers[:MaxLeftovers], n-MaxLeftovers
	}
	for len(r.Leftovers) > 0 && len(r.encode()) > maxReport {
		r.Leftovers, r.Unread = r.Leftovers[:len(r.Leftovers)-1], r.Unread+1
	}
	// The report goes first: Run stops counting the session's timeout
	// once it has it.
	report(r)
	endLeftovers()
	return r.Status
}

// anyLeft reaps the orphans that have ended and reports whether any
// process other than the init is left in its pid namespace: every one
// descends from the init, so none is left when it has no child.
func anyLeft() bool {
	for {
		var ws unix.WaitStatus
		p, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil: // ECHILD
			return false
		case p == 0:
			return true
		}
	}
}

// leftovers reads the processes of the init's pid namespace, but the
// init, parents first. The copy's /proc is its own but where a user
// namespace could not mount one (rootless, in some containers): there
// it is the host's, and only the processes in the init's pid namespace
// count, under their pids on the host.
func leftovers() []procs.Proc {
	anyLeft() // reap what ended while it settled
	all, err := procs.List()
	if err != nil {
		return nil
	}
	self, _ := os.Readlink("/proc/self")
	ns, nsErr := os.Readlink("/proc/self/ns/pid")
	var out []procs.Proc
	for _, p := range all {
		if strconv.Itoa(p.PID) == self {
			continue
		}
		if self != "1" {
			theirs, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/ns/pid")
			if nsErr != nil || err != nil || theirs != ns {
				continue
			}
		}
		out = append(out, p)
	}
	// Parents first: by start time, then pid.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].PID < out[j].PID
	})
	return out
}

// endLeftovers ends every process of the init's pid namespace but the
// init: SIGTERM and SIGCONT (a stopped process handles SIGTERM only once
// it runs), then SIGKILL to those left after LeftoverGrace. It reaps
// them as they end, and returns when none is left. kill(-1) from a pid
// namespace's init reaches exactly the other processes of the namespace.
func endLeftovers() {
	_ = unix.Kill(-1, unix.SIGTERM)
	_ = unix.Kill(-1, unix.SIGCONT)
	t := time.AfterFunc(LeftoverGrace, func() { _ = unix.Kill(-1, unix.SIGKILL) })
	defer t.Stop()
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: none left
			return
		}
	}
}

// checkInit refuses to run outside a copy: as anything but pid 1, or in
// the mount namespace of the process that ran it, the mounts below would
// change the host.
func checkInit(s *initSpec) error {
	if os.Getpid() != 1 {
		return errors.New(InitName + " must be started by fork.Run (it is not pid 1)")
	}
	self, err := os.Readlink("/proc/thread-self/ns/mnt")
	if err != nil || self == s.HostMountNS {
		return errors.New(InitName + " must be started by fork.Run (no mount namespace of its own)")
	}
	return nil
}

func readSpec() (*initSpec, error) {
	f := os.NewFile(specFD, "spec")
	if f == nil {
		return nil, errors.New("no instructions on fd 3")
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read instructions: %w", err)
	}
	s, err := decodeSpec(b)
	if err != nil {
		return nil, fmt.Errorf("read instructions: %w", err)
	}
	if len(s.Argv) == 0 || len(s.Layers) == 0 || s.Layers[0].Mount != "/" || !filepath.IsAbs(s.Root) {
		return nil, errors.New("read instructions: incomplete")
	}
	return s, nil
}

// enter builds the copy's view and moves into it. The order matters: the
// host's /dev is needed until the pivot, and the capabilities go last. A
// rootless copy (rootless.go) binds its skeleton as the root first, gets
// its overlays with userxattr, its read-only files, and falls back to the
// host's /proc and /sys where its user namespace may not mount them anew.
func enter(s *initSpec) error {
	// Nothing below may propagate to the host (a systemd host shares /).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	layers, opts, where, hint, pts := s.Layers, overlayOpts, "", "", devptsOpts
	if s.Rootless {
		skel := s.Layers[skeletonLayer].Upper
		if err := unix.Mount(skel, s.Root, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind the copy's root: %w", err)
		}
		layers, opts, where, hint, pts = s.Layers[1:], rootlessOverlayOpts, " in a user namespace", " (run `undoctl doctor`)", rootlessPtsOpts
	}
	for _, l := range layers {
		if err := mountLayer(s.Root, l, opts); err != nil {
			return fmt.Errorf("mount the overlay of %s%s: %w%s", l.Mount, where, err, hint)
		}
	}
	for _, p := range s.Binds {
		if err := readOnlyFile(p, filepath.Join(s.Root, p)); err != nil {
			return err
		}
	}
	if err := mountProc(s.Root); err != nil {
		// A /proc with something mounted over part of it (a container's
		// masks) may not be mounted again in a user namespace: the
		// host's, whose pids the step then sees.
		if !s.Rootless {
			return err
		}
		if err := rbind("/proc", filepath.Join(s.Root, "proc")); err != nil {
			return err
		}
	}
	sys := filepath.Join(s.Root, "sys")
	if err := mountOn("sysfs", sys, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		if !s.Rootless {
			return err
		}
		if err := rbind("/sys", sys); err != nil {
			return err
		}
	}
	if err := mountDev(s.Root, pts); err != nil {
		return err
	}
	if s.Rootless {
		// Root's copy shows the root filesystem's /run; a rootless one,
		// whose skeleton has only the directory, its own.
		if err := mountOn("tmpfs", filepath.Join(s.Root, "run"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
			return err
		}
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return fmt.Errorf("set the host name: %w", err)
	}
	if err := LoopbackUp(); err != nil {
		return err
	}
	if err := pivot(s.Root); err != nil {
		return err
	}
	return dropCaps()
}

// The options of a copy's overlays: no redirects, metacopy, index or
// xino, which a commit could not read back. A rootless copy's say
// userxattr: overlayfs keeps its marks in user.overlay.*, the only xattrs
// a user namespace may write (it rules out redirect_dir=off, which means
// follow).
const (
	overlayOpts         = "redirect_dir=off,metacopy=off,index=off,xino=off"
	rootlessOverlayOpts = "userxattr,redirect_dir=nofollow,metacopy=off,index=off,xino=off"
)

// mountLayer mounts layer l of the copy whose root is at root, with the
// overlay options opts. A layer whose directory was unmounted and removed
// from the machine since the copy was planned is left out: the copy has
// no such path either, and its layer stays empty.
func mountLayer(root string, l specLayer, opts string) error {
	target := filepath.Join(root, l.Mount)
	data := "lowerdir=" + escapeOverlay(l.Mount) +
		",upperdir=" + escapeOverlay(l.Upper) +
		",workdir=" + escapeOverlay(l.Work) + "," + opts
	flags := uintptr(unix.MS_NODEV)
	if l.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	err := unix.Mount(mountSource, target, "overlay", flags, data)
	if _, gone := os.Lstat(l.Mount); err != nil && l.Mount != "/" && errors.Is(err, unix.ENOENT) && errors.Is(gone, os.ErrNotExist) {
		return nil
	}
	return err
}

// readOnlyFile bind-mounts the real file src on dst, read-only. The
// remount keeps the flags the user namespace may not clear (nosuid,
// nodev, noexec of the real mount).
func readOnlyFile(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(src, &sfs); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for st, ms := range map[int64]uintptr{unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC} {
		if sfs.Flags&st != 0 {
			flags |= ms
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}

// rbind binds the host's tree src on dst, as it is.
func rbind(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

// mountOn mounts on dir, making dir first if the copy has none.
func mountOn(source, dir, fstype string, flags uintptr, data string) error {
	err := unix.Mount(source, dir, fstype, flags, data)
	if errors.Is(err, unix.ENOENT) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("mount %s: %w", fstype, err)
		}
		err = unix.Mount(source, dir, fstype, flags, data)
	}
	if err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, dir, err)
	}
	return nil
}

// mountProc mounts the copy's own /proc, with the files that reach the
// whole machine read-only or masked.
func mountProc(root string) error {
	proc := filepath.Join(root, "proc")
	if err := mountOn("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	for _, name := range []string{"sys", "irq", "bus", "sysrq-trigger"} {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue // sysrq-trigger is absent on some kernels
		}
		if err := readOnlyBind(p); err != nil {
			return err
		}
	}
	for _, name := range []string{"kcore", "timer_list"} {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask %s: %w", p, err)
		}
	}
	return nil
}

// readOnlyBind makes p a read-only bind mount of itself.
func readOnlyBind(p string) error {
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("", p, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", p, err)
	}
	return nil
}

// devptsOpts are the options of a copy's devpts: its own instance, ttys
// of the tty group (5). A rootless copy has no group 5 (rootlessPtsOpts).
const (
	devptsOpts      = "newinstance,ptmxmode=0666,mode=0620,gid=5"
	rootlessPtsOpts = "newinstance,ptmxmode=0666,mode=0620"
)

// devNodes are the host's devices a copy gets, bind-mounted.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// mountDev gives the copy a minimal /dev: a nodev tmpfs with the harmless
// devices bind-mounted from the host, its own devpts, shm and mqueue.
func mountDev(root, ptsOpts string) error {
	dev := filepath.Join(root, "dev")
	if err := mountOn("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, n := range devNodes {
		p := filepath.Join(dev, n)
		if err := unix.Mknod(p, unix.S_IFREG|0o666, 0); err != nil {
			return fmt.Errorf("make %s: %w", p, err)
		}
		if err := unix.Mount("/dev/"+n, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	for _, d := range []string{"pts", "shm", "mqueue"} {
		if err := unix.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return fmt.Errorf("make /dev/%s: %w", d, err)
		}
	}
	if err := mountOn("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, ptsOpts); err != nil {
		return err
	}
	if err := mountOn("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return err
	}
	if err := mountOn("mqueue", filepath.Join(dev, "mqueue"), "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"ptmx":   "pts/ptmx",
		"fd":     "/proc/self/fd",
		"stdin":  "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("make /dev/%s: %w", name, err)
		}
	}
	return nil
}

// LoopbackUp brings lo up in this network namespace (SIOCSIFFLAGS, as
// ip link set lo up does): the copy's only network.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// pivot makes root the root and detaches the old one, after which no path
// of the real root is reachable.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("pivot: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("pivot: detach the old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("pivot: %w", err)
	}
	return nil
}

// droppedCaps are the capabilities no process of a copy has: those that
// reach the kernel or the machine beyond the copy's namespaces.
var droppedCaps = []int{
	unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO,
	unix.CAP_SYS_BOOT, unix.CAP_SYS_TIME, unix.CAP_SYSLOG,
	unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE, unix.CAP_AUDIT_CONTROL,
	unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_SYS_PACCT,
	unix.CAP_LINUX_IMMUTABLE, unix.CAP_WAKE_ALARM, unix.CAP_BLOCK_SUSPEND,
}

// dropCaps removes droppedCaps from this thread's bounding, inheritable,
// permitted and effective sets, and clears the ambient set, so that
// neither the init nor anything it execs has them.
func dropCaps() error {
	for _, c := range droppedCaps {
		// EINVAL: a capability this kernel does not know.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	for _, c := range droppedCaps {
		bit := uint32(1) << (c % 32)
		d := &data[c/32]
		d.Effective &^= bit
		d.Permitted &^= bit
		d.Inheritable &^= bit
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	return nil
}

// escapeOverlay escapes a path for overlayfs's mount options, where a
// comma separates options and a colon lower directories.
func escapeOverlay(p string) string {
	if !strings.ContainsAny(p, `\,:`) {
		return p
	}
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`).Replace(p)
}

// notFoundError is a command that is not in the copy's PATH.
type notFoundError struct{ name string }

func (e *notFoundError) Error() string { return e.name + ": command not found in the copy" }

// lookPath finds file as execve would after a shell's PATH search, in the
// session's environment.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathVar := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for dir := range strings.SplitSeq(pathVar, ":") {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &notFoundError{file}
}
