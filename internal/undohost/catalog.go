package undohost

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/undosh/undosh/hostlink"
	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/machine"
)

// catalog keeps each sandbox's checkpoints (and, for the local backend,
// its kept steps) in one JSON file per sandbox, <dir>/<sandbox>.json,
// written by temp file, fsync and rename.
type catalog struct {
	dir string
	mu  sync.Mutex
	// generation returns a sandbox's current generation, for the records
	// of new checkpoints (hostlink.Server.Identity; set by Run).
	generation func(sandbox string) uint64
}

// book is one sandbox's file.
type book struct {
	Checkpoints []checkpoint `json:"checkpoints"`
	// Steps are the local backend's kept steps with their commits, in
	// order; a checkpoint is a position in this list.
	Steps []keptStep `json:"steps,omitempty"`
}

type checkpoint struct {
	hostlink.CheckpointInfo
	// Seq is, for the local backend, how many kept steps there were when
	// the checkpoint was taken.
	Seq int `json:"seq"`
}

type keptStep struct {
	Op      string           `json:"op"`
	Time    time.Time        `json:"time"`
	Commits []machine.Commit `json:"commits"`
}

func (c *catalog) path(sandbox string) string { return filepath.Join(c.dir, sandbox+".json") }

// read returns the sandbox's book; c.mu is held.
func (c *catalog) read(sandbox string) (book, error) {
	var b book
	data, err := os.ReadFile(c.path(sandbox))
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("read checkpoints of %s: %w", sandbox, err)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("read checkpoints of %s: %w", sandbox, err)
	}
	return b, nil
}

// write stores the sandbox's book durably; c.mu is held.
func (c *catalog) write(sandbox string, b book) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(c.path(sandbox), data, 0o600); err != nil {
		return fmt.Errorf("write checkpoints of %s: %w", sandbox, err)
	}
	return nil
}

// prune drops the checkpoints past their expiry and, beyond keepLast, the
// oldest; it returns what it dropped.
func prune(b *book, now time.Time, keepLast int) []checkpoint {
	var keep, drop []checkpoint
	for _, cp := range b.Checkpoints {
		if !cp.Expires.IsZero() && now.After(cp.Expires) {
			drop = append(drop, cp)
			continue
		}
		keep = append(keep, cp)
	}
	if keepLast > 0 && len(keep) > keepLast {
		drop = append(drop, keep[:len(keep)-keepLast]...)
		keep = keep[len(keep)-keepLast:]
	}
	b.Checkpoints = keep
	return drop
}

// newCheckpoint makes the record of a checkpoint about to be taken.
func (c *catalog) newCheckpoint(b book, job hostlink.CheckpointJob, ttl time.Duration) checkpoint {
	now := time.Now().UTC()
	cp := checkpoint{CheckpointInfo: hostlink.CheckpointInfo{
		ID: "cp-" + randomHex(8), Label: job.Request.Label, Op: job.Request.After, Created: now,
	}}
	if c.generation != nil {
		cp.Generation = c.generation(job.Sandbox)
	}
	if job.Request.Retention.TTLSeconds > 0 {
		ttl = time.Duration(job.Request.Retention.TTLSeconds) * time.Second
	}
	if ttl > 0 {
		cp.Expires = now.Add(ttl)
	}
	if n := len(b.Checkpoints); n > 0 {
		cp.Parent = b.Checkpoints[n-1].ID
	}
	return cp
}

func find(b book, id string) (int, bool) {
	for i, cp := range b.Checkpoints {
		if cp.ID == id {
			return i, true
		}
	}
	return 0, false
}

func infos(b book) []hostlink.CheckpointInfo {
	out := make([]hostlink.CheckpointInfo, 0, len(b.Checkpoints))
	for _, cp := range b.Checkpoints {
		out = append(out, cp.CheckpointInfo)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func keepLastOr(req, def int) int {
	if req > 0 {
		return req
	}
	return def
}
