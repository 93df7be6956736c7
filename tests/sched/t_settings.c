/*
 * The scheduler's settings table in process (scheduler/settings.def,
 * settings.c): every row's default is valid and lands in its variable,
 * names and variables are unique, the environment and the flags with their
 * precedence and sources, one range check for start and run time, reset,
 * the generated texts; the TQ and capacity parsers.
 */
#include "harness.h"
#include "parse.h"
#include "scheduler/core/coschedule.h"
#include "scheduler/peer_limits.h"
#include "scheduler/settings.h"
#include "scheduler/core/state.h"

static void tq(const char *s, int want_ok, uint64_t want)
{
	uint64_t v = 0;
	int r = nvs_parse_tq_ms(s, &v);
	if (want_ok)
		tap(r == 0 && v == want, "TQ \"%s\" = %llu ms (got %llu)", s,
		    (unsigned long long)want, (unsigned long long)v);
	else
		tap(r != 0, "TQ \"%s\" rejected", s);
}

/* nvs_settings_load with these arguments, stderr to /dev/null. */
static int load(int argc, char **argv)
{
	fflush(stderr);
	int saved = dup(2);
	FILE *null = freopen("/dev/null", "w", stderr);
	(void)null;
	int rc = nvs_settings_load(argc, argv, "test");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	return rc;
}

static const char *src(int id, int gpu)
{
	return nvs_setting_src_name(nvs_setting_source(id, gpu));
}

static void parsers(void)
{
	tq("30", 1, 30000);
	tq("0.3", 1, 300);
	tq("1.5", 1, 1500);
	tq(".25", 1, 250);
	tq("300ms", 1, 300);
	tq("2s", 1, 2000);
	tq("1m", 1, 60000);
	tq("0", 0, 0);
	tq("0.0001", 0, 0);
	tq("-1", 0, 0);
	tq("abc", 0, 0);
	tq("1.", 0, 0);
	tq("99999999999", 0, 0);

	static struct sched_config cfg;
	memset(&cfg, 0, sizeof cfg);
	tap(nvs_parse_capacity_list("16Gi", &cfg) == 0 && cfg.capacity_all == (16ull << 30),
	    "capacity 16Gi applies to all GPUs");
	memset(&cfg, 0, sizeof cfg);
	tap(nvs_parse_capacity_list("8Gi,,auto,1.5Gi", &cfg) == 0 &&
		cfg.capacity[0] == (8ull << 30) && cfg.capacity[1] == 0 && cfg.capacity[2] == 0 &&
		cfg.capacity[3] == (3ull << 29) && cfg.capacity_all == 0,
	    "capacity list per GPU index with empty and auto items");
	tap(nvs_parse_capacity_list("8Gi,lots", &cfg) != 0, "bad capacity list rejected");
	tap(nvs_parse_capacity_list("0", &cfg) != 0, "zero capacity rejected");
}

