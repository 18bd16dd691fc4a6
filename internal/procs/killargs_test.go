package procs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

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
		{"procps -- -PGID past 93", []string{"/bin/kill", "--", "-99999"}, call{tool: "kill", sig: term, groups: []int{99999}}},
		{"procps -65 is a signal", []string{"/bin/kill", "--", "5", "-65"}, call{tool: "kill", sig: -1, why: why}},
		{"procps -q not a number", []string{"/bin/kill", "-q", "x", "5"}, call{tool: "kill", sig: term, none: true}},

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
		{"killall -ig", []string{"killall", "-ig", "a"}, call{tool: "killall", sig: term, names: []string{"a"}, fold: true}},
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

func ExampleKills() {
	fmt.Println(Kills([]string{"pkill", "-f", "server.py"}), Kills([]string{"kill", "-STOP", "1234"}), Kills([]string{"kill", "-l"}))
	// Output: true false false
}
