// The constructor below runs before the Go runtime starts (the dynamic
// loader runs a cgo binary's constructors before its entry point), while
// the process has a single thread: unshare(CLONE_NEWNS) refuses a process
// whose threads share their filesystem context, and Landlock restricts
// only the calling thread. When argv[0] is undosh-enforce it never
// returns: it applies the plan (limit.c) and execs the real shell, or
// exits 126. It changes nothing else the caller set up (fds, signal
// dispositions and mask, umask, rlimits, cwd), and every fd it opens is
// close-on-exec.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "enforce.h"

static const char hint_internal[] =
	"undosh-enforce is started by undosh with a plan; it is not meant to be run by hand";

// fail is limit.c's message for what goes wrong before a plan is read.
__attribute__((noreturn)) static void fail(const char *what, int err, const char *where, const char *hint) {
	char buf[PATH_MAX + 512];
	int n = err ? snprintf(buf, sizeof buf, "undosh: error: enforce: %s: %s (%s)\nundosh: hint: %s\n", what, strerror(err), where, hint)
		    : snprintf(buf, sizeof buf, "undosh: error: enforce: %s (%s)\nundosh: hint: %s\n", what, where, hint);
	if (n > 0) {
		if ((size_t)n >= sizeof buf) {
			n = sizeof buf - 1;
		}
		ssize_t w = write(2, buf, n);
		(void)w;
	}
	_exit(126);
}

__attribute__((noreturn)) static void enforce(int argc, char **argv, char **envp) {
	const char *raw = NULL;
	int nenv = 0;
	for (char **e = envp; e && *e; e++) {
		nenv++;
	}
	// The plan is for undosh-enforce alone: the shell gets the caller's
	// environment without it (every copy of it).
	char **env = calloc(nenv + 1, sizeof *env);
	if (env == NULL) {
		fail("out of memory", 0, "environment", hint_internal);
	}
	size_t prefix = strlen(UNDOSH_ENFORCE_VAR "=");
	int n = 0;
	for (int i = 0; i < nenv; i++) {
		if (strncmp(envp[i], UNDOSH_ENFORCE_VAR "=", prefix) == 0) {
			raw = envp[i] + prefix;
			continue;
		}
		env[n++] = envp[i];
	}
	if (raw == NULL) {
		fail("no plan", 0, "$" UNDOSH_ENFORCE_VAR " is not set", hint_internal);
	}
	struct undosh_plan p;
	const char *bad = undosh_plan_parse(raw, &p);
	if (bad != NULL) {
		fail(bad, 0, "$" UNDOSH_ENFORCE_VAR, hint_internal);
	}
	if (argc < 2) {
		fail("no arguments for the shell", 0, "argv", hint_internal);
	}
	undosh_limit_apply(&p, 0);
	execve(p.shell, argv + 1, env);
	char where[PATH_MAX + 64];
	snprintf(where, sizeof where, "%s: %s", p.shell, strerror(errno));
	fail("exec the shell", 0, where, "check UNDOSH_REAL_BASH and /etc/undosh/shells");
}

// view_sync puts paths of a view back as the machine has them: a
// session's view, whose line wrote them and then failed. It enters the
// mount namespace of process argv[1] (in the view), then has sh put back
// each path of argv[2]..., written KIND:PATH: with KIND a, the machine
// has none (remove it, on the view's own filesystem only: a shared path
// bound beneath is the machine's); c, copy it from the machine's root,
// reached through fd 3; m, a directory whose mode, owner and times alone
// changed. Writing through the view's overlay (never into its upper
// directory) keeps the overlay consistent.
__attribute__((noreturn)) static void view_sync(int argc, char **argv) {
	static const char hint[] = "undoctl back N puts the machine back; the session's view keeps what the line wrote";
	if (argc < 3) {
		fail("no process and paths", 0, "argv", hint_internal);
	}
	char ns[64];
	snprintf(ns, sizeof ns, "/proc/%s/ns/mnt", argv[1]);
	int host = open("/", O_PATH | O_DIRECTORY);
	int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
	if (host < 0 || nsfd < 0 || setns(nsfd, CLONE_NEWNS) != 0) {
		fail("enter the view", errno, ns, hint);
	}
	if (dup2(host, 3) != 3 || chdir("/") != 0) {
		fail("reach the machine's root", errno, "/", hint);
	}
	static const char script[] =
		"for a; do k=${a%%:*} p=${a#?:} m=/proc/self/fd/3${a#?:}; case $k in "
		"a) rm -rf --one-file-system -- \"$p\" || exit ;; "
		"c) rm -rf --one-file-system -- \"$p\" && cp -a -- \"$m\" \"$p\" || exit ;; "
		"m) chown --reference=\"$m\" -- \"$p\" && chmod --reference=\"$m\" -- \"$p\" && touch -h -r \"$m\" -- \"$p\" || exit ;; "
		"*) exit 2 ;; esac; done";
	char **av = calloc(argc + 3, sizeof *av);
	if (av == NULL) {
		fail("out of memory", 0, "argv", hint_internal);
	}
	av[0] = "sh";
	av[1] = "-c";
	av[2] = (char *)script;
	av[3] = "undosh-view";
	for (int i = 2; i < argc; i++) {
		av[i + 2] = argv[i];
	}
	char *env[] = {"PATH=/usr/bin:/bin:/usr/sbin:/sbin", NULL};
	execve("/bin/sh", av, env);
	fail("run sh", errno, "/bin/sh", hint);
}

