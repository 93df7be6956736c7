/*
 * Scheduler settings: defaults, the environment (NVSHARE_*), and the
 * scheduler-only value parsers (capacity lists, 32-bit durations).
 */
#ifndef NVSHARE_SCHEDULER_SETTINGS_H
#define NVSHARE_SCHEDULER_SETTINGS_H

#include <stdint.h>

struct sched_config;

#define NVS_DEFAULT_TQ_MS 30000u
#define NVS_DEFAULT_RESERVE (512ull << 20)
/* NVS_DEFAULT_IDLE_RELEASE_MS: common/protocol.h (the client shares it). */
#define NVS_DEFAULT_DROP_GRACE_MS 5000u
/* Unknown tenants (peer.h, docs/security.md): restrictive by default. */
#define NVS_DEFAULT_UNKNOWN_CORE_LIMIT 10u
#define NVS_DEFAULT_UNKNOWN_MEM_LIMIT (1ull << 30)

/* Fills cfg with the built-in defaults. */
void nvs_config_defaults(struct sched_config *cfg);
/* Applies NVSHARE_* variables; bad values are logged and ignored. Returns
 * the number of bad values. */
int nvs_config_from_env(struct sched_config *cfg);

/* The TQ parser and its range, shared with nvsharectl: common/parse.h. */

/* Capacity: "16Gi" for every GPU, or a comma list per GPU index
 * ("16Gi,8Gi"; an empty item or "auto" leaves that GPU automatic). Fills
 * cfg->capacity_all or cfg->capacity[]. Returns 0 or -1. */
int nvs_parse_capacity_list(const char *s, struct sched_config *cfg);

/* Milliseconds: bare number is ms, or with unit ms/s/m. */
int nvs_parse_ms32(const char *s, uint32_t *out);

#endif
