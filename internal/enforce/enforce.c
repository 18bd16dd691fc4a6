// The constructor below runs before the Go runtime starts (the dynamic
// loader runs a cgo binary's constructors before its entry point), while
// the process has a single thread: unshare(CLONE_NEWNS) refuses a process
// whose threads share their filesystem context, and Landlock restricts
// only the calling thread. When argv[0] is undosh-enforce it never
// returns: it applies the plan and execs the real shell, or exits 126. It
// changes nothing else the caller set up (fds, signal dispositions and
// mask, umask, rlimits, cwd), and every fd it opens is close-on-exec.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "enforce.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x1000U
#endif

// Landlock's ABI, spelled out so that the age of the C headers does not
// matter: the kernel's ABI version decides what is handled.
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_WRITE_FILE (1ULL << 1)
#define LL_REMOVE_DIR (1ULL << 4)
#define LL_REMOVE_FILE (1ULL << 5)
#define LL_MAKE_CHAR (1ULL << 6)
#define LL_MAKE_DIR (1ULL << 7)
#define LL_MAKE_REG (1ULL << 8)
#define LL_MAKE_SOCK (1ULL << 9)
#define LL_MAKE_FIFO (1ULL << 10)
#define LL_MAKE_BLOCK (1ULL << 11)
#define LL_MAKE_SYM (1ULL << 12)
#define LL_REFER (1ULL << 13)    // ABI 2
#define LL_TRUNCATE (1ULL << 14) // ABI 3
#define LL_IOCTL_DEV (1ULL << 15) // ABI 5

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

static const char hint_internal[] =
	"undosh-enforce is started by undosh with a plan; it is not meant to be run by hand";
static const char hint_ns[] =
	"the step did not run; run it in a copy (class fork), or turn enforcement off (enforce: false in the policy)";
static const char hint_landlock[] =
	"the step did not run; Landlock needs Linux 5.13 with CONFIG_SECURITY_LANDLOCK and landlock in lsm=; "
	"or run undosh as root, which uses a mount namespace instead";
static const char hint_exec[] = "check UNDOSH_REAL_BASH and /etc/undosh/shells";

// fail prints `undosh: error: enforce: WHAT[: ERRNO] (WHERE)` and a hint,
// and exits 126 without running anything.
__attribute__((noreturn)) static void fail(const char *what, int err, const char *where, const char *hint) {
	char buf[2 * PATH_MAX + 1024];
	int n;
	if (err != 0) {
		n = snprintf(buf, sizeof buf, "undosh: error: enforce: %s: %s (%s)\nundosh: hint: %s\n",
			what, strerror(err), where, hint);
	} else {
		n = snprintf(buf, sizeof buf, "undosh: error: enforce: %s (%s)\nundosh: hint: %s\n",
			what, where, hint);
	}
	if (n < 0) {
		_exit(126);
	}
	if ((size_t)n >= sizeof buf) {
		n = sizeof buf - 1;
		buf[n - 1] = '\n';
	}
	for (int off = 0; off < n;) {
		ssize_t w = write(2, buf + off, n - off);
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0) {
			break;
		}
		off += w;
	}
	_exit(126);
}

__attribute__((noreturn)) static void oom(void) { fail("out of memory", ENOMEM, "plan", hint_ns); }

struct plan {
	int mode;
	const char *class;
	char *shell;
	char **writable; // absolute; canonical once resolve_writable ran
	int nwritable;
};

