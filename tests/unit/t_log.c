/* Logging: ISO-8601 UTC timestamps, the per-call-site limiter that keeps
 * a repeated warning from flooding an application's stderr, the filter the
 * scheduler rate-limits with, and the writer-thread queue (drained at
 * stop). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* Runs fn with stderr sent to a temporary file; returns what it wrote
 * (malloc'ed). */
static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/nvs-t_log.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	unlink(path);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	off_t len = lseek(fd, 0, SEEK_END);
	char *buf = calloc(1, (size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)len, 0), len);
	close(fd);
	return buf;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void one_site(int i)
{
	NVS_WARN("repeated warning %d", i);
}

static void burst(void)
{
	for (int i = 0; i < 1000; i++)
		one_site(i);
}

static void after_interval(void)
{
	struct timespec ts = {0, 60 * 1000000L}; /* > the 50 ms interval */
	nanosleep(&ts, NULL);
	one_site(1000);
}

static void test_repeats_limited(void **state)
{
	(void)state;
	nvs_log_set_warn_interval(50ull * 1000000ull);
	char *out = capture(burst);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, "repeated warning 0\n"));
	free(out);
	out = capture(after_interval);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, "repeated warning 1000 (999 similar lines suppressed)\n"));
	free(out);
	nvs_log_set_warn_interval(0);
}

static void site_a(void)
{
	NVS_WARN("warning a");
}

static void site_b(void)
{
	NVS_WARN("warning b");
}

static void two_sites(void)
{
	site_a();
	site_b();
	site_a();
	site_b();
}

static void test_sites_independent(void **state)
{
	(void)state;
	nvs_log_set_warn_interval(10ull * 1000000000ull);
	char *out = capture(two_sites);
	assert_int_equal(count_lines(out), 2);
	assert_non_null(strstr(out, "warning a\n"));
	assert_non_null(strstr(out, "warning b\n"));
	free(out);
	nvs_log_set_warn_interval(0);
}

static void unlimited(void)
{
	for (int i = 0; i < 5; i++)
		one_site(i);
}

static void test_default_unlimited(void **state)
{
	(void)state;
	char *out = capture(unlimited);
	assert_int_equal(count_lines(out), 5);
	free(out);
}

static void info_line(void)
{
	NVS_INFO("stamp");
}

static void test_iso8601_utc(void **state)
{
	(void)state;
	char *out = capture(info_line);
	/* [nvshare][test] 2026-11-25T02:00:24.802Z INFO stamp */
	int y, mo, d, h, mi, s, ms;
	char z;
	assert_int_equal(sscanf(out, "[nvshare][test] %4d-%2d-%2dT%2d:%2d:%2d.%3d%c INFO stamp", &y,
				&mo, &d, &h, &mi, &s, &ms, &z),
			 8);
	assert_int_equal(z, 'Z');
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	assert_int_equal(y, tm.tm_year + 1900);
	free(out);
}

static unsigned filter_calls;

/* Drops every line whose format starts with "drop", passes the others
 * saying 3 were suppressed before them. */
static int test_filter(const char *fmt, enum nvs_log_level level, unsigned *suppressed)
{
	(void)level;
	filter_calls++;
	if (!strncmp(fmt, "drop", 4))
		return 0;
	*suppressed = 3;
	return 1;
}

static void filtered_lines(void)
{
	NVS_INFO("drop me %d", 1);
	NVS_WARN("drop me too");
	NVS_INFO("keep %d", 2);
	NVS_ERROR("errors are never filtered");
	nvs_log_n(NVS_LOG_WARN, 7, "explicit %s", "count");
}

static void test_filter_and_log_n(void **state)
{
	(void)state;
	nvs_log_set_filter(test_filter);
	char *out = capture(filtered_lines);
	nvs_log_set_filter(NULL);
	assert_int_equal(count_lines(out), 3);
	assert_null(strstr(out, "drop me"));
	assert_non_null(strstr(out, "INFO keep 2 (3 similar lines suppressed)\n"));
	assert_non_null(strstr(out, "ERROR errors are never filtered\n"));
	assert_non_null(strstr(out, "WARN explicit count (7 similar lines suppressed)\n"));
	assert_int_equal(filter_calls, 3); /* INFO and WARN only, not nvs_log_n */
	free(out);
}

static void queued_lines(void)
{
	assert_int_equal(nvs_log_queue_start(4096), 0);
	for (int i = 0; i < 1000; i++)
		NVS_INFO("queued line %d", i);
	nvs_log_queue_stop(); /* drains what fits; the rest was dropped */
}

static void test_queue(void **state)
{
	(void)state;
	char *out = capture(queued_lines);
	unsigned long long dropped = nvs_log_dropped();
	/* Everything logged is either written or counted as dropped. */
	int written = 0;
	for (const char *p = out; (p = strstr(p, "INFO queued line ")); p++)
		written++;
	assert_true(written > 0);
	assert_int_equal((unsigned long long)written + dropped, 1000);
	assert_non_null(strstr(out, "queued line 0\n"));
	if (dropped)
		assert_non_null(strstr(out, "log line(s) dropped"));
	free(out);
}

static void json_lines(void)
{
	NVS_WARN("a \"quoted\" \\ name\twith a tab");
}

/* NVSHARE_LOG_FORMAT=json: one object per line, ts/level/component/msg,
 * the message escaped. */
static void test_json_format(void **state)
{
	(void)state;
	setenv("NVSHARE_LOG_FORMAT", "json", 1);
	nvs_log_reload_env();
	char *out = capture(json_lines);
	unsetenv("NVSHARE_LOG_FORMAT");
	nvs_log_reload_env();
	char tail[256];
	int y, mo, d, h, mi, s, ms;
	assert_int_equal(sscanf(out, "{\"ts\":\"%4d-%2d-%2dT%2d:%2d:%2d.%3dZ\",%255[^\n]", &y, &mo,
				&d, &h, &mi, &s, &ms, tail),
			 8);
	assert_string_equal(tail, "\"level\":\"warn\",\"component\":\"test\",\"msg\":\"a "
				  "\\\"quoted\\\" \\\\ name\\u0009with a tab\"}");
	assert_int_equal(count_lines(out), 1);
	free(out);
	/* Back to text. */
	out = capture(info_line);
	assert_true(!strncmp(out, "[nvshare][test] ", 16));
	free(out);
}

static void forged_lines(void)
{
	/* A peer's string with a line break and an escape: the way a GPU
	 * UUID in ATTACH_GPU tried to add a line of its own. */
	const char *uuid =
	    "GPU-x\n[nvshare][scheduler] 2026-01-01T00:00:00.000Z INFO forged\r\x1b[2J";
	NVS_INFO("ATTACH_GPU refused: GPU \"%s\"", uuid);
}

/* Text format: control characters in a message (what a peer sent) become
 * '?', so one call is one line whatever its fields hold. */
static void test_control_chars(void **state)
{
	(void)state;
	char *out = capture(forged_lines);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(
	    out, "GPU \"GPU-x?[nvshare][scheduler] 2026-01-01T00:00:00.000Z INFO forged??[2J\"\n"));
	free(out);
}

int main(void)
{
	nvs_log_init("test");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_unlimited), cmocka_unit_test(test_repeats_limited),
	    cmocka_unit_test(test_sites_independent), cmocka_unit_test(test_iso8601_utc),
	    cmocka_unit_test(test_filter_and_log_n),  cmocka_unit_test(test_queue),
	    cmocka_unit_test(test_json_format),	      cmocka_unit_test(test_control_chars),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
