/* Device-plugin allocation policy, virtual device IDs and the
 * NVIDIA_VISIBLE_DEVICES parser (cmocka, TAP). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "policy.h"

#define A "GPU-aaaaaaaa-0000-4000-8000-000000000001"
#define B "GPU-bbbbbbbb-0000-4000-8000-000000000002"
#define C "GPU-cccccccc-0000-4000-8000-000000000003"

static void test_ids(void **state)
{
	(void)state;
	char buf[NVS_DP_ID_MAX], uuid[NVS_DP_ID_MAX];
	unsigned k = 0;
	assert_int_equal(nvs_dp_format_id(buf, sizeof buf, A, 7), 0);
	assert_string_equal(buf, A "__7");
	assert_true(strlen(buf) <= 63);
	assert_int_equal(nvs_dp_parse_id(buf, uuid, sizeof uuid, &k), 0);
	assert_string_equal(uuid, A);
	assert_int_equal(k, 7);
	/* The last separator wins. */
	assert_int_equal(nvs_dp_parse_id("x__y__12", uuid, sizeof uuid, &k), 0);
	assert_string_equal(uuid, "x__y");
	assert_int_equal(k, 12);
	const char *bad[] = {"",	 "GPU-1",     "GPU-1__",       "__3",	  "GPU-1__0",
			     "GPU-1__x", "GPU-1__3x", "GPU-1__123456", "GPU-1_3", NULL};
	for (int i = 0; bad[i]; i++)
		assert_int_equal(nvs_dp_parse_id(bad[i], uuid, sizeof uuid, &k), -1);
	char longu[80];
	memset(longu, 'u', 70);
	longu[70] = 0;
	assert_int_equal(nvs_dp_format_id(buf, sizeof buf, longu, 1), -1);
}

static void test_policy_names(void **state)
{
	(void)state;
	enum nvs_dp_policy p = NVS_DP_PACK;
	assert_int_equal(nvs_dp_policy_parse("spread", &p), 0);
	assert_int_equal(p, NVS_DP_SPREAD);
	assert_int_equal(nvs_dp_policy_parse("PACK", &p), 0);
	assert_int_equal(p, NVS_DP_PACK);
	assert_int_equal(nvs_dp_policy_parse("distributed", &p), 0);
	assert_int_equal(p, NVS_DP_SPREAD);
	assert_int_equal(nvs_dp_policy_parse("packed", &p), 0);
	assert_int_equal(p, NVS_DP_PACK);
	assert_int_equal(nvs_dp_policy_parse("random", &p), -1);
	assert_int_equal(p, NVS_DP_PACK);
	assert_string_equal(nvs_dp_policy_name(NVS_DP_SPREAD), "spread");
}

/* A has 1 free slice (3 allocated), B has 4 free, C has 2 free. */
static const char *avail[] = {B "__4", A "__3", C "__1", B "__1", B "__2", C "__2", B "__3"};
#define NAVAIL (sizeof avail / sizeof avail[0])

static void test_spread(void **state)
{
	(void)state;
	const char *out[8];
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, avail, NAVAIL, NULL, 0, 1, out), 1);
	assert_string_equal(out[0], B "__1"); /* most free, lowest slice */
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, avail, NAVAIL, NULL, 0, 2, out), 2);
	assert_string_equal(out[0], B "__1");
	assert_string_equal(out[1], C "__1"); /* distinct GPU next */
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, avail, NAVAIL, NULL, 0, 3, out), 3);
	assert_string_equal(out[2], A "__3");
}

static void test_pack(void **state)
{
	(void)state;
	const char *out[8];
	assert_int_equal(nvs_dp_prefer(NVS_DP_PACK, avail, NAVAIL, NULL, 0, 1, out), 1);
	assert_string_equal(out[0], A "__3"); /* fewest free */
	assert_int_equal(nvs_dp_prefer(NVS_DP_PACK, avail, NAVAIL, NULL, 0, 2, out), 2);
	assert_string_equal(out[1], C "__1");
	assert_int_equal(nvs_dp_prefer(NVS_DP_PACK, avail, NAVAIL, NULL, 0, 3, out), 3);
	assert_string_equal(out[2], B "__1");
}

