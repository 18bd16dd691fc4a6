package procs

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// why stands, in a wanted call, for any reason its targets cannot be told.
const why = "?"

func TestParseKill(t *testing.T) {
	const term, kill, hup = 15, 9, 1
	tests := []struct {
		name string
		argv []string
		want call
	}{
		{"other program", []string{"ls", "-l"}, call{why: why}},
		{"empty", nil, call{why: why}},

		// bash's builtin
		{"pid", []string{"kill", "123"}, call{tool: "kill", sig: term, pids: []int{123}}},
		{"-9", []string{"kill", "-9", "1", "2"}, call{tool: "kill", sig: kill, pids: []int{1, 2}}},
		{"-KILL", []string{"kill", "-KILL", "7"}, call{tool: "kill", sig: kill, pids: []int{7}}},
		{"-sigkill is -s igkill", []string{"kill", "-sigkill", "7"}, call{tool: "kill", sig: -1, why: why}},
		{"-SIGkill", []string{"kill", "-SIGkill", "7"}, call{tool: "kill", sig: kill, pids: []int{7}}},
		{"-1 alone is HUP", []string{"kill", "-1"}, call{tool: "kill", sig: hup, none: true}},
		{"-s hup", []string{"kill", "-s", "hup", "7"}, call{tool: "kill", sig: hup, pids: []int{7}}},
		{"-sHUP", []string{"kill", "-sHUP", "7"}, call{tool: "kill", sig: hup, pids: []int{7}}},
		{"-n 9", []string{"kill", "-n", "9", "7"}, call{tool: "kill", sig: kill, pids: []int{7}}},
		{"-n9", []string{"kill", "-n9", "7"}, call{tool: "kill", sig: kill, pids: []int{7}}},
		{"-RTMIN+1", []string{"kill", "-SIGRTMIN+1", "7"}, call{tool: "kill", sig: 35, pids: []int{7}}},
		{"-RTMAX-2", []string{"kill", "-rtmax-2", "7"}, call{tool: "kill", sig: 62, pids: []int{7}}},
		{"-- -PGID", []string{"kill", "--", "-4321", "5"}, call{tool: "kill", sig: term, pids: []int{5}, groups: []int{4321}}},
		{"-9 -PGID", []string{"kill", "-9", "-4321"}, call{tool: "kill", sig: kill, groups: []int{4321}}},
		{"-s 9 -PGID", []string{"kill", "-s", "9", "-4321"}, call{tool: "kill", sig: kill, groups: []int{4321}}},
		{"second -N is a group", []string{"kill", "-15", "-9", "3"}, call{tool: "kill", sig: term, pids: []int{3}, groups: []int{9}}},
		{"-N after a pid", []string{"kill", "3", "-9"}, call{tool: "kill", sig: term, pids: []int{3}, groups: []int{9}}},
		{"last -s wins", []string{"kill", "-s", "BOGUS", "-s", "HUP", "3"}, call{tool: "kill", sig: hup, pids: []int{3}}},
		{"blank pid", []string{"kill", " 12 "}, call{tool: "kill", sig: term, pids: []int{12}}},
		{"-l", []string{"kill", "-l"}, call{tool: "kill", sig: term, none: true}},
		{"-L 9", []string{"kill", "-L", "9"}, call{tool: "kill", sig: term, none: true}},
		{"-0", []string{"kill", "-0", "3"}, call{tool: "kill", none: true}},
		{"-s 0", []string{"kill", "-s", "0", "3"}, call{tool: "kill", none: true}},
		{"-EXIT", []string{"kill", "-EXIT", "3"}, call{tool: "kill", none: true}},
		{"-0 job", []string{"kill", "-0", "%1"}, call{tool: "kill", none: true}},
		{"no operand", []string{"kill", "-9"}, call{tool: "kill", sig: kill, none: true}},
		{"-s at the end", []string{"kill", "-s"}, call{tool: "kill", sig: term, none: true}},
		{"job", []string{"kill", "%1"}, call{tool: "kill", sig: term, why: why}},
		{"job after pid", []string{"kill", "3", "%+"}, call{tool: "kill", sig: term, why: why}},
		{"-1", []string{"kill", "-9", "-1"}, call{tool: "kill", sig: kill, why: why}},
		{"-- -1", []string{"kill", "--", "-1"}, call{tool: "kill", sig: term, why: why}},
		{"0", []string{"kill", "0"}, call{tool: "kill", sig: term, why: why}},
		{"not a pid", []string{"kill", "self"}, call{tool: "kill", sig: term, why: why}},
		{"too big", []string{"kill", "4294967297"}, call{tool: "kill", sig: term, why: why}},
		{"bad signal", []string{"kill", "-BOGUS", "3"}, call{tool: "kill", sig: -1, why: why}},
		{"65", []string{"kill", "-65", "3"}, call{tool: "kill", sig: -1, why: why}},
		{"-PGID alone is a signal", []string{"kill", "-4321"}, call{tool: "kill", sig: -1, why: why}},

		// procps' /bin/kill
		{"procps pid", []string{"/bin/kill", "123"}, call{tool: "kill", sig: term, pids: []int{123}}},
		{"procps -9", []string{"/usr/bin/kill", "-9", "123"}, call{tool: "kill", sig: kill, pids: []int{123}}},
		{"procps signal anywhere", []string{"/bin/kill", "123", "-HUP", "4"}, call{tool: "kill", sig: hup, pids: []int{123, 4}}},
		{"procps -s", []string{"/bin/kill", "-s", "KILL", "123"}, call{tool: "kill", sig: kill, pids: []int{123}}},
		{"procps -s9", []string{"/bin/kill", "-s9", "123"}, call{tool: "kill", sig: kill, pids: []int{123}}},
		{"procps --signal=", []string{"/bin/kill", "--signal=HUP", "123"}, call{tool: "kill", sig: hup, pids: []int{123}}},
		{"procps --sig", []string{"/bin/kill", "--sig", "HUP", "123"}, call{tool: "kill", sig: hup, pids: []int{123}}},
		{"procps -q", []string{"/bin/kill", "-q", "5", "123"}, call{tool: "kill", sig: term, pids: []int{123}}},
		{"procps -- -PGID", []string{"/bin/kill", "-9", "--", "-4321"}, call{tool: "kill", sig: kill, groups: []int{4321}}},
		{"procps -PGID is options", []string{"/bin/kill", "-9", "-4321"}, call{tool: "kill", sig: kill, why: why}},
		{"procps -- -N is the signal", []string{"/bin/kill", "--", "-50"}, call{tool: "kill", sig: 50, none: true}},
		{"procps -l", []string{"/bin/kill", "-l", "9"}, call{tool: "kill", sig: term, none: true}},
		{"procps --table", []string{"/bin/kill", "--table"}, call{tool: "kill", sig: term, none: true}},
		{"procps -0", []string{"/bin/kill", "-0", "1"}, call{tool: "kill", none: true}},
		{"procps -n", []string{"/bin/kill", "-n", "9", "1"}, call{tool: "kill", sig: term, why: why}},
		{"procps trailing text", []string{"/bin/kill", "12x"}, call{tool: "kill", sig: term, why: why}},

		// pkill
		{"pkill", []string{"pkill", "sshd"}, call{tool: "pkill", sig: term, pgrep: []string{"--", "sshd"}}},
		{"pkill -9 -f", []string{"pkill", "-9", "-f", "a b"}, call{tool: "pkill", sig: kill, pgrep: []string{"--full", "--", "a b"}}},
		{"pkill signal later", []string{"pkill", "-f", "x", "-HUP"}, call{tool: "pkill", sig: hup, pgrep: []string{"--full", "--", "x"}}},
		{"pkill --signal", []string{"pkill", "--signal", "KILL", "-e", "--queue=3", "-c", "x"}, call{tool: "pkill", sig: kill, pgrep: []string{"--", "x"}}},
		{"pkill cluster", []string{"pkill", "-fxu", "root", "x"}, call{tool: "pkill", sig: term, pgrep: []string{"--full", "--exact", "--euid=root", "--", "x"}}},
		{"pkill attached", []string{"pkill", "-uroot,bob", "-P1", "--ns", "1", "--cgroup=a"}, call{tool: "pkill", sig: term, pgrep: []string{"--euid=root,bob", "--parent=1", "--ns=1", "--cgroup=a"}}},
		{"pkill -n", []string{"pkill", "-n", "x"}, call{tool: "pkill", sig: term, pgrep: []string{"--ignore-ancestors", "--newest", "--", "x"}}},
		{"pkill -n -A", []string{"pkill", "-nA", "x"}, call{tool: "pkill", sig: term, pgrep: []string{"--newest", "--ignore-ancestors", "--", "x"}}},
		{"pkill -H", []string{"pkill", "-HUP", "-H", "x"}, call{tool: "pkill", sig: hup, pgrep: []string{"--signal=1", "--require-handler", "--", "x"}}},
		{"pkill -- -x", []string{"pkill", "--", "-x"}, call{tool: "pkill", sig: term, pgrep: []string{"--", "-x"}}},
		{"pkill -0", []string{"pkill", "-0", "x"}, call{tool: "pkill", none: true}},
		{"pkill -h", []string{"pkill", "-h"}, call{tool: "pkill", sig: term, none: true}},
		{"pkill two patterns", []string{"pkill", "a", "b"}, call{tool: "pkill", sig: term, none: true}},
		{"pkill -v", []string{"pkill", "-v", "x"}, call{tool: "pkill", sig: term, why: why}},
		{"pkill -F relative", []string{"pkill", "-F", "run.pid"}, call{tool: "pkill", sig: term, why: why}},
		{"pkill -g 0", []string{"pkill", "-g", "0", "x"}, call{tool: "pkill", sig: term, why: why}},
		{"pkill -u at the end", []string{"pkill", "x", "-u"}, call{tool: "pkill", sig: term, why: why}},
		{"pkill ambiguous", []string{"pkill", "--e", "x"}, call{tool: "pkill", sig: term, why: why}},

		// killall
		{"killall", []string{"killall", "nginx"}, call{tool: "killall", sig: term, names: []string{"nginx"}}},
		{"killall -9", []string{"killall", "-9", "a", "b"}, call{tool: "killall", sig: kill, names: []string{"a", "b"}}},
		{"killall -HUP", []string{"killall", "-HUP", "a"}, call{tool: "killall", sig: hup, names: []string{"a"}}},
		{"killall -INT", []string{"killall", "-INT", "a"}, call{tool: "killall", sig: 2, names: []string{"a"}}},
		{"killall -VTALRM", []string{"killall", "-VTALRM", "a"}, call{tool: "killall", sig: 26, names: []string{"a"}}},
		{"killall -s", []string{"killall", "-s", "KILL", "a"}, call{tool: "killall", sig: kill, names: []string{"a"}}},
		{"killall -sKILL", []string{"killall", "-sKILL", "a"}, call{tool: "killall", sig: kill, names: []string{"a"}}},
		{"killall -signal", []string{"killall", "-signal", "1", "a"}, call{tool: "killall", sig: hup, names: []string{"a"}}},
		{"killall --signal=", []string{"killall", "a", "--signal=HUP"}, call{tool: "killall", sig: hup, names: []string{"a"}}},
		{"killall flags", []string{"killall", "-eg", "-I", "-w", "-q", "-v", "a"}, call{tool: "killall", sig: term, names: []string{"a"}, exact: true, fold: true, pgid: true}},
		{"killall -I alone", []string{"killall", "-I", "a"}, call{tool: "killall", sig: term, names: []string{"a"}, fold: true}},
		{"killall -ve", []string{"killall", "-ve", "a"}, call{tool: "killall", sig: term, names: []string{"a"}, exact: true}},
		{"killall -u", []string{"killall", "-u", "bob"}, call{tool: "killall", sig: term, user: "bob"}},
		{"killall -user=", []string{"killall", "-user=bob", "a"}, call{tool: "killall", sig: term, user: "bob", names: []string{"a"}}},
		{"killall --", []string{"killall", "--", "-a"}, call{tool: "killall", sig: term, names: []string{"-a"}}},
		{"killall -l", []string{"killall", "-l"}, call{tool: "killall", sig: term, none: true}},
		{"killall -V", []string{"killall", "-V", "a"}, call{tool: "killall", sig: term, none: true}},
		{"killall -0", []string{"killall", "-0", "a"}, call{tool: "killall", none: true}},
		{"killall nothing", []string{"killall", "-9"}, call{tool: "killall", sig: kill, none: true}},
		{"killall -r", []string{"killall", "-r", "a.*"}, call{tool: "killall", sig: term, why: why}},
		{"killall -i", []string{"killall", "-i", "a"}, call{tool: "killall", sig: term, why: why}},
		{"killall -y", []string{"killall", "-y", "1h", "a"}, call{tool: "killall", sig: term, why: why}},
		{"killall -hup", []string{"killall", "-hup", "a"}, call{tool: "killall", sig: term, why: why}},
		{"killall -eX", []string{"killall", "-eX", "a"}, call{tool: "killall", sig: term, exact: true, why: why}},
		{"killall -eI", []string{"killall", "-eI", "a"}, call{tool: "killall", sig: term, exact: true, why: why}},
		{"killall -BOGUS", []string{"killall", "-BOGUS", "a"}, call{tool: "killall", sig: -1, why: why}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := parseKill(tt.argv)
			got.quit = false
			if got.why != "" {
				got.why = why
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(call{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("parseKill(%q) (-want +got):\n%s", tt.argv, diff)
			}
		})
	}
}

func TestKills(t *testing.T) {
	tests := []struct {
		argv []string
		want bool
	}{
		{[]string{"kill", "1"}, true},
		{[]string{"kill", "-9", "1"}, true},
		{[]string{"kill", "-s", "int", "1"}, true},
		{[]string{"kill", "-SIGHUP", "1"}, true},
		{[]string{"kill", "-QUIT", "1"}, true},
		{[]string{"kill", "-ABRT", "1"}, true},
		{[]string{"kill", "-USR1", "1"}, true},
		{[]string{"kill", "-usr2", "1"}, true},
		{[]string{"kill", "-ALRM", "1"}, true},
		{[]string{"kill", "-PIPE", "1"}, true},
		{[]string{"kill", "-SEGV", "1"}, true},
		{[]string{"kill", "-RTMIN+3", "1"}, true},
		{[]string{"kill", "-BOGUS", "1"}, true},
		{[]string{"kill", "%1"}, true},
		{[]string{"kill", "-0", "1"}, false},
		{[]string{"kill", "-CONT", "1"}, false},
		{[]string{"kill", "-STOP", "1"}, false},
		{[]string{"kill", "-19", "1"}, false},
		{[]string{"kill", "-TSTP", "1"}, false},
		{[]string{"kill", "-ttin", "1"}, false},
		{[]string{"kill", "-TTOU", "1"}, false},
		{[]string{"kill", "-WINCH", "1"}, false},
		{[]string{"kill", "-SIGCHLD", "1"}, false},
		{[]string{"kill", "-CLD", "1"}, false},
		{[]string{"kill", "-URG", "1"}, false},
		{[]string{"kill", "-l"}, false},
		{[]string{"kill", "-9"}, false},
		{[]string{"pkill", "-STOP", "x"}, false},
		{[]string{"pkill", "x"}, true},
		{[]string{"pkill", "--signal", "cont", "x"}, false},
		{[]string{"killall", "-CONT", "x"}, false},
		{[]string{"killall", "-s", "KILL", "x"}, true},
		{[]string{"killall", "x"}, true},
		{[]string{"ls"}, false},
	}
	for _, tt := range tests {
		if got := Kills(tt.argv); got != tt.want {
			t.Errorf("Kills(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
}

// canon writes c again as a command of its tool: parsing it must give c
// back.
func canon(argv0 string, c call) []string {
	sig := strconv.Itoa(c.sig)
	switch c.tool {
	case "kill":
		out := []string{argv0, "-" + sig, "--"}
		for _, p := range c.pids {
			out = append(out, strconv.Itoa(p))
		}
		for _, g := range c.groups {
			out = append(out, strconv.Itoa(-g))
		}
		return out
	case "pkill":
		return append([]string{argv0, "-" + sig}, c.pgrep...)
	default:
		out := []string{argv0, "-s", sig}
		for _, f := range []struct {
			on   bool
			flag string
		}{{c.exact, "-e"}, {c.fold, "-I"}, {c.pgid, "-g"}} {
			if f.on {
				out = append(out, f.flag)
			}
		}
		if c.user != "" {
			out = append(out, "-u", c.user)
		}
		return append(append(out, "--"), c.names...)
	}
}

func FuzzParseKill(f *testing.F) {
	for _, s := range []string{
		"0 -9\x00123", "0 --\x00-55\x007", "0 -s\x00HUP\x00%1", "1 -9\x00--\x00-55", "1 -55",
		"1 --signal=KILL\x00-q\x001\x0012", "2 -f\x00sleep 1000", "2 -n\x00-uroot\x00-HUP\x00x",
		"2 --sig\x00TERM\x00-F\x00/run/x.pid", "3 -INT\x00-e\x00nginx", "3 -u\x00bob", "3 -ve\x00-signal\x009\x00a",
		"0 -l", "1 -0\x001", "2 -0\x00x", "3 -r\x00a.*", "3 -hup\x00x", "0 -sKILL\x00-n9\x00-7",
	} {
		f.Add(s[0]-'0', s[2:])
	}
	tools := []string{"kill", "/bin/kill", "pkill", "killall"}
	f.Fuzz(func(t *testing.T, tool uint8, args string) {
		argv := append([]string{tools[int(tool)%len(tools)]}, strings.Split(args, "\x00")...)
		c := parseKill(argv)
		if c.tool == "" || c.sig < -1 || c.sig > rtMax {
			t.Fatalf("parseKill(%q) = %+v", argv, c)
		}
		if c.sig < 0 && !c.none && c.why == "" {
			t.Fatalf("parseKill(%q): a signal it cannot name, and targets: %+v", argv, c)
		}
		if c.none && (c.why != "" || len(c.pids)+len(c.groups)+len(c.pgrep)+len(c.names) > 0) {
			t.Fatalf("parseKill(%q): signals nothing, and targets: %+v", argv, c)
		}
		if c.sig == 0 && !c.none {
			t.Fatalf("parseKill(%q): signal 0 with targets: %+v", argv, c)
		}
		if got := Kills(argv); got != (!c.none && (c.sig < 0 || killsByDefault(c.sig))) {
			t.Fatalf("Kills(%q) = %v for %+v", argv, got, c)
		}
		if c.none || c.why != "" {
			return
		}
		switch c.tool {
		case "kill":
			if len(c.pids)+len(c.groups) == 0 || slices.ContainsFunc(c.pids, func(p int) bool { return p <= 0 }) ||
				slices.ContainsFunc(c.groups, func(g int) bool { return g <= 1 }) {
				t.Fatalf("parseKill(%q): pids %v, groups %v", argv, c.pids, c.groups)
			}
		case "pkill":
			if len(c.pgrep) == 0 {
				t.Fatalf("parseKill(%q): nothing to select with", argv)
			}
		case "killall":
			if len(c.names) == 0 && c.user == "" {
				t.Fatalf("parseKill(%q): neither names nor user", argv)
			}
		}
		again := canon(argv[0], c)
		d := parseKill(again)
		c.quit, d.quit = false, false
		if diff := cmp.Diff(c, d, cmp.AllowUnexported(call{}), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("parseKill(%q) then %q (-first +again):\n%s", argv, again, diff)
		}
	})
}

func TestKillallName(t *testing.T) {
	const long = "abcdefghijklmnopqrst" // 20 bytes: comm keeps 15
	comm := long[:15]
	tests := []struct {
		name, match, comm string
		argv              []string
		c                 call
		want              bool
	}{
		{"short", "nginx", "nginx", []string{"nginx: master"}, call{}, true},
		{"short other", "nginx", "nginx-x", []string{"nginx-x"}, call{}, false},
		{"fold", "NGINX", "nginx", nil, call{fold: true}, true},
		{"no fold", "NGINX", "nginx", nil, call{}, false},
		{"long by argv", long, comm, []string{"/opt/bin/" + long, "-d"}, call{}, true},
		{"long, second argument", long, comm, []string{"python3", "/srv/" + long}, call{}, true},
		{"cut name with argv", comm, comm, []string{"/opt/bin/" + long}, call{}, false},
		{"long without argv", long, comm, []string{"renamed"}, call{}, true},
		{"long without argv -e", long, comm, []string{"renamed"}, call{exact: true}, false},
		{"long other", long[:16] + "x", comm, []string{long}, call{}, false},
		{"long fold", strings.ToUpper(long), comm, []string{long}, call{fold: true}, true},
	}
	for _, tt := range tests {
		if got := killallName(tt.c, tt.match, tt.comm, tt.argv); got != tt.want {
			t.Errorf("%s: killallName(%q, %q, %q) = %v, want %v", tt.name, tt.match, tt.comm, tt.argv, got, tt.want)
		}
	}
}

// unique returns n random lower-case hex digits.
func unique(t *testing.T, n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

// start starts cmd and reads it, once it has run its program. It kills
// it by pid when the test ends.
func start(t *testing.T, cmd *exec.Cmd) Proc {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	p, err := Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sleeper starts sleep with an argument no other process has; it returns
// the process and that argument.
func sleeper(t *testing.T) (Proc, string) {
	t.Helper()
	arg := "1000." + strings.Map(func(r rune) rune {
		if r > '9' {
			return '0' + (r-'a')%10
		}
		return r
	}, unique(t, 12))
	return start(t, exec.Command("sleep", arg)), arg
}

// group starts, in a process group of its own, a shell that starts sleep
// in the background and then runs prog. It returns the two processes.
func group(t *testing.T, prog string) (leader, other Proc) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `sleep 1001 & echo $! > bg.tmp && mv bg.tmp bg; exec "$0" 1002`, prog)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start(t, cmd)
	pid := cmd.Process.Pid
	var bg int
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "bg")); err == nil && bg == 0 {
			if bg, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(bg, syscall.SIGKILL) })
		}
		var err error
		if leader, err = Read(pid); err != nil {
			t.Fatal(err)
		}
		if bg != 0 && slices.Equal(leader.Argv, []string{prog, "1002"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell did not start its two processes: %+v", leader)
		}
		time.Sleep(time.Millisecond)
	}
	other, err := Read(bg)
	if err != nil {
		t.Fatal(err)
	}
	if leader.Group != pid || other.Group != pid {
		t.Fatalf("groups: %d and %d, want %d", leader.Group, other.Group, pid)
	}
	return leader, other
}

