package machine

// Processes a step leaves running: detect, then start again after the
// commit.
//
// A machine step runs in a copy of the machine whose pid namespace ends
// with the step, so a daemon it starts (`redis-server --daemonize yes`,
// `pg_ctl start`, `nohup server &`, `(setsid cmd &)`, `service x start`)
// cannot outlive it there, and killing it silently would leave a machine
// with the step's files and none of its processes. With Step.Leftovers
// the fork engine lists what the step's session left running and ends it
// gracefully in the copy (SIGTERM, then SIGKILL after fork.LeftoverGrace,
// so that what it writes as it stops is committed with the rest: see
// fork.Result.Leftovers). Then:
//
//   - when the copy is kept (committed, or passed with nothing to
//     commit), each process is started again on this machine with
//     procs.Start: detached (its own session, standard input from
//     /dev/null), with its argv, working directory, environment and
//     credentials as they were in the copy, its output appended to
//     <state>/started/<step>-<n>.log;
//   - a process whose parent was left running too is not started: its
//     parent starts it again (a database's workers);
//   - a fork of a shell that exec'd nothing since (procs.Proc.Forked: the
//     step's `{ …; } &` or a script's `loop &`) is not started: its argv
//     is its shell's, and starting it would run the whole script again,
//     outside any copy. Its own leftover children are started instead;
//   - when the copy is discarded (the step or verify failed, a conflict,
//     a refused commit, undoctl try), nothing is started, and the outcome
//     says the processes were stopped with the copy.
//
// What a caller may rely on, and what it may not: Outcome.Leftovers says
// what became of every process, and Outcome.LeftoverSummary says it in
// one line, so that no process goes silently. A process started again is
// a new process: its memory is lost and its pid is another (the copy's
// pids mean nothing on the machine); a program that renamed its argv
// (redis-server shows "redis-server *:6379", postgres workers
// "postgres: checkpointer") is started with what /proc showed, which may
// not start it as the step did (the summary says to check it); a daemon that forks into the background is named by the
// pid of the process that forked it, which exits at once. A process is
// started as the user it was when read, never with more privilege: one
// that started as root and gave root up is started as the user it
// became, which may not be enough for it. A failed start does not fail
// the step: the summary says it, and the log has the program's own
// words; so does one that ended within [StartCheck] of its start (a
// server that could not bind its port, or a daemon's parent). Verify runs after the step's processes have ended, so it cannot
// talk to them.

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/undosh/undosh/fork"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/procs"
)

// LeftoverState is what became of a process a step left running.
type LeftoverState string

// What became of a process a step left running in its copy.
const (
	// LeftStarted: started again on this machine after the commit.
	LeftStarted LeftoverState = "started"
	// LeftFailed: the copy was kept, but starting it again failed.
	LeftFailed LeftoverState = "failed"
	// LeftChild: its parent, itself left running, starts it again.
	LeftChild LeftoverState = "child"
	// LeftSubshell: a fork of a shell that exec'd nothing, whose argv
	// is the shell's: not started again, as that would run the
	// shell's whole script again.
	LeftSubshell LeftoverState = "subshell"
	// LeftStopped: stopped with a copy that was not kept.
	LeftStopped LeftoverState = "stopped"
)

// Leftover is a process a step left running in its copy, and what became
// of it.
type Leftover struct {
	// Proc is the process as it ran in the copy; its pid is the copy's.
	Proc procs.Proc
	// State is what became of it.
	State LeftoverState
	// Started is the process started again on this machine (LeftStarted).
	Started procs.Proc
	// Log is the file its output goes to (LeftStarted, LeftFailed).
	Log string
	// Err says why it could not be started again (LeftFailed).
	Err string
	// Ended: the process started again was gone within [StartCheck]. It
	// forked into the background (a daemon's parent exits at once), or
	// it failed: its log says which.
	Ended bool
}

// StartCheck is how long restart waits, once it has started processes
// again, before it looks which are still running: a server that cannot
// bind its port, or a daemon's parent, is gone by then.
const StartCheck = 50 * time.Millisecond

// stopped is what a step left in a copy that is not kept: every process
// stopped with it.
func stopped(ps []procs.Proc) []Leftover {
	var out []Leftover
	for _, p := range ps {
		out = append(out, Leftover{Proc: p, State: LeftStopped})
	}
	return out
}

