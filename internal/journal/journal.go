// Package journal records undosh's steps: one JSON line per step, appended
// with fsync to journal.jsonl in the state directory. It also numbers the
// steps, tracks which are running (so that a step can tell whether another
// one overlapped it), and keeps the markers of rollbacks in progress, so
// that a rollback cut short by SIGKILL is finished by the next undosh.
//
// What stays true: a step id is never given twice; a record is either
// whole in the journal or absent (a torn last line, from a crash, is
// skipped when reading). Callers must call [Step.Finish] or
// [Step.Abandon] for every [Journal.Begin].
package journal

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/undosh/undosh/internal/atomicfile"
	"github.com/undosh/undosh/internal/flock"
	"github.com/undosh/undosh/internal/pathglob"
	"github.com/undosh/undosh/internal/procs"
)

// Outcomes of a step.
const (
	Kept       = "kept"              // ran; its changes stay
	RolledBack = "rolled back"       // failed; its changes were undone
	Overlapped = "kept: overlapped"  // failed, but another step ran at the same time
	Refused    = "refused"           // the policy refused it; nothing ran
	Failed     = "error"             // undosh could not protect it; nothing ran
	Restored   = "restored"          // undoctl back or restore
	Committed  = "committed"         // a machine step that passed in a copy, committed onto the machine
	Discarded  = "discarded"         // a machine step that failed in a copy; the machine is unchanged
	Finished   = "rolled back later" // a rollback cut short, finished by the next undosh
	Killed     = "killed"            // undosh died while the step ran; its changes stay
	// PassedThrough: read-only, run as bash would after a checkpoint of
	// its workspace (undoctl back undoes it if it changed something).
	PassedThrough = "passed through"
)

// Checkpoint is a workspace checkpointed for a step.
type Checkpoint struct {
	Root string `json:"root"`
	// Before is the checkpoint taken before the step ran.
	Before string `json:"before"`
	// After is the state after the step, when undosh recorded it (before
	// a rollback, or after a restore).
	After string `json:"after,omitempty"`
	// Restored counts the files a rollback or restore wrote or removed.
	Restored int `json:"restored,omitempty"`
	// Walk says why the checkpoint before the step walked the whole
	// workspace rather than read what its watcher saw change.
	Walk string `json:"walk,omitempty"`
}

// MachineCommit is a machine step's commit onto one filesystem, in the
// fork engine's journal there.
type MachineCommit struct {
	Target     string   `json:"target"`
	JournalDir string   `json:"journal_dir"`
	ID         string   `json:"id"`
	Paths      []string `json:"paths,omitempty"`
}