static void test_ties_and_topup(void **state)
{
	(void)state;
	const char *even[] = {B "__2", A "__2", B "__1", A "__1"};
	const char *out[4];
	/* Ties go to the smaller UUID under both policies. */
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, even, 4, NULL, 0, 1, out), 1);
	assert_string_equal(out[0], A "__1");
	assert_int_equal(nvs_dp_prefer(NVS_DP_PACK, even, 4, NULL, 0, 1, out), 1);
	assert_string_equal(out[0], A "__1");
	/* More than the GPUs: one per GPU, then a second round. */
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, even, 4, NULL, 0, 4, out), 4);
	assert_string_equal(out[0], A "__1");
	assert_string_equal(out[1], B "__1");
	assert_string_equal(out[2], A "__2");
	assert_string_equal(out[3], B "__2");
	/* Asking for more than available returns what there is. */
	const char *out5[5];
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, even, 4, NULL, 0, 5, out5), 4);
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, NULL, 0, NULL, 0, 0, NULL), 0);
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, NULL, 3, NULL, 0, 1, out), -1);
}

static void test_must_include(void **state)
{
	(void)state;
	const char *out[4];
	const char *must[] = {B "__3", B "__3"};
	/* B is taken by must_include, so spread goes on with C (2 free) then A. */
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, avail, NAVAIL, must, 2, 3, out), 3);
	assert_string_equal(out[0], B "__3");
	assert_string_equal(out[1], C "__1");
	assert_string_equal(out[2], A "__3");
	/* Malformed available IDs are never picked. */
	const char *junk[] = {"junk", A "__1", "GPU-x__0"};
	assert_int_equal(nvs_dp_prefer(NVS_DP_SPREAD, junk, 3, NULL, 0, 2, out), 1);
	assert_string_equal(out[0], A "__1");
}

static void test_check_request(void **state)
{
	(void)state;
	char uuids[4][NVS_DP_ID_MAX], err[400];
	const char *one[] = {A "__2"};
	assert_int_equal(nvs_dp_check_request(one, 1, uuids, 4, err, sizeof err), 1);
	assert_string_equal(uuids[0], A);
	const char *two[] = {B "__5", A "__2"};
	assert_int_equal(nvs_dp_check_request(two, 2, uuids, 4, err, sizeof err), 2);
	assert_string_equal(uuids[0], B);
	assert_string_equal(uuids[1], A);
	const char *same[] = {A "__1", B "__1", A "__9"};
	assert_int_equal(nvs_dp_check_request(same, 3, uuids, 4, err, sizeof err), -1);
	assert_non_null(strstr(err, "same GPU " A));
	assert_non_null(strstr(err, A "__1 and " A "__9"));
	const char *bad[] = {"nonsense"};
	assert_int_equal(nvs_dp_check_request(bad, 1, uuids, 4, err, sizeof err), -1);
	assert_non_null(strstr(err, "nonsense"));
	assert_int_equal(nvs_dp_check_request(NULL, 0, uuids, 4, err, sizeof err), -1);
	assert_int_equal(nvs_dp_check_request(two, 2, uuids, 1, err, sizeof err), -1);
}

/* Memory units: A has 2 free, B has 4, C has 3. */
static const char *units[] = {B "__7", A "__5", C "__1", B "__1", B "__2",
			      C "__2", A "__6", B "__3", C "__3"};
#define NUNITS (sizeof units / sizeof units[0])

static int on_gpu(const char **out, int n, const char *uuid)
{
	for (int i = 0; i < n; i++)
		if (strncmp(out[i], uuid, strlen(uuid)))
			return 0;
	return 1;
}

