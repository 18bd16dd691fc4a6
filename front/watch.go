package front

import (
	"encoding/json"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/journal"
	"github.com/undosh/undosh/internal/watchd"
	"github.com/undosh/undosh/shell"
)

// watchRetention drops a workspace no checkpoint asked about for a day,
// the age undoctl gc keeps checkpoints for by default.
const watchRetention = 24 * time.Hour

// newWatchService makes the server's watchers. A caller that sees other
// files than the server gets none.
func (s *server) newWatchService() *watchd.Service {
	return &watchd.Service{Retention: watchRetention, Log: s.log, InView: func(pid int) bool {
		same, _ := s.view(pid)
		return same
	}}
}

// serveWatch answers a request to the watchers on connection fd.
func (s *server) serveWatch(fd int, peer *unix.Ucred, body []byte) {
	var r watchd.Request
	var a watchd.Answer
	if err := json.Unmarshal(body, &r); err != nil {
		a.Err = "bad request: " + err.Error()
	} else {
		a = s.watch.Do(r, int(peer.Pid))
	}
	msg, err := watchd.Encode(a)
	if err != nil {
		s.log.Warn("watch: answer not encoded", "err", err)
		return
	}
	for len(msg) > 0 {
		n, err := unix.Write(fd, msg)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			s.log.Warn("watch: answer not sent", "err", err)
			return
		}
		msg = msg[n:]
	}
}

// beforeReadOnly takes the checkpoint before a read-only step that the
// server passes to the real shell, and queues its journal record, which
// a goroutine writes once the front end has its answer. It returns false
// when that checkpoint would walk the whole workspace: undosh then runs
// the step, and walks in its own process, so that a walk of a large
// tree never holds up the other front ends.
func (s *server) beforeReadOnly(p shell.Pass, pid int) bool {
	rec, ok, err := p.TakeCheckpoint(s.watch, pid)
	if err != nil {
		return false
	}
	if !ok {
		return true
	}
	select {
	case s.records <- pendingRecord{stateDir: p.StateDir, rec: rec}:
	default:
		s.log.Warn("journal queue full: a read-only step is not journaled", "command", rec.Command)
	}
	return true
}

type pendingRecord struct {
	stateDir string
	rec      journal.Record
}

// writeRecords journals the read-only steps the server passed, in the
// order it answered them.
func (s *server) writeRecords() {
	for p := range s.records {
		if err := shell.JournalReadOnly(p.stateDir, p.rec); err != nil {
			s.log.Warn("read-only step not journaled", "err", err)
		}
	}
}
