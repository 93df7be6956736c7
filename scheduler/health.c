/*
 * Event-loop heartbeat for /healthz (health.h). One atomic word written by
 * the loop thread and read by the HTTP thread: no lock.
 */
#include "health.h"

#include "events.h"
#include "log.h"
#include "loop.h"
#include "settings.h"

#include <stddef.h>

uint32_t nvs_health_stall_ms = 3000; /* a row of settings.def sets it at start */
static uint64_t last_turn_ns;	     /* atomic; 0: the loop has not run yet */
/* Stalls seen by the loop itself (atomic: the HTTP thread reads them). */
static uint64_t stalls, stalled_ns, longest_ns;

/* Loop thread: one turn began at now (CLOCK_MONOTONIC ns). A gap since the
 * previous turn longer than the /healthz limit is a stall: the loop was
 * blocked (a handler in a system call that did not return, such as a
 * write to a file on a frozen disk) or the process was not run. Nothing
 * was scheduled meanwhile - a holder kept the GPU past its quantum or its
 * quota - so it is counted, logged and sent as an event (loop_stall) once
 * it is over; the counters make such an interval recognisable afterwards
 * (status "loop", metrics). */
static void stamp(uint64_t now)
{
	uint64_t prev = __atomic_load_n(&last_turn_ns, __ATOMIC_RELAXED);
	uint64_t gap = prev && now > prev ? now - prev : 0;
	if (gap > (uint64_t)nvs_health_stall_ms * 1000000ull) {
		__atomic_add_fetch(&stalls, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&stalled_ns, gap, __ATOMIC_RELAXED);
		if (gap > __atomic_load_n(&longest_ns, __ATOMIC_RELAXED))
			__atomic_store_n(&longest_ns, gap, __ATOMIC_RELAXED);
		NVS_WARN(
		    "event loop stalled: %llu ms between two turns (NVSHARE_HEALTH_STALL_MS "
		    "%u): the scheduler was blocked or not run, and scheduled nothing meanwhile",
		    (unsigned long long)(gap / 1000000ull), nvs_health_stall_ms);
		nvs_event("loop_stall", "\"gap_ms\":%llu,\"threshold_ms\":%u",
			  (unsigned long long)(gap / 1000000ull), nvs_health_stall_ms);
	}
	__atomic_store_n(&last_turn_ns, now, __ATOMIC_RELEASE);
}

void nvs_health_stalls(struct nvs_health_stalls *out)
{
	out->count = __atomic_load_n(&stalls, __ATOMIC_RELAXED);
	out->stalled_ns = __atomic_load_n(&stalled_ns, __ATOMIC_RELAXED);
	out->longest_ns = __atomic_load_n(&longest_ns, __ATOMIC_RELAXED);
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
