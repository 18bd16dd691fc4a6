package install

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/policy"
)

// The guards at the actors (internal/guard, docs/guards.md): dpkg and pip
// refuse to change the machine outside a machine step.
const (
	// DpkgGuardFile is dpkg's configuration fragment that runs the guard
	// before every dpkg action that changes anything (pre-invoke). dpkg
	// reads /etc/dpkg/dpkg.cfg.d/[0-9a-zA-Z_-]*.
	DpkgGuardFile = "/etc/dpkg/dpkg.cfg.d/undosh-guard"
	// MarkerName is the PEP 668 marker pip looks for in the standard
	// library directory of the Python it installs into.
	MarkerName = "EXTERNALLY-MANAGED"
)

// dpkgGuardHook is the hook dpkg runs, by sh -c.
const dpkgGuardHook = GuardBinary + " dpkg"

// dpkgGuardConfig is the content of DpkgGuardFile.
func dpkgGuardConfig() []byte {
	return []byte(`# undosh: dpkg guard. dpkg runs this hook before it unpacks, configures,
# installs, removes or purges anything, with apt or without. Outside a
# machine step (a copy of the machine) undosh-guard refuses, and dpkg stops
# before it changes anything. Written by undoctl install; undoctl install
# --no-guards and undoctl uninstall remove it.
pre-invoke=` + dpkgGuardHook + "\n")
}

// pipMarker is the PEP 668 marker for the Python whose standard library
// is dir: pip shows its Error to whoever installs into system paths.
// Continuation lines are indented, as configparser wants them.
func pipMarker(dir string) []byte {
	py := strings.Replace(filepath.Base(dir), "python", "Python ", 1)
	return []byte(fork.GuardTag + `. undoctl install wrote this PEP 668 marker; undoctl
# uninstall puts back what was here. A copy of the machine made for a
# machine step does not see it.
[externally-managed]
Error=undosh: refused: pip changes the machine outside a machine step (an install into the system's ` + py + `)
 undosh: hint: undoctl run --fork -- pip install …

 A virtual environment (python3 -m venv DIR) changes no system path and
 needs no machine step.
`)
}

// isGuardMarker reports whether data is a marker the pip guard wrote.
func isGuardMarker(data []byte) bool { return bytes.HasPrefix(data, []byte(fork.GuardTag)) }

// hasDpkg reports whether the root has a dpkg database.
func (r fsRoot) hasDpkg() bool {
	st, err := os.Stat(r.host(AdminDir))
	return err == nil && st.IsDir()
}

// pythonLibs returns the standard library directories of the root's
// system Pythons (where fork.PythonLibs points, holding os.py), as paths
// inside the root, each once.
func (r fsRoot) pythonLibs() []string {
	var out, seen []string
	for _, g := range fork.PythonLibs() {
		parent, err := r.resolve(filepath.Dir(g), true)
		if err != nil {
			continue
		}
		dirs, _ := filepath.Glob(filepath.Join(r.host(parent), filepath.Base(g)))
		for _, h := range dirs {
			st, err := os.Lstat(h)
			if err != nil || !st.IsDir() {
				continue
			}
			if st, err := os.Lstat(filepath.Join(h, "os.py")); err != nil || !st.Mode().IsRegular() {
				continue
			}
			p := filepath.Join(parent, filepath.Base(h))
			if slices.Contains(seen, p) {
				continue
			}
			seen = append(seen, p)
			out = append(out, p)
		}
	}
	return out
}

// guards switches the guards on or off as o asks, then puts in place
// those the record wants.
func (in *installer) guards(o Options) error {
	switch {
	case o.NoGuards && !in.rec.NoGuards:
		if err := in.begin(); err != nil {
			return err
		}
		in.rec.NoGuards = true
	case o.Guards && in.rec.NoGuards:
		if err := in.begin(); err != nil {
			return err
		}
		in.rec.NoGuards = false
	}
	if in.rec.NoGuards {
		return in.removeGuards()
	}
	if in.r.hasDpkg() {
		if err := in.dpkgGuard(); err != nil {
			return err
		}
	}
	for _, dir := range in.r.pythonLibs() {
		if err := in.pipGuard(dir); err != nil {
			return err
		}
	}
	return nil
}