// check runs Targets(argv) and compares what it found with want (by pid
// and start time), and ok with wantOK.
func check(t *testing.T, argv []string, wantOK bool, want ...Proc) {
	t.Helper()
	ps, ok, err := Targets(argv)
	if err != nil {
		t.Fatalf("Targets(%q): %v", argv, err)
	}
	if ok != wantOK {
		t.Fatalf("Targets(%q): ok = %v, want %v", argv, ok, wantOK)
	}
	slices.SortFunc(want, func(a, b Proc) int { return a.PID - b.PID })
	type id struct {
		PID   int
		Start uint64
	}
	ids := func(ps []Proc) (out []id) {
		for _, p := range ps {
			out = append(out, id{p.PID, p.Start})
		}
		return out
	}
	if diff := cmp.Diff(ids(want), ids(ps), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Targets(%q) (-want +got):\n%s", argv, diff)
	}
}

func TestTargetsKill(t *testing.T) {
	t.Parallel()
	p, _ := sleeper(t)
	pid := strconv.Itoa(p.PID)
	for _, argv := range [][]string{
		{"kill", pid}, {"kill", "-9", pid}, {"kill", "-s", "HUP", pid}, {"kill", "-STOP", pid},
		{"kill", "--", pid}, {"kill", pid, "99999999"}, {"/bin/kill", "-KILL", pid}, {"/usr/bin/kill", pid, "-TERM"},
	} {
		check(t, argv, true, p)
	}
	for _, argv := range [][]string{{"kill", "-0", pid}, {"kill", "-s", "0", pid}, {"kill", "-l"}, {"/bin/kill", "-L"}, {"kill", "99999999"}, {"kill"}} {
		check(t, argv, true)
	}
	for _, argv := range [][]string{{"kill", "%1"}, {"kill", "--", "-1"}, {"kill", "-9", "-1"}, {"kill", "0"}, {"kill", "-BOGUS", pid}, {"kill", pid, "%2"}, {"ls"}} {
		check(t, argv, false)
	}
}

