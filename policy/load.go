package policy

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"mvdan.cc/sh/v3/syntax"

	"github.com/undosh/undosh"
)

// defaultYAML is policy.yaml at the top of the repository.
var defaultYAML = undosh.PolicyYAML

// DefaultName is the name the embedded default policy goes by in reasons
// and errors.
const DefaultName = "policy.yaml (embedded)"

// DefaultSource returns the text of the embedded default policy.
func DefaultSource() []byte { return defaultYAML }

// parseDefault parses src, the text of policy.yaml, as the default.
// Default does not call it: it uses the same policy compiled into
// default_gen.go by gen.go, and TestGenerated keeps the two the same.
func parseDefault(src []byte) (*Policy, error) {
	f, err := parseFile(DefaultName, src)
	if err != nil {
		return nil, err
	}
	p := builtin()
	f.applyTo(p)
	p.Files = []string{DefaultName}
	p.buildIndex()
	return p, nil
}

var defaultPolicy = sync.OnceValue(compiledDefault)

// Default returns the embedded default policy. Callers must not modify it.
func Default() *Policy { return defaultPolicy() }

// builtin is what a policy that sets nothing means.
func builtin() *Policy {
	return &Policy{
		Rollback:        RollbackOnFailure,
		MaxFileSize:     64 << 20,
		UnknownProgram:  Git,
		UnknownCode:     Fork,
		UnresolvedWrite: Fork,
		OutsideWrite:    Fork,
		Egress:          Egress{ProtectedBranches: []string{"main", "master"}, PushNeedsVerify: true},
		Host:            Host{Fallback: "auto"},
		Cost:            Cost{VCPUHour: 0.025, GiBHour: 0.0075, SnapshotGBMonth: 0.08},
		at:              map[string]string{},
	}
}

// LoadFile reads the policy at name. See [Load].
func LoadFile(name string) (*Policy, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, &LoadError{File: name, Msg: "cannot read the policy: " + errors.Unwrap(err).Error(),
			Hint: "check the path given by --policy or $UNDOSH_POLICY", Err: err}
	}
	return Load(name, data)
}

// Load parses a user's policy. Unless it says `extends: none`, it is merged
// onto the embedded default: its rules, path rules and examples come first,
// its roots, scratch paths, excludes and trusted directories are added, and
// the settings it names replace the default's. A policy that does not load
// returns a *[LoadError] with the file, line and column.
func Load(name string, data []byte) (*Policy, error) {
	f, err := parseFile(name, data)
	if err != nil {
		return nil, err
	}
	var p *Policy
	if f.extends == "none" {
		p = builtin()
	} else {
		p = Default().clone()
	}
	f.applyTo(p)
	p.Files = append(p.Files, name)
	p.buildIndex()
	return p, nil
}

func (p *Policy) clone() *Policy {
	c := *p
	c.Files = append([]string(nil), p.Files...)
	c.Roots = append([]string(nil), p.Roots...)
	c.Scratch = append([]string(nil), p.Scratch...)
	c.Exclude = append([]string(nil), p.Exclude...)
	c.TrustedDirs = append([]string(nil), p.TrustedDirs...)
	c.Rules = append([]Rule(nil), p.Rules...)
	c.Paths = append([]PathRule(nil), p.Paths...)
	c.Examples = append([]Example(nil), p.Examples...)
	c.Services = append([]ServiceDecl(nil), p.Services...)
	c.Egress.ProtectedBranches = append([]string(nil), p.Egress.ProtectedBranches...)
	c.index = nil
	c.at = make(map[string]string, len(p.at))
	for k, v := range p.at {
		c.at[k] = v
	}
	return &c
}

// checkNames refuses two rules of one file with the same name. A user's
// rule may reuse a name of the default's: reasons then say which file.
func (f *file) checkNames() error {
	seen := map[string]Rule{}
	for _, r := range f.rules {
		if prev, ok := seen[r.Name]; ok {
			return &LoadError{File: f.name, Line: r.nameLine, Col: r.nameCol,
				Msg:  fmt.Sprintf("rule %q is defined twice (first at %s)", r.Name, prev.At),
				Hint: "give each rule its own name"}
		}
		seen[r.Name] = r
	}
	svc := map[string]string{}
	for _, s := range f.services {
		if at, ok := svc[s.Name]; ok {
			return &LoadError{File: f.name, Msg: fmt.Sprintf("service %q is declared twice (at %s and %s)", s.Name, at, s.At),
				Hint: "give each service its own name"}
		}
		svc[s.Name] = s.At
	}
	return nil
}

