/* nvshare-dra-plugin's pure parts (cmocka, TAP): Kubernetes quantities,
 * the ResourceClaim as read at Prepare, device and slice names, the slice
 * spec, the binding, the checkpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "claim.h"
#include "files.h"
#include "parse.h"
#include "slice.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static uint64_t q(const char *s)
{
	uint64_t v = 12345;
	assert_int_equal(nvs_dra_quantity(s, &v), 0);
	return v;
}

static void bad_q(const char *s)
{
	uint64_t v = 12345;
	assert_int_equal(nvs_dra_quantity(s, &v), -1);
	assert_int_equal(v, 12345); /* untouched */
}

static void test_quantity(void **state)
{
	(void)state;
	assert_int_equal(q("0"), 0);
	assert_int_equal(q("30"), 30);
	assert_int_equal(q("+30"), 30);
	assert_int_equal(q("10Gi"), 10 * GiB);
	assert_int_equal(q("16384Mi"), 16 * GiB);
	assert_int_equal(q("1.5Gi"), 3 * GiB / 2);
	assert_int_equal(q("0.5Ei"), 1ull << 59);
	assert_int_equal(q("1k"), 1000);
	assert_int_equal(q("1.5G"), 1500000000ull);
	assert_int_equal(q("12884901888"), 12 * GiB);
	assert_int_equal(q("1e3"), 1000);
	assert_int_equal(q("1E3"), 1000);
	assert_int_equal(q("2E"), 2000000000000000000ull); /* exa, not an exponent */
	/* Fractions round up: a part of a byte or percent is one more. */
	assert_int_equal(q("500m"), 1);
	assert_int_equal(q("1500m"), 2);
	assert_int_equal(q("0.1"), 1);
	assert_int_equal(q("30.0"), 30);
	assert_int_equal(q(".5"), 1);
	assert_int_equal(q("5."), 5);
	assert_int_equal(q("1n"), 1);
	assert_int_equal(q("1e-3"), 1);
	assert_int_equal(q("0.000000000000000000000000000000000000000001"), 1);
	assert_int_equal(q("0.001Ki"), 2); /* 1.024 */
}

