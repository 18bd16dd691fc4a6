package hostlink

import (
	"context"
	"io"
)

// Backend carries out operations for a [Server]. The daemon implements it
// (the local fork engine, or a provider's commands). Every method must
// return soon after ctx is done; the server uses ctx to enforce the
// operation's total budget, cancel and shutdown.
type Backend interface {
	// ForkAndRun forks the sandbox, cuts or narrows the copy's network as
	// job.Request.Network says, runs the step and then the verify command
	// in the copy within their budgets, streaming their output to
	// job.Stdout and job.Stderr, and promotes the copy if both exit 0, or
	// deletes it. A step or verify that runs out of its budget is a result
	// (Result.TimedOut), not an error. An error means the host could not
	// carry the operation out.
	ForkAndRun(ctx context.Context, job ForkJob) (ForkOutcome, error)
	// Checkpoint snapshots the sandbox and applies the retention.
	Checkpoint(ctx context.Context, job CheckpointJob) (CheckpointInfo, error)
	// List returns the sandbox's checkpoints, oldest first.
	List(ctx context.Context, sandbox string) ([]CheckpointInfo, error)
	// Restore puts the sandbox back to a checkpoint. An unknown checkpoint
	// is an error that wraps [ErrNotFound].
	Restore(ctx context.Context, job RestoreJob) error
}

// ForkJob is one fork-and-run for a [Backend]. Request has the host's
// default budgets filled in.
type ForkJob struct {
	Sandbox string
	Op      string
	Request ForkRun
	Stdout  io.Writer
	Stderr  io.Writer
}

// ForkOutcome is what [Backend.ForkAndRun] did.
type ForkOutcome struct {
	Result Result
	Kept   bool // the copy was promoted
}

// CheckpointJob is one checkpoint for a [Backend].
type CheckpointJob struct {
	Sandbox string
	Op      string
	Request Checkpoint
}

// RestoreJob is one restore for a [Backend].
type RestoreJob struct {
	Sandbox string
	Op      string
	Request Restore
}
