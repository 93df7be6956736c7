/*
 * Launch family: every kernel, cooperative, graph and host-function launch goes
 * through the scheduler gate (nvs_gate, client/sched_client.h) before the
 * real call. Each _ptsz wrapper calls its own real pointer.
 */
#include "client/internal.h"

#include "client/hooks_launch.inc"
