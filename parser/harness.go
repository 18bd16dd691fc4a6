package parser

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Wrapped is a command an agent harness wrapped in its scaffolding, as
// [Unwrap] found it.
type Wrapped struct {
	// Harness names the form: "claude-code" (source SNAPSHOT && eval
	// 'CMD' && pwd -P >| FILE), "codex" (save the environment, . SNAPSHOT,
	// restore it, exec bash -c 'CMD') or "gemini-cli" (shopt …; ( trap
	// '…' EXIT; CMD ); exit $status).
	Harness string
	// Command is the command as the model wrote it.
	Command string
	// Scaffold is the source with the command's place marked
	// [CommandMark]: the same for every command of a session.
	Scaffold string
}

// CommandMark stands for the command in [Wrapped.Scaffold].
const CommandMark = "{{command}}"

// Unwrap recognises the scaffolding agent harnesses put around the
// model's command, by its structure rather than its text: every
// statement but one is bookkeeping (assignments, export and unset,
// sourcing a file, shopt and set, a trap, tests of variables, writing
// pwd or the status to a file), none of it with a command substitution,
// and the one left runs a literal command: eval 'CMD', exec bash -c
// 'CMD' as the last statement, or a subshell whose first statement is a
// trap. It is for people (the journal shows the command, not 345 lines
// around it); classification always reads the whole source.
func Unwrap(src string) (Wrapped, bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil || len(f.Stmts) == 0 {
		return Wrapped{}, false
	}
	var leaves []*syntax.Stmt
	for _, s := range f.Stmts {
		leaves = flattenAnd(s, leaves)
	}
	var found Wrapped
	var span [2]uint
	n := 0
	for i, s := range leaves {
		if w, at, ok := wrappedIn(src, s, i == len(leaves)-1); ok {
			found, span, n = w, at, n+1
			continue
		}
		if !bookkeeping(s) {
			return Wrapped{}, false
		}
	}
	if n != 1 || strings.TrimSpace(found.Command) == "" {
		return Wrapped{}, false
	}
	found.Scaffold = src[:span[0]] + CommandMark + src[span[1]:]
	return found, true
}

// flattenAnd appends the statements of an && or || list to out: the
// operands, each run or not by the status of the one before.
func flattenAnd(s *syntax.Stmt, out []*syntax.Stmt) []*syntax.Stmt {
	if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && !s.Negated && !s.Background && len(s.Redirs) == 0 &&
		(b.Op == syntax.AndStmt || b.Op == syntax.OrStmt) {
		return flattenAnd(b.Y, flattenAnd(b.X, out))
	}
	return append(out, s)
}

// wrappedIn reports whether s is the statement that runs the model's
// command, and returns it and where it is in src.
func wrappedIn(src string, s *syntax.Stmt, last bool) (Wrapped, [2]uint, bool) {
	w, at, ok := wrappedStmt(src, s, last)
	if !ok || at[1] > uint(len(src)) || at[0] >= at[1] {
		return Wrapped{}, at, false
	}
	return w, at, true
}

func wrappedStmt(src string, s *syntax.Stmt, last bool) (Wrapped, [2]uint, bool) {
	var none [2]uint
	if s.Negated || s.Background || s.Coprocess {
		return Wrapped{}, none, false
	}
	span := func(w *syntax.Word) [2]uint { return [2]uint{w.Pos().Offset(), w.End().Offset()} }
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(c.Assigns) > 0 || !quietRedirs(s.Redirs, false) {
			return Wrapped{}, none, false
		}
		name, ok := literal(c.Args, 0)
		switch {
		case !ok:
		case name == "eval" && len(c.Args) == 2:
			if cmd, ok := literal(c.Args, 1); ok {
				return Wrapped{Harness: "claude-code", Command: cmd}, span(c.Args[1]), true
			}
		case name == "exec" && last && len(c.Args) >= 4:
			// exec SHELL [-OPTION…] -c 'CMD'
			var words []string
			for i := 1; i < len(c.Args); i++ {
				w, ok := literal(c.Args, i)
				if !ok {
					return Wrapped{}, none, false
				}
				words = append(words, w)
			}
			sh, opts, cmd := words[0], words[1:len(words)-1], words[len(words)-1]
			if base := path.Base(sh); base != "bash" && base != "sh" {
				return Wrapped{}, none, false
			}
			for i, o := range opts {
				if !strings.HasPrefix(o, "-") || o == "-" || (i == len(opts)-1) != strings.HasSuffix(o, "c") {
					return Wrapped{}, none, false
				}
			}
			return Wrapped{Harness: "codex", Command: cmd}, span(c.Args[len(c.Args)-1]), true
		}
	case *syntax.Subshell:
		if len(c.Stmts) < 2 || len(s.Redirs) > 0 || !isTrap(c.Stmts[0]) {
			return Wrapped{}, none, false
		}
		first, end := c.Stmts[1], c.Stmts[len(c.Stmts)-1].End().Offset()
		from := first.Pos().Offset()
		if len(first.Comments) > 0 {
			from = first.Comments[0].Pos().Offset()
		}
		if end > uint(len(src)) || from >= end {
			return Wrapped{}, none, false
		}
		return Wrapped{Harness: "gemini-cli", Command: src[from:end]}, [2]uint{from, end}, true
	}
	return Wrapped{}, none, false
}

