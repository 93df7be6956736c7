/*
 * Per-GPU scheduling policy: modes (on / off / auto), the FCFS lock queue,
 * the time quantum, DROP_LOCK with a grace period and revocation, and the
 * accounting of holds and waits.
 *
 * Rules (docs/scheduler.md has the reasoning):
 *  - A GPU is serialized in mode on; never in mode off; in mode auto while
 *    the memory its clients have allocated exceeds its capacity.
 *  - Serialized: one holder; REQ_LOCK queues FCFS; the head is granted the
 *    moment the holder releases, is revoked, disconnects, or the GPU
 *    becomes concurrent.
 *  - TQ: once the holder has held for tq_ms and someone waits, it gets
 *    DROP_LOCK(grace); resent once at half the grace; revoked at the end of
 *    it. Nobody waiting: no DROP.
 *  - Switching to serialized: GPU_MODE(1) to every attached client; nobody
 *    holds, they REQ_LOCK before their next launch. Switching to concurrent:
 *    GPU_MODE(0) to all; holder and queue cleared.
 */
#ifndef NVSHARE_SCHEDULER_POLICY_H
#define NVSHARE_SCHEDULER_POLICY_H

#include <stdint.h>

struct gpu;
struct client_gpu;

/*
 * Extension point for per-GPU policies layered on the lock (compute quotas,
 * quota.c). Every callback is optional; with g->hook NULL the GPU is
 * plain FCFS + TQ.
 *  gpu_mode:      the GPU_MODE value clients of a serialized GPU are sent
 *                 while the hook runs there (0: NVS_GPU_MODE_SERIALIZED;
 *                 quotas: NVS_GPU_MODE_SERIALIZED_QUOTA, every client then
 *                 caps its in-flight work)
 *  may_grant:     0 passes cg over (throttled); the first waiter in FCFS
 *                 order that may is granted, none: the lock stays free
 *  on_grant / on_release: bill hold time
 *  next_deadline: earliest absolute ns the hook needs on_tick, 0 none
 *  on_tick:       may call nvs_policy_drop() on the holder
 */
struct nvs_policy_hook {
	const char *name;
	uint32_t gpu_mode;
	int (*may_grant)(struct gpu *g, struct client_gpu *cg, uint64_t now);
	void (*on_grant)(struct gpu *g, struct client_gpu *cg, uint64_t now);
	/* LOCK_RELEASED from the holder, before on_release (cg->drop still
	 * describes the DROP_LOCK it answers, if any). */
	void (*on_drained)(struct gpu *g, struct client_gpu *cg, uint32_t flags, uint64_t drain_ns,
			   uint64_t now);
	void (*on_release)(struct gpu *g, struct client_gpu *cg, uint64_t now);
	uint64_t (*next_deadline)(struct gpu *g, uint64_t now);
	void (*on_tick)(struct gpu *g, uint64_t now);
};

/*
 * Who installs hooks: a policy layered on the lock decides for itself which
 * GPUs it runs on (quota.c registers itself at start). Dependencies run one
 * way: that policy calls policy.c (nvs_policy_grant, nvs_policy_drop, ...);
 * policy.c reaches it only through these operations and g->hook.
 *  refresh: g's clients, their limits or its mode changed (policy.c's mode
 *           evaluation): install or remove the hook on g; returns 1 when g
 *           must be serialized for it
 */
struct nvs_policy_ops {
	int (*refresh)(struct gpu *g, uint64_t now);
};
/* One set at most (NULL: none; every GPU plain FCFS + TQ). */
void nvs_policy_set_ops(const struct nvs_policy_ops *ops);

