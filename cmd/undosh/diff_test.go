package main

// The differential suite: every case runs once through the real shell and
// once through undosh, with the same argv (argv[0] included), environment,
// working directory and standard input, and the two runs must give the
// same stdout, the same stderr and the same raw wait status (exit code and
// death by signal) byte for byte.
//
// Both runs of a case use the same paths: the case's directories are wiped
// and set up again between the runs, so nothing needs rewriting in the
// output.
//
// What undosh may add: a step that changes files runs as undosh's child
// with UNDOSH_STEP=<n> in its environment (cases that print the
// environment filter it out), and undosh writes lines of its own, starting
// "undosh: ", to stderr (a rollback notice, a note about the fallback
// policy). Those lines are taken out of undosh's stderr before the
// comparison, and the case says how many there must be and what each says.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/policy"
)

// dLaunchArg makes the test binary a launcher (see init): it blocks the
// signals named in the next argument, then execs the target with the rest
// as its argv. No shell can block signals, and the test process itself
// cannot hand a blocked mask to a child it starts with os/exec.
const dLaunchArg = "-undosh-difftest-launch"

func init() {
	if len(os.Args) > 4 && os.Args[1] == dLaunchArg {
		dLaunchBlocked(os.Args[2], os.Args[3], os.Args[4:])
	}
}

// dLaunchBlocked blocks the comma-separated signals (names without SIG)
// and execs path with argv. It never returns.
func dLaunchBlocked(block, path string, argv []string) {
	runtime.LockOSThread()
	var set unix.Sigset_t
	for _, name := range strings.Split(block, ",") {
		s := unix.SignalNum("SIG" + name)
		if s == 0 {
			fmt.Fprintf(os.Stderr, "launch: unknown signal %s\n", name)
			os.Exit(125)
		}
		set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		fmt.Fprintf(os.Stderr, "launch: block signals: %v\n", err)
		os.Exit(125)
	}
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "launch: exec %s: %v\n", path, err)
	os.Exit(125)
}

// dTarget is how a launcher script (diffCase.launch) runs the shell under
// test: $0 is the argv[0] the case gives, $1 the shell's path, the rest
// its arguments.
const dTarget = `p=$1; shift; exec -a "$0" "$p" "$@"`

// dRest runs the shell under test in a subshell, then reads the rest of
// stdin.
const dRest = `p=$1; shift; (exec -a "$0" "$p" "$@"); echo "status $?"; cat`

// diffDirs are a case's directories, the same for both runs.
type diffDirs struct {
	root string // holds the others; files a case needs outside the workspace
	work string // the working directory: the workspace
	home string // HOME
	bin  string // first on PATH
	st   string // UNDOSH_STATE_DIR
}

// expand replaces @R@, @W@ and @H@ with the case's directories.
func (d diffDirs) expand(s string) string {
	return strings.NewReplacer("@R@", d.root, "@W@", d.work, "@H@", d.home).Replace(s)
}

type diffCase struct {
	name string
	// argv is the command line: argv[0] as the caller gives it ("bash",
	// "-bash", "sh"), then the arguments. @R@, @W@ and @H@ are expanded.
	argv []string
	// sh: the baseline is /bin/sh, not /bin/bash (argv[0] names sh).
	sh    bool
	stdin string
	// stdinFile gives stdin as a regular file rather than a pipe.
	stdinFile bool
	// env is added to the base environment (later entries win).
	env []string
	// files are written before each run: path (relative to the case
	// root: w/… is the workspace, h/… HOME, bin/… on PATH) → content,
	// executable.
	files map[string]string
	// setup runs after files, before each run.
	setup func(t *testing.T, d diffDirs)
	// git makes the workspace a git repository with its files committed.
	git bool
	// launch, when set, is a bash script that sets up the process state
	// and then runs the shell under test with [dTarget].
	launch string
	// block, when set, launches through the test binary with these
	// signals blocked (comma-separated names without SIG).
	block string
	// fallback runs under a policy with host.fallback: git, so that
	// steps that change the machine run (with a note) instead of being
	// refused.
	fallback bool
	// notes are what undosh's own stderr lines must say, in order: one
	// substring for each line starting "undosh: ".
	notes []string
	// signal is sent to the started process once it has printed a line
	// "ready"; stdin stays an open pipe until the process ends.
	signal syscall.Signal
	// nobody runs both shells as user nobody.
	nobody bool
	// via, when set, runs each side's shell through a symbolic link of
	// this name (in a directory of its own) to it, as an installed undosh
	// is run through bash's path: the file run, not argv[0], decides the
	// personality.
	via string
	// systemSh runs undosh as the system's sh, /bin/sh (undoctl install
	// --sh), in a private mount namespace where sh's directory has an
	// overlay with sh linking to undosh; the baseline is the real sh.
	// It needs root.
	systemSh bool
	// check, when set, looks at each run's result before the comparison
	// and may blank out what legitimately differs (a pid).
	check func(r *diffResult) error
	// startErr: both runs must fail to start, with the same error.
	startErr bool
	// bug, when set, says what known bug makes the case differ; the case
	// is skipped unless UNDOSH_DIFF_BUGS is set. Take it away with the fix.
	bug string
}

type diffResult struct {
	stdout, stderr []byte
	ws             syscall.WaitStatus
	pid            int
	startErr       error
}

func (r *diffResult) String() string {
	switch {
	case r.startErr != nil:
		return "start: " + r.startErr.Error()
	case r.ws.Signaled():
		return fmt.Sprintf("killed by %v (wait status %#x)", r.ws.Signal(), int(r.ws))
	}
	return fmt.Sprintf("exit %d (wait status %#x)", r.ws.ExitStatus(), int(r.ws))
}

func dBash(script string, args ...string) []string {
	return append([]string{"bash", "-c", script}, args...)
}

func dSh(script string, args ...string) []string {
	return append([]string{"sh", "-c", script}, args...)
}

// dArgs returns n arguments a1 … an.
func dArgs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "a" + strconv.Itoa(i+1)
	}
	return out
}

// dAllBytes prints the 256 byte values in order.
const dAllBytes = `for i in {0..255}; do printf "\\$(printf %03o "$i")"; done`

const dProfile = "echo from-profile $0\n"

