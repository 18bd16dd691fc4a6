#include <stdint.h>

#define UNDOSH_NSIG 64

struct undosh_state {
	uint64_t ignored; // bit s-1: signal s was SIG_IGN
	uint64_t blocked; // bit s-1: signal s was blocked
	int closed;       // bit fd: fd 0, 1 or 2 was closed
	int recorded;
};

extern struct undosh_state undosh_state;
void undosh_die_by(int sig);
int undosh_environ_len(void);
const char *undosh_environ_at(int i);
const char *undosh_execfn(void);
