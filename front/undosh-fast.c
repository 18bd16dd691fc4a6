//go:build ignore

// The line above keeps the go command from building this file: it sits
// beside the Go package front, the server it asks, and is built by cc.

/*
 * undosh-fast: undosh's fast front end, installed as bash.
 *
 * A Go process start costs more than bash itself on a small machine, so
 * this front end, a few kilobytes of C, asks its resident server (undosh
 * started as "undosh-classifier", the Go package front beside this file)
 * over a Unix socket what to do with the invocation. For a plainly read-only step the answer is the real shell,
 * which it execs with the caller's argv and environment, under the
 * read-only limit when enforcement is on (the answer carries the plan,
 * which limit.c applies here, in this process); for everything else it
 * execs undosh, which decides again and protects the step.
 *
 * It changes nothing a caller set up: no signal disposition or mask, no
 * standard fd (its socket is close-on-exec), no environment entry for the
 * real shell. When there is no server it starts one (detached, for the
 * next invocations) and hands this one to undosh.
 *
 * The wire format, and what each side does on every error, is
 * docs/front.md (version 2, magic "UNDOSHQ2"). The server's argv[0]
 * "undosh-classifier", the UNDOSH_*CLASSIFIER* variables and the
 * run/classify.* files keep the server's old name for installed systems
 * (docs/front.md, section 1).
 *
 * Build: cc -O2 -static -o bin/undosh-fast front/undosh-fast.c (one translation
 * unit: it includes the limits of internal/enforce/limit.c). It finds undosh
 * where /etc/undosh/shells names it (undosh=PATH), else next to itself, else
 * at -DUNDOSH_PATH='"..."' (default /usr/lib/undosh/undosh).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../internal/enforce/limit.c"

extern char **environ;

static char self[PATH_MAX];   /* this front end */
static const char *execfn;    /* the path it was run as (AT_EXECFN) */
static char undosh[PATH_MAX]; /* the full undosh */

#ifndef UNDOSH_PATH
#define UNDOSH_PATH "/usr/lib/undosh/undosh" /* where undoctl install puts it */
#endif
#define UNDOSH_CONFIG "/etc/undosh/shells"

/* configured copies the undosh=PATH line of /etc/undosh/shells (the file
 * that names the real shells, shell/realshell.go) into out: an image that
 * bind-mounts the front end over /usr/bin/bash names undosh there, since
 * nothing sits next to a bind mount. */
static int configured(char *out, size_t size) {
	FILE *f = fopen(UNDOSH_CONFIG, "re");
	if (!f) {
		return -1;
	}
	char line[PATH_MAX + 64];
	int found = -1;
	while (found < 0 && fgets(line, sizeof line, f)) {
		char *p = line + strspn(line, " \t");
		if (strncmp(p, "undosh", 6) != 0) {
			continue;
		}
		p += 6;
		p += strspn(p, " \t");
		if (*p++ != '=') {
			continue;
		}
		p += strspn(p, " \t");
		size_t n = strcspn(p, "\r\n");
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
			n--;
		}
		if (n > 0 && n < size) {
			memcpy(out, p, n);
			out[n] = 0;
			found = 0;
		}
	}
	fclose(f);
	return found;
}

/* find_undosh finds undosh: named in /etc/undosh/shells, else next to
 * this program, else at the build's default (UNDOSH_PATH). */
static void find_undosh(void) {
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = 0;
	}
	if (configured(undosh, sizeof undosh) == 0) {
		return;
	}
	char *slash = n > 0 ? strrchr(self, '/') : NULL;
	if (slash && (size_t)(slash - self) + sizeof "/undosh" <= sizeof undosh) {
		memcpy(undosh, self, slash - self);
		strcpy(undosh + (slash - self), "/undosh");
		if (access(undosh, X_OK) == 0) {
			return;
		}
	}
	strcpy(undosh, UNDOSH_PATH);
}

/* exec_undosh hands the invocation to undosh, naming this front end in
 * UNDOSH_FRONT so that undosh never takes it for the real shell, and the
 * path it was run as in UNDOSH_EXECFN, which decides whether undosh
 * stands in for bash or for sh (undosh removes both entries before the
 * shell sees the environment). */
