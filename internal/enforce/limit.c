// The limits of limit.h. Three mechanisms (docs/enforce.md):
//
//   ns        a mount namespace of the step's own, every mount read-only
//             but the writable paths (root with CAP_SYS_ADMIN);
//   landlock  a Landlock ruleset that denies writes outside them (any
//             user; no_new_privs);
//   capture   a mount namespace whose root is a view undosh built: an
//             overlay per filesystem, with its upper layer on a tmpfs
//             undosh reads after the step, and the writable paths bound
//             from the machine. Writes outside them land in the upper
//             layers, where undosh sees them.
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
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "limit.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x1000U
#endif
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x2000
#endif

// The new mount API, spelled out so that the age of the C headers does
// not matter (Linux 5.12 for mount_setattr).
#define UNDOSH_OPEN_TREE_CLONE 1
#define UNDOSH_AT_RECURSIVE 0x8000
#define UNDOSH_MOVE_MOUNT_F_EMPTY_PATH 0x4
#define UNDOSH_MOUNT_ATTR_RDONLY 0x1

struct undosh_mount_attr {
	uint64_t attr_set;
	uint64_t attr_clr;
	uint64_t propagation;
	uint64_t userns_fd;
};

// Landlock's ABI, likewise: the kernel's ABI version decides what is
// handled.
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
#define LL_REFER (1ULL << 13)     // ABI 2
#define LL_TRUNCATE (1ULL << 14)  // ABI 3
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

static void *grow(void *p, size_t n) {
	p = realloc(p, n);
	if (p == NULL) {
		oom();
	}
	return p;
}

static char *join(const char *root, const char *path) {
	size_t a = strlen(root), b = strlen(path);
	if (strcmp(path, "/") == 0) {
		b = 0;
	}
	if (a + b >= PATH_MAX) {
		fail("a path of the view is too long", ENAMETOOLONG, path, hint_internal);
	}
	char *s = grow(NULL, a + b + 1);
	memcpy(s, root, a);
	memcpy(s + a, path, b);
	s[a + b] = '\0';
	return s;
}

// ---------------------------------------------------------------- plans

static const char *parse_word(const char **s, const char *const *words, int n, int *out) {
	for (int i = 0; i < n; i++) {
		size_t len = strlen(words[i]);
		if (strncmp(*s, words[i], len) == 0 && (*s)[len] == ' ') {
			*s += len + 1;
			*out = i;
			return NULL;
		}
	}
	return "unknown word";
}

