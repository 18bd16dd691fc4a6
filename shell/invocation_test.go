package shell

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		argv []string
		want invocation
	}{
		{"no arguments reads stdin", []string{"bash"}, invocation{Personality: "bash", Mode: modeStdin}},
		{"-c", []string{"bash", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"-c with name and args", []string{"bash", "-c", "echo $0 $1", "n", "a"}, invocation{Personality: "bash", Mode: modeCommand, Command: "echo $0 $1"}},
		{"-lc (Codex)", []string{"bash", "-lc", "ls"}, invocation{Personality: "bash", Login: true, Mode: modeCommand, Command: "ls"}},
		{"-l -c (E2B)", []string{"/bin/bash", "-l", "-c", "ls"}, invocation{Personality: "bash", Login: true, Mode: modeCommand, Command: "ls"}},
		{"-i -c (Aider)", []string{"/bin/bash", "-i", "-c", "ls"}, invocation{Personality: "bash", Interactive: true, Mode: modeCommand, Command: "ls"}},
		{"login argv[0]", []string{"-bash", "-c", "ls"}, invocation{Personality: "bash", Login: true, Mode: modeCommand, Command: "ls"}},
		{"--login first", []string{"bash", "--login", "--norc", "-c", "ls"}, invocation{Personality: "bash", Login: true, Mode: modeCommand, Command: "ls"}},
		{"--rcfile takes a value", []string{"bash", "--rcfile", "-c", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"-c after other flags", []string{"bash", "-e", "-o", "pipefail", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"-c before other flags", []string{"bash", "-c", "-e", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"-o in a group takes the next word", []string{"bash", "-eo", "pipefail", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"-o posix", []string{"bash", "-o", "posix", "-c", "ls"}, invocation{Personality: "bash", POSIX: true, Mode: modeCommand, Command: "ls"}},
		{"+o posix", []string{"bash", "+o", "posix", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"--posix", []string{"bash", "--posix", "-c", "ls"}, invocation{Personality: "bash", POSIX: true, Mode: modeCommand, Command: "ls"}},
		{"-- ends options", []string{"bash", "--", "-x.sh", "a"}, invocation{Personality: "bash", Mode: modeScript, Script: "-x.sh"}},
		{"- ends options", []string{"bash", "-", "script"}, invocation{Personality: "bash", Mode: modeScript, Script: "script"}},
		{"script with args", []string{"bash", "run.sh", "-c", "x"}, invocation{Personality: "bash", Mode: modeScript, Script: "run.sh"}},
		{"-s with args", []string{"bash", "-s", "a", "b"}, invocation{Personality: "bash", Mode: modeStdin}},
		{"-c wins over -s", []string{"bash", "-s", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"sh", []string{"sh", "-c", "ls"}, invocation{Personality: "sh", POSIX: true, Mode: modeCommand, Command: "ls"}},
		{"/bin/sh", []string{"/bin/sh", "-c", "ls"}, invocation{Personality: "sh", POSIX: true, Mode: modeCommand, Command: "ls"}},
		{"-sh login", []string{"-sh"}, invocation{Personality: "sh", POSIX: true, Login: true, Mode: modeStdin}},
		{"sh has no long options", []string{"sh", "--posix", "-c", "ls"}, invocation{Personality: "sh", POSIX: true, Mode: modeNothing}},
		{"--version", []string{"bash", "--version"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"--help", []string{"bash", "--help"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"-n runs nothing", []string{"bash", "-n", "x.sh"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"-c without its string", []string{"bash", "-c"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"-o alone lists options, then reads stdin", []string{"bash", "-o"}, invocation{Personality: "bash", Mode: modeStdin}},
		{"+O alone lists options, then runs -c", []string{"bash", "-c", "ls", "+O"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"+c is -c", []string{"bash", "+c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"+s is -s for bash", []string{"bash", "+s", "a"}, invocation{Personality: "bash", Mode: modeStdin}},
		{"+s undoes -s for sh", []string{"sh", "-s", "+s", "a.sh"}, invocation{Personality: "sh", POSIX: true, Mode: modeScript, Script: "a.sh"}},
		{"+n undoes -n", []string{"bash", "-n", "+n", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"-D runs nothing", []string{"bash", "-D", "+D", "-c", "ls"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"--debug runs", []string{"bash", "--debug", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"--pretty-print runs -c", []string{"bash", "--pretty-print", "-c", "ls"}, invocation{Personality: "bash", Mode: modeCommand, Command: "ls"}},
		{"--pretty-print prints a script", []string{"bash", "--pretty-print", "x.sh"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"sh -V (dash's vi mode)", []string{"sh", "-V", "-c", "ls"}, invocation{Personality: "sh", POSIX: true, Mode: modeCommand, Command: "ls"}},
		{"sh has no -h", []string{"sh", "-h", "-c", "ls"}, invocation{Personality: "sh", POSIX: true, Mode: modeNothing}},
		{"invalid option", []string{"bash", "-Z", "-c", "ls"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"invalid long option", []string{"bash", "--nope", "-c", "ls"}, invocation{Personality: "bash", Mode: modeNothing}},
		{"empty argv", nil, invocation{Personality: "bash", Mode: modeStdin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := parseArgsByName(tt.argv)
			got.Argv = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseArgsByName(%q) (-want +got):\n%s", tt.argv, diff)
			}
		})
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("bash\x00-lc\x00ls")
	f.Add("-sh\x00-o\x00posix\x00x")
	f.Fuzz(func(t *testing.T, s string) {
		var argv []string
		start := 0
		for i := 0; i <= len(s); i++ {
			if i == len(s) || s[i] == 0 {
				argv = append(argv, s[start:i])
				start = i + 1
			}
		}
		inv := parseArgsByName(argv)
		if inv.Mode == modeCommand && inv.Command == "" && !contains(argv, "") {
			t.Errorf("modeCommand with no command from %q", argv)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A file named sh that is not the system's sh (a copy of undosh standing
// in for bash, as bash's own tests make) is bash in POSIX mode; the
// system's sh, by path or through PATH, stays sh.
func TestSystemSh(t *testing.T) {
	d := t.TempDir()
	copySh := filepath.Join(d, "sh")
	if err := os.WriteFile(copySh, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	env := func(path string) func(string) string {
		return func(k string) string {
			if k == "PATH" {
				return path
			}
			return ""
		}
	}
	for _, tc := range []struct {
		argv0, path string
		want        bool
	}{
		{"/bin/sh", "", true},
		{"-sh", "/usr/bin:/bin", true},
		{"sh", "/usr/bin:/bin", true},
		{"dash", d, true},
		{copySh, "/usr/bin:/bin", false},
		{"sh", d + ":/usr/bin:/bin", false},
		{"./sh", "", false},
		{"sh", "/nonexistent", true},
	} {
		if got := systemSh(tc.argv0, d, env(tc.path)); got != tc.want {
			t.Errorf("systemSh(%q, PATH=%q) = %v, want %v", tc.argv0, tc.path, got, tc.want)
		}
	}
	inv := parseInvocation([]string{copySh, "--posix", "-c", "echo"}, "", d, env(""))
	if inv.Personality != "bash" || !inv.POSIX || inv.Mode != modeCommand {
		t.Errorf("a copy named sh: %+v, want bash in POSIX mode taking bash's options", inv)
	}
	if inv := parseInvocation([]string{"/bin/sh", "-c", "echo"}, "", d, env("")); inv.Personality != "sh" {
		t.Errorf("/bin/sh: personality %q", inv.Personality)
	}
}

// TestShellIsSh: the file run decides the personality, through every
// symbolic link on the way; argv[0] decides only for undosh run by its
// own name.
func TestShellIsSh(t *testing.T) {
	sys, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	d := t.TempDir()
	for name, target := range map[string]string{
		"sh":       "/usr/bin/bash", // a link named sh to bash is bash, in POSIX mode
		"to-sh":    "/bin/sh",       // a link to the system's sh is sh
		"sh2":      "to-sh",         // through two links
		"relative": "../" + filepath.Base(d) + "/to-sh",
		"loop":     "loop",
	} {
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	noPath := func(string) string { return "" }
	for _, tc := range []struct {
		execfn, argv0 string
		want          bool
	}{
		{"/bin/sh", "sh", true},
		{"/usr/bin/sh", "anything", true}, // exec -a anything /bin/sh
		{"/bin/sh", "-sh", true},
		{"/usr/bin/bash", "sh", false}, // exec -a sh /bin/bash
		{"/bin/bash", "-sh", false},    // a login shell named -sh
		{filepath.Join(d, "sh"), "sh", false},
		{filepath.Join(d, "to-sh"), "bash", true},
		{filepath.Join(d, "sh2"), "x", true},
		{filepath.Join(d, "relative"), "x", true},
		{filepath.Join(d, "loop"), "sh", false},
		{"./to-sh", "bash", true},                             // relative to cwd
		{sys, "sh", sys == "/bin/sh" || sys == "/usr/bin/sh"}, // what /bin/sh links to, run by its own path
		// undosh by its own name: argv[0] decides.
		{"/usr/lib/undosh/undosh", "sh", true},
		{"/usr/lib/undosh/undosh", "bash", false},
		{"", "dash", true},
		{"", "mybash", false},
	} {
		if got := shellIsSh(tc.execfn, tc.argv0, d, noPath); got != tc.want {
			t.Errorf("shellIsSh(%q, argv[0] %q) = %v, want %v", tc.execfn, tc.argv0, got, tc.want)
		}
	}
	for _, tc := range []struct {
		execfn      string
		argv        []string
		personality string
		posix       bool
	}{
		{"/usr/bin/bash", []string{"sh", "-c", "shopt -p"}, "bash", true},
		{"/usr/bin/bash", []string{"-sh", "-c", "echo"}, "bash", true},
		{"/usr/bin/bash", []string{"dash", "-c", "echo"}, "bash", false},
		{"/bin/sh", []string{"bash", "-c", "echo"}, "sh", true},
	} {
		inv := parseInvocation(tc.argv, tc.execfn, d, noPath)
		if inv.Personality != tc.personality || inv.POSIX != tc.posix || inv.Mode != modeCommand {
			t.Errorf("run as %s with argv %q: %+v, want %s, POSIX %v, -c", tc.execfn, tc.argv, inv, tc.personality, tc.posix)
		}
	}
}
