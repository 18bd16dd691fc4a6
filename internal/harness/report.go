package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Pair is one round of one harness as one user: the plain-bash control
// and the undosh run, and what the suite made of them.
type Pair struct {
	Client string       `json:"client"`
	User   User         `json:"user"`
	Round  int          `json:"round"`
	Plain  Outcome      `json:"plain"`
	Undosh Outcome      `json:"undosh"`
	Cells  []Cell       `json:"cells"`
	Extras []Extra      `json:"extras"`
	Diffs  []Difference `json:"diffs"`
	// Failed lists what must hold of the runs and did not.
	Failed []string `json:"failed,omitempty"`
}

// Report is the whole suite's run, as docs/harnesses.md shows it.
type Report struct {
	Steps []Step
	// Bare is each step's class when typed bare (undoctl explain).
	Bare    []string
	Pairs   []Pair
	Skipped []string
	// Date and Machine say where the figures come from.
	Date    time.Time
	Machine string
	// Base is the suite's directory, shown as <base>.
	Base string
}

// show is a step's command for the tables, without the suite's paths.
func (r *Report) show(s Step) string {
	c := s.Short()
	if r.Base != "" {
		c = strings.ReplaceAll(c, r.Base, "<base>")
	}
	return cell(c)
}

// Summary is one harness as one user against issue 14's targets.
type Summary struct {
	Client, User string
	// ReadOnlyNone and ReadOnly count the read-only steps (the story's
	// [Step.Want] none) the harness ran, and those undosh classed none;
	// ReadOnlyMissed lists the others.
	ReadOnlyNone, ReadOnly int
	ReadOnlyMissed         []int
	// EditsGit and Edits count the same for the edits (Want git).
	EditsGit, Edits int
	// Above lists the steps (from 1) undosh classed above their bare
	// class; Refused those it refused where bash runs them.
	Above, Refused []int
	// Unintended lists the steps whose result differed in a way the
	// story does not intend, or lacked what it must hold.
	Unintended []int
	// ReadOnlyDelta is the median, over the read-only steps and the
	// rounds, of undosh's time per call less plain bash's; OtherDelta the
	// same for the other steps. Calls counts the pairs of calls.
	ReadOnlyDelta, OtherDelta time.Duration
	Calls                     int
	// PlainWall and UndoshWall are the median session times.
	PlainWall, UndoshWall time.Duration
	Rounds                int
	// Bench is the first round's [Bench], if any.
	Bench *Bench
}

// Ratio is the session's time under undosh over plain bash's.
func (s Summary) Ratio() float64 {
	if s.PlainWall == 0 {
		return 0
	}
	return float64(s.UndoshWall) / float64(s.PlainWall)
}

// Summarize sums up the pairs of one harness and one user.
func (r *Report) Summarize(client string, user User) (Summary, bool) {
	var pairs []Pair
	for _, p := range r.Pairs {
		if p.Client == client && p.User.Root() == user.Root() {
			pairs = append(pairs, p)
		}
	}
	if len(pairs) == 0 {
		return Summary{}, false
	}
	s := Summary{Client: client, User: user.Label(), Rounds: len(pairs)}
	first := pairs[0]
	s.Bench = first.Undosh.Bench
	for i, st := range r.Steps {
		c := first.Cells[i]
		if c.Rejected || c.Missing {
			continue
		}
		switch st.Want {
		case "none":
			s.ReadOnly++
			if c.Class == "none" {
				s.ReadOnlyNone++
			} else {
				s.ReadOnlyMissed = append(s.ReadOnlyMissed, i+1)
			}
		case "git":
			s.Edits++
			if c.Class == "git" {
				s.EditsGit++
			}
		}
		if bare := r.bare(i); rank(c.Class) > rank(bare) && rank(bare) >= 0 {
			s.Above = append(s.Above, i+1)
		}
	}
	for _, p := range pairs {
		for _, d := range p.Diffs {
			if d.Kind == Unexpected && !slices.Contains(s.Refused, d.Step+1) {
				s.Refused = append(s.Refused, d.Step+1)
			}
			if (d.Kind == Unintended || d.Problem != "") && !slices.Contains(s.Unintended, d.Step+1) {
				s.Unintended = append(s.Unintended, d.Step+1)
			}
		}
	}
	slices.Sort(s.Refused)
	slices.Sort(s.Unintended)
	var ro, other []time.Duration
	var pw, uw []time.Duration
	for _, p := range pairs {
		pw, uw = append(pw, p.Plain.Wall), append(uw, p.Undosh.Wall)
		pr, ur := byStep(p.Plain.Results), byStep(p.Undosh.Results)
		for i := range r.Steps {
			a, oka := pr[i]
			b, okb := ur[i]
			if !oka || !okb || a.Latency == 0 || b.Latency == 0 || p.Cells[i].Rejected {
				continue
			}
			if r.Steps[i].Want == "none" {
				ro = append(ro, b.Latency-a.Latency)
			} else {
				other = append(other, b.Latency-a.Latency)
			}
		}
	}
	s.ReadOnlyDelta, s.OtherDelta, s.Calls = median(ro), median(other), len(ro)
	s.PlainWall, s.UndoshWall = median(pw), median(uw)
	return s, true
}