static void table(void)
{
	/* Every default parses (nvs_settings_defaults aborts otherwise) and
	 * lands in its variable. */
	nvs_settings_defaults();
	tap(S.cfg.mode == NVS_MODE_AUTO && S.cfg.tq_ms == 30000 &&
		S.cfg.reserve == (512ull << 20) && S.cfg.drop_grace_ms == 5000 &&
		S.cfg.use_nvml == 1,
	    "defaults: mode auto, TQ 30 s, reserve 512Mi, grace 5 s, NVML on");
	tap(S.cfg.idle_release_ms == NVS_DEFAULT_IDLE_RELEASE_MS,
	    "the idle release default is the client's own (protocol.h): %u ms",
	    S.cfg.idle_release_ms);
	tap(nvs_limits_cfg.max_conns_per_tenant == 64 && nvs_limits_cfg.handshake_ms == 2000 &&
		nvs_limits_cfg.buffer_budget == (16ull << 20) &&
		nvs_limits_cfg.accept_rate == 200 && nvs_limits_cfg.max_idle_per_tenant == 16,
	    "defaults reach the modules' variables (limits)");
	tap(nvs_cosched_cfg.enabled == 1 && nvs_cosched_cfg.preempt_ms == 50 &&
		nvs_cosched_cfg.batch_floor_pct == 50,
	    "defaults reach the modules' variables (co-scheduling)");
	tap(S.cfg.unknown_mem_limit == (1ull << 30) && S.cfg.q_slice_ms == 0 &&
		S.cfg.swap_tq_factor == 50,
	    "1Gi unknown-tenant limit; the quota slice unset (derived); swap factor 33");

	/* One name per row. */
	int dup = 0;
	for (int id = 0; id < NVS_SET_COUNT; id++)
		if (nvs_setting_by_name(nvs_setting_name(id)) != id)
			dup++;
	tap(!dup, "setting names are unique (%d duplicates)", dup);
	int rt = 0;
	for (int id = 0; id < NVS_SET_COUNT; id++)
		if (nvs_setting_ctl(id) && nvs_setting_by_ctl(nvs_setting_ctl(id)) == id)
			rt++;
	tap(rt == 4, "4 run-time settings, each its own CTL_SET field (%d)", rt);
}

