// Package guard is undosh's check at the actors that change the machine:
// dpkg, pip and npm refuse to run outside a machine step, so that a
// `dpkg -i` buried in ./install.sh, which no parser could see, is caught
// where it acts, in the tradition of apt-btrfs-snapshot and snapper.
//
// A machine step runs in a copy of the machine: one made by the local
// fork engine, or a sandbox VM its host told it is a copy (see
// internal/where). [Check] returns nil there and a *[RefusedError]
// anywhere else, naming the command as best it can from the process's
// ancestors (for dpkg: dpkg's own command line, or the apt that ran it)
// so that the hint can say how to run it as a machine step.
//
// undoctl install puts the guards in place (internal/install):
//
//   - dpkg: a configuration fragment, /etc/dpkg/dpkg.cfg.d/undosh-guard,
//     whose pre-invoke hook runs [Name] (/usr/lib/undosh/undosh-guard, a
//     link to undosh, which dispatches that argv[0] to [Main]) before
//     every unpack, configure, install, remove, purge and triggers run,
//     with apt or without: a hook that fails aborts dpkg before it
//     changes anything;
//   - pip: a PEP 668 marker (EXTERNALLY-MANAGED) in each system Python's
//     standard library, carrying this package's message; the fork engine
//     hides it in every copy, so pip installs into system paths only
//     there;
//   - npm: nothing. npm runs no hook of its own for a global install
//     (docs/guards.md says why); `undoctl guard npm -- CMD…` is the check
//     for an operator's own wrapper.
//
// What stays true: Check fails closed. A program it does not know, or a
// copy it cannot prove, is refused; only pid 1 of the process's own pid
// namespace and a root-owned file can say "copy". The guards stop
// accidents, not a root user set on going around them: root can remove
// the hooks (undoctl install --no-guards, undoctl uninstall).
package guard
