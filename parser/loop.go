package parser

import (
	"reflect"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A `for NAME in WORDS` loop whose words the walker can expand is walked
// once per item with NAME bound to it, so that `for f in a b; do rm "$f";
// done` writes a and b rather than a path known only at run time.
const (
	// maxLoopItems bounds the items of one loop, and the product of the
	// items of the loops nested in it, that are walked one by one.
	maxLoopItems = 64
	// maxLoopWork bounds the statements that walking loops item by item
	// may walk over a whole Parse.
	maxLoopWork = 8192
)

// unroll is what for loops walked item by item share across a Parse.
type unroll struct {
	mul    int            // product of the items of the loops being walked
	work   int            // statements those walks were expected to walk
	walked int            // statements walked so far, scratch walks too
	sets   map[string]int // assignments seen per name ("" for a name not known)
	// namerefs is set once `declare -n` is seen: assigning one name may
	// then assign any other.
	namerefs bool
	// clock counts the assignments (and loop items) of the whole Parse;
	// last is the clock at the latest one per name, so that a trap can
	// tell which names may change after it is set. chdirs counts the
	// changes of directory the same way.
	clock  int
	last   map[string]int
	chdirs int
}

// noteAssign counts an assignment to name, so that a loop can tell whether
// its body assigns its variable, and a trap whether it may see another
// value.
func (w *walker) noteAssign(name string) {
	w.shared.unroll.sets[name]++
	w.tick(name)
}

// tick moves the clock of name without counting an assignment of the
// loop body.
func (w *walker) tick(name string) {
	u := w.shared.unroll
	u.clock++
	u.last[name] = u.clock
}

// unmodelledAssign handles an assignment the walker does not model:
// ((i++)), let i+=1, ${i:=x}. The name ("" when it is not known) no longer
// holds the item a loop gave it.
func (w *walker) unmodelledAssign(name string) {
	w.noteAssign(name)
	var private []string
	w.st.vars.each(func(v string, b binding) bool {
		if b.private && (v == name || name == "") {
			private = append(private, v)
		}
		return true
	})
	for _, v := range private {
		w.setVar(v, "", false)
	}
}

// quotedArith handles an arithmetic expression that comes as one quoted
// word (let "i += 1"), which mvdan.cc/sh does not parse: it parses the
// word's value to find the names it assigns.
func (w *walker) quotedArith(x syntax.ArithmExpr) {
	word, ok := x.(*syntax.Word)
	if !ok || word.Lit() != "" {
		return
	}
	args := w.word(word)
	if len(args) != 1 || args[0].Dynamic {
		w.unmodelledAssign("")
		return
	}
	expr, err := syntax.NewParser().Arithmetic(strings.NewReader(args[0].Value))
	if err != nil {
		w.unmodelledAssign("")
		return
	}
	syntax.Walk(expr, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.BinaryArithm:
			if assignOp(x.Op) {
				w.unmodelledAssign(arithName(x.X))
			}
		case *syntax.UnaryArithm:
			if x.Op == syntax.Inc || x.Op == syntax.Dec {
				w.unmodelledAssign(arithName(x.X))
			}
		}
		return true
	})
}

