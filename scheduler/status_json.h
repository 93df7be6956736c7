/*
 * The status snapshot as JSON (cJSON): per GPU settings, lock state and
 * counters; per client identity, limits and per-GPU use. Used by
 * CTL_STATUS (nvsharectl) and meant for the metrics exporter too. The
 * layout is described in docs/scheduler.md.
 */
#ifndef NVSHARE_SCHEDULER_STATUS_JSON_H
#define NVSHARE_SCHEDULER_STATUS_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* Builds the snapshot at time `now` (CLOCK_MONOTONIC ns). NULL on OOM. */
cJSON *nvs_status_json(uint64_t now);

#endif
