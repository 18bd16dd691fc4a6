package policy

import (
	"strconv"
	"strings"
	"sync"
)

// positions is where policy.yaml says each part of the compiled default,
// by index: for each rule the line of its first key (its At) and its
// name's line and column; for each path rule, service and example the line
// of its first key; and the line of each key of p.at. gen.go writes it
// into default_pos_gen.go, apart from the rules in default_gen.go, so that
// an edit that moves the lines of policy.yaml rewrites only this table.
type positions struct {
	rules                     [][3]int
	paths, services, examples []int
	keys                      []keyLine
}

type keyLine struct {
	key  string
	line int
}

// placeDefault gives the compiled default p the places in defaultPos.
func placeDefault(p *Policy) {
	placeShared()
	pos := &defaultPos
	at := ats(len(pos.services)+len(pos.examples)+len(pos.keys), pos.services, pos.examples, keyLines(pos.keys))
	for i := range p.Services {
		p.Services[i].At, at = at[0], at[1:]
	}
	for i := range p.Examples {
		p.Examples[i].At, at = at[0], at[1:]
	}
	p.at = make(map[string]string, len(pos.keys))
	for _, k := range pos.keys {
		p.at[k.key], at = at[0], at[1:]
	}
}

// placeShared places the rules and path rules, which are package-level
// and shared by every compiled default: once.
var placeShared = sync.OnceFunc(func() {
	pos := &defaultPos
	lines := make([]int, len(pos.rules))
	for i, r := range pos.rules {
		lines[i] = r[0]
	}
	at := ats(len(lines)+len(pos.paths), lines, pos.paths)
	for i, r := range pos.rules {
		defaultRules[i].At, defaultRules[i].nameLine, defaultRules[i].nameCol = at[i], r[1], r[2]
	}
	for i := range defaultPaths {
		defaultPaths[i].At = at[len(lines)+i]
	}
})

func keyLines(keys []keyLine) []int {
	lines := make([]int, len(keys))
	for i, k := range keys {
		lines[i] = k.line
	}
	return lines
}

// ats returns DefaultName:line for each of the n lines, in order, the
// strings sharing one allocation.
func ats(n int, lines ...[]int) []string {
	var b strings.Builder
	b.Grow(n * (len(DefaultName) + 5))
	ends := make([]int, 0, n)
	var num [20]byte
	for _, l := range lines {
		for _, line := range l {
			b.WriteString(DefaultName)
			b.WriteByte(':')
			b.Write(strconv.AppendInt(num[:0], int64(line), 10))
			ends = append(ends, b.Len())
		}
	}
	s := b.String()
	out := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		out[i], start = s[start:end], end
	}
	return out
}
