package shell

import (
	"encoding/json"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/policy"
)

// watchRetention drops a workspace no checkpoint asked about for a day,
// the age undoctl gc keeps checkpoints for by default.
const watchRetention = 24 * time.Hour

// newWatchService makes the classifier's watchers. A caller that sees
// other files than the classifier gets none.
func (c *classifier) newWatchService() *watchd.Service {
	return &watchd.Service{Retention: watchRetention, Log: c.log, InView: func(pid int) bool {
		same, _ := c.view(pid)
		return same
	}}
}

// serveWatch answers a request to the watchers on connection fd.
func (c *classifier) serveWatch(fd int, peer *unix.Ucred, body []byte) {
	var r watchd.Request
	var a watchd.Answer
	if err := json.Unmarshal(body, &r); err != nil {
		a.Err = "bad request: " + err.Error()
	} else {
		a = c.watch.Do(r, int(peer.Pid))
	}
	msg, err := watchd.Encode(a)
	if err != nil {
		c.log.Warn("watch: answer not encoded", "err", err)
		return
	}
	for len(msg) > 0 {
		n, err := unix.Write(fd, msg)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			c.log.Warn("watch: answer not sent", "err", err)
			return
		}
		msg = msg[n:]
	}
}

// beforeReadOnly takes the checkpoint before a read-only step that the
// classifier passes to the real shell, and queues its journal record,
// which a goroutine writes once the front end has its answer. It returns
// false when that checkpoint would walk the whole workspace: undosh then
// runs the step, and walks in its own process, so that a walk of a large
// tree never holds up the other front ends.
func (c *classifier) beforeReadOnly(stateDir string, pol *policy.Policy, getenv func(string) string, cwd, command string, pid int) bool {
	rec, ok, err := readOnlyCheckpoint(readOnlyStep{stateDir: stateDir, pol: pol, home: getenv("HOME"), cwd: cwd, command: command, pid: pid,
		watch: c.watch})
	if err != nil {
		return false
	}
	if !ok {
		return true
	}
	select {
	case c.records <- pendingRecord{stateDir: stateDir, rec: rec}:
	default:
		c.log.Warn("journal queue full: a read-only step is not journaled", "command", clip(command, 80))
	}
	return true
}

type pendingRecord struct {
	stateDir string
	rec      journal.Record
}

// writeRecords journals the read-only steps the classifier passed, in
// the order it answered them.
func (c *classifier) writeRecords() {
	for p := range c.records {
		if err := journalReadOnly(p.stateDir, p.rec); err != nil {
			c.log.Warn("read-only step not journaled", "err", err)
		}
	}
}
