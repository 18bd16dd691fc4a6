package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/procs"
	"github.com/undosh/undosh/parser"
	"github.com/undosh/undosh/policy"
	"github.com/undosh/undosh/service"
)

// A live step is a machine step whose every machine-class part acts on
// something that lives on this machine and not in a copy of it
// ([policy.Decision.Live]): a database client that writes, a migration,
// a POST to a local server, a kill of the sandbox's processes. With no
// sandbox host it runs here, after a checkpoint of the services it
// names and of its workspace; a failed step (or verify) puts both back
// (docs/services.md).

// liveStep is what a live step holds besides its workspace checkpoints.
type liveStep struct {
	store    *service.Store
	services []service.Service
	// targets are the processes the step's kill, pkill or killall would
	// end, read just before it runs; unknown is the command whose could
	// not be told (a pid known only at run time): then every process
	// that has run a while counts, should it end during the step.
	targets []procs.Proc
	unknown string
	// named is how many of targets (the first ones) the step names: the
	// processes its kill is sure to signal.
	named int
}

// liveServices picks from all the services that names (a step's live
// names) talk to.
func liveServices(all []service.Service, names []string) []service.Service {
	var out []service.Service
	for _, s := range all {
		for _, n := range names {
			if n == s.Kind || n == s.Name || n == policy.LiveServices ||
				n == policy.LiveDatabase && slices.Contains(service.Kinds, s.Kind) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// narrow keeps, of the services of a kind that the step's live names
// name by kind, those its clients reach: the ports the parser read from
// their words and environment ([parser.Server]), when every client of
// that kind has one and each is a port a server here listens on.
// Anything less certain keeps them all: a wrong guess would leave a
// server unprotected.
func narrow(ss []service.Service, names []string, facts *parser.Facts) []service.Service {
	if facts == nil || len(facts.Unknown) > 0 || slices.ContainsFunc(names, func(n string) bool { return n == policy.LiveDatabase || n == policy.LiveServices }) {
		return ss
	}
	out := slices.Clone(ss)
	for _, kind := range service.Kinds {
		if !slices.Contains(names, kind) {
			continue
		}
		ports := map[int]bool{}
		sure := true
		for _, cmd := range facts.Commands {
			if cmd.Server == nil || cmd.Server.Kind != kind {
				continue
			}
			if cmd.Server.Port == 0 {
				sure = false
				break
			}
			ports[cmd.Server.Port] = true
		}
		if !sure || len(ports) == 0 {
			continue
		}
		listening := 0
		for _, s := range ss {
			if s.Kind == kind && ports[s.Port] {
				listening++
			}
		}
		if listening != len(ports) {
			continue
		}
		out = slices.DeleteFunc(out, func(s service.Service) bool { return s.Kind == kind && !s.Declared && !ports[s.Port] })
	}
	return out
}

// prepareLive finds what the live step that names names will act on:
// the services to checkpoint, and the processes its kills will end. It
// returns why the services cannot be checkpointed ("" when they can).
func (r *run) prepareLive(names []string) (why string) {
	l := &liveStep{}
	r.live = l
	if slices.ContainsFunc(names, func(n string) bool { return n != policy.LiveProcesses }) {
		all, err := service.Detect(r.pol.Services)
		if err != nil {
			return "the services running here cannot be read: " + err.Error()
		}
		l.services = narrow(liveServices(all, names), names, r.facts)
		for _, s := range l.services {
			if s.Unreadable != "" {
				return fmt.Sprintf("service %s cannot be checkpointed: %s", s.Name, s.Unreadable)
			}
		}
		if len(l.services) > 0 {
			if l.store, err = service.Open(r.stateDir); err != nil {
				return "the service store cannot be opened: " + err.Error()
			}
		}
	}
	if r.facts != nil {
		for _, c := range r.facts.Commands {
			if !c.Signals {
				continue
			}
			// A target known only as it runs (kill $(cat app.pid),
			// fuser -k, which procs.Targets cannot read ahead) makes the
			// step's kill unknown.
			argv := make([]string, 0, len(c.Argv))
			for _, w := range c.Argv {
				if w.Dynamic {
					argv = nil
					break
				}
				argv = append(argv, w.Value)
			}
			if argv == nil {
				l.unknown = c.Text
				continue
			}
			ps, ok, err := procs.Targets(argv)
			if !ok || err != nil {
				l.unknown = c.Text
				continue
			}
			if procs.Kills(argv) {
				for _, p := range ps {
					if !slices.ContainsFunc(l.targets, p.Same) {
						l.targets = append(l.targets, p)
					}
				}
			}
		}
	}
	l.named = len(l.targets)
	if l.unknown != "" {
		l.targets = append(l.targets, longLived(l.targets)...)
	}
	return ""
}

// settled is how long a process has run for a kill whose targets are
// known only at run time (kill $(cat app.pid)) to count it, should it
// end during the step, among those the step ended: a server, not a
// command that happened to finish meanwhile.
const settled = 2 * time.Second

// longLived lists the processes that have run for settled or longer,
// but undosh, its ancestors, kernel threads and those of have.
func longLived(have []procs.Proc) []procs.Proc {
	all, err := procs.List()
	if err != nil {
		return nil
	}
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return nil
	}
	up, err := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	if err != nil {
		return nil
	}
	now := uint64(up * 100) // start times count USER_HZ ticks since boot
	mine := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !mine[pid]; {
		mine[pid] = true
		i := slices.IndexFunc(all, func(p procs.Proc) bool { return p.PID == pid })
		if i < 0 {
			break
		}
		pid = all[i].PPID
	}
	var out []procs.Proc
	for _, p := range all {
		if mine[p.PID] || p.Exe == "" || len(p.Argv) == 0 || p.PID == 1 || now < p.Start+uint64(settled/(10*time.Millisecond)) ||
			slices.ContainsFunc(have, p.Same) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// checkpointServices checkpoints the live step's services before it runs,
// into rec; on an error nothing has run, and the points taken so far are
// left to gc.
func (l *liveStep) checkpointServices(ctx context.Context, rec *journal.Record) error {
	for _, s := range l.services {
		pt, err := l.store.Checkpoint(ctx, s)
		if err != nil {
			return fmt.Errorf("cannot checkpoint service %s before this step: %w", s.Name, err)
		}
		rec.Services = append(rec.Services, journal.ServicePoint{Name: s.Name, Kind: s.Kind, Before: pt.ID,
			Bytes: pt.Bytes, Frozen: ms(pt.Frozen)})
	}
	return nil
}

// dying is how long, once a step has ended, undosh waits for the
// processes its kill named to end: a signal is sent by the time kill
// returns, but the process it ends may not have run its exit yet.
const dying = 500 * time.Millisecond

// killed records, once the step has ended, which of its targets are gone.
// It waits up to dying for those the step named, and, of the rest (a
// kill whose targets are known only at run time, most of which live on),
// for those a signal has doomed.
func (l *liveStep) killed(rec *journal.Record) {
	if l != nil {
		wait := slices.Clip(l.targets[:l.named])
		for _, p := range l.targets[l.named:] {
			if p.Dying() {
				wait = append(wait, p)
			}
		}
		procs.WaitGone(wait, dying)
		rec.Killed = procs.Gone(l.targets)
	}
}

// rollbackServices puts each service of rec back to its checkpoint from
// before the step, and returns what to add to the notice: what was put
// back and how to undo that, or where a restore stopped.
func (r *run) rollbackServices(rec *journal.Record) (done []string, undo []string, failed string) {
	l := r.live
	for i := range rec.Services {
		sp := &rec.Services[i]
		res, err := l.store.Restore(r.context(), sp.Before)
		if res.After.ID != "" {
			sp.After = res.After.ID
		}
		if err != nil {
			hint := "undoctl back " + fmt.Sprint(rec.ID) + " tries again"
			var re *service.RestoreError
			if errors.As(err, &re) && re.Hint != "" {
				hint = re.Hint
			}
			return done, undo, fmt.Sprintf("the rollback of service %s failed (%v); %s", sp.Name, err, hint)
		}
		sp.Restored = true
		done = append(done, "service "+sp.Name)
		if sp.After != "" {
			undo = append(undo, "undoctl service restore "+sp.After)
		}
	}
	return done, undo, ""
}

// startKilled starts again the processes rec says the step killed, and
// says what it did: for a step rolled back.
func (r *run) startKilled(rec *journal.Record) string {
	if len(rec.Killed) == 0 {
		return ""
	}
	var started, not []string
	for i, p := range rec.Killed {
		q, err := procs.Start(p, filepath.Join(r.stateDir, "started", fmt.Sprintf("%d-%d.log", rec.ID, i)))
		if err != nil {
			not = append(not, p.Command())
			continue
		}
		started = append(started, fmt.Sprintf("%s (pid %d)", clip(p.Command(), 60), q.PID))
	}
	s := ""
	if len(started) > 0 {
		s = fmt.Sprintf("started again %d %s it killed: %s", len(started), plural(len(started), "process", "processes"), strings.Join(started, "; "))
	}
	if len(not) > 0 {
		s = strings.TrimPrefix(s+"; ", "; ") + fmt.Sprintf("could not start again %s", strings.Join(not, "; "))
	}
	return s + " (their memory is lost: no checkpoint holds it)"
}

// killNotice is the line said after a kept live step that killed
// processes: what it ended, and that only their command lines are kept.
func (l *liveStep) killNotice(id int, killed []procs.Proc) string {
	if l == nil || len(killed) == 0 {
		return ""
	}
	names := make([]string, 0, len(killed))
	for _, p := range killed {
		names = append(names, fmt.Sprintf("%s (pid %d)", clip(p.Command(), 60), p.PID))
	}
	guess := ""
	if l.unknown != "" {
		guess = fmt.Sprintf(" (`%s` names its targets only as it runs: these are the long-running processes that ended meanwhile)", clip(l.unknown, 40))
	}
	return fmt.Sprintf("step %d ended %d %s of the sandbox%s: %s; what %s held in memory is gone, which no checkpoint restores; undoctl back %d starts %s again",
		id, len(killed), plural(len(killed), "process", "processes"), guess, strings.Join(names, "; "),
		plural(len(killed), "it", "they"), id, plural(len(killed), "it", "them"))
}

// rollbackLive puts back, after a failed live step whose workspace was
// rolled back, its services and the processes it killed, and adds what
// it did to the step's one-line notice.
func (r *run) rollbackLive(rec *journal.Record, failure string) {
	done, undo, failed := r.rollbackServices(rec)
	var parts []string
	if len(done) > 0 {
		parts = append(parts, "put back "+strings.Join(done, ", ")+" as before the step")
	}
	if s := r.startKilled(rec); s != "" {
		parts = append(parts, s)
	}
	if len(undo) > 0 {
		parts = append(parts, "undo that with: "+strings.Join(undo, " && "))
	}
	if failed != "" {
		parts = append(parts, failed)
	}
	if len(parts) == 0 {
		return
	}
	if rec.Notice == "" {
		rec.Notice = fmt.Sprintf("step %d %s: %s", rec.ID, failure, strings.Join(parts, "; "))
	} else {
		rec.Notice += "; " + strings.Join(parts, "; ")
	}
}

// serviceTimeout bounds a live step's service checkpoints.
const serviceTimeout = 5 * time.Minute

// liveNote is the note for a live step run with its workspace only
// checkpointed, when its services cannot be: said once per state
// directory.
func (r *run) liveNote(why string) {
	if r.firstTime("live-fallback-noted") {
		r.proc.say(fmt.Sprintf("note: %s, so steps that talk to it have only the workspace checkpointed (policy host.fallback: git; said once in %s)", why, r.stateDir))
	}
}
