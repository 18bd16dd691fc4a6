// Package testsvc starts real database servers for tests and benchmarks:
// [StartPostgres] and [StartRedis] each start a fresh server of their own,
// on a free port of 127.0.0.1 and in a fresh directory, and stop it and
// remove everything they made when the test ends, whatever its outcome.
// A test whose machine lacks the server is skipped, saying what to
// install.
//
// Only tests import it.
//
// What stays true:
//
//   - A server is a detached process (its own session, so that the
//     terminal's signals do not reach it) that this package still reaps;
//     the test's cleanup stops it by its pid, waits until it is gone, up
//     to 20 s, and kills it and its children with SIGKILL after that.
//     Nothing is ever stopped by name.
//   - A server dies with the test binary: it gets SIGKILL should the
//     binary be killed (a timeout, SIGKILL) before its cleanups run.
//   - PostgreSQL refuses to run as root, so when the test runs as root it
//     runs as a temporary user of its own (internal/testuser), removed
//     when the test ends; without root it runs as the test's own user.
//     Redis runs as the test's user.
//   - Each server holds a lease, a locked file under the temporary
//     directory naming the directories and the user it made. Whatever a
//     killed run leaves (its lease unlocked) is removed by the next start
//     of either server.
//
// What callers must do: a package whose tests start PostgreSQL as root
// makes users, so its TestMain should hold
// [github.com/undosh/undosh/internal/testuser.ChangingEtc] around m.Run,
// like any package that changes /etc.
package testsvc
