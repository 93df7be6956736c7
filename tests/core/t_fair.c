/*
 * Fairness between tenants in virtual time (docs/scheduler.md "Fairness
 * between tenants"): a tenant with ten connections gets one turn per round
 * like a tenant with one, a new tenant joins at the end of the round, and
 * a revocation's penalty is the whole tenant's.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#define AT(b, type) (h_last((b), (type)) ? h_last((b), (type))->t : 0)

static void test_ten_connections_one_turn(void **state)
{
	(void)state;
	h_setup(1, 16 * GiB, NVS_MODE_ON, 10);
	h_invariants = H_INV_AGREE | H_INV_ONE_HOLDER;
	struct bot *x[10], *y;
	for (unsigned i = 0; i < 10; i++)
		x[i] = h_bot(1, 0, GiB, 0, 0, MS); /* busy: until dropped */
	y = h_bot(2, 0, GiB, 0, 0, MS);
	h_advance(10 * SEC);
	uint64_t gx = 0;
	for (unsigned i = 0; i < 10; i++)
		gx += x[i]->grants;
	/* Turns alternate: X, Y, X, Y ... (11 ms each). */
	assert_true(y->grants >= 400);
	assert_true(gx + 1 >= y->grants && gx <= y->grants + 1);
	/* Inside the tenant, first come first served: its ten share the turn. */
	for (unsigned i = 0; i < 10; i++)
		assert_true(x[i]->grants + 1 >= gx / 10 && x[i]->grants <= gx / 10 + 1);
	h_teardown();
}

/* A, B, C take turns; D joins while A holds: it is served after B and C
 * (who waited) and before A again. */
static void test_new_tenant_end_of_round(void **state)
{
	(void)state;
	h_setup(1, 16 * GiB, NVS_MODE_ON, 100);
	struct bot *abc[3];
	h_clients(abc, 3, 0, GiB, 1); /* one round: A, B, C */
	struct bot *a = abc[0], *b = abc[1], *c = abc[2];
	for (struct bot *r[] = {a, b, c, NULL}, **p = r; *p; p++) {
		assert_int_equal((*p)->holding, 1);
		h_advance(MS);
		h_release(*p, NVS_RELEASED_IDLE);
	}
	/* A again; B and C wait; D arrives. */
	h_req(a);
	h_req(b);
	h_req(c);
	assert_int_equal(a->holding, 1);
	struct bot *d = h_client(4, 0, GiB, 0);
	h_req(d);
	h_advance(MS);
	h_req(a); /* A asks again while holding: nothing changes */
	h_release(a, NVS_RELEASED_IDLE);
	h_req(a);
	struct bot *order[4];
	for (unsigned k = 0; k < 4; k++) {
		order[k] = NULL;
		for (struct bot *r[] = {a, b, c, d}, **p = r; p < r + 4; p++)
			if ((*p)->holding)
				order[k] = *p;
		assert_non_null(order[k]);
		h_advance(MS);
		h_release(order[k], NVS_RELEASED_IDLE);
		h_req(order[k]);
	}
	assert_ptr_equal(order[0], b);
	assert_ptr_equal(order[1], c);
	assert_ptr_equal(order[2], d);
	assert_ptr_equal(order[3], a);
	h_teardown();
}

/* Tenant X's two connections ignore DROP_LOCK: when X1 is revoked, X2 is
 * not granted within the penalty (one quantum) either; Y is. */
static void test_tenant_penalty(void **state)
{
	(void)state;
	h_setup(1, 16 * GiB, NVS_MODE_ON, 100);
	S.cfg.drop_grace_ms = 50;
	struct bot *x1 = h_client(1, 0, GiB, 0), *x2 = h_client(1, 0, GiB, 0),
		   *y = h_client(2, 0, GiB, 0);
	uint64_t t0 = h_now;
	h_req(x1);
	h_req(x2);
	h_req(y);
	/* Revoked at TQ + grace; Y (the other tenant) is next anyway. */
	h_run_until(t0 + 150 * MS);
	assert_int_equal(x1->revokes, 1);
	assert_int_equal(y->holding, 1);
	h_req(x1);
	/* Y releases early: the lock stays free until X's penalty ends
	 * (revocation + one quantum), though X2 and X1 wait. */
	h_run_until(t0 + 160 * MS);
	h_release(y, NVS_RELEASED_IDLE);
	assert_null(h_gpu(0)->holder);
	h_run_until(t0 + 250 * MS - 1);
	assert_null(h_gpu(0)->holder);
	h_run_until(t0 + 250 * MS);
	assert_int_equal(x2->holding, 1); /* X's first waiter */
	assert_int_equal(AT(x2, NVS_MSG_LOCK_OK), t0 + 250 * MS);
	assert_int_equal(nvs_fair_tenant_revocations(x1->cl), 1);
	h_teardown();
}

/* The hog (tests/security/t_hog.sh in virtual time): ten connections of
 * tenant X hold until revoked and ask again at once; an honest Y takes the
 * lock, works 1 ms, releases and comes back 50 ms later. Every wait of Y's
 * is at most one TQ + grace (the holder's revocation), whatever the ten
 * do: they share one turn. Without tenant turns Y would wait for all ten,
 * ~10 x (TQ + grace). */
static void test_hog_wait_bound(void **state)
{
	(void)state;
	h_setup(1, 16 * GiB, NVS_MODE_ON, 300);
	S.cfg.drop_grace_ms = 200;
	h_invariants = H_INV_AGREE | H_INV_ONE_HOLDER | H_INV_WAIT;
	h_wait_bound = 500 * MS;
	struct bot *x[10];
	for (unsigned i = 0; i < 10; i++) {
		x[i] = h_bot(1, 0, GiB, 0, 0, MS);
		x[i]->ignores_drop = 1;
	}
	struct bot *y = h_bot(2, 0, GiB, MS, 50 * MS, MS);
	h_advance(20 * SEC);
	assert_true(y->grants >= 20);
	assert_true(y->max_wait_ns <= 500 * MS);
	/* The ten were revoked (they never release), Y never. */
	uint64_t revokes = 0;
	for (unsigned i = 0; i < 10; i++)
		revokes += x[i]->revokes;
	assert_true(revokes >= 10);
	assert_int_equal(y->revokes, 0);
	print_message("# Y: %llu grants, longest wait %.3f ms; the ten: %llu revocations\n",
		      (unsigned long long)y->grants, (double)y->max_wait_ns / 1e6,
		      (unsigned long long)revokes);
	h_teardown();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ten_connections_one_turn),
	    cmocka_unit_test(test_new_tenant_end_of_round),
	    cmocka_unit_test(test_tenant_penalty),
	    cmocka_unit_test(test_hog_wait_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
