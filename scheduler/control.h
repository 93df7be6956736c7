/*
 * Control requests from nvsharectl (CTL_SET, CTL_SET_CLIENT, CTL_STATUS),
 * each answered by one CTL_REPLY echoing the request's seq. Which socket
 * decides (docs/security.md), never the peer's uid: on the admin socket
 * everything (the full status included) for any peer not in a Pod; on the
 * client socket only CTL_STATUS, scoped to the caller's own tenant.
 */
#ifndef NVSHARE_SCHEDULER_CONTROL_H
#define NVSHARE_SCHEDULER_CONTROL_H

#include "protocol.h"

struct conn;

void nvs_control_msg(struct conn *c, const struct nvs_msg *m);

#endif
