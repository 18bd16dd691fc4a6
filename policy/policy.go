package policy

import (
	"encoding/json"
	"fmt"
)

// Class is the protection a step needs. Classes are ordered: a step's class
// is the highest class of any of its parts.
type Class int

const (
	None Class = iota // read-only: runs straight through
	Git               // changes files in the workspace or scratch paths: git checkpoint first
	Fork              // changes the machine: runs in a copy
)

var classNames = [...]string{"none", "git", "fork"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("class(%d)", int(c))
	}
	return classNames[c]
}

// ParseClass parses "none", "git" or "fork".
func ParseClass(s string) (Class, bool) {
	for i, n := range classNames {
		if n == s {
			return Class(i), true
		}
	}
	return 0, false
}

func (c Class) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

func (c *Class) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, ok := ParseClass(s)
	if !ok {
		return fmt.Errorf("unknown class %q", s)
	}
	*c = v
	return nil
}

// Verdict says whether a step may run.
type Verdict int

const (
	Run       Verdict = iota // run it
	Constrain                // run it only when a condition holds
	Deny                     // refuse it
)

var verdictNames = [...]string{"run", "constrain", "deny"}

func (v Verdict) String() string {
	if v < 0 || int(v) >= len(verdictNames) {
		return fmt.Sprintf("verdict(%d)", int(v))
	}
	return verdictNames[v]
}

// ParseVerdict parses "run", "constrain" or "deny".
func ParseVerdict(s string) (Verdict, bool) {
	for i, n := range verdictNames {
		if n == s {
			return Verdict(i), true
		}
	}
	return 0, false
}

func (v Verdict) MarshalJSON() ([]byte, error) { return json.Marshal(v.String()) }

func (v *Verdict) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	x, ok := ParseVerdict(s)
	if !ok {
		return fmt.Errorf("unknown verdict %q", s)
	}
	*v = x
	return nil
}

// Rollback modes.
const (
	RollbackOnFailure = "on-failure"
	RollbackNever     = "never"
)

// What undosh does with what a step wrote beyond its class (escalate in
// the policy; docs/enforce.md).
const (
	// EscalateCommit keeps it, as a step of the class it needed would
	// have been kept, once the step and verify passed.
	EscalateCommit = "commit"
	// EscalateRerun puts everything back and runs the step once more at
	// the class it needed.
	EscalateRerun = "rerun"
	// EscalateRefuse puts everything back and refuses the step.
	EscalateRefuse = "refuse"
)

// Policy is a loaded, validated policy: the embedded default, a user's file
// merged onto it, or a user's file that replaces it.
type Policy struct {
	// Files are the files the policy was read from, default first.
	Files []string

	Roots       []string // extra workspace roots
	Scratch     []string // paths outside the workspace that steps may write as git class
	Exclude     []string // checkpoint excludes
	MaxFileSize int64    // checkpoint size limit in bytes
	Rollback    string
	Verify      string
	TrustedDirs []string // directories whose programs keep their base name's trust
	Enforce     bool
	// Escalate is what undosh does with what a step wrote beyond its
	// class: EscalateCommit, EscalateRerun or EscalateRefuse.
	Escalate string
	// SelfProtect refuses steps that change undosh itself (self.go).
	SelfProtect bool

	UnknownProgram  Class
	UnknownCode     Class
	UnresolvedWrite Class
	OutsideWrite    Class

	Egress Egress
	Host   Host
	Cost   Cost

	Rules    []Rule
	Paths    []PathRule
	Examples []Example
	// Services declares services of the sandbox that undosh does not
	// find by itself (services: in the policy).
	Services []ServiceDecl

	// at records where each setting came from, for reasons.
	at map[string]string
	// index is built once the rules are final.
	index *ruleIndex
}

// Egress holds the conditions on steps that reach outside.
type Egress struct {
	ProtectedBranches []string
	AllowForcePush    bool
	PushNeedsVerify   bool
}

// Cost holds the rates undoctl cost estimates the spend of machine steps
// with, in dollars.
type Cost struct {
	VCPUHour        float64 // per vCPU-hour a fork runs
	GiBHour         float64 // per GiB-hour of memory a fork holds
	SnapshotGBMonth float64 // per GB-month of snapshot storage
}

// Host says where to ask for forks, and what to do when nobody answers.
type Host struct {
	Address  string
	Fallback string // "git", "deny" or "auto"
}

// FallbackFor is the fallback for a step run as uid: auto is deny for
// root and git for anyone else, who cannot change the system, so that a
// workspace checkpoint covers most of what it can break
// (docs/policy.md).
func (h Host) FallbackFor(uid int) string {
	if h.Fallback != "auto" {
		return h.Fallback
	}
	if uid == 0 {
		return "deny"
	}
	return "git"
}

