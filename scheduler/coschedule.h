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
 * policy.c calls the hooks below; everything else of the policy lives in
 * coschedule.c.
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

/* Grants every waiter that fits beside the running set (replaces the
 * single-holder grant while active); promotes a guest when the primary
 * left. */
void nvs_cosched_fill(struct gpu *g, uint64_t now, int handoff);
/* LOCK_RELEASED / disconnect of a guest: ends its hold. 1: it was a guest
 * (handled), 0: not a guest. */
int nvs_cosched_guest_released(struct client_gpu *cg, uint32_t flags, uint64_t drain_ns,
			       uint64_t now);
int nvs_cosched_guest_detach(struct client_gpu *cg, uint64_t now);
/* Any hold of cg ended (primary or guest): learns its class. */
void nvs_cosched_hold_ended(struct client_gpu *cg, int idle, uint64_t now);
/* The GPU became concurrent: guests' holds end (no message: GPU_MODE(0)). */
void nvs_cosched_end_guests(struct gpu *g, uint64_t now);
/* cg queued at now: a client preempted for a burst goes to the head; a
 * client whose pause since its last idle release was shorter than that
 * hold is not working in bursts. */
void nvs_cosched_queued(struct client_gpu *cg, uint64_t now);
/* WAITERS and SWAP_HINT values for a member h of the running set. */
uint32_t nvs_cosched_waiters(const struct gpu *g, const struct client_gpu *h);
uint64_t nvs_cosched_hint_bytes(const struct gpu *g, const struct client_gpu *h);
/* Tells the guests (WAITERS, SWAP_HINT), as inform_holder the primary. */
void nvs_cosched_inform(struct gpu *g);
/* A DROP_LOCK was sent to the primary for `why`: counted by reason. */
void nvs_cosched_count_drop(struct gpu *g, const char *why);
uint64_t nvs_cosched_deadline(struct gpu *g, uint64_t now);
void nvs_cosched_tick(struct gpu *g, uint64_t now);
/* Members of the running set (holder + guests). */
unsigned nvs_cosched_running(const struct gpu *g);
/* Batch share of the GPU time while batch wanted it, percent (100: none). */
unsigned nvs_cosched_batch_share(const struct gpu *g);

#endif
