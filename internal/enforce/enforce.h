#define UNDOSH_ENFORCE_NAME "undosh-enforce"
#define UNDOSH_ENFORCE_VAR "UNDOSH_ENFORCE_PLAN"

// The mechanisms, as written in a plan (keep in step with Mode in Go).
enum {
	UNDOSH_MODE_AUTO = 0,
	UNDOSH_MODE_NS = 1,
	UNDOSH_MODE_LANDLOCK = 2,
};

// undosh_enforce_probe returns the mechanism mode resolves to here, or -1
// when it is not available; *abi is set to the kernel's Landlock ABI
// version (0 without Landlock).
int undosh_enforce_probe(int mode, int *abi);