// forClause walks a for or select loop.
func (w *walker) forClause(s *syntax.Stmt, c *syntax.ForClause) {
	body := func() { w.stmts(c.Do) }
	l, ok := c.Loop.(*syntax.WordIter)
	if !ok {
		if cl, ok := c.Loop.(*syntax.CStyleLoop); ok {
			for _, x := range []syntax.ArithmExpr{cl.Init, cl.Cond, cl.Post} {
				w.subs(x)
				w.quotedArith(x)
			}
		}
		w.branch(true, body)
		w.compoundRedirs(s)
		return
	}
	for _, item := range l.Items {
		w.subs(item)
	}
	if l.Name == nil {
		w.branch(true, body)
		w.compoundRedirs(s)
		return
	}
	name := l.Name.Value
	// select binds whatever the user picks (or "" for a bad pick), and
	// `for NAME; do` iterates over the positional parameters.
	var items []string
	if !c.Select && l.InPos.IsValid() {
		items = w.loopItems(l.Items)
	}
	w.setVar(name, "", false)
	u := w.shared.unroll
	if len(items) == 0 || u.mul*len(items) > maxLoopItems || u.namerefs || w.loops >= maxProbes {
		w.branch(true, body)
		w.compoundRedirs(s)
		return
	}
	w.loops++ // probed and unrolled: as deep as a branch (walker.loops)
	defer func() { w.loops-- }()
	// Walk the body once with the variable unknown, as for any loop, to
	// learn what it changes and whether it assigns the variable.
	sets, anySets, walked := u.sets[name], u.sets[""], u.walked
	w.probe(body)
	work := len(items) * max(u.walked-walked, 1)
	whole := u.sets[name] != sets || u.sets[""] != anySets || u.namerefs || u.work+work > maxLoopWork
	last, known := "", false
	if !whole {
		u.work += work
		start := w.st
		cmds, finds, counted := len(w.facts.Commands), len(w.facts.Unknown), w.shared.commands
		last, known = w.eachItem(name, items, body)
		if w.shared.overflow {
			if w.shared.unrolling > 0 {
				return // an enclosing loop walks itself again
			}
			// Walking item by item spent the budget: forget it all and
			// walk the loop as a whole.
			w.facts.Commands, w.facts.Unknown = w.facts.Commands[:cmds], w.facts.Unknown[:finds]
			w.shared.commands, w.shared.full, w.shared.overflow = counted, false, false
			w.st = start
			whole, known = true, false
		}
	}
	if whole {
		before := w.st.clone()
		body()
		forgetChanges(w.st, before, w.st)
	}
	// bash opens the loop's own redirections (done > $f) before the first
	// item: NAME does not hold the last item there.
	w.compoundRedirs(s)
	if known {
		w.bindItem(name, last)
	}
}

// bindItem gives a loop's variable one of its items.
func (w *walker) bindItem(name, item string) {
	w.tick(name)
	b, _ := w.st.vars.get(name)
	b.value, b.how, b.private = item, knownVal, true
	w.st.vars.set(name, b)
}

// loopItems expands the words of `for NAME in WORDS`, or returns nil when
// one of them is known only at run time (a command substitution, an
// unknown variable, a glob that depends on the file system) or there are
// more than maxLoopItems of them.
func (w *walker) loopItems(words []*syntax.Word) []string {
	var items []string
	for _, word := range words {
		for _, a := range w.word(word) {
			if a.Dynamic || a.Glob || hasPattern(a.Value) {
				return nil
			}
			items = append(items, a.Value)
			if len(items) > maxLoopItems {
				return nil
			}
		}
	}
	return items
}

