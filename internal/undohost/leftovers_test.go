package undohost

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/procs"
)

// A kept step's process is started again on the sandbox, and the
// operation's stderr says so.
func TestLocalLeftovers(t *testing.T) {
	if err := fork.Probe(); err != nil || fork.Rootless() {
		t.Skipf("needs the root fork engine: %v", err)
	}
	l, err := NewLocal(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	secs := fmt.Sprintf("1234.%d", rand.Uint32())
	var stdout, stderr bytes.Buffer
	res, err := l.ForkAndRun(context.Background(), hostlink.ForkJob{Sandbox: "s", Op: "op1", Stdout: &stdout, Stderr: &stderr,
		Request: hostlink.ForkRun{Network: hostlink.Network{Mode: "off"}, Step: hostlink.Command{Shell: "(setsid sleep " + secs + " &)", Cwd: "/"}}})
	if err != nil || !res.Kept {
		t.Fatalf("%+v, %v; stderr %s", res, err, &stderr)
	}
	// The log is in the engine's state directory, on the machine.
	if m := regexp.MustCompile(`log (/\S+\.log)\)`).FindStringSubmatch(stderr.String()); m != nil {
		t.Cleanup(func() { os.Remove(m[1]) })
	}
	var found []procs.Proc
	all, _ := procs.List()
	for _, p := range all {
		if slices.Equal(p.Argv, []string{"sleep", secs}) {
			found = append(found, p)
			t.Cleanup(func() { procs.Stop(p, syscall.SIGKILL, 5*time.Second) })
		}
	}
	if len(found) != 1 {
		t.Errorf("on the machine: %+v", found)
	}
	if !strings.Contains(stderr.String(), "undohost: the step left 1 process running in its copy of the machine; started again on this machine after the commit") {
		t.Errorf("stderr: %q", &stderr)
	}
}
