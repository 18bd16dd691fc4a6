package policy

import (
	"path"
	"slices"
	"strings"

	"github.com/undosh/undosh/internal/pathglob"
)

// Self-protection: a step may not switch undosh off, by accident or
// otherwise, from inside the shell undosh protects. Unless the policy
// says `self_protect: false`, a step is refused when it writes undosh's
// files (its configuration, its installed binaries and the shells it
// stands for, its state directory, the policy in force) or runs the
// commands that undo its installation. Those are changed by an operator,
// from outside the agent's shell.

// SelfText is what a refusal of such a step says first.
const SelfText = "this changes undosh itself"

// SelfRule names the reasons self-protection gives.
const SelfRule = "self_protect"

// SelfDirs are undosh's installed configuration and binaries.
var SelfDirs = []string{"/etc/undosh", "/usr/lib/undosh"}

// selfPath reports whether abs is one of undosh's own files: under
// selfDirs or one of ctx.Self.
func selfPath(abs string, ctx Context) bool {
	for _, d := range SelfDirs {
		if pathglob.Within(abs, d) {
			return true
		}
	}
	more, _ := ctx.resolved()
	for _, l := range [][]string{ctx.Self, more} {
		for _, s := range l {
			if pathglob.Within(abs, s) {
				return true
			}
		}
	}
	return false
}

// selfCommand says how c undoes undosh's installation, or "" when it
// does not: undoctl uninstall, or dpkg-divert naming one of the shells
// undoctl install diverts (bash and sh in /bin and /usr/bin).
func selfCommand(c *Command) string {
	if len(c.Argv) == 0 || c.Argv[0].Dynamic {
		return ""
	}
	args := c.Argv[1:]
	switch path.Base(c.Argv[0].Value) {
	case "undoctl":
		if slices.ContainsFunc(args, func(a Arg) bool { return a.Value == "uninstall" }) {
			return "undoctl uninstall removes undosh as the shell"
		}
	case "dpkg-divert":
		shell := false
		for _, a := range args {
			w := a.Value
			switch w {
			case "--list", "--listpackage", "--truename", "--help", "-?", "--version":
				return ""
			}
			for _, d := range []string{"/bin/", "/usr/bin/"} {
				if rest, ok := strings.CutPrefix(path.Clean(w), d); ok && (rest == "bash" || rest == "sh") {
					shell = true
				}
			}
		}
		if shell {
			return "dpkg-divert changes the diversion that makes undosh the shell"
		}
	}
	return ""
}

// selfReason is the refusal of a step that changes undosh itself.
func (p *Policy) selfReason(c *Command, what string) Reason {
	return Reason{Rule: SelfRule, At: p.location(SelfRule), Pos: c.Pos, Text: SelfText,
		Class: None, Verdict: Deny, Message: what}
}
