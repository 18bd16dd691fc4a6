package guard

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/where"
)

// proc is a fake process tree: pid, parent, name and command line.
type proc struct {
	pid, ppid int
	comm      string
	argv      []string
}

// makeProc writes procs as a proc filesystem whose pid 1 runs init.
func makeProc(t *testing.T, init string, procs ...proc) string {
	t.Helper()
	dir := t.TempDir()
	procs = append(procs, proc{pid: 1, comm: filepath.Base(init), argv: []string{init}})
	for _, p := range procs {
		d := filepath.Join(dir, strconv.Itoa(p.pid))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		// A name with a ") " in it, as a program may call itself.
		stat := fmt.Sprintf("%d (%s) x) S %d %d 0 0", p.pid, p.comm, p.ppid, p.pid)
		cmdline := strings.Join(p.argv, "\x00") + "\x00"
		for name, data := range map[string]string{"stat": stat, "comm": p.comm + "\n", "cmdline": cmdline} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o444); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// The hook as dpkg runs it: the guard (pid 500) under sh -c, under dpkg.
var (
	self = proc{pid: 500, ppid: 400, comm: "undosh-guard", argv: []string{"/usr/lib/undosh/undosh-guard", "dpkg"}}
	hook = proc{pid: 400, ppid: 300, comm: "sh", argv: []string{"sh", "-c", "/usr/lib/undosh/undosh-guard dpkg"}}
)

func TestCheck(t *testing.T) {
	t.Parallel()
	script := proc{pid: 200, ppid: 100, comm: "bash", argv: []string{"bash", "./install.sh"}}
	agent := proc{pid: 100, ppid: 1, comm: "agent", argv: []string{"agent", "--task", "x"}}
	tests := []struct {
		name    string
		actor   string
		cmd     []string
		init    string
		env     map[string]string
		procs   []proc
		want    *RefusedError
		unknown bool
	}{
		{
			name: "dpkg -i buried in a script", actor: "dpkg", init: "/sbin/init",
			procs: []proc{self, hook, {pid: 300, ppid: 200, comm: "dpkg", argv: []string{"dpkg", "-i", "x.deb"}}, script, agent},
			want:  &RefusedError{Actor: "dpkg", Command: "dpkg -i x.deb", From: "bash ./install.sh"},
		},
		{
			name: "dpkg under apt-get under sudo", actor: "dpkg", init: "/sbin/init",
			procs: []proc{self, hook,
				{pid: 300, ppid: 250, comm: "dpkg", argv: []string{"/usr/bin/dpkg", "--status-fd", "52", "--unpack", "/var/cache/apt/archives/jq.deb"}},
				{pid: 250, ppid: 240, comm: "apt-get", argv: []string{"apt-get", "install", "-y", "./tool.deb"}},
				{pid: 240, ppid: 200, comm: "sudo", argv: []string{"sudo", "apt-get", "install", "-y", "./tool.deb"}},
				script, agent},
			want: &RefusedError{Actor: "dpkg", Command: "apt-get install -y ./tool.deb", From: "bash ./install.sh"},
		},
		{
			name: "dpkg from an interactive shell, the hook's sh exec'd", actor: "dpkg", init: "/lib/systemd/systemd",
			procs: []proc{{pid: 500, ppid: 300, comm: "undosh-guard", argv: []string{"/usr/lib/undosh/undosh-guard", "dpkg"}},
				{pid: 300, ppid: 200, comm: "dpkg", argv: []string{"dpkg", "-i", "my pkg.deb", "it's"}},
				{pid: 200, ppid: 1, comm: "bash", argv: []string{"-bash"}}},
			want: &RefusedError{Actor: "dpkg", Command: `dpkg -i 'my pkg.deb' "it's"`},
		},
		{
			name: "no dpkg among the ancestors: the hook's action", actor: "dpkg", init: "/sbin/init",
			env:   map[string]string{"DPKG_HOOK_ACTION": "configure"},
			procs: []proc{{pid: 500, ppid: 1, comm: "undosh-guard"}},
			want:  &RefusedError{Actor: "dpkg", Command: "dpkg --configure …"},
		},
		{
			name: "nothing known", actor: "dpkg", init: "/sbin/init",
			env:   map[string]string{"DPKG_HOOK_ACTION": "rm -rf"},
			procs: []proc{{pid: 500, ppid: 1, comm: "undosh-guard"}},
			want:  &RefusedError{Actor: "dpkg"},
		},
		{
			name: "pip, named by its wrapper", actor: "pip", init: "/sbin/init", cmd: []string{"pip", "install", "requests"},
			procs: []proc{{pid: 500, ppid: 200, comm: "undoctl"}, {pid: 200, ppid: 1, comm: "bash", argv: []string{"bash", "./wrap.sh"}}},
			want:  &RefusedError{Actor: "pip", Command: "pip install requests", From: "bash ./wrap.sh"},
		},
		{
			name: "dpkg in a copy of the machine", actor: "dpkg", init: fork.InitName,
			procs: []proc{self, hook, {pid: 300, ppid: 1, comm: "dpkg", argv: []string{"dpkg", "-i", "x.deb"}}},
		},
		{
			name: "npm in a copy of the machine", actor: "npm", init: fork.InitName,
			procs: []proc{{pid: 500, ppid: 1, comm: "undoctl"}},
		},
		{
			name: "an unknown program, even in a copy", actor: "cargo", init: fork.InitName,
			procs:   []proc{{pid: 500, ppid: 1, comm: "undoctl"}},
			unknown: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := makeProc(t, tt.init, tt.procs...)
			o := Options{Proc: p, PID: 500, StateDirs: []string{}, Getenv: func(k string) string { return tt.env[k] }}
			err := Check(tt.actor, tt.cmd, o)
			var ue *UnknownError
			if tt.unknown {
				if !errors.As(err, &ue) || ue.Actor != tt.actor {
					t.Errorf("Check = %v, want an UnknownError", err)
				}
				return
			}
			if tt.want == nil {
				if err != nil {
					t.Errorf("Check = %v, want nil", err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Check = %v, want a RefusedError", err)
			}
			if diff := cmp.Diff(tt.want, re); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e         RefusedError
		err, hint string
	}{
		{RefusedError{Actor: "dpkg", Command: "dpkg -i x.deb", From: "bash ./install.sh"},
			"dpkg changes the machine outside a machine step (dpkg -i x.deb, run by bash ./install.sh)",
			"undoctl run --fork -- dpkg -i x.deb"},
		{RefusedError{Actor: "dpkg", Command: "apt-get install -y jq"},
			"dpkg changes the machine outside a machine step (apt-get install -y jq)",
			"undoctl run --fork -- apt-get install -y jq"},
		{RefusedError{Actor: "pip", From: "bash ./x.sh"},
			"pip changes the machine outside a machine step (this is not a copy of the machine made for a machine step)",
			"undoctl run --fork -- pip install …"},
		{RefusedError{Actor: "npm"},
			"npm changes the machine outside a machine step (this is not a copy of the machine made for a machine step)",
			"undoctl run --fork -- npm install -g …"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.err {
			t.Errorf("Error = %q, want %q", got, tt.err)
		}
		if got := tt.e.Hint(); got != tt.hint {
			t.Errorf("Hint = %q, want %q", got, tt.hint)
		}
	}
}

// A host copy: the root-owned record of WHO_YOU_ARE says copy.
func TestCheckHostCopy(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root can write a file root owns")
	}
	p := makeProc(t, "/sbin/init", proc{pid: 500, ppid: 1, comm: "undosh-guard"})
	primary, copied := t.TempDir(), t.TempDir()
	for dir, role := range map[string]string{primary: "primary", copied: "copy"} {
		data := `{"generation":2,"role":"` + role + `","token":"t"}`
		if err := os.WriteFile(filepath.Join(dir, "host.json"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Check("dpkg", nil, Options{Proc: p, PID: 500, StateDirs: []string{primary}}); err == nil {
		t.Error("Check on a primary = nil, want a refusal")
	}
	if err := Check("dpkg", nil, Options{Proc: p, PID: 500, StateDirs: []string{primary, copied}}); err != nil {
		t.Errorf("Check on a copy = %v, want nil", err)
	}
	// The state directory comes from $UNDOSH_STATE_DIR.
	env := func(k string) string {
		if k == "UNDOSH_STATE_DIR" {
			return copied
		}
		return ""
	}
	if err := Check("pip", nil, Options{Proc: p, PID: 500, Getenv: env}); err != nil {
		t.Errorf("Check with $UNDOSH_STATE_DIR on a copy = %v, want nil", err)
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 150)
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"dpkg", "-i", "./x_1.0_all.deb"}, "dpkg -i ./x_1.0_all.deb"},
		{[]string{"sh", "-c", "dpkg -i x.deb; echo $?"}, `sh -c 'dpkg -i x.deb; echo $?'`},
		{[]string{"echo", ""}, "echo ''"},
		// Cut at a character's start: 200 bytes hold 100 é.
		{[]string{long}, strings.Repeat("é", 100) + "…"},
		{[]string{"x", long}, "x " + strings.Repeat("é", 99) + "…"},
	}
	for _, tt := range tests {
		if got := quote(tt.argv); got != tt.want {
			t.Errorf("quote(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

// Main on this machine, which is no copy: the refusal and its hint.
func TestMainCommand(t *testing.T) {
	t.Parallel()
	if where.InCopy("") || where.InHostCopy(fork.DefaultStateDir) {
		t.Skip("the tests run in a copy of the machine")
	}
	env := func(k string) string {
		if k == "UNDOSH_STATE_DIR" {
			return t.TempDir()
		}
		return ""
	}
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"dpkg"}, exit.Refused, "undosh: refused: dpkg changes the machine outside a machine step (this is not a copy of the machine made for a machine step)\n" +
			"undosh: hint: undoctl run --fork -- dpkg -i …\n"},
		{[]string{"npm", "--", "npm", "i", "-g", "left-pad"}, exit.Refused, "undosh: refused: npm changes the machine outside a machine step (npm i -g left-pad, run by "},
		{nil, exit.Usage, "undosh: error: usage: undosh-guard dpkg|npm|pip [-- COMMAND…]\n"},
		{[]string{"dpkg", "x"}, exit.Usage, "undosh: error: usage: "},
		{[]string{"gem"}, exit.Usage, "undosh: error: no guard for \"gem\" (guards: dpkg, npm, pip)\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		code := Main(tt.args, &b, env)
		if code != tt.code || !strings.HasPrefix(b.String(), tt.stderr) {
			t.Errorf("Main(%q) = %d, stderr\n%s\nwant %d and\n%s", tt.args, code, b.String(), tt.code, tt.stderr)
		}
	}
}
