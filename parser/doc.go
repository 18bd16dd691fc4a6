// Package parser turns shell source into facts about what the source runs,
// reads and writes, without running any of it.
//
// [Parse] walks every simple command of a bash (or POSIX sh) program: through
// pipelines, lists, subshells, blocks, if/while/for/case, command and process
// substitutions, here-documents, functions defined and then called, and nested
// code such as `bash -c STRING`, `eval 'literal'`, `find -exec sh -c` and
// `xargs sh -c`. Known wrappers (sudo, env, timeout, xargs, find -exec, …) are
// peeled off by a table that knows each option's arity, so the facts name the
// program that really runs. Redirection targets and the paths that well-known
// programs write are resolved against the working directory, followed through
// cd, pushd and popd where their arguments are literal, and then through
// symbolic links as the kernel resolves them: those the source makes, and
// with [Options.Readlink] those that exist. A `for NAME in
// WORDS` loop whose words are all known (literal or quoted text, brace
// expansions, variables the parser knows; not globs, which depend on the
// file system) is walked once per item with NAME bound to it, so the facts
// name each path the loop writes.
//
// The facts also say what a command reaches: the servers its words,
// options and environment name ([Command.Hosts]: URLs, host words,
// host:path for the copying programs, a database tool's -h and PGHOST),
// each marked as this machine or another, and whether the statements a
// database client runs only read ([Command.SQL]); for a git push, the
// refspecs it names and its configuration adds, and whether it forces
// or updates the current branch ([Command.Push]). A caller matches
// these facts and need not read the arguments again. What the parser
// knows of each database tool is one row of one table (database.go).
//
// The walk follows what each shell can see. A subshell ( ), a pipeline
// or a substitution starts with a copy of the variables, functions and
// aliases of its shell, and what it changes stays there. A child process
// (`bash -c`, a script, `xargs sh -c`) sees only the exported variables
// and functions (export -f), and no aliases. Trap code is walked when the
// shell that set it ends, seeing a variable's value only when nothing
// after the trap assigns it. An if whose condition tests text the parser
// knows (`[ -n "${X+x}" ]`) walks the branch that runs; otherwise each
// branch may or may not run, and what they change is unknown after the if.
//
// Changing PATH shadows the names without a slash that may then find
// another program. With [Options.LookPath] and a PATH known to the
// parser, each name is looked up under both PATHs and is shadowed only
// when the two differ; a PATH re-set to the value it has changes nothing.
//
// Whatever the parser cannot see before the code runs is reported as unknown
// code ([Facts.Unknown]): a command name that is not literal, eval of a
// non-literal, ${x@P}, text that bash would evaluate as an array subscript
// containing a command substitution, and the constructs where bash and
// mvdan.cc/sh are known to disagree. A parse error is reported with its
// position in [Facts.Err]; the statements before it are still walked,
// because bash runs them.
//
// The package is pure: it does no exec and no filesystem access, reads no
// environment and keeps no globals. A caller that wants scripts classified
// (`bash x.sh`, `source x.sh`, `./x.sh`, `npm run build`) supplies
// [Options.ReadFile]; the environment that tilde and $VAR resolve against is
// [Options.Env]; the lookup of names in PATH is [Options.LookPath].
package parser