// Rule maps commands to a class.
type Rule struct {
	Name string
	At   string // file:line

	Programs []string
	// Sub matches the subcommand and the operands after it; each entry is
	// one or more space-separated glob patterns ("stash list").
	Sub []string
	// IfArgs: the rule applies only when some argument matches one of these
	// patterns (a pattern with a space matches consecutive arguments).
	IfArgs []string
	// UnlessArgs: the rule does not apply when any argument matches.
	UnlessArgs []string
	// Hosts is "loopback" or "remote": the rule applies only when every
	// URL or host argument is (or some is not) a loopback address.
	Hosts string
	// SQL is "read-only" or "write": the rule applies only when the SQL
	// the command runs reads (or may write).
	SQL string
	// MaxArgs, when positive, limits the number of arguments.
	MaxArgs int
	// Root is set for rules that apply only under sudo and friends.
	Root bool
	// Scaffold marks harness scaffolding (a shell snapshot a harness
	// sources before every command): trusted as it stands even when its
	// text cannot be read.
	Scaffold bool
	// Own marks undosh's own tools (undoctl): they protect what they do
	// themselves (a restore checkpoints first, run --fork uses the fork
	// engine), so a step made of them alone runs as it is, outside any
	// limit ([Decision].Own).
	Own bool
	// Getopt makes the option patterns of IfArgs and UnlessArgs (-s,
	// --set) match every spelling GNU getopt_long accepts for them: a
	// value glued on (-s'…', --set=…), the letter inside a cluster of
	// short options (-us), an abbreviation (--se). The spellings that
	// getopt may read otherwise (a letter after the first of a cluster,
	// which may be the value of the one before it; an abbreviation,
	// which may be ambiguous or another option's) only might match, so
	// the rule adds its class and matching goes on.
	Getopt bool
	// Emits, when set, says that the program prints shell code that
	// only sets these variables (dircolors -b sets LS_COLORS): `eval
	// "$(program …)"` is then those assignments, of values known only
	// at run time, rather than code the parser cannot see.
	Emits []string
	// Live names what the command acts on that lives on this machine and
	// not in a copy of it: a kind of service (postgres, mysql, redis,
	// mongodb), database (any of those), services (every service, the
	// declared ones too), a declared service's name, or processes (the
	// sandbox's own, which kill signals). See [Decision.Live].
	Live string

	Class      Class
	Egress     bool
	Verdict    Verdict
	Constraint string // for Constrain: "push" or free text
	Rollback   string
	Verify     string
	Message    string

	// Where the rule's name is, for errors.
	nameLine, nameCol int

	// Filled when the policy is indexed: the exact program names, the
	// program patterns, and the argument patterns split into words.
	names                             []string
	patterns                          []string
	subFields, ifFields, unlessFields [][]string
}

// Live values that are not a kind of service or a declared name.
const (
	LiveDatabase  = "database"  // every database server detected
	LiveServices  = "services"  // every service, declared ones too
	LiveProcesses = "processes" // the sandbox's processes (kill)
)

// ServiceDecl is a service the policy declares: how to find it, where
// its data is, and how to stop and start it (docs/services.md).
type ServiceDecl struct {
	Name string
	At   string
	// Kind lends a known kind's handling (postgres, mysql, redis,
	// mongodb); "" is a generic service.
	Kind string
	// Process is a glob over the base name of the program; PIDFile a
	// file that holds the main process's pid. One of them is set.
	Process string
	PIDFile string
	// Data are absolute paths: directories or files.
	Data []string
	// Stop and Start are shell commands; "" is the default (SIGTERM,
	// and the main process's command line again).
	Stop, Start string
	Port        int
}

// PathRule maps written paths to a class.
type PathRule struct {
	Name  string
	At    string
	Paths []string // globs over absolute paths; ** matches any depth
	// Stream limits the rule to writes into the file's content (a
	// redirection, tee, dd of=): a device such as /dev/null takes the
	// bytes and stays as it is. Writes that replace, remove, move or
	// change the file itself (mv, rm, ln -f, chmod) pass on to the next
	// rules.
	Stream  bool
	Class   Class
	Egress  bool
	Verdict Verdict
	Message string
}

// Example is a command with the decision it must get.
type Example struct {
	At      string
	Command string
	Class   *Class
	Egress  *bool
	Verdict *Verdict
}

// Location returns where a setting (a top-level key such as escalate, or
// classes.NAME) was set: FILE:LINE, or the last policy file.
func (p *Policy) Location(key string) string { return p.location(key) }

// location returns where a setting was defined.
func (p *Policy) location(key string) string {
	if at, ok := p.at[key]; ok {
		return at
	}
	if len(p.Files) > 0 {
		return p.Files[len(p.Files)-1]
	}
	return ""
}

// LoadError is a policy that does not load: it says where and why, and
// what to do about it.
type LoadError struct {
	File      string
	Line, Col int
	Msg       string
	Hint      string
	Err       error // the underlying error, if any
}

// Usage reports true: a policy that does not load is a usage error, and
// nothing ran (undosh and undoctl exit 2).
func (e *LoadError) Usage() bool { return true }

func (e *LoadError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

func (e *LoadError) Unwrap() error { return e.Err }
