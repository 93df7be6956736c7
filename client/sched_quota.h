/*
 * Client side of compute quotas (client/sched_quota.c, docs/quotas.md).
 *
 * The scheduler enforces a core limit by lending the GPU's lock for the
 * client's quota only; what the client must do is keep its revocation
 * short: a DROP_LOCK is answered after the work already queued has run, so
 * a limited client may not queue more than a few milliseconds of work.
 *
 * For a limited GPU only, every gated call takes the slow path (the global
 * gate stays closed; unlimited processes keep the one-load fast path): it
 * records an event on the calling thread's legacy default stream every
 * NVSHARE_QUOTA_EVENT_EVERY gated calls (default 8) and, while more than
 * NVSHARE_QUOTA_MAX_EVENTS (default 2) recorded events are incomplete,
 * waits for the oldest (polling cuEventQuery; no synchronize on every
 * launch, nothing while a stream capture is active).
 */
#ifndef NVSHARE_CLIENT_SCHED_QUOTA_H
#define NVSHARE_CLIENT_SCHED_QUOTA_H

/* dev's core limit (1..100; 100 = none) from HELLO's environment value or
 * SET_LIMITS. Returns 1 if this changed whether dev is limited. */
int nvs_qclient_set_limit(int dev, unsigned core_limit);
/* dev has a core limit below 100. */
int nvs_qclient_limited(int dev);
/* Some GPU of this process is limited (keeps nvs_gate_closed set). */
int nvs_qclient_any_limited(void);
/* Slow path of a gated call on limited dev, before the lock wait. The
 * calling thread's current context is dev's. capturing: a stream capture is
 * active somewhere in the process (then nothing is recorded). */
void nvs_qclient_gate(int dev, int capturing);
/* Forked child: forget the parent's events (they belong to its contexts). */
void nvs_qclient_atfork_child(void);

#endif