static void test_quantity_bad(void **state)
{
	(void)state;
	const char *bad[] = {"",
			     "Gi",
			     "-1",
			     "-0.5Gi",
			     "10GB",
			     "10 Gi",
			     "lots",
			     "1e",
			     "1e+",
			     "1ex",
			     "1..2",
			     "0x10",
			     "1Gii",
			     "18446744073709551616",
			     "16Ei",
			     "1e100",
			     "1e20",
			     "NaN",
			     "١٠",
			     "10gi",
			     "1i",
			     "1.2.3",
			     "1234567890123456789012345678901234567"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		bad_q(bad[i]);
	uint64_t v;
	assert_int_equal(nvs_dra_quantity(NULL, &v), -1);
	assert_int_equal(q("18446744073709551615"), UINT64_MAX);
	assert_int_equal(q("15Ei"), 15ull << 60);
}

#define CLAIM_HEAD                                                                                 \
	"{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{"         \
	"\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"u-1\","                                     \
	"\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\","             \
	"\"uid\":\"pod-1\",\"controller\":true}]},"

static int parse(const char *json, struct nvs_dra_claim *c, char *err)
{
	return nvs_dra_claim_parse(json, strlen(json), "gpu.nvshare.com", c, err, 300);
}

static void test_claim(void **state)
{
	(void)state;
	struct nvs_dra_claim c;
	char err[300] = "";
	const char *j =
	    CLAIM_HEAD "\"status\":{\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\","
		       "\"uid\":\"pod-1\"}],\"allocation\":{\"devices\":{\"results\":["
		       "{\"request\":\"r\",\"driver\":\"gpu.example.com\",\"pool\":\"n\","
		       "\"device\":\"x\"},"
		       "{\"request\":\"gpu\",\"driver\":\"gpu.nvshare.com\",\"pool\":\"node-1\","
		       "\"device\":\"gpu-a\",\"shareID\":\"s-1\",\"consumedCapacity\":{"
		       "\"memory\":\"10Gi\",\"cores\":\"30\",\"other\":\"7\"}},"
		       "{\"request\":\"gpu2\",\"driver\":\"gpu.nvshare.com\",\"pool\":\"node-1\","
		       "\"device\":\"gpu-b\"}]}}}}";
	assert_int_equal(parse(j, &c, err), 0);
	assert_string_equal(c.ns, "ns");
	assert_string_equal(c.uid, "u-1");
	assert_true(c.allocated);
	assert_int_equal(c.nres, 2);
	assert_int_equal(c.nother, 1);
	assert_string_equal(c.res[0].device, "gpu-a");
	assert_string_equal(c.res[0].share_id, "s-1");
	assert_true(c.res[0].has_mem && c.res[0].has_cores);
	assert_int_equal(c.res[0].mem, 10 * GiB);
	assert_int_equal(c.res[0].cores, 30);
	assert_false(c.res[1].has_mem || c.res[1].has_cores); /* the whole GPU */
	assert_int_equal(nvs_dra_claim_single_pod(&c), 0);
	assert_string_equal(c.pod[0].name, "p");

	/* Shared: two Pods, or one Pod that is not the claim's owner. */
	const char *two = CLAIM_HEAD
	    "\"status\":{\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\","
	    "\"uid\":\"pod-1\"},{\"resource\":\"pods\",\"name\":\"q\",\"uid\":\"pod-2\"}]}}";
	assert_int_equal(parse(two, &c, err), 0);
	assert_false(c.allocated);
	assert_int_equal(c.npods, 2);
	assert_int_equal(nvs_dra_claim_single_pod(&c), -1);
	const char *other = CLAIM_HEAD "\"status\":{\"reservedFor\":[{\"resource\":\"pods\","
				       "\"name\":\"q\",\"uid\":\"pod-2\"}]}}";
	assert_int_equal(parse(other, &c, err), 0);
	assert_int_equal(nvs_dra_claim_single_pod(&c), -1);
	const char *nonpod =
	    CLAIM_HEAD "\"status\":{\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\","
		       "\"uid\":\"pod-1\"},{\"apiGroup\":\"batch\",\"resource\":\"jobs\","
		       "\"name\":\"j\",\"uid\":\"j-1\"}]}}";
	assert_int_equal(parse(nonpod, &c, err), 0);
	assert_int_equal(c.nnonpods, 1);
	assert_int_equal(nvs_dra_claim_single_pod(&c), -1);
}

static void claim_err(const char *results, const char *want)
{
	char j[16384], err[300] = "";
	struct nvs_dra_claim c;
	snprintf(j, sizeof j,
		 CLAIM_HEAD "\"status\":{\"allocation\":{\"devices\":{\"results\":[%s]}}}}",
		 results);
	assert_int_equal(parse(j, &c, err), -1);
	if (!strstr(err, want))
		fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

static void test_claim_bad(void **state)
{
	(void)state;
	struct nvs_dra_claim c;
	char err[300];
	assert_int_equal(parse("not json", &c, err), -1);
	assert_non_null(strstr(err, "not a ResourceClaim"));
	assert_int_equal(parse("{\"kind\":\"Pod\",\"metadata\":{}}", &c, err), -1);
	assert_int_equal(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\"}}", &c, err), -1);
	assert_non_null(strstr(err, "metadata"));
#define R(x)                                                                                       \
	"{\"request\":\"r\",\"driver\":\"gpu.nvshare.com\",\"pool\":\"n\",\"device\":\"d\"" x "}"
	claim_err(R(",\"consumedCapacity\":{\"memory\":\"lots\"}"),
		  "results[0].consumedCapacity.memory is not a quantity (lots)");
	claim_err(R(",\"consumedCapacity\":{\"cores\":\"101\"}"), "more than 100 % of a GPU");
	claim_err(R(",\"consumedCapacity\":{\"cores\":true}"), "cores is not a quantity");
	claim_err(R(",\"consumedCapacity\":[1]"), "consumedCapacity is not an object");
	claim_err("{\"driver\":\"gpu.nvshare.com\",\"pool\":\"n\",\"device\":\"d\"}",
		  "results[0].request is missing");
	claim_err("{\"request\":\"r\",\"driver\":\"gpu.nvshare.com\",\"device\":\"d\"}",
		  "results[0].pool is missing");
	claim_err(
	    "{\"request\":\"r\",\"driver\":\"gpu.nvshare.com\",\"pool\":\"n\","
	    "\"device\":\"ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd\"}",
	    "results[0].device is missing or too long");
	/* A number where the API server writes a string: taken. */
	char j[1024];
	snprintf(j, sizeof j,
		 CLAIM_HEAD "\"status\":{\"allocation\":{\"devices\":{\"results\":[" R(
		     ",\"consumedCapacity\":{\"cores\":25}") "]}}}}");
	assert_int_equal(parse(j, &c, err), 0);
	assert_int_equal(c.res[0].cores, 25);
	/* 33 results of ours: more than a claim may hold here. */
	char big[8192] = "";
	for (int i = 0; i < 33; i++)
		strcat(big, i ? "," R("") : R(""));
	claim_err(big, "more than 32 devices");
}

static void test_k8s_names(void **state)
{
	(void)state;
	assert_true(nvs_k8s_name_ok("team-a", 64, 0));
	assert_false(nvs_k8s_name_ok("team.a", 64, 0)); /* a label has no dot */
	assert_true(nvs_k8s_name_ok("trainer-a-gpu.x", 254, 1));
	assert_false(nvs_k8s_name_ok("", 64, 0));
	assert_false(nvs_k8s_name_ok("Team", 64, 0));
	assert_false(nvs_k8s_name_ok("a/b", 254, 1));
	assert_false(nvs_k8s_name_ok("abcd", 4, 0)); /* max counts the NUL */
	assert_true(nvs_k8s_name_ok("abc", 4, 0));
	assert_true(nvs_k8s_uid_ok("0a1b2c3d-0000-4000-8000-0000000000a1"));
	assert_false(nvs_k8s_uid_ok("0A1B2C3D-0000-4000-8000-0000000000A1"));
	assert_false(nvs_k8s_uid_ok("0a1b2c3d-0000-4000-8000-0000000000a"));
	assert_false(nvs_k8s_uid_ok("0a1b2c3d_0000-4000-8000-0000000000a1"));
}

static void test_names(void **state)
{
	(void)state;
	char b[300];
	nvs_dra_device_name("GPU-5E1F0000-0000-4000-8000-000000000001", 3, b, sizeof b);
	assert_string_equal(b, "gpu-5e1f0000-0000-4000-8000-000000000001");
	nvs_dra_device_name("MIG-x_y", 2, b, sizeof b); /* '_' is no label char */
	assert_string_equal(b, "gpu-2");
	nvs_dra_device_name("GPU-abc-", 1, b, sizeof b); /* a label ends alphanumeric */
	assert_string_equal(b, "gpu-1");
	nvs_dra_slice_name("node-1", "gpu.nvshare.com", b, sizeof b);
	assert_string_equal(b, "node-1-gpu.nvshare.com");
	char node[254];
	memset(node, 'n', 250);
	node[250] = 0;
	nvs_dra_slice_name(node, "gpu.nvshare.com", b, sizeof b);
	assert_true(strlen(b) <= 253);
	char b2[300];
	node[0] = 'm';
	nvs_dra_slice_name(node, "gpu.nvshare.com", b2, sizeof b2);
	assert_string_not_equal(b, b2);
	assert_int_equal(nvs_dra_mem_capacity(16 * GiB, 1.0), 16 * GiB);
	assert_int_equal(nvs_dra_mem_capacity(16 * GiB + 12345, 1.5), 24 * GiB); /* whole MiB */
	assert_int_equal(nvs_dra_mem_capacity(MiB - 1, 1.0), 0);
	char k1[17], k2[17];
	nvs_dra_key("c1a1a1a1-0000-4000-8000-00000000000a", k1);
	nvs_dra_key("c1a1a1a1-0000-4000-8000-00000000000b", k2);
	assert_int_equal(strlen(k1), 16);
	assert_string_not_equal(k1, k2);
	nvs_dra_key("c1a1a1a1-0000-4000-8000-00000000000a", k2);
	assert_string_equal(k1, k2); /* the same after a restart */
}

static void test_slice(void **state)
{
	(void)state;
	struct nvs_dra_gpu g[3] = {
	    {"gpu-a", "GPU-a", "H100", "580.65.06", 0, 0, 1, 80 * GiB, 80 * GiB},
	    {"gpu-b", "GPU-b", "H100", "", 1, 1, 0, 80 * GiB, 80 * GiB}, /* unhealthy */
	    {"gpu-c", "GPU-c", "H100", "bad", 2, 2, 1, 0, 0},		 /* no size */
	};
	cJSON *s = nvs_dra_slice_spec("gpu.nvshare.com", "node-1", 4, g, 3);
	const cJSON *devs = cJSON_GetObjectItem(s, "devices");
	assert_int_equal(cJSON_GetArraySize(devs), 1);
	char *txt = cJSON_PrintUnformatted(cJSON_GetArrayItem(devs, 0));
	assert_string_equal(
	    txt, "{\"name\":\"gpu-a\",\"attributes\":{\"uuid\":{\"string\":\"GPU-a\"},"
		 "\"productName\":{\"string\":\"H100\"},\"index\":{\"int\":0},"
		 "\"physicalMemory\":{\"int\":85899345920},\"driverVersion\":{\"version\":"
		 "\"580.65.6\"}},\"capacity\":{\"memory\":{\"value\":\"81920Mi\","
		 "\"requestPolicy\":{\"default\":\"81920Mi\",\"validRange\":{\"min\":\"1Mi\","
		 "\"max\":\"81920Mi\",\"step\":\"1Mi\"}}},\"cores\":{\"value\":\"100\","
		 "\"requestPolicy\":{\"default\":\"100\",\"validRange\":{\"min\":\"1\",\"max\":"
		 "\"100\",\"step\":\"1\"}}}},\"allowMultipleAllocations\":true}");
	free(txt);
	assert_int_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(s, "pool"), "generation")->valueint, 4);
	cJSON *s2 = nvs_dra_slice_spec("gpu.nvshare.com", "node-1", 5, g, 3);
	assert_true(nvs_dra_slice_same(s, s2)); /* the generation aside */
	g[1].healthy = 1;
	cJSON *s3 = nvs_dra_slice_spec("gpu.nvshare.com", "node-1", 5, g, 3);
	assert_false(nvs_dra_slice_same(s, s3));
	cJSON *o = nvs_dra_slice_object("node-1-gpu.nvshare.com", "42", s3);
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "resourceVersion")->valuestring,
	    "42");
	cJSON_Delete(o);
	cJSON_Delete(s);
	cJSON_Delete(s2);
}