// notOwn is ps (parents first) without the processes whose argv[0] is
// one of own, and their children.
func notOwn(ps []procs.Proc, own []string) []procs.Proc {
	if len(own) == 0 {
		return ps
	}
	dropped := map[int]bool{}
	var out []procs.Proc
	for _, p := range ps {
		if dropped[p.PPID] || len(p.Argv) > 0 && slices.Contains(own, p.Argv[0]) {
			dropped[p.PID] = true
			continue
		}
		out = append(out, p)
	}
	return out
}

// restart starts again on this machine the processes a kept step left in
// its copy (ls, parents first, all LeftStopped), but those their parent
// starts and subshells; s names the logs.
func restart(ls []Leftover, s Step) {
	dir := s.stateDir()
	name := strconv.Itoa(s.ID)
	if s.ID == 0 {
		name = time.Now().UTC().Format("20060102T150405.000000000")
	}
	state := map[int]LeftoverState{}
	n := 0
	for i := range ls {
		l := &ls[i]
		parent, ok := state[l.Proc.PPID]
		switch {
		case ok && parent != LeftSubshell:
			l.State = LeftChild
		case l.Proc.Forked && isShell(l.Proc, s):
			l.State = LeftSubshell
		default:
			n++
			l.Log = filepath.Join(dir, "started", fmt.Sprintf("%s-%d.log", name, n))
			q, err := procs.Start(unrenamed(l.Proc), l.Log)
			if err != nil {
				l.State, l.Err = LeftFailed, err.Error()
			} else {
				l.State, l.Started = LeftStarted, q
			}
		}
		state[l.Proc.PID] = l.State
	}
	var started []procs.Proc
	for _, l := range ls {
		if l.State == LeftStarted {
			started = append(started, l.Started)
		}
	}
	if len(started) > 0 {
		// Returns early only when all are gone; on a pidfd.
		procs.WaitGone(started, StartCheck)
	}
	for i := range ls {
		l := &ls[i]
		l.Ended = l.State == LeftStarted && !l.Started.Alive()
		if s.Logger != nil {
			s.Logger.Info("machine: a process the step left running", "argv", l.Proc.Argv, "state", l.State, "pid", l.Started.PID, "ended", l.Ended, "log", l.Log, "err", l.Err)
		}
	}
}

