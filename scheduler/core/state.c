/* The scheduler's state (state.h): one instance, owned by the loop thread. */
#include "state.h"

struct sched S;
