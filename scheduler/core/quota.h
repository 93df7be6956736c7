/*
 * Compute quotas: a client's core limit (1..100 % of one GPU's time) as a
 * hard cap, accounted over a window. See docs/quotas.md for the algorithm
 * and its math.
 *
 * A GPU with a limited client attached is serialized (modes on and auto):
 * every client holds the lock to run, so a limited client's GPU time is
 * exactly its hold time. The quota policy is a struct nvs_policy_hook
 * (policy.h) installed on such a GPU:
 *  - bills hold time per window, the drop tail at the client's measured
 *    drain plus NVSHARE_DROP_TAIL_BILLING_PERCENT of the rest;
 *  - sends DROP_LOCK when quota - billed <= the expected billed tail;
 *  - keeps a throttled client from the lock until the window ends;
 *  - lets limited clients with quota left go before unlimited ones, and
 *    preempts an unlimited holder for them;
 *  - scales limits down when the active clients' limits oversubscribe the
 *    GPU (idle clients left out; unlimited co-runners keep a fair share).
 */
#ifndef NVSHARE_SCHEDULER_QUOTA_H
#define NVSHARE_SCHEDULER_QUOTA_H

#include <stdint.h>

struct gpu;
struct client;
struct client_gpu;

/* Registers the quota policy with policy.c (nvs_policy_set_ops): its mode
 * evaluation then installs or removes the quota hook on a GPU after its
 * clients or their limits changed, and serializes a GPU with a limited
 * client. Without it no quota runs anywhere. */
void nvs_quota_start(void);

/* A client's quota as shown by nvsharectl / metrics. */
struct nvs_quota_view {
	uint32_t limit;	      /* core limit in force this window (100 none) */
	double effective_pct; /* after scaling for oversubscription */
	uint64_t window_ns;
	uint64_t window_elapsed_ns;
	uint64_t used_ns;      /* billed in the current window */
	uint64_t last_used_ns; /* billed in the previous window */
	uint64_t billed_ns;    /* billed since the quota started on this GPU, the
				* running hold included: two snapshots give the
				* billed share of any interval between them */
	int throttled;
	uint64_t throttled_ns; /* total time kept from the lock by its quota */
};
void nvs_quota_view(const struct client_gpu *cg, uint64_t now, struct nvs_quota_view *v);

/* Total time the quota kept cg from the lock (metrics). */
uint64_t nvs_quota_throttled_ns(const struct client_gpu *cg, uint64_t now);

#endif