// parse_plan reads `1 MODE CLASS LEN:SHELL [LEN:PATH]...`, the encoding of
// Plan.encode in enforce.go. It returns NULL or what is wrong.
static const char *parse_plan(const char *s, struct plan *p) {
	if (strncmp(s, "1 ", 2) != 0) {
		return "unknown plan version";
	}
	s += 2;
	static const struct {
		const char *word;
		int mode;
	} modes[] = {{"auto ", UNDOSH_MODE_AUTO}, {"ns ", UNDOSH_MODE_NS}, {"landlock ", UNDOSH_MODE_LANDLOCK}};
	p->mode = -1;
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		size_t n = strlen(modes[i].word);
		if (strncmp(s, modes[i].word, n) == 0) {
			p->mode = modes[i].mode;
			s += n;
			break;
		}
	}
	if (p->mode < 0) {
		return "unknown mechanism";
	}
	if (strncmp(s, "none ", 5) == 0) {
		p->class = "none";
		s += 5;
	} else if (strncmp(s, "git ", 4) == 0) {
		p->class = "git";
		s += 4;
	} else {
		return "unknown class";
	}
	int cap = 0;
	for (int i = 0;; i++) {
		if (*s < '0' || *s > '9') {
			return "malformed path";
		}
		char *end;
		unsigned long n = strtoul(s, &end, 10);
		if (*end != ':' || n == 0 || n >= PATH_MAX) {
			return "malformed path";
		}
		s = end + 1;
		if (strnlen(s, n) < n) {
			return "truncated path";
		}
		char *str = strndup(s, n);
		if (str == NULL) {
			oom();
		}
		if (str[0] != '/') {
			return "relative path";
		}
		s += n;
		if (i == 0) {
			p->shell = str;
		} else {
			if (p->nwritable == cap) {
				cap = cap ? 2 * cap : 8;
				p->writable = realloc(p->writable, cap * sizeof *p->writable);
				if (p->writable == NULL) {
					oom();
				}
			}
			p->writable[p->nwritable++] = str;
		}
		if (*s == '\0') {
			return NULL;
		}
		if (*s != ' ') {
			return "malformed path";
		}
		s++;
	}
}

// beneath reports whether path is root or lies beneath it.
static int beneath(const char *path, const char *root) {
	size_t n = strlen(root);
	if (n == 1 && root[0] == '/') {
		return 1;
	}
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

// resolve_writable makes each writable path canonical (mounts and
// mountinfo speak of real paths) and drops those that do not exist:
// nothing can be created at a path whose parent is read-only.
static void resolve_writable(struct plan *p) {
	int n = 0;
	for (int i = 0; i < p->nwritable; i++) {
		char *real = realpath(p->writable[i], NULL);
		if (real == NULL) {
			if (errno == ENOENT || errno == ENOTDIR) {
				continue;
			}
			fail("resolve a writable path", errno, p->writable[i], hint_ns);
		}
		if (strcmp(real, "/") == 0) {
			fail("a writable path resolves to /, which would leave everything writable", 0, p->writable[i], hint_internal);
		}
		p->writable[n++] = real;
	}
	p->nwritable = n;
}

static int has_sys_admin(void) {
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capget, &h, d) != 0) {
		return 0;
	}
	return (d[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

static int landlock_abi(void) {
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	return v > 0 ? (int)v : 0;
}

int undosh_enforce_probe(int mode, int *abi) {
	*abi = landlock_abi();
	int admin = has_sys_admin();
	switch (mode) {
	case UNDOSH_MODE_NS:
		return admin ? UNDOSH_MODE_NS : -1;
	case UNDOSH_MODE_LANDLOCK:
		return *abi > 0 ? UNDOSH_MODE_LANDLOCK : -1;
	case UNDOSH_MODE_AUTO:
		return admin ? UNDOSH_MODE_NS : *abi > 0 ? UNDOSH_MODE_LANDLOCK : -1;
	}
	return -1;
}

// A standard stream the step may reopen by path (>/dev/stdout, tee
// /dev/stderr): a terminal or a file the caller opened for writing.
struct stream {
	int fd;
	int isreg;
	char path[PATH_MAX];
};

static int writable_stream(int fd, struct stream *s) {
	int fl = fcntl(fd, F_GETFL);
	struct stat st;
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY || fstat(fd, &st) != 0) {
		return 0;
	}
	if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
		return 0; // pipes and sockets are not paths
	}
	s->fd = fd;
	s->isreg = S_ISREG(st.st_mode);
	char link[32];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, s->path, sizeof s->path - 1);
	if (n <= 0 || s->path[0] != '/') {
		return 0;
	}
	s->path[n] = '\0';
	struct stat pst;
	// A deleted or moved file is not reachable by its path any more.
	if (stat(s->path, &pst) != 0 || pst.st_dev != st.st_dev || pst.st_ino != st.st_ino) {
		return 0;
	}
	return 1;
}