// Record is one step.
type Record struct {
	ID       int       `json:"id"`
	Time     time.Time `json:"time"`
	Duration float64   `json:"duration_ms"`
	PID      int       `json:"pid"`
	Cwd      string    `json:"cwd"`
	Command  string    `json:"command"`
	Class    string    `json:"class"`
	Egress   bool      `json:"egress,omitempty"`
	Verdict  string    `json:"verdict"`
	Reasons  []Reason  `json:"reasons,omitempty"`
	// ReasonsLeft counts the reasons left out of Reasons: those that
	// did not decide the class or the verdict, past the first few.
	ReasonsLeft int `json:"reasons_left,omitempty"`
	// Wrapper is set when a harness wrapped the command in its
	// scaffolding: Command is then the command alone.
	Wrapper *Wrapper     `json:"wrapper,omitempty"`
	Parent  int          `json:"parent,omitempty"`   // the step this one ran inside
	RerunOf int          `json:"rerun_of,omitempty"` // the step this one runs again, at a higher class
	Points  []Checkpoint `json:"checkpoints,omitempty"`
	// Machine lists the commits of a machine step run in a copy.
	Machine []MachineCommit `json:"machine,omitempty"`
	// Sudo is set for a machine step that its user's undosh ran in the
	// root engine, entered through sudo (internal/sudo): its commits are
	// root's, so undoctl back undoes them through sudo.
	Sudo bool `json:"sudo,omitempty"`
	// CPUs and MemGiB are the size of the sandbox a machine step forked,
	// for undoctl cost; SnapshotBytes the size of a snapshot it left.
	CPUs          int     `json:"cpus,omitempty"`
	MemGiB        float64 `json:"mem_gib,omitempty"`
	SnapshotBytes int64   `json:"snapshot_bytes,omitempty"`
	// Host is the sandbox host that ran a machine step (its URL without
	// the token); HostBefore the host checkpoint of the sandbox before
	// the step, HostCheckpoint the one taken after it was kept.
	Host           string `json:"host,omitempty"`
	HostBefore     string `json:"host_before,omitempty"`
	HostCheckpoint string `json:"host_checkpoint,omitempty"`
	Exit           int    `json:"exit"`
	Signal         string `json:"signal,omitempty"`
	Verify         string `json:"verify,omitempty"`
	VerifyOK       *bool  `json:"verify_ok,omitempty"`
	Outcome        string `json:"outcome"`
	Notice         string `json:"notice,omitempty"`
	// VerifyOutput is the end of what verify printed, when it failed.
	VerifyOutput string `json:"verify_output,omitempty"`
	HostOp       string `json:"host_op,omitempty"`
	// Escalated is set when the step wrote beyond what its class allows.
	Escalated *Escalation `json:"escalated,omitempty"`

	// Services are the service checkpoints of a live step, run on the
	// machine because it talks to services running here.
	Services []ServicePoint `json:"services,omitempty"`
	// Killed are the processes of the sandbox that a live step's kill,
	// pkill or killall ended, as they were just before: undoctl back
	// starts them again. Their memory is lost.
	Killed []procs.Proc `json:"killed,omitempty"`
	// Started are the processes a kept machine step left running in its
	// copy, started again on the machine after the commit (Error says
	// why one was not); Stopped, the command lines of those a step left
	// in a copy that was not kept, stopped with it.
	Started []StartedProc `json:"started,omitempty"`
	Stopped []string      `json:"stopped,omitempty"`
}

// StartedProc is a process a machine step left running in its copy, as
// started again on the machine: PID and Start name the new process.
type StartedProc struct {
	Command string `json:"command"`
	PID     int    `json:"pid,omitempty"`
	Start   uint64 `json:"start,omitempty"`
	Log     string `json:"log,omitempty"`
	// Error says why it was not started again: the start failed, or it
	// was a subshell (internal/machine).
	Error string `json:"error,omitempty"`
	// Ended: it was gone soon after its start (it forked into the
	// background, or failed: Log says which).
	Ended bool `json:"ended,omitempty"`
}

// ServicePoint is the checkpoint of one service before a live step.
type ServicePoint struct {
	Name   string `json:"name"`
	Kind   string `json:"kind,omitempty"`
	Before string `json:"before"` // the service checkpoint before the step
	// After is the checkpoint of the data as the step left it, taken
	// when the step was rolled back (or undone by undoctl back).
	After  string  `json:"after,omitempty"`
	Bytes  int64   `json:"bytes,omitempty"`
	Frozen float64 `json:"frozen_ms,omitempty"`
	// Restored is set when a rollback put the service back.
	Restored bool `json:"restored,omitempty"`
}

// Wrapper names the scaffolding a harness put around a step's command.
type Wrapper struct {
	Harness string `json:"harness"` // the form: claude-code, codex, gemini-cli
	// Scaffold names the scaffold's text in the state directory,
	// wrappers/<Scaffold>.sh: the same file for every command of a
	// session.
	Scaffold string `json:"scaffold"`
}

// SaveScaffold keeps text, a harness's scaffolding with the command's
// place marked, in stateDir's wrappers/ under its hash, once, and returns
// the name a [Wrapper] gives it.
func SaveScaffold(stateDir, text string) (string, error) {
	sum := sha256.Sum256([]byte(text))
	id := hex.EncodeToString(sum[:8])
	name := ScaffoldFile(stateDir, id)
	if _, err := os.Lstat(name); err == nil {
		return id, nil
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return id, fmt.Errorf("journal: %w", err)
	}
	return id, atomicfile.Write(name, []byte(text), 0o600)
}

// ScaffoldFile names the file of scaffold id in stateDir.
func ScaffoldFile(stateDir, id string) string {
	return filepath.Join(stateDir, "wrappers", id+".sh")
}

