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
#include <unistd.h>

#include "enforce.h"

static const char hint_internal[] =
	"undosh-enforce is started by undosh with a plan; it is not meant to be run by hand";

// fail is limit.c's message for what goes wrong before a plan is read.
__attribute__((noreturn)) static void fail(const char *what, const char *where, const char *hint) {
	char buf[PATH_MAX + 512];
	int n = snprintf(buf, sizeof buf, "undosh: error: enforce: %s (%s)\nundosh: hint: %s\n", what, where, hint);
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
		fail("out of memory", "environment", hint_internal);
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
		fail("no plan", "$" UNDOSH_ENFORCE_VAR " is not set", hint_internal);
	}
	struct undosh_plan p;
	const char *bad = undosh_plan_parse(raw, &p);
	if (bad != NULL) {
		fail(bad, "$" UNDOSH_ENFORCE_VAR, hint_internal);
	}
	if (argc < 2) {
		fail("no arguments for the shell", "argv", hint_internal);
	}
	undosh_limit_apply(&p, 0);
	execve(p.shell, argv + 1, env);
	char where[PATH_MAX + 64];
	snprintf(where, sizeof where, "%s: %s", p.shell, strerror(errno));
	fail("exec the shell", where, "check UNDOSH_REAL_BASH and /etc/undosh/shells");
}

#ifdef __GLIBC__
// glibc passes argc, argv and envp to constructors.
__attribute__((constructor)) static void undosh_enforce_init(int argc, char **argv, char **envp) {
	if (argc < 1 || argv == NULL || argv[0] == NULL) {
		return;
	}
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, UNDOSH_ENFORCE_NAME) == 0) {
		enforce(argc, argv, envp);
	}
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
	if (strcmp(base, UNDOSH_ENFORCE_NAME) != 0) {
		close(fd);
		return;
	}
	size_t cap = 4096, size = 0;
	char *buf = malloc(cap);
	if (buf == NULL || lseek(fd, 0, SEEK_SET) != 0) {
		fail("read the command line", "/proc/self/cmdline", hint_internal);
	}
	for (;;) {
		if (size == cap) {
			cap *= 2;
			if ((buf = realloc(buf, cap)) == NULL) {
				fail("out of memory", "/proc/self/cmdline", hint_internal);
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
		fail("out of memory", "/proc/self/cmdline", hint_internal);
	}
	for (size_t i = 0, a = 0; a < (size_t)argc; a++) {
		argv[a] = buf + i;
		i += strlen(buf + i) + 1;
	}
	enforce(argc, argv, environ);
}
#endif
