/*
 * A client's limits (docs/quotas.md "Setting limits"): its sources, kept
 * in struct client / client_gpu, resolved in one place (limit_resolve.h)
 * and told to the client (SET_LIMITS) when they change. Every change of a
 * source comes through here, and every GPU whose limits changed is
 * re-evaluated (policy.h nvs_policy_settings_changed: quotas start or
 * stop, memory clamps change).
 */
#ifndef NVSHARE_SCHEDULER_CORE_LIMITS_H
#define NVSHARE_SCHEDULER_CORE_LIMITS_H

#include "limit_resolve.h"

#include <stdint.h>

struct client;
struct client_gpu;
struct nvs_set_limits;

/* Where a limit comes from; a higher source wins, per field. */
enum nvs_limit_src {
	NVS_LIMIT_SRC_ENV = 0,	      /* HELLO: NVSHARE_GPU_CORE/MEMORY_LIMIT */
	NVS_LIMIT_SRC_ANNOTATION = 1, /* nvshare.com/gpu-core-limit, -memory-limit */
	NVS_LIMIT_SRC_CTL = 2,	      /* nvsharectl --set-client */
	/* The Pod's nvshare.com/gpu-memory (mem only, core must be 0): ranks
	 * below the annotation; HELLO's memory limit may lower it, not raise
	 * it. Also the client's expected size when fitting (policy.c). */
	NVS_LIMIT_SRC_REQUEST = 3,
};

/*
 * Sets the limits one source gives a client, for all its GPUs (and GPUs it
 * attaches later), recomputes the limits in force, sends SET_LIMITS to
 * every GPU whose limits changed and re-evaluates those GPUs.
 *   core: 1..100, or 0 = this source gives no core limit (removed)
 *   mem:  bytes; 0 = this source gives no memory limit (removed);
 *         UINT64_MAX (NVS_NO_LIMIT) = this source says "no limit"
 * Annotation memory values: a bare number is MiB (nvs_parse_size(s, 1 << 20)).
 * Returns the number of GPUs told, or -1 for a bad core value.
 */
int nvs_limits_set_from(struct client *cl, enum nvs_limit_src src, uint32_t core, uint64_t mem,
			uint64_t now);

/*
 * nvsharectl --set-client for one client: gpu -1 all its GPUs (the
 * client-wide values; they replace the per-GPU ones), else that GPU's own
 * values. core_set: core is the new value, 0 = default (the client-wide
 * value, the annotation or HELLO's); mem_set: mem is the new value. The
 * client's LIMITS_IN_FORCE claim on those GPUs is dropped. SET_LIMITS goes
 * to each GPU concerned, which is re-evaluated. Returns the GPUs told;
 * *capped counts those where the binding's ceiling cut a value.
 */
unsigned nvs_limits_ctl_set(struct client *cl, int gpu, int core_set, uint32_t core, int mem_set,
			    uint64_t mem, uint64_t now, unsigned *capped);

/* LIMITS_IN_FORCE from the client: what it enforces on cg's GPU, as a
 * scheduler before this one (a restart) told it. A claim: out of range is
 * ignored, and it only tightens. */
void nvs_limits_claim(struct client_gpu *cg, const struct nvs_set_limits *l, uint64_t now);

/* The sources of cg's limits: its client's HELLO, Pod request and
 * annotations, nvsharectl's client-wide and per-GPU values, its
 * LIMITS_IN_FORCE claim, its Pod socket binding's ceiling. */
void nvs_client_limit_sources(const struct client_gpu *cg, struct nvs_limit_sources *src);
/* Recomputes cg's limits in force from those sources (the one place they
 * are resolved, nvs_limits_resolve) and stores them in cg; returns them
 * with the source that decided each. Sends nothing. */
struct nvs_limits nvs_client_update_limits(struct client_gpu *cg);
/* Sends SET_LIMITS for one of the client's GPUs (its effective limits). */
void nvs_client_send_limits(struct client_gpu *cg);

#endif
