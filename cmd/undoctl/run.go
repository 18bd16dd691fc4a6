package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/exit"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/policy"
)

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

const usage = `usage: undoctl COMMAND [flags]

machine steps (the local fork engine: root, overlayfs, namespaces):
  run --fork [--verify CMD] -- CMD…
                       run CMD in a copy of the machine with the network
                       cut off; commit it only if CMD and verify pass
  try [--json] -- CMD… run CMD in a copy, print what it changed, discard it
  guard dpkg|pip|npm [-- CMD…]
                       exit 0 inside a machine step, else refuse (126): the
                       check dpkg's hook runs (docs/guards.md)

steps (the journal of what undosh ran):
  log                  list the steps: id, time, class, exit, outcome,
                       checkpoint, command
  show N               everything about step N
  diff N               what step N changed
  back [--force] N     put the workspace back as it was before step N (the
                       current state is checkpointed first), or undo machine
                       step N (last first; --force over later changes)
  agent [--listen URL] [--serial NAME] [--relay LISTEN=DIAL]
                       the guest end of the host link: keeps the token and
                       role the host gives this VM after every resume, told
                       on the control channel (--listen URL, by default
                       vsock://5758 unless --serial is given) or on QEMU's
                       virtio-serial port NAME, where the host also runs
                       commands; --relay carries a Unix socket to the host
                       link's TCP address, as in --relay
                       unix:///run/undosh-host.sock=tcp://10.0.2.100:5757
  cost [--months N]    what the machine steps cost, from the policy's rates
                       (vCPU-hours and GiB-hours of forks, snapshot storage)
  services [--json]    the services running here that undosh checkpoints
                       before a step that talks to them, and their checkpoints
  service checkpoint NAME
                       checkpoint a service by hand (steps that talk to one
                       checkpoint it themselves)
  service restore ID   put a service back as it was at checkpoint ID (its
                       data as it is now is checkpointed first)
  demo [--keep]        run the seed's story through undosh in a throwaway
                       git project

policy:
  explain [--json] [--policy FILE] [-C DIR] 'CMD'
                       how undosh would protect CMD, with every reason
  explain --json-lines read one JSON-encoded command per line on stdin,
                       write one JSON decision per line
  policy check FILE    validate a policy file and run its examples
  policy default       print the embedded default policy

checkpoints:
  checkpoint [-m MSG]  checkpoint the workspace; prints the id (the existing
                       one when nothing changed)
  checkpoints          list the checkpoints, newest first (~0, ~1, …)
  diff A [B]           paths changed from checkpoint A to B, or to now
  restore ID           put the workspace back as it was at ID (ID or ~N);
                       the current state is checkpointed first
  gc [--max-age D] [--max-bytes N]
                       drop old checkpoints and unused objects, and the
                       records of machine commits older than D (which
                       can then no longer be undone)
  check                verify the store
  status               the workspace, the store, and what is left out

installation:
  install [--undosh PATH] [--fast PATH | --no-fast] [--user NAME] [--sh]
          [--guards | --no-guards] [--root DIR]
                       make undosh the agent's bash, through its fast front
                       end undosh-fast (and login shell, and sh); guard dpkg
                       and pip against machine changes outside a machine step
  uninstall [--root DIR]
                       put everything back
  doctor [--root DIR] [--user NAME] [--json]
                       what is installed (bash as undosh-fast or undosh), the
                       front end's server, the policy in force, the state
                       directory, and what undosh will do with a command

  version              print the version

common flags (and --json for commands whose output is data):
  -C DIR               the workspace (default: the working directory)
  --state DIR          the state directory (default: $UNDOSH_STATE_DIR,
                       /var/lib/undosh for root, ~/.local/state/undosh)
  --policy FILE        the policy (default: $UNDOSH_POLICY, then
                       /etc/undosh/policy.yaml, then the embedded default;
                       - names the embedded default)
`

// version is set by the build.
var version = "devel"

func run(args []string, io stdio, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "guard" {
		return guardCmd(args[1:], io, getenv)
	}
	if len(args) > 0 && (args[0] == "run" || args[0] == "try") {
		// These pass on the status of the command they ran.
		code, err := runCmd(args[0], args[1:], io, getenv)
		if err != nil {
			report(io.err, err)
			return exit.Code(err)
		}
		return code
	}
	err := dispatch(args, io, getenv)
	if err != nil {
		report(io.err, err)
	}
	return exit.Code(err)
}