func diffCases() []diffCase {
	big := strings.Repeat("a", 131071) // MAX_ARG_STRLEN - 1
	k100 := strings.Repeat("b", 100000)
	var script200k strings.Builder
	for i := 0; script200k.Len() < 200000; i++ {
		fmt.Fprintf(&script200k, "echo line %d\n", i)
	}
	rolled := []string{"rolled back"}
	return []diffCase{
		// argv, $0 and $@
		{name: "c/name-and-args", argv: dBash(`echo "$0" "$@"; echo $#`, "name", "a", "b")},
		{name: "c/no-name", argv: dBash(`echo "$0" $#`)},
		{name: "c/dashdash-is-name", argv: dBash(`echo "$0|$1"`, "--", "a")},
		{name: "c/dashdash-before-string", argv: []string{"bash", "-c", "--", `echo "$0|$1"`, "x", "y"}},
		{name: "c/special-args", argv: dBash(`printf '[%s]\n' "$0" "$@"`, "n", "", "a b", "*", "$(id)", "'q'", "\n", "-x", "--")},
		{name: "c/option-after-c", argv: []string{"bash", "-c", "-e", `false; echo no`}},
		{name: "c/ce", argv: []string{"bash", "-ce", `false; echo no`}},
		{name: "c/ec-dollar-dash", argv: []string{"bash", "-ec", `echo $-`}},
		{name: "argv0/custom", argv: []string{"mybash", "-c", `echo "$0"; echo "$BASH"`}},
		{name: "argv0/empty", argv: []string{"", "-c", `echo "[$0]"`}},
		{name: "argv0/dash", sh: true, argv: []string{"dash", "-c", `echo "$0"; echo x > f; false`}, notes: rolled},
		{name: "argv0/absolute", argv: []string{"/usr/bin/bash", "-c", `echo "$0|$BASH"`}},
		{name: "argv0/dot-relative", argv: []string{"./bash", "-c", `echo "$0|$BASH"`}},
		{name: "argv0/dash-bash-BASH", argv: []string{"-bash", "-c", `echo "$0|$BASH"`}, env: []string{"SHELL=/bin/bash"}},

		// options
		{name: "opt/x", argv: []string{"bash", "-x", "-c", `echo hi; v=1`}},
		{name: "opt/v", argv: []string{"bash", "-v", "-c", `echo hi`}},
		{name: "opt/o-pipefail", argv: []string{"bash", "-o", "pipefail", "-c", `false | true; echo $?`}},
		{name: "opt/plus-o", argv: []string{"bash", "-o", "pipefail", "+o", "pipefail", "-c", `false | true; echo $?`}},
		{name: "opt/plus-e", argv: []string{"bash", "-e", "+e", "-c", `false; echo yes`}},
		{name: "opt/O-extglob", argv: []string{"bash", "-O", "extglob", "-c", `shopt extglob`}},
		{name: "opt/o-list", argv: []string{"bash", "-o"}},
		{name: "opt/O-list", argv: []string{"bash", "+O"}},
		// bash lists the options, then reads the script on stdin.
		{name: "opt/o-list-then-stdin", argv: []string{"bash", "-o"}, stdin: "echo x > f; echo ran; false\n", notes: rolled},
		{name: "opt/plus-c", argv: []string{"bash", "+c", `echo x > f; echo ran; false`}, notes: rolled},
		{name: "opt/plus-s", argv: []string{"bash", "+s", "a"}, stdin: "echo x > f; echo \"$@\"; false\n", notes: rolled},
		{name: "opt/O-invalid-name", argv: []string{"bash", "-O", "nosuch", "-c", "echo x > f"}},
		{name: "opt/n", argv: []string{"bash", "-n", "-c", `echo x > f`}},
		{name: "opt/n-syntax", argv: []string{"bash", "-n", "-c", `if then`}},
		{name: "opt/n-then-plus-n", argv: []string{"bash", "-n", "+n", "-c", `echo x > f; echo ran; false`}, notes: rolled},
		{name: "opt/D", argv: []string{"bash", "-D", "-c", `echo $"hello"; echo x > f`}},
		{name: "opt/debug", argv: []string{"bash", "--debug", "-c", `echo x > f; echo ran; false`}, notes: rolled},
		{name: "opt/pretty-print-c", argv: []string{"bash", "--pretty-print", "-c", `echo x > f; echo ran; false`}, notes: rolled},
		{name: "opt/pretty-print-script", argv: []string{"bash", "--pretty-print", "s.sh"}, files: map[string]string{"w/s.sh": "if true; then echo x > f; fi\n"}},
		{name: "opt/u", argv: dBash(`set -u; echo "$nope"; echo after`)},
		{name: "opt/r", argv: []string{"bash", "-r", "-c", `cd /; echo $?`}},
		{name: "opt/posix", argv: []string{"bash", "--posix", "-c", `echo "$SHELLOPTS"`}},
		{name: "opt/invalid-long", argv: []string{"bash", "--bogus"}},
		{name: "opt/abbreviated-long", argv: []string{"bash", "--vers"}},
		{name: "opt/long-after-short", argv: []string{"bash", "-x", "--posix", "-c", "echo hi"}},
		{name: "opt/invalid-short", argv: []string{"bash", "-Z", "-c", "echo hi"}},
		{name: "opt/c-without-string", argv: []string{"bash", "-c"}},
		{name: "opt/o-invalid-name", argv: []string{"bash", "-o", "nosuch", "-c", "echo hi"}},
		{name: "opt/rcfile-without-file", argv: []string{"bash", "--rcfile"}},
		{name: "opt/version", argv: []string{"bash", "--version"}},
		{name: "opt/help", argv: []string{"bash", "--help"}},

		// startup files
		{name: "login/argv0", argv: []string{"-bash", "-c", `echo body; shopt login_shell`}, files: map[string]string{"h/.bash_profile": dProfile}},
		{name: "login/l", argv: []string{"bash", "-l", "-c", `echo body`}, files: map[string]string{"h/.bash_profile": dProfile}},
		{name: "login/long", argv: []string{"bash", "--login", "-c", `echo body`}, files: map[string]string{"h/.bash_profile": dProfile}},
		{name: "login/profile", argv: []string{"bash", "-l", "-c", `echo body`}, files: map[string]string{"h/.profile": dProfile}},
		{name: "login/noprofile", argv: []string{"bash", "--noprofile", "-l", "-c", `echo body`}, files: map[string]string{"h/.bash_profile": dProfile}},
		{name: "login/logout", argv: []string{"-bash", "-c", `echo body; exit 3`}, files: map[string]string{"h/.bash_profile": dProfile, "h/.bash_logout": "echo logout\n"}},
		{name: "login/write", argv: []string{"-bash", "-c", `echo x > f; echo body; false`}, files: map[string]string{"h/.bash_profile": dProfile}, notes: rolled},
		{name: "login/sh", sh: true, argv: []string{"-sh", "-c", `echo body`}, files: map[string]string{"h/.profile": dProfile}},
		{name: "interactive/rcfile", argv: []string{"bash", "--rcfile", "@R@/rc", "-i", "-c", `echo body`}, files: map[string]string{"rc": "echo from-rc\n"}},
		{name: "interactive/bashrc", argv: []string{"bash", "-i", "-c", `echo body`}, files: map[string]string{"h/.bashrc": "echo from-bashrc\n"}},
		{name: "interactive/norc", argv: []string{"bash", "--norc", "-i", "-c", `echo $-`}, files: map[string]string{"h/.bashrc": "echo from-bashrc\n"}},
		{name: "interactive/stdin", argv: []string{"bash", "--norc", "-i"}, stdin: "echo $-\necho hi\n"},
		{name: "ssh-rule", argv: dBash(`echo body`), env: []string{"SSH_CLIENT=10.0.0.1 2222 22", "SHLVL=0"}, files: map[string]string{"h/.bashrc": "echo from-bashrc\n"}},

		// commands on stdin
		{name: "stdin/script", argv: []string{"bash"}, stdin: `echo "$0|$#|$-"` + "\n"},
		{name: "stdin/s-args", argv: []string{"bash", "-s", "a", "b"}, stdin: `echo "$0|$@|$-"` + "\n"},
		{name: "stdin/reads-itself-pipe", argv: []string{"bash"}, stdin: "read line; echo got $line; cat\ndata1\ndata2\n"},
		{name: "stdin/reads-itself-file", argv: []string{"bash"}, stdinFile: true, stdin: "read line; echo got $line; cat\ndata1\ndata2\n"},
		// head reads a block: from a pipe it takes the rest of the
		// script, from a file it seeks back to the end of its line.
		{name: "stdin/head-pipe", argv: []string{"bash"}, stdin: "head -n1\nline-a\necho after\n"},
		{name: "stdin/head-file", argv: []string{"bash"}, stdinFile: true, stdin: "head -n1\nline-a\necho after\n"},
		{name: "stdin/empty", argv: []string{"bash"}},
		{name: "stdin/status", argv: []string{"bash"}, stdin: "false\n"},
		{name: "stdin/syntax-error", argv: []string{"bash"}, stdin: "echo a\nif then\necho b\n"},
		// Over 10000 commands is unknown code (parser.Options.MaxCommands).
		{name: "stdin/15000-commands", argv: []string{"bash"}, stdin: script200k.String(), bug: "a script of more than 10000 commands (here 15000 echo lines) is unknown code, class fork: refused (126) under the default policy"},
		{name: "stdin/15000-commands-fallback", fallback: true, argv: []string{"bash"}, stdin: script200k.String() + "head -n1\nline-a\necho after\n", notes: []string{"note: this step changes the machine"}},
		{name: "stdin/150k-pipe", argv: []string{"bash"}, stdin: "cat <<'EOF' | wc -c\n" + strings.Repeat("0123456789abcde\n", 150000/16) + "EOF\nhead -n1\nline-a\necho after\n"},
		{name: "stdin/fd0-is-a-pipe", argv: []string{"bash"}, stdin: "[ -p /dev/stdin ] && echo pipe; [ -f /dev/stdin ] && echo file\n"},
		// The caller reads what the shell left of stdin.
		{name: "stdin/rest-for-caller-file", launch: dRest, stdinFile: true, argv: []string{"bash"}, stdin: "echo in-script\nexit 3\nrest of stdin\n"},
		{name: "stdin/rest-for-caller-pipe", launch: dRest, argv: []string{"bash"}, stdin: "echo in-script\nexit 3\nrest of stdin\n",
			bug: "shell/source.go readStdin reads a piped script to its end before anything runs, so what the shell would have left unread on the pipe (after `exit`) is gone for the caller: `{ bash; cat; }` loses \"rest of stdin\""},
		{name: "stdin/devnull", launch: `export BASH_ENV=@R@/envfile; ` + dTarget + ` </dev/null`, argv: []string{"bash"}, files: map[string]string{"envfile": "readlink /proc/$$/fd/0; [ -c /dev/stdin ] && echo chardev\n"}},
		{name: "stdin/sh", sh: true, argv: []string{"sh"}, stdin: "echo \"$0\"; read l; echo got $l\nx\n"},
		{name: "stdin/sh-s-args", sh: true, argv: []string{"sh", "-s", "a", "b"}, stdin: `echo "$@"` + "\n"},
		{name: "stdin/write-pipe", argv: []string{"bash"}, stdin: "echo x > f\nread line\necho got $line\ncat\ndata1\ndata2\n"},
		{name: "stdin/write-file", argv: []string{"bash"}, stdinFile: true, stdin: "echo x > f\nread line\necho got $line\ncat\ndata1\ndata2\n"},
		{name: "stdin/write-head-pipe", argv: []string{"bash"}, stdin: "echo x > f\nhead -n1\nline-a\necho after\n"},
		{name: "stdin/write-s-args", argv: []string{"bash", "-s", "a"}, stdin: "echo x > f; echo \"$@\"; exit 4\n", notes: rolled},

		// script files
		{name: "script/relative", argv: []string{"bash", "s.sh", "a", "b"}, files: map[string]string{"w/s.sh": `echo "$0|$@|$-"` + "\n"}},
		{name: "script/dot-relative", argv: []string{"bash", "./s.sh", "a"}, files: map[string]string{"w/s.sh": `echo "$0|$@"` + "\n"}},
		{name: "script/absolute", argv: []string{"bash", "@W@/s.sh", "a"}, files: map[string]string{"w/s.sh": `echo "$0|$@"` + "\n"}},
		{name: "script/on-path", argv: []string{"bash", "onpath.sh", "a"}, files: map[string]string{"bin/onpath.sh": `echo "$0|$@"` + "\n"}},
		{name: "script/missing", argv: []string{"bash", "nosuch.sh", "a"}},
		{name: "script/directory", argv: []string{"bash", "dir"}, setup: func(t *testing.T, d diffDirs) { dMkdir(t, filepath.Join(d.work, "dir")) }},
		{name: "script/binary", argv: []string{"bash", "bin.dat"}, files: map[string]string{"w/bin.dat": "\x7fELF\x02\x01\x01\x00\x00\x00echo no\n"}},
		{name: "script/empty", argv: []string{"bash", "empty.sh"}, files: map[string]string{"w/empty.sh": ""}},
		{name: "script/last-status", argv: []string{"bash", "s.sh"}, files: map[string]string{"w/s.sh": "true\nfalse\n"}},
		{name: "script/syntax-error", argv: []string{"bash", "s.sh"}, files: map[string]string{"w/s.sh": "echo a\nif then\necho b\n"}},
		{name: "script/reads-stdin", argv: []string{"bash", "s.sh"}, stdin: "data\n", files: map[string]string{"w/s.sh": "read l; echo got $l\n"}},
		{name: "script/dashdash", argv: []string{"bash", "--", "s.sh", "x"}, files: map[string]string{"w/s.sh": `echo "$0|$@"` + "\n"}},
		{name: "script/dash", argv: []string{"bash", "-", "s.sh", "x"}, files: map[string]string{"w/s.sh": `echo "$0|$@"` + "\n"}},
		{name: "script/space-in-name", argv: []string{"bash", "my script.sh", "a"}, files: map[string]string{"w/my script.sh": `echo "$0|$@"` + "\n"}},
		// bash <(…): the script is a pipe on fd 63.
		{name: "script/procsub", launch: `p=$1; shift; exec -a "$0" "$p" <(printf 'echo "$0|$1"; echo x > f; cat f\n') "$@"`, argv: []string{"bash", "a1"}},
		{name: "script/procsub-fails", launch: `p=$1; shift; exec -a "$0" "$p" <(printf 'echo x > f\nfalse\n') "$@"`, argv: []string{"bash", "a1"}, notes: rolled},
		{name: "script/dev-stdin-pipe", argv: []string{"bash", "/dev/stdin", "a"}, stdin: "echo \"$0|$1\"; read l; echo got $l\ndata\n"},
		{name: "script/dev-stdin-file", argv: []string{"bash", "/dev/stdin", "a"}, stdinFile: true, stdin: "echo \"$0|$1\"; read l; echo got $l\ndata\n"},
		{name: "script/dev-fd-file", launch: `p=$1; shift; exec -a "$0" "$p" "$@" 3<@R@/s3`, argv: []string{"bash", "/dev/fd/3"}, files: map[string]string{"s3": "echo \"$0\"; echo x > f; exit 4\n"}, notes: rolled},
		{name: "script/sh", sh: true, argv: []string{"sh", "s.sh", "a"}, files: map[string]string{"w/s.sh": `echo "$0|$@"` + "\n"}},
		{name: "script/write", argv: []string{"bash", "s.sh", "a", "b"}, files: map[string]string{"w/s.sh": "echo x > f\necho \"$0|$@|$-\"\n"}},
		{name: "script/write-fails", argv: []string{"bash", "s.sh"}, files: map[string]string{"w/s.sh": "echo x > f\nexit 5\n"}, notes: rolled},
		{name: "script/not-executable-126", argv: dBash(`./noexec.sh; echo $?`), setup: func(t *testing.T, d diffDirs) {
			dWriteFile(t, filepath.Join(d.work, "noexec.sh"), "echo no\n", 0o644)
		}},

		// exit statuses
		{name: "exit/0", argv: dBash(`exit 0`)},
		{name: "exit/1", argv: dBash(`exit 1`)},
		{name: "exit/2", argv: dBash(`exit 2`)},
		{name: "exit/builtin-misuse", argv: dBash(`declare -Z`)},
		{name: "exit/127", argv: dBash(`nosuch-command-xyz`)},
		{name: "exit/128+n", argv: dBash(`yes | head -1; echo "${PIPESTATUS[*]}"; sh -c 'exit 3'; echo $?`)},
		{name: "exit/300", argv: dBash(`exit 300`)},
		{name: "exit/-1", argv: dBash(`exit -1`)},
		{name: "exit/300-write", argv: dBash(`echo x > f; exit 300`), notes: rolled},
		{name: "exit/kill-self", argv: dBash(`echo before; kill -TERM $$; echo after`)},
		{name: "exit/kill-self-write", argv: dBash(`echo x > f; kill -TERM $$`), notes: []string{"killed by SIGTERM): rolled back"}},
		{name: "exit/kill-self-default-policy", argv: dBash(`kill -TERM $$`)},
		{name: "exit/kill-own-job", argv: dBash(`sleep 30 & kill $!; wait $!; echo "status $?"`)},
		{name: "exit/sigpipe", launch: dTarget + ` | head -1; echo "${PIPESTATUS[*]}"`, argv: dBash(`yes`)},
		{name: "exit/sigpipe-write", launch: dTarget + ` | head -1; echo "${PIPESTATUS[*]}"`, argv: dBash(`echo x > f; yes`), notes: []string{"killed by SIGPIPE"}},

		// syntax errors come from bash
		{name: "syntax/if-then", argv: dBash(`if then`)},
		{name: "syntax/eof-on-line-2", argv: dBash("echo a\n(")},
		{name: "syntax/unexpected-fi", argv: dBash(`echo ok; fi`)},
		{name: "syntax/arith", argv: dBash(`echo $((1+)); echo after`), bug: "an arithmetic error bash reports at run time (status 1, `operand expected`) is a parser syntax error; bash -n accepts it, so the step is unknown code and refused (126)"},
		{name: "syntax/arith-for", argv: dBash(`for ((;;`)},
		{name: "syntax/bad-substitution", argv: dBash(`echo ${a b}; echo after`), bug: "`${a b}` (bash: bad substitution at run time, status 1) is a parser syntax error that bash -n accepts, so the step is unknown code and refused (126)"},
		{name: "syntax/unterminated-quote", argv: dBash(`echo 'abc`)},
		{name: "syntax/write-then-error", argv: dBash("echo x > f\nif then"), notes: rolled},
		{name: "syntax/error-before-write", argv: dBash(`echo x > f; if then`)},
		{name: "syntax/bash-only", argv: dBash(`declare -A m=([k]=v); echo "${m[k]}"; [[ ab =~ ^a(.)$ ]] && echo "${BASH_REMATCH[1]}"; x=hi; echo "${x@Q}" "${x^^}"; echo {1..3}; echo $'\x41'`)},
		{name: "syntax/extglob-next-line", argv: dBash("shopt -s extglob\ncase ab in @(ab|cd)) echo match;; esac"), bug: "the parser does not see `shopt -s extglob` on an earlier line: @(…) on the next line is unknown code, refused (126)"},
		{name: "syntax/alias-next-line", argv: dBash("shopt -s expand_aliases; alias e='echo aliased'\ne hi")},
		{name: "syntax/case-fallthrough", argv: dBash(`case a in a) echo 1;& b) echo 2;; esac`)},
		{name: "syntax/pipe-amp", argv: dBash(`ls /nonexistent-xyz |& cat`)},
		{name: "syntax/function-keyword", argv: dBash(`function f { echo "f $1"; }; f x`)},
		{name: "syntax/invalid-utf8", argv: dBash("echo \xff\xfe ok"), bug: "invalid UTF-8 in the command text is a parser syntax error (bash -n accepts it), so `echo \\xff` is unknown code, refused (126)"},
		{name: "syntax/coproc", argv: dBash(`coproc cat; echo hi >&"${COPROC[1]}"; exec {COPROC[1]}>&-; read -r l <&"${COPROC[0]}"; echo "$l"`), bug: "`>&\"$fd\"` (a dynamic fd number) counts as a write to an unresolved path (policy unresolved_write, class fork): refused (126)"},

		// set -e and pipefail
		{name: "set/e", argv: dBash(`set -e; false; echo no`)},
		{name: "set/e-in-if", argv: dBash(`set -e; if false; then :; fi; echo yes`)},
		{name: "set/pipefail", argv: dBash(`set -o pipefail; false | true; echo $?; true | false; echo $?`)},
		{name: "set/e-pipefail-write", argv: dBash(`set -eo pipefail; echo x > f; false | true; echo no`), notes: rolled},

		// here-documents
		{name: "heredoc/expand", argv: dBash("x=1\ncat <<EOF\nval $x\n$(echo sub)\nEOF")},
		{name: "heredoc/quoted", argv: dBash("cat <<'EOF'\n$x `y`\nEOF")},
		{name: "heredoc/tabs", argv: dBash("cat <<-EOF\n\tindented\n\tEOF")},
		{name: "heredoc/herestring", argv: dBash(`cat <<< "here $((1+1))"`)},
		{name: "heredoc/to-file", argv: dBash("cat > f <<EOF\nline\nEOF\ncat f")},

		// output
		{name: "output/10MB", argv: dBash(`head -c 10485760 /dev/zero | tr '\0' x`)},
		{name: "output/10MB-write", argv: dBash(`echo x > f; head -c 10485760 /dev/zero | tr '\0' y`)},
		{name: "output/all-bytes", argv: dBash(dAllBytes)},
		{name: "output/all-bytes-write", argv: dBash(`echo x > f; ` + dAllBytes + `; ` + dAllBytes + ` >&2`)},
		{name: "output/interleaved", argv: dBash(`echo out; echo err >&2; echo out2`)},

		// exec
		{name: "exec/replace", argv: dBash(`exec echo hi`)},
		{name: "exec/fd", argv: dBash(`exec 3>&1; echo via3 >&3`)},
		{name: "exec/missing", argv: dBash(`exec nosuch-command-xyz; echo after`)},
		{name: "exec/a", argv: dBash(`exec -a foo bash -c 'echo $0'`)},
		{name: "exec/write", argv: dBash(`echo x > f; exec cat f`)},

		// traps
		{name: "trap/exit", argv: dBash(`trap 'echo bye; exit 3' EXIT; echo hi`)},
		{name: "trap/exit-keeps-status", argv: dBash(`trap 'echo bye' EXIT; exit 6`)},
		{name: "trap/err", argv: dBash(`trap 'echo err; exit 4' ERR; false; echo no`)},
		{name: "trap/term-self", argv: dBash(`trap 'echo t; exit 5' TERM; kill -TERM $$; echo after`)},
		{name: "trap/exit-write", argv: dBash(`trap 'echo bye; exit 3' EXIT; echo x > f`), notes: rolled},

		// environment
		{name: "env/BASH_ENV", argv: dBash(`echo body`), env: []string{"BASH_ENV=@R@/envfile"}, files: map[string]string{"envfile": "echo from-bash-env\n"}},
		{name: "env/BASH_ENV-script", argv: []string{"bash", "s.sh"}, env: []string{"BASH_ENV=@R@/envfile"}, files: map[string]string{"envfile": "echo from-bash-env\n", "w/s.sh": "echo body\n"}},
		{name: "env/BASH_ENV-sh", sh: true, argv: dSh(`echo body`), env: []string{"BASH_ENV=@R@/envfile"}, files: map[string]string{"envfile": "echo from-bash-env\n"}},
		{name: "env/BASH_ENV-write", argv: dBash(`echo x > f; echo body`), env: []string{"BASH_ENV=@R@/envfile"}, files: map[string]string{"envfile": "echo from-bash-env\n"}},
		{name: "env/SHELLOPTS-xtrace", argv: dBash(`echo hi`), env: []string{"SHELLOPTS=xtrace"}},
		{name: "env/SHELLOPTS-write", argv: dBash(`echo x > f; false; echo no`), env: []string{"SHELLOPTS=xtrace:errexit"}, notes: rolled},
		{name: "env/BASHOPTS", argv: dBash(`shopt extglob`), env: []string{"BASHOPTS=extglob"}},
		{name: "env/POSIXLY_CORRECT", argv: dBash(`echo "$SHELLOPTS"; shopt -o -q posix && echo posix`), env: []string{"POSIXLY_CORRECT=1"}},
		{name: "env/BASH_FUNC", argv: dBash(`f`), env: []string{"BASH_FUNC_f%%=() { echo from-f; }"}},
		{name: "env/BASH_FUNC-write", argv: dBash(`f > out; cat out`), env: []string{"BASH_FUNC_f%%=() { echo from-f; }"}},
		{name: "env/empty-value", argv: dBash(`echo "[${E-unset}]"; env | grep -c '^E=$'`), env: []string{"E="}},
		{name: "env/invalid-utf8", argv: dBash(`printf %s "$X" | od -An -tx1`), env: []string{"X=\xff\xfe\x80ok"}},
		{name: "env/invalid-utf8-write", argv: dBash(`printf %s "$X" > f; od -An -tx1 f`), env: []string{"X=\xff\xfe\x80ok"}},
		{name: "env/all", argv: dBash(`env | LC_ALL=C sort`), env: []string{"E=", "X=\xff", "BASH_FUNC_f%%=() { echo from-f; }"}},
		// A step that writes runs with UNDOSH_STEP in its environment:
		// filter it out.
		{name: "env/all-write", argv: dBash(`echo x > f; env | grep -v '^UNDOSH_STEP=' | LC_ALL=C sort`), env: []string{"E=", "X=\xff", "BASH_FUNC_f%%=() { echo from-f; }"}},

		// argv sizes and bytes
		{name: "argv/invalid-utf8", argv: dBash(`printf %s "$1" | od -An -tx1`, "n", "\xff\xfe")},
		{name: "argv/invalid-utf8-write", argv: dBash(`printf %s "$1" > f; od -An -tx1 f`, "n", "\xff\xfe")},
		{name: "argv/131071-bytes", argv: dBash(`echo ${#1}`, "n", big)},
		{name: "argv/300kB", argv: dBash(`echo $# ${#1} ${#2} ${#3}`, "n", k100, k100, k100)},
		{name: "argv/300kB-write", argv: dBash(`echo x > f; echo $# ${#1} ${#2} ${#3}`, "n", k100, k100, k100)},
		// One argument is at most MAX_ARG_STRLEN (128 KiB): both fail
		// to start with E2BIG.
		{name: "argv/300kB-one", argv: dBash(`echo ${#1}`, "n", strings.Repeat("c", 300000)), startErr: true},
		{name: "argv/20000", argv: dBash(`echo $# "${20000}"`, append([]string{"n"}, dArgs(20000)...)...)},
		{name: "argv/20000-write", argv: dBash(`echo x > f; echo $# "${20000}"`, append([]string{"n"}, dArgs(20000)...)...)},

		// umask and rlimits
		{name: "umask", launch: `umask 027; ` + dTarget, argv: dBash(`umask`)},
		{name: "umask/write", launch: `umask 027; ` + dTarget, argv: dBash(`echo x > f; stat -c %a f; umask`)},
		{name: "rlimit", launch: `ulimit -Sn 512; ulimit -Sc 0; ` + dTarget, argv: dBash(`ulimit -Sn; ulimit -c; ulimit -Hn`)},
		{name: "rlimit/write", launch: `ulimit -Sn 512; ulimit -Sc 0; ` + dTarget, argv: dBash(`echo x > f; ulimit -Sn; ulimit -c; ulimit -Hn`)},

		// working directory
		{name: "cwd/pwd-oldpwd", argv: dBash(`echo "$PWD|$OLDPWD"; pwd; cd - >/dev/null; pwd`), env: []string{"PWD=@W@", "OLDPWD=@H@"}},
		{name: "cwd/pwd-symlink", argv: dBash(`echo "$PWD"; pwd; pwd -P`), env: []string{"PWD=@R@/link"}, setup: dLinkWork},
		{name: "cwd/pwd-wrong", argv: dBash(`echo "$PWD"`), env: []string{"PWD=/"}},
		{name: "cwd/pwd-symlink-write", argv: dBash(`echo x > f; echo "$PWD"; pwd -P`), env: []string{"PWD=@R@/link"}, setup: dLinkWork},
		{name: "cwd/removed", launch: `cd gone && rmdir ../gone && ` + dTarget, argv: dBash(`echo hi; pwd`), setup: dMkGone},
		{name: "cwd/removed-write", launch: `cd gone && rmdir ../gone && ` + dTarget, argv: dBash(`echo x > f; echo $?`), setup: dMkGone, bug: "in a removed working directory (os.Getwd fails) shell.go run.main classifies with Cwd \"\", so `echo x > f` is an unresolved write (class fork) and is refused (126); bash runs it (the write fails, ENOENT)"},

		// signals
		{name: "sig/ignored", launch: `trap '' TERM USR1 PIPE; ` + dTarget, argv: dBash(`grep SigIgn /proc/$$/status; yes | head -1; echo ${PIPESTATUS[*]}; trap 'echo t' TERM; trap -p TERM`)},
		{name: "sig/ignored-write", launch: `trap '' TERM USR1 PIPE; ` + dTarget, argv: dBash(`echo x > f; grep SigIgn /proc/$$/status; yes | head -1; echo ${PIPESTATUS[*]}; trap 'echo t' TERM; trap -p TERM`)},
		{name: "sig/ignored-inherited", launch: `trap '' HUP INT QUIT USR2; ` + dTarget, argv: dBash(`grep SigIgn /proc/self/status`)},
		{name: "sig/ignored-inherited-write", launch: `trap '' HUP INT QUIT USR2; ` + dTarget, argv: dBash(`echo x > f; grep SigIgn /proc/self/status`)},
		{name: "sig/blocked", block: "USR1,USR2,TERM", argv: dBash(`grep SigBlk /proc/self/status`)},
		{name: "sig/blocked-write", block: "USR1,USR2,TERM", argv: dBash(`echo x > f; grep SigBlk /proc/self/status`)},
		{name: "sig/term-trapped", signal: syscall.SIGTERM, argv: dBash(`trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.05; done`)},
		{name: "sig/term-trapped-write", signal: syscall.SIGTERM, argv: dBash(`echo x > f; trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.05; done`), notes: rolled},
		{name: "sig/int", signal: syscall.SIGINT, argv: dBash(`echo ready; read x; echo after`)},
		{name: "sig/int-write", signal: syscall.SIGINT, argv: dBash(`echo x > f; echo ready; read x; echo after`), notes: []string{"killed by SIGINT): rolled back"}},
		{name: "sig/term", signal: syscall.SIGTERM, argv: dBash(`echo ready; read x; echo after`)},
		{name: "sig/hup-write", signal: syscall.SIGHUP, argv: dBash(`echo x > f; echo ready; read x; echo after`), notes: []string{"killed by SIGHUP): rolled back"}},

		// closed standard fds
		{name: "fd/stdout-closed", launch: dTarget + ` >&-`, argv: dBash(`echo hi`)},
		{name: "fd/stdout-closed-write", launch: dTarget + ` >&-`, argv: dBash(`echo x > f; echo hi`), notes: rolled},
		{name: "fd/stdin-closed", launch: dTarget + ` <&-`, argv: dBash(`cat; echo $?; ls /proc/self/fd | tr '\n' ' '`)},
		{name: "fd/stdin-closed-write", launch: dTarget + ` <&-`, argv: dBash(`echo x > f; cat; echo $?; ls /proc/self/fd | tr '\n' ' '`)},
		{name: "fd/stdin-closed-no-script", launch: dTarget + ` <&-`, argv: []string{"bash"}},
		{name: "fd/stderr-closed", launch: dTarget + ` 2>&-`, argv: dBash(`echo out; ls /nonexistent-xyz; echo $?; ls /proc/self/fd | tr '\n' ' '`)},
		// undosh says nothing on a closed stderr.
		{name: "fd/stderr-closed-write", launch: dTarget + ` 2>&-`, argv: dBash(`echo x > f; ls /proc/self/fd | tr '\n' ' '; false`)},
		{name: "fd/extra-open", launch: `exec 5</dev/null 7>&1; ` + dTarget, argv: dBash(`ls /proc/self/fd | tr '\n' ' '; echo via7 >&7`)},
		{name: "fd/extra-open-write", launch: `exec 5</dev/null 7>&1; ` + dTarget, argv: dBash(`echo x > f; ls /proc/self/fd | tr '\n' ' '; echo via7 >&7`)},

		// sh
		{name: "sh/c-args", sh: true, argv: dSh(`echo "$0" "$@"; echo $-`, "n", "a", "b")},
		{name: "sh/syntax", sh: true, argv: dSh(`if then`)},
		{name: "sh/c-without-string", sh: true, argv: []string{"sh", "-c"}},
		{name: "sh/invalid-option", sh: true, argv: []string{"sh", "--version"}},
		{name: "sh/write", sh: true, argv: dSh(`echo x > f; cat f`)},
		{name: "sh/write-fails", sh: true, argv: dSh(`touch a && false`), notes: rolled},
		{name: "sh/V-option", sh: true, argv: []string{"sh", "-V", "-c", `echo x > f; echo ran; false`}, notes: rolled},
		{name: "sh/plus-c", sh: true, argv: []string{"sh", "+c", `echo x > f; echo ran; false`}, notes: rolled},
		{name: "sh/h-invalid", sh: true, argv: []string{"sh", "-h", "-c", `echo x > f`}},
		{name: "sh/E-option", sh: true, argv: []string{"sh", "-E", "-c", `echo x > f; echo ran; false`}, notes: rolled},

		// The file run decides the personality; argv[0] only what bash
		// decides by it (issue 18). exec -a sh /bin/bash is bash in POSIX
		// mode, with bash's builtins, syntax and messages.
		{name: "personality/exec-a-sh", via: "bash", argv: dSh(`echo "$0"; echo "$SHELLOPTS"; [[ a == a ]] && echo dbl; echo $((1+))`)},
		{name: "personality/exec-a-sh-write", via: "bash", argv: dSh(`echo x > f; [[ :$SHELLOPTS: == *:posix:* ]] && echo posix; declare -A m; false`), notes: rolled},
		{name: "personality/exec-a-sh-syntax", via: "bash", argv: dSh(`echo ${x!}`)},
		{name: "personality/exec-a-sh-options", via: "bash", argv: []string{"sh", "--posix", "-O", "extglob", "-c", `shopt extglob; echo $-`}},
		{name: "personality/exec-a-sh-stdin", via: "bash", argv: []string{"sh"}, stdin: "echo $0; [[ :$SHELLOPTS: == *:posix:* ]] && echo posix\necho x > f; false\n", notes: rolled},
		{name: "personality/exec-a-sh-interactive", via: "bash", argv: []string{"sh", "-i"}, stdin: "echo hi\n[[ :$SHELLOPTS: == *:posix:* ]] && echo posix\n", env: []string{"PS1=\\s-prompt\\$ "}},
		{name: "personality/exec-a-dash", via: "bash", argv: []string{"dash", "-c", `[[ :$SHELLOPTS: == *:posix:* ]] || echo not-posix; echo "$0"`}},
		{name: "personality/login-sh", via: "bash", argv: []string{"-sh", "-c", `shopt login_shell; [[ :$SHELLOPTS: == *:posix:* ]] && echo posix`}, files: map[string]string{"h/.profile": dProfile, "h/.bash_profile": "echo bash-profile\n"}},
		{name: "personality/link-named-sh", via: "sh", argv: dSh(`echo "$0"; [[ :$SHELLOPTS: == *:posix:* ]] && echo posix; echo x > f; false`), notes: rolled},
		{name: "personality/system-sh", sh: true, systemSh: true, argv: dSh(`echo "$0"; [[ a == a ]] && echo dbl; echo done`)},
		{name: "personality/system-sh-as-bash", sh: true, systemSh: true, argv: []string{"bash", "-c", `echo "$0"; shopt; echo x > f; false`}, notes: rolled},
		{name: "personality/system-sh-login", sh: true, systemSh: true, argv: []string{"-sh", "-c", `echo body`}, files: map[string]string{"h/.profile": dProfile}},
		{name: "personality/link-named-sh-other-argv0", via: "sh", argv: []string{"mysh", "-c", `[[ :$SHELLOPTS: == *:posix:* ]] || echo not-posix; echo "$0"`}},

		// steps that change files
		{name: "write/echo-cat", argv: dBash(`echo x > f; cat f`)},
		{name: "write/touch-false", argv: dBash(`touch a && false`), notes: rolled},
		{name: "write/exit-3", argv: dBash(`echo x > f; exit 3`), notes: rolled},
		{name: "write/mkdir-false", argv: dBash(`mkdir d && echo y > d/z; false`), notes: rolled},
		{name: "write/rm-false", argv: dBash(`rm keep; ls; false`), files: map[string]string{"w/keep": "k\n"}, notes: rolled},
		{name: "write/git-ok", git: true, argv: dBash(`echo x > f; cat f; git status --short`), files: map[string]string{"w/tracked": "t\n"}},
		{name: "write/git-fails", git: true, argv: dBash(`echo more >> tracked; cat tracked; false`), files: map[string]string{"w/tracked": "t\n"}, notes: rolled},
		{name: "write/heredoc-fails", argv: dBash("cat > f <<EOF\nline\nEOF\nexit 9"), notes: rolled},
		{name: "write/vars", argv: dBash(`echo x > f; echo "$0|$@|$-|$BASH|$SHLVL|$BASH_EXECUTION_STRING"; tr '\0' '|' < /proc/$$/cmdline; echo; basename "$(readlink /proc/$$/exe)"`, "n", "a")},

		// what the shell reports about itself
		{name: "proc/ppid", argv: dBash(`echo $PPID`), check: dStdoutIs(func(r *diffResult) string { return fmt.Sprintf("%d\n", os.Getpid()) })},
		{name: "proc/pid", argv: dBash(`echo $$; echo $BASHPID`), check: dBlankStdout(func(r *diffResult) string { return fmt.Sprintf("%d\n%d\n", r.pid, r.pid) })},
		// A step that writes runs in the process the caller started
		// (shell/handover.go), whether it passes or is rolled back.
		{name: "proc/ppid-write", argv: dBash(`echo x > f; echo $PPID`), check: dStdoutIs(func(r *diffResult) string { return fmt.Sprintf("%d\n", os.Getpid()) })},
		{name: "proc/pid-write", argv: dBash(`echo x > f; echo $$`), check: dBlankStdout(func(r *diffResult) string { return fmt.Sprintf("%d\n", r.pid) })},
		{name: "proc/pid-write-file", argv: dBash(`echo $$ > pid; echo "$PPID" > ppid; cat pid ppid`), check: dPids("@PID@\n@PPID@\n")},
		{name: "proc/pid-write-fails", argv: dBash(`echo $$ > pid; cat pid; echo $PPID $BASHPID; false`), check: dPids("@PID@\n@PPID@ @PID@\n"), notes: rolled},
		{name: "proc/pid-script-fails", argv: []string{"bash", "s.sh"}, files: map[string]string{"w/s.sh": "echo x > f\necho $$ $PPID\nexit 4\n"}, check: dPids("@PID@ @PPID@\n"), notes: rolled},
		{name: "proc/pid-exec-last", argv: dBash(`echo x > f; echo $$; exec sh -c 'echo $$ $PPID; exit 3'`), check: dPids("@PID@\n@PID@ @PPID@\n"), notes: rolled},
		{name: "proc/pid-background-wait", argv: dBash(`echo x > f; (echo "sub $$") & sleep 0.05 & wait; echo "waited $? $$"; ( exit 5 ) & wait $!; echo "job $?"; false`),
			check: dPids("sub @PID@\nwaited 0 @PID@\njob 5\n"), notes: rolled},
		{name: "proc/pid-signalled", signal: syscall.SIGTERM, argv: dBash(`echo x > f; echo $$ $PPID; echo ready; read x; echo after`),
			check: dPids("@PID@ @PPID@\nready\n"), notes: []string{"killed by SIGTERM): rolled back"}},
		{name: "proc/pid-interrupted", signal: syscall.SIGINT, argv: dBash(`echo x > f; echo $$; echo ready; sleep 30`),
			check: dPids("@PID@\nready\n"), notes: []string{"killed by SIGINT): rolled back"}},
		{name: "proc/pid-kill-self", argv: dBash(`echo x > f; echo $$; kill -TERM $$`), check: dPids("@PID@\n"), notes: []string{"killed by SIGTERM): rolled back"}},
		{name: "proc/exe-comm", argv: dBash(`basename "$(readlink /proc/$$/exe)"; cat /proc/$$/comm`)},
		{name: "proc/cmdline", argv: dBash(`tr '\0' '|' < /proc/$$/cmdline`, "n", "a b", "")},
		{name: "proc/pgrp-session", argv: dBash(`read -r _ _ _ _ pgrp sid _ < /proc/$$/stat; [ "$pgrp" = "$TESTPGRP" ] && echo same-pgrp; echo $sid`), env: []string{"TESTPGRP=" + strconv.Itoa(syscall.Getpgrp())}},
		{name: "proc/dollar-dash", argv: dBash(`echo $-`)},
		{name: "proc/execution-string", argv: dBash(`echo "$BASH_EXECUTION_STRING"`)},
		{name: "proc/BASH", argv: dBash(`echo "$BASH"`)},
		{name: "proc/underscore", argv: dBash(`echo "$_"`)},
		{name: "proc/version", argv: dBash(`echo "$BASH_VERSION $MACHTYPE"`)},
		{name: "shlvl/unset", argv: dBash(`echo "$SHLVL"`)},
		{name: "shlvl/5", argv: dBash(`echo "$SHLVL"`), env: []string{"SHLVL=5"}},
		{name: "shlvl/999", argv: dBash(`echo "$SHLVL"`), env: []string{"SHLVL=999"}},
		{name: "shlvl/1000", argv: dBash(`echo "$SHLVL"`), env: []string{"SHLVL=1000"}},
		{name: "shlvl/negative", argv: dBash(`echo "$SHLVL"`), env: []string{"SHLVL=-5"}},
		{name: "shlvl/5-write", argv: dBash(`echo x > f; echo "$SHLVL"`), env: []string{"SHLVL=5"}},
		{name: "shlvl/1000-write", argv: dBash(`echo x > f; echo "$SHLVL"`), env: []string{"SHLVL=1000"}},

		// other users
		{name: "nobody/read", nobody: true, argv: dBash(`id -u; echo hi`)},
		{name: "nobody/write-fails", nobody: true, argv: dBash(`id -u; echo x > f; cat f; false`), notes: rolled},
	}
}