const char *undosh_plan_parse(const char *s, struct undosh_plan *p) {
	memset(p, 0, sizeof *p);
	if (strncmp(s, "2 ", 2) != 0) {
		return "unknown plan version";
	}
	s += 2;
	static const char *const modes[] = {"auto", "ns", "landlock", "capture"};
	static const char *const classes[] = {"none", "git"};
	int i;
	if (parse_word(&s, modes, 4, &i) != NULL) {
		return "unknown mechanism";
	}
	p->mode = i; // the order of modes[] is the enum's
	// The class is the last word before the fields.
	for (i = 0; i < 2; i++) {
		size_t len = strlen(classes[i]);
		if (strncmp(s, classes[i], len) == 0 && (s[len] == ' ' || s[len] == '\0')) {
			p->class = classes[i];
			s += len;
			break;
		}
	}
	if (p->class == NULL) {
		return "unknown class";
	}
	int capw = 0, capa = 0;
	char want = 0; // the tag that must come next (the u and k of an overlay)
	while (*s != '\0') {
		if (s[0] != ' ' || s[1] == '\0') {
			return "malformed field";
		}
		char tag = s[1];
		s += 2;
		if (*s < '0' || *s > '9') {
			return "malformed field";
		}
		char *end;
		errno = 0;
		unsigned long n = strtoul(s, &end, 10);
		if (errno != 0 || *end != ':' || n == 0 || n >= PATH_MAX) {
			return "malformed field";
		}
		s = end + 1;
		if (strnlen(s, n) < n) {
			return "truncated field";
		}
		char *str = strndup(s, n);
		if (str == NULL) {
			oom();
		}
		s += n;
		const char *bad = NULL;
		if (str[0] != '/') {
			bad = "relative path";
		} else if (want != 0 && tag != want) {
			bad = "an overlay needs its upper and work directories";
		}
		if (bad != NULL) {
			free(str);
			return bad;
		}
		want = 0;
		switch (tag) {
		case 's':
			if (p->shell != NULL) {
				free(str);
				return "two shells";
			}
			p->shell = str;
			continue;
		case 'w':
			if (p->nwritable == capw) {
				capw = capw ? 2 * capw : 8;
				p->writable = grow(p->writable, capw * sizeof *p->writable);
			}
			p->writable[p->nwritable++] = str;
			if (p->mode != UNDOSH_MODE_CAPTURE) {
				continue;
			}
			// In a view, a writable path is bound where it comes.
			if ((str = strdup(str)) == NULL) {
				oom();
			}
			break;
		case 'x':
			if (p->mode != UNDOSH_MODE_NS && p->mode != UNDOSH_MODE_AUTO) {
				free(str);
				return "a held path needs the ns mechanism";
			}
			p->held = grow(p->held, (p->nheld + 1) * sizeof *p->held);
			p->held[p->nheld++] = str;
			continue;
		case 'r':
			if (p->mode != UNDOSH_MODE_CAPTURE || p->root != NULL || p->nactions > 0 || strcmp(str, "/") == 0) {
				free(str);
				return "misplaced view root";
			}
			p->root = str;
			continue;
		case 'o':
		case 'O':
			want = 'u';
			break;
		case 'u':
			if (p->nactions == 0 || (p->actions[p->nactions - 1].tag != 'o' && p->actions[p->nactions - 1].tag != 'O')) {
				free(str);
				return "misplaced upper directory";
			}
			want = 'k';
			break;
		case 'k':
			if (p->nactions == 0 || p->actions[p->nactions - 1].tag != 'u') {
				free(str);
				return "misplaced work directory";
			}
			break;
		case 'b':
		case 'B':
		case 'R':
		case 'P':
		case 'E':
			break;
		default:
			free(str);
			return "unknown field";
		}
		if (p->mode != UNDOSH_MODE_CAPTURE || p->root == NULL) {
			free(str);
			return p->root == NULL && p->mode == UNDOSH_MODE_CAPTURE ? "a view's field before its root" : "a view's field in a plan without one";
		}
		if (p->nactions == capa) {
			capa = capa ? 2 * capa : 16;
			p->actions = grow(p->actions, capa * sizeof *p->actions);
		}
		p->actions[p->nactions++] = (struct undosh_field){tag, str};
	}
	if (want != 0) {
		return "an overlay needs its upper and work directories";
	}
	if (p->shell == NULL) {
		return "no shell";
	}
	if (p->mode == UNDOSH_MODE_CAPTURE && (p->root == NULL || p->nactions == 0 || (p->actions[0].tag != 'o' && p->actions[0].tag != 'O') || strcmp(p->actions[0].s, "/") != 0)) {
		return "a view must start with the overlay of /";
	}
	return NULL;
}

void undosh_plan_free(struct undosh_plan *p) {
	free(p->shell);
	free(p->root);
	for (int i = 0; i < p->nwritable; i++) {
		free(p->writable[i]);
	}
	free(p->writable);
	for (int i = 0; i < p->nheld; i++) {
		free(p->held[i]);
	}
	free(p->held);
	for (int i = 0; i < p->nactions; i++) {
		free(p->actions[i].s);
	}
	free(p->actions);
	memset(p, 0, sizeof *p);
}

// ---------------------------------------------------------------- probes