// Escalation says that a step wrote beyond what its class allows (the
// kernel held it in a view of the machine that caught those writes), and
// what undosh did with them.
type Escalation struct {
	// To is the class the step needed: git when all it wrote beyond its
	// class was in its workspace, fork otherwise.
	To string `json:"to"`
	// Paths are what it wrote there (at most the first 50).
	Paths []string `json:"paths"`
	// How is what undosh did: the policy's escalate ("commit", "rerun"
	// or "refuse"), or EscalateDrop (the step failed).
	How string `json:"how"`
	// Rerun is the step that ran it again, for "rerun".
	Rerun int `json:"rerun,omitempty"`
}

// EscalateDrop is an Escalation's How when the step failed, so that what
// it wrote was put back with the rest; the other values are the policy's
// escalate ("commit", "rerun", "refuse").
const EscalateDrop = "drop"

// Reason is a rule of the policy that spoke of a step, as the journal
// keeps it (policy.Reason, with its class and verdict by name).
type Reason struct {
	Rule    string `json:"rule"`
	At      string `json:"at"`   // policy file:line
	Pos     string `json:"pos"`  // line:col in the source
	Text    string `json:"text"` // what it is about
	Class   string `json:"class"`
	Egress  bool   `json:"egress,omitempty"`
	Verdict string `json:"verdict"`
	Message string `json:"message,omitempty"`
	// Live is what the command acts on that lives on this machine, not
	// in a copy of it.
	Live string `json:"live,omitempty"`
}

// Journal is the journal in one state directory.
type Journal struct {
	dir string
}

// Open opens the journal in stateDir, creating the directory.
func Open(stateDir string) (*Journal, error) {
	if stateDir == "" {
		return nil, errors.New("no state directory (set UNDOSH_STATE_DIR)")
	}
	if err := os.MkdirAll(filepath.Join(stateDir, "active"), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return &Journal{dir: stateDir}, nil
}

// Path returns the journal file.
func (j *Journal) Path() string { return filepath.Join(j.dir, "journal.jsonl") }

// lock takes the journal's lock; the kernel drops it if the holder dies.
func (j *Journal) lock() (func(), error) {
	f, err := flock.Lock(filepath.Join(j.dir, "journal.lock"), unix.LOCK_EX)
	if err != nil {
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// Step is a running step.
type Step struct {
	j  *Journal
	ID int
	// roots are the workspaces it may change; nil means any.
	roots []string
	// overlapped is set when another step on a shared workspace was
	// running at Begin.
	overlapped bool
	// shell, when set, names the process the step's shell runs in,
	// when that is not the process that runs the step (a hand-over).
	shell string
	view  bool
}

// Begin numbers a new step that may change any workspace and marks it
// running: every running step overlaps it.
func (j *Journal) Begin() (*Step, error) { return j.BeginIn(nil) }

// BeginIn numbers a new step that changes only the workspaces roots (nil:
// any) and marks it running. It overlaps, both ways, the running steps
// whose workspaces share a path with roots, and only those: a step in
// another repository cannot have changed this one's files.
func (j *Journal) BeginIn(roots []string) (*Step, error) {
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	seq, err := j.readSeq()
	if err != nil {
		return nil, err
	}
	s := &Step{j: j, ID: seq + 1, roots: roots}
	if err := writeDurable(filepath.Join(j.dir, "seq"), []byte(strconv.Itoa(s.ID)+"\n")); err != nil {
		return nil, err
	}
	active := filepath.Join(j.dir, "active")
	ents, err := os.ReadDir(active)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			// Another step's mark being written (.tmp-N-…), or its overlap
			// flag (N.overlapped): never ours to remove.
			continue
		}
		name := filepath.Join(active, e.Name())
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		var r running
		if json.Unmarshal(data, &r) == nil && alive(r.Proc) {
			if sharesRoot(roots, r.Roots) {
				s.overlapped = true
				// Tell the running step that s ran beside it.
				if err := os.WriteFile(overlapFlag(j.dir, id), nil, 0o600); err != nil {
					return nil, fmt.Errorf("journal: %w", err)
				}
			}
			continue
		}
		// Left by an undosh that was killed while its step ran: record
		// the step, so that undoctl back can still go before it.
		if r.Record.ID > 0 {
			r.Record.Outcome = Killed
			r.Record.Exit = -1
			if j.Append(r.Record) != nil {
				continue // keep the mark for the next try
			}
		}
		os.Remove(name)
		os.Remove(overlapFlag(j.dir, id))
	}
	if err := s.Running(Record{ID: s.ID}); err != nil {
		return nil, err
	}
	return s, nil
}

// running is the content of a mark in active/.
type running struct {
	Proc string `json:"proc"`
	// Roots are the workspaces the step may change; null (as in marks
	// from before roots were recorded) means any.
	Roots  []string `json:"roots"`
	Record Record   `json:"record"`
	// Shell names the process the step's shell runs in, when another
	// undosh holds the step for it (a hand-over); View says that shell
	// runs in a view of the machine.
	Shell string `json:"shell,omitempty"`
	View  bool   `json:"view,omitempty"`
}

// overlapFlag names the file whose presence says that another step began
// while step id ran.
func overlapFlag(dir string, id int) string {
	return filepath.Join(dir, "active", strconv.Itoa(id)+".overlapped")
}

// sharesRoot reports whether two sets of workspaces share a path (nil is
// every path).
func sharesRoot(a, b []string) bool {
	if a == nil || b == nil {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			if x == y || pathglob.Within(x, y) || pathglob.Within(y, x) {
				return true
			}
		}
	}
	return false
}