func dStdoutIs(want func(r *diffResult) string) func(r *diffResult) error {
	return func(r *diffResult) error {
		if got := string(r.stdout); got != want(r) {
			return fmt.Errorf("stdout = %q, want %q", got, want(r))
		}
		return nil
	}
}

// dBlankStdout checks stdout, then empties it: it holds the run's pid.
func dBlankStdout(want func(r *diffResult) string) func(r *diffResult) error {
	return func(r *diffResult) error {
		if err := dStdoutIs(want)(r); err != nil {
			return err
		}
		r.stdout = nil
		return nil
	}
}

// dPids checks stdout against want with @PID@ as the pid started and
// @PPID@ as the test's, then empties it.
func dPids(want string) func(r *diffResult) error {
	return dBlankStdout(func(r *diffResult) string {
		return strings.NewReplacer("@PID@", strconv.Itoa(r.pid), "@PPID@", strconv.Itoa(os.Getpid())).Replace(want)
	})
}

func dLinkWork(t *testing.T, d diffDirs) {
	if err := os.Symlink(d.work, filepath.Join(d.root, "link")); err != nil {
		t.Fatal(err)
	}
}

func dMkGone(t *testing.T, d diffDirs) { dMkdir(t, filepath.Join(d.work, "gone")) }

func dMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func dWriteFile(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	dMkdir(t, filepath.Dir(name))
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestDiff(t *testing.T) {
	cases := diffCases()
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two cases named %s", c.name)
		}
		seen[c.name] = true
	}
	t.Logf("%d cases", len(cases))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dRunDiff(t, c)
		})
	}
}

