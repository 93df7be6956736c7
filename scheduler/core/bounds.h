/*
 * Bounds on what clients' word can do (bounds.c, docs/scheduler.md
 * "Client claims"): allocations are clamped, the adaptive quantum uses the
 * median of recent swaps and is bounded, and a GPU's automatic mode
 * switches are rate-limited (hysteresis). Their settings are rows of
 * settings.def (S.cfg).
 */
#ifndef NVSHARE_SCHEDULER_BOUNDS_H
#define NVSHARE_SCHEDULER_BOUNDS_H

#include <stdint.h>

struct client_gpu;
struct gpu;

/* Recent swap times kept per GPU and direction (median of these). */
#define NVS_SWAP_SAMPLES NVS_SWAP_RING /* state.h */

/* The allocation counted for a claim (bytes): min(claimed, the client's
 * memory limit, capacity x NVSHARE_OVERSUBSCRIPTION_FACTOR), and what NVML
 * shows (unmanaged.c, through the port: port.h): 0 for a process without a context on the GPU; the
 * evidence (cg->ev.cap) once its claim stayed unproven while it could run.
 * The first clamp of a client on a GPU for each cause is logged and sent
 * as an event; every clamp is counted on the GPU. */
uint64_t nvs_bounds_clamp(struct client_gpu *cg, uint64_t claimed);

/* A swap slower than this is not believed: the slowest path measured
 * (GPU to host, docs/BENCHMARKS.md) is several times faster. */
#define NVS_SWAP_FLOOR_BPS (1ull << 30)
/* A direction's median counts from this many samples on. */
#define NVS_SWAP_MIN_SAMPLES 3u

/* One report's swap times and bytes from cg (policy.c, the increase of its
 * cumulative counters): kept for the median if its evidence allows - one
 * swap-in per grant it got, one swap-out per release or revocation, each
 * cut to its bytes (at most the memory cg is counted for) at
 * NVS_SWAP_FLOOR_BPS. Refused and cut samples are counted (g->ev). */
void nvs_bounds_swap_sample(struct client_gpu *cg, uint64_t in_ns, uint64_t in_bytes,
			    uint64_t out_ns, uint64_t out_bytes);
/* Median recent swap-in + median recent swap-out, ns (0: no samples; a
 * direction with fewer than NVS_SWAP_MIN_SAMPLES counts 0). */
uint64_t nvs_bounds_swap_median(const struct gpu *g);
/* A sample that moved less than this says little about the link's speed
 * (a swap-in with next to nothing to move costs its fixed latency): it
 * counts for the times above, not for the speeds below. */
#define NVS_SWAP_RATE_MIN_BYTES (64ull << 20)
/* What a hand-off that moves out_bytes to the host and in_bytes back
 * costs, ns: each direction's bytes at its median recent speed. A direction
 * with fewer than NVS_SWAP_MIN_SAMPLES speeds borrows the other's: the
 * swap engine's paths move about as fast both ways (55.3 GB/s each way
 * between the GPU and pinned memory on an H200, docs/BENCHMARKS.md), and
 * an unmeasured direction used to cost its median time, 0 while it had
 * fewer than 3 times: on an H200 the first pairs of a run took turns at the
 * bare 1 s TQ while their hand-offs cost 56 ms (1.04-1.05x), because jobs
 * that end within a quantum hand over with no swap-out, and the swap-out
 * direction stayed unmeasured for a dozen jobs. With no speeds either way,
 * each direction's median time (nvs_bounds_swap_median's share). Medians of
 * times alone mix hand-offs that moved little with those that moved much
 * (measured on an H200: 21 ms priced against 56 ms paid for 1.15 GiB each
 * way). */
uint64_t nvs_bounds_handoff_ns(const struct gpu *g, uint64_t out_bytes, uint64_t in_bytes);
/* The bound on the stretched quantum: TQ x NVSHARE_SWAP_TQ_MAX_FACTOR. */
uint64_t nvs_bounds_tq_bound_ns(const struct gpu *g);

/* Mode-switch budget (GCRA): a burst of NVSHARE_MODE_SWITCH_BURST
 * switches, then one per NVSHARE_MODE_DWELL_MS. At most burst + T/dwell
 * automatic switches in any interval T. */
uint64_t nvs_bounds_switch_at(const struct gpu *g); /* earliest allowed, ns */
void nvs_bounds_switched(struct gpu *g, uint64_t now);

#endif
