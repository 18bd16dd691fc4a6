package shell

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/internal/classify"
	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/state"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/policy"
)

// A read-only step, one the policy says changes nothing, still has a
// checkpoint of its workspace from just before it, so that undoctl back N
// undoes it if the policy was wrong. With a watcher that saw nothing
// change since the newest checkpoint, that checkpoint is it, and taking
// it costs two small reads; otherwise it reads what changed (or walks
// everything once, when nothing watched the workspace).

// readOnlyStep is a read-only step about to run.
type readOnlyStep struct {
	stateDir, home, cwd, command string
	pid                          int
	pol                          *policy.Policy
	// watch, when set, is the front end's server's own watchers; else the stores
	// ask the server, and take no checkpoint when none answers (a
	// walk for every read-only step would cost more than the step: the
	// server is what makes it cheap).
	watch *watchd.Service
	// exposed are the workspace roots that the step's limit leaves
	// writable (see holdRoots): each is checkpointed all the same,
	// walking if it must, since nothing else undoes a wrong guess there.
	exposed []string
}

// readOnlyCheckpoint checkpoints the workspace of a read-only step and
// returns its journal record, to append once the step runs. It returns
// false when the step has no workspace, or its store cannot be written
// (a sandbox around undosh keeps it read-only): the step runs unrecorded,
// as it would have before. In the server (s.watch set) it never walks
// and never waits for the store's lock: when the checkpoint would, it
// returns an error wrapping checkpoint.ErrWouldWalk or
// checkpoint.ErrBusy, and the server hands the step to undosh, so that
// neither a walk of a large tree nor a step holding the store (which
// may be asking this server's watcher) holds up the other front ends.
func readOnlyCheckpoint(s readOnlyStep) (journal.Record, bool, error) {
	roots := classify.WorkspaceRoots(s.cwd, s.home)
	if len(roots) == 0 || s.stateDir == "" || s.watch == nil && len(s.exposed) == 0 && !watchd.Answers(state.SocketPath(s.stateDir)) {
		return journal.Record{}, false, nil
	}
	rec := journal.Record{Time: time.Now(), PID: s.pid, Cwd: s.cwd, Command: clip(s.command, maxCommand), Class: policy.None.String(),
		Verdict: policy.Run.String(), Outcome: journal.PassedThrough}
	o := state.StoreOptions(s.stateDir, s.pol, s.home)
	if s.watch != nil {
		// In the front end's server, which answers one request at a
		// time: a process holding the store's lock may be waiting for
		// the answer of this very server's watcher, so the checkpoint
		// never waits for the lock: a busy store goes to undosh.
		o.Watch = s.watch.Watcher(o.Exclude, o.MaxFileSize)
		o.NoWait = true
	}
	for _, root := range roots {
		st, err := checkpoint.Open(root, o)
		if errors.Is(err, checkpoint.ErrBusy) {
			return journal.Record{}, false, err
		}
		if err != nil {
			continue
		}
		res := checkpoint.Result{}
		if id, ok := st.Current(); ok {
			res.ID = id // nothing changed since the newest checkpoint
		} else {
			walks := checkpoint.WalkWhenWatched
			switch {
			case s.watch != nil:
				walks = checkpoint.WalkNever
			case exposed(root, s.exposed):
				walks = checkpoint.WalkAlways
			}
			res, err = st.CheckpointIf("before a read-only step: "+clip(s.command, 200), walks)
		}
		st.Close()
		if s.watch != nil && (errors.Is(err, checkpoint.ErrWouldWalk) || errors.Is(err, checkpoint.ErrBusy)) {
			return journal.Record{}, false, err
		}
		if err != nil {
			continue
		}
		rec.Points = append(rec.Points, journal.Checkpoint{Root: st.Workspace(), Before: res.ID, Walk: res.Walk})
	}
	return rec, len(rec.Points) > 0, nil
}

// exposed reports whether root is one of the roots given (resolved, as
// holdRoots gives them).
func exposed(root string, roots []string) bool {
	real, err := filepath.EvalSymlinks(root)
	return err == nil && slices.Contains(roots, real)
}

// journalReadOnly numbers and journals a read-only step.
func journalReadOnly(stateDir string, rec journal.Record) error {
	j, err := journal.Open(stateDir)
	if err != nil {
		return err
	}
	// A read-only step makes no step beside it overlapped: it is meant
	// to change nothing, and its checkpoint says what it did.
	id, err := j.NewQuietID()
	if err != nil {
		return err
	}
	rec.ID = id
	return j.Append(rec)
}

// beforePlain checkpoints and journals a read-only step undosh itself
// passes to the real shell; exposed are the roots its limit leaves
// writable.
func (r *run) beforePlain(exposed []string) {
	if r.dec.Own || r.stateDir == "" {
		return
	}
	text, _ := r.commandText()
	rec, ok, _ := readOnlyCheckpoint(readOnlyStep{stateDir: r.stateDir, pol: r.pol, home: r.proc.Getenv("HOME"), cwd: r.cwd, command: text, pid: os.Getpid(), exposed: exposed})
	if ok {
		journalReadOnly(r.stateDir, rec)
	}
}
