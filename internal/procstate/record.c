// The constructor below runs before the Go runtime starts (the dynamic
// loader runs a cgo binary's constructors before its entry point), so it
// sees the process exactly as the caller set it up.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "record.h"

struct undosh_state undosh_state;

__attribute__((constructor)) static void undosh_record(void) {
	for (int s = 1; s <= UNDOSH_NSIG; s++) {
		struct sigaction sa;
		if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) {
			undosh_state.ignored |= 1ULL << (s - 1);
		}
	}
	sigset_t set;
	if (sigprocmask(SIG_SETMASK, NULL, &set) == 0) {
		for (int s = 1; s <= UNDOSH_NSIG; s++) {
			if (sigismember(&set, s) == 1) {
				undosh_state.blocked |= 1ULL << (s - 1);
			}
		}
	}
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
			undosh_state.closed |= 1 << fd;
		}
	}
	undosh_state.recorded = 1;
}

// undosh_die_by resets sig to its default action, unblocks it and sends it
// to the process: the Go runtime would otherwise catch a synchronous signal
// such as SIGSEGV and exit 2 with a stack dump.
void undosh_die_by(int sig) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	kill(getpid(), sig);
	// A process-directed signal may land on another thread; wait for it.
	for (int i = 0; i < 1000; i++) {
		usleep(1000);
	}
}

extern char **environ;

int undosh_environ_len(void) {
	int n = 0;
	while (environ && environ[n]) {
		n++;
	}
	return n;
}

const char *undosh_environ_at(int i) { return environ[i]; }

/* undosh_execfn is the path the kernel was given to run this program
 * (AT_EXECFN), or NULL. */
const char *undosh_execfn(void) {
	return (const char *)getauxval(AT_EXECFN);
}
