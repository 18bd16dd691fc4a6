// Package front is the server of undosh's fast path: undosh-fast
// (undosh-fast.c, beside this package), a small C front end installed as
// bash, asks it over a Unix socket how to run each invocation, and it
// answers "exec the real shell", "exec it under the read-only limit"
// (with, for root, a mount namespace made under it) or "exec undosh".
// docs/front.md is the specification of what the two say to each other;
// this package is the server's side.
//
// What stays true:
//   - Each request is decided by the rule undosh itself decides by
//     ([shell.Ask]): the server execs the real shell exactly when undosh
//     would, and hands everything else to undosh, which decides again and
//     protects it. What the server cannot see (a script on the caller's
//     stdin, a checkpoint that would walk a workspace) goes to undosh.
//   - Identity comes from the socket (SO_PEERCRED), never from the
//     request: another user, or a caller that sees other files than the
//     server, gets undosh.
//   - Every error, of the request or the server's, answers undosh: the
//     fast path is only ever slower, never less protected.
//   - A read-only step the server passes has a checkpoint of its
//     workspace first, and is journaled once the front end has its
//     answer; every step passed is journaled before the server exits.
//
// cmd/undosh calls [Serve] when it is started as state.ServerName
// (argv[0] "undosh-classifier"); one server serves a state directory, and
// ends by itself once idle.
package front
