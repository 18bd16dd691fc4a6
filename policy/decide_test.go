package policy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/undosh/undosh/policy"
)

// testPolicy replaces the default, so that every line a reason points at
// is here.
const testPolicy = `version: 1
extends: none
workspace:
  roots: [/srv/extra]
  scratch: [/tmp, ~/.cache]
trusted_dirs: [/usr/bin]
verify: make check
classes:
  unknown_program: git
  unknown_code: fork
  unresolved_write: fork
  outside_write: fork
paths:
  - name: tcp
    paths: ["/dev/tcp/**"]
    class: none
    egress: true
    verdict: deny
    message: opens a connection
  - name: keys
    paths: ["/**/secrets/*.key"]
    class: fork
  - name: etc
    paths: ["/etc/**"]
    class: fork
rules:
  - name: version
    programs: ["*"]
    if_args: [--version]
    max_args: 1
    class: none
  - name: git-push
    program: git
    sub: [push]
    class: git
    egress: true
    verdict: constrain
    constraint: push
    message: pushes cannot be undone
  - name: git-stash-read
    program: git
    sub: ["stash list", "stash show"]
    class: none
  - name: git-stash
    program: git
    sub: ["stash *"]
    class: git
  - name: git-read
    program: git
    sub: [status, log]
    class: none
  - name: git-write
    program: git
    class: git
  - name: curl-send
    program: curl
    if_args: ["-X POST", "--data*"]
    class: none
    egress: true
    verdict: deny
    message: sends data
  - name: http-local
    programs: [curl, wget]
    hosts: loopback
    class: none
  - name: http-remote
    programs: [curl, wget]
    hosts: remote
    class: none
    egress: true
  - name: sort-read
    program: sort
    unless_args: ["-o *"]
    class: none
  - name: sort-write
    program: sort
    class: git
  - name: find-exec
    program: find
    if_args: [-exec, -delete]
    class: git
  - name: read-only
    programs: [ls, cat, find, echo]
    class: none
  - name: file-tools
    programs: [rm, cp]
    class: none
  - name: init-scripts
    program: "/etc/init.d/*"
    class: fork
  - name: apt-root
    program: apt-get
    root: true
    class: fork
  - name: go-test
    program: go
    sub: [test]
    class: git
    rollback: never
    verify: go vet ./...
  - name: deploy
    program: deploy
    class: none
    verdict: constrain
    constraint: only on weekdays
  - name: snapshot
    program: source
    if_args: ["*/snapshot-*.sh"]
    scaffold: true
    class: none
  - name: shells
    programs: [bash, source]
    class: none
`

// Where testPolicy defines things.
const (
	atBuiltin    = "" // reasons that no line of a policy makes
	atRoots      = "t.yaml:4"
	atScratch    = "t.yaml:5"
	atUnknownPrg = "t.yaml:9"
	atUnknownCod = "t.yaml:10"
	atUnresolved = "t.yaml:11"
	atOutside    = "t.yaml:12"
	atTCP        = "t.yaml:14"
	atKeys       = "t.yaml:20"
	atEtc        = "t.yaml:23"
	atVersion    = "t.yaml:27"
	atGitPush    = "t.yaml:32"
	atStashRead  = "t.yaml:40"
	atStash      = "t.yaml:44"
	atGitRead    = "t.yaml:48"
	atGitWrite   = "t.yaml:52"
	atCurlSend   = "t.yaml:55"
	atHTTPLocal  = "t.yaml:62"
	atHTTPRemote = "t.yaml:66"
	atSortRead   = "t.yaml:71"
	atSortWrite  = "t.yaml:75"
	atFindExec   = "t.yaml:78"
	atReadOnly   = "t.yaml:82"
	atFileTools  = "t.yaml:85"
	atInit       = "t.yaml:88"
	atAptRoot    = "t.yaml:91"
	atGoTest     = "t.yaml:95"
	atDeploy     = "t.yaml:101"
	atSnapshot   = "t.yaml:106"
	atShells     = "t.yaml:111"
)

func loadTest(t *testing.T, name, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Load(name, []byte(src))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p
}

// argv splits words on spaces; a word that starts with $ is dynamic.
func argv(words string) []policy.Arg {
	var out []policy.Arg
	for _, w := range strings.Fields(words) {
		out = append(out, policy.Arg{Value: w, Dynamic: strings.HasPrefix(w, "$")})
	}
	return out
}

// cmd is a command at pos whose writes are known and none.
func cmd(pos, words string) policy.Command {
	return policy.Command{Pos: pos, Text: words, Argv: argv(words), WritesKnown: true}
}

// sub is cmd with the subcommand at index i.
func sub(pos, words string, i int) policy.Command {
	c := cmd(pos, words)
	c.Sub = i
	return c
}

// redirect is a command with no words that writes one path.
func redirect(path string, resolved bool) policy.Command {
	return policy.Command{Pos: "1:1", Text: "> " + path, WritesKnown: true,
		Writes: []policy.Write{{Path: path, Resolved: resolved}}}
}

// reaching is c naming the servers hosts, as the parser reports them
// (its Command.Hosts): the policy reads no server from the arguments.
func reaching(c policy.Command, hosts ...policy.Server) policy.Command {
	c.Hosts = hosts
	return c
}

func remoteAt(v string) policy.Server   { return policy.Server{Value: v} }
func loopbackAt(v string) policy.Server { return policy.Server{Value: v, Loopback: true} }

// pushing is c with the push the parser reads in its words and
// configuration (its Command.Push): the policy reads no refspec from the
// arguments. TestPush in the parser reads these commands so.
func pushing(c policy.Command, p policy.Push) policy.Command {
	c.Push = &p
	return c
}

// refs are refspecs that each name one branch.
func refs(branches ...string) []policy.Refspec {
	out := make([]policy.Refspec, len(branches))
	for i, b := range branches {
		out[i] = policy.Refspec{Text: b, Dst: b}
	}
	return out
}

// diverting is c changing the dpkg diversions of paths, as the parser
// reads them (its Command.Diverts).
func diverting(c policy.Command, paths ...string) policy.Command {
	c.Diverts = paths
	return c
}

func with(c policy.Command, f func(*policy.Command)) policy.Command {
	f(&c)
	return c
}

func one(c policy.Command) policy.Input { return policy.Input{Commands: []policy.Command{c}} }

