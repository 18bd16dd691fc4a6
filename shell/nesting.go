package shell

import (
	"os"
	"strconv"
	"strings"

	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/where"
	"github.com/undosh/undosh/policy"
)

// commPrefix starts the process name of an undosh that supervises a step;
// the class follows ("undosh:git"). A name alone proves nothing (any
// program can be called that), so [outerStep] also checks that the
// process runs undosh's own executable.
const commPrefix = "undosh:"

// outer is the step an invocation runs inside.
type outer struct {
	class policy.Class
	pid   int
	step  int // the outer undosh's step in this state directory, 0 if none
	// held: the outer step runs in a view of the machine, and this
	// process is in it (another mount namespace than the outer undosh):
	// whatever it writes beyond the outer step's class, the view
	// catches, and the outer step is escalated for it.
	held bool
}

// outerStep finds the undosh that runs a step around this process by
// walking the parent chain, so that it survives `env -i` and a stale
// UNDOSH_STEP: an ancestor named undosh:<class> whose executable is
// undosh's own, or that runs a step in stateDir (its mark there names
// the process). The second is for when the first cannot be seen: from
// under Landlock, /proc/PID/exe of a process outside the sandbox is
// hidden, and from a view of the machine, undosh's file is the overlay's.
// The step's number comes from the mark.
func outerStep(stateDir string) (outer, bool) {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return outer{}, false
	}
	var shells map[int]journal.Shell
	if stateDir != "" {
		shells = journal.Shells(stateDir)
	}
	// A handed-over step's shell that execs undosh (`exec undosh -c …`,
	// or the last command of `bash -c`, which bash execs) makes this
	// process that shell: the mark names this very process.
	if o, ok := heldShell(shells, os.Getpid()); ok {
		return o, true
	}
	pid := os.Getppid()
	for hops := 0; pid > 1 && hops < 128; hops++ {
		proc := "/proc/" + strconv.Itoa(pid)
		if o, ok := heldShell(shells, pid); ok {
			return o, true
		}
		comm, _ := os.ReadFile(proc + "/comm")
		if name := strings.TrimSpace(string(comm)); strings.HasPrefix(name, commPrefix) {
			step := 0
			if stateDir != "" {
				step = journal.RunningIn(stateDir, pid)
			}
			if st, err := os.Stat(proc + "/exe"); step > 0 || err == nil && os.SameFile(st, self) {
				name, view := strings.CutSuffix(strings.TrimPrefix(name, commPrefix), viewMark)
				c, ok := policy.ParseClass(name)
				if ok {
					o := outer{class: c, pid: pid, step: step}
					if view {
						theirs, err1 := os.Stat(proc + "/ns/mnt")
						ours, err2 := os.Stat("/proc/self/ns/mnt")
						o.held = err1 == nil && err2 == nil && !os.SameFile(theirs, ours)
					}
					return o, true
				}
			}
		}
		pid = where.Parent("", pid)
	}
	return outer{}, false
}

// heldShell returns the step whose shell runs in process pid, when
// shells (journal.Shells) names pid: the shell of a step handed over
// (handover.go), which runs in the process its caller started, named as
// bash names it. The outer's pid is its supervisor's.
func heldShell(shells map[int]journal.Shell, pid int) (outer, bool) {
	sh, ok := shells[pid]
	if !ok || !sh.Is(pid) {
		return outer{}, false
	}
	c, ok := policy.ParseClass(sh.Class)
	if !ok {
		return outer{}, false
	}
	o := outer{class: c, pid: sh.Supervisor, step: sh.Step}
	if sh.View {
		o.held = otherMountNS(sh.Supervisor)
	}
	return o, true
}

// otherMountNS reports whether this process is in another mount
// namespace than process pid.
func otherMountNS(pid int) bool {
	theirs, err1 := os.Stat("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	ours, err2 := os.Stat("/proc/self/ns/mnt")
	return err1 == nil && err2 == nil && !os.SameFile(theirs, ours)
}

// viewMark ends the process name of an undosh whose step runs in a view
// of the machine ("undosh:git+v"): a nested invocation in another mount
// namespace than such an undosh is held by its view.
const viewMark = "+v"

// markSupervising names this process undosh:<class> for nested
// invocations to find, with [viewMark] when the step runs in a view.
func markSupervising(c policy.Class, view bool) {
	name := commPrefix + c.String()
	if view {
		name += viewMark
	}
	_ = os.WriteFile("/proc/self/comm", []byte(name), 0)
}
