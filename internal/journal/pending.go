package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Rollback is a rollback in progress: the workspace Root is being put back
// to checkpoint Target for step Step; or, with Kind "machine", a machine
// step's commit into the fork engine's journal Root, which the fork
// engine's recovery reverses if it was cut short.
type Rollback struct {
	Kind   string `json:"kind,omitempty"`
	Step   int    `json:"step"`
	Root   string `json:"root"`
	Target string `json:"target,omitempty"`
	Proc   string `json:"proc"` // pid and start time of the process doing it
}

// Machine is the Kind of a machine step's commit.
const Machine = "machine"

// PendingDir is where rollback markers live; it exists only while a
// rollback is in progress or unfinished, so checking for it costs one
// lstat.
func PendingDir(stateDir string) string { return filepath.Join(stateDir, "pending") }

// MarkRollback durably records that r is starting. The caller removes the
// mark with the returned function once the rollback is complete.
func (j *Journal) MarkRollback(r Rollback) (done func(), err error) {
	dir := PendingDir(j.dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	r.Proc = procID(os.Getpid())
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(dir, strconv.Itoa(r.Step)+"-"+strconv.Itoa(os.Getpid())+".json")
	if err := writeDurable(name, data); err != nil {
		return nil, err
	}
	return func() {
		os.Remove(name)
		os.Remove(dir) // fails while other marks remain; that is fine
	}, nil
}

// Unfinished returns the rollbacks whose process died before finishing,
// each with a function that removes its mark. The caller holds no lock:
// two processes may both finish the same rollback, which is harmless
// because a restore to a checkpoint is idempotent.
func (j *Journal) Unfinished() ([]Rollback, []func(), error) {
	dir := PendingDir(j.dir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	var out []Rollback
	var done []func()
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		var r Rollback
		if json.Unmarshal(data, &r) != nil {
			os.Remove(name) // torn before it was made durable: never started
			continue
		}
		if alive(r.Proc) {
			continue
		}
		out = append(out, r)
		done = append(done, func() {
			os.Remove(name)
			os.Remove(dir)
		})
	}
	return out, done, nil
}