// rs is a reason at 1:1 with only a rule, a place and a class.
func rs(rule, at string, class policy.Class) policy.Reason {
	return policy.Reason{Rule: rule, At: at, Pos: "1:1", Class: class}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p := loadTest(t, "t.yaml", testPolicy)
	permissive := loadTest(t, "e.yaml", "version: 1\nextends: none\negress:\n  protected_branches: [prod]\n  allow_force_push: true\n  push_needs_verify: false\n"+
		"rules:\n  - {name: push, program: git, sub: [push], class: git, egress: true, verdict: constrain, constraint: push}\n")
	bare := loadTest(t, "b.yaml", "version: 1\nextends: none\nrules:\n  - {name: push, program: git, class: git, verdict: constrain, constraint: push}\n")
	ctx := policy.Context{Cwd: "/work/proj", Roots: []string{"/work/proj"}, Home: "/home/u"}

	push := policy.Reason{Rule: "git-push", At: atGitPush, Pos: "1:1", Class: policy.Git, Egress: true,
		Verdict: policy.Constrain, Message: "pushes cannot be undone"}
	pushDeny := func(text string) policy.Reason {
		return policy.Reason{Rule: "git-push", At: atGitPush, Pos: "1:1", Text: text, Class: policy.None,
			Egress: true, Verdict: policy.Deny, Message: "pushes cannot be undone"}
	}
	const (
		condCurrent = "push only when the current branch is not main or master and only after verify passes"
		condVerify  = "push only after verify passes"
	)
	send := policy.Reason{Rule: "curl-send", At: atCurlSend, Pos: "1:1", Class: policy.None, Egress: true,
		Verdict: policy.Deny, Message: "sends data"}
	remote := policy.Reason{Rule: "http-remote", At: atHTTPRemote, Pos: "1:1", Class: policy.None, Egress: true}
	tcp := policy.Reason{Rule: "tcp", At: atTCP, Pos: "1:1", Class: policy.None, Egress: true,
		Verdict: policy.Deny, Message: "opens a connection"}
	unknown := func(text string) policy.Reason {
		return policy.Reason{Rule: "unknown_program", At: atUnknownPrg, Pos: "1:1", Text: text, Class: policy.Git}
	}

	tests := []struct {
		name      string
		pol       *policy.Policy // p when nil
		in        policy.Input
		ctx       *policy.Context // ctx when nil
		class     policy.Class
		egress    bool
		verdict   policy.Verdict
		condition string
		rollback  string // on-failure when ""
		verify    string // "make check" when "" (for p)
		syntaxErr string
		checks    *policy.Checks // not compared when nil
		// reasons' Text is compared only where the wanted reason has one.
		reasons []policy.Reason
		bug     string
	}{
		// Rule order.
		{
			name:    "first sure match wins",
			in:      one(sub("1:1", "git status", 1)),
			reasons: []policy.Reason{rs("git-read", atGitRead, policy.None)},
		},
		{
			name:    "later rule when the earlier ones do not match",
			in:      one(sub("1:1", "git commit -m x", 1)),
			class:   policy.Git,
			reasons: []policy.Reason{rs("git-write", atGitWrite, policy.Git)},
		},
		{
			name:    "possible match because of a dynamic arg adds its class and goes on",
			in:      one(cmd("1:1", "find . $ACTION")),
			class:   policy.Git,
			reasons: []policy.Reason{rs("find-exec", atFindExec, policy.Git), rs("read-only", atReadOnly, policy.None)},
		},
		{
			name:    "sure if_args match stops",
			in:      one(cmd("1:1", "find . -delete")),
			class:   policy.Git,
			reasons: []policy.Reason{rs("find-exec", atFindExec, policy.Git)},
		},
		{
			name:      "possible constrained rule gives its condition",
			in:        one(pushing(sub("1:1", "git $SUB", 1), policy.Push{Current: true})),
			class:     policy.Git,
			egress:    true,
			verdict:   policy.Constrain,
			condition: condCurrent,
			reasons: []policy.Reason{rs("version", atVersion, policy.None), push, rs("git-stash-read", atStashRead, policy.None),
				rs("git-stash", atStash, policy.Git), rs("git-read", atGitRead, policy.None), rs("git-write", atGitWrite, policy.Git)},
		},

		// sub.
		{
			name:    "two-word sub",
			in:      one(sub("1:1", "git stash list", 1)),
			reasons: []policy.Reason{rs("git-stash-read", atStashRead, policy.None)},
		},
		{
			name:    "two-word sub with options and operands between and after",
			in:      one(sub("1:1", "git stash -q show -p stash@{0}", 1)),
			reasons: []policy.Reason{rs("git-stash-read", atStashRead, policy.None)},
		},
		{
			name:    "sub is matched from Sub, not from argv[1]",
			in:      one(sub("1:1", "git -C /work/proj stash list", 3)),
			reasons: []policy.Reason{rs("git-stash-read", atStashRead, policy.None)},
		},
		{
			name:    "sub ignores case",
			in:      one(sub("1:1", "git STASH List", 1)),
			reasons: []policy.Reason{rs("git-stash-read", atStashRead, policy.None)},
		},
		{
			name:    "sub with a wildcard operand",
			in:      one(sub("1:1", "git stash drop", 1)),
			class:   policy.Git,
			reasons: []policy.Reason{rs("git-stash", atStash, policy.Git)},
		},
		{
			name:    "two-word sub does not match one word",
			in:      one(sub("1:1", "git stash", 1)),
			class:   policy.Git,
			reasons: []policy.Reason{rs("git-write", atGitWrite, policy.Git)},
		},
		{
			name:  "dynamic operand makes sub matches possible",
			in:    one(sub("1:1", "git stash $WHAT", 1)),
			class: policy.Git,
			reasons: []policy.Reason{rs("git-stash-read", atStashRead, policy.None), rs("git-stash", atStash, policy.Git),
				rs("git-write", atGitWrite, policy.Git)},
		},

		// if_args and unless_args.
		{
			name:    "multi-word if_args",
			in:      one(reaching(cmd("1:1", "curl -X POST https://api.example.com/items"), remoteAt("https://api.example.com/items"))),
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{send},
		},
		{
			name:    "multi-word if_args needs the words in a row",
			in:      one(reaching(cmd("1:1", "curl POST -X https://api.example.com/items"), remoteAt("https://api.example.com/items"))),
			egress:  true,
			reasons: []policy.Reason{remote},
		},
		{
			name:    "multi-word if_args needs every word",
			in:      one(reaching(cmd("1:1", "curl -X GET https://api.example.com/POST"), remoteAt("https://api.example.com/POST"))),
			egress:  true,
			reasons: []policy.Reason{remote},
		},
		{
			name:    "multi-word if_args with a dynamic word is possible",
			in:      one(reaching(cmd("1:1", "curl -X $METHOD https://api.example.com/items"), remoteAt("https://api.example.com/items"))),
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{send, remote},
		},
		{
			name:    "if_args glob",
			in:      one(reaching(cmd("1:1", "curl --data-binary=@x https://api.example.com"), remoteAt("https://api.example.com"))),
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{send},
		},
		{
			name:    "multi-word unless_args skips the rule",
			in:      one(cmd("1:1", "sort -o out.txt in.txt")),
			class:   policy.Git,
			reasons: []policy.Reason{rs("sort-write", atSortWrite, policy.Git)},
		},
		{
			name:    "multi-word unless_args needs the words in a row",
			in:      one(cmd("1:1", "sort in.txt -o")),
			reasons: []policy.Reason{rs("sort-read", atSortRead, policy.None)},
		},
		{
			name:    "multi-word unless_args with a dynamic word makes the rule possible",
			in:      one(cmd("1:1", "sort -o $OUT in.txt")),
			class:   policy.Git,
			reasons: []policy.Reason{rs("sort-read", atSortRead, policy.None), rs("sort-write", atSortWrite, policy.Git)},
		},

		// hosts.
		{
			name:    "loopback URL",
			in:      one(reaching(cmd("1:1", "curl http://localhost:8080/health"), loopbackAt("http://localhost:8080/health"))),
			reasons: []policy.Reason{rs("http-local", atHTTPLocal, policy.None)},
		},
		{
			name:    "loopback IPv4",
			in:      one(reaching(cmd("1:1", "curl -s http://127.0.0.1:9000/"), loopbackAt("http://127.0.0.1:9000/"))),
			reasons: []policy.Reason{rs("http-local", atHTTPLocal, policy.None)},
		},
		{
			name:    "loopback IPv6",
			in:      one(reaching(cmd("1:1", "curl http://[::1]:80/"), loopbackAt("http://[::1]:80/"))),
			reasons: []policy.Reason{rs("http-local", atHTTPLocal, policy.None)},
		},
		{
			name:    "loopback host without a scheme",
			in:      one(reaching(cmd("1:1", "wget localhost:8080/x"), loopbackAt("localhost:8080/x"))),
			reasons: []policy.Reason{rs("http-local", atHTTPLocal, policy.None)},
		},
		{
			name:    "remote URL",
			in:      one(reaching(cmd("1:1", "curl https://example.com"), remoteAt("https://example.com"))),
			egress:  true,
			reasons: []policy.Reason{remote},
		},
		{
			name:    "remote host without a scheme",
			in:      one(reaching(cmd("1:1", "wget -q example.com/file"), remoteAt("example.com/file"))),
			egress:  true,
			reasons: []policy.Reason{remote},
		},
		{
			name:    "one remote URL among loopback ones",
			in:      one(reaching(cmd("1:1", "curl http://localhost/a https://example.com/b"), loopbackAt("http://localhost/a"), remoteAt("https://example.com/b"))),
			egress:  true,
			reasons: []policy.Reason{remote},
		},
		{
			name:    "dynamic host may be either",
			in:      one(reaching(cmd("1:1", "wget $URL"), policy.Server{Value: "$URL", Dynamic: true})),
			egress:  true,
			reasons: []policy.Reason{rs("version", atVersion, policy.None), rs("http-local", atHTTPLocal, policy.None), remote},
		},

		// max_args.
		{
			name:    "max_args allows one",
			in:      one(cmd("1:1", "make --version")),
			reasons: []policy.Reason{rs("version", atVersion, policy.None)},
		},
		{
			name:    "max_args refuses two",
			in:      one(cmd("1:1", "make --version --verbose")),
			class:   policy.Git,
			reasons: []policy.Reason{unknown("no rule knows make: make --version --verbose")},
		},
		{
			name:    "an earlier rule wins over a later one for the same program",
			in:      one(sub("1:1", "git --version", 0)),
			reasons: []policy.Reason{rs("version", atVersion, policy.None)},
		},

		// Program patterns.
		{
			name:  "absolute program pattern",
			in:    one(cmd("1:1", "/etc/init.d/nginx restart")),
			class: policy.Fork,
			reasons: []policy.Reason{rs("init-scripts", atInit, policy.Fork),
				unknown("/etc/init.d/nginx is path-qualified and does not inherit the trust of nginx")},
		},
		{
			name:  "absolute program pattern matches the cleaned path",
			in:    one(cmd("1:1", "/etc/init.d/../init.d/nginx restart")),
			class: policy.Fork,
			reasons: []policy.Reason{rs("init-scripts", atInit, policy.Fork),
				unknown("/etc/init.d/../init.d/nginx is path-qualified and does not inherit the trust of nginx")},
		},
		{
			name:    "absolute program pattern does not match the base name",
			in:      one(cmd("1:1", "nginx restart")),
			class:   policy.Git,
			reasons: []policy.Reason{unknown("no rule knows nginx: nginx restart")},
		},
		{
			name:    "absolute program pattern does not match a relative path",
			in:      one(cmd("1:1", "init.d/nginx restart")),
			class:   policy.Git,
			reasons: []policy.Reason{unknown("no rule knows nginx: init.d/nginx restart")},
		},
		{
			name:    "* in an absolute program pattern stays in one directory",
			in:      one(cmd("1:1", "/etc/init.d/sub/nginx")),
			class:   policy.Git,
			reasons: []policy.Reason{unknown("no rule knows nginx: /etc/init.d/sub/nginx")},
		},

		// Path rules.
		{
			name:    "** path rule",
			in:      one(redirect("/etc/ssh/sshd_config.d/x.conf", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{{Rule: "etc", At: atEtc, Pos: "1:1", Text: "writes /etc/ssh/sshd_config.d/x.conf", Class: policy.Fork}},
		},
		{
			name:    "/dir/** matches the directory itself",
			in:      one(redirect("/etc", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("etc", atEtc, policy.Fork)},
		},
		{
			name:    "/dir/** does not match a longer name",
			in:      one(redirect("/etcetera/x", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("outside_write", atOutside, policy.Fork)},
		},
		{
			name:    "path rule with egress and deny",
			in:      one(redirect("/dev/tcp/203.0.113.5/80", true)),
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{tcp},
		},
		{
			name:    "path rules come before the workspace",
			in:      one(redirect("/work/proj/secrets/a.key", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("keys", atKeys, policy.Fork)},
		},
		{
			name:    "leading ** matches no directory",
			in:      one(redirect("/secrets/a.key", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("keys", atKeys, policy.Fork)},
		},
		{
			name:    "* after ** stays in one directory",
			in:      one(redirect("/work/proj/secrets/sub/a.key", true)),
			class:   policy.Git,
			reasons: []policy.Reason{rs("workspace", atRoots, policy.Git)},
		},

		// Workspace and scratch.
		{
			name:    "write in a context root",
			in:      one(redirect("/work/proj/out.txt", true)),
			class:   policy.Git,
			reasons: []policy.Reason{{Rule: "workspace", At: atRoots, Pos: "1:1", Text: "writes /work/proj/out.txt in the workspace", Class: policy.Git}},
		},
		{
			name:    "write of a context root itself",
			in:      one(redirect("/work/proj", true)),
			class:   policy.Git,
			reasons: []policy.Reason{rs("workspace", atRoots, policy.Git)},
		},
		{
			name:    "write in a sibling of a root with its name as a prefix",
			in:      one(redirect("/work/project2/x", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{{Rule: "outside_write", At: atOutside, Pos: "1:1", Text: "writes /work/project2/x, outside the workspace", Class: policy.Fork}},
		},
		{
			name:    "write in a policy root",
			in:      one(redirect("/srv/extra/x", true)),
			class:   policy.Git,
			reasons: []policy.Reason{rs("workspace", atRoots, policy.Git)},
		},
		{
			name:    "write in scratch",
			in:      one(redirect("/tmp/x", true)),
			class:   policy.Git,
			reasons: []policy.Reason{{Rule: "scratch", At: atScratch, Pos: "1:1", Text: "writes /tmp/x in a scratch path", Class: policy.Git}},
		},
		{
			name:    "write beside scratch with its name as a prefix",
			in:      one(redirect("/tmpfoo/x", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("outside_write", atOutside, policy.Fork)},
		},
		{
			name:    "write in ~/ scratch expanded against Home",
			in:      one(redirect("/home/u/.cache/go-build/x", true)),
			class:   policy.Git,
			reasons: []policy.Reason{rs("scratch", atScratch, policy.Git)},
		},
		{
			name:    "~/ scratch against another Home",
			in:      one(redirect("/home/u/.cache/go-build/x", true)),
			ctx:     &policy.Context{Roots: []string{"/work/proj"}, Home: "/home/v"},
			class:   policy.Fork,
			reasons: []policy.Reason{rs("outside_write", atOutside, policy.Fork)},
		},
		{
			name:    "~/ scratch with no Home is nowhere",
			in:      one(redirect("/.cache/x", true)),
			ctx:     &policy.Context{Roots: []string{"/work/proj"}},
			class:   policy.Fork,
			reasons: []policy.Reason{rs("outside_write", atOutside, policy.Fork)},
		},
		{
			name:    "write in home outside scratch",
			in:      one(redirect("/home/u/.bashrc", true)),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("outside_write", atOutside, policy.Fork)},
		},
		{
			name:    "unresolved write",
			in:      one(redirect("$DIR/x", false)),
			class:   policy.Fork,
			reasons: []policy.Reason{{Rule: "unresolved_write", At: atUnresolved, Pos: "1:1", Text: "writes a path known only at run time: $DIR/x", Class: policy.Fork}},
		},
		{
			name: "each write counts",
			in: one(with(cmd("1:1", "cp a b"), func(c *policy.Command) {
				c.Writes = []policy.Write{{Path: "/work/proj/b", Resolved: true}, {Path: "/etc/b", Resolved: true}}
			})),
			class: policy.Fork,
			reasons: []policy.Reason{rs("file-tools", atFileTools, policy.None), rs("workspace", atRoots, policy.Git),
				rs("etc", atEtc, policy.Fork)},
		},

		// Writes not known.
		{
			name:  "git-class command with unknown writes outside the workspace",
			in:    one(with(sub("1:1", "git commit -m x", 1), func(c *policy.Command) { c.WritesKnown = false; c.Cwd = "/opt/x" })),
			class: policy.Fork,
			reasons: []policy.Reason{rs("git-write", atGitWrite, policy.Git),
				{Rule: "outside_write", At: atOutside, Pos: "1:1", Text: "runs in /opt/x, outside the workspace", Class: policy.Fork}},
		},
		{
			name:  "unknown program with unknown writes outside the workspace",
			in:    one(with(cmd("1:1", "make"), func(c *policy.Command) { c.WritesKnown = false; c.Cwd = "/opt/build" })),
			class: policy.Fork,
			reasons: []policy.Reason{unknown("no rule knows make: make"),
				rs("outside_write", atOutside, policy.Fork)},
		},
		{
			name:    "git-class command with unknown writes in the workspace",
			in:      one(with(cmd("1:1", "make"), func(c *policy.Command) { c.WritesKnown = false; c.Cwd = "/work/proj/sub" })),
			class:   policy.Git,
			reasons: []policy.Reason{unknown("no rule knows make: make")},
		},
		{
			name:    "git-class command with unknown writes in scratch",
			in:      one(with(cmd("1:1", "make"), func(c *policy.Command) { c.WritesKnown = false; c.Cwd = "/tmp/build" })),
			class:   policy.Git,
			reasons: []policy.Reason{unknown("no rule knows make: make")},
		},
		{
			name:  "git-class command with unknown writes in an unknown directory",
			in:    one(with(cmd("1:1", "make"), func(c *policy.Command) { c.WritesKnown = false })),
			class: policy.Fork,
			reasons: []policy.Reason{unknown("no rule knows make: make"),
				{Rule: "unresolved_write", At: atUnresolved, Pos: "1:1", Text: "runs in a directory known only at run time: make", Class: policy.Fork}},
		},
		{
			name:    "none-class command with unknown writes outside the workspace",
			in:      one(with(cmd("1:1", "ls"), func(c *policy.Command) { c.WritesKnown = false; c.Cwd = "/opt" })),
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None)},
		},

		// Root.
		{
			name:  "root command that writes becomes fork",
			in:    one(with(cmd("1:1", "rm /tmp/x"), func(c *policy.Command) { c.Root = true; c.Writes = []policy.Write{{Path: "/tmp/x", Resolved: true}} })),
			class: policy.Fork,
			reasons: []policy.Reason{rs("file-tools", atFileTools, policy.None), rs("scratch", atScratch, policy.Git),
				{Rule: "root", At: atBuiltin, Pos: "1:1", Text: "runs as root and is not read-only: rm /tmp/x", Class: policy.Fork}},
		},
		{
			name:    "root command that only reads stays none",
			in:      one(with(cmd("1:1", "ls /root"), func(c *policy.Command) { c.Root = true })),
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None)},
		},
		{
			name:    "root rule applies under root",
			in:      one(with(cmd("1:1", "apt-get install jq"), func(c *policy.Command) { c.Root = true })),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("apt-root", atAptRoot, policy.Fork), rs("root", atBuiltin, policy.Fork)},
		},
		{
			name:    "root rule does not apply without root",
			in:      one(cmd("1:1", "apt-get install jq")),
			class:   policy.Git,
			reasons: []policy.Reason{unknown("no rule knows apt-get: apt-get install jq")},
		},

		// Opaque, shadowed and path-qualified.
		{
			name:  "opaque command is at least an unknown program",
			in:    one(with(cmd("1:1", "bash ./script.sh"), func(c *policy.Command) { c.Opaque = true })),
			class: policy.Git,
			reasons: []policy.Reason{rs("shells", atShells, policy.None),
				unknown("runs code the parser could not read: bash ./script.sh")},
		},
		{
			name:    "opaque harness scaffolding keeps its rule",
			in:      one(with(cmd("1:1", "source /h/shell-snapshots/snapshot-1.sh"), func(c *policy.Command) { c.Opaque = true })),
			reasons: []policy.Reason{rs("snapshot", atSnapshot, policy.None)},
		},
		{
			name:  "opaque command that is not scaffolding",
			in:    one(with(cmd("1:1", "source ./env.sh"), func(c *policy.Command) { c.Opaque = true })),
			class: policy.Git,
			reasons: []policy.Reason{rs("shells", atShells, policy.None),
				unknown("runs code the parser could not read: source ./env.sh")},
		},
		{
			name:    "opaque command whose rule is above unknown_program keeps it",
			in:      one(with(cmd("1:1", "/usr/bin/apt-get install x"), func(c *policy.Command) { c.Opaque = true; c.Root = true })),
			class:   policy.Fork,
			reasons: []policy.Reason{rs("apt-root", atAptRoot, policy.Fork), unknown("runs code the parser could not read: /usr/bin/apt-get install x"), rs("root", atBuiltin, policy.Fork)},
		},
		{
			name:  "shadowed command is at least an unknown program",
			in:    one(with(cmd("1:1", "ls"), func(c *policy.Command) { c.Shadowed = true })),
			class: policy.Git,
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None),
				unknown("ls may not be the program it names (a function, alias, PATH or preload changed it)")},
		},
		{
			name:    "shadowed builtin keeps its rule",
			in:      one(with(cmd("1:1", "echo hi"), func(c *policy.Command) { c.Shadowed = true; c.Builtin = true })),
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None)},
		},
		{
			name:    "builtin no rule knows",
			in:      one(with(cmd("1:1", "cd /x"), func(c *policy.Command) { c.Builtin = true })),
			reasons: []policy.Reason{rs("builtin", atBuiltin, policy.None)},
		},
		{
			name:    "function call",
			in:      one(with(cmd("1:1", "deploy_all x"), func(c *policy.Command) { c.Function = true })),
			reasons: []policy.Reason{{Rule: "function", At: atBuiltin, Pos: "1:1", Text: "calls the function deploy_all (its body is classified)"}},
		},
		{
			name:    "script runner adds nothing of its own",
			in:      one(with(cmd("1:1", "bash build.sh"), func(c *policy.Command) { c.Script = "build.sh" })),
			reasons: []policy.Reason{rs("shells", atShells, policy.None), {Rule: "script", At: atBuiltin, Pos: "1:1", Text: "reads and classifies build.sh"}},
		},
		{
			name:   "code that uses the network",
			in:     one(with(cmd("1:1", "python3 -c x"), func(c *policy.Command) { c.Network = true })),
			class:  policy.Git,
			egress: true,
			reasons: []policy.Reason{unknown("no rule knows python3: python3 -c x"),
				{Rule: "network_code", At: atBuiltin, Pos: "1:1", Text: "runs code that uses the network: python3 -c x", Egress: true}},
		},
		{
			name:    "redirection alone",
			in:      one(policy.Command{Pos: "1:1", Text: "< in", WritesKnown: true}),
			reasons: []policy.Reason{rs("redirect", atBuiltin, policy.None)},
		},
		{
			name:  "path-qualified name outside trusted_dirs loses its rule's trust",
			in:    one(cmd("1:1", "./ls")),
			class: policy.Git,
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None),
				unknown("./ls is path-qualified and does not inherit the trust of ls")},
		},
		{
			name:    "path-qualified name in a subdirectory of trusted_dirs",
			in:      one(cmd("1:1", "/usr/bin/x/ls")),
			class:   policy.Git,
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None), rs("unknown_program", atUnknownPrg, policy.Git)},
		},
		{
			name:    "path-qualified name in trusted_dirs keeps its rule's trust",
			in:      one(cmd("1:1", "/usr/bin/ls -la")),
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None)},
		},

		// git push.
		{
			name:    "push to a protected branch is denied",
			in:      one(pushing(sub("1:1", "git push origin main", 1), policy.Push{Refs: refs("main")})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, pushDeny("git push to the protected branch main is refused")},
		},
		{
			name:    "push to a protected branch by refspec is denied",
			in:      one(pushing(sub("1:1", "git push origin HEAD:refs/heads/master", 1), policy.Push{Refs: []policy.Refspec{{Text: "HEAD:refs/heads/master", Dst: "master"}}})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, pushDeny("git push to the protected branch master is refused")},
		},
		{
			name:    "push to a protected branch after global options is denied",
			in:      one(pushing(sub("1:1", "git -C /work/proj push origin main", 3), policy.Push{Refs: refs("main")})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, pushDeny("git push to the protected branch main is refused")},
		},
		{
			name:    "force push is denied",
			in:      one(pushing(sub("1:1", "git push --force origin feature/x", 1), policy.Push{Refs: refs("feature/x"), Force: true})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, pushDeny("git push that forces, deletes or mirrors is refused")},
		},
		{
			name:    "force push in combined short options is denied",
			in:      one(pushing(sub("1:1", "git push -fu origin feature/x", 1), policy.Push{Refs: refs("feature/x"), Force: true})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, pushDeny("git push that forces, deletes or mirrors is refused")},
		},
		{
			name:    "forced refspec is denied",
			in:      one(pushing(sub("1:1", "git push origin +feature/x", 1), policy.Push{Refs: []policy.Refspec{{Text: "+feature/x", Forced: true, Dst: "feature/x"}}})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, pushDeny("git push of a forced refspec (+feature/x) is refused")},
		},
		{
			name:    "deleting refspec is denied",
			in:      one(pushing(sub("1:1", "git push origin :feature/x", 1), policy.Push{Refs: []policy.Refspec{{Text: ":feature/x", Delete: true, Dst: "feature/x"}}})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, pushDeny("git push that deletes a remote branch (:feature/x) is refused")},
		},
		{
			name:      "push to a feature branch is constrained",
			in:        one(pushing(sub("1:1", "git push -u origin feature/x", 1), policy.Push{Refs: refs("feature/x")})),
			class:     policy.Git,
			egress:    true,
			verdict:   policy.Constrain,
			condition: condVerify,
			checks:    &policy.Checks{Verify: true},
			reasons:   []policy.Reason{push},
		},
		{
			name:      "push without a refspec is constrained on the current branch",
			in:        one(pushing(sub("1:1", "git push", 1), policy.Push{Current: true})),
			class:     policy.Git,
			egress:    true,
			verdict:   policy.Constrain,
			condition: condCurrent,
			reasons:   []policy.Reason{push},
		},
		{
			name:      "push to a remote without a refspec is constrained on the current branch",
			in:        one(pushing(sub("1:1", "git push origin", 1), policy.Push{Current: true})),
			class:     policy.Git,
			egress:    true,
			verdict:   policy.Constrain,
			condition: condCurrent,
			reasons:   []policy.Reason{push},
		},
		{
			name:      "push of HEAD is constrained on the current branch",
			in:        one(pushing(sub("1:1", "git push origin HEAD", 1), policy.Push{Refs: []policy.Refspec{{Text: "HEAD", Current: true, Dst: "HEAD"}}, Current: true})),
			class:     policy.Git,
			egress:    true,
			verdict:   policy.Constrain,
			condition: condCurrent,
			checks:    &policy.Checks{Branch: true, Verify: true},
			reasons:   []policy.Reason{push},
		},
		{
			name:    "push to a dynamic branch is refused",
			in:      one(pushing(sub("1:1", "git push origin $BRANCH", 1), policy.Push{Refs: []policy.Refspec{{Text: "$BRANCH", Dynamic: true}}})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, {Rule: "git-push", At: atGitPush, Pos: "1:1", Egress: true, Verdict: policy.Deny,
				Text: "git push to a branch named only at run time is refused (name the branch literally)", Message: push.Message}},
		},
		{
			name:      "force push allowed, protected branches and verify from the policy",
			pol:       permissive,
			in:        one(pushing(sub("1:1", "git push --force origin main", 1), policy.Push{Refs: refs("main"), Force: true})),
			class:     policy.Git,
			egress:    true,
			verdict:   policy.Constrain,
			condition: "push",
			verify:    "-",
			reasons:   []policy.Reason{{Rule: "push", At: "e.yaml:8", Pos: "1:1", Class: policy.Git, Egress: true, Verdict: policy.Constrain}},
		},
		{
			name:    "push to the policy's protected branch",
			pol:     permissive,
			in:      one(pushing(sub("1:1", "git push origin prod", 1), policy.Push{Refs: refs("prod")})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			verify:  "-",
			reasons: []policy.Reason{{Rule: "push", At: "e.yaml:8", Pos: "1:1", Class: policy.Git, Egress: true, Verdict: policy.Constrain},
				{Rule: "push", At: "e.yaml:8", Pos: "1:1", Text: "git push to the protected branch prod is refused", Egress: true, Verdict: policy.Deny}},
		},
		{
			// Forcing is allowed, but "+:" still pushes every matching
			// branch, prod too.
			name: "forced matching push with force allowed",
			pol:  permissive,
			in: one(pushing(sub("1:1", "git push origin +:", 1),
				policy.Push{Refs: []policy.Refspec{{Text: "+:", Forced: true, Matching: true}}})),
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			verify:  "-",
			reasons: []policy.Reason{{Rule: "push", At: "e.yaml:8", Pos: "1:1", Class: policy.Git, Egress: true, Verdict: policy.Constrain},
				{Rule: "push", At: "e.yaml:8", Pos: "1:1", Text: "git push of every matching branch (prod too) is refused", Egress: true, Verdict: policy.Deny}},
		},
		{
			name:      "push constraint on a rule without sub and a bare command",
			pol:       bare,
			in:        one(pushing(cmd("1:1", "git"), policy.Push{Current: true})),
			class:     policy.Git,
			verdict:   policy.Constrain,
			condition: condCurrent,
			verify:    "-",
			reasons:   []policy.Reason{{Rule: "push", At: "b.yaml:4", Pos: "1:1", Class: policy.Git, Verdict: policy.Constrain}},
		},
		{
			// What it would update is not known: the parser read no
			// push in it.
			name:    "push constraint on a command the parser does not read as a push",
			pol:     bare,
			in:      one(sub("1:1", "git branch -d main", 1)),
			class:   policy.Git,
			verdict: policy.Deny,
			verify:  "-",
			reasons: []policy.Reason{{Rule: "push", At: "b.yaml:4", Pos: "1:1", Class: policy.Git, Verdict: policy.Constrain},
				{Rule: "push", At: "b.yaml:4", Pos: "1:1", Verdict: policy.Deny,
					Text: "a push undosh cannot read is refused (constraint: push reads git's pushes)"}},
		},
		{
			name:      "free-text constraint",
			in:        one(cmd("1:1", "deploy prod")),
			verdict:   policy.Constrain,
			condition: "only on weekdays",
			reasons:   []policy.Reason{{Rule: "deploy", At: atDeploy, Pos: "1:1", Verdict: policy.Constrain}},
		},
		{
			name: "conditions of several commands are joined once each",
			in: policy.Input{Commands: []policy.Command{
				pushing(sub("1:1", "git push origin feature/x", 1), policy.Push{Refs: refs("feature/x")}), cmd("1:27", "deploy prod"), cmd("1:40", "deploy prod"),
			}},
			class:     policy.Git,
			egress:    true,
			verdict:   policy.Constrain,
			condition: condVerify + "; only on weekdays",
			reasons: []policy.Reason{push,
				{Rule: "deploy", At: atDeploy, Pos: "1:27", Text: "deploy prod", Verdict: policy.Constrain},
				{Rule: "deploy", At: atDeploy, Pos: "1:40", Verdict: policy.Constrain}},
		},
		{
			name: "a denied push wins over a constrained one",
			in: policy.Input{Commands: []policy.Command{
				pushing(sub("1:1", "git push origin feature/x", 1), policy.Push{Refs: refs("feature/x")}),
				pushing(sub("1:28", "git push origin main", 1), policy.Push{Refs: refs("main")}),
			}},
			class:   policy.Git,
			egress:  true,
			verdict: policy.Deny,
			reasons: []policy.Reason{push, {Rule: "git-push", At: atGitPush, Pos: "1:28", Class: policy.Git, Egress: true,
				Verdict: policy.Constrain, Message: "pushes cannot be undone"},
				{Rule: "git-push", At: atGitPush, Pos: "1:28", Text: "git push to the protected branch main is refused",
					Egress: true, Verdict: policy.Deny, Message: "pushes cannot be undone"}},
		},

		// Rollback and verify from rules.
		{
			name:     "rule sets rollback and verify",
			in:       policy.Input{Commands: []policy.Command{cmd("1:1", "ls"), sub("1:5", "go test ./...", 1)}},
			class:    policy.Git,
			rollback: policy.RollbackNever,
			verify:   "go vet ./...",
			reasons: []policy.Reason{rs("read-only", atReadOnly, policy.None),
				{Rule: "go-test", At: atGoTest, Pos: "1:5", Text: "go test ./...", Class: policy.Git}},
		},

		// Unknown code.
		{
			name:      "syntax error",
			in:        policy.Input{SyntaxError: &policy.Unknown{Pos: "2:7", Reason: "unclosed quote"}},
			class:     policy.Fork,
			syntaxErr: "2:7: unclosed quote",
			reasons:   []policy.Reason{{Rule: "unknown_code", At: atUnknownCod, Pos: "2:7", Text: "syntax error: unclosed quote", Class: policy.Fork}},
		},
		{
			name: "unknown construct",
			in: policy.Input{Unknown: []policy.Unknown{{Pos: "1:6", Reason: "eval of a string known only at run time", Text: `eval "$x"`}},
				Commands: []policy.Command{cmd("1:1", "ls")}},
			class: policy.Fork,
			reasons: []policy.Reason{
				{Rule: "unknown_code", At: atUnknownCod, Pos: "1:6", Text: `eval of a string known only at run time: eval "$x"`, Class: policy.Fork},
				rs("read-only", atReadOnly, policy.None)},
		},
		{
			name:  "unknown construct whose reason quotes its text",
			in:    policy.Input{Unknown: []policy.Unknown{{Pos: "1:1", Reason: "${x@P} expands a prompt", Text: "${x@P}"}}},
			class: policy.Fork,
			reasons: []policy.Reason{
				{Rule: "unknown_code", At: atUnknownCod, Pos: "1:1", Text: "${x@P} expands a prompt", Class: policy.Fork}},
		},
		{
			name:    "nothing at all",
			in:      policy.Input{},
			reasons: []policy.Reason{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.bug != "" {
				t.Skip("BUG: " + tt.bug)
			}
			pol, c := p, ctx
			if tt.pol != nil {
				pol = tt.pol
			}
			if tt.ctx != nil {
				c = *tt.ctx
			}
			want := policy.Decision{Class: tt.class, Egress: tt.egress, Verdict: tt.verdict, Condition: tt.condition,
				Rollback: policy.RollbackOnFailure, Verify: "make check", Roots: c.Roots, Reasons: tt.reasons, SyntaxErr: tt.syntaxErr}
			if tt.rollback != "" {
				want.Rollback = tt.rollback
			}
			switch tt.verify {
			case "-":
				want.Verify = ""
			case "":
			default:
				want.Verify = tt.verify
			}
			got := pol.Decide(tt.in, c)
			if tt.checks != nil {
				want.Checks = *tt.checks
			} else {
				got.Checks = policy.Checks{}
			}
			// Compare texts only where the test names them.
			if len(got.Reasons) == len(want.Reasons) {
				for i := range got.Reasons {
					if want.Reasons[i].Text == "" {
						got.Reasons[i].Text = ""
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// atDefault is where the embedded default holds the first line that starts
// with prefix.
func atDefault(prefix string) string {
	for i, l := range strings.SplitAfter(string(policy.DefaultSource()), "\n") {
		if strings.HasPrefix(l, prefix) {
			return fmt.Sprintf("%s:%d", policy.DefaultName, i+1)
		}
	}
	return "no line starts with " + prefix
}

// TestDecideDefault decides with the embedded default: reasons point into it.
func TestDecideDefault(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	tests := []struct {
		name string
		in   policy.Input
		want policy.Decision
	}{
		{
			name: "protected push",
			in:   one(pushing(sub("1:1", "git push origin main", 1), policy.Push{Refs: refs("main")})),
			want: policy.Decision{Class: policy.Git, Egress: true, Verdict: policy.Deny, Rollback: policy.RollbackOnFailure, Roots: []string{},
				Reasons: []policy.Reason{
					{Rule: "git-push", At: atDefault("  - name: git-push\n"), Pos: "1:1", Text: "git push origin main", Class: policy.Git, Egress: true,
						Verdict: policy.Constrain, Message: "pushes reach outside the sandbox and cannot be undone"},
					{Rule: "git-push", At: atDefault("  - name: git-push\n"), Pos: "1:1", Text: "git push to the protected branch main is refused", Egress: true,
						Verdict: policy.Deny, Message: "pushes reach outside the sandbox and cannot be undone"},
				}},
		},
		{
			name: "unknown program and a system write",
			in: one(with(cmd("3:4", "frob x"), func(c *policy.Command) {
				c.Writes = []policy.Write{{Path: "/etc/frob", Resolved: true}}
			})),
			want: policy.Decision{Class: policy.Fork, Rollback: policy.RollbackOnFailure, Roots: []string{},
				Reasons: []policy.Reason{
					{Rule: "unknown_program", At: atDefault("  unknown_program:"), Pos: "3:4", Text: "no rule knows frob: frob x", Class: policy.Git},
					{Rule: "system", At: atDefault("  - name: system\n"), Pos: "3:4", Text: "writes /etc/frob", Class: policy.Fork},
				}},
		},
		{
			name: "syntax error",
			in:   policy.Input{SyntaxError: &policy.Unknown{Pos: "1:3", Reason: "bad"}},
			want: policy.Decision{Class: policy.Fork, Rollback: policy.RollbackOnFailure, Roots: []string{}, SyntaxErr: "1:3: bad",
				Reasons: []policy.Reason{{Rule: "unknown_code", At: atDefault("  unknown_code:"), Pos: "1:3", Text: "syntax error: bad", Class: policy.Fork}}},
		},
		{
			name: "~/.cache is scratch under Home",
			in:   one(redirect("/home/u/.cache/x", true)),
			want: policy.Decision{Class: policy.Git, Rollback: policy.RollbackOnFailure, Roots: []string{},
				Reasons: []policy.Reason{{Rule: "scratch", At: atDefault("  scratch:\n"), Pos: "1:1", Text: "writes /home/u/.cache/x in a scratch path", Class: policy.Git}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := p.Decide(tt.in, policy.Context{Cwd: "/w", Home: "/home/u"})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// A function in a harness's snapshot stands for the program it is named
// after when a rule names that program; nothing else does.
func TestStands(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	const snap = "/home/agent/.claude/shell-snapshots/snapshot-bash-1-ab.sh"
	for _, tc := range []struct {
		file, name string
		want       bool
	}{
		{snap, "grep", true},
		{snap, "find", true},
		{"/home/agent/.codex/shell_snapshots/0199.snapshot.sh", "rg", true},
		{snap, "mkcd", false},                   // no rule names it
		{"/work/proj/lib.sh", "grep", false},    // not a harness's scaffolding
		{"/work/proj/bin/activate", "ls", true}, // a virtualenv's activate is scaffolding too
	} {
		if got := p.Stands(tc.file, tc.name); got != tc.want {
			t.Errorf("Stands(%s, %s) = %v, want %v", tc.file, tc.name, got, tc.want)
		}
	}
}

// Self-protection refuses what changes undosh itself, and only that;
// self_protect: false turns it off.
func TestSelfProtect(t *testing.T) {
	on := policy.Default()
	off := loadTest(t, "off.yaml", "version: 1\nself_protect: false\n")
	ctx := policy.Context{Cwd: "/work/proj", Roots: []string{"/work/proj"}, Home: "/home/agent",
		Self: []string{"/home/agent/.local/state/undosh", "/work/proj/undosh.yaml", "/usr/bin/bash"}}
	cases := []struct {
		in      policy.Input
		refused bool
	}{
		{one(redirect("/etc/undosh/policy.yaml", true)), true},
		{one(redirect("/etc/undosh", true)), true},
		{one(redirect("/usr/lib/undosh/real/bash", true)), true},
		{one(redirect("/home/agent/.local/state/undosh/journal.jsonl", true)), true},
		{one(redirect("/work/proj/undosh.yaml", true)), true},
		{one(redirect("/usr/bin/bash", true)), true},
		{one(cmd("1:1", "undoctl uninstall")), true},
		{one(cmd("1:1", "undoctl --root /mnt uninstall --sh")), true},
		{one(diverting(cmd("1:1", "dpkg-divert --remove /bin/bash"), "/bin/bash")), true},
		{one(diverting(cmd("1:1", "dpkg-divert --rename --remove /usr/bin/../bin/sh"), "/usr/bin/sh")), true},
		// Not undosh's.
		{one(redirect("/etc/undosh-notes", true)), false},
		{one(redirect("/work/proj/undosh.yaml.bak", true)), false},
		{one(redirect("/home/agent/.local/state/undosh2", true)), false},
		// The parser reads no diversion in these (TestDiverts).
		{one(cmd("1:1", "dpkg-divert --list")), false},
		{one(cmd("1:1", "dpkg-divert --truename /bin/bash")), false},
		{one(diverting(cmd("1:1", "dpkg-divert --remove /usr/bin/perf"), "/usr/bin/perf")), false},
		{one(cmd("1:1", "undoctl log")), false},
		{one(cmd("1:1", "echo uninstall")), false},
	}
	for _, c := range cases {
		d := on.Decide(c.in, ctx)
		refused := false
		for _, r := range d.Reasons {
			if r.Rule == policy.SelfRule {
				refused = r.Verdict == policy.Deny && r.Text == policy.SelfText
			}
		}
		if refused != c.refused || refused && d.Verdict != policy.Deny {
			t.Errorf("%s: self-protection %v (verdict %s), want %v: %+v", c.in.Commands[0].Text, refused, d.Verdict, c.refused, d.Reasons)
		}
		if d := off.Decide(c.in, ctx); slices.ContainsFunc(d.Reasons, func(r policy.Reason) bool { return r.Rule == policy.SelfRule }) {
			t.Errorf("%s: refused with self_protect: false: %+v", c.in.Commands[0].Text, d.Reasons)
		}
	}
}

// WritesSeen holds for a step whose every write the parser saw in its
// workspace or a scratch path, and for nothing that may write elsewhere.
func TestWritesSeen(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	tests := []struct {
		name string
		in   policy.Input
		want bool
	}{
		{"workspace write", one(redirect("/w/f", true)), true},
		{"scratch write", one(redirect("/home/u/.cache/x", true)), true},
		{"read-only", one(sub("1:1", "echo hi", 1)), true},
		{"unknown program", one(cmd("1:1", "frob x")), false},
		{"unresolved write", one(redirect("$f", false)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := p.Decide(tt.in, policy.Context{Cwd: "/w", Home: "/home/u", Roots: []string{"/w"}})
			if got := d.WritesSeen(); got != tt.want {
				t.Errorf("WritesSeen = %v, want %v; reasons %+v", got, tt.want, d.Reasons)
			}
		})
	}
}