func dRunDiff(t *testing.T, c diffCase) {
	if c.bug != "" && os.Getenv("UNDOSH_DIFF_BUGS") == "" {
		t.Skip("BUG: " + c.bug + " (UNDOSH_DIFF_BUGS=1 runs it)")
	}
	if c.nobody && os.Getuid() != 0 {
		t.Skip("running as user nobody needs root")
	}
	if c.systemSh {
		if os.Getuid() != 0 {
			t.Skip("making undosh the system's sh in a mount namespace needs root")
		}
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("no unshare")
		}
	}
	if c.signal == syscall.SIGINT && signal.Ignored(syscall.SIGINT) {
		t.Skip("SIGINT is ignored in the test process, so the shells would ignore it too")
	}
	d := dNewDirs(t, c.nobody)
	realShell := "/bin/bash"
	if c.sh {
		realShell = "/bin/sh"
	}
	want := dRunSide(t, c, d, realShell)
	got := dRunSide(t, c, d, undoshBin)
	if c.startErr {
		// The messages name the binaries; the errno must be the same.
		var we, ge syscall.Errno
		if !errors.As(want.startErr, &we) || !errors.As(got.startErr, &ge) || we != ge {
			t.Fatalf("start errors differ: bash: %v, undosh: %v", want.startErr, got.startErr)
		}
		return
	}
	for _, r := range []*diffResult{want, got} {
		if r.startErr != nil {
			t.Fatalf("start: %v", r.startErr)
		}
	}
	var own []string
	got.stderr, own = dSplitOwn(got.stderr)
	if c.check != nil {
		if err := c.check(want); err != nil {
			t.Errorf("bash: %v", err)
		}
		if err := c.check(got); err != nil {
			t.Errorf("undosh: %v", err)
		}
	}
	if want.ws != got.ws {
		t.Errorf("wait status: bash %v, undosh %v", want, got)
	}
	if !bytes.Equal(want.stdout, got.stdout) {
		t.Errorf("stdout differs (-bash +undosh):\n%s", dDiffBytes(want.stdout, got.stdout))
	}
	if !bytes.Equal(want.stderr, got.stderr) {
		t.Errorf("stderr differs (-bash +undosh):\n%s", dDiffBytes(want.stderr, got.stderr))
	}
	if !dNotesMatch(own, c.notes) {
		t.Errorf("undosh's own stderr lines = %q, want one line each containing %q", own, c.notes)
	}
}

