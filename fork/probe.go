package fork

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MissingError is returned by [Probe] when the machine lacks something the
// engine needs. Missing lists every piece that is missing, in a fixed
// order, each with a hint the user can act on.
type MissingError struct {
	Missing []Missing
}

// Missing is one piece the engine needs and did not find.
type Missing struct {
	What string // "root", "overlayfs", "mount namespace", ...
	Hint string // what to do about it
}

func (e *MissingError) Error() string {
	var b strings.Builder
	b.WriteString("the local fork engine cannot run here: ")
	for i, m := range e.Missing {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(m.What)
		b.WriteString(" missing (")
		b.WriteString(m.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// namespaces are the namespaces a copy is entered with, by their names
// in /proc/self/ns.
var namespaces = []struct{ file, name, config string }{
	{"mnt", "mount", "CONFIG_NAMESPACES"},
	{"pid", "pid", "CONFIG_PID_NS"},
	{"net", "network", "CONFIG_NET_NS"},
	{"ipc", "ipc", "CONFIG_IPC_NS"},
	{"uts", "uts", "CONFIG_UTS_NS"},
	{"cgroup", "cgroup", "CONFIG_CGROUPS"},
}

// Probe checks that this process can make and enter copies: as root,
// that it has CAP_SYS_ADMIN; as anyone else, that the kernel lets it make
// user namespaces (user.max_user_namespaces, Debian's
// kernel.unprivileged_userns_clone, Ubuntu's AppArmor restriction) and
// that a rootless copy really runs here (a seccomp filter or overlayfs
// may still refuse: the first Probe of a boot makes one and runs true in
// it, and remembers the answer); and for both, that the kernel has
// overlayfs (or can load it) and offers the mount, pid, network, ipc, uts
// and cgroup namespaces. It returns nil or a *[MissingError] naming every
// missing piece. Callers refuse machine-changing steps (or apply the
// policy's fallback) when it fails.
func Probe() error {
	if err := probe(probeEnv{
		euid:      os.Geteuid(),
		readFile:  os.ReadFile,
		exists:    func(p string) bool { _, err := os.Lstat(p); return err == nil },
		kernelRel: kernelRelease(),
	}); err != nil || !Rootless() {
		return err
	}
	return probeTrial()
}

// probeEnv is what Probe looks at, so that tests can fake a machine.
type probeEnv struct {
	euid      int
	readFile  func(string) ([]byte, error)
	exists    func(string) bool
	kernelRel string
}

func probe(env probeEnv) error {
	var missing []Missing
	switch {
	case env.euid != 0:
		missing = append(missing, userNamespaces(env)...)
	case !hasCapSysAdmin(env.readFile):
		missing = append(missing, Missing{"root with CAP_SYS_ADMIN", "root here cannot mount: run in a privileged container or a VM, or configure a sandbox host"})
	}
	if !hasOverlay(env) {
		missing = append(missing, Missing{"overlayfs", "load it with `modprobe overlay`, or use a kernel built with CONFIG_OVERLAY_FS"})
	}
	for _, ns := range namespaces {
		if !env.exists("/proc/self/ns/" + ns.file) {
			missing = append(missing, Missing{ns.name + " namespace", "use a kernel built with " + ns.config})
		}
	}
	if len(missing) > 0 {
		return &MissingError{Missing: missing}
	}
	return nil
}

// userNamespaces lists what keeps a user who is not root from making the
// user namespace of a rootless copy, by the sysctls that say so.
func userNamespaces(env probeEnv) []Missing {
	if !env.exists("/proc/self/ns/user") {
		return []Missing{{"user namespace", "use a kernel built with CONFIG_USER_NS, run undosh as root, or configure a sandbox host"}}
	}
	var out []Missing
	sysctl := func(name string) (int, bool) {
		b, err := env.readFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return n, err == nil
	}
	if n, ok := sysctl("user.max_user_namespaces"); ok && n == 0 {
		out = append(out, Missing{"user namespaces (user.max_user_namespaces is 0)", "as root: sysctl -w user.max_user_namespaces=15000; or run undosh as root, or configure a sandbox host"})
	}
	if n, ok := sysctl("kernel.unprivileged_userns_clone"); ok && n == 0 {
		out = append(out, Missing{"unprivileged user namespaces (kernel.unprivileged_userns_clone is 0)", "as root: sysctl -w kernel.unprivileged_userns_clone=1; or run undosh as root, or configure a sandbox host"})
	}
	if n, ok := sysctl("kernel.apparmor_restrict_unprivileged_userns"); ok && n == 1 {
		out = append(out, Missing{"capabilities in user namespaces (AppArmor restricts them: kernel.apparmor_restrict_unprivileged_userns is 1)", "as root: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give undosh an AppArmor profile with userns; or configure a sandbox host"})
	}
	return out
}

// hasCapSysAdmin reports whether CapEff in /proc/self/status holds
// CAP_SYS_ADMIN (root in a container without it cannot mount).
func hasCapSysAdmin(readFile func(string) ([]byte, error)) bool {
	b, err := readFile("/proc/thread-self/status")
	if err != nil {
		return false
	}
	v, ok := statusField(string(b), "CapEff")
	if !ok {
		return false
	}
	caps, err := strconv.ParseUint(v, 16, 64)
	return err == nil && caps&(1<<unix.CAP_SYS_ADMIN) != 0
}

// statusField returns the value of "Name:\tvalue" in /proc/PID/status.
func statusField(status, name string) (string, bool) {
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// hasOverlay reports whether overlayfs is registered, or is a module the
// kernel will load on the first mount.
func hasOverlay(env probeEnv) bool {
	if b, err := env.readFile("/proc/filesystems"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[len(f)-1] == "overlay" {
				return true
			}
		}
	}
	if env.exists("/sys/module/overlay") {
		return true
	}
	if env.kernelRel == "" {
		return false
	}
	dir := filepath.Join("/lib/modules", env.kernelRel)
	for _, list := range []string{"modules.builtin", "modules.dep"} {
		b, err := env.readFile(filepath.Join(dir, list))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			name, _, _ := strings.Cut(line, ":")
			base := filepath.Base(name)
			if strings.HasPrefix(base, "overlay.ko") {
				return true
			}
		}
	}
	return false
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