// Running records what is known of the running step s (its checkpoints
// above all), for the journal to keep if undosh is killed before Finish.
func (s *Step) Running(rec Record) error {
	rec.ID = s.ID
	data, err := json.Marshal(running{Proc: procID(os.Getpid()), Roots: s.roots, Record: rec, Shell: s.shell, View: s.view})
	if err != nil {
		return err
	}
	name := filepath.Join(s.j.dir, "active", strconv.Itoa(s.ID))
	if err := atomicfile.Replace(name, data, 0o600); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// HeldFor says that the step's shell runs in process pid, not in this
// one, and whether it runs in a view of the machine: the next
// [Step.Running] records it, for nested invocations to find ([Shells]).
func (s *Step) HeldFor(pid int, view bool) {
	s.shell, s.view = procID(pid), view
}

// Shell is a running step whose shell runs in a process of its own.
type Shell struct {
	Step  int
	Class string
	// Supervisor is the pid of the undosh that holds the step.
	Supervisor int
	View       bool
	proc       string
}

// Is reports whether pid is the process the step's shell runs in (and
// not another that reuses its number).
func (s Shell) Is(pid int) bool { return s.proc == procID(pid) }

// Shells returns the running steps in stateDir whose shell runs in a
// process other than their undosh's, by that process's pid.
func Shells(stateDir string) map[int]Shell {
	ents, err := os.ReadDir(filepath.Join(stateDir, "active"))
	if err != nil || len(ents) == 0 {
		return nil
	}
	var out map[int]Shell
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(stateDir, "active", e.Name()))
		var r running
		if err != nil || json.Unmarshal(data, &r) != nil || r.Shell == "" {
			continue
		}
		pid, err1 := strconv.Atoi(strings.Fields(r.Shell)[0])
		sup, err2 := strconv.Atoi(strings.Fields(r.Proc + " 0")[0])
		if err1 != nil || err2 != nil {
			continue
		}
		if out == nil {
			out = map[int]Shell{}
		}
		out[pid] = Shell{Step: id, Class: r.Record.Class, Supervisor: sup, View: r.View, proc: r.Shell}
	}
	return out
}

