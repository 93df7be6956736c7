/*
 * The limits in force on one client's GPU, from every source that may
 * give one: the one place they are resolved (docs/quotas.md "Setting
 * limits"). Pure: no state, no clock; clients.c gathers the sources of a
 * client_gpu and stores the result (nvs_client_update_limits), and every
 * change of a source goes through that.
 *
 * Precedence, each field (core, memory) on its own, highest first:
 *   1. nvsharectl --set-client -g N   (that GPU only)
 *   2. nvsharectl --set-client        (all the client's GPUs)
 *   3. Pod annotations nvshare.com/gpu-core-limit, -memory-limit
 *      (also the unknown-tenant limits, pod_identity.c)
 *   4. memory: min(the Pod's nvshare.com/gpu-memory request, HELLO's);
 *      core: HELLO's (NVSHARE_GPU_CORE_LIMIT)
 *   5. none: 100 %, NVS_NO_LIMIT
 * then two that only lower what that gives:
 *   - the client's LIMITS_IN_FORCE claim after a scheduler restart;
 *   - the ceiling of the client's Pod socket binding (a DRA claim's
 *     consumed capacity, podsock.h): nothing goes above it, nvsharectl
 *     included.
 */
#ifndef NVSHARE_SCHEDULER_LIMIT_RESOLVE_H
#define NVSHARE_SCHEDULER_LIMIT_RESOLVE_H

#include <stdint.h>

/* Which source decided a field (for logs and the ctl answer). */
enum nvs_limit_from {
	NVS_LIMIT_FROM_DEFAULT = 0,
	NVS_LIMIT_FROM_HELLO,
	NVS_LIMIT_FROM_REQUEST,
	NVS_LIMIT_FROM_ANNOTATION,
	NVS_LIMIT_FROM_CTL,
	NVS_LIMIT_FROM_CTL_GPU,
	NVS_LIMIT_FROM_CLAIM,
	NVS_LIMIT_FROM_CEILING,
};

/* One source's core limit: 1..100, 0 = this source gives none. Memory:
 * has_* 0 = none; else bytes or NVS_NO_LIMIT ("no limit", which still
 * overrides the sources below). */
struct nvs_limit_sources {
	uint32_t hello_core; /* HELLO: 1..100 (100: none) */
	uint64_t hello_mem;  /* HELLO: bytes or NVS_NO_LIMIT */
	uint64_t request;    /* the Pod's memory request in bytes, 0 none */
	uint32_t annot_core;
	int has_annot_mem;
	uint64_t annot_mem;
	uint32_t ctl_core; /* client-wide nvsharectl */
	int has_ctl_mem;
	uint64_t ctl_mem;
	uint32_t gpu_core; /* nvsharectl -g N */
	int has_gpu_mem;
	uint64_t gpu_mem;
	int has_claim; /* LIMITS_IN_FORCE: only tightens */
	uint32_t claim_core;
	uint64_t claim_mem;
	uint32_t ceil_core; /* binding ceiling, 0: none */
	uint64_t ceil_mem;  /* binding ceiling, 0: none */
};

struct nvs_limits {
	uint32_t core; /* 1..100 */
	uint64_t mem;  /* bytes or NVS_NO_LIMIT */
	enum nvs_limit_from core_from, mem_from;
};

struct nvs_limits nvs_limits_resolve(const struct nvs_limit_sources *s);
/* "hello", "annotation", ... */
const char *nvs_limit_from_name(enum nvs_limit_from f);

#endif