// file is what one policy file says, before it is merged.
type file struct {
	name    string
	extends string

	roots, scratch, exclude, trusted []string
	maxFileSize                      *int64
	rollback, verify                 *string
	enforce, selfProtect             *bool
	escalate                         *string
	classes                          map[string]Class
	protected                        []string
	allowForce, pushVerify           *bool
	hostAddr, hostFallback           *string
	cost                             map[string]float64
	services                         []ServiceDecl

	rules    []Rule
	paths    []PathRule
	examples []Example
	at       map[string]string
}

func (f *file) applyTo(p *Policy) {
	p.Roots = append(p.Roots, f.roots...)
	p.Scratch = append(p.Scratch, f.scratch...)
	p.Exclude = append(p.Exclude, f.exclude...)
	p.TrustedDirs = append(p.TrustedDirs, f.trusted...)
	if f.maxFileSize != nil {
		p.MaxFileSize = *f.maxFileSize
	}
	if f.rollback != nil {
		p.Rollback = *f.rollback
	}
	if f.verify != nil {
		p.Verify = *f.verify
	}
	if f.enforce != nil {
		p.Enforce = *f.enforce
	}
	if f.escalate != nil {
		p.Escalate = *f.escalate
	}
	if f.selfProtect != nil {
		p.SelfProtect = *f.selfProtect
	}
	for k, c := range f.classes {
		switch k {
		case "unknown_program":
			p.UnknownProgram = c
		case "unknown_code":
			p.UnknownCode = c
		case "unresolved_write":
			p.UnresolvedWrite = c
		case "outside_write":
			p.OutsideWrite = c
		}
	}
	if f.protected != nil {
		p.Egress.ProtectedBranches = f.protected
	}
	if f.allowForce != nil {
		p.Egress.AllowForcePush = *f.allowForce
	}
	if f.pushVerify != nil {
		p.Egress.PushNeedsVerify = *f.pushVerify
	}
	if f.hostAddr != nil {
		p.Host.Address = *f.hostAddr
	}
	if f.hostFallback != nil {
		p.Host.Fallback = *f.hostFallback
	}
	p.Services = append(p.Services, f.services...)
	for k, v := range f.cost {
		switch k {
		case "vcpu_hour":
			p.Cost.VCPUHour = v
		case "gib_hour":
			p.Cost.GiBHour = v
		case "snapshot_gb_month":
			p.Cost.SnapshotGBMonth = v
		}
	}
	p.Rules = append(append([]Rule(nil), f.rules...), p.Rules...)
	p.Paths = append(append([]PathRule(nil), f.paths...), p.Paths...)
	p.Examples = append(append([]Example(nil), f.examples...), p.Examples...)
	for k, v := range f.at {
		p.at[k] = v
	}
}

// reader walks a YAML syntax tree and stops at the first error.
type reader struct {
	name    string
	err     *LoadError
	anchors map[string]ast.Node
}

func (r *reader) fail(n ast.Node, msg, hint string) {
	if r.err != nil {
		return
	}
	line, col := position(n)
	r.err = &LoadError{File: r.name, Line: line, Col: col, Msg: msg, Hint: hint}
}

// position is where a node starts for a person: a block mapping starts at
// its first key, not at the colon after it.
func position(n ast.Node) (line, col int) {
	switch x := n.(type) {
	case *ast.MappingNode:
		if len(x.Values) > 0 && !x.IsFlowStyle {
			return position(x.Values[0])
		}
	case *ast.MappingValueNode:
		return position(x.Key)
	}
	if n == nil || n.GetToken() == nil {
		return 1, 1
	}
	return n.GetToken().Position.Line, n.GetToken().Position.Column
}

