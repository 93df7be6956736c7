/*
 * Liveness and readiness for the kubelet's exec probes (docs/kubernetes.md,
 * "Probes"). With --health-file the main loop rewrites that file at least
 * once a second it runs (the loop wakes every 5 s even when idle) with how
 * many of its endpoints are registered with the kubelet. The probe is this
 * same binary run with --probe live|ready: live when the file is fresher
 * than --probe-max-age (a hung loop stops rewriting it), ready when live
 * and every endpoint is registered.
 */
#ifndef NVSHARE_DP_HEALTH_H
#define NVSHARE_DP_HEALTH_H

#include <stdint.h>

#define NVS_DP_PROBE_MAX_AGE_MS 30000u

/* Main loop: records one turn (now: CLOCK_MONOTONIC ms). No-op without a
 * file; a write error is logged once. */
void nvs_dp_health_stamp(const char *file, uint64_t now_ms, unsigned registered,
			 unsigned endpoints);
/* The probe: returns the exit status (0 healthy, 1 not) after one line on
 * stdout saying why. */
int nvs_dp_health_probe(const char *file, int ready, uint64_t max_age_ms);

#endif
