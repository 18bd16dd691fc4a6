package shell

import (
	"os"
	"strconv"
	"strings"

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
	step  int // from UNDOSH_STEP, when the environment still has it
}

// outerStep finds the undosh that runs a step around this process by
// walking the parent chain, so that it survives `env -i`: an ancestor
// named undosh:<class> whose executable is undosh's own.
func outerStep(getenv func(string) string) (outer, bool) {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return outer{}, false
	}
	pid := os.Getppid()
	for hops := 0; pid > 1 && hops < 128; hops++ {
		proc := "/proc/" + strconv.Itoa(pid)
		comm, _ := os.ReadFile(proc + "/comm")
		if name := strings.TrimSpace(string(comm)); strings.HasPrefix(name, commPrefix) {
			if st, err := os.Stat(proc + "/exe"); err == nil && os.SameFile(st, self) {
				c, ok := policy.ParseClass(strings.TrimPrefix(name, commPrefix))
				if ok {
					o := outer{class: c, pid: pid}
					o.step, _ = strconv.Atoi(getenv("UNDOSH_STEP"))
					return o, true
				}
			}
		}
		pid = where.Parent("", pid)
	}
	return outer{}, false
}

// markSupervising names this process undosh:<class> for nested
// invocations to find.
func markSupervising(c policy.Class) {
	_ = os.WriteFile("/proc/self/comm", []byte(commPrefix+c.String()), 0)
}
