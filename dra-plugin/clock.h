/* CLOCK_MONOTONIC in milliseconds: the one clock of nvshare-dra-plugin's
 * timers, waits and retries. */
#ifndef NVSHARE_DRA_CLOCK_H
#define NVSHARE_DRA_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t nvs_dra_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