/*
 * The running-set layer (co-scheduling, coschedule.c): on a GPU where it is
 * active, the lock goes to every waiter that fits beside the primary
 * holder g->holder (guests), not to one. Dependencies run one way, as for
 * the hooks: the layer calls policy.c (nvs_policy_grant_member,
 * nvs_policy_drop, ...); policy.c reaches it only through these. Every
 * callback is required; with no layer set, one holder at a time.
 *  active:          the GPU hands its lock to sets right now
 *  fill:            grant every waiter that fits (replaces the one-holder
 *                   grant while active); promote a guest when the primary left
 *  member_released: LOCK_RELEASED from a member other than g->holder: 1
 *                   handled (its hold ended), 0 not a member
 *  member_detach:   the same for a disconnect
 *  hold_ended:      any hold of cg ended (idle: by an idle release)
 *  end_members:     the GPU became concurrent: the other members' holds end
 *  queued:          cg was queued at now (may move it; learns its class)
 *  waiters, hint_bytes: WAITERS and SWAP_HINT values for member h
 *  inform:          tell the other members (WAITERS, SWAP_HINT)
 *  next_deadline, on_tick: as the hooks' (0: none)
 */
struct nvs_policy_layer {
	int (*active)(const struct gpu *g);
	void (*fill)(struct gpu *g, uint64_t now, int handoff);
	int (*member_released)(struct client_gpu *cg, uint32_t flags, uint64_t drain_ns,
			       uint64_t now);
	int (*member_detach)(struct client_gpu *cg, uint64_t now);
	void (*hold_ended)(struct client_gpu *cg, int idle, uint64_t now);
	void (*end_members)(struct gpu *g, uint64_t now);
	void (*queued)(struct client_gpu *cg, uint64_t now);
	uint32_t (*waiters)(const struct gpu *g, const struct client_gpu *h);
	uint64_t (*hint_bytes)(const struct gpu *g, const struct client_gpu *h);
	void (*inform)(struct gpu *g);
	uint64_t (*next_deadline)(struct gpu *g, uint64_t now);
	void (*on_tick)(struct gpu *g, uint64_t now);
};
/* One layer at most (NULL: none). */
void nvs_policy_set_layer(const struct nvs_policy_layer *layer);

/* Entry points. `now`: CLOCK_MONOTONIC ns, the shell's (port.h). */
/* A client attached a GPU (cg is linked by this call). */
void nvs_policy_attach(struct client_gpu *cg, uint64_t now);
/* The client is going away: release or dequeue, unlink, re-evaluate. */
void nvs_policy_detach(struct client_gpu *cg, uint64_t now);
/* allocated: the bytes counted (bounds.c clamps what the client says). */
void nvs_policy_mem_update(struct client_gpu *cg, uint64_t allocated, uint64_t now);
/* Sends cg its GPU's mode again (a client that re-attached may have reset). */
void nvs_policy_resend_mode(struct client_gpu *cg);
void nvs_policy_req_lock(struct client_gpu *cg, uint64_t now);
void nvs_policy_released(struct client_gpu *cg, uint32_t flags, uint64_t drain_ns, uint64_t now);
/* Settings of g changed (mode, TQ, capacity, limits: an administrator or
 * the Pod watch): re-count the claims and re-evaluate now, without waiting
 * for the mode-switch budget. */
void nvs_policy_settings_changed(struct gpu *g, uint64_t now);
/* Grants the lock to the first waiter the hook allows, if it is free (a
 * hook calls it when a throttle ends). */
void nvs_policy_grant(struct gpu *g, uint64_t now);
/* Asks the holder to release (TQ expiry or a hook). */
void nvs_policy_drop(struct gpu *g, uint64_t now, const char *why);
/* A DROP_LOCK for `why` was sent to a member: counted by reason (g->co). */
void nvs_policy_count_drop(struct gpu *g, const char *why);

/* The policy's timer: the earliest time at which nvs_policy_tick must run
 * (0: none); nvs_core_tick (claims.h, which the shell's loop calls) runs it
 * no later than that (and may at any other time). TQ expiry, DROP_LOCK
 * grace and revocation, deferred mode switches, the hooks' and the layer's
 * deadlines. */
uint64_t nvs_policy_next_deadline(uint64_t now);
void nvs_policy_tick(uint64_t now);

/* A client's cumulative swap counters (SWAP_STATS). */
struct nvs_swap_stats;
void nvs_policy_swap_stats(struct client_gpu *cg, const struct nvs_swap_stats *s);
/* The quantum in force: the TQ, stretched to NVSHARE_SWAP_TQ_FACTOR times the
 * last hand-off's swap time while memory does not fit (docs/swap.md). */
