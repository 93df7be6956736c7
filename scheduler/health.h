/*
 * Liveness of the event loop: a timer stamps a heartbeat at the top of
 * every turn (the loop's first phase); /healthz (metrics.c, on the HTTP thread) fails
 * when the last stamp is older than NVSHARE_HEALTH_STALL_MS. The loop
 * wakes at least once a second even when idle (the socket check), so an
 * idle scheduler stays healthy. docs/metrics.md, "/healthz".
 */
#ifndef NVSHARE_SCHEDULER_HEALTH_H
#define NVSHARE_SCHEDULER_HEALTH_H

#include <stdint.h>

/* NVSHARE_HEALTH_STALL_MS (settings.def: at least 1500 ms, above the
 * loop's 1 s idle wake-up). */
extern uint32_t nvs_health_stall_ms;

/* Registers the heartbeat with the event loop (loop.h, NVS_LOOP_START):
 * each turn stamps the time it began. */
void nvs_health_start(void);
/* Stalls: gaps between two turns longer than nvs_health_stall_ms, seen
 * when the loop turns again (each one is also logged). */
struct nvs_health_stalls {
	uint64_t count;
	uint64_t stalled_ns; /* the gaps summed */
	uint64_t longest_ns;
};
/* Any thread: the stalls so far. */
void nvs_health_stalls(struct nvs_health_stalls *out);
/* Any thread: ms since the last stamp (UINT64_MAX: never stamped). */
uint64_t nvs_health_age_ms(uint64_t now);

#endif
