/* Parsers for user-typed values: sizes, percentages, booleans, durations,
 * cgroup lines naming a Kubernetes Pod. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static uint64_t size_ok(const char *s, uint64_t bare)
{
	uint64_t v = 0;
	assert_int_equal(nvs_parse_size(s, bare, &v), 0);
	return v;
}

static void size_bad(const char *s)
{
	uint64_t v = 77;
	assert_int_equal(nvs_parse_size(s, 1, &v), -1);
	assert_true(v == 77); /* untouched on error */
}

static void test_sizes(void **state)
{
	(void)state;
	assert_true(size_ok("4096", 1) == 4096);
	assert_true(size_ok("4096", MiB) == 4096 * MiB); /* bare = MiB for limits */
	assert_true(size_ok("512Mi", 1) == 512 * MiB);
	assert_true(size_ok("4Gi", 1) == 4 * GiB);
	assert_true(size_ok("4G", 1) == 4 * GiB);
	assert_true(size_ok("4GB", 1) == 4 * GiB);
	assert_true(size_ok("4gib", 1) == 4 * GiB);
	assert_true(size_ok(" 16Gi ", 1) == 16 * GiB);
	assert_true(size_ok("1.5Gi", 1) == GiB + GiB / 2);
	assert_true(size_ok("0", 1) == 0);
	assert_true(size_ok("100 Mi", 1) == 100 * MiB);
	assert_true(size_ok("2Ti", 1) == 2ull << 40);
	assert_true(size_ok("10b", MiB) == 10);
}

static void test_sizes_rejected(void **state)
{
	(void)state;
	size_bad("");
	size_bad("Gi");
	size_bad("-1");
	size_bad("4Xi");
	size_bad("4 Gi extra");
	size_bad("1.");
	size_bad(".5");
	size_bad("99999999999999999999");
	size_bad("17179869184Gi"); /* overflows 64 bits */
	size_bad("4Gigantic");
	assert_int_equal(nvs_parse_size(NULL, 1, &(uint64_t){0}), -1);
}

static void test_percent(void **state)
{
	(void)state;
	unsigned v = 0;
	assert_int_equal(nvs_parse_percent("30", 1, 100, &v), 0);
	assert_int_equal(v, 30);
	assert_int_equal(nvs_parse_percent("75%", 1, 100, &v), 0);
	assert_int_equal(v, 75);
	assert_int_equal(nvs_parse_percent("100", 1, 100, &v), 0);
	assert_int_equal(v, 100);
	v = 5;
	assert_int_equal(nvs_parse_percent("0", 1, 100, &v), -1);
	assert_int_equal(nvs_parse_percent("101", 1, 100, &v), -1);
	assert_int_equal(nvs_parse_percent("50.5", 1, 100, &v), -1);
	assert_int_equal(nvs_parse_percent("abc", 1, 100, &v), -1);
	assert_int_equal(nvs_parse_percent("", 1, 100, &v), -1);
	assert_int_equal(v, 5);
}

static void test_bool(void **state)
{
	(void)state;
	int b = -1;
	const char *yes[] = {"1", "true", "YES", "on", " 1 "};
	const char *no[] = {"0", "false", "No", "off"};
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(nvs_parse_bool(yes[i], &b), 0);
		assert_int_equal(b, 1);
	}
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(nvs_parse_bool(no[i], &b), 0);
		assert_int_equal(b, 0);
	}
	assert_int_equal(nvs_parse_bool("2", &b), -1);
	assert_int_equal(nvs_parse_bool("enable", &b), -1);
	assert_int_equal(nvs_parse_bool("", &b), -1);
}

static void test_duration(void **state)
{
	(void)state;
	uint64_t v = 0;
	assert_int_equal(nvs_parse_duration_ms("30", &v), 0);
	assert_true(v == 30);
	assert_int_equal(nvs_parse_duration_ms("30s", &v), 0);
	assert_true(v == 30000);
	assert_int_equal(nvs_parse_duration_ms("250ms", &v), 0);
	assert_true(v == 250);
	assert_int_equal(nvs_parse_duration_ms("2m", &v), 0);
	assert_true(v == 120000);
	assert_int_equal(nvs_parse_duration_ms("5h", &v), -1);
	assert_int_equal(nvs_parse_duration_ms("-5", &v), -1);
}

static void test_u64(void **state)
{
	(void)state;
	uint64_t v = 0;
	assert_int_equal(nvs_parse_u64("2000", 500, 20000, &v), 0);
	assert_true(v == 2000);
	assert_int_equal(nvs_parse_u64("100", 500, 20000, &v), -1);
	assert_int_equal(nvs_parse_u64("12x", 0, 100, &v), -1);
}

static void pod(const char *line, const char *want)
{
	char out[64];
	memset(out, 'z', sizeof out);
	if (want) {
		assert_int_equal(nvs_parse_cgroup_pod_uid(line, out, sizeof out), 0);
		assert_string_equal(out, want);
	} else {
		assert_int_equal(nvs_parse_cgroup_pod_uid(line, out, sizeof out), -1);
	}
}

static void test_choice(void **state)
{
	(void)state;
	assert_int_equal(nvs_parse_choice("off|on|auto", "off", 0), 0);
	assert_int_equal(nvs_parse_choice("off|on|auto", "auto", 0), 2);
	assert_int_equal(nvs_parse_choice("off|on|auto", "AUTO", 0), -1);
	assert_int_equal(nvs_parse_choice("off|on|auto", "AUTO", 1), 2);
	assert_int_equal(nvs_parse_choice("off|on|auto", "o", 1), -1);
	assert_int_equal(nvs_parse_choice("off|on|auto", "on|auto", 1), -1);
	assert_int_equal(nvs_parse_choice("off|on|auto", "", 1), -1);
	assert_int_equal(nvs_parse_choice("batch", "batch", 0), 0);
}

