/*
 * The adaptive quantum prices the coming hand-off (core/claims.c
 * nvs_bounds_handoff_ns, core/policy.c nvs_policy_tq_ns), in process on the
 * scheduler's own objects: the bytes the holder must move out for the next
 * waiter and those the waiter lacks, at the median speed of the recent
 * swaps that moved at least NVS_SWAP_RATE_MIN_BYTES; small swaps count for
 * the median times (used while speeds are few) but not for the speeds.
 * Measured on an H200 (docs/BENCHMARKS.md): median times priced a 1.15 GiB
 * hand-off at 21 ms where it cost 56 ms, the quantum stayed at the 1 s TQ
 * and 1.3 s jobs were cut.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* A GPU and two clients built by hand (no h_setup: nothing is sent, only
 * the pricing is asked). */
static struct gpu g;
static struct client ch, cw;
static struct client_gpu h, w;

/* One swap report of c's (in then out), after a hand-off of its each way. */
static void sample(struct client_gpu *c, uint64_t in_ns, uint64_t in_b, uint64_t out_ns,
		   uint64_t out_b)
{
	c->st.grants++;
	c->st.releases++;
	nvs_bounds_swap_sample(c, in_ns, in_b, out_ns, out_b);
}

static void test_handoff_price(void **state)
{
	(void)state;
	S.cfg.swap_tq_factor = 50; /* the default */
	S.cfg.swap_tq_max_factor = 4;
	S.cfg.swap_out = 0; /* "needed": what the next holder needs (policy.c) */
	g.tq_ms = 1000;
	g.serialized = 1;
	g.capacity_override = 3 * GiB;
	ch.id = 1;
	cw.id = 2;
	h.client = &ch;
	w.client = &cw;
	h.gpu = w.gpu = &g;
	h.allocated = w.allocated = h.mem_limit = w.mem_limit = 1792 * MiB;
	g.ahead = &h;
	h.anext = &w;

	/* No samples: the quantum is the TQ. */
	assert_int_equal(nvs_policy_tq_ns(&g), 1000 * MS);

	/* Small swaps (4 MiB in 11.5 ms: a grant with next to nothing to
	 * move) and large ones (1.15 GiB in 28 ms each way, ~44 GB/s). */
	for (int i = 0; i < 3; i++)
		sample(&w, 11500000, 4 * MiB, 2300000, 2 * MiB);
	for (int i = 0; i < 2; i++)
		sample(&h, 28 * MS, 1178 * MiB, 28 * MS, 1178 * MiB);
	/* Median times: the small swaps, each cut to its bytes at the floor
	 * rate (NVS_SWAP_FLOOR_BPS), are the lower middle. */
	uint64_t small = 4 * MiB * SEC / NVS_SWAP_FLOOR_BPS + 2 * MiB * SEC / NVS_SWAP_FLOOR_BPS;
	assert_int_equal(nvs_bounds_swap_median(&g), small);

	/* Holder H runs, W waits with 1.15 GiB evicted: H must move out what
	 * W lacks beyond the free room (3 GiB - 1.75 - 0.6 resident). */
	g.holder = &h;
	h.state = CG_HOLDING;
	h.resident = 1792 * MiB;
	w.resident = 1792 * MiB - 1178 * MiB;
	g.qhead = &w;
	w.state = CG_WAITING;
	uint64_t out_b = nvs_policy_swap_out_need(&g, &h, &w);
	assert_int_equal(out_b, 1178 * MiB - (3 * GiB - 1792 * MiB - 614 * MiB));
	/* Fewer than 3 speeds either way: the hand-off is priced at the median
	 * times. */
	assert_int_equal(nvs_policy_handoff_ns(&g), small);

	/* 3 speeds in, none out (jobs that end within their quantum hand over
	 * with no swap-out): the swap-out borrows the swap-in's speed instead
	 * of costing its median time (0: too few), which kept the first pairs
	 * of an H200 run at the bare TQ. */
	struct swap_samples out_saved = g.swap_out_samples;
	memset(&g.swap_out_samples, 0, sizeof g.swap_out_samples);
	for (int i = 0; i < 3; i++)
		sample(&w, 28 * MS, 1178 * MiB, 0, 0);
	uint64_t in_gib = (28 * MS << 30) / (1178 * MiB);
	uint64_t borrowed = (out_b * in_gib >> 30) + (1178 * MiB * in_gib >> 30);
	assert_in_range(nvs_policy_handoff_ns(&g), borrowed - 2, borrowed + 2);
	assert_true(nvs_policy_tq_ns(&g) > 1000 * MS);
	g.swap_out_samples = out_saved;
	memset(&g.swap_in_samples, 0, sizeof g.swap_in_samples);
	for (int i = 0; i < 3; i++)
		sample(&w, 11500000, 4 * MiB, 0, 0);
	for (int i = 0; i < 2; i++)
		sample(&h, 28 * MS, 1178 * MiB, 0, 0);

	/* 3 speeds: the hand-off is its bytes at the median speed, and the
	 * quantum k x that (k = 50: 2 s; a 1.3 s job is not cut). */
	sample(&h, 28 * MS, 1178 * MiB, 28 * MS, 1178 * MiB);
	uint64_t per_gib = (28 * MS << 30) / (1178 * MiB);
	uint64_t want = (out_b * per_gib >> 30) + (1178 * MiB * per_gib >> 30);
	uint64_t got = nvs_policy_handoff_ns(&g);
	assert_in_range(got, want - 2, want + 2);
	assert_int_equal(nvs_policy_tq_ns(&g), S.cfg.swap_tq_factor * got);

	/* A forger: 5 fast swaps of 1000 GiB in 1 ms count as 1.75 GiB (the
	 * bytes it is counted for) in 1 ms: the price falls, and the quantum
	 * stays at least the TQ. */
	for (int i = 0; i < 5; i++)
		sample(&w, 1 * MS, 1000 * GiB, 1 * MS, 1000 * GiB);
	uint64_t forged = nvs_policy_handoff_ns(&g);
	assert_true(forged > 0);
	assert_true(forged < got);
	assert_true(nvs_policy_tq_ns(&g) >= 1000 * MS);

	/* Slow reports are cut to the floor rate, so a forger cannot stretch
	 * the quantum beyond 4 x TQ either. */
	for (int i = 0; i < 9; i++)
		sample(&w, 60000 * MS, 1792 * MiB, 60000 * MS, 1792 * MiB);
	assert_int_equal(nvs_policy_tq_ns(&g), 4000 * MS);

	/* Nobody waits: no hand-off in sight, the median times. */
	g.qhead = NULL;
	assert_int_equal(nvs_policy_handoff_ns(&g), nvs_bounds_swap_median(&g));
}