// bare is step i's class typed bare: refused when the policy denies it.
func (r *Report) bare(i int) string {
	if i < len(r.Bare) {
		return r.Bare[i]
	}
	return "?"
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchCell shows a [Bench] in the targets table.
func benchCell(b *Bench) string {
	switch {
	case b == nil:
		return "–"
	case b.Err != "":
		return "error: " + cell(b.Err)
	}
	d := b.Undosh - b.Plain
	return fmt.Sprintf("%.1f → %.1f ms (%s, %s; %s)", float64(b.Plain)/1e6, float64(b.Undosh)/1e6,
		fmt.Sprintf("%+.1f ms", float64(d)/1e6), mark(d <= 5*time.Millisecond), b.Class)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%+.0f ms", float64(d)/float64(time.Millisecond))
}

func steps(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprint(n))
	}
	return strings.Join(s, ", ")
}

func mark(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// Markdown is docs/harnesses.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# undosh under real agent harnesses\n\n")
	w("Generated by the harness suite (`internal/harness`): `go test ./internal/harness -run TestHarnesses -update` rewrites this file;\n")
	w("without `-update` the suite only reports. It runs the real CLIs from npm (the versions below, installed by `.ci/run` into\n")
	w("`%s`, or `$%s`), each driven by a scripted model of ours on 127.0.0.1 inside a network namespace that has only `lo`,\n", defaultPrefix, prefixEnv)
	w("once with the real bash as `/bin/bash` (the control) and once with undosh-fast there (an overlay on `/usr/bin` in a private\n")
	w("mount namespace: the layout `undoctl install` makes), as root and as a non-root user (a fresh home mounted at `/root`\n")
	w("or `/home/NAME`, holding the distribution's `/etc/skel`), in a fresh git project with a bare remote. undosh-fast's resident\n")
	w("server (and the holder of its read-only namespace) outlive each session by design; the suite ends them, and\n")
	w("anything else left in the namespace. Run on %s, %s; %d round(s) per harness and user.\n\n", r.Date.Format("2006-01-02"), r.Machine, r.rounds())
	if len(r.Skipped) > 0 {
		w("Not run this time:\n\n")
		for _, s := range r.Skipped {
			w("- %s\n", s)
		}
		w("\n")
	}

	w("## The story\n\n")
	w("One shell tool call per step; the bare class is `undoctl explain`'s for the command typed bare.\n\n")
	w("| # | command | what | bare class |\n|---|---|---|---|\n")
	for i, s := range r.Steps {
		w("| %d | `%s` | %s | %s |\n", i+1, r.show(s), s.What, r.bare(i))
	}
	w("\n")

	w("## Targets (issue 14)\n\n")
	w("Read-only steps and edits are the story's (the class each should have); the bare class can differ (`undoctl log`).\n")
	w("*Wrapper alone*: the harness's own wrapper around `%s` (as undosh's journal recorded it, with the harness's shell\n", BenchCommand)
	w("snapshot put back), run as `bash -c WRAPPER` by the harness's user with its environment after the session: the median of\n")
	w("the runs with the real bash → with undosh, and undosh's class for it. *In the session*: the median, over the read-only\n")
	w("steps and the rounds, of the time from the model's call to the harness's result under undosh less the same under plain\n")
	w("bash; it carries the harness's own jitter, and the machine's load.\n\n")
	w("| harness | user | read-only steps classed none | edits classed git | refused where bash runs it | above their bare class | read-only call, wrapper alone (≤ +5 ms) | Δ per read-only call in the session | Δ per other call | session plain → undosh (≤ ×1.10) | unintended differences |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.clients() {
		for _, u := range r.users() {
			s, ok := r.Summarize(c.Name, u)
			if !ok {
				continue
			}
			missed := "yes"
			if len(s.ReadOnlyMissed) > 0 {
				missed = "**no**: " + steps(s.ReadOnlyMissed)
			}
			w("| %s | %s | %d of %d (%s) | %d of %d (%s) | %s | %s | %s | %s (%d calls) | %s | %.2f → %.2f s (×%.2f, %s) | %s |\n",
				c.Title, s.User, s.ReadOnlyNone, s.ReadOnly, missed, s.EditsGit, s.Edits, mark(s.EditsGit == s.Edits),
				steps(s.Refused), steps(s.Above), benchCell(s.Bench), ms(s.ReadOnlyDelta), s.Calls, ms(s.OtherDelta),
				s.PlainWall.Seconds(), s.UndoshWall.Seconds(), s.Ratio(), mark(s.Ratio() <= 1.10), steps(s.Unintended))
		}
	}
	w("\nWhat the suite asserts, in every run (a failure fails the test): each harness ran every step and got a tool result\n")
	w("for each, within its time limit; `/etc` is unchanged after an undosh run (but for the committed machine step's file,\n")
	w("as root); under undosh the bad edit was rolled back and the push refused; the control really ran the story (the bad\n")
	w("edit kept, the push on the remote); no process is left in the run's namespace; the class targets above (read-only\n")
	w("steps none, edits git, nothing above its bare class, nothing refused that bash runs); no difference from plain bash,\n")
	w("undosh's notice lines left out, that the story does not intend; and, as root, the machine step that passed committed\n")
	w("(`UNDOSH_HARNESS_LENIENT=1` only reports these last two, to see a whole run of a new harness version). The time\n")
	w("targets carry the machine's noise: they are measured and reported, not asserted.\n\n")
	w("%s", platformNotes)

	for _, c := range r.clients() {
		r.section(&b, c)
	}
	return b.String()
}

