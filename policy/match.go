package policy

import (
	"path"
	"slices"
	"strings"

	"github.com/undosh/undosh/internal/pathglob"
)

// match reports whether r may apply to c, and whether it surely does
// (no dynamic argument was involved).
func (r *Rule) match(c *Command) (matches, sure bool) {
	if !r.matchProgram(c.Argv[0].Value) {
		return false, false
	}
	if r.Root && !c.Root || r.MaxArgs > 0 && len(c.Argv)-1 > r.MaxArgs {
		return false, false
	}
	sure = true
	args := c.Argv[1:]
	if len(r.Sub) > 0 {
		m, s := r.matchSub(c)
		if !m {
			return false, false
		}
		sure = sure && s
	}
	if len(r.IfArgs) > 0 {
		m, s := argsMatch(r.ifFields, r.IfArgs, args, r.Getopt)
		if !m {
			return false, false
		}
		sure = sure && s
	}
	if len(r.UnlessArgs) > 0 {
		m, s := argsMatch(r.unlessFields, r.UnlessArgs, args, r.Getopt)
		if m && s {
			return false, false
		}
		if m {
			sure = false
		}
	}
	if r.Hosts != "" {
		remote, maybe := c.remote()
		switch {
		case r.Hosts == "remote" && !remote && !maybe:
			return false, false
		case r.Hosts == "loopback" && remote:
			return false, false
		case r.Hosts == "remote" && maybe && !remote:
			sure = false
		case r.Hosts == "loopback" && maybe:
			sure = false
		}
	}
	if r.SQL != "" && r.SQL != c.SQL {
		return false, false
	}
	return true, sure
}

// matchSub matches the subcommand and the operands after it.
func (r *Rule) matchSub(c *Command) (bool, bool) {
	subs := r.subFields
	if subs == nil {
		subs = splitAll(r.Sub)
	}
	if c.Sub <= 0 || c.Sub >= len(c.Argv) {
		// No operand at all: only `$` matches.
		for _, fields := range subs {
			if len(fields) == 1 && fields[0] == "$" {
				return true, true
			}
		}
		return false, false
	}
	var ops []Arg
	for i, a := range c.Argv[c.Sub:] {
		if i > 0 && !a.Dynamic && strings.HasPrefix(a.Value, "-") {
			continue
		}
		ops = append(ops, a)
	}
	for _, fields := range subs {
		// A last field of $ says that no operand follows: `run $` is
		// npm run alone, not npm run build.
		if n := len(fields); n > 1 && fields[n-1] == "$" {
			if len(ops) != n-1 {
				continue
			}
			fields = fields[:n-1]
		}
		if len(fields) > len(ops) {
			continue
		}
		ok, sure := true, true
		for k, f := range fields {
			if ops[k].Dynamic {
				sure = false
				continue
			}
			if !glob(f, ops[k].Value, true) {
				ok = false
				break
			}
		}
		if ok {
			return true, sure
		}
	}
	// A dynamic subcommand may be any of them.
	return ops[0].Dynamic, false
}

func splitAll(patterns []string) [][]string {
	out := make([][]string, len(patterns))
	for i, p := range patterns {
		out[i] = strings.Fields(p)
	}
	return out
}

// argsMatch reports whether any argument (or run of consecutive arguments,
// for a pattern with spaces) matches any pattern; sure is false when only a
// dynamic argument could match. With getopt, an option pattern matches
// the option however getopt_long lets it be spelt ([Rule].Getopt).
func argsMatch(split [][]string, patterns []string, args []Arg, getopt bool) (matched, sure bool) {
	if split == nil {
		split = splitAll(patterns)
	}
	possible := false
	for _, fields := range split {
		if len(fields) == 0 {
			continue
		}
		if getopt && len(fields) == 1 && optionPattern(fields[0]) {
			for _, a := range args {
				if a.Dynamic {
					possible = true
					continue
				}
				m, s := optionMatch(fields[0], a.Value)
				if m && s {
					return true, true
				}
				possible = possible || m
			}
			continue
		}
		for i := 0; i+len(fields) <= len(args); i++ {
			ok, dyn := true, false
			for k, f := range fields {
				a := args[i+k]
				if a.Dynamic {
					dyn = true
					continue
				}
				if !glob(f, a.Value, false) {
					ok = false
					break
				}
			}
			if ok && !dyn {
				return true, true
			}
			if ok {
				possible = true
			}
		}
	}
	return possible, false
}

