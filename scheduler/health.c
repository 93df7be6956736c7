/*
 * Event-loop heartbeat for /healthz (health.h). One atomic word written by
 * the loop thread and read by the HTTP thread: no lock.
 */
#include "health.h"

#include "loop.h"
#include "settings.h"

#include <stddef.h>

uint32_t nvs_health_stall_ms = NVS_DEFAULT_HEALTH_STALL_MS;
static uint64_t last_turn_ns; /* atomic; 0: the loop has not run yet */

int nvs_health_parse_stall(const char *s, uint32_t *out)
{
	uint32_t v;
	if (nvs_parse_ms32(s, &v) || v < NVS_MIN_HEALTH_STALL_MS || v > NVS_MAX_HEALTH_STALL_MS)
		return -1;
	*out = v;
	return 0;
}

/* Loop thread: one turn began at now (CLOCK_MONOTONIC ns). */
static void stamp(uint64_t now)
{
	__atomic_store_n(&last_turn_ns, now, __ATOMIC_RELEASE);
}

void nvs_health_start(void)
{
	nvs_loop_timer(NVS_LOOP_START, stamp, NULL);
}

uint64_t nvs_health_age_ms(uint64_t now)
{
	uint64_t t = __atomic_load_n(&last_turn_ns, __ATOMIC_ACQUIRE);
	if (!t)
		return UINT64_MAX;
	return now > t ? (now - t) / 1000000ull : 0;
}
