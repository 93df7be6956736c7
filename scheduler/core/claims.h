/*
 * The report gate (claims.c): MEM_UPDATE and SWAP_STATS are rate-limited per
 * connection (the excess coalesced: only the latest value is kept and
 * applied when the connection's budget allows), then applied by policy.c;
 * what they may count for is bounds.h's. Its settings are rows of
 * settings.def (S.cfg).
 */
#ifndef NVSHARE_SCHEDULER_CLAIMS_H
#define NVSHARE_SCHEDULER_CLAIMS_H

#include <stdint.h>

struct client_gpu;
struct nvs_swap_stats;

/* MEM_UPDATE / SWAP_STATS from a client: applied now if its connection's
 * report budget allows, else kept as its latest (coalesced) and applied by
 * nvs_claims_tick. */
void nvs_claims_mem_update(struct client_gpu *cg, uint64_t claimed, uint64_t now);
void nvs_claims_swap_stats(struct client_gpu *cg, const struct nvs_swap_stats *s, uint64_t now);
/* The client_gpu goes away: forget what it had pending. */
void nvs_claims_forget(struct client_gpu *cg);
uint64_t nvs_claims_next_deadline(uint64_t now);
void nvs_claims_tick(uint64_t now);

/* The core's timer, as the loop drives it (the shell registers these;
 * tests/core's harness calls them): the report gate's tick (reports kept
 * for lack of budget are applied first), then the policy's; the earliest
 * of both deadlines (0: none). */
void nvs_core_tick(uint64_t now);
uint64_t nvs_core_next_deadline(uint64_t now);

#endif