// dpkgGuard puts the guard's entry point in place, then the hook that
// runs it: dpkg never runs a hook that leads nowhere.
func (in *installer) dpkgGuard() error {
	h, err := in.r.at(GuardBinary)
	if err != nil {
		return err
	}
	recorded := in.has(func(a Action) bool { return a.Op == opLink && a.Path == GuardBinary })
	switch cur := in.r.readlink(GuardBinary); {
	case cur == Binary:
	case recorded:
		// Removed or changed since: put it back.
		if err := in.begin(); err != nil {
			return err
		}
		if err := atomicfile.Symlink(Binary, h); err != nil {
			return err
		}
		in.say("%s -> %s (the guard's entry point, again)", GuardBinary, Binary)
	default:
		if _, err := in.r.lstat(GuardBinary); err == nil {
			return &Error{Msg: fmt.Sprintf("%s exists, but the install record does not have it", GuardBinary),
				Fix: "a leftover of an earlier install: remove it, then run undoctl install again"}
		}
		if err := in.step(Action{Op: opLink, Path: GuardBinary, Target: Binary, Guard: "dpkg"}, func() error {
			return atomicfile.Symlink(Binary, h)
		}); err != nil {
			return err
		}
		in.say("%s -> %s (the guard's entry point)", GuardBinary, Binary)
	}
	if err := in.mkdirsFor(filepath.Dir(DpkgGuardFile), "dpkg"); err != nil {
		return err
	}
	wrote, err := in.writeFileAs(Action{Op: opFile, Path: DpkgGuardFile, Guard: "dpkg"}, dpkgGuardConfig(), 0o644)
	if err != nil {
		return err
	}
	if wrote {
		in.say("dpkg guard: %s runs %s before dpkg changes anything", DpkgGuardFile, dpkgGuardHook)
	}
	return nil
}

// pipGuard writes the PEP 668 marker of the Python whose standard library
// is dir, keeping what was there for uninstall. A marker a package put
// back over the guard since (an upgrade) is what uninstall restores from
// then on.
func (in *installer) pipGuard(dir string) error {
	p := filepath.Join(dir, MarkerName)
	if st, err := in.r.lstat(p); err == nil && !st.Mode().IsRegular() {
		in.say("warning: %s is not a file; pip is not guarded there", p)
		return nil
	}
	h, err := in.r.target(p)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(h)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if err == nil && !isGuardMarker(old) {
		for i := range in.rec.Actions {
			if a := &in.rec.Actions[i]; a.Op == opGuardFile && a.Path == p {
				st, err := os.Stat(h)
				if err != nil {
					return err
				}
				if err := in.begin(); err != nil {
					return err
				}
				a.Existed, a.Data, a.Mode = true, old, st.Mode().Perm()
				if err := in.save(); err != nil {
					return err
				}
				in.say("%s was replaced since install (a package upgrade?): uninstall puts the new one back", p)
			}
		}
	}
	wrote, err := in.writeFileAs(Action{Op: opGuardFile, Path: p, Guard: "pip"}, pipMarker(dir), 0o644)
	if err != nil {
		return err
	}
	if wrote {
		in.say("pip guard: %s (PEP 668: pip refuses to install into system paths outside a machine step)", p)
	}
	return nil
}

// removeGuards undoes every change the record holds for a guard, newest
// first, and drops it from the record.
func (in *installer) removeGuards() error {
	for i := len(in.rec.Actions) - 1; i >= 0; i-- {
		a := in.rec.Actions[i]
		if a.Guard == "" {
			continue
		}
		if err := in.begin(); err != nil {
			return err
		}
		// The change goes before its action, as in removeFast.
		if err := in.undo(a); err != nil {
			return err
		}
		in.rec.Actions = append(in.rec.Actions[:i:i], in.rec.Actions[i+1:]...)
		if err := in.save(); err != nil {
			return err
		}
	}
	return nil
}

// undoGuardFile puts back what a guard file replaced, unless the file is
// no longer the guard.
func (in *installer) undoGuardFile(a Action, h string) error {
	cur, err := os.ReadFile(h)
	switch {
	case err == nil && !isGuardMarker(cur):
		in.say("kept %s: replaced since install", a.Path)
		return nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", a.Path, err)
	case a.Existed:
		if err := atomicfile.Write(h, a.Data, a.Mode); err != nil {
			return err
		}
		in.say("restored %s", a.Path)
		return nil
	}
	if err := os.Remove(h); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", a.Path, err)
	}
	in.say("removed %s", a.Path)
	return nil
}