func (r *reader) at(n ast.Node) string {
	line, _ := position(n)
	return fmt.Sprintf("%s:%d", r.name, line)
}

// unwrap removes comments, tags and anchors around a node, and follows
// aliases to the anchors seen before them.
func (r *reader) unwrap(n ast.Node) ast.Node {
	for range 64 { // bounded: an alias cannot lead back to itself forever
		switch x := n.(type) {
		case *ast.TagNode:
			n = x.Value
		case *ast.AnchorNode:
			if r.anchors == nil {
				r.anchors = map[string]ast.Node{}
			}
			r.anchors[strings.TrimSpace(x.Name.String())] = x.Value
			n = x.Value
		case *ast.AliasNode:
			v, ok := r.anchors[strings.TrimSpace(x.Value.String())]
			if !ok {
				r.fail(x, fmt.Sprintf("alias *%s names no anchor defined before it", strings.TrimSpace(x.Value.String())), "define &NAME before using *NAME")
				return nil
			}
			n = v
		case *ast.CommentGroupNode:
			return nil
		default:
			return n
		}
	}
	return n
}

type field struct {
	key   string
	keyN  ast.Node
	value ast.Node
}

// mapping returns the fields of a mapping node, checking their names.
func (r *reader) mapping(n ast.Node, what string, known []string) []field {
	n = r.unwrap(n)
	var values []*ast.MappingValueNode
	switch x := n.(type) {
	case *ast.MappingNode:
		values = x.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{x}
	case nil, *ast.NullNode:
		return nil
	default:
		r.fail(n, what+" must be a mapping of keys to values", "write it as `key: value` lines indented under it")
		return nil
	}
	var out []field
	for _, mv := range values {
		key := strings.TrimSpace(mv.Key.String())
		if !containsStr(known, key) {
			r.fail(mv.Key, fmt.Sprintf("unknown key %q in %s", key, what), suggest(key, known))
			return nil
		}
		out = append(out, field{key, mv.Key, mv.Value})
	}
	return out
}

func suggest(key string, known []string) string {
	best, bestD := "", 4
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	return "known keys: " + strings.Join(sorted, ", ")
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// scalar returns the text of a scalar node.
func (r *reader) scalar(n ast.Node, what string) (string, bool) {
	n = r.unwrap(n)
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		return x.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return n.GetToken().Value, true
	case *ast.NullNode:
		return "", true
	case nil:
		return "", true
	}
	r.fail(n, what+" must be a single value", "remove the nested list or mapping")
	return "", false
}

func (r *reader) str(n ast.Node, what string) string {
	s, _ := r.scalar(n, what)
	return s
}

// rate reads a price in dollars: a number, at least 0.
func (r *reader) rate(n ast.Node, what string) float64 {
	s, ok := r.scalar(n, what)
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		r.fail(r.unwrap(n), fmt.Sprintf("%s must be a price in dollars, not %q", what, s), "write a number such as 0.025")
		return 0
	}
	return v
}

func (r *reader) boolean(n ast.Node, what string) bool {
	s, ok := r.scalar(n, what)
	if !ok {
		return false
	}
	switch s {
	case "true", "yes", "on":
		return true
	case "false", "no", "off":
		return false
	}
	r.fail(r.unwrap(n), fmt.Sprintf("%s must be true or false, not %q", what, s), "write true or false")
	return false
}

// entries returns the nodes of a sequence; a single scalar is a list of
// one.
func (r *reader) entries(n ast.Node) []ast.Node {
	n = r.unwrap(n)
	switch x := n.(type) {
	case *ast.SequenceNode:
		return x.Values
	case nil, *ast.NullNode:
		return nil
	}
	return []ast.Node{n}
}