// beneath reports whether path is root or lies beneath it.
static int beneath(const char *path, const char *root) {
	size_t n = strlen(root);
	if (n == 1 && root[0] == '/') {
		return 1;
	}
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
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

// unshare_allowed reports whether this process may make a mount
// namespace: CAP_SYS_ADMIN says so, unless a seccomp filter (a
// container's profile) refuses unshare, which only trying tells; a child
// tries, where a filter is installed at all.
static int unshare_allowed(void) {
	if (!has_sys_admin()) {
		return 0;
	}
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return 1;
	}
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) {
		return 1;
	}
	buf[n] = '\0';
	char *sc = strstr(buf, "\nSeccomp:");
	if (sc == NULL || strtol(sc + strlen("\nSeccomp:"), NULL, 10) == 0) {
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		return 1;
	}
	if (pid == 0) {
		_exit(unshare(CLONE_NEWNS) == 0 ? 0 : 1);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int undosh_limit_probe(int mode, int *abi) {
	*abi = landlock_abi();
	int admin = unshare_allowed();
	switch (mode) {
	case UNDOSH_MODE_NS:
	case UNDOSH_MODE_CAPTURE:
		return admin ? mode : -1;
	case UNDOSH_MODE_LANDLOCK:
		return *abi > 0 ? UNDOSH_MODE_LANDLOCK : -1;
	case UNDOSH_MODE_AUTO:
		return admin ? UNDOSH_MODE_NS : *abi > 0 ? UNDOSH_MODE_LANDLOCK : -1;
	}
	return -1;
}

// resolve_writable makes each writable path canonical (mounts and
// mountinfo speak of real paths) and drops those that do not exist:
// nothing can be created at a path whose parent is read-only.
static void resolve_writable(struct undosh_plan *p) {
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

// ---------------------------------------------------------------- ns

// read_all reads a file of unknown size (mountinfo) into a NUL-terminated
// buffer.
static char *read_all(const char *path) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fail("read the mount table", errno, path, hint_ns);
	}
	size_t cap = 16384, len = 0;
	char *buf = grow(NULL, cap);
	for (;;) {
		if (len + 4096 + 1 > cap) {
			cap *= 2;
			buf = grow(buf, cap);
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

// mount_id returns the id of the mount that path reaches, or 0 when the
// kernel cannot say.
static uint64_t mount_id(const char *path) {
	struct statx stx;
	if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx) != 0 || !(stx.stx_mask & STATX_MNT_ID)) {
		return 0;
	}
	return stx.stx_mnt_id;
}

// is_mount_root reports whether path is the root of a mount.
static int is_mount_root(const char *path) {
	struct statx stx;
	if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW, 0, &stx) != 0) {
		return 0;
	}
	return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

// remount_flags are the flags a read-only remount of the mount at path
// must keep: dropping a locked one is EPERM, and by the kernel's rule
// for a remount that names no atime flag, the atime flags stay.
static unsigned long remount_flags(const char *path) {
	struct statvfs sv;
	unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
	if (statvfs(path, &sv) == 0) {
		if (sv.f_flag & ST_NOSUID) {
			flags |= MS_NOSUID;
		}
		if (sv.f_flag & ST_NODEV) {
			flags |= MS_NODEV;
		}
		if (sv.f_flag & ST_NOEXEC) {
			flags |= MS_NOEXEC;
		}
#ifdef ST_NOSYMFOLLOW
		if (sv.f_flag & ST_NOSYMFOLLOW) {
			flags |= MS_NOSYMFOLLOW;
		}
#endif
	}
	return flags;
}

// setattr_ro makes the mount at path (and with recursive, every mount
// beneath it) read-only, or writable with clear. It returns -1 with
// errno ENOSYS where the kernel has no mount_setattr.
static int setattr_ro(const char *path, int recursive, int clear) {
	struct undosh_mount_attr a = {0};
	if (clear) {
		a.attr_clr = UNDOSH_MOUNT_ATTR_RDONLY;
	} else {
		a.attr_set = UNDOSH_MOUNT_ATTR_RDONLY;
	}
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? UNDOSH_AT_RECURSIVE : 0, &a, sizeof a);
}