// isTrap reports whether s sets a trap with a literal action.
func isTrap(s *syntax.Stmt) bool {
	c, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(c.Assigns) > 0 || len(c.Args) < 3 {
		return false
	}
	for i := range c.Args {
		if _, ok := literal(c.Args, i); !ok {
			return false
		}
	}
	name, _ := literal(c.Args, 0)
	return name == "trap"
}

// scaffolding are the commands bookkeeping may run: they set up the
// shell, save and restore variables, and test them.
var scaffolding = map[string]bool{
	"source": true, ".": true, "shopt": true, "set": true, "export": true, "unset": true,
	"unalias": true, "declare": true, "typeset": true, "readonly": true, ":": true, "true": true,
	"[": true, "test": true, "exit": true, "trap": true, "cd": true,
}

// bookkeeping reports whether s only sets up the shell or records its
// state: a statement of scaffolding commands, assignments and
// conditionals of those, with no command or process substitution, and
// pwd written to a file.
func bookkeeping(s *syntax.Stmt) bool {
	if s.Negated || s.Background || s.Coprocess || substitutes(s) {
		return false
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(c.Args) == 0 {
			return len(c.Assigns) > 0 && quietRedirs(s.Redirs, false)
		}
		name, ok := literal(c.Args, 0)
		if !ok {
			return false
		}
		if name == "builtin" || name == "command" {
			// builtin unset X || command unset X
			if name, ok = literal(c.Args, 1); !ok {
				return false
			}
		}
		if name == "pwd" {
			// The harness's cwd file.
			return len(s.Redirs) > 0 && quietRedirs(s.Redirs, true)
		}
		return scaffolding[name] && quietRedirs(s.Redirs, false)
	case *syntax.TestClause, *syntax.DeclClause:
		return quietRedirs(s.Redirs, false)
	case *syntax.BinaryCmd:
		if len(s.Redirs) > 0 || (c.Op != syntax.AndStmt && c.Op != syntax.OrStmt) {
			return false
		}
		return bookkeeping(c.X) && bookkeeping(c.Y)
	case *syntax.IfClause:
		if len(s.Redirs) > 0 {
			return false
		}
		for ; c != nil; c = c.Else {
			for _, l := range [][]*syntax.Stmt{c.Cond, c.Then} {
				for _, s := range l {
					if !bookkeeping(s) {
						return false
					}
				}
			}
		}
		return true
	}
	return false
}

// substitutes reports whether s holds a command or process substitution
// anywhere: code the journal's reader would not see.
func substitutes(s *syntax.Stmt) bool {
	found := false
	syntax.Walk(s, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			found = true
		}
		return !found
	})
	return found
}

// quietRedirs reports whether redirs only move streams to /dev/null or to
// each other (stdin may come from /dev/null), or, with file, write a
// literal file (pwd -P >| FILE).
func quietRedirs(redirs []*syntax.Redirect, file bool) bool {
	for _, r := range redirs {
		word := ""
		if r.Word != nil {
			w, ok := wordLiteral(r.Word)
			if !ok {
				return false
			}
			word = w
		}
		switch r.Op {
		case syntax.DplOut, syntax.DplIn:
		case syntax.RdrIn, syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
			if word != "/dev/null" && (!file || r.Op == syntax.RdrIn) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// literal returns the value of args[i] when it is a literal word.
func literal(args []*syntax.Word, i int) (string, bool) {
	if i >= len(args) {
		return "", false
	}
	return wordLiteral(args[i])
}

// wordLiteral returns the value of a word made only of literal text and
// quotes around literal text ('a'"b"c).
func wordLiteral(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			// No escapes, globs or tilde to expand (a lone "[" is not a
			// glob).
			v := p.Value
			if strings.ContainsAny(v, "\\*?") || strings.HasPrefix(v, "~") ||
				(strings.Contains(v, "[") && strings.Contains(v[strings.Index(v, "["):], "]")) {
				return "", false
			}
			b.WriteString(v)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok || strings.ContainsAny(l.Value, "\\$`") {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}