// list returns a sequence of scalars; a single scalar is a list of one.
func (r *reader) list(n ast.Node, what string) []string {
	if _, ok := r.unwrap(n).(*ast.SequenceNode); ok {
		what += " entries"
	}
	ents := r.entries(n)
	out := make([]string, 0, len(ents))
	for _, v := range ents {
		s, ok := r.scalar(v, what)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (r *reader) seq(n ast.Node, what string) []ast.Node {
	n = r.unwrap(n)
	switch x := n.(type) {
	case *ast.SequenceNode:
		return x.Values
	case nil, *ast.NullNode:
		return nil
	}
	r.fail(n, what+" must be a list", "start each entry with `- `")
	return nil
}

func (r *reader) class(n ast.Node, what string) Class {
	s := r.str(n, what)
	c, ok := ParseClass(s)
	if !ok && r.err == nil {
		r.fail(r.unwrap(n), fmt.Sprintf("%s must be none, git or fork, not %q", what, s), "none: read-only; git: changes workspace files; fork: changes the machine")
	}
	return c
}

func (r *reader) verdict(n ast.Node, what string) Verdict {
	s := r.str(n, what)
	v, ok := ParseVerdict(s)
	if !ok && r.err == nil {
		r.fail(r.unwrap(n), fmt.Sprintf("%s must be run, constrain or deny, not %q", what, s), "")
	}
	return v
}

func (r *reader) rollback(n ast.Node) string {
	s := r.str(n, "rollback")
	if s != RollbackOnFailure && s != RollbackNever && r.err == nil {
		r.fail(r.unwrap(n), fmt.Sprintf("rollback must be on-failure or never, not %q", s), "use never for test runners, whose failures are not bad steps")
	}
	return s
}

func (r *reader) escalate(n ast.Node) string {
	s := r.str(n, "escalate")
	if s != EscalateCommit && s != EscalateRerun && s != EscalateRefuse && r.err == nil {
		r.fail(r.unwrap(n), fmt.Sprintf("escalate must be commit, rerun or refuse, not %q", s),
			"commit keeps what a step wrote beyond its class once it passed; rerun runs it again at the class it needs; refuse stops it")
	}
	return s
}

func ptr[T any](v T) *T { return &v }

var topKeys = []string{"version", "extends", "workspace", "checkpoint", "rollback", "verify",
	"classes", "trusted_dirs", "enforce", "escalate", "self_protect", "egress", "host", "cost", "services", "rules", "paths", "examples"}

// parseFile parses one policy file.
func parseFile(name string, data []byte) (*file, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte order mark
	astFile, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	r := &reader{name: name}
	f := &file{name: name, at: map[string]string{}, classes: map[string]Class{}}
	if len(astFile.Docs) > 1 {
		line, col := 1, 1
		if d := astFile.Docs[1]; d.Start != nil {
			line, col = d.Start.Position.Line, d.Start.Position.Column
		} else if d.Body != nil {
			line, col = position(d.Body)
		}
		return nil, &LoadError{File: name, Line: line, Col: col, Msg: "a policy file holds one YAML document",
			Hint: "remove the `---` separator and what follows"}
	}
	var body ast.Node
	if len(astFile.Docs) == 1 {
		body = astFile.Docs[0].Body
	}
	seenVersion := false
	for _, fl := range r.mapping(body, "the policy", topKeys) {
		f.at[fl.key] = r.at(fl.keyN)
		switch fl.key {
		case "version":
			if v := r.str(fl.value, "version"); v != "1" {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("unsupported policy version %q", v), "this undosh reads version: 1")
			}
			seenVersion = true
		case "extends":
			f.extends = r.str(fl.value, "extends")
			if f.extends != "default" && f.extends != "none" {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("extends must be default or none, not %q", f.extends), "default merges this file onto the embedded policy; none replaces it")
			}
		case "workspace":
			for _, w := range r.mapping(fl.value, "workspace", []string{"roots", "scratch"}) {
				f.at["workspace."+w.key] = r.at(w.keyN)
				switch w.key {
				case "roots":
					f.roots = r.absPaths(w.value, "workspace.roots")
				case "scratch":
					f.scratch = r.absPaths(w.value, "workspace.scratch")
				}
			}
		case "checkpoint":
			for _, c := range r.mapping(fl.value, "checkpoint", []string{"exclude", "max_file_size"}) {
				switch c.key {
				case "exclude":
					f.exclude = r.list(c.value, "checkpoint.exclude")
				case "max_file_size":
					f.maxFileSize = ptr(r.size(c.value))
				}
			}
		case "rollback":
			f.rollback = ptr(r.rollback(fl.value))
		case "verify":
			f.verify = ptr(r.str(fl.value, "verify"))
		case "enforce":
			f.enforce = ptr(r.boolean(fl.value, "enforce"))
		case "escalate":
			f.escalate = ptr(r.escalate(fl.value))
		case "self_protect":
			f.selfProtect = ptr(r.boolean(fl.value, "self_protect"))
		case "classes":
			for _, c := range r.mapping(fl.value, "classes", []string{"unknown_program", "unknown_code", "unresolved_write", "outside_write"}) {
				f.at["classes."+c.key] = r.at(c.keyN)
				f.classes[c.key] = r.class(c.value, "classes."+c.key)
			}
		case "trusted_dirs":
			f.trusted = r.absPaths(fl.value, "trusted_dirs")
		case "egress":
			for _, e := range r.mapping(fl.value, "egress", []string{"protected_branches", "allow_force_push", "push_needs_verify"}) {
				switch e.key {
				case "protected_branches":
					f.protected = r.list(e.value, "egress.protected_branches")
				case "allow_force_push":
					f.allowForce = ptr(r.boolean(e.value, "egress.allow_force_push"))
				case "push_needs_verify":
					f.pushVerify = ptr(r.boolean(e.value, "egress.push_needs_verify"))
				}
			}
		case "host":
			for _, h := range r.mapping(fl.value, "host", []string{"address", "fallback"}) {
				switch h.key {
				case "address":
					f.hostAddr = ptr(r.str(h.value, "host.address"))
				case "fallback":
					fb := r.str(h.value, "host.fallback")
					if fb != "git" && fb != "deny" && fb != "auto" {
						r.fail(r.unwrap(h.value), fmt.Sprintf("host.fallback must be git, deny or auto, not %q", fb), "git: take a file checkpoint instead of a fork; deny: refuse machine-changing steps; auto: deny for root, git for anyone else")
					}
					f.hostFallback = &fb
				}
			}
		case "cost":
			f.cost = map[string]float64{}
			for _, c := range r.mapping(fl.value, "cost", []string{"vcpu_hour", "gib_hour", "snapshot_gb_month"}) {
				f.cost[c.key] = r.rate(c.value, "cost."+c.key)
			}
		case "services":
			for _, n := range r.seq(fl.value, "services") {
				if s, ok := r.service(n); ok {
					f.services = append(f.services, s)
				}
			}
		case "rules":
			for _, n := range r.seq(fl.value, "rules") {
				if rule, ok := r.rule(n); ok {
					f.rules = append(f.rules, rule)
				}
			}
		case "paths":
			for _, n := range r.seq(fl.value, "paths") {
				if pr, ok := r.pathRule(n); ok {
					f.paths = append(f.paths, pr)
				}
			}
		case "examples":
			for _, n := range r.seq(fl.value, "examples") {
				if ex, ok := r.example(n); ok {
					f.examples = append(f.examples, ex)
				}
			}
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := f.checkNames(); err != nil {
		return nil, err
	}
	if !seenVersion {
		return nil, &LoadError{File: name, Line: 1, Col: 1, Msg: "the policy does not say its version",
			Hint: "add `version: 1` at the top"}
	}
	return f, nil
}

// syntaxError turns a YAML syntax error into a located LoadError.
func syntaxError(name string, err error) error {
	var se *yaml.SyntaxError
	if errors.As(err, &se) && se.Token != nil {
		return &LoadError{File: name, Line: se.Token.Position.Line, Col: se.Token.Position.Column,
			Msg: "YAML syntax: " + se.Message, Hint: "indent with spaces, and quote values that contain `: ` or start with `*`, `&` or `!`"}
	}
	return &LoadError{File: name, Line: 1, Col: 1, Msg: "YAML syntax: " + err.Error()}
}

func (r *reader) absPaths(n ast.Node, what string) []string {
	list := r.list(n, what)
	for i, e := range r.entries(n) {
		if i >= len(list) {
			break
		}
		if p := list[i]; !strings.HasPrefix(p, "/") && p != "~" && !strings.HasPrefix(p, "~/") {
			r.fail(r.unwrap(e), fmt.Sprintf("%s entry %q is not an absolute path", what, p), "start it with / or ~/")
			return nil
		}
	}
	return list
}

// size parses 1234, 64KiB, 100MiB, 1GiB (and KB, MB, GB as powers of ten).
func (r *reader) size(n ast.Node) int64 {
	s := strings.TrimSpace(r.str(n, "checkpoint.max_file_size"))
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}, {"", 1}}
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err != nil || v < 0 {
			break
		}
		return v * u.mult
	}
	r.fail(r.unwrap(n), fmt.Sprintf("checkpoint.max_file_size %q is not a size", s), "write a number of bytes or a size such as 100MiB")
	return 0
}