// guards reports the guards the record wants, and what keeps them from
// working.
func (d *doctor) guards(rec *Record, p *policy.Policy) {
	if rec == nil {
		return
	}
	add := func(g GuardInfo) { d.rep.Guards = append(d.rep.Guards, g) }
	if rec.NoGuards {
		add(GuardInfo{Is: "off (undoctl install --no-guards): a dpkg -i buried in a script changes the machine outside a machine step; undoctl install --guards puts them back"})
		return
	}
	recorded := func(op, path string) bool {
		return slices.ContainsFunc(rec.Actions, func(a Action) bool { return a.Op == op && a.Path == path })
	}
	read := func(p string) ([]byte, error) {
		h, err := d.r.target(p)
		if err != nil {
			return nil, err
		}
		return os.ReadFile(h)
	}
	dpkgOn := false
	if d.r.hasDpkg() {
		g := GuardInfo{Actor: "dpkg", Path: DpkgGuardFile}
		data, err := read(DpkgGuardFile)
		fix := "undoctl install puts it back (undoctl install --no-guards goes without)"
		switch {
		case !recorded(opFile, DpkgGuardFile):
			g.Is = "none"
			d.problem("dpkg is not guarded: a dpkg -i buried in a script changes the machine outside a machine step",
				"undoctl install adds the guard (undoctl install --no-guards goes without)")
		case err != nil:
			g.Is = DpkgGuardFile + " missing"
			d.problem("%s is missing: dpkg is not guarded", fix, DpkgGuardFile)
		case !bytes.Equal(data, dpkgGuardConfig()):
			g.Is = DpkgGuardFile + " changed since install"
			d.problem("%s changed since install: dpkg may not be guarded", fix, DpkgGuardFile)
		case !d.r.is(GuardBinary, Binary):
			g.Is = fmt.Sprintf("%s, but %s is %s", DpkgGuardFile, GuardBinary, d.r.describe(GuardBinary))
			d.problem("%s does not lead to undosh: dpkg's hook fails, and with it every dpkg run", fix, GuardBinary)
		default:
			g.On, dpkgOn = true, true
			g.Is = fmt.Sprintf("%s: dpkg runs %s first", DpkgGuardFile, dpkgGuardHook)
		}
		add(g)
	}
	for _, dir := range d.r.pythonLibs() {
		m := filepath.Join(dir, MarkerName)
		g := GuardInfo{Actor: "pip", Path: m}
		data, err := read(m)
		switch {
		case err == nil && isGuardMarker(data):
			g.On = true
			g.Is = m + " (PEP 668 marker; copies of the machine do not see it)"
		case !recorded(opGuardFile, m):
			g.Is = m + ": none"
			d.problem("%s has no pip guard: pip installs into its system paths outside a machine step",
				"undoctl install adds it (undoctl install --no-guards goes without)", dir)
		case err != nil:
			g.Is = m + " missing"
			d.problem("%s is missing: pip is not guarded there", "undoctl install puts it back", m)
		default:
			g.Is = m + " replaced since install"
			d.problem("%s is no longer the pip guard (a package upgrade replaced it)",
				"undoctl install puts it back; undoctl uninstall then restores the package's", m)
		}
		add(g)
	}
	for _, npm := range []string{"/usr/bin/npm", "/usr/local/bin/npm"} {
		if _, err := d.r.lstat(npm); err == nil {
			add(GuardInfo{Actor: "npm", Is: "none: npm has no hook that can refuse a global install (docs/guards.md)"})
			break
		}
	}
	if !dpkgOn {
		return
	}
	if d.r.live() && p != nil && p.Host.Address == "" && d.getenv("UNDOSH_HOST") == "" {
		if err := fork.Probe(); err != nil {
			d.problem("the dpkg guard refuses every dpkg run here: no machine step can run (%v) and no sandbox host is set",
				"make the local fork engine work (root, overlayfs, namespaces) or set host.address in the policy; or go without the guards: undoctl install --no-guards", err)
		}
	}
	if d.r.unattendedUpgrades() {
		d.problem("unattended-upgrades runs dpkg outside any machine step: the dpkg guard refuses it, so automatic updates stop",
			`run them as machine steps (a timer running undoctl run --fork -- unattended-upgrade) and set APT::Periodic::Unattended-Upgrade "0"; or go without the guards: undoctl install --no-guards`)
	}
}

// unattendedUpgradeRE matches apt's switch for unattended-upgrades.
var unattendedUpgradeRE = regexp.MustCompile(`APT::Periodic::Unattended-Upgrade\s+"([^"]*)"`)

// unattendedUpgrades reports whether apt runs unattended-upgrades in the
// root: the last APT::Periodic::Unattended-Upgrade in apt.conf.d, in the
// order apt reads the files, is not "0".
func (r fsRoot) unattendedUpgrades() bool {
	h, err := r.target("/etc/apt/apt.conf.d")
	if err != nil {
		return false
	}
	entries, err := os.ReadDir(h)
	if err != nil {
		return false
	}
	on := false
	for _, e := range entries { // sorted by name, as apt reads them
		data, err := os.ReadFile(filepath.Join(h, e.Name()))
		if err != nil {
			continue
		}
		for _, m := range unattendedUpgradeRE.FindAllSubmatch(data, -1) {
			on = string(m[1]) != "0" && string(m[1]) != ""
		}
	}
	return on
}