// platformNotes is what a platform team needs to know for every harness.
const platformNotes = `## For platform teams

- **Scaffolding is transparent.** undosh classes the command inside each harness's wrapper as if it had been typed
  bare: the snapshot a harness sources is read for what it defines (functions that run the program they are named
  after, PATH set to the value it has, Claude's grep and find that run its embedded ugrep and bfs), and the wrapper's
  bookkeeping (Claude's cwd file, Gemini's bgpids file, the snapshots themselves) counts as read-only. The journal's
  ` + "`command`" + ` is the command alone; ` + "`wrapper`" + ` names the form and a file in the state directory
  (` + "`wrappers/HASH.sh`" + `, written once) holding the rest, which ` + "`undoctl show N`" + ` prints.
- **A command left running.** A harness that moves a long command to the background (Claude's ` + "`run_in_background`" + `
  or timeout, a Codex ` + "`exec_command`" + ` still running after its yield time) leaves that step open. A step that
  fails while another one that may write the same workspace runs is not rolled back: undosh cannot tell whose writes
  are whose, so it keeps them, and its notice says so and names ` + "`undoctl back N`" + ` (the journal's outcome is
  ` + "`kept: overlapped`" + `). Read-only commands take no step and so never overlap: a dev server or a watcher started
  as a read-only command does not turn rollback off, one undosh classes as a workspace step does, until it ends.
- **The harness's own sandbox.** Inside a sandbox that keeps undosh's state directory read-only while the workspace is
  writable (Codex's ` + "`-s workspace-write`" + `), undosh cannot take a checkpoint: it refuses the step, saying so and
  what to change (Codex: ` + "`-c 'sandbox_workspace_write.writable_roots=[\"STATE\"]'`" + `, which lets the agent write its
  own checkpoints), and runs a step as bash would when the sandbox keeps the workspace read-only too. Machine steps
  cannot run inside such a sandbox. Running undosh around the harness's sandbox rather than inside it avoids both.
- **Caches.** For the read-only limit to let a cache be written, undosh makes ` + "`~/.cache`" + ` (and the caches of tools
  that are installed, such as ` + "`~/.npm`" + `) when they are missing; plain bash leaves them to the tool.
- **Installing by bind mount.** An image may bind-mount undosh-fast over ` + "`/usr/bin/bash`" + ` instead of running
  ` + "`undoctl install`" + `, keeping the real bash elsewhere; ` + "`/etc/undosh/shells`" + ` then names both
  (` + "`bash=PATH`, `undosh=PATH`" + `).

`