func (j *Journal) readSeq() (int, error) {
	data, err := os.ReadFile(filepath.Join(j.dir, "seq"))
	if errors.Is(err, os.ErrNotExist) {
		// A state directory from before numbering, or a lost counter:
		// continue after the last recorded step.
		recs, err := j.Read()
		if err != nil {
			return 0, err
		}
		if len(recs) > 0 {
			return recs[len(recs)-1].ID, nil
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("journal: %s/seq is corrupt (%q): remove it and undosh continues after the last recorded step", j.dir, data)
	}
	return n, nil
}

// Overlapped reports whether another step on a shared workspace ran at
// any time during s: one was running when s began, or one began since. A
// restore journaled since (NewID) counts; a refusal (NewQuietID) does not.
func (s *Step) Overlapped() bool {
	if s.overlapped {
		return true
	}
	unlock, err := s.j.lock()
	if err != nil {
		return true // cannot tell: keep the changes
	}
	defer unlock()
	_, err = os.Lstat(overlapFlag(s.j.dir, s.ID))
	return !errors.Is(err, os.ErrNotExist)
}

// Finish appends rec (with s's id) and marks s done.
func (s *Step) Finish(rec Record) error {
	rec.ID = s.ID
	err := s.j.Append(rec)
	s.Abandon()
	return err
}

// Abandon marks s done without a record.
func (s *Step) Abandon() {
	os.Remove(filepath.Join(s.j.dir, "active", strconv.Itoa(s.ID)))
	os.Remove(overlapFlag(s.j.dir, s.ID))
}

// Append writes one record durably.
func (j *Journal) Append(rec Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	line = append(line, '\n')
	f, err := os.OpenFile(j.Path(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	// One write of one line with O_APPEND: concurrent writers never
	// interleave within a line.
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	return f.Close()
}

// NewQuietID numbers a record of something that changed no file (a
// refusal). Unlike [Journal.NewID], it does not make running steps
// [Step.Overlapped]: a step that runs a refused nested command can still
// roll back.
func (j *Journal) NewQuietID() (int, error) {
	unlock, err := j.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	seq, err := j.readSeq()
	if err != nil {
		return 0, err
	}
	if err := writeDurable(filepath.Join(j.dir, "seq"), []byte(strconv.Itoa(seq+1)+"\n")); err != nil {
		return 0, err
	}
	return seq + 1, nil
}

// NewID numbers a record that is not a running step (a restore). Every
// step running meanwhile counts as overlapped.
func (j *Journal) NewID() (int, error) {
	s, err := j.Begin()
	if err != nil {
		return 0, err
	}
	s.Abandon()
	return s.ID, nil
}

// Read returns every whole record, oldest first.
func (j *Journal) Read() ([]Record, error) {
	data, err := os.ReadFile(j.Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r Record
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.ID > 0 {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// Find returns the record of step id.
func (j *Journal) Find(id int) (Record, error) {
	recs, err := j.Read()
	if err != nil {
		return Record{}, err
	}
	for _, r := range recs {
		if r.ID == id {
			return r, nil
		}
	}
	return Record{}, fmt.Errorf("no step %d in %s (undoctl log lists the steps)", id, j.Path())
}

// RunningIn returns the number of the step that process pid runs, from
// its mark in stateDir's active/, or 0 when it runs none there. The
// process, not an environment variable a child may have saved and
// re-exported (a harness's shell snapshot), says which step is outer.
func RunningIn(stateDir string, pid int) int {
	active := filepath.Join(stateDir, "active")
	ents, err := os.ReadDir(active)
	if err != nil {
		return 0
	}
	want := procID(pid)
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(active, e.Name()))
		var r running
		if err == nil && json.Unmarshal(data, &r) == nil && (r.Proc == want || r.Shell == want) {
			return id
		}
	}
	return 0
}

// procID names a process so that a reused pid is not mistaken for it:
// pid and start time.
func procID(pid int) string {
	return strconv.Itoa(pid) + " " + startTime(pid)
}

// startTime returns field 22 of /proc/pid/stat, or "" when pid is gone.
func startTime(pid int) string {
	st, _ := procStat(pid)
	return st
}

// procStat returns fields 22 (the start time) and 3 (the state) of
// /proc/pid/stat, or "" when pid is gone.
func procStat(pid int) (start, state string) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", ""
	}
	// The command name (field 2) may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", ""
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return "", ""
	}
	return f[19], f[0]
}

// alive reports whether the process named by id (from procID) runs.
func alive(id string) bool {
	pid, st, ok := strings.Cut(id, " ")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil {
		return false
	}
	// A zombie has ended: a supervisor killed after its shell ended is
	// no child of anyone who waits for it, and may stay one a while.
	start, state := procStat(n)
	return st != "" && start == st && state != "Z" && state != "X"
}

func writeDurable(name string, data []byte) error {
	return atomicfile.Write(name, data, 0o600)
}
