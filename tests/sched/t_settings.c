/* Unit tests for the scheduler's value parsers (TQ, capacity lists). */
#include "harness.h"
#include "parse.h"
#include "scheduler/settings.h"
#include "scheduler/state.h"

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

int main(void)
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

	struct sched_config cfg;
	nvs_config_defaults(&cfg);
	tap(nvs_parse_capacity_list("16Gi", &cfg) == 0 && cfg.capacity_all == (16ull << 30),
	    "capacity 16Gi applies to all GPUs");
	nvs_config_defaults(&cfg);
	tap(nvs_parse_capacity_list("8Gi,,auto,1.5Gi", &cfg) == 0 &&
		cfg.capacity[0] == (8ull << 30) && cfg.capacity[1] == 0 && cfg.capacity[2] == 0 &&
		cfg.capacity[3] == (3ull << 29) && cfg.capacity_all == 0,
	    "capacity list per GPU index with empty and auto items");
	tap(nvs_parse_capacity_list("8Gi,lots", &cfg) != 0, "bad capacity list rejected");
	tap(nvs_parse_capacity_list("0", &cfg) != 0, "zero capacity rejected");

	setenv("NVSHARE_SCHED_MODE", "on", 1);
	setenv("NVSHARE_TQ", "300ms", 1);
	setenv("NVSHARE_IDLE_RELEASE_MS", "7", 1);
	setenv("NVSHARE_DROP_GRACE_MS", "bogus", 1);
	nvs_config_defaults(&cfg);
	int bad = nvs_config_from_env(&cfg);
	tap(cfg.mode == NVS_MODE_ON && cfg.tq_ms == 300 && cfg.idle_release_ms == 7 &&
		cfg.drop_grace_ms == 5000 && bad == 1,
	    "environment read; a bad value keeps its default and is reported");
	return tap_failed ? 1 : 0;
}
