// Package layers holds the module's import table: the level of each of
// undosh's packages, which levels each may import, and why the arrows
// that levels alone would allow are forbidden. Its test checks the whole
// module against it; a package new to the module fails it until it is
// given a level.
//
// The levels, lowest first:
//
//   - the base imports none of undosh's packages: the one copy of a rule
//     every level keeps (undosh's exit statuses, a path inside a
//     directory), so that no leaf writes its own;
//   - leaves import the base only: small helpers (atomic writes, locks,
//     process tables, where things are), and the parser and the terminal
//     layer, which stand alone;
//   - engines import leaves and the base: the policy, the checkpoint store, the
//     local fork engine, the host link's protocol, the file watcher and
//     the QEMU driver, each testable and reusable without the others;
//   - the middle joins engines into what the commands do (classifying a
//     step, the journal, installing, the sandbox host, the guest agent,
//     the sessions' bash and hooks);
//     it may import leaves, engines and the rest of the middle;
//   - the shell: one invocation (decide, route, protect), and each line
//     of its sessions;
//   - servers answer many invocations, each decided by the shell's
//     rule: the front end's server (front);
//   - test support is imported by tests only;
//   - the top is the commands (cmd/, bench/) and the documentation's
//     link test (docs/), which nothing imports.
package layers