func (r *Report) section(b *strings.Builder, c Client) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	w("## %s (`%s@%s`)\n\n", c.Title, c.Package, c.Version)
	w("Settings the suite uses:\n\n")
	for _, s := range c.Settings {
		w("- %s\n", s)
	}
	users := r.users()
	var firsts []Pair
	for _, u := range users {
		for _, p := range r.Pairs {
			if p.Client == c.Name && p.User.Root() == u.Root() {
				firsts = append(firsts, p)
				break
			}
		}
	}
	if len(firsts) == 0 {
		w("\nNot run.\n\n")
		return
	}
	w("\nHow it calls the shell, as undosh's journal saw it (the step's own command reads CMD):\n\n")
	for _, p := range firsts {
		tool := ""
		if len(p.Undosh.Results) > 0 {
			tool = p.Undosh.Results[0].Tool
		}
		w("- %s: shell tool `%s`", p.User.Label(), tool)
		for i, cl := range p.Cells {
			if cl.Record == 0 {
				continue
			}
			switch sc, ok := p.Undosh.Scaffolds[cl.Scaffold]; {
			case cl.Harness != "" && ok:
				w("; undosh recognised the scaffolding as %s and journals the command alone: `%s`", cl.Harness,
					cell(Summarize(strings.ReplaceAll(sc, ScaffoldMark, "CMD"), "")))
			case cl.ByTime:
				w("; each command as `%s` (clipped in the journal)", cell(Summarize(cl.Command, "")))
			default:
				w("; each command as `%s`", cell(Summarize(cl.Command, r.Steps[i].Command)))
			}
			break
		}
		w(".\n")
		for _, e := range p.Extras {
			when := "outside the steps"
			if e.During >= 0 {
				when = fmt.Sprintf("during step %d", e.During+1)
			}
			kind := "its own"
			if e.Nested {
				kind = "nested"
			}
			w("  - %s, %s: `%s` → %s\n", kind, when, cell(e.Summary), Cell{Class: e.Record.Class, Outcome: e.Record.Outcome}.Label())
		}
	}
	w("\nClass per step (`rb` rolled back; `discarded`/`committed` a machine step's copy; none = no journal record, exec'd straight through):\n\n")
	w("| # | command | bare |")
	for _, p := range firsts {
		w(" %s | Δ %s |", p.User.Label(), p.User.Label())
	}
	w("\n|---|---|---|")
	for range firsts {
		w("---|---|")
	}
	w("\n")
	for i, s := range r.Steps {
		w("| %d | `%s` | %s |", i+1, r.show(s), r.bare(i))
		for _, p := range firsts {
			l := p.Cells[i].Label()
			if rank(p.Cells[i].Class) > rank(r.bare(i)) && rank(r.bare(i)) >= 0 {
				l = "**" + l + "**"
			}
			w(" %s | %s |", l, r.stepDelta(c.Name, p.User, i))
		}
		w("\n")
	}
	w("\nWhat the model saw under undosh that it did not under plain bash:\n\n")
	for _, p := range firsts {
		var lines []string
		for _, d := range p.Diffs {
			if d.Kind == Same {
				continue
			}
			l := fmt.Sprintf("step %d: %s", d.Step+1, d.Kind)
			if d.Problem != "" {
				l += " — **" + d.Problem + "**"
			}
			lines = append(lines, l)
		}
		w("- %s: %s.\n", p.User.Label(), strings.Join(lines, "; "))
	}
	w("\n")
	var found []string
	for _, p := range firsts {
		who := p.User.Label()
		for _, f := range r.failed(c.Name, p.User) {
			found = append(found, fmt.Sprintf("%s: **must hold, did not**: %s", who, cell(f)))
		}
		for i, cl := range p.Cells {
			if cl.Outcome == "kept: overlapped" {
				found = append(found, fmt.Sprintf("%s: step %d (`%s`) failed and was kept, not rolled back: undosh took another step to be running beside it (kept: overlapped).", who, i+1, r.show(r.Steps[i])))
			}
		}
		for _, e := range p.Extras {
			if !e.Nested && e.Record.Outcome == "refused" {
				found = append(found, fmt.Sprintf("%s: undosh refused the harness's own `%s` (%s); the harness went on without it.", who, cell(clip(e.Summary, 60)), e.Record.Class))
			}
		}
		for i, cl := range p.Cells {
			if b := r.bare(i); rank(cl.Class) > rank(b) && rank(b) >= 0 {
				found = append(found, fmt.Sprintf("%s: step %d (`%s`) is %s here, %s typed bare.", who, i+1, r.show(r.Steps[i]), cl.Class, b))
			}
		}
		for _, d := range p.Diffs {
			if d.Kind == Unintended || d.Problem != "" {
				found = append(found, fmt.Sprintf("%s: step %d is not as the story intends (%s); the model saw `%s` where plain bash gave `%s`.",
					who, d.Step+1, firstOf(d.Problem, d.Kind), cell(clip(d.Undosh, 300)), cell(clip(d.Plain, 120))))
			}
		}
		if p.Undosh.Bench == nil && p.Undosh.Spec.Bench > 0 && len(p.Undosh.Results) > 0 {
			found = append(found, fmt.Sprintf("%s: the wrapper could not be replayed alone: undosh's journal clipped it, not recognising the scaffolding.", who))
		}
		var other []string
		for _, sw := range p.Undosh.Swept {
			if !strings.HasPrefix(sw, "undosh-classifier") && !strings.Contains(sw, "echo ready; read _") {
				other = append(other, sw)
			}
		}
		if len(other) > 0 {
			found = append(found, fmt.Sprintf("%s: left running after the session, ended by the suite: `%s`.", who, cell(strings.Join(other, "; "))))
		}
	}
	w("What this run found:\n\n")
	if len(found) == 0 {
		w("- nothing beyond the intended differences.\n")
	}
	for _, f := range found {
		w("- %s\n", f)
	}
	w("\nKnown of the harness itself:\n\n")
	for _, n := range c.Notes {
		w("- %s\n", n)
	}
	w("\n")
}

