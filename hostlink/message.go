package hostlink

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Role is what a VM is, as the host tells it.
type Role string

// Roles.
const (
	RolePrimary  Role = "primary"  // the sandbox the agent addresses
	RoleCopy     Role = "copy"     // a fork running a step, network cut
	RoleRestored Role = "restored" // the primary, put back to a checkpoint
)

// State is the state of an operation. See docs/hostlink.md for the
// machine.
type State string

// States. Queued and Running are the only ones that are not final.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateKept      State = "kept"      // fork: step and verify passed, copy promoted
	StateDiscarded State = "discarded" // fork: step or verify failed, copy deleted
	StateDone      State = "done"      // checkpoint or restore finished
	StateFailed    State = "failed"    // the host could not carry it out; see Error
	StateCancelled State = "cancelled" // cancelled by the guest
	StateAbandoned State = "abandoned" // the host stopped or restarted while it ran
)

// Final reports whether s is a final state: nothing about the operation
// changes after it.
func (s State) Final() bool { return s != StateQueued && s != StateRunning && s != "" }

// Kind is the kind of an operation.
type Kind string

// Kinds.
const (
	KindForkRun    Kind = "fork_run"
	KindCheckpoint Kind = "checkpoint"
	KindRestore    Kind = "restore"
)

// Hello opens every connection.
type Hello struct {
	Version    int    `json:"version"`
	Agent      string `json:"agent,omitempty"`
	Generation uint64 `json:"generation"` // last generation the guest was told
	Token      string `json:"token"`      // the current generation's token
}

// Welcome answers a [Hello] the host accepted.
type Welcome struct {
	Version    int       `json:"version"`
	Sandbox    string    `json:"sandbox"` // the host's name for the caller, from the listener
	Generation uint64    `json:"generation"`
	Role       Role      `json:"role"`
	HostTime   time.Time `json:"host_time"`
	MaxFrame   int       `json:"max_frame"`
	MaxRequest int       `json:"max_request"`
}

// Command is a shell step or a verify command. Exactly one of Shell and
// Argv is set. Path, with Argv, is the program to run when it is not
// Argv[0] (the real bash, under the caller's argv[0]). A backend that
// cannot set argv[0] itself runs Launcher (undosh, in the sandbox) with
// the arguments [ExecAs], Path and Argv, which execs Path under Argv[0]
// and changes nothing else; without a Launcher it runs Path with
// Argv[1:].
type Command struct {
	Shell    string   `json:"shell,omitempty"`
	Argv     []string `json:"argv,omitempty"`
	Path     string   `json:"path,omitempty"`
	Launcher string   `json:"launcher,omitempty"`
	Cwd      string   `json:"cwd"`
	Env      []string `json:"env,omitempty"` // KEY=VALUE, the whole environment
}

// ExecAs is the first argument that makes undosh, run as a Command's
// Launcher, exec the program named next under the argv that follows:
// undosh ExecAs PATH ARGV0 ARGS... No bash accepts it as an option.
const ExecAs = "--undosh-exec-as"

// Network says what the copy may reach while the step runs.
type Network struct {
	Mode  string   `json:"mode"`            // "off" or "allow"
	Allow []string `json:"allow,omitempty"` // host:port, with Mode "allow"
}

// Timeouts are relative budgets in milliseconds, enforced by the host;
// zero means the host's default.
type Timeouts struct {
	CaptureMS int64 `json:"capture_ms,omitempty"`
	StepMS    int64 `json:"step_ms,omitempty"`
	VerifyMS  int64 `json:"verify_ms,omitempty"`
	PromoteMS int64 `json:"promote_ms,omitempty"`
}

// ForkRun asks the host to fork the sandbox, run Step and then Verify in
// the copy, and keep the copy only if both exit 0; with KeepFailed (the
// policy's rollback: never), keep it whatever Step's status, and run no
// Verify.
type ForkRun struct {
	Key        string   `json:"key"`
	Step       Command  `json:"step"`
	Verify     *Command `json:"verify,omitempty"`
	Network    Network  `json:"network"`
	Timeouts   Timeouts `json:"timeouts"`
	KeepFailed bool     `json:"keep_failed,omitempty"`
}

// Retention says how long the host keeps a checkpoint.
type Retention struct {
	TTLSeconds int64 `json:"ttl_s,omitempty"`     // 0: the host's default
	KeepLast   int   `json:"keep_last,omitempty"` // keep at most this many of the sandbox's; 0: the host's default
}

// Checkpoint asks the host to snapshot the sandbox after a step that
// passed.
type Checkpoint struct {
	Key       string    `json:"key"`
	After     string    `json:"after,omitempty"` // the op id of the kept step
	Label     string    `json:"label,omitempty"`
	Retention Retention `json:"retention"`
	TimeoutMS int64     `json:"timeout_ms,omitempty"`
}

// ListCheckpoints asks for the sandbox's checkpoints.
type ListCheckpoints struct{}

// Restore asks the host to put the sandbox back to a checkpoint. The VM
// that asks is replaced.
type Restore struct {
	Key        string `json:"key"`
	Checkpoint string `json:"checkpoint"`
	TimeoutMS  int64  `json:"timeout_ms,omitempty"`
}

// StatusRequest asks for an operation's status, waiting up to WaitMS for
// it to reach a final state.
type StatusRequest struct {
	Op     string `json:"op"`
	WaitMS int64  `json:"wait_ms,omitempty"`
}

// OutputRequest asks for an operation's output from byte offsets, waiting
// up to WaitMS for bytes past them.
type OutputRequest struct {
	Op     string `json:"op"`
	Stdout int64  `json:"stdout"`
	Stderr int64  `json:"stderr"`
	Max    int    `json:"max,omitempty"`
	WaitMS int64  `json:"wait_ms,omitempty"`
}

