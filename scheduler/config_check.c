/*
 * Strict configuration (config_check.h): one table of every variable the
 * scheduler reads, its flag and what it accepts. Every bad value is a
 * start-up error naming the variable (or flag), the value and the valid
 * range; so are impossible combinations. The modules still read their own
 * variables; this table only guarantees that what they read is valid.
 */
#include "config_check.h"

#include "coschedule.h"
#include "health.h"
#include "limits.h"
#include "parse.h"
#include "plog.h"
#include "settings.h"
#include "state.h"
#include "unmanaged.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_BYTES (1ull << 50) /* 1 PiB: more is a typo, not a GPU */

static int v_mode(const char *v)
{
	return nvs_mode_parse(v) < 0 ? -1 : 0;
}
static int v_tq(const char *v)
{
	uint64_t x;
	return nvs_parse_tq_ms(v, &x);
}
static int v_reserve(const char *v)
{
	uint64_t x;
	return nvs_parse_size(v, 1, &x) || x > MAX_BYTES ? -1 : 0;
}
static int v_capacity(const char *v)
{
	static struct sched_config c;
	memset(&c, 0, sizeof c);
	if (nvs_parse_capacity_list(v, &c) || c.capacity_all > MAX_BYTES)
		return -1;
	for (unsigned i = 0; i < NVS_MAX_GPUS; i++)
		if (c.capacity[i] > MAX_BYTES)
			return -1;
	return 0;
}
static int v_ms(const char *v)
{
	uint32_t x;
	return nvs_parse_ms32(v, &x);
}
static int v_ms_pos(const char *v)
{
	uint32_t x;
	return nvs_parse_ms32(v, &x) || !x ? -1 : 0;
}
static int v_bool(const char *v)
{
	int b;
	return nvs_parse_bool(v, &b);
}
static int v_port(const char *v)
{
	uint64_t x;
	return nvs_parse_u64(v, 0, 65535, &x);
}
static int v_addr(const char *v)
{
	unsigned char b[16];
	char t[64];
	size_t n = strlen(v);
	if (n >= 2 && v[0] == '[' && v[n - 1] == ']' && n - 2 < sizeof t) {
		memcpy(t, v + 1, n - 2);
		t[n - 2] = '\0';
		v = t;
	}
	return inet_pton(AF_INET, v, b) == 1 || inet_pton(AF_INET6, v, b) == 1 ? 0 : -1;
}
static int v_unmanaged(const char *v)
{
	return nvs_unmanaged_parse_policy(v) < 0 ? -1 : 0;
}
static int v_unmanaged_iv(const char *v)
{
	uint32_t x;
	return nvs_unmanaged_parse_interval(v, &x);
}
static int v_sockdir(const char *v)
{
	return strlen(v) >= NVS_SOCK_DIR_MAX ? -1 : 0;
}
static int v_path(const char *v)
{
	return strlen(v) >= 500 ? -1 : 0;
}
static int v_name(const char *v)
{
	return strlen(v) >= 254 ? -1 : 0;
}
static int v_core(const char *v)
{
	unsigned p;
	return nvs_parse_percent(v, 1, 100, &p);
}
static int v_unknown_mem(const char *v)
{
	uint64_t x;
	if (!strcasecmp(v, "none"))
		return 0;
	return nvs_parse_size(v, 1ull << 20, &x) || !x || x > MAX_BYTES ? -1 : 0;
}
static int range(const char *v, uint64_t lo, uint64_t hi)
{
	uint64_t x;
	return nvs_parse_u64(v, lo, hi, &x);
}
static int v_window(const char *v)
{
	return range(v, 500, 20000);
}
static int v_sample(const char *v)
{
	return range(v, 10, 1000);
}
static int v_pct(const char *v)
{
	return range(v, 0, 100);
}
static int v_slice(const char *v)
{
	return range(v, 10, 20000);
}
static int v_factor(const char *v)
{
	return range(v, 0, 1000);
}
static int v_mem_unit(const char *v)
{
	uint64_t x;
	return nvs_parse_size(v, 1, &x) || x < (1ull << 20) || x > (1ull << 40) ? -1 : 0;
}
static int v_swap_out(const char *v)
{
	return strcmp(v, "needed") && strcmp(v, "all") && strcmp(v, "none") ? -1 : 0;
}
static int v_log_format(const char *v)
{
	return strcmp(v, "text") && strcmp(v, "json") ? -1 : 0;
}
static int v_health(const char *v)
{
	uint32_t x;
	return nvs_health_parse_stall(v, &x);
}
/* The hostile-load and co-scheduling settings: their modules parse them
 * again (claims.c, limits.c, plog.c, coschedule.c); these check the same
 * ranges without touching the live configuration. */
