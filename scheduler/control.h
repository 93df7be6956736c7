/*
 * Control requests from nvsharectl (CTL_SET, CTL_SET_CLIENT, CTL_STATUS),
 * each answered by one CTL_REPLY echoing the request's seq. Changes are
 * allowed to uid 0 and to the scheduler's own euid (SO_PEERCRED); status
 * is allowed to anyone who can open the socket.
 */
#ifndef NVSHARE_SCHEDULER_CONTROL_H
#define NVSHARE_SCHEDULER_CONTROL_H

#include "protocol.h"

struct conn;

void nvs_control_msg(struct conn *c, const struct nvs_msg *m);

#endif