// report prints an error as `undoctl: error: …`, with a hint when there is one.
func report(w io.Writer, err error) {
	var le *policy.LoadError
	var ee *classify.ExamplesError
	var he interface{ Hint() string }
	switch {
	case errors.As(err, &le):
		fmt.Fprintf(w, "undoctl: error: %s\n", le.Error())
		if le.Hint != "" {
			fmt.Fprintf(w, "undoctl: hint: %s\n", le.Hint)
		}
	case errors.As(err, &ee):
		for _, f := range ee.Failures {
			fmt.Fprintf(w, "undoctl: error: %s\n", f.Error())
		}
		fmt.Fprintf(w, "undoctl: hint: fix the rule that decides it, or the example; `undoctl explain --policy FILE 'CMD'` shows every reason\n")
	case errors.As(err, &he) && he.Hint() != "":
		fmt.Fprintf(w, "undoctl: error: %v\nundoctl: hint: %s\n", err, he.Hint())
	default:
		fmt.Fprintf(w, "undoctl: error: %v\n", err)
	}
}

func dispatch(args []string, io stdio, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(io.err, usage)
		return &exit.UsageError{Msg: "no command given"}
	}
	switch args[0] {
	case "explain":
		return explain(args[1:], io, getenv)
	case "policy":
		return policyCmd(args[1:], io, getenv)
	case "checkpoint", "checkpoints", "restore", "gc", "check", "status":
		return storeCmd(args[0], args[1:], io, getenv)
	case "diff":
		return diffCmd(args[1:], io, getenv)
	case "log", "show", "back":
		return journalCmd(args[0], args[1:], io, getenv)
	case "cost":
		return costCmd(args[1:], io, getenv)
	case "services", "service":
		return serviceCmd(args[0], args[1:], io, getenv)
	case "agent":
		return agentCmd(args[1:], io, getenv)
	case "demo":
		return demo(args[1:], io, getenv)
	case "install", "uninstall", "doctor":
		return installCmd(args[0], args[1:], io, getenv)
	case "version", "--version":
		fmt.Fprintf(io.out, "undoctl %s\n", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(io.out, usage)
		return nil
	}
	fmt.Fprint(io.err, usage)
	return &exit.UsageError{Msg: fmt.Sprintf("unknown command %q", args[0])}
}

// common holds the flags every command takes.
type common struct {
	dir, stateDir, policy string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "C", "", "the workspace directory")
	fs.StringVar(&c.stateDir, "state", "", "the state directory")
	fs.StringVar(&c.policy, "policy", "", "the policy file")
}

// parse parses flags that may come before or after the operands.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var ops []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, &exit.UsageError{Msg: err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return ops, nil
		}
		if args[0] == "--" {
			return append(ops, args[1:]...), nil
		}
		ops = append(ops, args[0])
		args = args[1:]
	}
}

// setup resolves the workspace and loads the policy.
func (c *common) setup(getenv func(string) string) (*policy.Policy, classify.Options, error) {
	dir := c.dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, classify.Options{}, fmt.Errorf("working directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, classify.Options{}, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, classify.Options{}, &exit.UsageError{Msg: fmt.Sprintf("-C %s: not a directory", dir)}
	}
	sd := state.Dir(c.stateDir, getenv, os.Getuid())
	cache := ""
	if sd != "" {
		cache = filepath.Join(sd, "cache")
	}
	p, err := classify.LoadPolicy(classify.PolicyPath(c.policy, getenv), cache)
	if err != nil {
		return nil, classify.Options{}, err
	}
	env := classify.Environ(os.Environ())
	env["PWD"] = abs
	// As bash -c would decide it: with this environment and no more.
	o := classify.Options{Policy: p, Cwd: abs, Env: env, EnvComplete: classify.StartsWith(env, false, false), StateDir: sd}
	o.Roots = classify.WorkspaceRoots(abs, env["HOME"])
	return p, o, nil
}

// output is the JSON form of a decision.
type output struct {
	Command string `json:"command"`
	policy.Decision
	Error string `json:"error,omitempty"`
}

func explain(args []string, io stdio, getenv func(string) string) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	lines := fs.Bool("json-lines", false, "read JSON-encoded commands from stdin, one per line")
	ops, err := parse(fs, args)
	if err != nil {
		return err
	}
	_, o, err := c.setup(getenv)
	if err != nil {
		return err
	}
	if *lines {
		if len(ops) > 0 {
			return &exit.UsageError{Msg: "explain --json-lines reads commands from stdin, not arguments"}
		}
		return explainLines(io, o)
	}
	if len(ops) != 1 {
		return &exit.UsageError{Msg: "explain takes one command: undoctl explain 'CMD'"}
	}
	res := classify.Decide(ops[0], o)
	if *asJSON {
		enc := json.NewEncoder(io.out)
		enc.SetEscapeHTML(false)
		return enc.Encode(output{Command: ops[0], Decision: res.Decision})
	}
	printDecision(io.out, ops[0], res.Decision)
	return nil
}

