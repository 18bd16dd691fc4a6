package parser

import (
	"fmt"
)

// Pos is a position in the source given to [Parse]: a 1-based line and
// column (in bytes). Facts found inside nested code (a `bash -c` string, an
// eval, a script file) carry the position of the outer command that runs
// it.
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Facts is what [Parse] learned about a piece of shell source.
type Facts struct {
	// Commands lists every simple command that may run, in source order,
	// including those in nested code. A command that runs nested code (eval,
	// bash x.sh) may be listed before or after the code it runs.
	Commands []Command
	// Unknown lists every construct whose effect cannot be known before it
	// runs. Any entry makes the source unknown code.
	Unknown []Finding
	// Err is the first syntax error, or nil. Bash runs the statements
	// before a syntax error, so Commands still holds those.
	Err *ParseError
}

// Finding is one construct the parser could not see through.
type Finding struct {
	Pos    Pos
	Reason string // short, for people: "eval of a non-literal"
	Text   string // the source text concerned
}

// ParseError is a syntax error with its position.
type ParseError struct {
	Name string // the name given in [Options.Name], or ""
	Pos  Pos
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%s:%s: %s", e.Name, e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
}

// Arg is one argument word after quote removal, brace, tilde and known
// parameter expansion.
type Arg struct {
	// Value is the expanded text. For a dynamic argument it is the source
	// text of the word.
	Value string
	// Dynamic is set when the value is only known at run time (an unknown
	// variable, a command substitution, input that xargs reads).
	Dynamic bool
	// Glob is set when the word holds unquoted pattern characters.
	Glob bool
}

// Command is one simple command that may run.
type Command struct {
	Pos  Pos
	Text string // source text of the whole simple command
	// Argv is the command after wrappers are peeled off; Argv[0] is the
	// program as written (possibly path-qualified).
	Argv []Arg
	// Sub is the index in Argv of the subcommand word ("status" in
	// `git -C x status`), or 0 when the program has none.
	Sub int
	// Python is the interpreter that runs a `python -m MODULE` command, or "".
	Python string
	// Wrappers names the wrappers that were peeled off, outermost first
	// ("sudo", "env", "timeout", "xargs", "find -exec", …).
	Wrappers []string
	// Root is set when a wrapper runs the program as another user (sudo,
	// doas, su, runuser).
	Root bool
	// Env names the variables set for this command only: prefix
	// assignments and `env NAME=value`.
	Env []string
	// EnvValues holds the values of those variables, by name; a value
	// known only at run time is a dynamic Arg.
	EnvValues map[string]Arg
	// Cwd is the absolute working directory the command runs in, or ""
	// when cd/pushd could not be followed.
	Cwd string
	// Writes lists the paths the command writes: its output redirections,
	// plus the operands that well-known programs write (rm, cp, tee, sed -i,
	// …).
	Writes []Write
	// WritesKnown is set when the program is one whose writes the parser
	// knows completely, so Writes is all it writes. For other programs a
	// caller should assume they may write under Cwd.
	WritesKnown bool
	// NamedPaths, for a program whose writes are not known, are the
	// absolute paths its words name, which it may write: an operand
	// (/dev/sda), a value after = (of=/dev/sdb, --target=/etc/x) or
	// glued to a short option (-o/boot/x), cleaned. Words known only at
	// run time name none here.
	NamedPaths []string
	// Shadowed is set when the name may not mean the program it spells:
	// PATH was changed before it and the name may find another file (a
	// name with a slash is not looked up; see [Options.LookPath]), `hash`
	// or `enable` was used, or LD_PRELOAD, BASH_ENV and the like are set.
	// A function or alias of the same name is walked as what it runs
	// instead.
	Shadowed bool
	// Function is set for a call of a function defined in the source, in
	// this shell or a subshell of it (or exported to a child bash); the
	// function's body is walked as commands of its own. When the function
	// may not be defined there (it was defined in a branch, say), the
	// name is also recorded as the program it spells.
	Function bool
	// Builtin is set for shell builtins and keywords that run in the shell
	// itself (cd, export, test, …).
	Builtin bool
	// Opaque is set when the command runs code the parser could not read:
	// `bash x.sh` or `source x.sh` of a file it could not open, `python
	// x.py`, `node app.js`. A caller should treat it as an unknown program.
	Opaque bool
	// Missing is set, with Script, when the script the command runs does
	// not exist as the step is decided and no command before it names it
	// among its writes: it runs nothing, unless a program whose writes are
	// not all known makes it first. A caller should treat it as an
	// unknown program when the step runs any program that may write.
	Missing bool
	// Stdin is the static text a here-document or here-string feeds the
	// command, or "".
	Stdin string
	// Network is set when code the command runs (python -c, node -e, perl
	// -e) uses the network.
	Network bool
	// Push is set for a git command that may push: push, send-pack,
	// http-push, subtree push, lfs push, or a subcommand known only at
	// run time. It says what the push updates (push.go).
	Push *Push
	// Hosts are the servers the command names, as a program that
	// reaches servers reads its words (hosts.go): URLs, host names and
	// host:port, host:path for the copying programs (rsync, scp,
	// rclone), and for a database tool its -h and --host, PGHOST and the
	// like, a libpq connection string, a mongosh or cqlsh address. A
	// program that reaches no server may name words that only look like
	// host names (notes.txt): the policy asks about hosts only of the
	// programs it says reach them.
	Hosts []Host
	// Server is set for a database client (database.go): the kind of
	// server it talks to and, when that is sure, the port of this
	// machine's server it reaches.
	Server *Server
	// SQL says what the statements given to a database client do:
	// "read-only", "write" (or unknown), or "" for other programs.
	SQL string
	// Diverts, for dpkg-divert, are the paths whose diversion it adds,
	// removes or renames: every absolute path its words name, cleaned
	// (a word known only at run time as written). It is empty when the
	// command only lists or asks (--list, --truename, …).
	Diverts []string
	// Script is the path of the script whose text was read and walked for
	// this command (`bash x.sh`, `./x.sh`, `source x.sh`, `npm run x`), or "".
	Script string
	// Signals is set for a program that signals other processes: kill
	// (the builtin or a program), pkill, killall, fuser. Which processes
	// it signals is read at run time (internal/procs).
	Signals bool
	// OwnSignal is set for the builtin kill when its every target is the
	// shell itself or one of its own jobs ($$, $!, %N): it reaches
	// nothing outside the step. Another program named kill (/bin/kill)
	// never has it.
	OwnSignal bool
	// Via says how nested code was reached ("bash -c", "eval",
	// "find -exec", "script ./x.sh", …), or "" at the top level.
	Via string
	// Depth is the nesting depth: 0 at the top level.
	Depth int
}

