package harness

import (
	"fmt"
	"strings"
)

// Cell is what undosh did with one step under one harness.
type Cell struct {
	// Class is undosh's class for the step: none when it left no journal
	// record (read-only steps are exec'd straight through).
	Class   string `json:"class"`
	Outcome string `json:"outcome,omitempty"`
	// Rejected is set when the harness itself refused to run the command.
	Rejected bool `json:"rejected,omitempty"`
	// Missing is set when the step got no tool result.
	Missing bool `json:"missing,omitempty"`
	Record  int  `json:"record,omitempty"`
	// ByTime is set when the record was told by its time alone: its
	// command was clipped before the step's own.
	ByTime bool `json:"by_time,omitempty"`
	// Command is the command undosh recorded: the step's, inside the
	// harness's scaffolding, or alone when undosh recognised the
	// scaffolding (then Harness names it, and Scaffold is its id).
	Command  string `json:"-"`
	Harness  string `json:"harness,omitempty"`
	Scaffold string `json:"scaffold,omitempty"`
}

// Label is the cell as the class tables show it.
func (c Cell) Label() string {
	switch {
	case c.Missing:
		return "no result"
	case c.Rejected:
		return "(harness refused)"
	case c.Outcome == "" || c.Outcome == "kept":
		return c.Class
	case c.Outcome == "rolled back":
		return c.Class + "/rb"
	}
	return c.Class + "/" + c.Outcome
}

// Extra is a journal record that is no step of the story: the harness's
// own use of the shell (a shell snapshot), or a nested step.
type Extra struct {
	Record  Record `json:"record"`
	During  int    `json:"during"` // the step it ran during, from 0; -1 for none
	Nested  bool   `json:"nested,omitempty"`
	Summary string `json:"summary"`
}

// Classify reads a run's journal against its results: for every step,
// the record of the step's command among those made while the step ran
// (between the model's call and the harness's result), and the records
// that are not the story's.
func Classify(steps []Step, results []Result, journal []Record) (cells []Cell, extras []Extra) {
	rs := byStep(results)
	cells = make([]Cell, len(steps))
	for i := range steps {
		r, ok := rs[i]
		switch {
		case !ok:
			cells[i] = Cell{Missing: true}
		case harnessRejected.MatchString(r.Text) && !HasNotice(r.Text):
			cells[i] = Cell{Rejected: true}
		default:
			cells[i] = Cell{Class: "none"}
		}
	}
	var unmatched []Extra
	for _, rec := range journal {
		during := -1
		for i := range steps {
			r, ok := rs[i]
			if ok && !r.Sent.IsZero() && !rec.Time.Before(r.Sent) && !rec.Time.After(r.Got) {
				during = i
				break
			}
		}
		if rec.Parent == 0 && during >= 0 && Matches(rec.Command, steps[during].Command) && !cells[during].Missing {
			if c := cells[during]; c.Record != 0 {
				// Two records for one step: the earlier is the harness's.
				extras = append(extras, Extra{Record: journalRecord(journal, c.Record), During: during, Summary: Summarize(c.Command, "")})
			}
			cells[during] = cellOf(rec)
			continue
		}
		cmd := ""
		if during >= 0 {
			cmd = steps[during].Command
		}
		unmatched = append(unmatched, Extra{Record: rec, During: during, Nested: rec.Parent != 0, Summary: Summarize(rec.Command, cmd)})
	}
	// A command clipped before the step's own shows: when the clipped
	// text recurs (a harness's wrapper does, its start-up commands do
	// not), the last such record of a step that has none is the step's.
	clipped := map[string]int{}
	for _, e := range unmatched {
		if !e.Nested && strings.HasSuffix(e.Record.Command, "…") {
			clipped[e.Record.Command]++
		}
	}
	for i := len(unmatched) - 1; i >= 0; i-- {
		e := unmatched[i]
		if e.Nested || e.During < 0 || clipped[e.Record.Command] < 2 {
			continue
		}
		if c := cells[e.During]; c.Record != 0 || c.Missing || c.Rejected {
			continue
		}
		cells[e.During] = cellOf(e.Record)
		cells[e.During].ByTime = true
		unmatched = append(unmatched[:i], unmatched[i+1:]...)
	}
	return cells, append(extras, unmatched...)
}

func cellOf(rec Record) Cell {
	c := Cell{Class: rec.Class, Outcome: rec.Outcome, Record: rec.ID, Command: rec.Command}
	if rec.Wrapper != nil {
		c.Harness, c.Scaffold = rec.Wrapper.Harness, rec.Wrapper.Scaffold
	}
	return c
}

func journalRecord(journal []Record, id int) Record {
	for _, r := range journal {
		if r.ID == id {
			return r
		}
	}
	return Record{ID: id}
}

// Matches reports whether a command undosh was given runs the step
// command cmd: it is cmd, or holds cmd single-quoted (as Claude Code's
// eval 'CMD' and Codex's exec bash -c 'CMD' do), or holds it on lines of
// its own (as Gemini CLI's ( … CMD … ) does).
func Matches(given, cmd string) bool {
	if given == cmd {
		return true
	}
	for _, q := range []string{`'"'"'`, `'\''`} {
		if strings.Contains(given, "'"+strings.ReplaceAll(cmd, "'", q)+"'") {
			return true
		}
	}
	return strings.Contains("\n"+given+"\n", "\n"+cmd+"\n")
}

// Summarize shortens a command undosh was given for the report: the
// step's own command (when cmd is set) reads CMD, and a long one keeps
// its first and last lines.
func Summarize(given, cmd string) string {
	s := given
	if cmd != "" {
		for _, q := range []string{`'"'"'`, `'\''`} {
			s = strings.ReplaceAll(s, "'"+strings.ReplaceAll(cmd, "'", q)+"'", "'CMD'")
		}
		s = strings.ReplaceAll("\n"+s+"\n", "\n"+cmd+"\n", "\nCMD\n")
		s = strings.Trim(s, "\n")
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 4 {
		s = fmt.Sprintf("%s ⏎ … %d lines … ⏎ %s", clip(lines[0], 80), len(lines)-2, clip(lines[len(lines)-1], 80))
	} else {
		s = clip(strings.Join(lines, " ⏎ "), 240)
	}
	return s
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// rank orders the classes by how much protection they cost.
func rank(class string) int {
	switch class {
	case "none":
		return 0
	case "git":
		return 1
	case "fork":
		return 2
	}
	return -1
}