static void exec_undosh(char **argv) {
	size_t n = 0;
	while (environ[n]) {
		n++;
	}
	char **env = malloc((n + 3) * sizeof *env);
	char *front = malloc(strlen(self) + sizeof "UNDOSH_FRONT=");
	char *fn = malloc(strlen(execfn) + sizeof "UNDOSH_EXECFN=");
	if (env && front && fn) {
		size_t j = 0;
		for (size_t i = 0; i < n; i++) {
			if (strncmp(environ[i], "UNDOSH_FRONT=", 13) != 0 && strncmp(environ[i], "UNDOSH_EXECFN=", 14) != 0) {
				env[j++] = environ[i];
			}
		}
		strcpy(front, "UNDOSH_FRONT=");
		strcat(front, self);
		env[j++] = front;
		strcpy(fn, "UNDOSH_EXECFN=");
		strcat(fn, execfn);
		env[j++] = fn;
		env[j] = NULL;
		execve(undosh, argv, env);
	}
	fprintf(stderr, "undosh: error: cannot run %s: %s\n", undosh, strerror(errno));
	fprintf(stderr, "undosh: hint: name it in " UNDOSH_CONFIG " (a line undosh=PATH), or install it next to %s or at " UNDOSH_PATH "\n", self);
	exit(127);
}

/* state_dir names undosh's state directory as undosh does. */
static int state_dir(char *out, size_t size) {
	const char *v;
	int n;
	if ((v = getenv("UNDOSH_STATE_DIR")) && *v) {
		n = snprintf(out, size, "%s", v);
	} else if (getuid() == 0) {
		n = snprintf(out, size, "/var/lib/undosh");
	} else if ((v = getenv("XDG_STATE_HOME")) && *v) {
		n = snprintf(out, size, "%s/undosh", v);
	} else if ((v = getenv("HOME")) && *v) {
		n = snprintf(out, size, "%s/.local/state/undosh", v);
	} else {
		return -1;
	}
	return n > 0 && (size_t)n < size ? 0 : -1;
}

/* spawn_server starts a detached server for the next invocations
 * (docs/front.md §2). */
static void spawn_server(void) {
	pid_t p = fork();
	if (p < 0) {
		return;
	}
	if (p == 0) {
		setsid();
		if (fork() != 0) {
			_exit(0);
		}
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		for (int fd = 3; fd < 1024; fd++) {
			close(fd);
		}
		for (int s = 1; s < NSIG; s++) {
			signal(s, SIG_DFL);
		}
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (chdir("/") != 0) {
			_exit(1);
		}
		char *av[] = {"undosh-classifier", NULL};
		execve(undosh, av, environ);
		_exit(127);
	}
	while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
	}
}

/* buffer is a growing request. */
struct buffer {
	char *b;
	size_t len, cap;
	int bad;
};

static void put(struct buffer *w, const void *p, size_t n) {
	if (w->bad) {
		return;
	}
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 65536;
		while (cap < w->len + n) {
			cap *= 2;
		}
		if (cap > (8u << 20)) {
			w->bad = 1;
			return;
		}
		char *b = realloc(w->b, cap);
		if (!b) {
			w->bad = 1;
			return;
		}
		w->b = b;
		w->cap = cap;
	}
	memcpy(w->b + w->len, p, n);
	w->len += n;
}

static void put32(struct buffer *w, uint32_t v) {
	unsigned char b[4] = {v, v >> 8, v >> 16, v >> 24};
	put(w, b, 4);
}

static void putstr(struct buffer *w, const char *s) {
	size_t n = strlen(s);
	put32(w, (uint32_t)n);
	put(w, s, n);
}

static int write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k <= 0) {
			return -1;
		}
		p += k;
		n -= k;
	}
	return 0;
}

/* read_some reads what comes within timeout_ms: the number of bytes,
 * 0 at the end, or -1. An fd sent along (SCM_RIGHTS) goes to *fdp, when
 * none came before (more are closed). */
static int read_some(int fd, char *p, size_t n, int timeout_ms, int *fdp) {
	for (;;) {
		struct pollfd pfd = {fd, POLLIN, 0};
		int r = poll(&pfd, 1, timeout_ms);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			return -1;
		}
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = {p, n};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
		ssize_t k = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); k >= 0 && c != NULL; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
				int got;
				memcpy(&got, CMSG_DATA(c), sizeof got);
				if (*fdp < 0) {
					*fdp = got;
				} else {
					close(got);
				}
			}
		}
		return k < 0 ? -1 : (int)k;
	}
}