static void test_units_one_gpu(void **state)
{
	(void)state;
	const char *out[16];
	/* spread: the GPU with the most free units, lowest numbers first */
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_SPREAD, units, NUNITS, NULL, 0, 2, out), 2);
	assert_string_equal(out[0], B "__1");
	assert_string_equal(out[1], B "__2");
	/* pack: the best fit (fewest free units that still hold the request) */
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_PACK, units, NUNITS, NULL, 0, 2, out), 2);
	assert_true(on_gpu(out, 2, A));
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_PACK, units, NUNITS, NULL, 0, 3, out), 3);
	assert_true(on_gpu(out, 3, C));
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_SPREAD, units, NUNITS, NULL, 0, 4, out), 4);
	assert_true(on_gpu(out, 4, B));
	assert_string_equal(out[3], B "__7");
	/* must_include decides the GPU */
	const char *must[] = {C "__2"};
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_SPREAD, units, NUNITS, must, 1, 3, out), 3);
	assert_string_equal(out[0], C "__2");
	assert_string_equal(out[1], C "__1");
	assert_string_equal(out[2], C "__3");
	/* No GPU holds 5: the largest first, then the next */
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_PACK, units, NUNITS, NULL, 0, 5, out), 5);
	assert_true(on_gpu(out, 4, B));
	assert_true(on_gpu(out + 4, 1, C));
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_SPREAD, units, NUNITS, NULL, 0, 10, out), 9);
	assert_int_equal(nvs_dp_prefer_units(NVS_DP_SPREAD, NULL, 2, NULL, 0, 1, out), -1);
}

static void test_units_gpu(void **state)
{
	(void)state;
	char uuid[NVS_DP_ID_MAX], err[400];
	size_t n = 0;
	const char *one[] = {A "__1", A "__9"};
	assert_int_equal(nvs_dp_units_gpu(one, 2, uuid, &n, err, sizeof err), 1);
	assert_string_equal(uuid, A);
	assert_int_equal(n, 2);
	const char *split[] = {A "__1", B "__2", B "__3"};
	assert_int_equal(nvs_dp_units_gpu(split, 3, uuid, &n, err, sizeof err), 2);
	assert_string_equal(uuid, B);
	assert_int_equal(n, 2);
	const char *tie[] = {B "__1", A "__2"};
	assert_int_equal(nvs_dp_units_gpu(tie, 2, uuid, &n, err, sizeof err), 2);
	assert_string_equal(uuid, B); /* named first */
	const char *bad[] = {A "__1", "bogus"};
	assert_int_equal(nvs_dp_units_gpu(bad, 2, uuid, &n, err, sizeof err), -1);
	assert_non_null(strstr(err, "bogus"));
	assert_int_equal(nvs_dp_units_gpu(NULL, 0, uuid, &n, err, sizeof err), -1);
}

static void test_visible_devices(void **state)
{
	(void)state;
	char u[4][NVS_DP_ID_MAX];
	assert_int_equal(nvs_dp_parse_visible_devices(NULL, u, 4), 0);
	assert_int_equal(nvs_dp_parse_visible_devices("all", u, 4), 0);
	assert_int_equal(nvs_dp_parse_visible_devices("none", u, 4), 0);
	assert_int_equal(nvs_dp_parse_visible_devices("void", u, 4), 0);
	assert_int_equal(nvs_dp_parse_visible_devices("", u, 4), 0);
	assert_int_equal(nvs_dp_parse_visible_devices(A "," B ", " A ",", u, 4), 2);
	assert_string_equal(u[0], A);
	assert_string_equal(u[1], B);
	assert_int_equal(nvs_dp_parse_visible_devices("GPU-1,GPU-2,GPU-3", u, 2), -1);
	assert_int_equal(nvs_dp_parse_visible_devices("GPU-a__1", u, 4), -1);
	assert_int_equal(nvs_dp_parse_visible_devices("GPU a", u, 4), -1);
	/* NVIDIA's volume-mount strategy: one file per UUID. */
	char dir[] = "/tmp/nvs-dp-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, B);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof path, "%s/%s", dir, A);
	fclose(fopen(path, "w"));
	assert_int_equal(nvs_dp_parse_visible_devices(dir, u, 4), 2);
	assert_string_equal(u[0], A); /* sorted */
	assert_string_equal(u[1], B);
	unlink(path);
	snprintf(path, sizeof path, "%s/%s", dir, B);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ids),
	    cmocka_unit_test(test_policy_names),
	    cmocka_unit_test(test_spread),
	    cmocka_unit_test(test_pack),
	    cmocka_unit_test(test_ties_and_topup),
	    cmocka_unit_test(test_must_include),
	    cmocka_unit_test(test_check_request),
	    cmocka_unit_test(test_units_one_gpu),
	    cmocka_unit_test(test_units_gpu),
	    cmocka_unit_test(test_visible_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