// ro_tree makes every mount at or beneath path read-only, by
// mount_setattr where the kernel has it, and otherwise one remount per
// mount of the table (skip says which to leave alone; NULL: none).
static void ro_tree(const char *path, const struct undosh_plan *skip_plan,
	int (*skip)(const struct undosh_plan *, const char *)) {
	if (skip == NULL && setattr_ro(path, 1, 0) == 0) {
		return;
	}
	if (skip == NULL && errno != ENOSYS) {
		fail("make mounts read-only", errno, path, hint_ns);
	}
	char *table = read_all("/proc/self/mountinfo");
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
		if (!beneath(mp, path) || (strncmp(opts, "ro", 2) == 0 && (opts[2] == ',' || opts[2] == '\0'))) {
			continue;
		}
		if (skip != NULL && skip(skip_plan, mp)) {
			continue;
		}
		// A mount hidden under another one (a second devpts on /dev/pts)
		// cannot be reached by its path; the one on top is in the table.
		uint64_t id = strtoull(f[0], NULL, 10);
		uint64_t reached = mount_id(mp);
		if (reached != 0 && reached != id) {
			continue;
		}
		if (mount(NULL, mp, NULL, remount_flags(mp), NULL) != 0) {
			// The mount point went away since the table was read.
			if (errno == ENOENT && reached == 0) {
				continue;
			}
			fail("make a mount read-only", errno, mp, hint_ns);
		}
	}
	free(table);
}

// stays_writable lists the mounts the legacy ns mode leaves as they are:
// the writable binds, /proc (but not /proc/sys), the terminals, and the
// IPC scratch of /dev/shm and /dev/mqueue.
static int stays_writable(const struct undosh_plan *p, const char *mp) {
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

// The mounts that stay writable under the ns limit (if they are mounts):
// a process's own files in /proc, the terminals, and the IPC scratch of
// /dev/shm and /dev/mqueue.
static const char *const writable_mounts[] = {"/proc", "/dev/pts", "/dev/shm", "/dev/mqueue"};

// streams_outside collects the regular files the standard streams were
// redirected to that lie outside the writable paths: they stay writable
// by path too (>/dev/stdout).
static int streams_outside(const struct undosh_plan *p, struct stream *streams) {
	int n = 0;
	for (int fd = 0; fd < 3; fd++) {
		if (!writable_stream(fd, &streams[n]) || !streams[n].isreg) {
			continue;
		}
		int inside = 0;
		for (int j = 0; j < p->nwritable; j++) {
			inside |= beneath(streams[n].path, p->writable[j]);
		}
		if (!inside) {
			n++;
		}
	}
	return n;
}

static int open_clone(const char *path, int recursive) {
	return (int)syscall(SYS_open_tree, AT_FDCWD, path,
		UNDOSH_OPEN_TREE_CLONE | O_CLOEXEC | (recursive ? UNDOSH_AT_RECURSIVE : 0));
}

// apply_ns_api is the ns limit with the new mount API: clones of the
// writable paths, taken while they are writable, go back on top once
// every mount is read-only. It returns -1 (having changed nothing but
// the namespace's propagation) where the kernel lacks the API.
static int apply_ns_api(struct undosh_plan *p) {
	struct stream streams[3];
	int nstreams = streams_outside(p, streams);
	// /proc stays writable, but not its sysctls: a mount of their own.
	if (mount("/proc/sys", "/proc/sys", NULL, MS_BIND | MS_REC, NULL) != 0 && errno != ENOENT) {
		fail("bind /proc/sys", errno, "/proc/sys", hint_ns);
	}
	int n = p->nwritable + nstreams;
	int *fds = grow(NULL, (n + 1) * sizeof *fds);
	const char **at = grow(NULL, (n + 1) * sizeof *at);
	for (int i = 0; i < n; i++) {
		at[i] = i < p->nwritable ? p->writable[i] : streams[i - p->nwritable].path;
		fds[i] = open_clone(at[i], i < p->nwritable);
		if (fds[i] < 0) {
			if (errno == ENOSYS && i == 0) {
				free(fds);
				free(at);
				return -1;
			}
			fail("clone a writable path", errno, at[i], hint_ns);
		}
	}
	if (setattr_ro("/", 1, 0) != 0) {
		if (errno == ENOSYS) {
			for (int i = 0; i < n; i++) {
				close(fds[i]);
			}
			free(fds);
			free(at);
			return -1;
		}
		fail("make mounts read-only", errno, "/", hint_ns);
	}
	for (size_t i = 0; i < sizeof writable_mounts / sizeof writable_mounts[0]; i++) {
		if (is_mount_root(writable_mounts[i]) && setattr_ro(writable_mounts[i], 0, 1) != 0) {
			fail("keep a mount writable", errno, writable_mounts[i], hint_ns);
		}
	}
	for (int i = 0; i < n; i++) {
		if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, at[i], UNDOSH_MOVE_MOUNT_F_EMPTY_PATH) != 0) {
			fail("bind a writable path", errno, at[i], hint_ns);
		}
		close(fds[i]);
	}
	free(fds);
	free(at);
	return 0;
}