// dSplitOwn takes undosh's own lines out of stderr.
func dSplitOwn(stderr []byte) (rest []byte, own []string) {
	lines := bytes.SplitAfter(stderr, []byte("\n"))
	for _, l := range lines {
		if bytes.HasPrefix(l, []byte("undosh: ")) {
			own = append(own, strings.TrimSuffix(string(l), "\n"))
			continue
		}
		rest = append(rest, l...)
	}
	return rest, own
}

func dNotesMatch(own, want []string) bool {
	if len(own) != len(want) {
		return false
	}
	for i := range own {
		if !strings.Contains(own[i], want[i]) {
			return false
		}
	}
	return true
}

// dDiffBytes shows how two outputs differ: a line diff when they are
// small, the first differing offset when they are not.
func dDiffBytes(a, b []byte) string {
	if len(a) < 1<<16 && len(b) < 1<<16 {
		return cmp.Diff(string(a), string(b))
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(i-40, 0)
	return fmt.Sprintf("lengths %d and %d, first difference at byte %d: %q vs %q", len(a), len(b), i,
		a[lo:min(i+40, len(a))], b[lo:min(i+40, len(b))])
}

// dNewDirs makes the case's root. For a run as nobody it lies outside the
// test's private temporary directory, and the state directory is world
// writable.
func dNewDirs(t *testing.T, nobody bool) diffDirs {
	var root string
	if nobody {
		var err error
		root, err = os.MkdirTemp("", "undosh-diff-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(root) })
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		root = t.TempDir()
	}
	return diffDirs{root: root, work: filepath.Join(root, "w"), home: filepath.Join(root, "h"),
		bin: filepath.Join(root, "bin"), st: filepath.Join(root, "state")}
}

// dPrepare lays out the case's directories afresh.
func dPrepare(t *testing.T, c diffCase, d diffDirs) {
	t.Helper()
	for _, dir := range []string{d.work, d.home, d.bin, d.st} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		dMkdir(t, dir)
	}
	os.Remove(filepath.Join(d.root, "link"))
	for name, content := range c.files {
		dWriteFile(t, filepath.Join(d.root, name), d.expand(content), 0o755)
	}
	if c.setup != nil {
		c.setup(t, d)
	}
	if c.git {
		dGitInit(t, d.work)
	}
	pol := policy.DefaultSource()
	if c.fallback {
		pol = bytes.Replace(pol, []byte("\n  fallback: auto\n"), []byte("\n  fallback: git\n"), 1)
		if bytes.Equal(pol, policy.DefaultSource()) {
			t.Fatal("the default policy has no line `  fallback: auto` to change")
		}
	}
	dWriteFile(t, filepath.Join(d.root, "policy.yaml"), string(pol), 0o644)
	if c.nobody {
		for _, dir := range []string{d.work, d.home} {
			dChownTree(t, dir, 65534, 65534)
		}
		if err := os.Chmod(d.st, 0o1777); err != nil {
			t.Fatal(err)
		}
	}
}

func dChownTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func dGitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// dRunSide runs the case once with shell as the shell under test.
func dRunSide(t *testing.T, c diffCase, d diffDirs, shell string) *diffResult {
	t.Helper()
	dPrepare(t, c, d)
	argv := make([]string, len(c.argv))
	for i, a := range c.argv {
		argv[i] = d.expand(a)
	}
	env := []string{
		"PATH=" + d.bin + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + d.home,
		"UNDOSH_STATE_DIR=" + d.st,
		"UNDOSH_POLICY=" + filepath.Join(d.root, "policy.yaml"),
		"UNDOSH_REAL_BASH=/bin/bash",
		"UNDOSH_REAL_SH=/bin/sh",
	}
	if c.fallback {
		// The fallback is what these cases test: keep the local fork
		// engine out even where it could run (root).
		env = append(env, "UNDOSH_NO_FORK_ENGINE=1")
	}
	for _, e := range c.env {
		env = append(env, d.expand(e))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if c.systemSh && shell == undoshBin {
		// The file run is /bin/sh, which is undosh here; the real sh
		// is the file /bin/sh names outside the namespace.
		sys, err := filepath.EvalSymlinks("/bin/sh")
		if err != nil {
			t.Fatal(err)
		}
		shDir, _ := filepath.EvalSymlinks(filepath.Dir("/bin/sh"))
		upper, work := filepath.Join(d.root, "sh-upper"), filepath.Join(d.root, "sh-work")
		for _, dir := range []string{upper, work} {
			os.RemoveAll(dir)
			dMkdir(t, dir)
		}
		if err := os.Symlink(undoshBin, filepath.Join(upper, "sh")); err != nil {
			t.Fatal(err)
		}
		c.env = append(c.env[:len(c.env):len(c.env)], "UNDOSH_REAL_SH="+sys)
		script := `mount -t overlay undosh-test -o "lowerdir=$1,upperdir=$2,workdir=$3" "$1" || exit 125; shift 3; exec -a "$0" /bin/sh "$@"`
		argv = append([]string{"unshare", "--mount", "--propagation", "private", "/bin/bash", "-c", script, argv[0], shDir, upper, work}, argv[1:]...)
		shell, _ = exec.LookPath("unshare")
	}
	if c.via != "" {
		// The link lies outside the workspace and PATH, at the same
		// path for both sides.
		dir := filepath.Join(d.root, "via")
		link := filepath.Join(dir, c.via)
		os.RemoveAll(dir)
		dMkdir(t, dir)
		if err := os.Symlink(shell, link); err != nil {
			t.Fatal(err)
		}
		shell = link
	}
	cmd := exec.CommandContext(ctx, shell)
	cmd.Args = argv
	switch {
	case c.block != "":
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Path = self
		cmd.Args = append([]string{self, dLaunchArg, c.block, shell}, argv...)
	case c.launch != "":
		cmd.Path = "/bin/bash"
		cmd.Args = append([]string{"bash", "-c", d.expand(c.launch), argv[0], shell}, argv[1:]...)
	}
	cmd.Env = env
	cmd.Dir = d.work
	cmd.WaitDelay = 5 * time.Second
	if c.nobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stderr = &stderr
	r := &diffResult{}
	if c.signal != 0 {
		return dRunSignalled(t, c, cmd, r, &stderr)
	}
	cmd.Stdout = &stdout
	if c.stdinFile {
		name := filepath.Join(d.root, "stdin")
		dWriteFile(t, name, c.stdin, 0o644)
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	} else {
		cmd.Stdin = strings.NewReader(d.expand(c.stdin))
	}
	err := cmd.Run()
	if cmd.ProcessState == nil {
		r.startErr = err
		return r
	}
	if ctx.Err() != nil {
		t.Fatalf("%s timed out", shell)
	}
	r.stdout, r.stderr = stdout.Bytes(), stderr.Bytes()
	r.ws = cmd.ProcessState.Sys().(syscall.WaitStatus)
	r.pid = cmd.Process.Pid
	return r
}

// dRunSignalled starts cmd, waits for its line "ready", sends c.signal to
// the process started, and collects the rest.
func dRunSignalled(t *testing.T, c diffCase, cmd *exec.Cmd, r *diffResult, stderr *bytes.Buffer) *diffResult {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := cmd.Start(); err != nil {
		r.startErr = err
		return r
	}
	br := bufio.NewReader(out)
	var stdout bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		stdout.WriteString(line)
		if line == "ready\n" {
			break
		}
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no line \"ready\" (stdout %q, stderr %q): %v", stdout.String(), stderr.String(), err)
		}
	}
	if err := cmd.Process.Signal(c.signal); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(&stdout, br); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	r.stdout, r.stderr = stdout.Bytes(), stderr.Bytes()
	r.ws = cmd.ProcessState.Sys().(syscall.WaitStatus)
	r.pid = cmd.Process.Pid
	return r
}