// optionPattern reports whether a pattern names one option: -x, or
// --name with no value and no wildcard.
func optionPattern(p string) bool {
	if hasMeta(p) || strings.Contains(p, "=") {
		return false
	}
	if len(p) == 2 && p[0] == '-' && p[1] != '-' {
		return true
	}
	return len(p) > 3 && strings.HasPrefix(p, "--")
}

// optionMatch matches one argument against an option pattern as
// getopt_long reads it: sure for the option itself, with its value glued
// on or as the first of a cluster of short options; only possibly for a
// letter later in a cluster (an earlier letter may take it as its value)
// and for an abbreviation of the long name.
func optionMatch(pat, arg string) (matches, sure bool) {
	if arg == pat {
		return true, true
	}
	if !strings.HasPrefix(pat, "--") {
		switch {
		case len(arg) < 2 || arg[0] != '-' || arg[1] == '-':
			return false, false
		case arg[1] == pat[1]:
			return true, true
		}
		return strings.IndexByte(arg[2:], pat[1]) >= 0, false
	}
	if strings.HasPrefix(arg, pat+"=") {
		return true, true
	}
	name, _, _ := strings.Cut(arg, "=")
	return len(name) >= 3 && strings.HasPrefix(name, "--") && strings.HasPrefix(pat, name), false
}

// glob matches s against a pattern where * matches any run of characters
// and ? any one character.
func glob(pat, s string, fold bool) bool {
	if fold {
		pat, s = strings.ToLower(pat), strings.ToLower(s)
	}
	if !hasMeta(pat) {
		return pat == s
	}
	px, sx := 0, 0
	nextPx, nextSx := -1, -1
	for px < len(pat) || sx < len(s) {
		if px < len(pat) {
			switch pat[px] {
			case '*':
				nextPx, nextSx = px, sx+1
				px++
				continue
			case '?':
				if sx < len(s) {
					px++
					sx++
					continue
				}
			default:
				if sx < len(s) && s[sx] == pat[px] {
					px++
					sx++
					continue
				}
			}
		}
		if nextPx >= 0 && nextSx <= len(s) {
			px, sx = nextPx, nextSx
			continue
		}
		return false
	}
	return true
}

func hasMeta(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '*' || s[i] == '?' {
			return true
		}
	}
	return false
}

// matches reports whether a path rule applies to an absolute path.
// matches reports whether p matches a pattern of r, with ~ in a pattern
// standing for home (a pattern under ~ matches nothing without a home).
func (r *PathRule) matches(p, home string) bool {
	for _, pat := range r.Paths {
		if pat = expandHome(pat, home); pat != "" && pathglob.Match(pat, p) {
			return true
		}
	}
	return false
}

// remote reports whether a server the command names is another
// machine, or, when none surely is, whether one known only at run time
// may be.
func (c *Command) remote() (remote, maybe bool) {
	for _, h := range c.Hosts {
		switch {
		case h.Dynamic:
			maybe = true
		case !h.Loopback:
			return true, false
		}
	}
	return false, maybe
}

// matchProgram matches the program name: base names, or full paths for
// patterns with a slash (/etc/init.d/*).
func (r *Rule) matchProgram(name string) bool {
	base := path.Base(name)
	progs := r.Programs
	if r.names != nil {
		if slices.Contains(r.names, base) {
			return true
		}
		progs = r.patterns
	}
	for _, p := range progs {
		if strings.Contains(p, "/") {
			if strings.HasPrefix(name, "/") && pathglob.Match(p, path.Clean(name)) {
				return true
			}
			continue
		}
		if glob(p, base, false) {
			return true
		}
	}
	return false
}
