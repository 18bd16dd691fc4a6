// Package shell runs one invocation of bash (or sh) the way undosh
// stands in for it: it decides, routes and protects. It reads the
// command line the way bash does ([Main]), decides what will run with
// the parser and the policy, and routes the step ([Route]): a read-only
// step becomes an exec of the real bash, under the read-only limit when
// enforcement is on; a step that changes workspace files runs after a
// checkpoint, in the process the caller started where a supervisor
// undosh can trace it (handover.go, docs/transparency.md), else as a
// child, and is rolled back when it fails; a step that changes the
// machine runs in a copy of it (on the sandbox host, or locally); a step
// that reaches outside is run, refused or checked against the policy's
// condition first. Interactive and pipe-fed sessions protect each line
// the same way (docs/interactive.md).
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
//   - A step is decided by one rule wherever it is decided: [Main], and
//     the front end's server through [Ask] (package front).
//
// cmd/undosh calls [Main] with the [Process], and [SudoStep] for the
// root side of a machine step handed over through sudo. The front end's
// server calls [Ask] for each request, [Pass.TakeCheckpoint] and
// [JournalReadOnly] for the read-only steps it passes, and
// [ReadOnlyWritable] for their limit; [RealShell] and [ConfigFile] find
// the real shell for it as for undosh.
package shell