var ruleKeys = []string{"name", "program", "programs", "sub", "if_args", "unless_args", "hosts", "sql",
	"max_args", "root", "scaffold", "own", "emits", "getopt", "live", "class", "egress", "verdict", "constraint", "rollback", "verify", "message"}

func (r *reader) rule(n ast.Node) (Rule, bool) {
	rule := Rule{At: r.at(n), Verdict: Run}
	haveClass := false
	for _, fl := range r.mapping(n, "a rule", ruleKeys) {
		switch fl.key {
		case "program", "programs":
			progs := r.list(fl.value, fl.key)
			for i, e := range r.entries(fl.value) {
				if i < len(progs) && strings.Contains(progs[i], "/") && !strings.HasPrefix(progs[i], "/") {
					r.fail(r.unwrap(e), fmt.Sprintf("rule names the program %q with a relative path", progs[i]), "name a base name (git) or an absolute pattern (/etc/init.d/*)")
				}
			}
			rule.Programs = append(rule.Programs, progs...)
		case "name":
			rule.Name = r.str(fl.value, "name")
			rule.nameLine, rule.nameCol = position(r.unwrap(fl.value))
		case "sub":
			rule.Sub = r.list(fl.value, "sub")
		case "if_args":
			rule.IfArgs = r.list(fl.value, "if_args")
		case "unless_args":
			rule.UnlessArgs = r.list(fl.value, "unless_args")
		case "hosts":
			rule.Hosts = r.str(fl.value, "hosts")
			if rule.Hosts != "loopback" && rule.Hosts != "remote" {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("hosts must be loopback or remote, not %q", rule.Hosts), "")
			}
		case "sql":
			rule.SQL = r.str(fl.value, "sql")
			if rule.SQL != "read-only" && rule.SQL != "write" {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("sql must be read-only or write, not %q", rule.SQL), "")
			}
		case "max_args":
			n, err := strconv.Atoi(r.str(fl.value, "max_args"))
			if err != nil || n < 1 {
				r.fail(r.unwrap(fl.value), "max_args must be a positive number", "")
			}
			rule.MaxArgs = n
		case "root":
			rule.Root = r.boolean(fl.value, "root")
		case "scaffold":
			rule.Scaffold = r.boolean(fl.value, "scaffold")
		case "own":
			rule.Own = r.boolean(fl.value, "own")
		case "getopt":
			rule.Getopt = r.boolean(fl.value, "getopt")
		case "emits":
			rule.Emits = r.list(fl.value, "emits")
			for i, e := range r.entries(fl.value) {
				if i < len(rule.Emits) && !syntax.ValidName(rule.Emits[i]) {
					r.fail(r.unwrap(e), fmt.Sprintf("emits names %q, which is not a shell variable", rule.Emits[i]), "name variables: letters, digits and _, not starting with a digit")
				}
			}
		case "live":
			rule.Live = r.str(fl.value, "live")
			if !validServiceName(rule.Live) {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("live %q is not a name", rule.Live), "name a kind of service ("+strings.Join(ServiceKinds, ", ")+"), database, services, processes, or a service declared under services:")
			}
		case "class":
			rule.Class = r.class(fl.value, "class")
			haveClass = true
		case "egress":
			rule.Egress = r.boolean(fl.value, "egress")
		case "verdict":
			rule.Verdict = r.verdict(fl.value, "verdict")
		case "constraint":
			rule.Constraint = r.str(fl.value, "constraint")
		case "rollback":
			rule.Rollback = r.rollback(fl.value)
		case "verify":
			rule.Verify = r.str(fl.value, "verify")
		case "message":
			rule.Message = r.str(fl.value, "message")
		}
	}
	if r.err != nil {
		return rule, false
	}
	switch {
	case rule.Name == "":
		r.fail(n, "a rule has no name", "add `name: something-short`; reasons quote it")
	case len(rule.Programs) == 0:
		r.fail(n, fmt.Sprintf("rule %q names no program", rule.Name), "add `program: NAME` or `programs: [A, B]`")
	case !haveClass:
		r.fail(n, fmt.Sprintf("rule %q has no class", rule.Name), "add `class: none`, `class: git` or `class: fork`")
	case rule.Verdict == Constrain && rule.Constraint == "":
		r.fail(n, fmt.Sprintf("rule %q constrains without saying how", rule.Name), "add `constraint: push` or a sentence that says when it may run")
	}
	return rule, r.err == nil
}