// apply_ns_legacy is the ns limit with mount(2) alone: binds of the
// writable paths onto themselves, then a read-only remount of every
// other mount of the table.
static void apply_ns_legacy(struct undosh_plan *p) {
	struct stream streams[3];
	int nstreams = streams_outside(p, streams);
	for (int i = 0; i < p->nwritable; i++) {
		// Recursive, so that mounts beneath a workspace stay visible.
		if (mount(p->writable[i], p->writable[i], NULL, MS_BIND | MS_REC, NULL) != 0) {
			fail("bind a writable path", errno, p->writable[i], hint_ns);
		}
	}
	int base = p->nwritable;
	for (int i = 0; i < nstreams; i++) {
		if (mount(streams[i].path, streams[i].path, NULL, MS_BIND, NULL) != 0) {
			fail("bind a standard stream's file", errno, streams[i].path, hint_ns);
		}
		p->writable = grow(p->writable, (p->nwritable + 1) * sizeof *p->writable);
		p->writable[p->nwritable++] = streams[i].path;
	}
	if (mount("/proc/sys", "/proc/sys", NULL, MS_BIND | MS_REC, NULL) != 0 && errno != ENOENT) {
		fail("bind /proc/sys", errno, "/proc/sys", hint_ns);
	}
	ro_tree("/", p, stays_writable);
	p->nwritable = base;
}

// hold binds each held path onto itself and makes that tree read-only:
// it lies beneath a writable path, whose bind is already in place. A
// held path that does not exist holds nothing. A standard stream's file
// in a held tree (the caller's > ws/out.log) stays writable by its fd,
// and by /dev/stdout, which reopens it through the caller's mount.
static void hold(struct undosh_plan *p) {
	for (int i = 0; i < p->nheld; i++) {
		char *real = realpath(p->held[i], NULL);
		if (real == NULL) {
			if (errno == ENOENT || errno == ENOTDIR) {
				continue;
			}
			fail("resolve a held path", errno, p->held[i], hint_ns);
		}
		if (mount(real, real, NULL, MS_BIND | MS_REC, NULL) != 0) {
			fail("bind a held path", errno, real, hint_ns);
		}
		ro_tree(real, NULL, NULL);
		free(real);
	}
}