// view_bind binds paths of the machine (argv[2]...) into the view that
// process argv[1] is in, writable, recursively: a session's line whose
// workspace the view did not share yet. The clones are taken in the
// machine's namespace, then moved onto their paths in the view.
__attribute__((noreturn)) static void view_bind(int argc, char **argv) {
	static const char hint[] = "the line's writes to its workspace are caught by the view, and kept or put back as writes beyond it";
	if (argc < 3) {
		fail("no process and paths", 0, "argv", hint_internal);
	}
	int n = argc - 2;
	int *fds = calloc(n, sizeof *fds);
	if (fds == NULL) {
		fail("out of memory", 0, "argv", hint_internal);
	}
	for (int i = 0; i < n; i++) {
		fds[i] = (int)syscall(SYS_open_tree, AT_FDCWD, argv[i + 2], 1 /* OPEN_TREE_CLONE */ | O_CLOEXEC | 0x8000 /* AT_RECURSIVE */);
		if (fds[i] < 0) {
			fail("clone a path of the machine", errno, argv[i + 2], hint);
		}
	}
	char ns[64];
	snprintf(ns, sizeof ns, "/proc/%s/ns/mnt", argv[1]);
	int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0 || setns(nsfd, CLONE_NEWNS) != 0) {
		fail("enter the view", errno, ns, hint);
	}
	for (int i = 0; i < n; i++) {
		if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, argv[i + 2], 0x4 /* MOVE_MOUNT_F_EMPTY_PATH */) != 0) {
			fail("bind a path into the view", errno, argv[i + 2], hint);
		}
	}
	_exit(0);
}

// dispatch runs the constructor's programs, by argv[0]'s base name.
static void dispatch(int argc, char **argv, char **envp) {
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, UNDOSH_ENFORCE_NAME) == 0) {
		enforce(argc, argv, envp);
	}
	if (strcmp(base, UNDOSH_VIEW_SYNC_NAME) == 0) {
		view_sync(argc, argv);
	}
	if (strcmp(base, UNDOSH_VIEW_BIND_NAME) == 0) {
		view_bind(argc, argv);
	}
}

#ifdef __GLIBC__
// glibc passes argc, argv and envp to constructors.
__attribute__((constructor)) static void undosh_enforce_init(int argc, char **argv, char **envp) {
	if (argc < 1 || argv == NULL || argv[0] == NULL) {
		return;
	}
	dispatch(argc, argv, envp);
}
#else
extern char **environ;

// Other C libraries pass constructors nothing: read argv back from the
// kernel, and all of it only when the program's name is undosh-enforce.
__attribute__((constructor)) static void undosh_enforce_init(void) {
	char head[PATH_MAX + 1];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return;
	}
	ssize_t len = read(fd, head, sizeof head - 1);
	if (len <= 0) {
		close(fd);
		return;
	}
	head[len] = '\0';
	const char *base = strrchr(head, '/');
	base = base ? base + 1 : head;
	if (strcmp(base, UNDOSH_ENFORCE_NAME) != 0 && strcmp(base, UNDOSH_VIEW_SYNC_NAME) != 0 && strcmp(base, UNDOSH_VIEW_BIND_NAME) != 0) {
		close(fd);
		return;
	}
	size_t cap = 4096, size = 0;
	char *buf = malloc(cap);
	if (buf == NULL || lseek(fd, 0, SEEK_SET) != 0) {
		fail("read the command line", 0, "/proc/self/cmdline", hint_internal);
	}
	for (;;) {
		if (size == cap) {
			cap *= 2;
			if ((buf = realloc(buf, cap)) == NULL) {
				fail("out of memory", 0, "/proc/self/cmdline", hint_internal);
			}
		}
		ssize_t k = read(fd, buf + size, cap - size);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k <= 0) {
			break;
		}
		size += k;
	}
	close(fd);
	int argc = 0;
	for (size_t i = 0; i < size; i++) {
		argc += buf[i] == '\0';
	}
	char **argv = calloc(argc + 1, sizeof *argv);
	if (argv == NULL) {
		fail("out of memory", 0, "/proc/self/cmdline", hint_internal);
	}
	for (size_t i = 0, a = 0; a < (size_t)argc; a++) {
		argv[a] = buf + i;
		i += strlen(buf + i) + 1;
	}
	dispatch(argc, argv, environ);
}
#endif
