package parser

import (
	"path"
	"strings"
)

// pushWords sets [Command.Push] for a git command that may push: the
// refspecs and options its words name, beside the refspecs its
// configuration adds (set by [walker.gitPushRefs] as the command was
// walked). It reads the command as it is recorded, after aliases,
// wrappers and the dashed form (git-push) were resolved.
func pushWords(c *Command) {
	start, ok := pushStart(c)
	if !ok {
		c.Push = nil // a copy of a push's command that runs something else
		return
	}
	p := &Push{}
	if c.Push != nil {
		p.Config = c.Push.Config
	}
	w := readPushArgs(c.Argv[start:])
	for _, v := range w.options {
		// A cluster of short options with -f or -d in it (-fu) forces too.
		if pushForces(v) || !strings.HasPrefix(v, "--") && strings.ContainsAny(v[1:], "fd") {
			p.Force = true
		}
	}
	ops := w.operands
	if !w.repoOption && len(ops) > 0 {
		ops = ops[1:] // the repository
	}
	for _, a := range ops {
		p.Refs = append(p.Refs, refspec(a))
	}
	p.Current = len(p.Refs) == 0
	for _, l := range [][]Refspec{p.Refs, p.Config} {
		for _, r := range l {
			p.Current = p.Current || r.Current
		}
	}
	c.Push = p
}

// pushArgs are the words of a push, sorted.
type pushArgs struct {
	// operands are its words that are not options: the repository
	// (unless --repo names it), then the refspecs.
	operands []Arg
	// repo is the value of --repo, and repoOption is set when --repo is
	// given at all: every operand is then a refspec.
	repo       *Arg
	repoOption bool
	// options are its other options, as written, without the values of
	// those that take one.
	options []string
}

// readPushArgs sorts the words of a push (after its subcommand) into
// operands and options. Both readings of a push use it: its
// configuration's refspecs ([walker.gitPushRefs]) and its own
// ([pushWords]).
func readPushArgs(args []Arg) pushArgs {
	var w pushArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		v := a.Value
		switch {
		case a.Dynamic:
			w.operands = append(w.operands, a)
		case v == "--":
			w.operands = append(w.operands, args[i+1:]...)
			i = len(args)
		case v == "--repo":
			w.repoOption = true
			if i+1 < len(args) {
				i++
				w.repo = &args[i]
			}
		case strings.HasPrefix(v, "--repo="):
			w.repoOption = true
			w.repo = &Arg{Value: strings.TrimPrefix(v, "--repo=")}
		case pushTakesValue(v):
			i++
		case strings.HasPrefix(v, "-"):
			w.options = append(w.options, v)
		default:
			w.operands = append(w.operands, a)
		}
	}
	return w
}

// pushStart returns the index in c's argv where the words of a push
// begin, after its subcommand (push, send-pack, http-push; subtree push
// and lfs push), and whether c may be a push at all. A subcommand known
// only at run time may be any, a push too: its words begin after it.
// Subcommands are compared as the policy's rules compare them, without
// regard to case.
func pushStart(c *Command) (int, bool) {
	if len(c.Argv) == 0 || c.Argv[0].Dynamic || path.Base(c.Argv[0].Value) != "git" ||
		c.Sub <= 0 || c.Sub >= len(c.Argv) {
		return 0, false
	}
	sub := c.Argv[c.Sub]
	if sub.Dynamic {
		return c.Sub + 1, true
	}
	switch strings.ToLower(sub.Value) {
	case "push", "send-pack", "http-push":
		return c.Sub + 1, true
	case "subtree", "lfs":
		// Their own push, after any options.
		for j := c.Sub + 1; j < len(c.Argv); j++ {
			a := c.Argv[j]
			if !a.Dynamic && strings.HasPrefix(a.Value, "-") {
				continue
			}
			if a.Dynamic || strings.ToLower(a.Value) == "push" {
				return j + 1, true
			}
			break
		}
	}
	return 0, false
}

// pushForces reports the options of git push that force, delete, prune,
// mirror or push every branch.
func pushForces(v string) bool {
	switch v {
	case "--force", "-f", "--mirror", "--delete", "-d", "--prune", "--all", "--branches", "--force-if-includes":
		return true
	}
	return strings.HasPrefix(v, "--force-with-lease")
}

// pushTakesValue reports the options of git push, send-pack and subtree
// push that take the next word as their value.
func pushTakesValue(v string) bool {
	switch v {
	case "-o", "--push-option", "--receive-pack", "--exec", "-P", "--prefix", "-m", "--message", "--onto", "-b", "--branch":
		return true
	}
	return false
}

// refspec reads one refspec as git push reads it: [+]src:dst, where an
// empty src deletes dst, ":" alone is every matching branch, and a
// destination is completed to the branch it names.
func refspec(a Arg) Refspec {
	v := a.Value
	if a.Dynamic || v == "" {
		return Refspec{Text: v, Dynamic: true}
	}
	r := Refspec{Text: v, Forced: strings.HasPrefix(v, "+"), Matching: strings.TrimPrefix(v, "+") == ":"}
	dst := strings.TrimPrefix(v, "+")
	if i := strings.LastIndexByte(dst, ':'); i >= 0 {
		r.Delete = i == 0 && len(dst) > 1
		dst = dst[i+1:]
	}
	if dst == "HEAD" || dst == "@" {
		r.Current = true
		r.Dst = dst
		return r
	}
	// git completes heads/main and refs/heads/main to the branch main.
	r.Dst = strings.TrimPrefix(strings.TrimPrefix(dst, "refs/"), "heads/")
	return r
}