// shells are the programs whose forks run script text: starting one
// from its argv runs its script from the start.
var shells = []string{"bash", "sh", "dash", "ash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "posh", "yash", "busybox", "fish", "csh", "tcsh", "undosh"}

// isShell reports whether p runs a shell: one of shells, the step's own
// program, or the step's argv.
func isShell(p procs.Proc, s Step) bool {
	if p.Exe != "" && (p.Exe == s.Path || slices.Contains(shells, filepath.Base(p.Exe))) {
		return true
	}
	if len(p.Argv) > 0 && slices.Contains(shells, strings.TrimPrefix(filepath.Base(p.Argv[0]), "-")) {
		return true
	}
	return slices.Equal(p.Argv, s.Argv)
}

// renamed reports whether p looks like a daemon that rewrote its command
// line (setproctitle: redis-server's "redis-server *:6379"): forked, and
// one argument that holds a space, which no exec of a program with
// arguments gives.
func renamed(p procs.Proc) bool {
	return p.Forked && len(p.Argv) == 1 && strings.ContainsRune(p.Argv[0], ' ')
}

// unrenamed is p as it can be started again: a Redis server that
// rewrote its command line to "redis-server 127.0.0.1:6399" is started
// on that address, in its directory (Redis works in its dir), in the
// foreground (it is detached anyway). Any other p is itself.
func unrenamed(p procs.Proc) procs.Proc {
	if !renamed(p) {
		return p
	}
	f := strings.Fields(p.Argv[0])
	if len(f) != 2 || filepath.Base(f[0]) != "redis-server" {
		return p
	}
	host, port, err := net.SplitHostPort(f[1])
	if err != nil {
		return p
	}
	argv := []string{f[0], "--port", port, "--dir", p.Cwd, "--daemonize", "no"}
	if host != "*" && host != "" {
		argv = append(argv, "--bind", host)
	}
	p.Argv = argv
	return p
}

// LeftoverSummary says in one line what became of the processes the step
// left running in its copy ("" when it left none), to follow "step N ":
// "left 1 process running in its copy of the machine; started again on
// this machine after the commit: redis-server --daemonize yes (pid 1234,
// log /var/lib/undosh/started/7-1.log)", or "…, stopped with the copy
// (the machine is unchanged): sleep 300".
func (o Outcome) LeftoverSummary() string {
	if len(o.Leftovers) == 0 && o.LeftoversUnread == 0 {
		return ""
	}
	by := map[LeftoverState][]string{}
	for _, l := range o.Leftovers {
		cmd := clip(l.Proc.Command(), 80)
		switch l.State {
		case LeftStarted:
			note := ""
			if renamed(l.Proc) && slices.Equal(unrenamed(l.Proc).Argv, l.Proc.Argv) {
				note = "; it had rewritten its command line, so it runs with what /proc showed, not the step's arguments: check it"
			}
			if l.Ended {
				note += "; it ended at once: it forked into the background, or failed (its log says which)"
			}
			by[l.State] = append(by[l.State], fmt.Sprintf("%s (pid %d, log %s%s)", cmd, l.Started.PID, l.Log, note))
		case LeftFailed:
			by[l.State] = append(by[l.State], fmt.Sprintf("%s (%s; log %s)", cmd, clip(l.Err, 120), l.Log))
		case LeftChild:
			by[l.State] = append(by[l.State], cmd)
		case LeftSubshell:
			by[l.State] = append(by[l.State], clip(l.Proc.Command(), 60))
		default:
			by[l.State] = append(by[l.State], cmd+" (pid "+strconv.Itoa(l.Proc.PID)+" in the copy)")
		}
	}
	n := len(o.Leftovers) + o.LeftoversUnread
	line := fmt.Sprintf("left %d %s running in its copy of the machine", n, plural(n, "process", "processes"))
	unread := ""
	if o.LeftoversUnread > 0 {
		unread = fmt.Sprintf("; %d more, past the first %d, were not read and were stopped with the copy", o.LeftoversUnread, fork.MaxLeftovers)
	}
	if stopped := by[LeftStopped]; len(stopped) > 0 || len(o.Leftovers) == 0 {
		line += ", stopped with the copy, which was not kept"
		if len(stopped) > 0 {
			line += ": " + clip(strings.Join(stopped, ", "), 400)
		}
		return line + unread
	}
	var parts []string
	if l := by[LeftStarted]; len(l) > 0 {
		parts = append(parts, "started again on this machine after the commit (new processes: memory and pids are not carried over): "+clip(strings.Join(l, ", "), 800))
	}
	if l := by[LeftChild]; len(l) > 0 {
		parts = append(parts, fmt.Sprintf("%d started by %s parent", len(l), plural(len(l), "its", "their")))
	}
	if l := by[LeftFailed]; len(l) > 0 {
		parts = append(parts, "could not start again: "+clip(strings.Join(l, ", "), 300))
	}
	if l := by[LeftSubshell]; len(l) > 0 {
		parts = append(parts, "stopped, not started again (a subshell of a script, which would run the whole script again; start what it ran by hand): "+clip(strings.Join(l, ", "), 200))
	}
	return line + "; " + strings.Join(parts, "; ") + unread
}

// journalLeftovers is what the journal keeps of ls: the processes started
// again (or that could not be), and the command lines of those stopped
// with a copy that was not kept. A process its parent starts again is
// left out: the parent stands for it.
func journalLeftovers(ls []Leftover) (started []journal.StartedProc, stopped []string) {
	for _, l := range ls {
		cmd := l.Proc.Command()
		switch l.State {
		case LeftStarted:
			started = append(started, journal.StartedProc{Command: cmd, PID: l.Started.PID, Start: l.Started.Start, Log: l.Log, Ended: l.Ended})
		case LeftFailed:
			started = append(started, journal.StartedProc{Command: cmd, Log: l.Log, Error: l.Err})
		case LeftSubshell:
			started = append(started, journal.StartedProc{Command: cmd, Error: "a subshell of a script: not started again"})
		case LeftStopped:
			stopped = append(stopped, cmd)
		}
	}
	return started, stopped
}