// read_all reads a file of unknown size (mountinfo) into a NUL-terminated
// buffer, and its length into *size.
static char *read_all(const char *path, size_t *size) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fail("read the mount table", errno, path, hint_ns);
	}
	size_t cap = 16384, len = 0;
	char *buf = malloc(cap);
	if (buf == NULL) {
		oom();
	}
	for (;;) {
		if (len + 4096 + 1 > cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (buf == NULL) {
				oom();
			}
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			fail("read the mount table", errno, path, hint_ns);
		}
		if (n == 0) {
			break;
		}
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	*size = len;
	return buf;
}

// unescape undoes mountinfo's octal escapes (\040 for a space) in place.
static void unescape(char *s) {
	char *w = s;
	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

// has_opt reports whether the comma-separated opts hold opt.
static int has_opt(const char *opts, const char *opt) {
	size_t n = strlen(opt);
	for (const char *s = opts;; s++) {
		if (strncmp(s, opt, n) == 0 && (s[n] == ',' || s[n] == '\0')) {
			return 1;
		}
		s = strchr(s, ',');
		if (s == NULL) {
			return 0;
		}
	}
}

// stays_writable lists the mounts the mount-namespace mode leaves as they
// are: the writable binds, /proc (but not /proc/sys), the terminals, and
// the IPC scratch of /dev/shm and /dev/mqueue.
static int stays_writable(const struct plan *p, const char *mp) {
	for (int i = 0; i < p->nwritable; i++) {
		if (beneath(mp, p->writable[i])) {
			return 1;
		}
	}
	if (beneath(mp, "/proc")) {
		return !beneath(mp, "/proc/sys");
	}
	return beneath(mp, "/dev/pts") || beneath(mp, "/dev/shm") || beneath(mp, "/dev/mqueue");
}

// mount_id returns the id of the mount that path reaches, or 0 when the
// kernel cannot say.
static uint64_t mount_id(const char *path) {
	struct statx stx;
	if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx) != 0 || !(stx.stx_mask & STATX_MNT_ID)) {
		return 0;
	}
	return stx.stx_mnt_id;
}