static struct nvs_dra_prepared *mk(const char *uid, const char *pod)
{
	struct nvs_dra_prepared *p = calloc(1, sizeof *p);
	snprintf(p->uid, sizeof p->uid, "%s", uid);
	snprintf(p->ns, sizeof p->ns, "team-a");
	snprintf(p->name, sizeof p->name, "claim-%s", uid);
	nvs_dra_key(uid, p->key);
	if (pod) {
		snprintf(p->pod_name, sizeof p->pod_name, "%s", pod);
		snprintf(p->pod_uid, sizeof p->pod_uid, "pod-uid-%s", pod);
	}
	p->core_limit = 30;
	p->mem_limit = 10 * GiB;
	p->ndev = 2;
	for (unsigned i = 0; i < 2; i++) {
		struct nvs_dra_pdev *d = &p->dev[i];
		snprintf(d->request, sizeof d->request, "gpu");
		snprintf(d->pool, sizeof d->pool, "node-1");
		snprintf(d->device, sizeof d->device, "gpu-%u", i);
		snprintf(d->uuid, sizeof d->uuid, "GPU-%u", i);
		d->mem = (i + 10) * GiB;
		d->cores = 30 + i;
	}
	return p;
}

static void test_binding_json(void **state)
{
	(void)state;
	struct nvs_dra_prepared *p = mk("u1", "trainer");
	char *s = nvs_dra_binding_json(p);
	assert_string_equal(s, "{\"namespace\":\"team-a\",\"name\":\"trainer\",\"uid\":\"pod-uid-"
			       "trainer\",\"origin\":\"dra\",\"claim\":\"team-a/claim-u1\","
			       "\"core_limit\":30,\"memory_limit\":10737418240}");
	free(s);
	p->pod_name[0] = '\0';
	s = nvs_dra_binding_json(p);
	assert_string_equal(s, "{\"namespace\":\"team-a\",\"origin\":\"dra\",\"claim\":\"team-a/"
			       "claim-u1\",\"core_limit\":30,\"memory_limit\":10737418240}");
	free(s);
	free(p);
}

