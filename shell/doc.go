// Package shell is undosh's glue: it reads a shell's command line the way
// bash does, classifies what will run with the parser and the policy, and
// protects it. A read-only step becomes an exec of the real bash; a step
// that changes workspace files runs after a checkpoint, in the process the
// caller started where a supervisor undosh can trace it (handover.go,
// docs/transparency.md), else as a child, and is rolled back when it fails; a step that reaches outside is run, refused
// or checked against the policy's condition first.
//
// What stays true:
//   - The real shell gets the caller's argv, environment, fds, signal
//     dispositions, umask, rlimits and cwd unchanged (see
//     internal/procstate). The only addition is UNDOSH_STEP in the
//     environment of a protected step.
//   - undosh writes nothing to stdout. On stderr it writes only a refusal,
//     an error before anything ran, or one notice line after a rollback.
//   - A step is never run with less protection than its class asks for
//     without a line on stderr that says so.
//
// cmd/undosh calls [Main] with the process's facts.
package shell