/* The hold's quantum follows the price up, never down: a holder that frees
 * memory at the end of its job is not cut there (policy.c hold_quantum_ns).
 * Two 2.07 GiB clients over a 3 GiB capacity, as the H200 benchmark whose
 * holders were cut 17 ms into freeing their tensors. */
static void test_quantum_not_cut_by_frees(void **state)
{
	(void)state;
	h_setup(1, 3 * GiB, NVS_MODE_AUTO, 1000);
	struct bot *ab[2];
	h_clients(ab, 2, 0, 2120 * MiB, 1);
	struct bot *a = ab[0], *b = ab[1];
	assert_true(a->holding);
	assert_true(b->waiting);
	struct gpu *gp = a->cg->gpu;
	/* Swap speeds known (~44 GB/s each way). */
	for (int i = 0; i < 3; i++)
		sample(a->cg, 28 * MS, 1178 * MiB, 28 * MS, 1178 * MiB);
	uint64_t t0 = gp->grant_ns;
	uint64_t q0 = nvs_policy_tq_ns(gp);
	assert_true(q0 > 1200 * MS);
	h_advance(1 * MS);

	/* 100 ms before the quantum ends, the holder frees a third of its
	 * memory: its hand-off is cheaper, the live price below the time it
	 * has held, but the quantum it was priced at stands. */
	h_run_until(t0 + q0 - 100 * MS);
	h_mem(a, 1413 * MiB);
	assert_true(nvs_policy_tq_ns(gp) < h_now - t0);
	h_advance(50 * MS);
	assert_int_equal(h_count(a, NVS_MSG_DROP_LOCK), 0);
	/* It ends there, as priced. */
	h_run_until(t0 + q0);
	assert_int_equal(h_count(a, NVS_MSG_DROP_LOCK), 1);
	assert_int_equal(h_last(a, NVS_MSG_DROP_LOCK)->t, t0 + q0);
	h_teardown();

	/* Growth lengthens the hold; a changed factor applies at once. */
	h_setup(1, 3 * GiB, NVS_MODE_AUTO, 1000);
	h_clients(ab, 2, 0, 2120 * MiB, 1);
	a = ab[0];
	gp = a->cg->gpu;
	for (int i = 0; i < 3; i++)
		sample(a->cg, 28 * MS, 1178 * MiB, 28 * MS, 1178 * MiB);
	t0 = gp->grant_ns;
	q0 = nvs_policy_tq_ns(gp);
	h_advance(100 * MS);
	h_mem(a, 2800 * MiB);
	uint64_t q1 = nvs_policy_tq_ns(gp);
	assert_true(q1 > q0);
	h_run_until(t0 + q0 + 1 * MS);
	assert_int_equal(h_count(a, NVS_MSG_DROP_LOCK), 0);
	S.cfg.swap_tq_factor = 0; /* off: the bare TQ, long passed */
	nvs_policy_settings_changed(gp, h_now);
	h_advance(1 * MS);
	assert_int_equal(h_count(a, NVS_MSG_DROP_LOCK), 1);
	h_teardown();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_handoff_price),
	    cmocka_unit_test(test_quantum_not_cut_by_frees),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