// apply_ns gives the process a mount namespace of its own in which only
// the writable paths can be written. It returns -1 (before changing
// anything) only when unshare is refused and may_fail is set.
static int apply_ns(struct undosh_plan *p, int may_fail) {
	char *cwd = getcwd(NULL, 0);
	if (unshare(CLONE_NEWNS) != 0) {
		if (errno == EPERM && may_fail) {
			free(cwd);
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
	if (apply_ns_api(p) != 0) {
		apply_ns_legacy(p);
	}
	hold(p);
	// The cwd still points into the mount it had before the binds: go
	// through the new tree again, or relative writes in the workspace
	// would hit the read-only mount beneath the bind.
	if (cwd != NULL && chdir(cwd) != 0) {
		fail("return to the working directory", errno, cwd, hint_ns);
	}
	free(cwd);
	return 0;
}

// ---------------------------------------------------------------- capture

// escape_overlay escapes a path for overlayfs's options, where a comma
// separates options and a colon lower directories.
static char *escape_overlay(const char *s) {
	char *out = grow(NULL, 2 * strlen(s) + 1), *w = out;
	for (; *s; s++) {
		if (*s == '\\' || *s == ',' || *s == ':') {
			*w++ = '\\';
		}
		*w++ = *s;
	}
	*w = '\0';
	return out;
}

static void mount_overlay(const char *root, const char *mp, const char *upper, const char *work, int ro) {
	char *lower = escape_overlay(mp), *u = escape_overlay(upper), *k = escape_overlay(work);
	size_t n = strlen(lower) + strlen(u) + strlen(k) + 128;
	char *data = grow(NULL, n);
	snprintf(data, n, "lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=off,metacopy=off,index=off,xino=off", lower, u, k);
	char *target = join(root, mp);
	unsigned long flags = MS_NODEV | (ro ? MS_RDONLY : 0);
	if (mount("undosh-fork", target, "overlay", flags, data) != 0) {
		// A mount the machine dropped, directory and all, since the view
		// was planned (another process's temporary mount) leaves nothing
		// to hold: what the step writes there lands in the layer below,
		// which is caught as the rest is.
		if (errno != ENOENT) {
			fail("mount the overlay of a filesystem", errno, mp, hint_ns);
		}
	}
	free(lower);
	free(u);
	free(k);
	free(data);
	free(target);
}

// bind_into binds src at the same path in root. With gone_ok, a src that
// no longer exists (a mount of the machine that ended after the plan was
// made, such as another step's copy) is left out: the view then shows
// what the machine shows there now.
// It reports whether it bound src.
static int bind_into(const char *root, const char *src, int recursive, int gone_ok, const char *what) {
	char *target = join(root, src);
	int ok = mount(src, target, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) == 0;
	if (!ok && !(gone_ok && errno == ENOENT)) {
		fail(what, errno, src, hint_ns);
	}
	free(target);
	return ok;
}

// left_out reports whether path is one of the n binds left out.
static int left_out(char **gone, int n, const char *path) {
	for (int i = 0; i < n; i++) {
		if (strcmp(gone[i], path) == 0) {
			return 1;
		}
	}
	return 0;
}

// apply_capture builds the view the plan describes in p->root and makes
// it the process's root.
static void apply_capture(struct undosh_plan *p) {
	char *cwd = getcwd(NULL, 0);
	if (cwd == NULL) {
		fail("read the working directory", errno, "getcwd", hint_ns);
	}
	if (unshare(CLONE_NEWNS) != 0) {
		fail("make a mount namespace", errno, "unshare", hint_ns);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		fail("make / private", errno, "/", hint_ns);
	}
	const char *root = p->root;
	// The binds left out, whose read-only marks are left out with them:
	// on a path that is no mount, the mark would fall on the mount
	// that holds it.
	char **gone = calloc(p->nactions + 1, sizeof *gone);
	int ngone = 0;
	if (gone == NULL) {
		fail("build the view", ENOMEM, "calloc", hint_ns);
	}
	for (int i = 0; i < p->nactions; i++) {
		struct undosh_field *f = &p->actions[i];
		char *target;
		switch (f->tag) {
		case 'o':
		case 'O':
			mount_overlay(root, f->s, p->actions[i + 1].s, p->actions[i + 2].s, f->tag == 'O');
			i += 2;
			break;
		case 'w':
		case 'b':
			if (!bind_into(root, f->s, 1, f->tag == 'b', f->tag == 'w' ? "bind a writable path" : "bind a tree of the machine")) {
				gone[ngone++] = f->s;
			}
			break;
		case 'B':
			if (!bind_into(root, f->s, 0, 1, "bind a mount of the machine")) {
				gone[ngone++] = f->s;
			}
			break;
		case 'E':
			target = join(root, f->s);
			if (mount("undosh-fork", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700,size=4k") != 0) {
				fail("hide a directory of the view", errno, f->s, hint_ns);
			}
			free(target);
			break;
		case 'R':
		case 'P':
			if (left_out(gone, ngone, f->s)) {
				break;
			}
			target = join(root, f->s);
			if (setattr_ro(target, f->tag == 'R', 0) != 0) {
				if (errno != ENOSYS) {
					fail("make a mount of the view read-only", errno, f->s, hint_ns);
				}
				if (f->tag == 'R') {
					ro_tree(target, NULL, NULL);
				} else if (mount(NULL, target, NULL, remount_flags(target), NULL) != 0) {
					fail("make a mount of the view read-only", errno, f->s, hint_ns);
				}
			}
			free(target);
			break;
		}
	}
	free(gone);
	if (chdir(root) != 0) {
		fail("enter the view", errno, root, hint_ns);
	}
	if (syscall(SYS_pivot_root, ".", ".") != 0) {
		fail("make the view the root", errno, root, hint_ns);
	}
	if (umount2(".", MNT_DETACH) != 0) {
		fail("detach the machine's root from the view", errno, root, hint_ns);
	}
	if (chdir(cwd) != 0) {
		fail("return to the working directory in the view", errno, cwd, hint_ns);
	}
	free(cwd);
}

// ---------------------------------------------------------------- landlock

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
static void apply_landlock(const struct undosh_plan *p, int abi) {
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

// ---------------------------------------------------------------- apply

int undosh_limit_apply(struct undosh_plan *p, int may_fail) {
	int abi = landlock_abi();
	int mode = p->mode;
	if (mode == UNDOSH_MODE_CAPTURE) {
		if (!has_sys_admin()) {
			if (may_fail) {
				return -1;
			}
			fail("no CAP_SYS_ADMIN to build a view", 0, "capture", hint_ns);
		}
		apply_capture(p);
		return mode;
	}
	if (mode == UNDOSH_MODE_AUTO) {
		mode = has_sys_admin() ? UNDOSH_MODE_NS : UNDOSH_MODE_LANDLOCK;
	}
	// unshare refused (a seccomp filter) with no Landlock to fall back on:
	// nothing can hold the step here; the caller may protect it another
	// way.
	if (mode == UNDOSH_MODE_NS && may_fail && abi == 0 && !unshare_allowed()) {
		return -1;
	}
	if (mode == UNDOSH_MODE_LANDLOCK && abi == 0 && may_fail) {
		return -1;
	}
	resolve_writable(p);
	if (mode == UNDOSH_MODE_NS && apply_ns(p, (p->mode == UNDOSH_MODE_AUTO && abi > 0) || may_fail) != 0) {
		if (p->mode != UNDOSH_MODE_AUTO || abi == 0) {
			return -1; // may_fail, and nothing changed
		}
		mode = UNDOSH_MODE_LANDLOCK;
	}
	if (mode == UNDOSH_MODE_LANDLOCK) {
		if (abi == 0) {
			fail(p->mode == UNDOSH_MODE_AUTO ? "no CAP_SYS_ADMIN for a mount namespace, and no Landlock" : "no Landlock",
				0, "landlock_create_ruleset", hint_landlock);
		}
		apply_landlock(p, abi);
	}
	return mode;
}
