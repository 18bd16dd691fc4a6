// The cgo side of package enforce: the limits (limit.h), and the
// constructor that applies them (enforce.c).
#include "limit.h"
