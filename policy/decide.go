package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/undosh/undosh/internal/pathglob"
)

// Input is what the policy decides on: the facts a parser found in one
// step's source. The glue fills it from the parser's facts.
type Input struct {
	Commands []Command
	Unknown  []Unknown
	// SyntaxError is set when the source does not parse.
	SyntaxError *Unknown
}

// Unknown is a construct whose effect cannot be known before it runs.
type Unknown struct {
	Pos    string // line:col in the source
	Reason string
	Text   string
}

// Arg is one argument word.
type Arg struct {
	Value   string
	Dynamic bool
}

// Command is one simple command of the step.
type Command struct {
	Pos         string
	Text        string
	Argv        []Arg
	Sub         int // index of the subcommand in Argv, or 0
	Root        bool
	Shadowed    bool
	Builtin     bool
	Function    bool
	WritesKnown bool
	Script      string // the script whose text was classified, or ""
	Opaque      bool   // runs code that could not be read
	Missing     bool   // with Script: the script does not exist yet
	Network     bool   // runs code that uses the network
	SQL         string // "read-only" or "write" for database clients
	// Push is set for a command that may push: what it updates, as
	// the parser reads its words and configuration (its Command.Push).
	// A push constraint reads this, never the arguments.
	Push *Push
	// Hosts are the servers the command names: its URLs and host
	// words, a database tool's -h, PGHOST, connection string (see the
	// parser's Command.Hosts). The policy's hosts: reads these, never
	// the arguments.
	Hosts []Server
	// Diverts are the paths whose dpkg diversion the command changes
	// (the parser's Command.Diverts).
	Diverts []string
	// NamedPaths are the absolute paths the words of a program whose
	// writes are not known name (the parser's Command.NamedPaths).
	NamedPaths []string
	Cwd        string // "" when unknown
	Writes     []Write
	Via        string
	// OwnSignal: a kill of the shell itself or its own jobs only (the
	// parser's Command.OwnSignal).
	OwnSignal bool
}

// Push is what a push updates; see the parser's Push.
type Push struct {
	// Refs are the refspecs the command names, Config those its
	// configuration adds.
	Refs, Config []Refspec
	// Force: an option forces, deletes, prunes, mirrors or pushes every
	// branch.
	Force bool
	// Current: the push updates the current branch.
	Current bool
}

// Refspec is one refspec of a push; see the parser's Refspec.
type Refspec struct {
	Text     string
	Dynamic  bool // known only at run time
	Forced   bool // +src:dst
	Matching bool // ":" alone
	Delete   bool // :dst
	Current  bool // the destination is the current branch
	Dst      string
}

// Server is one server a command names.
type Server struct {
	Value    string
	Dynamic  bool // known only at run time: may be any
	Loopback bool // this machine
}

// Write is one path a command writes.
type Write struct {
	Path     string
	Resolved bool
	Tree     bool
	// Stream: the command opens the file and writes into it, and does
	// nothing else to it (see [PathRule].Stream).
	Stream bool
}

// Context is where the step runs.
type Context struct {
	Cwd   string
	Roots []string // workspace roots, absolute
	Home  string
	// Trusted lists more directories whose programs keep their base
	// name's rules when named by path, besides trusted_dirs: undosh's
	// own (`/usr/lib/undosh/undoctl log` is undoctl).
	Trusted []string
	// Self lists more of undosh's own files than the fixed ones
	// (self.go): its state directory, the policy files in force, the
	// installed shells that are its front end.
	Self []string
	// Real maps workspace roots and scratch paths (expanded) to the
	// same directories with symbolic links resolved, where they differ:
	// the parser gives written paths resolved, so a workspace that is
	// itself reached through a link (/work -> /data/work) still holds
	// them.
	Real map[string]string
	// Resolve, when set, gives more of Self and Real, asked only when a
	// write is judged (resolving takes I/O that a read-only step need
	// not pay); the caller memoises it.
	Resolve func() (self []string, real map[string]string)
}

