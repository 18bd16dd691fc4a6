// Package exit holds undosh's own exit statuses, in one place. A step's
// own status always passes through unchanged; these are for undosh itself.
package exit

import "errors"

// The exit statuses of undosh and undoctl.
const (
	OK      = 0   // success
	Failure = 1   // an operation failed (I/O, a bad command line to a subcommand)
	Usage   = 2   // bad usage, a broken policy or state directory: nothing ran
	Refused = 126 // the policy refused the step
	// NotRun is bash's status for a command it could not start (127):
	// undosh's when the real shell, or a step's program, does not run.
	NotRun = 127
)

// Code maps an error to an exit status: [Usage] for an error that says
// it is one (a [UsageError], a policy that does not load), [Failure] for
// any other.
func Code(err error) int {
	var u usage
	switch {
	case err == nil:
		return OK
	case errors.As(err, &u) && u.Usage():
		return Usage
	}
	return Failure
}

// usage is an error that means nothing ran because of what undosh was
// given: a command line, a policy, a state directory. The packages that
// make such errors mark them with this method, so that exit knows none
// of them (a policy.LoadError, a classify.ExamplesError).
type usage interface {
	error
	Usage() bool
}

// UsageError is a command line that makes no sense.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usage reports true: nothing ran.
func (e *UsageError) Usage() bool { return true }
