/*
 * Client side of compute quotas (client/sched_quota.c, docs/quotas.md).
 *
 * The scheduler enforces a core limit by lending the GPU's lock for the
 * client's quota only; what the client must do is keep its revocation
 * short: a DROP_LOCK is answered after the work already queued has run, so
 * a limited client may not queue more than a few milliseconds of work.
 *
 * For a limited GPU, and for every client of a GPU on which some client is
 * limited (the scheduler says so with GPU_MODE 2), every gated call takes
 * the slow path (the global gate stays closed; elsewhere the one-load fast
 * path stays): it
 * records an event on the calling thread's legacy default stream every
 * NVSHARE_QUOTA_EVENT_EVERY gated calls (default 8) and, while more than
 * NVSHARE_QUOTA_MAX_EVENTS (default 2) recorded events are incomplete,
 * waits for the oldest (polling cuEventQuery; no synchronize on every
 * launch, nothing while a stream capture is active).
 */
#ifndef NVSHARE_CLIENT_SCHED_QUOTA_H
#define NVSHARE_CLIENT_SCHED_QUOTA_H

/* dev's core limit (1..100; 100 = none) from HELLO's environment value or
 * SET_LIMITS. Returns 1 if this changed whether dev's work is capped. */
int nvs_qclient_set_limit(int dev, unsigned core_limit);
/* GPU_MODE 2: a compute quota runs on dev, so this process's in-flight work
 * is capped too even without a limit of its own: while it holds the lock a
 * limited client waits for its drain. Returns 1 if capping changed. */
int nvs_qclient_set_gpu_quota(int dev, int on);
/* dev has a core limit below 100. */
int nvs_qclient_limited(int dev);
/* dev's in-flight work is capped (limited, or a quota runs on dev). */
int nvs_qclient_capped(int dev);
/* Some GPU of this process is capped (keeps nvs_gate_closed set). */
int nvs_qclient_any_capped(void);
/* Slow path of a gated call on capped dev, before the lock wait. The
 * calling thread's current context is dev's. capturing: a stream capture is
 * active somewhere in the process (then nothing is recorded). */
void nvs_qclient_gate(int dev, int capturing);
/* Forked child: forget the parent's events (they belong to its contexts). */
void nvs_qclient_atfork_child(void);

#endif