// validServiceName reports whether s can name a service: letters,
// digits, '.', '_' and '-', starting with a letter.
func validServiceName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ServiceKinds are the kinds of service undosh finds and handles by
// itself (package service); live: and a declared kind: name them.
var ServiceKinds = []string{"postgres", "mysql", "redis", "mongodb"}

func (r *reader) service(n ast.Node) (ServiceDecl, bool) {
	s := ServiceDecl{At: r.at(n)}
	for _, fl := range r.mapping(n, "a service", []string{"name", "kind", "process", "pidfile", "data", "stop", "start", "port"}) {
		switch fl.key {
		case "name":
			s.Name = r.str(fl.value, "name")
			if !validServiceName(s.Name) || slices.Contains([]string{LiveDatabase, LiveServices, LiveProcesses}, s.Name) {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("service name %q is not a name, or is one undosh keeps (database, services, processes)", s.Name), "use letters, digits, '.', '_' and '-', starting with a letter")
			}
		case "kind":
			s.Kind = r.str(fl.value, "kind")
			if !slices.Contains(ServiceKinds, s.Kind) {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("service kind %q is not one undosh knows", s.Kind), "use postgres, mysql, redis or mongodb, or leave kind out for a generic service")
			}
		case "process":
			s.Process = r.str(fl.value, "process")
			if _, err := path.Match(s.Process, "x"); err != nil {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("bad process pattern %q", s.Process), "a glob over the program's base name: myserver, node*")
			}
		case "pidfile":
			s.PIDFile = r.str(fl.value, "pidfile")
			if !strings.HasPrefix(s.PIDFile, "/") {
				r.fail(r.unwrap(fl.value), fmt.Sprintf("pidfile %q is not an absolute path", s.PIDFile), "start it with /")
			}
		case "data":
			s.Data = r.absPaths(fl.value, "data")
		case "stop":
			s.Stop = r.str(fl.value, "stop")
		case "start":
			s.Start = r.str(fl.value, "start")
		case "port":
			p, err := strconv.Atoi(r.str(fl.value, "port"))
			if err != nil || p < 1 || p > 65535 {
				r.fail(r.unwrap(fl.value), "port must be a number from 1 to 65535", "")
			}
			s.Port = p
		}
	}
	if r.err != nil {
		return s, false
	}
	switch {
	case s.Name == "":
		r.fail(n, "a service has no name", "add `name: something-short`; rules name it in live:, and notices quote it")
	case s.Process == "" && s.PIDFile == "":
		r.fail(n, fmt.Sprintf("service %q does not say how to find it", s.Name), "add `process: PROGRAM` (a glob over the program's base name) or `pidfile: /run/NAME.pid`")
	case len(s.Data) == 0:
		r.fail(n, fmt.Sprintf("service %q names no data", s.Name), "add `data: [/var/lib/NAME]`: the directories or files undosh checkpoints before a step that talks to it")
	}
	return s, r.err == nil
}