func TestTargetsKillGroup(t *testing.T) {
	t.Parallel()
	leader, other := group(t, "sleep")
	g := strconv.Itoa(leader.Group)
	for _, argv := range [][]string{{"kill", "--", "-" + g}, {"kill", "-9", "-" + g}, {"kill", "-s", "TERM", "-" + g}, {"/bin/kill", "-9", "--", "-" + g}} {
		check(t, argv, true, leader, other)
	}
	check(t, []string{"kill", strconv.Itoa(leader.PID)}, true, leader)
	// procps' kill reads -PGID before "--" as options, and each version
	// differently.
	check(t, []string{"/bin/kill", "-9", "-" + g}, false)
}

func TestTargetsPkill(t *testing.T) {
	t.Parallel()
	p, arg := sleeper(t)
	pat := "sleep " + regexp.QuoteMeta(arg)
	for _, argv := range [][]string{
		{"pkill", "-f", pat}, {"pkill", "-9", "-f", pat}, {"pkill", "--signal", "HUP", "-e", "-f", pat},
		{"pkill", "-f", "-n", pat}, {"pkill", "-fo", pat}, {"/usr/bin/pkill", pat, "-f", "-KILL"},
		{"pkill", "-f", "-x", pat}, {"pkill", "-P", strconv.Itoa(os.Getpid()), "-f", pat},
	} {
		check(t, argv, true, p)
	}
	check(t, []string{"pkill", "-0", "-f", pat}, true)
	check(t, []string{"pkill", "-f", "no such process " + unique(t, 16)}, true)
	check(t, []string{"pkill", "-v", "sleep"}, false)
	check(t, []string{"pkill", "-u", "no-such-user-" + unique(t, 8), "x"}, false) // pgrep refuses it
	check(t, []string{"pkill", "-f"}, false)                                      // pgrep: no criteria
	check(t, []string{"pkill", "-9"}, true)                                       // no options

	// A pattern in the caller's own command line does not name the caller.
	ps, ok, err := Targets([]string{"pkill", "-f", regexp.QuoteMeta(os.Args[0])})
	if err != nil || !ok || slices.ContainsFunc(ps, func(q Proc) bool { return q.PID == os.Getpid() }) {
		t.Errorf("Targets(pkill -f %s) = %v, %v, %v: names the caller", os.Args[0], ps, ok, err)
	}
}

