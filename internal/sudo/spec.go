package sudo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Version is the version of [Spec] and [Result] this package writes and
// reads. The caller and the root side are the same binary (undosh runs
// its own executable through sudo), but an upgrade between the two
// starts must fail plainly.
const Version = 1

// Spec is a machine step handed to the root side: what the fork engine
// needs to run it in a copy, as its caller would (internal/machine.Step).
type Spec struct {
	Version int `json:"version"`
	// Argv runs Path (the real bash) with the caller's argv, in Dir, with
	// Env: as the caller's user, in the copy.
	Argv []string `json:"argv"`
	Path string   `json:"path"`
	Dir  string   `json:"dir"`
	Env  []string `json:"env"`
	// Verify, VerifyDir and Shell are the step's verify.
	Verify    string `json:"verify,omitempty"`
	VerifyDir string `json:"verify_dir,omitempty"`
	Shell     string `json:"shell,omitempty"`
	// Timeout and VerifyTimeout bound the step and verify (0: the
	// engine's default).
	Timeout       time.Duration `json:"timeout,omitempty"`
	VerifyTimeout time.Duration `json:"verify_timeout,omitempty"`
	// Include are the workspaces the step runs in; Protected the paths
	// its commit may not change (self_protect); Hide more paths hidden
	// from the copy and never committed (the caller's state directory).
	Include   []string `json:"include,omitempty"`
	Protected []string `json:"protected,omitempty"`
	Hide      []string `json:"hide,omitempty"`
	// Step is the step's number in the caller's journal.
	Step int `json:"step"`
	// KeepFailed commits the copy whatever the step's status (rollback:
	// never).
	KeepFailed bool `json:"keep_failed,omitempty"`
}

// Result is how a step handed to the root side ended: the fields of
// internal/machine.Outcome that the caller reports and journals.
type Result struct {
	Version int `json:"version"`
	// Error is set when the root side could not run the step (nothing
	// was applied to the machine).
	Error        string `json:"error,omitempty"`
	Status       int    `json:"status"`
	Signal       int    `json:"signal,omitempty"`
	TimedOut     bool   `json:"timed_out,omitempty"`
	KeptFailed   bool   `json:"kept_failed,omitempty"`
	VerifyStatus int    `json:"verify_status"`
	VerifyOutput []byte `json:"verify_output,omitempty"`
	// Commits are what was committed, in root's fork journals.
	Commits   []Commit  `json:"commits,omitempty"`
	Changes   int       `json:"changes"`
	Protected []string  `json:"protected,omitempty"`
	Conflict  *Conflict `json:"conflict,omitempty"`
	// Units are the systemd units the root side restarted; Mapped the
	// processes that still map files the commit replaced.
	Units  []string  `json:"units,omitempty"`
	Mapped []Mapping `json:"mapped,omitempty"`
	// Leftovers are the processes the step left running in its copy,
	// and what became of each: the root side started them again after
	// the commit, or they were stopped with the copy.
	Leftovers []Leftover `json:"leftovers,omitempty"`
	// LeftoversUnread counts those the engine did not read, past its
	// limit: stopped with the copy.
	LeftoversUnread int `json:"leftovers_unread,omitempty"`
}

// Leftover is a process the step left running in its copy
// (internal/machine.Leftover): PID and PPID are the copy's.
type Leftover struct {
	PID  int      `json:"pid"`
	PPID int      `json:"ppid,omitempty"`
	Comm string   `json:"comm,omitempty"`
	Argv []string `json:"argv,omitempty"`
	// State is what became of it: started, failed, child, subshell or
	// stopped.
	State string `json:"state"`
	// NewPID and NewStart name the process started again on the
	// machine; Log receives its output; Error says why it was not.
	NewPID   int    `json:"new_pid,omitempty"`
	NewStart uint64 `json:"new_start,omitempty"`
	Log      string `json:"log,omitempty"`
	Error    string `json:"error,omitempty"`
	// Ended: the process started again was gone soon after.
	Ended bool `json:"ended,omitempty"`
}

// Commit is one filesystem's commit of the step.
type Commit struct {
	Target     string   `json:"target"`
	JournalDir string   `json:"journal_dir"`
	ID         string   `json:"id"`
	Paths      []string `json:"paths,omitempty"`
}

// Conflict lists the paths that changed on the machine while the step
// ran, which kept it from being applied.
type Conflict struct {
	Problems []Problem `json:"problems"`
}

// Problem is one path of a [Conflict].
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Mapping is a process that still maps a file the commit replaced.
type Mapping struct {
	PID   int      `json:"pid"`
	Comm  string   `json:"comm"`
	Files []string `json:"files,omitempty"`
}

// EncodeSpec encodes s, which must pass [DecodeSpec]'s checks.
func EncodeSpec(s Spec) ([]byte, error) {
	s.Version = Version
	if err := s.check(); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// DecodeSpec decodes and checks a step: the version, one JSON object and
// nothing after it, no unknown field, an argv, absolute directories, no
// NUL byte in any string, no negative number.
func DecodeSpec(b []byte) (Spec, error) {
	var s Spec
	if err := decodeStrict(b, &s); err != nil {
		return Spec{}, fmt.Errorf("sudo hand-over: the step: %w", err)
	}
	if err := s.check(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

var errSpec = errors.New("sudo hand-over: malformed step")

func (s *Spec) check() error {
	if s.Version != Version {
		return fmt.Errorf("sudo hand-over: step version %d, want %d (the undosh that handed it over is another version)", s.Version, Version)
	}
	if len(s.Argv) == 0 || s.Timeout < 0 || s.VerifyTimeout < 0 || s.Step < 0 {
		return errSpec
	}
	for _, d := range []string{s.Dir, s.VerifyDir, s.Path, s.Shell} {
		if d != "" && !filepath.IsAbs(d) {
			return errSpec
		}
	}
	for _, l := range [][]string{s.Argv, s.Env, s.Include, s.Protected, s.Hide, {s.Path, s.Dir, s.Verify, s.VerifyDir, s.Shell}} {
		for _, v := range l {
			if strings.IndexByte(v, 0) >= 0 {
				return errSpec
			}
		}
	}
	for _, l := range [][]string{s.Include, s.Protected, s.Hide} {
		for _, p := range l {
			if !filepath.IsAbs(p) {
				return errSpec
			}
		}
	}
	return nil
}

// EncodeResult encodes r.
func EncodeResult(r Result) ([]byte, error) {
	r.Version = Version
	return json.Marshal(r)
}

// DecodeResult decodes an answer.
func DecodeResult(b []byte) (Result, error) {
	var r Result
	if err := decodeStrict(b, &r); err != nil {
		return Result{}, fmt.Errorf("sudo hand-over: the answer: %w", err)
	}
	if r.Version != Version {
		return Result{}, fmt.Errorf("sudo hand-over: answer version %d, want %d", r.Version, Version)
	}
	return r, nil
}

func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimSpace(b[d.InputOffset():])) != 0 {
		return errors.New("more after the object")
	}
	return nil
}