static int v_dur(const char *v, uint64_t lo, uint64_t hi)
{
	uint64_t x;
	return nvs_parse_duration_ms(v, &x) || x < lo || x > hi ? -1 : 0;
}
static int v_oversub(const char *v)
{
	return range(v, 1, 1000);
}
static int v_dwell(const char *v)
{
	return v_dur(v, 0, 60000);
}
static int v_1_100(const char *v)
{
	return range(v, 1, 100);
}
static int v_report_rate(const char *v)
{
	return range(v, 1, 10000);
}
static int v_max_conns(const char *v)
{
	return range(v, 0, NVS_MAX_CONNS_PER_TENANT_MAX);
}
static int v_handshake(const char *v)
{
	uint32_t ms;
	return nvs_parse_ms32(v, &ms) ||
		       (ms && (ms < NVS_MIN_HANDSHAKE_MS || ms > NVS_MAX_HANDSHAKE_MS))
		   ? -1
		   : 0;
}
static int v_accept_rate(const char *v)
{
	uint64_t n;
	return nvs_parse_u64(v, 0, NVS_MAX_ACCEPT_RATE, &n) || (n && n < NVS_MIN_ACCEPT_RATE) ? -1
											      : 0;
}
static int v_budget(const char *v)
{
	uint64_t b;
	return nvs_parse_size(v, 1, &b) || b < NVS_MIN_CONN_BUFFER_BUDGET ||
		       b > NVS_MAX_CONN_BUFFER_BUDGET
		   ? -1
		   : 0;
}
static int v_log_rate(const char *v)
{
	return range(v, 0, NVS_MAX_LOG_RATE);
}
static int v_cosched(const char *what, const char *v)
{
	struct nvs_cosched_config c = nvs_cosched_cfg;
	return nvs_cosched_parse(&c, what, v);
}
static int v_coschedule(const char *v)
{
	return v_cosched("coschedule", v);
}
static int v_preempt(const char *v)
{
	return v_cosched("preempt-ms", v);
}
static int v_min_slice(const char *v)
{
	return v_cosched("min-slice-ms", v);
}
static int v_batch_floor(const char *v)
{
	return v_cosched("batch-floor", v);
}

