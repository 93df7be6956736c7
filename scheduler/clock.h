/*
 * The shell's clock: CLOCK_MONOTONIC in ns. The decision core (core/)
 * never reads it; the shell reads it and hands `now` to the core's entry
 * points.
 */
#ifndef NVSHARE_SCHEDULER_CLOCK_H
#define NVSHARE_SCHEDULER_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t nvs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