func (r *reader) pathRule(n ast.Node) (PathRule, bool) {
	pr := PathRule{At: r.at(n), Verdict: Run}
	haveClass := false
	for _, fl := range r.mapping(n, "a path rule", []string{"name", "paths", "stream", "class", "egress", "verdict", "message"}) {
		switch fl.key {
		case "name":
			pr.Name = r.str(fl.value, "name")
		case "paths":
			pr.Paths = r.absPaths(fl.value, "paths")
			for i, e := range r.entries(fl.value) {
				if i < len(pr.Paths) {
					if _, err := path.Match(strings.ReplaceAll(pr.Paths[i], "**", "*"), "/"); err != nil {
						r.fail(r.unwrap(e), fmt.Sprintf("bad path pattern %q", pr.Paths[i]), "patterns use *, ? and **")
					}
				}
			}
		case "class":
			pr.Class = r.class(fl.value, "class")
			haveClass = true
		case "stream":
			pr.Stream = r.boolean(fl.value, "stream")
		case "egress":
			pr.Egress = r.boolean(fl.value, "egress")
		case "verdict":
			pr.Verdict = r.verdict(fl.value, "verdict")
		case "message":
			pr.Message = r.str(fl.value, "message")
		}
	}
	if r.err != nil {
		return pr, false
	}
	switch {
	case pr.Name == "":
		r.fail(n, "a path rule has no name", "add `name: something-short`")
	case len(pr.Paths) == 0:
		r.fail(n, fmt.Sprintf("path rule %q names no paths", pr.Name), "add `paths: [/etc/**]`")
	case !haveClass:
		r.fail(n, fmt.Sprintf("path rule %q has no class", pr.Name), "add `class: fork`")
	}
	return pr, r.err == nil
}

