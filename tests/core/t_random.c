/*
 * Randomized schedules with fixed seeds (printed on failure; replay one
 * with NVS_CORE_SEED=N, run more with NVS_CORE_SEEDS=N; NVS_CORE_TRACE=1
 * prints a hash of each schedule's messages, to compare two builds of the
 * core that should decide alike): clients of random
 * tenants, sizes, classes and habits (work, think, drain; some tenants
 * ignore DROP_LOCK) on a GPU in mode on, and under co-scheduling. After
 * every step of every schedule the harness checks (h_check):
 *  - the clients hold exactly when the core says they do;
 *  - serialized without a running set: at most one holder;
 *  - a running set of two or more fits the capacity;
 *  - no honest waiter waits past its bound.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static unsigned seeds(void)
{
	const char *e = getenv("NVS_CORE_SEEDS");
	return e ? (unsigned)strtoul(e, NULL, 10) : 100;
}

static uint64_t first_seed(void)
{
	const char *e = getenv("NVS_CORE_SEED");
	return e ? strtoull(e, NULL, 10) : 1;
}

static unsigned count(void)
{
	return getenv("NVS_CORE_SEED") ? 1 : seeds();
}

/* Mode on: FCFS by tenant turns, TQ, grace, revocation. A turn lasts at
 * most TQ + grace; a waiter of a tenant with k connections waits at most k
 * turns of its tenant, each behind one turn of every other tenant. */
static void one_lock(uint64_t seed)
{
	h_srand(seed);
	uint64_t tq = h_rand_range(5, 50);
	h_setup(1, 64 * GiB, NVS_MODE_ON, tq); /* the draws go on */
	S.cfg.drop_grace_ms = (uint32_t)h_rand_range(5, 30);
	unsigned n = (unsigned)h_rand_range(2, 10), tenants = (unsigned)h_rand_range(1, n);
	unsigned conns[16] = {0}, hog_tenant = h_rand() % 4 == 0 ? 1 : 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned t = (unsigned)h_rand_range(1, tenants);
		uint64_t work = h_rand() % 3 == 0 ? 0 : h_rand_range(1, 3 * tq) * MS;
		uint64_t think = h_rand_range(0, 2 * tq) * MS;
		uint64_t drain = h_rand_range(0, S.cfg.drop_grace_ms - 1) * MS;
		struct bot *b = h_bot(t, 0, GiB, work, think, drain);
		b->ignores_drop = hog_tenant && t == 1;
		conns[t]++;
	}
	unsigned most = 0;
	for (unsigned t = 1; t <= tenants; t++)
		most = conns[t] > most ? conns[t] : most;
	h_invariants = H_INV_AGREE | H_INV_ONE_HOLDER | H_INV_WAIT;
	/* The holder when it queued (one turn), then its tenant's turns. */
	h_wait_bound = (uint64_t)(most * tenants + 1) * (tq + S.cfg.drop_grace_ms) * MS;
	h_run_until(h_now + 5 * SEC);
	if (getenv("NVS_CORE_TRACE"))
		print_message("# lock seed %llu trace %016llx\n", (unsigned long long)seed,
			      (unsigned long long)h_trace);
	h_teardown();
}

/* Mode auto with the memory not fitting: co-scheduled sets of random
 * sizes and classes. Bound: the doc's 2 TQ + grace per waiter ahead, plus
 * the burst's preemption bound and slice. */
static void one_cosched(uint64_t seed)
{
	h_srand(seed);
	uint64_t tq = h_rand_range(20, 100);
	h_setup(1, 10 * GiB, NVS_MODE_AUTO, tq);
	S.cfg.drop_grace_ms = (uint32_t)h_rand_range(10, 50);
	unsigned n = (unsigned)h_rand_range(3, 8);
	struct bot *bs[8];
	for (unsigned i = 0; i < n; i++) {
		uint64_t size = h_rand_range(1, 6) * GiB;
		uint32_t cls = h_rand() % 3 == 0 ? NVS_HELLO_PRIO_INTERACTIVE : 0;
		struct bot *b = h_client(i + 1, 0, size, cls);
		b->autopilot = 1;
		b->work_ns = cls ? h_rand_range(5, 40) * MS : 0;
		b->think_ns = cls ? h_rand_range(10, 200) * MS : h_rand_range(0, 20) * MS;
		b->drain_ns = h_rand_range(0, S.cfg.drop_grace_ms - 1) * MS;
		b->ignores_drop = h_rand() % 8 == 0; /* revoked, as primary or guest */
		bs[i] = b;
	}
	/* Every client asks once the GPU is serialized (the attach that
	 * serialized it told those before it, who ask on their own). */
	for (unsigned i = 0; i < n; i++)
		if (bs[i]->mode > 0 && !bs[i]->holding && !bs[i]->waiting)
			h_req(bs[i]);
	h_invariants = H_INV_AGREE | H_INV_SET_FITS | H_INV_WAIT;
	h_wait_bound = (uint64_t)n * (2 * tq + S.cfg.drop_grace_ms + 150) * MS;
	h_run_until(h_now + 5 * SEC);
	if (getenv("NVS_CORE_TRACE"))
		print_message("# cosched seed %llu trace %016llx\n", (unsigned long long)seed,
			      (unsigned long long)h_trace);
	h_teardown();
}

static void test_random_lock(void **state)
{
	(void)state;
	uint64_t s0 = first_seed();
	for (unsigned k = 0; k < count(); k++)
		one_lock(s0 + k);
}

static void test_random_cosched(void **state)
{
	(void)state;
	uint64_t s0 = first_seed();
	for (unsigned k = 0; k < count(); k++)
		one_cosched(s0 + k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_lock),
	    cmocka_unit_test(test_random_cosched),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