uint64_t nvs_policy_tq_ns(const struct gpu *g);
/* What the coming hand-off costs (bounds.c nvs_bounds_handoff_ns), ns:
 * the quantum is NVSHARE_SWAP_TQ_FACTOR times it. */
uint64_t nvs_policy_handoff_ns(const struct gpu *g);

/* Memory the GPU's clients are expected to use: each one's allocation, or
 * its Pod's nvshare.com/gpu-memory request (up to its limit) when larger.
 * Mode auto serializes the GPU when this exceeds the capacity. */
uint64_t nvs_policy_expected(const struct gpu *g);

/* For the co-scheduler (coschedule.c): one client's expected memory; the
 * bytes h should move out so that `next` fits; grant cg from the queue as
 * the primary holder or a guest; take a waiter off the queue; tell the
 * holders what changed. */
uint64_t nvs_policy_expected_of(const struct client_gpu *cg);
/* cg's memory stays on the GPU whether it runs or not (a device-memory
 * client): never asked to move it out, always counted as resident. */
int nvs_policy_pinned(const struct client_gpu *cg);
uint64_t nvs_policy_swap_out_need(const struct gpu *g, const struct client_gpu *h,
				  const struct client_gpu *next);
/* The same, for callers asking about many members of one GPU at once:
 * the GPU's sums (expected memory, resident estimate) computed once
 * (NULL: computed here). Each is O(clients). */
struct nvs_mem_sums {
	uint64_t expected, resident;
};
void nvs_policy_mem_sums(const struct gpu *g, struct nvs_mem_sums *s);
uint64_t nvs_policy_swap_out_need_with(const struct gpu *g, const struct client_gpu *h,
				       const struct client_gpu *next, const struct nvs_mem_sums *s);
void nvs_policy_grant_member(struct gpu *g, struct client_gpu *cg, uint64_t now, int handoff,
			     int guest);
void nvs_policy_dequeue(struct gpu *g, struct client_gpu *cg);
/* A waiter moved to the head of the queue (co-scheduling: a preempted batch
 * client gets the GPU back first). */
void nvs_policy_requeue_head(struct gpu *g, struct client_gpu *cg);
void nvs_policy_inform(struct gpu *g);

/*
 * Every member of the running set (the primary g->holder and the layer's
 * guests) has one DROP_LOCK state machine (cg->drop) and one release
 * accounting:
 *  drop_start:     DROP_LOCK with the grace, asking it to move swap_out
 *                  bytes to the host (counted; the reason is the caller's)
 *  drop_due:       the member's next drop deadline: half the grace, then
 *                  its end (0: no DROP_LOCK sent)
 *  drop_resend:    at half the grace, once, with what is left; returns
 *                  drop_due
 *  send_drop:      the message alone (grace 0: "revoked, no longer yours")
 *  account_release: a LOCK_RELEASED: the drain since its DROP_LOCK, the
 *                  counts, what it moved to the host (as asked, or as an
 *                  idle release says) off its resident estimate; returns
 *                  the bytes moved
 */
void nvs_policy_drop_start(struct client_gpu *h, uint64_t now, uint64_t swap_out);
uint64_t nvs_policy_drop_due(const struct client_gpu *h);
uint64_t nvs_policy_drop_resend(struct client_gpu *h, uint64_t now);
void nvs_policy_send_drop(struct client_gpu *h, uint32_t grace_ms);
/* Member h (the primary or a guest) let its grace end without releasing:
 * counted, told (DROP_LOCK, grace 0) and penalized one quantum (tenant
 * turns, fairness.c), the same for either role; the caller ends its hold. */
void nvs_policy_revoked(struct client_gpu *h, uint64_t now);
uint64_t nvs_policy_account_release(struct client_gpu *cg, uint32_t flags, uint64_t now);

/* Hold time including the current hold. */
uint64_t nvs_policy_held_ns(const struct client_gpu *cg, uint64_t now);

#endif
