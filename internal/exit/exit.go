// Package exit holds undosh's own exit statuses, in one place. A step's
// own status always passes through unchanged; these are for undosh itself.
package exit

import (
	"errors"

	"github.com/undosh/undosh/internal/classify"
)

// The exit statuses of undosh and undoctl.
const (
	OK      = 0   // success
	Failure = 1   // an operation failed (I/O, a bad command line to a subcommand)
	Usage   = 2   // bad usage, a broken policy or state directory: nothing ran
	Refused = 126 // the policy refused the step
)

// Code maps an error to an exit status.
func Code(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return OK
	case errors.As(err, &ue), classify.IsPolicyError(err):
		return Usage
	}
	return Failure
}

// UsageError is a command line that makes no sense.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }
