/*
 * Co-scheduling in virtual time (docs/scheduler.md "Co-scheduling: the
 * running set", its bounds table): what fits runs together, a burst that
 * does not fit preempts batch at max(asked + preempt, batch grant + slice)
 * and not a nanosecond earlier, gets the GPU after the batch's drain, the
 * preempted batch client goes back to the head, a guest is promoted when
 * the primary leaves, and batch keeps its floor under a storm of bursts.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#define AT(b, type) (h_last((b), (type)) ? h_last((b), (type))->t : 0)

static uint64_t ran(const struct bot *b)
{
	return b->run_ns + (b->holding ? h_now - b->granted_at : 0);
}

/* Capacity 10 GiB: A 6 + B 3 fit, C 6 does not fit beside them. */
static void test_fits_run_together(void **state)
{
	(void)state;
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	h_invariants = H_INV_AGREE | H_INV_SET_FITS;
	struct bot *a = h_client(1, 0, 6 * GiB, 0), *b = h_client(2, 0, 3 * GiB, 0),
		   *c = h_client(3, 0, 6 * GiB, 0);
	assert_int_equal(h_gpu(0)->serialized, 1); /* 15 GiB > 10 */
	assert_int_equal(nvs_cosched_active(h_gpu(0)), 1);
	h_req(a);
	h_req(b);
	h_req(c);
	assert_int_equal(a->holding, 1);
	assert_int_equal(b->holding, 1); /* a guest: fits beside A */
	assert_int_equal(c->holding, 0);
	assert_ptr_equal(h_gpu(0)->holder, a->cg);
	assert_int_equal(b->cg->co.guest, 1);
	assert_int_equal(nvs_cosched_running(h_gpu(0)), 2);
	/* Guests hear about waiters too. */
	assert_int_equal(h_last(b, NVS_MSG_WAITERS)->value, 1);
	/* The primary leaves: the guest is promoted; C fits beside B. */
	h_advance(10 * MS);
	h_release(a, NVS_RELEASED_IDLE);
	assert_ptr_equal(h_gpu(0)->holder, b->cg);
	assert_int_equal(b->cg->co.guest, 0);
	assert_int_equal(h_events("promote"), 1);
	assert_int_equal(c->holding, 1);
	assert_int_equal(AT(c, NVS_MSG_LOCK_OK), h_now);
	/* Mode on takes the set over: the guest is asked to drop. */
	h_gpu(0)->mode = NVS_MODE_ON;
	nvs_policy_settings_changed(h_gpu(0), h_now);
	h_advance(MS);
	assert_int_equal(h_last(c, NVS_MSG_DROP_LOCK)->t, h_now - MS);
	assert_int_equal(h_gpu(0)->co.preempt_fit, 1);
	h_teardown();
}

/* Every member of the running set has the same DROP_LOCK state machine:
 * the quantum when someone waits who does not fit, the resend at half the
 * grace, the revocation at its end; a member promoted to primary keeps
 * the state it had as a guest. */
/* Primary A and guest B run together (TQ 100 ms, grace 40 ms); C, which
 * fits beside neither, asks 1 ms later. Returns the start time. */
static uint64_t set_with_waiter(struct bot **a, struct bot **b, struct bot **c)
{
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	h_invariants = H_INV_AGREE | H_INV_SET_FITS;
	S.cfg.drop_grace_ms = 40;
	*a = h_client(1, 0, 6 * GiB, 0);
	*b = h_client(2, 0, 3 * GiB, 0);
	*c = h_client(3, 0, 8 * GiB, 0);
	uint64_t t0 = h_now;
	h_req(*a);
	h_req(*b);
	h_advance(MS);
	h_req(*c);
	assert_int_equal((*b)->cg->co.guest, 1);
	return t0;
}

static void test_member_drops(void **state)
{
	(void)state;
	struct bot *a, *b, *c;
	uint64_t t0 = set_with_waiter(&a, &b, &c);
	h_run_until(t0 + 100 * MS);
	for (struct bot *m[] = {a, b, NULL}, **p = m; *p; p++) {
		assert_int_equal(AT(*p, NVS_MSG_DROP_LOCK), t0 + 100 * MS);
		assert_int_equal(h_last(*p, NVS_MSG_DROP_LOCK)->value, 40);
	}
	h_run_until(t0 + 120 * MS);
	for (struct bot *m[] = {a, b, NULL}, **p = m; *p; p++) {
		assert_int_equal(AT(*p, NVS_MSG_DROP_LOCK), t0 + 120 * MS);
		assert_int_equal(h_last(*p, NVS_MSG_DROP_LOCK)->value, 20);
	}
	/* The primary releases: B is promoted with its drop state. */
	h_run_until(t0 + 130 * MS);
	h_release(a, 0);
	assert_ptr_equal(h_gpu(0)->holder, b->cg);
	assert_int_equal(b->cg->drop.sent, 1);
	assert_int_equal(b->cg->drop.deadline_ns, t0 + 140 * MS);
	h_run_until(t0 + 140 * MS - 1);
	assert_int_equal(b->holding, 1);
	h_run_until(t0 + 140 * MS);
	assert_int_equal(h_last(b, NVS_MSG_DROP_LOCK)->value, 0); /* revoked */
	assert_int_equal(b->revokes, 1);
	assert_int_equal(AT(c, NVS_MSG_LOCK_OK), t0 + 140 * MS);
	assert_int_equal(h_gpu(0)->st.drops, 2);
	assert_int_equal(h_gpu(0)->st.revocations, 1);
	assert_int_equal(h_gpu(0)->co.preempt_tq, 2);
	h_teardown();
}

/* A guest that lets its grace end is revoked as the primary is: counted,
 * told, and its tenant waits one quantum (the penalty of tenant turns; a
 * guest used to leave the set without it, so a hostile tenant admitted as a
 * guest could ignore DROP_LOCK for free). */
static void test_guest_revoked(void **state)
{
	(void)state;
	struct bot *a, *b, *c;
	uint64_t t0 = set_with_waiter(&a, &b, &c);
	h_run_until(t0 + 140 * MS);
	for (struct bot *m[] = {a, b, NULL}, **p = m; *p; p++) {
		assert_int_equal(h_last(*p, NVS_MSG_DROP_LOCK)->value, 0);
		assert_int_equal((*p)->revokes, 1);
		assert_int_equal((*p)->cg->penalty_until_ns, t0 + 240 * MS);
		assert_int_equal(nvs_fair_tenant_revocations((*p)->cl), 1);
	}
	assert_int_equal(h_events("revoke"), 2);
	assert_int_equal(h_gpu(0)->st.revocations, 2);
	assert_int_equal(AT(c, NVS_MSG_LOCK_OK), t0 + 140 * MS);
	h_teardown();
}

/* A burst (declared interactive) that does not fit: batch is asked to drop
 * at max(asked + 50 ms, batch grant + 100 ms), never earlier; the burst is
 * granted once the batch drained; the batch client re-queues at the head
 * and gets the GPU back when the burst idles. */
static void burst_preempts(uint64_t asked_after)
{
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 1000);
	h_invariants = H_INV_AGREE | H_INV_SET_FITS;
	struct bot *a = h_client(1, 0, 6 * GiB, 0), *b = h_client(2, 0, 3 * GiB, 0);
	struct bot *d = h_client(3, 0, 6 * GiB, NVS_HELLO_PRIO_INTERACTIVE);
	struct bot *w = h_client(4, 0, 6 * GiB, 0); /* attached, idle: counts */
	(void)w;
	uint64_t t0 = h_now;
	h_req(a);
	h_req(b);
	assert_int_equal(b->holding, 1);
	h_run_until(t0 + asked_after);
	uint64_t t1 = h_now;
	h_req(d);
	uint64_t due = t1 + 50 * MS > t0 + 100 * MS ? t1 + 50 * MS : t0 + 100 * MS;
	h_run_until(due - 1);
	assert_null(h_last(a, NVS_MSG_DROP_LOCK));
	assert_null(h_last(b, NVS_MSG_DROP_LOCK));
	h_run_until(due);
	assert_int_equal(AT(a, NVS_MSG_DROP_LOCK), due);
	assert_int_equal(AT(b, NVS_MSG_DROP_LOCK), due);
	assert_true(h_gpu(0)->co.preempt_interactive >= 1);
	/* Both drain in 5 ms: the burst is granted when the memory it needs
	 * is free (B, small, may run again beside the draining A). */
	h_run_until(due + 5 * MS);
	h_release(b, 0);
	assert_int_equal(d->holding, 0);
	h_req(b);
	h_release(a, 0);
	assert_int_equal(AT(d, NVS_MSG_LOCK_OK), due + 5 * MS);
	/* Preempted: A asks again and goes to the head of the queue. */
	h_req(a);
	assert_ptr_equal(h_gpu(0)->qhead, a->cg);
	/* The burst idles after 15 ms: batch runs again at once. */
	h_run_until(due + 20 * MS);
	h_release(d, NVS_RELEASED_IDLE);
	assert_int_equal(a->holding, 1);
	assert_int_equal(AT(a, NVS_MSG_LOCK_OK), due + 20 * MS);
	h_teardown();
}

static void test_burst_bound_by_slice(void **state)
{
	(void)state;
	burst_preempts(20 * MS); /* asked early: the batch's slice decides */
}

static void test_burst_bound_by_preempt(void **state)
{
	(void)state;
	burst_preempts(300 * MS); /* asked late: ask + 50 ms decides */
}

/* Device-memory clients (scheduler.md "Device-memory clients"): their
 * memory cannot move, so it counts whether they run or not, they are never
 * asked to move any (no SWAP_HINT, no swap-out bytes in a DROP_LOCK), and a
 * running set never drops one to make room. Capacity 10 GiB. */
static void test_device_memory(void **state)
{
	(void)state;
	/* 1. An idle device-memory client's 4 GiB count: A 4 + C 4 would fit
	 * in 10 GiB, beside D's 4 they do not, so C waits. The control run
	 * (D's memory managed) lets C in as a guest. */
	for (int dm = 0; dm <= 1; dm++) {
		h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
		h_invariants = H_INV_AGREE | H_INV_SET_FITS;
		struct bot *d = h_client(1, 0, 4 * GiB, dm ? NVS_HELLO_DEVICE_MEMORY : 0);
		struct bot *a = h_client(2, 0, 4 * GiB, NVS_HELLO_SWAP_HINT),
			   *c = h_client(3, 0, 4 * GiB, 0);
		(void)d;
		assert_int_equal(h_gpu(0)->serialized, 1); /* 12 GiB > 10 */
		h_req(a);
		h_req(c);
		assert_int_equal(a->holding, 1);
		assert_int_equal(c->holding, !dm);
		h_teardown();
	}
	/* 2. Turns: D 4 GiB (device memory), A 6, C 4; A and D say they
	 * understand SWAP_HINT. With C waiting, A (managed) is hinted and asked
	 * to move out what C lacks room for; D, a guest beside C when A waits
	 * (A fits beside neither), is asked to drop like any member but never
	 * to move memory, and is never hinted. */
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	h_invariants = H_INV_AGREE | H_INV_SET_FITS;
	struct bot *d = h_client(1, 0, 4 * GiB, NVS_HELLO_DEVICE_MEMORY | NVS_HELLO_SWAP_HINT);
	struct bot *a = h_client(2, 0, 6 * GiB, NVS_HELLO_SWAP_HINT),
		   *c = h_client(3, 0, 4 * GiB, 0);
	h_req(a);
	h_req(c);
	assert_int_equal(a->holding, 1);
	assert_int_equal(c->holding, 0);
	/* C needs 4 GiB and none is free (D's 4 always count). */
	assert_int_equal(h_last(a, NVS_MSG_SWAP_HINT)->value, 4096);
	h_advance(100 * MS); /* A's quantum */
	const struct h_msg *m = h_last(a, NVS_MSG_DROP_LOCK);
	assert_non_null(m);
	assert_true((m->flags & NVS_LOCK_SWAP_OUT) != 0);
	h_release(a, 0);
	assert_int_equal(c->holding, 1);
	h_req(d); /* fits beside C: a guest */
	assert_int_equal(d->holding, 1);
	h_req(a);
	assert_int_equal(a->holding, 0);
	h_advance(100 * MS); /* the members' quantum, A waiting */
	m = h_last(d, NVS_MSG_DROP_LOCK);
	assert_non_null(m);
	assert_int_equal(m->flags & NVS_LOCK_SWAP_OUT, 0);
	assert_non_null(h_last(c, NVS_MSG_DROP_LOCK));
	assert_int_equal(h_count(d, NVS_MSG_SWAP_HINT), 0);
	h_release(c, 0);
	h_release(d, 0);
	assert_int_equal(a->holding, 1);
	h_teardown();
	/* 3. A burst that does not fit beside batch members D (device memory,
	 * the primary) and B: B is dropped to make room, D never is (dropping
	 * it frees nothing), and the burst runs beside D. */
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 1000);
	h_invariants = H_INV_AGREE | H_INV_SET_FITS;
	d = h_client(1, 0, 4 * GiB, NVS_HELLO_DEVICE_MEMORY | NVS_HELLO_PRIO_BATCH);
	struct bot *b = h_client(2, 0, 3 * GiB, NVS_HELLO_PRIO_BATCH);
	struct bot *i = h_client(3, 0, 5 * GiB, NVS_HELLO_PRIO_INTERACTIVE);
	h_req(d);
	h_req(b);
	assert_int_equal(d->holding, 1);
	assert_int_equal(b->holding, 1);
	uint64_t t0 = h_now;
	h_req(i);
	h_run_until(t0 + 100 * MS); /* the batch's slice, then the preemption */
	assert_non_null(h_last(b, NVS_MSG_DROP_LOCK));
	assert_null(h_last(d, NVS_MSG_DROP_LOCK));
	h_advance(5 * MS);
	h_release(b, 0);
	assert_int_equal(i->holding, 1);
	assert_int_equal(d->holding, 1);
	h_teardown();
}

/* Observed class: two short holds, each ended by an idle release and
 * followed by a pause longer than the hold, make a client interactive; a
 * client that asks again sooner than it held stays batch (a training
 * loop's short gaps); a long hold makes it batch again. Under memory
 * pressure a member that declared no class is told WAITERS 1 with nobody
 * waiting (the probe: its bursts show), a declared batch one is not. */
static void test_observed_class(void **state)
{
	(void)state;
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	struct bot *a = h_client(1, 0, 6 * GiB, 0), *b = h_client(2, 0, 6 * GiB, 0);
	struct bot *c = h_client(3, 0, GiB, NVS_HELLO_PRIO_BATCH);
	const char *src;
	assert_int_equal(nvs_cosched_interactive(a->cg, &src), 0);
	assert_string_equal(src, "observed");
	h_req(a);
	assert_int_equal(h_last(a, NVS_MSG_WAITERS)->value, 1); /* the probe */
	h_release(a, NVS_RELEASED_IDLE);
	h_req(c);
	assert_null(h_last(c, NVS_MSG_WAITERS)); /* declared batch: told 0 */
	h_release(c, NVS_RELEASED_IDLE);
	/* Short gaps: stays batch. */
	for (int i = 0; i < 3; i++) {
		h_req(a);
		h_advance(20 * MS);
		h_release(a, NVS_RELEASED_IDLE);
		h_advance(MS);
	}
	h_req(a);
	assert_int_equal(nvs_cosched_interactive(a->cg, NULL), 0);
	h_release(a, NVS_RELEASED_IDLE);
	/* Bursts with longer pauses: interactive. */
	for (int i = 0; i < 2; i++) {
		h_advance(50 * MS);
		h_req(a);
		h_advance(20 * MS);
		h_release(a, NVS_RELEASED_IDLE);
	}
	h_advance(50 * MS);
	assert_int_equal(nvs_cosched_interactive(a->cg, NULL), 1);
	h_req(a);
	h_advance(2 * SEC);
	h_release(a, NVS_RELEASED_IDLE);
	assert_int_equal(nvs_cosched_interactive(a->cg, NULL), 0);
	(void)b;
	h_teardown();
}

/* A storm of bursts: batch keeps at least its floor (50 %) of the time it
 * wants, over the window. (Checked against the core with the floor
 * lowered by 10 points: 42.5 %, caught.) */
static void test_batch_floor(void **state)
{
	(void)state;
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, 100);
	h_invariants = H_INV_AGREE | H_INV_SET_FITS;
	S.cfg.drop_grace_ms = 200;
	/* Short bounds: without the floor the bursts would take ~3/4. */
	nvs_cosched_cfg.min_slice_ms = 20;
	nvs_cosched_cfg.preempt_ms = 10;
	/* Batch: runs until dropped, drains 5 ms, asks again at once. */
	struct bot *bt = h_bot(1, 0, 6 * GiB, 0, 0, 5 * MS);
	struct bot *in[4];
	for (unsigned i = 0; i < 4; i++) {
		in[i] = h_client(2 + i, 0, 6 * GiB, NVS_HELLO_PRIO_INTERACTIVE);
		in[i]->autopilot = 1;
		in[i]->work_ns = 60 * MS; /* bursts of 60 ms, 5 ms apart: they */
		in[i]->think_ns = 5 * MS; /* alone would keep the GPU busy */
		in[i]->drain_ns = 2 * MS;
		h_advance(7 * MS);
		h_req(in[i]);
	}
	h_advance(2 * SEC);
	uint64_t r0 = ran(bt), t0 = h_now;
	h_advance(10 * SEC);
	double share = 100.0 * (double)(ran(bt) - r0) / (double)(h_now - t0);
	print_message("# batch share %.2f %%, preemptions: interactive %llu floor %llu\n", share,
		      (unsigned long long)h_gpu(0)->co.preempt_interactive,
		      (unsigned long long)h_gpu(0)->co.preempt_floor);
	if (share < 50.0) {
		print_error("batch share %.2f %% under the storm, floor 50 %%\n", share);
		fail();
	}
	assert_true(nvs_cosched_batch_share(h_gpu(0)) >= 50);
	/* The bursts ran too. */
	for (unsigned i = 0; i < 4; i++)
		assert_true(in[i]->grants > 10);
	/* The floor binds here: batch is not far above it either (the
	 * bursts got the rest; without the floor they take ~3/4). */
	assert_true(share < 60.0);
	h_teardown();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fits_run_together),
	    cmocka_unit_test(test_burst_bound_by_slice),
	    cmocka_unit_test(test_burst_bound_by_preempt),
	    cmocka_unit_test(test_member_drops),
	    cmocka_unit_test(test_guest_revoked),
	    cmocka_unit_test(test_observed_class),
	    cmocka_unit_test(test_batch_floor),
	    cmocka_unit_test(test_device_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
