/*
 * The adaptive quantum prices the coming hand-off (scheduler/claims.c
 * nvs_claims_handoff_ns, policy.c nvs_policy_tq_ns), in process on the
 * scheduler's own objects: the bytes the holder must move out for the next
 * waiter and those the waiter lacks, at the median speed of the recent
 * swaps that moved at least NVS_SWAP_RATE_MIN_BYTES; small swaps count for
 * the median times (used while speeds are few) but not for the speeds.
 * Measured on an H200 (docs/BENCHMARKS.md): median times priced a 1.15 GiB
 * hand-off at 21 ms where it cost 56 ms, the quantum stayed at the 1 s TQ
 * and 1.3 s jobs were cut.
 */
#include "scheduler/core/claims.h"
#include "scheduler/core/policy.h"
#include "scheduler/core/state.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int tap_n, tap_failed;

static void tap(int ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%sok %d - ", ok ? "" : "not ", ++tap_n);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	if (!ok)
		tap_failed++;
}

#define MI (1ull << 20)
#define GI (1ull << 30)
#define MSEC 1000000ull

static struct gpu g;
static struct client ch, cw;
static struct client_gpu h, w;

/* One swap report of c's (in then out), after a hand-off of its each way. */
static void sample(struct client_gpu *c, uint64_t in_ns, uint64_t in_b, uint64_t out_ns,
		   uint64_t out_b)
{
	c->st.grants++;
	c->st.releases++;
	nvs_claims_swap_sample(c, in_ns, in_b, out_ns, out_b);
}

int main(void)
{
	S.cfg.swap_tq_factor = 33;
	S.cfg.swap_tq_max_factor = 4;
	S.cfg.swap_out = 0; /* "needed": what the next holder needs (policy.c) */
	g.tq_ms = 1000;
	g.serialized = 1;
	g.capacity_override = 3 * GI;
	ch.id = 1;
	cw.id = 2;
	h.client = &ch;
	w.client = &cw;
	h.gpu = w.gpu = &g;
	h.allocated = w.allocated = h.mem_limit = w.mem_limit = 1792 * MI;
	g.ahead = &h;
	h.anext = &w;

	tap(nvs_policy_tq_ns(&g) == 1000 * MSEC, "no samples: the quantum is the TQ (%llu ms)",
	    (unsigned long long)(nvs_policy_tq_ns(&g) / MSEC));

	/* Small swaps (4 MiB in 11.5 ms: a grant with next to nothing to
	 * move) and large ones (1.15 GiB in 28 ms each way, ~44 GB/s). */
	for (int i = 0; i < 3; i++)
		sample(&w, 11500000, 4 * MI, 2300000, 2 * MI);
	for (int i = 0; i < 2; i++)
		sample(&h, 28 * MSEC, 1178 * MI, 28 * MSEC, 1178 * MI);
	/* Each cut to its bytes at the floor rate (NVS_SWAP_FLOOR_BPS). */
	uint64_t small = 4 * MI * 1000000000ull / NVS_SWAP_FLOOR_BPS +
			 2 * MI * 1000000000ull / NVS_SWAP_FLOOR_BPS;
	tap(nvs_claims_swap_median(&g) == small,
	    "median times: the small swaps (cut to the floor rate) are the lower middle (%llu ns)",
	    (unsigned long long)nvs_claims_swap_median(&g));

	/* Holder H runs, W waits with 1.15 GiB evicted: H must move out what
	 * W lacks beyond the free room (3 GiB - 1.75 - 0.6 resident). */
	g.holder = &h;
	h.state = CG_HOLDING;
	h.resident = 1792 * MI;
	w.resident = 1792 * MI - 1178 * MI;
	g.qhead = &w;
	w.state = CG_WAITING;
	uint64_t out_b = nvs_policy_swap_out_need(&g, &h, &w);
	tap(out_b == 1178 * MI - (3 * GI - 1792 * MI - 614 * MI),
	    "the holder moves out what the waiter lacks beyond the free room (%llu MiB)",
	    (unsigned long long)(out_b >> 20));
	uint64_t fewer = nvs_policy_handoff_ns(&g);
	tap(fewer == small,
	    "fewer than 3 speeds: the hand-off is priced at the median times (%llu ns)",
	    (unsigned long long)fewer);

	sample(&h, 28 * MSEC, 1178 * MI, 28 * MSEC, 1178 * MI);
	uint64_t per_gib = (28 * MSEC << 30) / (1178 * MI);
	uint64_t want = (out_b * per_gib >> 30) + (1178 * MI * per_gib >> 30);
	uint64_t got = nvs_policy_handoff_ns(&g);
	tap(got + 2 >= want && got <= want + 2,
	    "3 speeds: the hand-off is its bytes at the median speed (%llu ns, want %llu)",
	    (unsigned long long)got, (unsigned long long)want);
	uint64_t tq = nvs_policy_tq_ns(&g);
	tap(tq == 33 * got, "the quantum is 33 x the hand-off (%llu ms: a 1.3 s job is not cut)",
	    (unsigned long long)(tq / MSEC));

	/* A forger: a huge number of bytes in a short time does not make the
	 * link look faster than the bytes it is counted for allow. */
	for (int i = 0; i < 5; i++)
		sample(&w, 1 * MSEC, 1000 * GI, 1 * MSEC, 1000 * GI);
	uint64_t forged = nvs_policy_handoff_ns(&g);
	tap(forged > 0 && forged < got,
	    "5 forged fast swaps (1000 GiB in 1 ms) count as 1.75 GiB in 1 ms: the price falls "
	    "(%llu ns), bounded below by the TQ",
	    (unsigned long long)forged);
	tap(nvs_policy_tq_ns(&g) >= 1000 * MSEC, "... and the quantum stays >= TQ (%llu ms)",
	    (unsigned long long)(nvs_policy_tq_ns(&g) / MSEC));

	/* Slow reports are cut to the floor rate, so a forger cannot stretch
	 * the quantum beyond 4 x TQ either. */
	for (int i = 0; i < 9; i++)
		sample(&w, 60000 * MSEC, 1792 * MI, 60000 * MSEC, 1792 * MI);
	tap(nvs_policy_tq_ns(&g) == 4000 * MSEC,
	    "slow forged swaps: the quantum stops at 4 x TQ (%llu ms)",
	    (unsigned long long)(nvs_policy_tq_ns(&g) / MSEC));

	/* Nobody waits: no hand-off in sight, the median times. */
	g.qhead = NULL;
	tap(nvs_policy_handoff_ns(&g) == nvs_claims_swap_median(&g),
	    "nobody waits: the median times (%llu ns)",
	    (unsigned long long)nvs_policy_handoff_ns(&g));
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