// Decision is what the policy says about one step.
type Decision struct {
	Class     Class   `json:"class"`
	Egress    bool    `json:"egress"`
	Verdict   Verdict `json:"verdict"`
	Condition string  `json:"condition,omitempty"`
	// Checks say what undosh verifies at run time before a constrained
	// step runs.
	Checks    Checks   `json:"checks,omitzero"`
	Rollback  string   `json:"rollback"`
	Verify    string   `json:"verify,omitempty"`
	Roots     []string `json:"roots"`
	Reasons   []Reason `json:"reasons"`
	SyntaxErr string   `json:"syntax_error,omitempty"`
	// Own: every command of the step is one of undosh's own tools, decided
	// by a rule with own (and nothing else about it, not a write, adds a
	// reason): it runs as it is, outside any limit.
	Own bool `json:"own,omitempty"`
}

// WritesSeen reports whether every write of the step is one the parser
// saw, in a workspace or a scratch path, and every command one of class
// none: nothing in it is known to write beyond its workspace, or may
// (an unknown program, a build, git's hooks). Rules name these reasons
// in [Policy.path].
func (d *Decision) WritesSeen() bool {
	for _, r := range d.Reasons {
		if r.Class != None && r.Rule != "workspace" && r.Rule != "scratch" {
			return false
		}
	}
	return true
}

// Live returns what the step's machine-class reasons act on that lives on
// this machine (each rule's live, once), and whether every one of them
// does. When all do, a copy of the machine is no use to the step (it has
// no server in it, and none of the sandbox's processes): with no sandbox
// host, it runs on the machine under a checkpoint of what it names.
func (d *Decision) Live() (names []string, all bool) {
	all = d.Class == Fork
	for _, r := range d.Reasons {
		if r.Class != Fork {
			continue
		}
		if r.Live == "" {
			all = false
		} else if !containsStr(names, r.Live) {
			names = append(names, r.Live)
		}
	}
	return names, all && len(names) > 0
}

// Checks are the run-time conditions of a constrained step.
type Checks struct {
	// Branch: the step pushes the current branch of Cwd (or HEAD), which
	// must not be one of the protected branches.
	Branch bool   `json:"branch,omitempty"`
	Cwd    string `json:"cwd,omitempty"`
	// Verify: verify must pass before the step runs. A constraint undosh
	// cannot check by itself (a sentence in a user's rule) is met only by
	// a passing verify.
	Verify bool `json:"verify,omitempty"`
}

// Reason is one thing that contributed to a decision.
type Reason struct {
	Rule    string  `json:"rule"`
	At      string  `json:"at"`   // policy file:line
	Pos     string  `json:"pos"`  // line:col in the source
	Text    string  `json:"text"` // what it is about
	Class   Class   `json:"class"`
	Egress  bool    `json:"egress,omitempty"`
	Verdict Verdict `json:"verdict"`
	Message string  `json:"message,omitempty"`
	// Live is the rule's live: what the command acts on that lives on
	// this machine, not in a copy of it.
	Live string `json:"live,omitempty"`
}