static void env_and_flags(void)
{
	setenv("NVSHARE_SCHED_MODE", "on", 1);
	setenv("NVSHARE_TQ", "300ms", 1);
	setenv("NVSHARE_IDLE_RELEASE_MS", "7", 1);
	char *a1[] = {"s", "--tq", "2", "--no-nvml", "--capacity", "8Gi,,4Gi", NULL};
	int rc = load(6, a1);
	tap(rc == -1, "good environment and flags: go on (%d)", rc);
	tap(S.cfg.mode == NVS_MODE_ON && !strcmp(src(NVS_SET_MODE, -1), "environment"),
	    "mode on from the environment");
	tap(S.cfg.tq_ms == 2000 && !strcmp(src(NVS_SET_TQ, -1), "flag"),
	    "a flag wins over its variable: TQ 2 s (flag), not 300 ms");
	tap(S.cfg.idle_release_ms == 7 && S.cfg.use_nvml == 0 &&
		!strcmp(src(NVS_SET_NVML, -1), "flag"),
	    "idle release 7 ms; --no-nvml is the switch of setting nvml");
	tap(S.cfg.capacity[0] == (8ull << 30) && S.cfg.capacity[1] == 0 &&
		S.cfg.capacity[2] == (4ull << 30) && !strcmp(src(NVS_SET_RESERVE, -1), "default"),
	    "a capacity list by GPU index; reserve from its default");
	char t[128];
	nvs_setting_text(NVS_SET_CAPACITY, t, sizeof t);
	tap(!strcmp(t, "8Gi,auto,4Gi"), "capacity shown as it is typed: %s", t);

	/* Run time: the same range, the value back, the source. */
	char why[300];
	tap(nvs_setting_check(NVS_SET_TQ, 0, -1, why, sizeof why) != 0 && strstr(why, "tq 0ms") &&
		strstr(why, "expected"),
	    "a run-time TQ of 0 is refused, named: %s", why);
	tap(nvs_setting_check(NVS_SET_CAPACITY, UINT64_MAX, -1, why, sizeof why) != 0,
	    "capacity 2^64-1 is refused (as configured: at most 1Pi)");
	S.ngpus = 1;
	S.gpus[0].index = 0;
	S.gpus[0].total_mem = 16ull << 30;
	tap(nvs_setting_check(NVS_SET_CAPACITY, 1ull << 40, -1, why, sizeof why) != 0 &&
		strstr(why, "more than its memory 16Gi"),
	    "capacity 1Ti on a 16Gi GPU is refused with the start's words: %s", why);
	tap(nvs_setting_check(NVS_SET_CAPACITY, 8ull << 30, 0, why, sizeof why) == 0,
	    "capacity 8Gi on that GPU is taken");
	nvs_setting_apply(NVS_SET_TQ, 500);
	nvs_setting_note(NVS_SET_TQ, -1, NVS_SRC_RUNTIME);
	nvs_setting_note(NVS_SET_TQ, 0, NVS_SRC_RUNTIME);
	tap(S.cfg.tq_ms == 500 && nvs_setting_changed(NVS_SET_TQ) &&
		!strcmp(src(NVS_SET_TQ, -1), "nvsharectl") &&
		!strcmp(src(NVS_SET_TQ, 0), "nvsharectl"),
	    "a run-time TQ: in force, from nvsharectl, differs from the configuration");
	nvs_setting_reset(NVS_SET_TQ);
	nvs_setting_configured_text(NVS_SET_TQ, 0, t, sizeof t);
	tap(S.cfg.tq_ms == 2000 && !strcmp(src(NVS_SET_TQ, -1), "flag") &&
		!strcmp(src(NVS_SET_TQ, 0), "flag") && !nvs_setting_changed(NVS_SET_TQ) &&
		!strcmp(t, "2s"),
	    "reset: the configured 2s (flag) again, for every GPU");
	nvs_setting_configured_text(NVS_SET_CAPACITY, 1, t, sizeof t);
	tap(!strcmp(t, "8589934592,auto,4294967296"), "exact configured capacity: %s", t);
	S.ngpus = 0;

	/* Bad values stop the start: exit 2. */
	char *a2[] = {"s", "--tq", "0", NULL};
	tap(load(3, a2) == 2, "--tq 0: exit 2");
	char *a3[] = {"s", "--unmanaged", "serialise", NULL};
	tap(load(3, a3) == 2, "--unmanaged serialise: exit 2");
	setenv("NVSHARE_ACCEPT_RATE", "5", 1);
	char *a4[] = {"s", NULL};
	tap(load(1, a4) == 2, "NVSHARE_ACCEPT_RATE=5 (0 or 10..1000000): exit 2");
	unsetenv("NVSHARE_ACCEPT_RATE");
	setenv("NVSHARE_ACCEPT_RATE", "0", 1);
	tap(load(1, a4) == -1 && nvs_limits_cfg.accept_rate == 0, "NVSHARE_ACCEPT_RATE=0: off");
	unsetenv("NVSHARE_ACCEPT_RATE");
	char *a5[] = {"s", "stray", NULL};
	tap(load(2, a5) == 2, "a stray argument: exit 2");
	char *a6[] = {"s", "--help-table=xml", NULL};
	tap(load(2, a6) == 2, "--help-table xml: exit 2");
	unsetenv("NVSHARE_SCHED_MODE");
	unsetenv("NVSHARE_TQ");
	unsetenv("NVSHARE_IDLE_RELEASE_MS");
}

/* The generated texts name every setting. */
static void texts(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	nvs_settings_usage(f);
	fclose(f);
	int missing = 0;
	for (int id = 0; id < NVS_SET_COUNT; id++) {
		char flag[80];
		snprintf(flag, sizeof flag, "--%s%s",
			 id == NVS_SET_NVML || id == NVS_SET_KUBE ? "no-" : "",
			 nvs_setting_name(id));
		if (!strstr(buf, flag))
			missing++;
	}
	tap(!missing, "--help lists every setting's flag (%d missing)", missing);
	free(buf);
	f = open_memstream(&buf, &len);
	tap(nvs_settings_print_table(f, "man", "test") == 0, "--help-table man");
	fclose(f);
	tap(strstr(buf, ".TH NVSHARE\\-SCHEDULER 8") && strstr(buf, "NVSHARE_TQ"),
	    "the man page has its header and the variables");
	free(buf);
}

int main(void)
{
	parsers();
	table();
	env_and_flags();
	texts();
	return tap_failed ? 1 : 0;
}