// remount_read_only makes every mount not in stays_writable read-only,
// keeping its nosuid, nodev, noexec and nosymfollow (dropping one is EPERM
// where the flag is locked) and, by the kernel's rule for a remount that
// names none, its atime flags.
static void remount_read_only(const struct plan *p) {
	size_t size;
	char *table = read_all("/proc/self/mountinfo", &size);
	char *save = NULL;
	for (char *line = strtok_r(table, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		// id parent major:minor root mountpoint options ...
		char *f[6];
		int n = 0;
		char *fs = NULL;
		for (char *t = strtok_r(line, " ", &fs); t != NULL && n < 6; t = strtok_r(NULL, " ", &fs)) {
			f[n++] = t;
		}
		if (n < 6) {
			fail("parse the mount table", 0, "/proc/self/mountinfo", hint_ns);
		}
		char *mp = f[4], *opts = f[5];
		unescape(mp);
		if (has_opt(opts, "ro") || stays_writable(p, mp)) {
			continue;
		}
		// A mount hidden under another one (a second devpts on /dev/pts)
		// cannot be reached by its path; the one on top is in the table.
		uint64_t id = strtoull(f[0], NULL, 10);
		uint64_t reached = mount_id(mp);
		if (reached != 0 && reached != id) {
			continue;
		}
		unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
		if (has_opt(opts, "nosuid")) {
			flags |= MS_NOSUID;
		}
		if (has_opt(opts, "nodev")) {
			flags |= MS_NODEV;
		}
		if (has_opt(opts, "noexec")) {
			flags |= MS_NOEXEC;
		}
		if (has_opt(opts, "nosymfollow")) {
			flags |= MS_NOSYMFOLLOW;
		}
		if (mount(NULL, mp, NULL, flags, NULL) != 0) {
			// The mount point went away since the table was read.
			if (errno == ENOENT && reached == 0) {
				continue;
			}
			fail("make a mount read-only", errno, mp, hint_ns);
		}
	}
	free(table);
}

// apply_ns gives the process a mount namespace of its own in which only
// the writable paths can be written. It returns -1 (before changing
// anything) only when unshare is refused and fallback is allowed.
static int apply_ns(struct plan *p, int fallback) {
	char *cwd = getcwd(NULL, 0);
	struct stream streams[3];
	int nstreams = 0;
	for (int fd = 0; fd < 3; fd++) {
		if (writable_stream(fd, &streams[nstreams]) && streams[nstreams].isreg) {
			nstreams++;
		}
	}
	if (unshare(CLONE_NEWNS) != 0) {
		if (errno == EPERM && fallback) {
			return -1;
		}
		fail("make a mount namespace", errno, "unshare", hint_ns);
	}
	// Nothing below may propagate back to the host (a systemd host
	// shares /); private, not slave, so that a mount made on the host
	// during the step does not appear writable in it either.
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		fail("make / private", errno, "/", hint_ns);
	}
	for (int i = 0; i < p->nwritable; i++) {
		// Recursive, so that mounts beneath a workspace stay visible.
		if (mount(p->writable[i], p->writable[i], NULL, MS_BIND | MS_REC, NULL) != 0) {
			fail("bind a writable path", errno, p->writable[i], hint_ns);
		}
	}
	// A file the caller redirected a standard stream to stays writable by
	// path too (>/dev/stdout): a bind of the file onto itself.
	int extra = 0;
	for (int i = 0; i < nstreams; i++) {
		int inside = 0;
		for (int j = 0; j < p->nwritable; j++) {
			inside |= beneath(streams[i].path, p->writable[j]);
		}
		if (inside) {
			continue;
		}
		if (mount(streams[i].path, streams[i].path, NULL, MS_BIND, NULL) != 0) {
			fail("bind a standard stream's file", errno, streams[i].path, hint_ns);
		}
		char *copy = strdup(streams[i].path);
		if (copy == NULL) {
			oom();
		}
		p->writable = realloc(p->writable, (p->nwritable + 1) * sizeof *p->writable);
		if (p->writable == NULL) {
			oom();
		}
		p->writable[p->nwritable++] = copy;
		extra++;
	}
	// /proc stays writable (a process's own files), but not its sysctls.
	if (mount("/proc/sys", "/proc/sys", NULL, MS_BIND | MS_REC, NULL) != 0 && errno != ENOENT) {
		fail("bind /proc/sys", errno, "/proc/sys", hint_ns);
	}
	remount_read_only(p);
	p->nwritable -= extra;
	// The cwd still points into the mount it had before the binds: go
	// through the new tree again, or relative writes in the workspace
	// would hit the read-only mount beneath the bind.
	if (cwd != NULL && chdir(cwd) != 0) {
		fail("return to the working directory", errno, cwd, hint_ns);
	}
	free(cwd);
	return 0;
}

// add_rule grants rights beneath path (only the rights that apply to a
// file when path is not a directory). A missing path is skipped.
static void add_rule(int ruleset, const char *path, uint64_t dir_rights, uint64_t file_rights) {
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR || errno == ENXIO) {
			return;
		}
		fail("open a path for a Landlock rule", errno, path, hint_landlock);
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		fail("stat a path for a Landlock rule", errno, path, hint_landlock);
	}
	struct ll_path_beneath_attr attr = {
		.allowed_access = S_ISDIR(st.st_mode) ? dir_rights : file_rights,
		.parent_fd = fd,
	};
	if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &attr, 0) != 0) {
		fail("add a Landlock rule", errno, path, hint_landlock);
	}
	close(fd);
}