// Decide maps the facts of one step to a decision.
func (p *Policy) Decide(in Input, ctx Context) Decision {
	d := Decision{Class: None, Verdict: Run, Rollback: p.Rollback, Verify: p.Verify, Roots: ctx.Roots}
	if d.Roots == nil {
		d.Roots = []string{}
	}
	never := false
	add := func(r Reason) {
		d.Reasons = append(d.Reasons, r)
		d.Class = max(d.Class, r.Class)
		d.Egress = d.Egress || r.Egress
		d.Verdict = max(d.Verdict, r.Verdict)
	}
	if e := in.SyntaxError; e != nil {
		d.SyntaxErr = e.Pos + ": " + e.Reason
		add(Reason{Rule: "unknown_code", At: p.location("classes.unknown_code"), Pos: e.Pos,
			Text: "syntax error: " + e.Reason, Class: p.UnknownCode})
	}
	for _, u := range in.Unknown {
		text := u.Reason
		if u.Text != "" && !strings.Contains(u.Reason, u.Text) {
			text += ": " + clip(u.Text)
		}
		add(Reason{Rule: "unknown_code", At: p.location("classes.unknown_code"), Pos: u.Pos,
			Text: text, Class: p.UnknownCode})
	}
	var conditions []string
	own := len(in.Commands) > 0 && in.SyntaxError == nil && len(in.Unknown) == 0
	anyOwn := false
	for i := range in.Commands {
		c := &in.Commands[i]
		rs, matched, rule := p.command(c, ctx)
		// A step is undosh's own when its commands are: those of an own
		// rule, and the read-only builtins and scaffolding a harness
		// wraps around them (source SNAPSHOT, shopt, eval, pwd -P >| F).
		ownRule := rule != nil && rule.Own
		around := (c.Builtin || rule != nil && rule.Scaffold) && !ownRule
		for _, r := range rs {
			add(r)
			own = own && (ownRule && r.Rule == rule.Name || around && r.Class == None && r.Verdict == Run && !r.Egress)
		}
		own = own && (ownRule || around)
		anyOwn = anyOwn || ownRule
		if rule != nil {
			if rule.Rollback == RollbackNever {
				never = true
			}
			if rule.Verify != "" {
				d.Verify = rule.Verify
			}
		}
		// Every rule that may apply constrains, not only the one that
		// surely does: git $SUB may be a push.
		for _, r := range matched {
			if r.Verdict != Constrain {
				continue
			}
			cond, verdict, checks := p.constraint(r, c)
			if checks.Branch {
				d.Checks.Branch = true
				d.Checks.Cwd = c.Cwd
			}
			d.Checks.Verify = d.Checks.Verify || checks.Verify
			if verdict == Deny {
				add(Reason{Rule: r.Name, At: r.At, Pos: c.Pos, Text: cond, Class: None,
					Egress: r.Egress, Verdict: Deny, Message: r.Message})
			} else if !containsStr(conditions, cond) {
				conditions = append(conditions, cond)
			}
		}
	}
	// A script missing as the step is decided runs nothing, unless a
	// program of the step makes it: when the step is more than read-only,
	// it is code that could not be read.
	for i := range in.Commands {
		if c := &in.Commands[i]; c.Missing && d.Class > None {
			add(Reason{Rule: "unknown_program", At: p.location("classes.unknown_program"), Pos: c.Pos,
				Text:  c.Script + " does not exist yet, and another command of the step may make it: " + clip(c.Text),
				Class: p.UnknownProgram})
		}
	}
	if never {
		d.Rollback = RollbackNever
	}
	d.Own = own && anyOwn && d.Verdict == Run
	if d.Verdict == Constrain {
		d.Condition = strings.Join(conditions, "; ")
	}
	if d.Reasons == nil {
		d.Reasons = []Reason{}
	}
	return d
}

