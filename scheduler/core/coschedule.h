/*
 * Co-scheduling: which SET of clients may run together on a serialized GPU
 * (docs/scheduler.md "Co-scheduling"). While a GPU is serialized because its
 * clients' memory does not fit (mode auto, no compute quota, no unmanaged
 * process forcing it), the lock is granted to every waiter whose expected
 * memory fits beside the clients already running: the primary holder
 * (g->holder, under the time quantum as before) plus guests. Interactive
 * clients (declared, or observed: short holds ended by idle releases) that
 * do not fit preempt batch members after a short bound; batch keeps a floor
 * of the GPU time while it waits.
 *
 * A layer on policy.c (policy.h struct nvs_policy_layer), registered by
 * nvs_cosched_start(): dependencies run one way, this file calls policy.c
 * and policy.c reaches it only through the layer's callbacks.
 */
#ifndef NVSHARE_SCHEDULER_COSCHEDULE_H
#define NVSHARE_SCHEDULER_COSCHEDULE_H

#include <stdint.h>

struct gpu;
struct client;
struct client_gpu;

/* Declared classes (struct client.annot_prio, HELLO flags). */
enum { NVS_PRIO_NONE = 0, NVS_PRIO_INTERACTIVE = 1, NVS_PRIO_BATCH = 2 };

struct nvs_cosched_config {
	int enabled;		  /* NVSHARE_COSCHEDULE (on) */
	uint32_t preempt_ms;	  /* NVSHARE_PREEMPT_MS (50): room wait before preempting */
	uint32_t min_slice_ms;	  /* NVSHARE_MIN_SLICE_MS (100): batch slice before preemption */
	uint32_t batch_floor_pct; /* NVSHARE_BATCH_FLOOR_PERCENT (50) */
};
extern struct nvs_cosched_config nvs_cosched_cfg;

#define NVS_COSCHED_WINDOW_MS 2000u /* batch-floor window (halved each one) */
#define NVS_COSCHED_BURST_MS 1000u  /* a hold shorter than this ended idle: a burst */

/* The GPU hands its lock to sets (this file's policy) right now. */
int nvs_cosched_active(const struct gpu *g);
/* cg's class: 1 interactive, 0 batch; *src "declared", "annotation",
 * "observed" or "default". */
int nvs_cosched_interactive(const struct client_gpu *cg, const char **src);
const char *nvs_cosched_class_name(const struct client_gpu *cg);
/* The client's declared class from HELLO's flags (NVS_PRIO_*). */
unsigned nvs_cosched_hello_prio(uint32_t flags);

/* Registers co-scheduling with policy.c as its running-set layer
 * (policy.h struct nvs_policy_layer): without it, one holder at a time
 * everywhere. policy.c reaches this file only through that layer. */
void nvs_cosched_start(void);
/* Members of the running set (holder + guests). */
unsigned nvs_cosched_running(const struct gpu *g);
/* Batch share of the GPU time while batch wanted it, percent (100: none). */
unsigned nvs_cosched_batch_share(const struct gpu *g);

#endif