// hasPattern reports text that bash would expand as a pattern were it the
// unquoted value of a variable.
func hasPattern(s string) bool {
	if strings.ContainsAny(s, "*?[") {
		return true
	}
	for _, p := range []string{"+(", "@(", "!("} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// eachItem walks body once per item, each time from the state a loop body
// starts in (see [walker.branch]) with name bound to the item, and leaves
// the state a loop leaves. Commands and findings that an item repeats from
// an earlier one are dropped. It returns the value name keeps after the
// loop, when that is known. When the items spend the command budget, it
// sets overflow and leaves the caller to walk the loop as a whole.
func (w *walker) eachItem(name string, items []string, body func()) (string, bool) {
	u := w.shared.unroll
	u.mul *= len(items)
	w.shared.unrolling++
	defer func() {
		u.mul /= len(items)
		w.shared.unrolling--
	}()
	start := w.st
	seen := repeats{cmds: map[cmdKey][]int{}, finds: map[Finding]bool{}}
	// The budget counts a loop's commands once, as for any loop (the
	// later items are bounded by maxLoopWork): each later item is counted
	// from where the first started, and then forgotten.
	base, first := w.shared.commands, 0
	known := true
	var ends []*state
	for k, v := range items {
		w.st = start.clone()
		w.bindItem(name, v)
		cmds, finds := len(w.facts.Commands), len(w.facts.Unknown)
		if k > 0 {
			w.shared.commands = base
		}
		sets := u.sets[name]
		body()
		ends = append(ends, w.st)
		for _, c := range w.facts.Commands[cmds:] {
			if leavesLoop(c) {
				known = false
			}
		}
		if got := w.varBinding(name); got.how != knownVal || got.value != v || u.sets[name] != sets {
			known = false
		}
		w.dropRepeats(&seen, k == 0, cmds, finds)
		if w.shared.full {
			break // overflow: the caller walks the loop again
		}
		if k == 0 {
			first = w.shared.commands
		}
		w.shared.commands = first
	}
	if len(ends) == 0 {
		w.st = start
		return "", false
	}
	// After the loop the state is what no item changed, as after any
	// loop, plus the symlinks and the traps that some item made.
	w.st = ends[len(ends)-1]
	for i := len(ends) - 1; i >= 0; i-- {
		forgetChanges(w.st, start, ends[i])
		for _, t := range ends[i].traps {
			if !slices.Contains(w.st.traps, t) {
				w.st.traps = append(w.st.traps, t)
			}
		}
		for link, target := range ends[i].links {
			if _, ok := w.st.links[link]; !ok {
				if w.st.links == nil {
					w.st.links = map[string]string{}
				}
				w.st.links[link] = target
			}
		}
	}
	return items[len(ends)-1], known && !w.shared.full
}

// leavesLoop reports a command after which the loop variable may not hold
// the last item: break, return, or continue to an outer loop. A plain
// continue, or exit, does not matter.
func leavesLoop(c Command) bool {
	if len(c.Argv) == 0 {
		return false
	}
	if c.Argv[0].Dynamic {
		return true
	}
	switch c.Argv[0].Value {
	case "break", "return":
		return true
	case "continue":
		return len(c.Argv) > 1 && (c.Argv[1].Dynamic || c.Argv[1].Value != "1")
	}
	return false
}

// repeats indexes the commands and findings of the items walked so far.
type repeats struct {
	cmds  map[cmdKey][]int // indexes into Facts.Commands
	finds map[Finding]bool
}

type cmdKey struct {
	pos       Pos
	text, via string
}

// dropRepeats drops the commands and findings recorded since cmds and
// finds that equal ones recorded for an earlier item, then indexes the
// rest. For the first item it only indexes.
func (w *walker) dropRepeats(seen *repeats, first bool, cmds, finds int) {
	f := w.facts
	if !first {
		kept := f.Commands[:cmds]
		for _, c := range f.Commands[cmds:] {
			if !seen.has(f.Commands, c) {
				kept = append(kept, c)
			}
		}
		f.Commands = kept
		keptF := f.Unknown[:finds]
		for _, u := range f.Unknown[finds:] {
			if !seen.finds[u] {
				keptF = append(keptF, u)
			}
		}
		f.Unknown = keptF
	}
	for i := cmds; i < len(f.Commands); i++ {
		k := cmdKey{f.Commands[i].Pos, f.Commands[i].Text, f.Commands[i].Via}
		seen.cmds[k] = append(seen.cmds[k], i)
	}
	for _, u := range f.Unknown[finds:] {
		seen.finds[u] = true
	}
}

func (r *repeats) has(all []Command, c Command) bool {
	for _, i := range r.cmds[cmdKey{c.Pos, c.Text, c.Via}] {
		// The fields an item changes most often first: DeepEqual is slow.
		o := &all[i]
		if o.Cwd == c.Cwd && slices.Equal(o.Argv, c.Argv) && slices.Equal(o.Writes, c.Writes) &&
			reflect.DeepEqual(*o, c) {
			return true
		}
	}
	return false
}

// assignOp reports the arithmetic operators that assign their left side.
func assignOp(op syntax.BinAritOperator) bool {
	switch op {
	case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn,
		syntax.RemAssgn, syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn,
		syntax.ShrAssgn:
		return true
	}
	return false
}

// arithName returns the variable an arithmetic assignment targets, or ""
// when it is not a plain name.
func arithName(x syntax.ArithmExpr) string {
	word, ok := x.(*syntax.Word)
	if !ok || len(word.Parts) != 1 {
		return ""
	}
	switch p := word.Parts[0].(type) {
	case *syntax.Lit:
		name, _, _ := strings.Cut(p.Value, "[")
		return name
	case *syntax.ParamExp:
		// a[i]++ comes as a ParamExp without a dollar; in $n=1 the name
		// is the value of n.
		if p.Param != nil && !p.Dollar.IsValid() {
			return p.Param.Value
		}
	}
	return ""
}
