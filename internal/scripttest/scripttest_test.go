package scripttest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestStatus(t *testing.T) {
	testscript.Run(t, testscript.Params{Files: []string{"testdata/status.txtar"}, Cmds: Cmds()})
}

// TestStatusWrong: a status other than the one named fails the script,
// and says both.
func TestStatusWrong(t *testing.T) {
	var r recT
	testscript.RunT(&r, testscript.Params{Files: []string{"testdata/wrong.txtar"}, Cmds: Cmds()})
	if !r.failed || !strings.Contains(r.log.String(), "sh exited with status 1, want 2") {
		t.Errorf("status 2 of a command that exits 1: failed %v, log:\n%s", r.failed, r.log.String())
	}
}

// TestStatusSignal: a death by a signal is not the exit status 128+n
// that a shell would report.
func TestStatusSignal(t *testing.T) {
	var r recT
	testscript.RunT(&r, testscript.Params{Files: []string{"testdata/wrongsig.txtar"}, Cmds: Cmds()})
	if !r.failed || !strings.Contains(r.log.String(), "sh died of SIGKILL, want 137") {
		t.Errorf("status 137 of a command killed by SIGKILL: failed %v, log:\n%s", r.failed, r.log.String())
	}
}

// recT is a testscript.T that records a failure instead of failing.
type recT struct {
	failed bool
	log    strings.Builder
}

type stop struct{}

func (r *recT) Skip(args ...any)  { panic(stop{}) }
func (r *recT) Fatal(args ...any) { r.Log(args...); r.FailNow() }
func (r *recT) FailNow()          { r.failed = true; panic(stop{}) }
func (r *recT) Log(args ...any)   { fmt.Fprintln(&r.log, args...) }
func (r *recT) Parallel()         {}
func (r *recT) Verbose() bool     { return false }
func (r *recT) Run(name string, f func(testscript.T)) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stop); !ok {
				panic(v)
			}
		}
	}()
	f(r)
}
