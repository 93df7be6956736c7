/*
 * The status snapshot as JSON (cJSON): per GPU settings, lock state and
 * counters; per client identity, limits and per-GPU use. Used by
 * CTL_STATUS (nvsharectl) and meant for the metrics exporter too. The
 * layout is described in docs/scheduler.md.
 */
#ifndef NVSHARE_SCHEDULER_STATUS_JSON_H
#define NVSHARE_SCHEDULER_STATUS_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

struct nvs_peer;

/* Builds the full snapshot at time `now` (CLOCK_MONOTONIC ns), for the
 * admin socket. NULL on OOM. */
cJSON *nvs_status_json(uint64_t now);
/* The tenant view (client socket, docs/security.md): GPU facts that name
 * no one, and only the clients of viewer's own tenant (same Pod; outside
 * Kubernetes same uid; an unknown viewer sees only self, the client of its
 * own connection, or none). NULL on OOM. */
struct client;
cJSON *nvs_status_tenant_json(uint64_t now, const struct nvs_peer *viewer,
			      const struct client *self);

#endif