static void test_cgroup_lines(void **state)
{
	(void)state;
	const char *uid = "3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6b";
	/* cgroup v2, systemd driver */
	pod("0::/kubepods.slice/kubepods-burstable.slice/"
	    "kubepods-burstable-pod3f1c2a4b_5d6e_47f8_9a0b_1c2d3e4f5a6b.slice/"
	    "cri-containerd-abc123.scope",
	    uid);
	/* cgroup v2, guaranteed QoS (no QoS level), systemd */
	pod("0::/kubepods.slice/kubepods-pod3f1c2a4b_5d6e_47f8_9a0b_1c2d3e4f5a6b.slice/x.scope",
	    uid);
	/* cgroup v1, cgroupfs driver */
	pod("11:memory:/kubepods/besteffort/pod3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6b/"
	    "0123456789abcdef",
	    uid);
	pod("4:cpu,cpuacct:/kubepods/pod3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6b/deadbeef\n", uid);
	/* Upper-case hex is normalised. */
	pod("0::/kubepods/pod3F1C2A4B-5D6E-47F8-9A0B-1C2D3E4F5A6B/c", uid);
	/* Not a Pod. */
	pod("0::/user.slice/user-1000.slice/session-2.scope", NULL);
	pod("0::/system.slice/docker-abc.scope", NULL);
	pod("0::/kubepods/burstable/podnot-a-uid/c", NULL);
	pod("garbage", NULL);
	pod("", NULL);
	/* "pod" inside another word must not match. */
	pod("0::/kubepods/xpod3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6b/c", NULL);
	/* A UUID that runs on is not a UUID. */
	pod("0::/kubepods/pod3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6bff/c", NULL);
	/* Nested "pod<other uid>" directories inside a Pod's own cgroup (a
	 * container with a writable cgroupfs can make them): the outermost,
	 * kubepods-level Pod wins, for both drivers and both versions. */
	pod("0::/kubepods.slice/kubepods-burstable.slice/"
	    "kubepods-burstable-pod3f1c2a4b_5d6e_47f8_9a0b_1c2d3e4f5a6b.slice/"
	    "cri-containerd-abc123.scope/pod99999999-8888-4777-8666-555555555555",
	    uid);
	pod("0::/kubepods.slice/kubepods-burstable.slice/"
	    "kubepods-burstable-pod3f1c2a4b_5d6e_47f8_9a0b_1c2d3e4f5a6b.slice/"
	    "cri-containerd-abc123.scope/kubepods-pod99999999_8888_4777_8666_555555555555.slice",
	    uid);
	pod("0::/kubepods/burstable/pod3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6b/0123abcd/"
	    "kubepods/pod99999999-8888-4777-8666-555555555555/x",
	    uid);
	pod("11:memory:/kubepods/besteffort/pod3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6b/c/"
	    "pod99999999-8888-4777-8666-555555555555",
	    uid);
	/* A private cgroup namespace shows other Pods relative ("/../"). */
	pod("0::/../../kubepods-besteffort-pod3f1c2a4b_5d6e_47f8_9a0b_1c2d3e4f5a6b.slice/"
	    "cri-containerd-abc.scope/pod99999999-8888-4777-8666-555555555555",
	    uid);
	/* An invalid outer candidate does not stop the scan. */
	pod("0::/kubepods/podnot-a-uid/pod3f1c2a4b-5d6e-47f8-9a0b-1c2d3e4f5a6b/c", uid);
	char small[8];
	assert_int_equal(nvs_parse_cgroup_pod_uid("0::/kubepods/pod3f1c2a4b-5d6e-47f8-9a0b-"
						  "1c2d3e4f5a6b/c",
						  small, sizeof small),
			 -1);
}

static void test_format_size(void **state)
{
	(void)state;
	char b[32];
	assert_string_equal(nvs_format_size(512 * MiB, b, sizeof b), "512Mi");
	assert_string_equal(nvs_format_size(4 * GiB, b, sizeof b), "4Gi");
	assert_string_equal(nvs_format_size(GiB + GiB / 2, b, sizeof b), "1.50Gi");
	assert_string_equal(nvs_format_size(100, b, sizeof b), "100");
}

static void test_env(void **state)
{
	(void)state;
	uint64_t v = 1;
	unsetenv("NVS_T_SIZE");
	assert_int_equal(nvs_env_size("NVS_T_SIZE", MiB, &v), 0);
	setenv("NVS_T_SIZE", "2048", 1);
	assert_int_equal(nvs_env_size("NVS_T_SIZE", MiB, &v), 1);
	assert_true(v == 2 * GiB);
	setenv("NVS_T_SIZE", "lots", 1);
	assert_int_equal(nvs_env_size("NVS_T_SIZE", MiB, &v), -1);
	assert_true(v == 2 * GiB); /* default kept */
	int b = 7;
	setenv("NVS_T_BOOL", "0", 1);
	assert_int_equal(nvs_env_bool("NVS_T_BOOL", &b), 1);
	assert_int_equal(b, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes),	 cmocka_unit_test(test_sizes_rejected),
	    cmocka_unit_test(test_percent),	 cmocka_unit_test(test_bool),
	    cmocka_unit_test(test_duration),	 cmocka_unit_test(test_u64),
	    cmocka_unit_test(test_cgroup_lines), cmocka_unit_test(test_format_size),
	    cmocka_unit_test(test_env),		 cmocka_unit_test(test_choice),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