/* env_flag: the flag only sets the variable (read by its module later). */
static const struct nvs_var {
	const char *env, *flag;
	int (*ok)(const char *v);
	const char *expect;
	int env_flag;
} vars[] = {
    {"NVSHARE_SOCK_DIR", "--sock-dir", v_sockdir, "a directory path under 92 bytes", 0},
    {"NVSHARE_ADMIN_SOCK_DIR", "--admin-sock-dir", v_sockdir, "a directory path under 92 bytes", 0},
    {"NVSHARE_SCHED_MODE", "--mode", v_mode, "on, off or auto", 0},
    {"NVSHARE_TQ", "--tq", v_tq, "1 ms .. 24 h: seconds (30, 0.5) or 300ms", 0},
    {"NVSHARE_GPU_CAPACITY", "--capacity", v_capacity,
     "a size up to 1Pi (16Gi), or a list by GPU index (16Gi,8Gi; auto)", 0},
    {"NVSHARE_GPU_MEMORY_RESERVE", "--reserve", v_reserve, "a size up to 1Pi (512Mi)", 0},
    {"NVSHARE_IDLE_RELEASE_MS", "--idle-release-ms", v_ms, "milliseconds (0 .. 2^32-1)", 0},
    {"NVSHARE_DROP_GRACE_MS", "--drop-grace-ms", v_ms_pos, "milliseconds > 0", 0},
    {"NVSHARE_SCHED_NVML", "--no-nvml", v_bool, "1 or 0 (true/false, on/off, yes/no)", 0},
    {"NVSHARE_METRICS_ENABLE", "--metrics", v_bool, "1 or 0 (true/false, on/off, yes/no)", 0},
    {"NVSHARE_METRICS_PORT", "--metrics-port", v_port, "0 .. 65535", 0},
    {"NVSHARE_METRICS_ADDR", "--metrics-addr", v_addr, "an IPv4 or IPv6 address", 0},
    {"NVSHARE_METRICS_PROCESS_LABELS", "--metrics-process-labels", v_bool,
     "1 or 0 (true/false, on/off, yes/no)", 0},
    {"NVSHARE_UNMANAGED", "--unmanaged", v_unmanaged, "report or serialize", 0},
    {"NVSHARE_UNMANAGED_INTERVAL_MS", "--unmanaged-interval", v_unmanaged_iv,
     "0 (off) or 100 ms .. 1 h", 0},
    {"NVSHARE_PROC_ROOT", "--proc-root", v_path, "a path under 500 bytes", 0},
    {"NODE_NAME", "--node-name", v_name, "a node name under 254 bytes", 0},
    {"NVSHARE_KUBE_API", "--kube-api", v_path, "a URL under 500 bytes", 0},
    {"NVSHARE_KUBE_TOKEN_FILE", "--kube-token-file", v_path, "a path under 500 bytes", 0},
    {"NVSHARE_KUBE_CA_FILE", "--kube-ca-file", v_path, "a path under 500 bytes", 0},
    {"NVSHARE_KUBE", "--no-kube", v_bool, "1 or 0 (true/false, on/off, yes/no)", 0},
    {"NVSHARE_EVENTS", "--events", v_path, "a file path under 500 bytes", 0},
    {"NVSHARE_STATE_FILE", "--state-file", v_path, "a file path under 500 bytes, or none", 0},
    {"NVSHARE_HEALTH_STALL_MS", "--health-stall-ms", v_health, "1500 .. 600000 ms", 0},
    {"NVSHARE_DEBUG", "--debug", v_bool, "1 or 0 (true/false, on/off, yes/no)", 0},
    {"NVSHARE_OVERSUBSCRIPTION_FACTOR", "--oversubscription-factor", v_oversub,
     "an integer 1..1000", 0},
    {"NVSHARE_MODE_DWELL_MS", "--mode-dwell-ms", v_dwell,
     "0..60000 ms (1000, 1s, 250ms; 0: no limit)", 0},
    {"NVSHARE_MODE_SWITCH_BURST", "--mode-switch-burst", v_1_100, "an integer 1..100", 0},
    {"NVSHARE_REPORT_RATE", "--report-rate", v_report_rate,
     "an integer 1..10000 (reports per second per connection)", 0},
    {"NVSHARE_SWAP_TQ_MAX_FACTOR", "--swap-tq-max-factor", v_1_100, "an integer 1..100", 0},
    {"NVSHARE_MAX_CONNS_PER_TENANT", "--max-conns-per-tenant", v_max_conns,
     "0..1000000 (0: no cap)", 0},
    {"NVSHARE_HANDSHAKE_TIMEOUT_MS", "--handshake-timeout-ms", v_handshake,
     "0 (never) or 100 ms .. 10 min", 0},
    {"NVSHARE_CONN_BUFFER_BUDGET", "--conn-buffer-budget", v_budget, "1Mi .. 4Gi (16Mi)", 0},
    {"NVSHARE_ACCEPT_RATE", "--accept-rate", v_accept_rate,
     "0 (no cap) or 10..1000000 connections a second", 0},
    {"NVSHARE_MAX_IDLE_CLIENTS_PER_TENANT", "--max-idle-clients-per-tenant", v_max_conns,
     "0..1000000 (0: no cap)", 0},
    {"NVSHARE_LOG_RATE", "--log-rate", v_log_rate, "lines per second, 0 (no limit) .. max", 0},
    {"NVSHARE_COSCHEDULE", "--coschedule", v_coschedule, "on or off", 0},
    {"NVSHARE_PREEMPT_MS", "--preempt-ms", v_preempt, "milliseconds 0..60000 (or 50ms, 1s)", 0},
    {"NVSHARE_MIN_SLICE_MS", "--min-slice-ms", v_min_slice, "milliseconds 0..60000 (or 100ms, 1s)",
     0},
    {"NVSHARE_BATCH_FLOOR_PERCENT", "--batch-floor", v_batch_floor, "a percent 0..100", 0},
    {"NVSHARE_UNKNOWN_TENANT_CORE_LIMIT", "--unknown-tenant-core-limit", v_core,
     "1..100 (100: none)", 1},
    {"NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT", "--unknown-tenant-memory-limit", v_unknown_mem,
     "a size from 1Mi (1Gi, 512 = 512Mi) or none", 1},
    {"NVSHARE_COMPUTE_WINDOW_MS", "--compute-window-ms", v_window, "500 .. 20000", 1},
    {"NVSHARE_QUOTA_SAMPLE_INTERVAL_MS", "--quota-sample-interval-ms", v_sample, "10 .. 1000", 1},
    {"NVSHARE_QUOTA_CARRYOVER_PERCENT", "--quota-carryover-percent", v_pct, "0 .. 100", 1},
    {"NVSHARE_DROP_TAIL_BILLING_PERCENT", "--drop-tail-billing-percent", v_pct, "0 .. 100", 1},
    {"NVSHARE_QUOTA_SLICE_MS", "--quota-slice-ms", v_slice,
     "10 .. the compute window (20000 at most)", 1},
    {"NVSHARE_GPU_MEMORY_UNIT", "--gpu-memory-unit", v_mem_unit, "1Mi .. 1Ti (bare: bytes)", 1},
    {"NVSHARE_SWAP_OUT", "--swap-out", v_swap_out, "needed, all or none", 1},
    {"NVSHARE_SWAP_TQ_FACTOR", "--swap-tq-factor", v_factor, "0 .. 1000 (0: off)", 1},
    {"NVSHARE_LOG_FORMAT", "--log-format", v_log_format, "text or json", 1},
};
#define NVARS (sizeof vars / sizeof vars[0])