// TestDiffStdinSession drives a shell through a stdin pipe that stays
// open, as agent harnesses that keep one bash session do: the answer to
// each command must come before the next command is written.
func TestDiffStdinSession(t *testing.T) {
	// undosh takes a pipe that goes quiet before its end for a session:
	// the commands run as they come, as one checkpointed step.
	t.Parallel()
	steps := []string{`x=1`, `echo "x=$x"`, `echo y > f; cat f`, `cd /; pwd`, `false; echo $?`}
	var answers [2][]string
	for i, shell := range []string{"/bin/bash", undoshBin} {
		d := dNewDirs(t, false)
		dPrepare(t, diffCase{}, d)
		cmd := exec.Command(shell)
		cmd.Args = []string{"bash"}
		cmd.Dir = d.work
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + d.home, "UNDOSH_STATE_DIR=" + d.st,
			"UNDOSH_POLICY=" + filepath.Join(d.root, "policy.yaml"), "UNDOSH_REAL_BASH=/bin/bash"}
		in, lines := startPiped(t, cmd)
		for n, step := range steps {
			fmt.Fprintf(in, "%s; echo end-%d\n", step, n)
			for {
				var l string
				select {
				case l = <-lines:
				case <-time.After(20 * time.Second):
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("%s: no answer to %q: the shell waits for the end of its input", shell, step)
				}
				if l == fmt.Sprintf("end-%d\n", n) {
					break
				}
				answers[i] = append(answers[i], l)
			}
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
	}
	if diff := cmp.Diff(answers[0], answers[1]); diff != "" {
		t.Errorf("answers differ (-bash +undosh):\n%s", diff)
	}
}