// Name returns the program name as written, or "" when it is dynamic.
func (c *Command) Name() string {
	if len(c.Argv) == 0 || c.Argv[0].Dynamic {
		return ""
	}
	return c.Argv[0].Value
}

// Push is what a git push updates, as its words and its configuration
// say.
type Push struct {
	// Refs are the refspecs the command names, after its repository
	// (every operand, with --repo).
	Refs []Refspec
	// Config are the refspecs the configuration makes it push besides
	// those it names: the remote's remote.<name>.push, +refs/*:refs/*
	// for remote.<name>.mirror, ":" for every matching branch
	// (push.default matching, send-pack or http-push with none named),
	// and one known only at run time (push.default upstream, a
	// configuration the step itself changed first).
	Config []Refspec
	// Force is set when an option forces, deletes, prunes, mirrors or
	// pushes every branch: --force (-f, and a cluster such as -fu),
	// --force-with-lease, --force-if-includes, --delete (-d), --prune,
	// --mirror, --all, --branches.
	Force bool
	// Current is set when the push updates the current branch: it names
	// no refspec, or a refspec's destination is HEAD or @.
	Current bool
}

// Refspec is one refspec of a push, [+]src:dst, read as git reads it.
type Refspec struct {
	// Text is the refspec as written (for a dynamic one, its source).
	Text string
	// Dynamic is set when it is known only at run time (or empty): it
	// may update any branch.
	Dynamic bool
	// Forced is set for a leading +: the update need not fast-forward.
	Forced bool
	// Matching is set for ":" alone: every branch both sides have
	// ("+:" is Matching and Forced).
	Matching bool
	// Delete is set for an empty source, :dst, which deletes dst.
	Delete bool
	// Current is set when the destination is HEAD or @: the current
	// branch.
	Current bool
	// Dst is the destination, completed as git completes it (heads/main
	// and refs/heads/main are main; HEAD and @ stay); it may be a
	// pattern (refs/heads/* is *). For a refspec without a colon it is
	// the source.
	Dst string
}

// Host is one server a command names.
type Host struct {
	// Value is the word that names it, as written: a URL, host[:port],
	// user@host:path, a connection string's host.
	Value string
	// Dynamic is set when the server is known only at run time: it may
	// be any.
	Dynamic bool
	// Loopback is set when the server is this machine: localhost, a
	// loopback address, a socket path, a file: or unix: URL.
	Loopback bool
}

// Server is the server a database client talks to.
type Server struct {
	// Kind is the kind of server: postgres, mysql, redis, mongodb,
	// cassandra, clickhouse, sqlite or duckdb.
	Kind string
	// Port is the TCP port of this machine's server the client reaches,
	// as its words and environment say (a port option, PGPORT or
	// MYSQL_TCP_PORT, or its kind's default). It is 0 when they cannot
	// say for sure: a word known only at run time, a host that is not
	// this machine's by TCP (another machine, a socket, mysql's
	// localhost), a connection string or URL, a service or option file,
	// a wrapper that may change the environment, or a kind whose port
	// the parser does not read.
	Port int
}

// Write is one path a command writes.
type Write struct {
	// Path is the absolute, cleaned path when Resolved; otherwise the
	// path as written.
	Path     string
	Resolved bool
	// Tree is set when everything under Path may be written (a directory
	// target such as `tar -C dir`, or a glob).
	Tree bool
	// Redirect is set for shell redirections (> >> >| &> <> and exec's).
	Redirect bool
	// Append is set for >> and &>>.
	Append bool
	// Stream is set when the command only opens the file and writes
	// into it (tee, dd of=, sort -o; a redirection always does), as
	// opposed to replacing, removing, moving or changing the file
	// itself (mv, rm, ln -f, chmod, sed -i), which a device such as
	// /dev/null does not shrug off.
	Stream bool
}
