/*
 * Strict configuration (config_check.h): the checks of combinations of
 * settings and of the settings against the GPUs found.
 */
#include "config_check.h"

#include "parse.h"
#include "settings.h"
#include "core/state.h"

#include <stdio.h>
#include <string.h>

int nvs_config_check_combinations(void)
{
	int errors = 0;
	if (S.cfg.q_slice_ms && S.cfg.q_slice_ms > S.cfg.q_window_ms) {
		fprintf(stderr,
			"nvshare-scheduler: the quota slice %u ms (NVSHARE_QUOTA_SLICE_MS / "
			"--quota-slice-ms) is longer than the compute window %u ms "
			"(NVSHARE_COMPUTE_WINDOW_MS / --compute-window-ms): expected 10 .. the "
			"window\n",
			S.cfg.q_slice_ms, S.cfg.q_window_ms);
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
		char why[256];
		if (!g->total_mem)
			continue;
		if (nvs_capacity_check(g, cap, why, sizeof why)) {
			fprintf(stderr,
				"nvshare-scheduler: %s (NVSHARE_GPU_CAPACITY / --capacity)\n", why);
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
