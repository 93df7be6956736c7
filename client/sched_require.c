/*
 * Fail-closed mode (NVSHARE_REQUIRE_SCHEDULER=1, docs/client-lock.md): on
 * a node that requires sharing, a process that cannot reach the scheduler
 * must not use the GPU ungated beside the processes that are gated. The
 * gated wrappers (launches, copies) ask nvs_sched_require_ok() first and,
 * while it says no, return CUDA_ERROR_SYSTEM_NOT_READY with a warning
 * (client/entry.c). Nothing exits or blocks for long: the first answer
 * waits for the client thread's first connection attempt, at most
 * REQUIRE_FIRST_TRY_MS; later ones read the connection state. Work resumes
 * by itself once the client thread reconnects.
 */
#include "sched_client_internal.h"

#include "parse.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define REQUIRE_FIRST_TRY_MS 2000

int nvs_sched_require_ok(void)
{
	if (__atomic_load_n(&nvs_sc.connected, __ATOMIC_ACQUIRE))
		return 1;
	pthread_mutex_lock(&nvs_sc.mu);
	if (!nvs_sc.first_try_done) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts); /* the cv's clock (sched_client.c) */
		ts.tv_sec += REQUIRE_FIRST_TRY_MS / 1000;
		int r = 0;
		while (!nvs_sc.first_try_done && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&nvs_sc.cv, &nvs_sc.mu, &ts);
	}
	int ok = nvs_sc.connected;
	pthread_mutex_unlock(&nvs_sc.mu);
	return ok;
}

int nvs_sc_fail_closed(void)
{
	/* Read quietly: config.c warns about a bad value. */
	const char *v = getenv("NVSHARE_REQUIRE_SCHEDULER");
	int on = 0;
	if (v && *v && nvs_parse_bool(v, &on))
		on = 0;
	return on;
}

const char *nvs_sc_ungated_words(void)
{
	return nvs_sc_fail_closed() ? "CUDA work fails meanwhile (NVSHARE_REQUIRE_SCHEDULER=1)"
				    : "running ungated";
}
