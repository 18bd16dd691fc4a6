// Package policy maps the facts of one shell step to a decision: the
// protection the step needs, whether it reaches outside the sandbox, and
// whether it may run, with every reason located in the policy file that
// gave it.
//
// # A policy
//
// A [Policy] is a loaded, validated policy: the settings (workspace roots,
// scratch paths, checkpoint excludes and size limit, rollback mode, verify
// command, enforcement and escalation, self-protection, the classes of
// what no rule knows, egress, the sandbox host, cost rates), the command
// [Rule]s, the [PathRule]s, the declared services ([ServiceDecl]) and the
// [Example]s. Nothing in this package changes a Policy once it is loaded,
// and callers must not either, so one Policy may serve any number of
// goroutines. docs/policy.md describes the file.
//
// # Loading
//
//   - [Default] is the embedded default, policy.yaml at the top of the
//     repository, compiled into default_gen.go by `go generate ./policy`
//     (with its line numbers apart, in default_pos_gen.go, so that an edit
//     of policy.yaml makes a small diff); TestGenerated fails while the
//     two are stale. [DefaultSource] is its text. Callers must not modify
//     the Policy it returns.
//   - [Load] parses a user's policy, and [LoadFile] reads one first. Unless
//     the file says `extends: none`, it is merged onto the default: its
//     rules, path rules and examples come before the default's, so they
//     are tried first; its roots, scratch paths, excludes, trusted
//     directories and services are added; each setting it names replaces
//     the default's. With `extends: none` it is merged onto the built-in
//     values of a policy that sets nothing. [Policy].Files lists the files
//     read, the default first.
//   - A file must say `version: 1`, hold one YAML document and use only
//     known keys (an unknown key gets the nearest known one as a hint);
//     two rules or services of one file may not share a name.
//
// A policy that does not load returns a *[LoadError]: the file, the line
// and column (1-based; 0 when the error has no place, such as a file that
// cannot be read), what is wrong and a hint. It reads "file:line:col: msg".
// Its Usage method reports true, so that undosh and undoctl exit 2 with
// nothing run: a broken policy never means weaker protection.
//
// # Classes and verdicts
//
// A [Class] is the protection a step needs, ordered [None] < [Git] <
// [Fork]: None is proven read-only and runs straight through, Git changes
// files in a workspace root or scratch path and gets a checkpoint, Fork
// changes the machine and runs in a copy. A step's class is the highest
// of its parts. A [Verdict] says whether it may run: [Run], [Constrain]
// (only when a condition holds, checked when it runs: [Checks]) or
// [Deny]. Egress, whether the step reaches outside the sandbox, is an axis
// of its own: a step can be Git and egress.
//
// What no rule decides takes the policy's classes: an unknown program
// (UnknownProgram, Git by default), code the parser could not see or a
// syntax error (UnknownCode, Fork), a write whose path is not known
// (UnresolvedWrite, Fork), a write outside the workspace and scratch
// paths (OutsideWrite, Fork). A name qualified by a path (./ls), shadowed
// by a function, alias or PATH, or running code that could not be read
// is an unknown program too; a command run as root that is not read-only
// is Fork.
//
// # Deciding
//
// [Policy.Decide] takes an [Input], the facts of one step that the glue
// (internal/classify) converts from the parser's: its simple commands
// ([Command]: argv, the paths it writes, the servers it names, whether
// its SQL only reads, what a push updates), the constructs that cannot
// be known before they run ([Unknown]) and a syntax error. It takes a [Context]: the working
// directory, the workspace roots, home, and undosh's own files. It
// returns a [Decision]: the class, egress and verdict, the condition and
// [Checks] of a constrained step, the rollback mode (never, when a rule
// that decided a command says so) and the verify command (a deciding
// rule's replaces the policy's), the roots, and the [Reason]s,
// each naming its rule, where the policy says it (file:line), and where
// in the command it applies (line:col).
//
// Each command is matched against the rules in order: the first rule that
// surely matches decides, and a rule that only might match (an argument
// known only at run time) adds its class while matching goes on. The
// policy matches facts: it reads hosts, SQL and what a push updates
// ([Push]) from the parser's facts, never from the arguments; a push
// constraint refuses a command the parser does not read as a push. Each
// written path is matched against the path
// rules, then the workspace roots and scratch paths (Git), else it is an
// outside write. With self-protection on (the default policy's), a step that
// writes undosh's own files or undoes its installation is denied
// ([SelfRule]).
//
// Decide does no I/O but through [Context].Resolve, which it calls only
// when it judges a write, and which the caller memoises. Decide has no
// error to return: what it cannot judge takes the policy's class for the
// unknown.
//
// # Examples
//
// A policy's examples are commands with the class, egress or verdict they
// must get. [Policy.CheckExamples] decides each with the caller's decide
// function (the parser and this package, wired by the caller) and returns
// every [ExampleFailure], located at the example's file:line.
package policy
