// The limit a step runs under, applied in C: by the constructor of this
// package (enforce.c) in undosh's own executable, and by the front end
// (front/undosh-fast.c), which links limit.c. docs/enforce.md explains
// the mechanisms; enforce.go writes the plans that limit.c reads.
#ifndef UNDOSH_LIMIT_H
#define UNDOSH_LIMIT_H

#define UNDOSH_ENFORCE_NAME "undosh-enforce"
#define UNDOSH_ENFORCE_VAR "UNDOSH_ENFORCE_PLAN"
#define UNDOSH_VIEW_SYNC_NAME "undosh-view-sync"
#define UNDOSH_VIEW_BIND_NAME "undosh-view-bind"

// The mechanisms, as written in a plan (keep in step with Mode in Go).
enum {
	UNDOSH_MODE_AUTO = 0,
	UNDOSH_MODE_NS = 1,
	UNDOSH_MODE_LANDLOCK = 2,
	UNDOSH_MODE_CAPTURE = 3,
};

// One field of a plan: a tag and its bytes (see undosh_plan_parse).
struct undosh_field {
	char tag;
	char *s;
};

// A plan, as undosh_plan_parse reads it.
struct undosh_plan {
	int mode;
	const char *class; // "none" or "git"
	char *shell;
	char **writable; // absolute; canonical once applied
	int nwritable;
	char **held; // ns: read-only again, though beneath a writable path
	int nheld;
	char *root; // capture: the directory the view is built in
	struct undosh_field *actions; // capture: the view, in order
	int nactions;
};

// undosh_plan_parse reads a plan written by Plan.encode (enforce.go):
//
//	2 MODE CLASS FIELD...
//	MODE  = auto | ns | landlock | capture
//	CLASS = none | git
//	FIELD = " " TAG LEN ":" BYTES
//
// TAG s is the shell (exactly one), w a writable path, x a path held
// read-only though it lies beneath a writable one (the workspace of a
// read-only step in /tmp): ns and auto only, and auto holds it only if it
// picks ns (Landlock grants whole trees). capture adds r,
// the directory the view is built in (exactly one, before the rest),
// and the view's actions, in the order they are done: o (O: read-only)
// an overlay, whose mount point is followed by u (its upper directory)
// and k (its work directory); b a recursive bind of a host tree, B a
// bind of one mount or file; R a tree made read-only, P one mount made
// read-only; E a directory covered by an empty read-only tmpfs. Every path is absolute; LEN counts the bytes, so no byte of
// a path needs escaping (NUL excepted). It returns NULL, or what is
// wrong; p is then incomplete (undosh_plan_free frees it either way).
const char *undosh_plan_parse(const char *s, struct undosh_plan *p);

// undosh_plan_free frees what undosh_plan_parse allocated, whether it
// succeeded or not.
void undosh_plan_free(struct undosh_plan *p);

// undosh_limit_probe returns the mechanism mode resolves to here, or -1
// when it is not available; *abi is set to the kernel's Landlock ABI
// version (0 without Landlock).
int undosh_limit_probe(int mode, int *abi);

// undosh_limit_apply puts this process under plan p. It must run while
// the process has one thread. It changes nothing else the caller set up
// (fds, signal dispositions and mask, umask, rlimits, the working
// directory as a path), and every fd it opens is close-on-exec. When the
// plan cannot be applied it prints `undosh: error: enforce: …` and a
// hint, and exits 126; before it has changed anything, a plan whose
// mechanism is not available here makes it return -1 instead when
// may_fail is set. It returns the mechanism applied.
int undosh_limit_apply(struct undosh_plan *p, int may_fail);

#endif