int main(int argc, char **argv) {
	execfn = (const char *)getauxval(AT_EXECFN);
	if (!execfn) {
		execfn = "";
	}
	find_undosh();
	const char *off = getenv("UNDOSH_NO_CLASSIFIER");
	char dir[PATH_MAX], path[PATH_MAX];
	if ((off && *off) || state_dir(dir, sizeof dir) != 0) {
		exec_undosh(argv);
	}
	struct stat st;
	int pn = snprintf(path, sizeof path, "%s/pending", dir);
	if (pn <= 0 || (size_t)pn >= sizeof path || lstat(path, &st) == 0) {
		exec_undosh(argv); /* a rollback to finish first */
	}
	struct buffer w = {0};
	put(&w, "UNDOSHQ2\0\0\0\0", 12);
	put32(&w, (uint32_t)argc);
	for (int i = 0; i < argc; i++) {
		putstr(&w, argv[i]);
	}
	size_t envc = 0;
	while (environ[envc]) {
		envc++;
	}
	put32(&w, (uint32_t)envc);
	for (size_t i = 0; i < envc; i++) {
		putstr(&w, environ[i]);
	}
	char cwd[PATH_MAX];
	int have_cwd = getcwd(cwd, sizeof cwd) != NULL;
	putstr(&w, have_cwd ? cwd : "");
	putstr(&w, execfn);
	if (w.bad) {
		exec_undosh(argv);
	}
	uint32_t body = (uint32_t)(w.len - 12);
	unsigned char *h = (unsigned char *)w.b + 8;
	h[0] = body, h[1] = body >> 8, h[2] = body >> 16, h[3] = body >> 24;
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int n = snprintf(addr.sun_path, sizeof addr.sun_path, "%s/run/classify.sock", dir);
	if (n <= 0 || (size_t)n >= sizeof addr.sun_path) {
		exec_undosh(argv);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		exec_undosh(argv);
	}
	if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
		if (errno == ENOENT || errno == ECONNREFUSED) {
			spawn_server();
		}
		close(fd);
		exec_undosh(argv);
	}
	/* Sent at once, before anything else (docs/front.md §3): the server, woken by the
	 * connection, finds the request there. The socket is in the user's
	 * own state directory; its owner is checked before its answer is
	 * believed. */
	if (write_all(fd, w.b, w.len) != 0) {
		close(fd);
		exec_undosh(argv);
	}
	struct ucred cred;
	socklen_t clen = sizeof cred;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != getuid()) {
		close(fd);
		exec_undosh(argv);
	}
	/* The answer (docs/front.md §4): a verdict byte, a length, and
	 * the real shell ('E') or the plan of the limit to exec it under ('L',
	 * 'N' with a namespace made under it). The server closes the
	 * connection after it. */
	static char ans[5 + 2 * 65536];
	size_t got = 0;
	int nsfd = -1;
	for (;;) {
		if (got == sizeof ans) {
			close(fd);
			exec_undosh(argv);
		}
		int r = read_some(fd, ans + got, sizeof ans - got, 2000, &nsfd);
		if (r < 0) {
			close(fd);
			exec_undosh(argv);
		}
		if (r == 0) {
			break;
		}
		got += r;
	}
	close(fd);
	free(w.b);
	uint32_t len = got < 5 ? 0 : (unsigned char)ans[1] | (unsigned char)ans[2] << 8 | (unsigned char)ans[3] << 16 | (uint32_t)(unsigned char)ans[4] << 24;
	if (got < 5 || len == 0 || len != got - 5 || (ans[0] != 'E' && ans[0] != 'L' && ans[0] != 'N')) {
		exec_undosh(argv);
	}
	char *text = ans + 5;
	text[len] = 0;
	char *real = text;
	struct undosh_plan plan;
	if (ans[0] != 'E') {
		if (undosh_plan_parse(text, &plan) != NULL || plan.mode == UNDOSH_MODE_CAPTURE) {
			exec_undosh(argv);
		}
		real = plan.shell;
	}
	/* Never exec this front end again as the real shell. */
	struct stat a, b;
	if (stat(real, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		exec_undosh(argv);
	}
	/* 'N': a namespace made under the plan, entered at the working
	 * directory (setns moves to the namespace's root). Else, or if that
	 * fails, the plan applied here; where the kernel offers no limit,
	 * undosh protects the step another way: nothing has changed yet. */
	int entered = 0;
	if (ans[0] == 'N' && nsfd >= 0 && have_cwd) {
		if (setns(nsfd, CLONE_NEWNS) == 0) {
			if (chdir(cwd) != 0) {
				fail("return to the working directory in the read-only namespace", errno, cwd, hint_ns);
			}
			entered = 1;
		}
	}
	if (nsfd >= 0) {
		close(nsfd);
	}
	if (ans[0] != 'E' && !entered && undosh_limit_apply(&plan, 1) < 0) {
		exec_undosh(argv);
	}
	execve(real, argv, environ);
	exec_undosh(argv);
	return 127;
}