static void test_checkpoint(void **state)
{
	(void)state;
	char dir[] = "/tmp/nvs-dra-ckpt.XXXXXX", path[64], err[700];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/checkpoint.json", dir);
	struct nvs_dra_prepared *list = NULL;
	/* Missing: none, no error. */
	assert_int_equal(nvs_dra_checkpoint_load(path, "d.x", "n", &list, err, sizeof err), 0);
	struct nvs_dra_prepared *a = mk("ua", "pa"), *b = mk("ub", NULL);
	a->next = b;
	assert_int_equal(nvs_dra_checkpoint_save(path, "d.x", "n", a, err, sizeof err), 0);
	assert_int_equal(nvs_dra_checkpoint_load(path, "d.x", "n", &list, err, sizeof err), 2);
	assert_string_equal(list->uid, "ua");
	assert_string_equal(list->pod_name, "pa");
	assert_string_equal(list->key, a->key);
	assert_int_equal(list->dev[1].mem, 11 * GiB);
	assert_string_equal(list->next->uid, "ub");
	assert_string_equal(list->next->pod_name, "");
	assert_null(list->next->next);
	free(list->next);
	free(list);
	/* Another driver or node: refused. */
	assert_int_equal(nvs_dra_checkpoint_load(path, "d.y", "n", &list, err, sizeof err), -1);
	assert_non_null(strstr(err, "checkpoint of driver d.x on node n"));
	/* Edited: the checksum says so. */
	FILE *f = fopen(path, "r");
	char buf[8192];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *m = strstr(buf, "\"cores\":\t30");
	assert_non_null(m);
	m[strlen("\"cores\":\t")] = '9'; /* 30 -> 90 */
	f = fopen(path, "w");
	fputs(buf, f);
	fclose(f);
	assert_int_equal(nvs_dra_checkpoint_load(path, "d.x", "n", &list, err, sizeof err), -1);
	assert_non_null(strstr(err, "does not match"));
	assert_null(list);
	/* Cut short. */
	f = fopen(path, "w");
	fputs("{\"version\":1,\"claims\":[", f);
	fclose(f);
	assert_int_equal(nvs_dra_checkpoint_load(path, "d.x", "n", &list, err, sizeof err), -1);
	assert_non_null(strstr(err, "not a checkpoint"));
	unlink(path);
	rmdir(dir);
	free(a);
	free(b);
}