// copySleep copies sleep to dir as name.
func copySleep(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// startCopy copies sleep to dir as name and starts it, with argv0 as its
// argv[0] when that is not "".
func startCopy(t *testing.T, dir, name, argv0 string) (Proc, string) {
	t.Helper()
	path := copySleep(t, dir, name)
	cmd := exec.Command(path, "1003")
	if argv0 != "" {
		cmd.Args[0] = argv0
	}
	return start(t, cmd), path
}

func TestTargetsKillall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := "u" + unique(t, 10)
	p, path := startCopy(t, dir, name, "")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"killall", name}, {"killall", "-9", name}, {"killall", "-KILL", name}, {"killall", "-INT", name},
		{"killall", "-s", "HUP", name}, {"killall", "--signal=TERM", name}, {"killall", "-I", strings.ToUpper(name)},
		{"killall", "-u", me.Username, name}, {"killall", "-e", "-w", "-q", name}, {"killall", name, "no-such-" + unique(t, 6)},
		{"killall", path}, {"/usr/bin/killall", "-v", name},
	} {
		check(t, argv, true, p)
	}
	for _, argv := range [][]string{{"killall", strings.ToUpper(name)}, {"killall", name[:len(name)-1]}, {"killall", "-0", name}, {"killall", "-l"}} {
		check(t, argv, true)
	}
	for _, argv := range [][]string{
		{"killall", "-r", name}, {"killall", "-i", name}, {"killall", "-y", "1h", name}, {"killall", "-hup", name},
		{"killall", "-u", "no-such-user-" + unique(t, 8), name}, {"killall", filepath.Join(dir, "no-such-file")},
	} {
		check(t, argv, false)
	}

	// The kernel cuts comm to 15 bytes; killall matches the name in argv.
	long := "v" + unique(t, 19)
	q, _ := startCopy(t, dir, long, "")
	if q.Comm != long[:15] {
		t.Fatalf("comm %q, want %q", q.Comm, long[:15])
	}
	check(t, []string{"killall", long}, true, q)
	check(t, []string{"killall", "-e", long}, true, q)
	check(t, []string{"killall", long[:15]}, true)
	// With no argument that starts with comm, killall compares comm, and
	// -e skips the process.
	r, _ := startCopy(t, dir, "w"+unique(t, 19), "renamed")
	check(t, []string{"killall", r.Comm + "zzz"}, true, r)
	check(t, []string{"killall", "-e", r.Comm + "zzz"}, true)
}

func TestTargetsKillallGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := "g" + unique(t, 10)
	path := copySleep(t, dir, name)
	leader, other := group(t, path)
	if leader.Comm != name {
		t.Fatalf("leader runs %q, want %q", leader.Comm, name)
	}
	check(t, []string{"killall", "-g", name}, true, leader, other)
	check(t, []string{"killall", name}, true, leader)
}

func TestGone(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "1004")
	p := start(t, cmd)
	q, _ := sleeper(t)
	before, ok, err := Targets([]string{"kill", strconv.Itoa(p.PID), strconv.Itoa(q.PID)})
	if err != nil || !ok || len(before) != 2 {
		t.Fatalf("Targets = %v, %v, %v", before, ok, err)
	}
	if g := Gone(before); len(g) != 0 {
		t.Fatalf("Gone before any ended = %v", g)
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if g := Gone(before); len(g) != 1 || !g[0].Same(p) {
		t.Errorf("Gone = %v, want only %d", g, p.PID)
	}
	// The same pid, started at another time, is another process.
	reused := q
	reused.Start++
	if g := Gone([]Proc{q, reused}); len(g) != 1 || g[0].Start != reused.Start {
		t.Errorf("Gone of a reused pid = %v", g)
	}
}