static void bad(const char *what, const char *v, const char *expect)
{
	fprintf(stderr, "nvshare-scheduler: bad value for %s: \"%s\" (expected %s)\n", what, v,
		expect);
}

int nvs_config_env_flags(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--"))
			break;
		for (unsigned k = 0; k < NVARS; k++) {
			size_t n = strlen(vars[k].flag);
			/* Switches (--metrics, --no-kube ...) take no value. */
			if (vars[k].ok == v_bool || strncmp(a, vars[k].flag, n) ||
			    (a[n] != '\0' && a[n] != '='))
				continue;
			const char *v = a[n] == '=' ? a + n + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v)
				return 0; /* getopt reports the missing value */
			if (!*v || vars[k].ok(v)) {
				bad(vars[k].flag, v, vars[k].expect);
				return -1;
			}
			if (vars[k].env_flag)
				setenv(vars[k].env, v, 1);
		}
	}
	return 0;
}

void nvs_config_add_options(struct option *o, unsigned *n, unsigned cap)
{
	for (unsigned k = 0; k < NVARS && *n < cap; k++)
		if (vars[k].env_flag)
			o[(*n)++] = (struct option){vars[k].flag + 2, required_argument, 0,
						    NVS_CONFIG_ENV_FLAG};
}

int nvs_config_check_env(void)
{
	int errors = 0;
	for (unsigned k = 0; k < NVARS; k++) {
		const char *v = getenv(vars[k].env);
		if (!v || !*v || !vars[k].ok(v))
			continue;
		if (!strcmp(vars[k].env, "NVSHARE_STATE_FILE") && !strcmp(v, "none"))
			continue;
		bad(vars[k].env, v, vars[k].expect);
		errors++;
	}
	/* Combinations the modules would clamp or misread. */
	const char *w = getenv("NVSHARE_COMPUTE_WINDOW_MS"), *s = getenv("NVSHARE_QUOTA_SLICE_MS");
	if (!errors && s && *s && (unsigned)atoi(s) > (w && *w ? (unsigned)atoi(w) : 2000u)) {
		fprintf(stderr,
			"nvshare-scheduler: NVSHARE_QUOTA_SLICE_MS=%s is longer than the compute "
			"window (NVSHARE_COMPUTE_WINDOW_MS=%s): expected 10 .. the window\n",
			s, w && *w ? w : "2000");
		errors++;
	}
	return errors;
}

static uint64_t cfg_cap[NVS_MAX_GPUS], cfg_cap_all;

void nvs_config_snapshot(void)
{
	memcpy(cfg_cap, S.cfg.capacity, sizeof cfg_cap);
	cfg_cap_all = S.cfg.capacity_all;
}

int nvs_config_check_gpus(void)
{
	int errors = 0;
	char b1[32], b2[32];
	if (!S.nvml_ok)
		return 0; /* GPUs learned later: nothing to compare yet */
	for (unsigned i = S.ngpus; i < NVS_MAX_GPUS; i++)
		if (cfg_cap[i]) {
			fprintf(
			    stderr,
			    "nvshare-scheduler: NVSHARE_GPU_CAPACITY / --capacity names GPU %u, "
			    "but this node has %u GPU(s) (indexes 0..%u)\n",
			    i, S.ngpus, S.ngpus ? S.ngpus - 1 : 0);
			errors++;
			break;
		}
	for (unsigned i = 0; i < S.ngpus; i++) {
		const struct gpu *g = &S.gpus[i];
		/* The configuration's value: one restored from the state file
		 * must never stop a start. */
		uint64_t cap = cfg_cap[i] ? cfg_cap[i] : cfg_cap_all;
		if (!g->total_mem)
			continue;
		if (cap > g->total_mem) {
			fprintf(stderr,
				"nvshare-scheduler: capacity %s for GPU %u is more than its memory "
				"%s (NVSHARE_GPU_CAPACITY / --capacity; mode off runs everyone "
				"together instead)\n",
				nvs_format_size(cap, b1, sizeof b1), i,
				nvs_format_size(g->total_mem, b2, sizeof b2));
			errors++;
		} else if (!cap && S.cfg.reserve >= g->total_mem) {
			fprintf(
			    stderr,
			    "nvshare-scheduler: reserve %s is not less than GPU %u's memory %s: "
			    "nothing would be left to schedule (NVSHARE_GPU_MEMORY_RESERVE / "
			    "--reserve)\n",
			    nvs_format_size(S.cfg.reserve, b1, sizeof b1), i,
			    nvs_format_size(g->total_mem, b2, sizeof b2));
			errors++;
		}
	}
	return errors;
}
