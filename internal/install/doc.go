// Package install makes undosh the shell of a machine or an image, puts
// everything back, and checks what is in place (undoctl install,
// uninstall and doctor).
//
// [Install] does, in this order, recording each change first:
//
//   - copies the undosh binary to /usr/lib/undosh/undosh;
//   - with Options.Fast, copies the undosh-fast front end (front/) to
//     /usr/lib/undosh/undosh-fast: the shells then link to it rather than
//     to undosh, and it asks the front end's server whether to exec the
//     real shell or undosh (it finds undosh next to itself). A later run
//     with Options.NoFast points them at undosh again and removes it; a
//     run with neither keeps what is there;
//   - moves the real bash to /usr/lib/undosh/real/bash (the same base
//     name, so /proc/PID/comm of the real shell stays "bash") and makes
//     its name a symlink to undosh. Where the root has dpkg, the path the
//     bash package owns is diverted there with dpkg-divert --local, so a
//     bash upgrade installs the new bash in its place instead of over
//     undosh. Under usrmerge (/bin a link to usr/bin) /bin/bash and
//     /usr/bin/bash are one directory entry: it is moved and diverted once,
//     under the name dpkg knows, and both names lead to undosh;
//   - with Options.Sh, does the same for /bin/sh (on Debian a link to
//     dash: /usr/lib/undosh/real/sh becomes a link to dash, and /bin/sh a
//     link to undosh, which passes sh through to the real sh);
//   - writes /etc/undosh/shells, the file that names the real shells;
//   - with Options.User, sets that user's login shell to /bin/bash in
//     /etc/passwd (adding it to /etc/shells if needed);
//   - unless Options.NoGuards (or a record that says so), puts the guards
//     at the actors in place (internal/guard, docs/guards.md): where the
//     root has dpkg, /usr/lib/undosh/undosh-guard (a link to undosh) and
//     the dpkg configuration fragment whose pre-invoke hook runs it; in
//     the standard library of each system Python, a PEP 668 marker whose
//     first line is fork.GuardTag, so that the fork engine hides it in
//     copies. The marker may replace a distribution's own, which is
//     recorded and put back byte for byte; if a package upgrade replaced
//     the guard in the meantime, the package's marker is kept.
//
// The real shell is moved without a moment where its name is missing: it
// is first linked at its new place, and its old name is then replaced by
// the symlink to undosh in one rename. That is why dpkg-divert is run with
// --no-rename: its --rename would leave /bin/bash missing until the
// symlink is made. Uninstall likewise renames the real shell over the
// symlink.
//
// What stays true: every change is written to the install record
// (/etc/undosh/install.json) before it is made, and the record is marked
// complete only at the end of a run, so [Uninstall] can undo any run, even
// one cut short, newest change first; each undo copes with its change not
// having happened. A link "to undosh" may point at undosh or at the
// front end, since a later run switches it: undoing it accepts either,
// and Uninstall points the shells at undosh before it removes the front
// end, so no shell ever leads to nothing. Every path is taken inside the
// root, following symlinks inside it the way chroot would, so acting on
// an image never touches the files of the machine undoctl runs on. Files
// are replaced by temp file, fsync, rename and fsync of the directory,
// keeping their mode and owner.
//
// Callers acting on this machine's / must be root: [CheckRoot] says so,
// and Install and Uninstall check it again.
//
// [Doctor] changes nothing: it reports the record, the front end, the
// shell paths (undosh directly or through the front end), the
// diversions, the guards (and what defeats them: a hook or marker gone,
// no way to run a machine step here, unattended-upgrades), the real shells undosh will find (never undosh or the front
// end), a login shell, the policy in force, the state directory, whether
// the front end's server serves it, and what undosh does with a
// file-changing and a machine-changing command, with a list of problems
// and their fixes. It never starts the server: the first call through the
// front end does.
package install