// CancelRequest asks the host to cancel an operation.
type CancelRequest struct {
	Op string `json:"op"`
}

// Accepted acknowledges an operation the host has stored durably.
type Accepted struct {
	Op       string `json:"op"`
	Replayed bool   `json:"replayed,omitempty"` // the key was seen before; this is that operation
	State    State  `json:"state"`
}

// Result is what an operation produced.
type Result struct {
	StepExit   *int   `json:"step_exit,omitempty"`
	VerifyExit *int   `json:"verify_exit,omitempty"`
	TimedOut   string `json:"timed_out,omitempty"` // "step" or "verify"
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Op is the status of an operation.
type Op struct {
	ID         string    `json:"op"`
	Kind       Kind      `json:"kind"`
	Key        string    `json:"key"`
	State      State     `json:"state"`
	Generation uint64    `json:"generation"` // the sandbox's generation when it was accepted
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	Result     Result    `json:"result"`
	Error      *Error    `json:"error,omitempty"`
	Stdout     int64     `json:"stdout_size"`
	Stderr     int64     `json:"stderr_size"`
	Dropped    int64     `json:"dropped,omitempty"` // output bytes over the host's cap, not kept
}

// Chunk carries output bytes from the offsets asked for.
type Chunk struct {
	Op           string `json:"op"`
	StdoutOffset int64  `json:"stdout_offset"`
	Stdout       []byte `json:"stdout,omitempty"`
	StderrOffset int64  `json:"stderr_offset"`
	Stderr       []byte `json:"stderr,omitempty"`
	State        State  `json:"state"`
	End          bool   `json:"end"` // final state and every byte delivered
}

// CheckpointInfo describes one checkpoint.
type CheckpointInfo struct {
	ID         string    `json:"id"`
	Parent     string    `json:"parent,omitempty"`
	Label      string    `json:"label,omitempty"`
	Op         string    `json:"op,omitempty"`
	Generation uint64    `json:"generation"`
	Created    time.Time `json:"created"`
	Size       int64     `json:"size"`
	Expires    time.Time `json:"expires,omitzero"`
}

// Checkpoints answers [ListCheckpoints], oldest first.
type Checkpoints struct {
	Items []CheckpointInfo `json:"items"`
}

// WhoYouAre is what the host tells a VM after every resume, restore or
// promotion, on the control channel. It carries the new generation's token.
type WhoYouAre struct {
	Sandbox    string    `json:"sandbox"`
	Generation uint64    `json:"generation"`
	Parent     uint64    `json:"parent_generation"`
	Role       Role      `json:"role"`
	Op         string    `json:"op,omitempty"`
	Checkpoint string    `json:"checkpoint,omitempty"`
	Network    string    `json:"network"` // "on", "off" or "allow"
	HostTime   time.Time `json:"host_time"`
	Token      string    `json:"token"`
	Entropy    []byte    `json:"entropy"` // 32 to 64 bytes to mix into the guest's pool
}

// Noted acknowledges a [WhoYouAre].
type Noted struct {
	Generation uint64 `json:"generation"`
}

// Code is an error code. Codes are stable; messages are for people.
type Code string

// Error codes.
const (
	CodeBadFrame           Code = "bad_frame"           // undecodable, oversized or truncated frame
	CodeUnsupportedVersion Code = "unsupported_version" // frame or hello version not spoken
	CodeProtocol           Code = "protocol"            // a frame out of order or a body that does not parse
	CodeUnauthorized       Code = "unauthorized"        // no token, or not a token of this sandbox
	CodeStaleGeneration    Code = "stale_generation"    // a token of an earlier generation
	CodeInvalid            Code = "invalid"             // a well-formed request the host refuses
	CodeNotFound           Code = "not_found"           // no such operation or checkpoint for this sandbox
	CodeKeyConflict        Code = "key_conflict"        // the key was used with a different request
	CodeBusy               Code = "busy"                // another operation of this sandbox is running
	CodeTimeout            Code = "timeout"             // a host budget ran out
	CodeHostRestarted      Code = "host_restarted"      // the host stopped while the operation ran
	CodeBackend            Code = "backend"             // the backend failed
	CodeUnavailable        Code = "unavailable"         // the host is shutting down or overloaded
	CodeInternal           Code = "internal"
)

// Error is an ERROR frame, or the error of a failed operation.
type Error struct {
	Code         Code   `json:"code"`
	Message      string `json:"message,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Generation   uint64 `json:"generation,omitempty"` // with stale_generation: the current one
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "hostlink: " + string(e.Code)
	}
	return "hostlink: " + string(e.Code) + ": " + e.Message
}

// Is makes errors.Is(err, &Error{Code: c}) match on the code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func writeMsg(w io.Writer, t Type, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %v: %w", t, err)
	}
	return Encode(w, Frame{Type: t, Body: body})
}

// readMsg reads one frame and decodes it into v, which must be of the
// frame type want. An ERROR frame comes back as *Error.
func readMsg(r io.Reader, limit int, want Type, v any) error {
	f, err := Decode(r, limit)
	if err != nil {
		return err
	}
	if f.Type == TypeError && want != TypeError {
		e := new(Error)
		if err := json.Unmarshal(f.Body, e); err != nil {
			return fmt.Errorf("decode %v: %w", f.Type, err)
		}
		return e
	}
	if f.Type != want {
		return &Error{Code: CodeProtocol, Message: fmt.Sprintf("got %v, want %v", f.Type, want)}
	}
	if err := json.Unmarshal(f.Body, v); err != nil {
		return &Error{Code: CodeProtocol, Message: fmt.Sprintf("decode %v: %v", f.Type, err)}
	}
	return nil
}
