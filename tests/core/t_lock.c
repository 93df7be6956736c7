/*
 * The lock in virtual time (docs/scheduler.md "Modes", "Lock: FCFS, time
 * quantum, drop, revocation", "Client claims"): turns in arrival order,
 * TQ expiry -> DROP_LOCK, the resend at half the grace, revocation at its
 * end, the revocation penalty, auto mode and its switch budget, the
 * GPU_MODE owed to a client that is not reading, doomed waiters passed
 * over, claim clamps and the report budget, and many clients at once.
 * Times are exact: the core runs on the harness's clock.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define AT(b, type) (h_last((b), (type)) ? h_last((b), (type))->t : 0)

/* FCFS + TQ + grace + revocation + penalty, one GPU in mode on. */
static void test_lock_turns(void **state)
{
	(void)state;
	h_setup(1, 16 * GiB, NVS_MODE_ON, 100);
	h_invariants = H_INV_AGREE | H_INV_ONE_HOLDER;
	S.cfg.drop_grace_ms = 40;
	struct bot *abc[3];
	h_clients(abc, 3, 0, GiB, 0);
	struct bot *a = abc[0], *b = abc[1], *c = abc[2];
	/* Mode on: serialized from the first attach, everyone told. */
	assert_int_equal(h_gpu(0)->serialized, 1);
	assert_int_equal(h_last(a, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_SERIALIZED);
	assert_int_equal(h_last(c, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_SERIALIZED);
	/* Nobody is granted before asking. */
	assert_null(h_last(a, NVS_MSG_LOCK_OK));

	uint64_t t0 = h_now;
	h_req(a);
	assert_int_equal(AT(a, NVS_MSG_LOCK_OK), t0);
	assert_int_equal(h_last(a, NVS_MSG_LOCK_OK)->value, 100); /* the quantum */
	h_advance(1 * MS);
	h_req(b);
	h_advance(1 * MS);
	h_req(c);
	/* The holder is told how many wait, each time it changes. */
	assert_int_equal(h_last(a, NVS_MSG_WAITERS)->value, 2);
	assert_int_equal(h_count(a, NVS_MSG_WAITERS), 2);

	/* TQ: DROP_LOCK exactly at grant + TQ, not a nanosecond before. */
	h_run_until(t0 + 100 * MS - 1);
	assert_null(h_last(a, NVS_MSG_DROP_LOCK));
	h_run_until(t0 + 100 * MS);
	assert_int_equal(AT(a, NVS_MSG_DROP_LOCK), t0 + 100 * MS);
	assert_int_equal(h_last(a, NVS_MSG_DROP_LOCK)->value, 40);
	assert_int_equal(h_gpu(0)->st.drops, 1);

	/* Released after 10 ms: the next in arrival order at once. */
	h_run_until(t0 + 110 * MS);
	h_release(a, 0);
	assert_int_equal(AT(b, NVS_MSG_LOCK_OK), t0 + 110 * MS);
	assert_null(h_last(c, NVS_MSG_LOCK_OK));
	assert_int_equal(h_gpu(0)->st.drain_ns, 10 * MS);
	/* An idle release before the quantum: the next one, no DROP. */
	h_run_until(t0 + 150 * MS);
	h_release(b, NVS_RELEASED_IDLE);
	assert_null(h_last(b, NVS_MSG_DROP_LOCK));
	assert_int_equal(AT(c, NVS_MSG_LOCK_OK), t0 + 150 * MS);
	assert_int_equal(h_gpu(0)->handoffs, 2);

	/* C ignores DROP_LOCK: resent at half the grace with what is left,
	 * revoked at its end, the waiter granted in the same step. */
	h_run_until(t0 + 160 * MS);
	h_req(a);
	h_run_until(t0 + 250 * MS);
	assert_int_equal(AT(c, NVS_MSG_DROP_LOCK), t0 + 250 * MS);
	h_run_until(t0 + 270 * MS);
	assert_int_equal(AT(c, NVS_MSG_DROP_LOCK), t0 + 270 * MS);
	assert_int_equal(h_last(c, NVS_MSG_DROP_LOCK)->value, 20);
	h_run_until(t0 + 290 * MS - 1);
	assert_int_equal(c->holding, 1);
	h_run_until(t0 + 290 * MS);
	assert_int_equal(h_last(c, NVS_MSG_DROP_LOCK)->value, 0); /* "no longer yours" */
	assert_int_equal(c->holding, 0);
	assert_int_equal(AT(a, NVS_MSG_LOCK_OK), t0 + 290 * MS);
	assert_int_equal(h_gpu(0)->st.revocations, 1);
	assert_int_equal(h_events("revoke"), 1);
	/* Its late LOCK_RELEASED is ignored. */
	nvs_policy_released(c->cg, 0, 0, h_now);
	assert_ptr_equal(h_gpu(0)->holder, a->cg);

	/* Penalty: the revoked tenant waits one quantum (until t0 + 390)
	 * even with the lock free; others are served meanwhile. */
	h_run_until(t0 + 291 * MS);
	h_req(c);
	h_run_until(t0 + 300 * MS);
	h_req(b);
	h_run_until(t0 + 310 * MS);
	h_release(a, NVS_RELEASED_IDLE);
	assert_int_equal(AT(b, NVS_MSG_LOCK_OK), t0 + 310 * MS);
	h_run_until(t0 + 320 * MS);
	h_release(b, NVS_RELEASED_IDLE);
	assert_null(h_gpu(0)->holder);
	h_run_until(t0 + 390 * MS - 1);
	assert_null(h_gpu(0)->holder);
	h_run_until(t0 + 390 * MS);
	assert_int_equal(AT(c, NVS_MSG_LOCK_OK), t0 + 390 * MS);
	assert_int_equal(h_gpu(0)->revoke_penalties, 1);

	/* A lone holder is never asked to drop, however long it holds. */
	h_clear(c);
	h_run_until(t0 + 60 * SEC);
	assert_int_equal(h_count(c, NVS_MSG_DROP_LOCK), 0);
	assert_int_equal(c->holding, 1);
	/* The waiters leave during a grace: no revocation. */
	h_req(a);
	h_run_until(h_now + 10 * MS);
	assert_int_equal(h_count(c, NVS_MSG_DROP_LOCK), 1);
	h_gone(a);
	h_run_until(h_now + 100 * MS);
	assert_int_equal(h_count(c, NVS_MSG_DROP_LOCK), 1);
	assert_int_equal(c->holding, 1);
	assert_int_equal(h_gpu(0)->st.revocations, 1);
	h_teardown();
}

/* A holder that disconnects: the waiter is granted in the same step. */
static void test_disconnect_handoff(void **state)
{
	(void)state;
	h_setup(1, 16 * GiB, NVS_MODE_ON, 100);
	struct bot *a = h_client(1, 0, GiB, 0), *b = h_client(2, 0, GiB, 0);
	h_req(a);
	h_advance(5 * MS);
	h_req(b);
	h_advance(5 * MS);
	h_gone(a);
	assert_int_equal(AT(b, NVS_MSG_LOCK_OK), h_now);
	h_teardown();
}

/* Auto: concurrent while the clients' memory fits; serialized (GPU_MODE 1
 * to all, nobody granted) when it does not; back when it fits again. */
static void test_auto_mode(void **state)
{
	(void)state;
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	struct bot *a = h_client(1, 0, 4 * GiB, 0), *b = h_client(2, 0, 4 * GiB, 0);
	assert_int_equal(h_gpu(0)->serialized, 0);
	assert_int_equal(h_last(a, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_CONCURRENT);
	assert_int_equal(h_last(b, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_CONCURRENT);
	h_advance(MS);
	h_mem(b, 7 * GiB); /* 11 GiB > 10 */
	assert_int_equal(h_gpu(0)->serialized, 1);
	assert_int_equal(h_last(a, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_SERIALIZED);
	assert_int_equal(AT(a, NVS_MSG_GPU_MODE), h_now);
	assert_int_equal(h_last(b, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_SERIALIZED);
	assert_null(h_gpu(0)->holder); /* nobody granted in advance */
	/* Does not fit: one at a time. */
	h_req(a);
	h_req(b);
	assert_int_equal(a->holding, 1);
	assert_int_equal(b->holding, 0);
	/* Fits again: concurrent, holder and queue cleared, hold accounted. */
	h_advance(30 * MS);
	h_mem(b, 5 * GiB);
	assert_int_equal(h_gpu(0)->serialized, 0);
	assert_null(h_gpu(0)->holder);
	assert_null(h_gpu(0)->qhead);
	assert_int_equal(h_last(a, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_CONCURRENT);
	assert_int_equal(a->cg->st.held_ns, 30 * MS);
	/* A REQ_LOCK that raced the switch: GPU_MODE(0) repeated. */
	h_clear(b);
	nvs_policy_req_lock(b->cg, h_now);
	assert_int_equal(h_count(b, NVS_MSG_GPU_MODE), 1);
	assert_int_equal(h_last(b, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_CONCURRENT);
	/* The Pod's memory request counts when larger than what it has. */
	nvs_limits_set_from(a->cl, NVS_LIMIT_SRC_REQUEST, 0, 6 * GiB, h_now);
	assert_int_equal(nvs_policy_expected(h_gpu(0)), 11 * GiB);
	assert_int_equal(h_gpu(0)->serialized, 1);
	h_teardown();
}

/* The mode-switch budget: a client flapping its memory every 10 ms for 3 s
 * switches the GPU at most burst (4) + 3 s / dwell (1 s) times; the last
 * wanted switch is made when the budget allows. */
static void test_switch_budget(void **state)
{
	(void)state;
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	struct bot *a = h_client(1, 0, 4 * GiB, 0), *b = h_client(2, 0, 4 * GiB, 0);
	(void)a;
	uint64_t t0 = h_now, sw0 = h_gpu(0)->mode_switches;
	S.cfg.report_rate = 1000; /* the memory reports themselves pass */
	for (int i = 0; i < 300; i++) {
		h_mem(b, i % 2 ? 4 * GiB : 8 * GiB);
		h_run_until(t0 + (uint64_t)(i + 1) * 10 * MS);
	}
	uint64_t sw = h_gpu(0)->mode_switches - sw0;
	assert_true(sw >= 4);
	assert_true(sw <= 4 + 3);
	assert_true(h_gpu(0)->switches_deferred > 0);
	/* It ended wanting concurrent (4 GiB): made at the budget's time. */
	h_run_until(h_now + 2 * SEC);
	assert_int_equal(h_gpu(0)->serialized, 0);
	assert_int_equal(h_gpu(0)->switch_pending, 0);
	/* An administrator's change switches at once, budget or not. */
	h_gpu(0)->mode = NVS_MODE_ON;
	nvs_policy_settings_changed(h_gpu(0), h_now);
	assert_int_equal(h_gpu(0)->serialized, 1);
	h_teardown();
}

/* GPU_MODE is owed, not queued, to a client whose output is backed up, and
 * only the latest is sent once it drained (polled every 10 ms). */
static void test_mode_owed(void **state)
{
	(void)state;
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	struct bot *a = h_client(1, 0, 4 * GiB, 0), *b = h_client(2, 0, 4 * GiB, 0);
	h_clear(a);
	h_clear(b);
	a->cl->flags |= NVS_CLIENT_BACKED_UP;
	h_mem(b, 8 * GiB); /* serialized */
	h_advance(20 * MS);
	h_mem(b, 4 * GiB); /* concurrent */
	h_advance(20 * MS);
	h_mem(b, 8 * GiB); /* serialized */
	assert_int_equal(h_count(a, NVS_MSG_GPU_MODE), 0);
	assert_int_equal(h_count(b, NVS_MSG_GPU_MODE), 3);
	uint64_t t = h_now;
	a->cl->flags &= ~NVS_CLIENT_BACKED_UP;
	h_run_until(t + 10 * MS);
	assert_int_equal(h_count(a, NVS_MSG_GPU_MODE), 1);
	assert_int_equal(h_last(a, NVS_MSG_GPU_MODE)->value, NVS_GPU_MODE_SERIALIZED);
	assert_true(AT(a, NVS_MSG_GPU_MODE) <= t + 10 * MS);
	h_teardown();
}

/* A waiter whose connection is closing is not granted (its detach comes
 * in the same loop turn): the next one is. */
static void test_doomed_waiter(void **state)
{
	(void)state;
	h_setup(1, 16 * GiB, NVS_MODE_ON, 100);
	struct bot *abc[3];
	h_clients(abc, 3, 0, GiB, 1);
	struct bot *a = abc[0], *b = abc[1], *c = abc[2];
	b->cl->flags |= NVS_CLIENT_DOOMED;
	h_advance(MS);
	h_release(a, NVS_RELEASED_IDLE);
	assert_null(h_last(b, NVS_MSG_LOCK_OK));
	assert_int_equal(c->holding, 1);
	h_gone(b);
	h_teardown();
}

/* Claims (docs/scheduler.md "Client claims"): the allocation counted is
 * clamped to the memory limit and to capacity x the oversubscription
 * factor (first clamp of each cause an event, every one counted), and
 * MEM_UPDATE is applied at most report-rate times a second (a burst of a
 * second's worth); the rest is coalesced to the latest value and applied
 * when the budget allows. */
static void test_claims(void **state)
{
	(void)state;
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	struct bot *a = h_client(1, 0, GiB, 0);
	nvs_limits_set_from(a->cl, NVS_LIMIT_SRC_ENV, 0, 2 * GiB, h_now);
	h_mem(a, 8 * GiB);
	assert_int_equal(a->cg->claimed, 8 * GiB);
	assert_int_equal(a->cg->allocated, 2 * GiB);
	h_mem(a, 9 * GiB);
	assert_int_equal(h_gpu(0)->claims_clamped, 2);
	assert_int_equal(h_events("claim_clamped"), 1);
	struct bot *b = h_client(2, 0, 100 * GiB, 0);
	assert_int_equal(b->cg->allocated, 40 * GiB); /* 10 GiB x 4 */
	assert_int_equal(h_events("claim_clamped"), 2);
	assert_non_null(strstr(h_event_fields("claim_clamped"), "\"by\":\"capacity\""));

	/* Report budget: 50/s, a burst of 50. */
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	struct bot *c = h_client(1, 0, GiB, 0);
	uint64_t t0 = h_now;
	for (unsigned i = 1; i <= 200; i++)
		h_mem(c, i * MiB);
	assert_int_equal(c->cg->allocated, 50 * MiB); /* the 50th; the rest kept */
	assert_int_equal(c->cl->reports_coalesced, 150);
	h_run_until(t0 + 20 * MS - 1);
	assert_int_equal(c->cg->allocated, 50 * MiB);
	h_run_until(t0 + 20 * MS);
	assert_int_equal(c->cg->allocated, 200 * MiB); /* the latest, one interval on */
	/* Sustained: one report per 20 ms applied. */
	unsigned applied = 0;
	uint64_t last = c->cg->allocated;
	for (unsigned i = 0; i < 1000; i++) {
		h_mem(c, (300 + i) * MiB);
		if (c->cg->allocated != last)
			applied++;
		last = c->cg->allocated;
		h_advance(MS);
	}
	h_run_until(h_now + 20 * MS);
	assert_int_equal(c->cg->allocated, 1299 * MiB); /* nothing lost but the middle */
	assert_true(applied >= 49 && applied <= 51);
	h_teardown();
}

/* Hostile load, memory: n connections of 40 tenants flapping their memory
 * every 10 ms on a GPU where the sum does not fit (co-scheduled sets).
 * The work stays bounded: mode switches by the budget, memory reports by
 * the rate, GPU_MODE per client by the switches. */
static void hostile_memory(unsigned n, uint64_t cap)
{
	h_setup(1, cap, NVS_MODE_AUTO, 10);
	S.cfg.drop_grace_ms = 20;
	/* Members grow after they were admitted here: no SET_FITS (the
	 * newest guests are dropped, reason overcommit). */
	h_invariants = H_INV_AGREE;
	struct bot **bs = calloc(n, sizeof *bs);
	assert_non_null(bs);
	for (unsigned i = 0; i < n; i++)
		bs[i] = h_bot(i % 40, 0, 64 * MiB, 2 * MS, 3 * MS, MS);
	uint64_t t0 = h_now, sw0 = h_gpu(0)->mode_switches;
	for (unsigned k = 0; k < 100; k++) { /* 1 s */
		for (unsigned i = 0; i < n; i++)
			h_mem(bs[i], (k + i) % 2 ? 64 * MiB : 256 * MiB);
		h_run_until(t0 + (k + 1) * 10 * MS);
	}
	uint64_t sw = h_gpu(0)->mode_switches - sw0;
	assert_true(sw <= 4 + 1);
	uint64_t coalesced = 0;
	for (unsigned i = 0; i < n; i++) {
		coalesced += bs[i]->cl->reports_coalesced;
		assert_true(h_count(bs[i], NVS_MSG_GPU_MODE) <= sw + 1);
	}
	/* Applied: at most the burst (50) and 50 a second each. */
	assert_true(coalesced > 0);
	assert_true((uint64_t)n * 100 - coalesced <= (uint64_t)n * (50 + 50));
	free(bs);
	h_teardown();
}

static void test_hostile_memory(void **state)
{
	(void)state;
	hostile_memory(60, 5 * GiB);
}

/* Hostile load, the lock: 400 connections of 40 tenants asking for a GPU
 * in mode on; tenant 0's connections ignore DROP_LOCK (each revoked). Every
 * honest tenant gets turns, no honest waiter waits past its bound, and the
 * core's steps grow with the clients' actions, not faster. */
static void test_hostile_lock(void **state)
{
	(void)state;
	enum { N = 400, T = 40 };
	h_setup(1, 80 * GiB, NVS_MODE_ON, 10);
	S.cfg.drop_grace_ms = 20;
	h_invariants = H_INV_AGREE | H_INV_ONE_HOLDER;
	struct bot *bs[N];
	for (unsigned i = 0; i < N; i++) {
		int hog = i % T == 0;
		bs[i] = h_bot(i % T, 0, 64 * MiB, hog ? 0 : 20 * MS, 0, MS);
		bs[i]->ignores_drop = hog;
	}
	uint64_t t0 = h_now;
	h_run_until(t0 + 10 * SEC);
	/* A turn is at most TQ + grace (30 ms); tenants take turns, so in
	 * 10 s each of the 40 tenants gets about 10 s / 40 turns of ~30 ms. */
	for (unsigned t = 1; t < T; t++) {
		uint64_t g = 0;
		for (unsigned j = t; j < N; j += T)
			g += bs[j]->grants;
		assert_true(g >= 6);
	}
	/* The hog tenant got its turns too, each ended by a revocation. */
	uint64_t hog = 0;
	for (unsigned j = 0; j < N; j += T)
		hog += bs[j]->revokes;
	assert_true(hog > 0);
	assert_true(h_steps < (uint64_t)N * 2000);
	h_teardown();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lock_turns),	 cmocka_unit_test(test_disconnect_handoff),
	    cmocka_unit_test(test_auto_mode),	 cmocka_unit_test(test_switch_budget),
	    cmocka_unit_test(test_mode_owed),	 cmocka_unit_test(test_doomed_waiter),
	    cmocka_unit_test(test_claims),	 cmocka_unit_test(test_hostile_memory),
	    cmocka_unit_test(test_hostile_lock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