func (r *reader) example(n ast.Node) (Example, bool) {
	ex := Example{At: r.at(n)}
	for _, fl := range r.mapping(n, "an example", []string{"command", "class", "egress", "verdict"}) {
		switch fl.key {
		case "command":
			ex.Command = r.str(fl.value, "command")
		case "class":
			ex.Class = ptr(r.class(fl.value, "class"))
		case "egress":
			ex.Egress = ptr(r.boolean(fl.value, "egress"))
		case "verdict":
			ex.Verdict = ptr(r.verdict(fl.value, "verdict"))
		}
	}
	if r.err != nil {
		return ex, false
	}
	if ex.Command == "" {
		r.fail(n, "an example has no command", "add `command: 'ls -la'`")
	} else if ex.Class == nil && ex.Egress == nil && ex.Verdict == nil {
		r.fail(n, fmt.Sprintf("example %q expects nothing", ex.Command), "add class, egress or verdict")
	}
	return ex, r.err == nil
}

// ExampleFailure is an example whose decision differs from what it expects.
type ExampleFailure struct {
	Example Example
	Got     Decision
}

func (e ExampleFailure) Error() string {
	var want, got []string
	if e.Example.Class != nil && *e.Example.Class != e.Got.Class {
		want = append(want, "class "+e.Example.Class.String())
		got = append(got, "class "+e.Got.Class.String())
	}
	if e.Example.Egress != nil && *e.Example.Egress != e.Got.Egress {
		want = append(want, fmt.Sprintf("egress %v", *e.Example.Egress))
		got = append(got, fmt.Sprintf("egress %v", e.Got.Egress))
	}
	if e.Example.Verdict != nil && *e.Example.Verdict != e.Got.Verdict {
		want = append(want, "verdict "+e.Example.Verdict.String())
		got = append(got, "verdict "+e.Got.Verdict.String())
	}
	return fmt.Sprintf("%s: example %q expects %s, but gets %s", e.Example.At, e.Example.Command,
		strings.Join(want, ", "), strings.Join(got, ", "))
}

// CheckExamples decides every example with decide and returns the ones
// that fail.
func (p *Policy) CheckExamples(decide func(command string) Decision) []ExampleFailure {
	var out []ExampleFailure
	for _, ex := range p.Examples {
		d := decide(ex.Command)
		if ex.Class != nil && *ex.Class != d.Class || ex.Egress != nil && *ex.Egress != d.Egress ||
			ex.Verdict != nil && *ex.Verdict != d.Verdict {
			out = append(out, ExampleFailure{Example: ex, Got: d})
		}
	}
	return out
}
