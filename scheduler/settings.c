#include "settings.h"

#include "claims.h"
#include "log.h"
#include "parse.h"
#include "state.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void nvs_config_defaults(struct sched_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->mode = NVS_MODE_AUTO;
	cfg->tq_ms = NVS_DEFAULT_TQ_MS;
	cfg->reserve = NVS_DEFAULT_RESERVE;
	cfg->idle_release_ms = NVS_DEFAULT_IDLE_RELEASE_MS;
	cfg->drop_grace_ms = NVS_DEFAULT_DROP_GRACE_MS;
	cfg->use_nvml = 1;
	cfg->unknown_core_limit = NVS_DEFAULT_UNKNOWN_CORE_LIMIT;
	cfg->unknown_mem_limit = NVS_DEFAULT_UNKNOWN_MEM_LIMIT;
	cfg->oversub_factor = NVS_DEFAULT_OVERSUB_FACTOR;
	cfg->mode_dwell_ms = NVS_DEFAULT_MODE_DWELL_MS;
	cfg->mode_switch_burst = NVS_DEFAULT_MODE_SWITCH_BURST;
	cfg->report_rate = NVS_DEFAULT_REPORT_RATE;
	cfg->swap_tq_max_factor = NVS_DEFAULT_SWAP_TQ_MAX_FACTOR;
}

int nvs_parse_ms32(const char *s, uint32_t *out)
{
	uint64_t v;
	if (nvs_parse_duration_ms(s, &v) || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int nvs_parse_capacity_list(const char *s, struct sched_config *cfg)
{
	if (!s)
		return -1;
	uint64_t vals[NVS_MAX_GPUS];
	unsigned n = 0;
	char buf[1024];
	if (strlen(s) >= sizeof buf)
		return -1;
	strcpy(buf, s);
	int list = strchr(buf, ',') != NULL;
	/* strtok_r would skip empty items; walk by hand to keep positions. */
	char *item = buf;
	for (;;) {
		char *comma = strchr(item, ',');
		if (comma)
			*comma = '\0';
		if (n >= NVS_MAX_GPUS)
			return -1;
		char *t = item;
		while (isspace((unsigned char)*t))
			t++;
		if (*t == '\0' || !strcasecmp(t, "auto"))
			vals[n] = 0;
		else if (nvs_parse_size(t, 1, &vals[n]) || vals[n] == 0)
			return -1;
		n++;
		if (!comma)
			break;
		item = comma + 1;
	}
	if (!list) {
		cfg->capacity_all = vals[0];
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		cfg->capacity[i] = vals[i];
	return 0;
}

static int env_str(const char *name, const char **v)
{
	*v = getenv(name);
	return *v && **v;
}

static int bad(const char *name, const char *v, const char *what)
{
	NVS_WARN("ignoring %s=\"%s\": expected %s", name, v, what);
	return 1;
}

int nvs_config_from_env(struct sched_config *cfg)
{
	int errors = 0;
	const char *v;
	if (env_str("NVSHARE_SCHED_MODE", &v)) {
		int m = nvs_mode_parse(v);
		if (m < 0)
			errors += bad("NVSHARE_SCHED_MODE", v, "on, off or auto");
		else
			cfg->mode = (unsigned)m;
	}
	if (env_str("NVSHARE_TQ", &v) && nvs_parse_tq_ms(v, &cfg->tq_ms))
		errors += bad("NVSHARE_TQ", v, "seconds (30, 0.5) or a duration (300ms)");
	if (env_str("NVSHARE_GPU_MEMORY_RESERVE", &v) && nvs_parse_size(v, 1, &cfg->reserve))
		errors += bad("NVSHARE_GPU_MEMORY_RESERVE", v, "a size such as 512Mi");
	if (env_str("NVSHARE_GPU_CAPACITY", &v) && nvs_parse_capacity_list(v, cfg))
		errors +=
		    bad("NVSHARE_GPU_CAPACITY", v, "a size (16Gi) or a list per GPU (16Gi,8Gi)");
	if (env_str("NVSHARE_IDLE_RELEASE_MS", &v) && nvs_parse_ms32(v, &cfg->idle_release_ms))
		errors += bad("NVSHARE_IDLE_RELEASE_MS", v, "milliseconds");
	if (env_str("NVSHARE_DROP_GRACE_MS", &v) &&
	    (nvs_parse_ms32(v, &cfg->drop_grace_ms) || cfg->drop_grace_ms == 0))
		errors += bad("NVSHARE_DROP_GRACE_MS", v, "milliseconds > 0");
	unsigned pct;
	if (env_str("NVSHARE_UNKNOWN_TENANT_CORE_LIMIT", &v)) {
		if (nvs_parse_percent(v, 1, 100, &pct))
			errors += bad("NVSHARE_UNKNOWN_TENANT_CORE_LIMIT", v, "1..100 (100: none)");
		else
			cfg->unknown_core_limit = pct == 100 ? 0 : pct;
	}
	if (env_str("NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT", &v)) {
		if (!strcasecmp(v, "none"))
			cfg->unknown_mem_limit = NVS_NO_LIMIT;
		else if (nvs_parse_size(v, 1ull << 20, &cfg->unknown_mem_limit) ||
			 !cfg->unknown_mem_limit)
			errors += bad("NVSHARE_UNKNOWN_TENANT_MEMORY_LIMIT", v,
				      "a size (1Gi, 512 = 512Mi) or none");
	}
	int b;
	if (env_str("NVSHARE_SCHED_NVML", &v)) {
		if (nvs_parse_bool(v, &b))
			errors += bad("NVSHARE_SCHED_NVML", v, "1 or 0");
		else
			cfg->use_nvml = b;
	}
	return errors;
}