// explainLines decides one JSON-encoded command per input line. A line
// that is not a JSON string gets the most protective decision and an
// error, so the output stays aligned with the input.
func explainLines(io stdio, o classify.Options) error {
	sc := bufio.NewScanner(io.in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	w := bufio.NewWriter(io.out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	bad := 0
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var cmd string
		if err := json.Unmarshal([]byte(line), &cmd); err != nil {
			bad++
			out := output{Command: line, Error: fmt.Sprintf("line %d: not a JSON string: %v", n, err),
				Decision: policy.Decision{Class: policy.Fork, Verdict: policy.Deny, Rollback: policy.RollbackOnFailure,
					Roots: o.Roots, Reasons: []policy.Reason{}}}
			if err := enc.Encode(out); err != nil {
				return err
			}
			continue
		}
		if err := enc.Encode(output{Command: cmd, Decision: classify.Decide(cmd, o).Decision}); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if bad > 0 {
		return fmt.Errorf("%d input lines were not JSON strings", bad)
	}
	return nil
}

func printDecision(w io.Writer, cmd string, d policy.Decision) {
	egress := "no"
	if d.Egress {
		egress = "yes"
	}
	fmt.Fprintf(w, "command:   %s\n", cmd)
	fmt.Fprintf(w, "class:     %s%s\n", d.Class, classNote(d))
	fmt.Fprintf(w, "egress:    %s\n", egress)
	fmt.Fprintf(w, "verdict:   %s\n", d.Verdict)
	if d.Condition != "" {
		fmt.Fprintf(w, "condition: %s\n", d.Condition)
	}
	if d.Class == policy.Git {
		fmt.Fprintf(w, "rollback:  %s\n", d.Rollback)
	}
	if d.Verify != "" {
		fmt.Fprintf(w, "verify:    %s\n", d.Verify)
	}
	fmt.Fprintf(w, "workspace: %s\n", strings.Join(d.Roots, ", "))
	if d.SyntaxErr != "" {
		fmt.Fprintf(w, "syntax:    %s\n", d.SyntaxErr)
	}
	fmt.Fprintf(w, "reasons:\n")
	for _, r := range d.Reasons {
		mark := r.Class.String()
		if r.Egress {
			mark += "+egress"
		}
		if r.Verdict != policy.Run {
			mark += " " + r.Verdict.String()
		}
		fmt.Fprintf(w, "  %-6s %-12s %-20s %s\n", r.Pos, mark, r.Rule, r.Text)
		if r.Message != "" {
			fmt.Fprintf(w, "  %-6s %-12s %-20s (%s)\n", "", "", "", r.Message)
		}
		if r.At != "" {
			fmt.Fprintf(w, "  %-6s %-12s %-20s at %s\n", "", "", "", r.At)
		}
	}
}

func classNote(d policy.Decision) string {
	switch {
	case d.Own:
		return " (undosh's own tool: runs as it is, outside any limit)"
	case d.Class == policy.None:
		return " (read-only: runs straight through, under the read-only limit)"
	case d.Class == policy.Git:
		return " (changes workspace files: checkpoint first)"
	}
	if names, all := d.Live(); all {
		return " (live: " + strings.Join(names, ", ") + "; with no sandbox host it runs here, not in a copy, after a checkpoint of its workspace and of the services it names; docs/services.md)"
	}
	return " (changes the machine: runs in a copy)"
}

func policyCmd(args []string, io stdio, getenv func(string) string) error {
	if len(args) == 0 {
		return &exit.UsageError{Msg: "policy needs a subcommand: check FILE, default"}
	}
	switch args[0] {
	case "default":
		_, err := io.out.Write(policy.DefaultSource())
		return err
	case "check":
		fs := flag.NewFlagSet("policy check", flag.ContinueOnError)
		ops, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if len(ops) != 1 {
			return &exit.UsageError{Msg: "policy check takes one file: undoctl policy check FILE"}
		}
		p, err := policy.LoadFile(ops[0])
		if err != nil {
			return err
		}
		if err := classify.CheckExamples(p); err != nil {
			return err
		}
		fmt.Fprintf(io.out, "%s: ok (%d rules, %d path rules, %d examples hold)\n", ops[0], len(p.Rules), len(p.Paths), len(p.Examples))
		return nil
	}
	return &exit.UsageError{Msg: fmt.Sprintf("unknown policy subcommand %q", args[0])}
}