func clip(s string) string {
	s = strings.ReplaceAll(s, "\n", "\\n")
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// command decides one command. It returns its reasons, the rules that may
// apply, and the rule that decided it, if any.
func (p *Policy) command(c *Command, ctx Context) ([]Reason, []*Rule, *Rule) {
	var out []Reason
	text := clip(c.Text)
	if len(c.Argv) == 0 || c.Argv[0].Dynamic {
		// Redirections alone, or a dynamic name (already unknown code).
		out = append(out, p.writes(c, ctx, None)...)
		if len(out) == 0 {
			out = append(out, Reason{Rule: "redirect", Pos: c.Pos, Text: text})
		}
		return out, nil, nil
	}
	name := c.Argv[0].Value
	base := path.Base(name)
	var decided *Rule
	var matched []*Rule
	cls := None
	switch {
	case c.Function:
		out = append(out, Reason{Rule: "function", Pos: c.Pos,
			Text: "calls the function " + name + " (its body is classified)"})
	case c.OwnSignal && !c.Shadowed:
		out = append(out, Reason{Rule: "own-processes", Pos: c.Pos,
			Text: text + ": signals only the shell itself or its own jobs"})
	default:
		var definite *Rule
		matched, definite = p.rules(c)
		for _, r := range matched {
			cls = max(cls, r.Class)
			out = append(out, Reason{Rule: r.Name, At: r.At, Pos: c.Pos, Text: text, Class: r.Class,
				Egress: r.Egress, Verdict: r.Verdict, Message: r.Message, Live: r.Live})
		}
		if definite != nil {
			decided = definite
		}
		if c.Script != "" {
			// The script's own commands were classified; the runner
			// itself adds nothing but its egress and verdict.
			cls = None
			for i := range out {
				out[i].Class = None
			}
			what := "reads and classifies " + c.Script
			if c.Missing {
				what = c.Script + " does not exist: runs nothing"
			}
			out = append(out, Reason{Rule: "script", Pos: c.Pos, Text: what})
			break
		}
		unknown := true
		switch {
		case len(matched) == 0 && c.Builtin:
			unknown = false
			out = append(out, Reason{Rule: "builtin", Pos: c.Pos, Text: text})
		case len(matched) == 0:
			cls = max(cls, p.UnknownProgram)
			out = append(out, Reason{Rule: "unknown_program", At: p.location("classes.unknown_program"),
				Pos: c.Pos, Text: "no rule knows " + base + ": " + text, Class: p.UnknownProgram})
		case c.Opaque && (definite == nil || !definite.Scaffold):
			cls = max(cls, p.UnknownProgram)
			out = append(out, Reason{Rule: "unknown_program", At: p.location("classes.unknown_program"),
				Pos: c.Pos, Text: "runs code the parser could not read: " + text, Class: p.UnknownProgram})
		case c.Shadowed && !c.Builtin:
			cls = max(cls, p.UnknownProgram)
			out = append(out, Reason{Rule: "unknown_program", At: p.location("classes.unknown_program"),
				Pos: c.Pos, Text: name + " may not be the program it names (a function, alias, PATH or preload changed it)",
				Class: p.UnknownProgram})
		case strings.Contains(name, "/") && !p.trusted(name, ctx.Trusted):
			cls = max(cls, p.UnknownProgram)
			out = append(out, Reason{Rule: "unknown_program", At: p.location("classes.unknown_program"),
				Pos: c.Pos, Text: name + " is path-qualified and does not inherit the trust of " + base,
				Class: p.UnknownProgram})
		default:
			unknown = false
		}
		if unknown && !c.WritesKnown {
			out = append(out, p.namedPaths(c, ctx)...)
		}
	}
	if p.SelfProtect {
		if why := selfCommand(c); why != "" {
			out = append(out, p.selfReason(c, why))
		}
	}
	out = append(out, p.writes(c, ctx, cls)...)
	if c.Network {
		out = append(out, Reason{Rule: "network_code", Pos: c.Pos, Egress: true,
			Text: "runs code that uses the network: " + text})
	}
	if c.Root {
		// As root, anything that is not read-only can reach the machine.
		for _, r := range out {
			if r.Class > None {
				out = append(out, Reason{Rule: "root", Pos: c.Pos,
					Text: "runs as root and is not read-only: " + text, Class: Fork})
				break
			}
		}
	}
	return out, matched, decided
}

// rules returns every rule that may match c, in order, up to and including
// the first that surely matches, which is also returned.
func (p *Policy) rules(c *Command) ([]*Rule, *Rule) {
	var out []*Rule
	for _, i := range p.candidates(path.Base(c.Argv[0].Value)) {
		r := &p.Rules[i]
		m, sure := r.match(c)
		if !m {
			continue
		}
		out = append(out, r)
		if sure {
			return out, r
		}
	}
	return out, nil
}

// writes classifies the paths c writes. cls is the class the command got
// from its rules: a git-class program whose writes are not known may write
// anywhere under its working directory.
func (p *Policy) writes(c *Command, ctx Context, cls Class) []Reason {
	var out []Reason
	for _, w := range c.Writes {
		out = append(out, p.path(c, ctx, w))
	}
	if !c.WritesKnown && cls == Git {
		if c.Cwd == "" {
			out = append(out, Reason{Rule: "unresolved_write", At: p.location("classes.unresolved_write"),
				Pos: c.Pos, Text: "runs in a directory known only at run time: " + clip(c.Text), Class: p.UnresolvedWrite})
		} else if where := p.where(c.Cwd, ctx); where == "" {
			out = append(out, Reason{Rule: "outside_write", At: p.location("classes.outside_write"),
				Pos: c.Pos, Text: "runs in " + c.Cwd + ", outside the workspace", Class: p.OutsideWrite})
		}
	}
	return out
}

// namedPaths classifies the paths an unknown program names in its
// arguments (/dev/sda, of=/dev/sdb, --target=/etc/x, -o/boot/x; the
// parser's NamedPaths) by the path rules: a program no rule knows may
// write what it names, and a device or a system tree makes it change the
// machine. Paths that no path rule classes above the unknown program add
// nothing: its working directory is what it is taken to write.
func (p *Policy) namedPaths(c *Command, ctx Context) []Reason {
	var out []Reason
	for _, named := range c.NamedPaths {
		for i := range p.Paths {
			r := &p.Paths[i]
			if !r.matches(named, ctx.Home) {
				continue
			}
			if r.Class > p.UnknownProgram {
				out = append(out, Reason{Rule: r.Name, At: r.At, Pos: c.Pos, Text: "names " + named + ", which " + path.Base(c.Argv[0].Value) + " may write",
					Class: r.Class, Egress: r.Egress, Verdict: r.Verdict, Message: r.Message})
			}
			break
		}
	}
	return out
}

// path classifies one written path.
func (p *Policy) path(c *Command, ctx Context, w Write) Reason {
	if !w.Resolved {
		return Reason{Rule: "unresolved_write", At: p.location("classes.unresolved_write"), Pos: c.Pos,
			Text: "writes a path known only at run time: " + clip(w.Path), Class: p.UnresolvedWrite}
	}
	if p.SelfProtect && selfPath(w.Path, ctx) {
		return p.selfReason(c, "writes "+w.Path)
	}
	for i := range p.Paths {
		r := &p.Paths[i]
		if r.Stream && !w.Stream {
			continue
		}
		if r.matches(w.Path, ctx.Home) {
			return Reason{Rule: r.Name, At: r.At, Pos: c.Pos, Text: "writes " + w.Path, Class: r.Class,
				Egress: r.Egress, Verdict: r.Verdict, Message: r.Message}
		}
	}
	switch p.where(w.Path, ctx) {
	case "workspace":
		return Reason{Rule: "workspace", At: p.location("workspace.roots"), Pos: c.Pos,
			Text: "writes " + w.Path + " in the workspace", Class: Git}
	case "scratch":
		return Reason{Rule: "scratch", At: p.location("workspace.scratch"), Pos: c.Pos,
			Text: "writes " + w.Path + " in a scratch path", Class: Git}
	}
	return Reason{Rule: "outside_write", At: p.location("classes.outside_write"), Pos: c.Pos,
		Text: "writes " + w.Path + ", outside the workspace", Class: p.OutsideWrite}
}

// resolved is what ctx.Resolve gives, if it is set.
func (ctx Context) resolved() (self []string, real map[string]string) {
	if ctx.Resolve == nil {
		return nil, nil
	}
	return ctx.Resolve()
}

// where says whether an absolute path lies in the workspace, in a scratch
// path, or neither ("").
func (p *Policy) where(abs string, ctx Context) string {
	_, resolved := ctx.resolved()
	in := func(root string) bool {
		if pathglob.Within(abs, root) {
			return true
		}
		real, ok := ctx.Real[root]
		if !ok {
			real, ok = resolved[root]
		}
		return ok && pathglob.Within(abs, real)
	}
	for _, r := range ctx.Roots {
		if in(r) {
			return "workspace"
		}
	}
	for _, r := range p.Roots {
		if in(expandHome(r, ctx.Home)) {
			return "workspace"
		}
	}
	for _, s := range p.Scratch {
		if in(expandHome(s, ctx.Home)) {
			return "scratch"
		}
	}
	return ""
}

// Places returns the directories a written path is weighed against,
// besides the path rules: the workspace roots of ctx and of the policy,
// and its scratch paths, with ~ expanded. A caller that resolves
// written paths through symbolic links resolves these too ([Context.Real]).
func (p *Policy) Places(ctx Context) []string {
	var out []string
	out = append(out, ctx.Roots...)
	for _, l := range [][]string{p.Roots, p.Scratch} {
		for _, r := range l {
			if e := expandHome(r, ctx.Home); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home == "" {
			return ""
		}
		return path.Join(home, rest)
	}
	return p
}

func (p *Policy) trusted(name string, more []string) bool {
	dir := path.Dir(name)
	for _, l := range [][]string{p.TrustedDirs, more} {
		for _, t := range l {
			if path.Clean(t) == dir {
				return true
			}
		}
	}
	return false
}

// constraint evaluates a constrained rule for c: the condition under which
// it may run, or Deny when it never may. A push is judged by what the
// parser read of it ([Command].Push): a command it does not read as a
// push is refused, since what it updates is not known.
func (p *Policy) constraint(r *Rule, c *Command) (string, Verdict, Checks) {
	if r.Constraint != "push" {
		return r.Constraint, Constrain, Checks{Verify: true}
	}
	push := c.Push
	if push == nil {
		return "a push undosh cannot read is refused (constraint: push reads git's pushes)", Deny, Checks{}
	}
	if push.Force && !p.Egress.AllowForcePush {
		return "git push that forces, deletes or mirrors is refused", Deny, Checks{}
	}
	verify := ""
	needVerify := Checks{Verify: p.Egress.PushNeedsVerify}
	current := Checks{Branch: true, Verify: p.Egress.PushNeedsVerify}
	if p.Egress.PushNeedsVerify {
		verify = " and only after verify passes"
	}
	protected := strings.Join(p.Egress.ProtectedBranches, " or ")
	// The configuration's refspecs (remote.<name>.push, push.default)
	// count as much as those the command names.
	for _, l := range [][]Refspec{push.Refs, push.Config} {
		for _, ref := range l {
			switch {
			case ref.Dynamic:
				return "git push to a branch named only at run time is refused (name the branch literally)", Deny, Checks{}
			case ref.Forced && !p.Egress.AllowForcePush:
				return "git push of a forced refspec (" + ref.Text + ") is refused", Deny, Checks{}
			case ref.Matching:
				return "git push of every matching branch (" + protected + " too) is refused", Deny, Checks{}
			case ref.Delete && !p.Egress.AllowForcePush:
				return "git push that deletes a remote branch (" + ref.Text + ") is refused", Deny, Checks{}
			case ref.Current:
				continue
			}
			// A pattern updates every branch it matches.
			for _, b := range p.Egress.ProtectedBranches {
				if ref.Dst == b || strings.Contains(ref.Dst, "*") && glob(ref.Dst, b, false) {
					return fmt.Sprintf("git push to the protected branch %s is refused", b), Deny, Checks{}
				}
			}
		}
	}
	if push.Current {
		return "push only when the current branch is not " + protected + verify, Constrain, current
	}
	return "push" + strings.TrimPrefix(verify, " and"), Constrain, needVerify
}

// ruleIndex finds the rules that can name a program without trying every
// rule's every pattern.
type ruleIndex struct {
	byName []nameRules // rules that name the program exactly, sorted by name
	wild   []int       // rules with a pattern (*, ?, or a path)
}

// nameRules are the rules that name one program, in policy order.
type nameRules struct {
	name  string
	rules []int
}

// lookup returns the rules that name base exactly.
func (ix *ruleIndex) lookup(base string) []int {
	i, ok := slices.BinarySearchFunc(ix.byName, base, func(n nameRules, s string) int { return strings.Compare(n.name, s) })
	if !ok {
		return nil
	}
	return ix.byName[i].rules
}

func (p *Policy) buildIndex() {
	for i := range p.Rules {
		r := &p.Rules[i]
		r.names = []string{}
		r.patterns = nil
		for _, prog := range r.Programs {
			if strings.ContainsAny(prog, "*?/") {
				r.patterns = append(r.patterns, prog)
			} else {
				r.names = append(r.names, prog)
			}
		}
		r.subFields, r.ifFields, r.unlessFields = splitAll(r.Sub), splitAll(r.IfArgs), splitAll(r.UnlessArgs)
	}
	p.index = newIndex(p.Rules)
}

func newIndex(rules []Rule) *ruleIndex {
	ix := &ruleIndex{}
	byName := map[string][]int{}
	for i, r := range rules {
		wild := false
		for _, prog := range r.Programs {
			if strings.ContainsAny(prog, "*?/") {
				wild = true
				continue
			}
			if l := byName[prog]; len(l) == 0 || l[len(l)-1] != i {
				byName[prog] = append(l, i)
			}
		}
		if wild {
			ix.wild = append(ix.wild, i)
		}
	}
	ix.byName = make([]nameRules, 0, len(byName))
	for name, l := range byName {
		ix.byName = append(ix.byName, nameRules{name, l})
	}
	slices.SortFunc(ix.byName, func(a, b nameRules) int { return strings.Compare(a.name, b.name) })
	return ix
}

// candidates returns, in order, the indices of the rules that may name the
// program base.
func (p *Policy) candidates(base string) []int {
	ix := p.index
	if ix == nil {
		// A Policy built by hand rather than loaded: index it now
		// without storing, so that concurrent callers do not race.
		ix = newIndex(p.Rules)
	}
	a, b := ix.lookup(base), ix.wild
	if len(b) == 0 {
		return a
	}
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}

// Stands reports whether a function that the sourced file defines under
// name stands for the program name, so that a call of it is classified
// as that program: file is a harness's scaffolding (a rule with
// `scaffold: true` for source or . matches it) and a rule names the
// program. Claude Code's shell snapshot shadows grep, find and rg with
// functions that run its embedded ugrep and bfs; the snapshot is the
// harness's, not the model's, and the kernel's limit holds the step
// whatever the function runs.
func (p *Policy) Stands(file, name string) bool {
	ix := p.index
	if ix == nil {
		ix = newIndex(p.Rules)
	}
	if len(ix.lookup(name)) == 0 {
		return false
	}
	src := &Command{Argv: []Arg{{Value: "source"}, {Value: file}}}
	for i := range p.Rules {
		if r := &p.Rules[i]; r.Scaffold {
			if m, sure := r.match(src); m && sure {
				return true
			}
		}
	}
	return false
}

// Knows reports whether a rule names the program base exactly (a rule
// for every program, such as version-and-help, does not count).
func (p *Policy) Knows(base string) bool {
	ix := p.index
	if ix == nil {
		ix = newIndex(p.Rules)
	}
	return len(ix.lookup(base)) > 0
}

// Emits returns the variables whose assignments the output of argv is,
// when the first rule that surely matches it says so (`emits`): `eval
// "$(dircolors -b)"` only sets LS_COLORS. ok is false when no such rule
// decides argv.
func (p *Policy) Emits(argv []string) (vars []string, ok bool) {
	if len(argv) == 0 {
		return nil, false
	}
	c := &Command{Argv: make([]Arg, len(argv))}
	for i, a := range argv {
		c.Argv[i] = Arg{Value: a}
	}
	_, definite := p.rules(c)
	if definite == nil || definite.Emits == nil {
		return nil, false
	}
	return definite.Emits, true
}