// apply_landlock denies every write-type access the kernel's Landlock ABI
// knows, except beneath the writable paths, on the terminals and a few
// harmless devices, and on the standard streams the caller opened for
// writing.
static void apply_landlock(const struct plan *p, int abi) {
	uint64_t handled = LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_CHAR | LL_MAKE_DIR |
		LL_MAKE_REG | LL_MAKE_SOCK | LL_MAKE_FIFO | LL_MAKE_BLOCK | LL_MAKE_SYM;
	if (abi >= 2) {
		handled |= LL_REFER;
	}
	if (abi >= 3) {
		handled |= LL_TRUNCATE;
	}
	if (abi >= 5) {
		handled |= LL_IOCTL_DEV;
	}
	uint64_t file = handled & (LL_WRITE_FILE | LL_TRUNCATE | LL_IOCTL_DEV);
	// Before opening anything, which could take the number of a closed
	// standard fd.
	struct stream streams[3];
	int nstreams = 0;
	for (int fd = 0; fd < 3; fd++) {
		nstreams += writable_stream(fd, &streams[nstreams]);
	}
	struct ll_ruleset_attr attr = {.handled_access_fs = handled};
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
	if (rs < 0) {
		fail("create a Landlock ruleset", errno, "landlock_create_ruleset", hint_landlock);
	}
	for (int i = 0; i < p->nwritable; i++) {
		add_rule(rs, p->writable[i], handled, file);
	}
	static const char *const devices[] = {
		"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts",
	};
	for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
		add_rule(rs, devices[i], file, file);
	}
	add_rule(rs, "/dev/shm", handled, file); // POSIX shm and semaphores: scratch
	for (int i = 0; i < nstreams; i++) {
		add_rule(rs, streams[i].path, file, file);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		fail("set no_new_privs", errno, "prctl", hint_landlock);
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
		fail("enforce the Landlock ruleset", errno, "landlock_restrict_self", hint_landlock);
	}
	close(rs);
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
		oom();
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
	struct plan p;
	memset(&p, 0, sizeof p);
	const char *bad = parse_plan(raw, &p);
	if (bad != NULL) {
		fail(bad, 0, "$" UNDOSH_ENFORCE_VAR, hint_internal);
	}
	if (argc < 2) {
		fail("no arguments for the shell", 0, "argv", hint_internal);
	}
	resolve_writable(&p);
	int abi = landlock_abi();
	int mode = p.mode;
	if (mode == UNDOSH_MODE_AUTO) {
		mode = has_sys_admin() ? UNDOSH_MODE_NS : UNDOSH_MODE_LANDLOCK;
	}
	if (mode == UNDOSH_MODE_NS && apply_ns(&p, p.mode == UNDOSH_MODE_AUTO && abi > 0) != 0) {
		mode = UNDOSH_MODE_LANDLOCK;
	}
	if (mode == UNDOSH_MODE_LANDLOCK) {
		if (abi == 0) {
			fail(p.mode == UNDOSH_MODE_AUTO ? "no CAP_SYS_ADMIN for a mount namespace, and no Landlock" : "no Landlock",
				0, "landlock_create_ruleset", hint_landlock);
		}
		apply_landlock(&p, abi);
	}
	execve(p.shell, argv + 1, env);
	fail("exec the shell", errno, p.shell, hint_exec);
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
	close(fd);
	if (len <= 0) {
		return;
	}
	head[len] = '\0';
	const char *base = strrchr(head, '/');
	base = base ? base + 1 : head;
	if (strcmp(base, UNDOSH_ENFORCE_NAME) != 0) {
		return;
	}
	size_t size;
	char *buf = read_all("/proc/self/cmdline", &size);
	int argc = 0;
	for (size_t i = 0; i < size; i++) {
		argc += buf[i] == '\0';
	}
	char **argv = calloc(argc + 1, sizeof *argv);
	if (argv == NULL) {
		oom();
	}
	for (size_t i = 0, a = 0; a < (size_t)argc; a++) {
		argv[a] = buf + i;
		i += strlen(buf + i) + 1;
	}
	enforce(argc, argv, environ);
}
#endif
