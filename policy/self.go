package policy

import (
	"slices"

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
// does not: undoctl uninstall ([uninstallRule]), or a dpkg-divert that
// changes the diversion of one of the shells undoctl install diverts
// (the parser's Diverts).
func selfCommand(c *Command) string {
	if len(c.Argv) == 0 || c.Argv[0].Dynamic {
		return ""
	}
	if m, sure := uninstallRule.match(c); m && sure {
		return "undoctl uninstall removes undosh as the shell"
	}
	for _, p := range c.Diverts {
		if slices.Contains(divertedShells, p) {
			return "dpkg-divert changes the diversion that makes undosh the shell"
		}
	}
	return ""
}

// uninstallRule matches undoctl uninstall, in the rules' own terms: the
// word uninstall anywhere among undoctl's arguments.
var uninstallRule = Rule{Name: SelfRule, Programs: []string{"undoctl"}, IfArgs: []string{"uninstall"},
	names: []string{"undoctl"}, ifFields: [][]string{{"uninstall"}}}

// divertedShells are the shells undoctl install diverts.
var divertedShells = []string{"/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/sh"}

// selfReason is the refusal of a step that changes undosh itself.
func (p *Policy) selfReason(c *Command, what string) Reason {
	return Reason{Rule: SelfRule, At: p.location(SelfRule), Pos: c.Pos, Text: SelfText,
		Class: None, Verdict: Deny, Message: what}
}