/* Refusal messages: two different amounts never print the same. */
static void test_format_bytes(void **state)
{
	(void)state;
	char b[32];
	assert_string_equal(nvs_dra_format_bytes(16 * GiB, b, sizeof b), "16Gi");
	assert_string_equal(nvs_dra_format_bytes(13313 * MiB, b, sizeof b), "13313Mi");
	assert_string_equal(nvs_dra_format_bytes(13312 * MiB, b, sizeof b), "13Gi");
	assert_string_equal(nvs_dra_format_bytes(1536 * 1024, b, sizeof b), "1536Ki");
	assert_string_equal(nvs_dra_format_bytes(1000, b, sizeof b), "1000");
	assert_string_equal(nvs_dra_format_bytes(0, b, sizeof b), "0");
	uint64_t v;
	assert_int_equal(
	    nvs_dra_quantity(nvs_dra_format_bytes(13313 * MiB + 1024, b, sizeof b), &v), 0);
	assert_int_equal(v, 13313 * MiB + 1024);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quantity),   cmocka_unit_test(test_quantity_bad),
	    cmocka_unit_test(test_claim),      cmocka_unit_test(test_claim_bad),
	    cmocka_unit_test(test_k8s_names),  cmocka_unit_test(test_names),
	    cmocka_unit_test(test_slice),      cmocka_unit_test(test_binding_json),
	    cmocka_unit_test(test_checkpoint), cmocka_unit_test(test_format_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