// failed gathers what failed to hold in every round of a harness and user.
func (r *Report) failed(client string, u User) []string {
	var out []string
	for _, p := range r.Pairs {
		if p.Client == client && p.User.Root() == u.Root() {
			for _, f := range p.Failed {
				if !slices.Contains(out, f) {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// stepDelta is the median over the rounds of undosh's time for step i
// less plain bash's.
func (r *Report) stepDelta(client string, u User, i int) string {
	var ds []time.Duration
	for _, p := range r.Pairs {
		if p.Client != client || p.User.Root() != u.Root() {
			continue
		}
		a, oka := byStep(p.Plain.Results)[i]
		b, okb := byStep(p.Undosh.Results)[i]
		if oka && okb && a.Latency > 0 && b.Latency > 0 {
			ds = append(ds, b.Latency-a.Latency)
		}
	}
	if len(ds) == 0 {
		return "–"
	}
	return ms(median(ds))
}

func (r *Report) clients() []Client {
	var out []Client
	for _, c := range Clients {
		for _, p := range r.Pairs {
			if p.Client == c.Name {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

func (r *Report) users() []User {
	var root, other *User
	for _, p := range r.Pairs {
		u := p.User
		if u.Root() && root == nil {
			root = &u
		} else if !u.Root() && other == nil {
			other = &u
		}
	}
	var out []User
	for _, u := range []*User{root, other} {
		if u != nil {
			out = append(out, *u)
		}
	}
	return out
}

func (r *Report) rounds() int {
	n := 0
	for _, p := range r.Pairs {
		n = max(n, p.Round+1)
	}
	return n
}

// cell makes text safe in a Markdown table cell inside backquotes.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "`", "'")
	return strings.ReplaceAll(s, "\n", " ⏎ ")
}
