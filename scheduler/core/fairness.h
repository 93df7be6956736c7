/*
 * Per-tenant fairness of each GPU's lock queue (docs/scheduler.md
 * "Fairness between tenants"). A tenant is what peer.h pins at connect: a
 * Pod, a host uid outside Kubernetes, or the one unknown-tenant bucket.
 *
 * The queue stays in arrival order (policy.c); the next holder is the first
 * eligible waiter of the tenant served least recently on that GPU, so turns
 * rotate between tenants and a tenant's connections share its turn, first
 * come first served among them. A holder revoked for ignoring DROP_LOCK is
 * not granted again for one quantum; every revocation is counted against
 * its tenant, and repeated ones are logged and sent as an event.
 */
#ifndef NVSHARE_SCHEDULER_FAIRNESS_H
#define NVSHARE_SCHEDULER_FAIRNESS_H

#include <stdint.h>

struct client;
struct client_gpu;
struct gpu;
struct nvs_tenant;

/* A client registered (HELLO) / is going away: joins / leaves its tenant.
 * A tenant lives while it has clients. */
void nvs_fair_join(struct client *cl);
void nvs_fair_leave(struct client *cl);

/* The waiter to grant next on g, or NULL: the first waiter (queue order)
 * of the least recently served tenant that is not serving a revocation
 * penalty and that may(g, cg, now) allows (may NULL: all). Waiters that
 * `may` refuses are passed over and the next candidate asked. */
struct client_gpu *nvs_fair_pick(struct gpu *g, uint64_t now,
				 int (*may)(struct gpu *, struct client_gpu *, uint64_t));

/* cg was granted the lock: its tenant's turn on cg's GPU is now. */
void nvs_fair_granted(struct client_gpu *cg);

/* cg was revoked (ignored DROP_LOCK): it, and every other connection of
 * its tenant, waits penalty_ns before the tenant's next grant on that GPU;
 * the tenant's revocation count goes up (logged, event). */
void nvs_fair_revoked(struct client_gpu *cg, uint64_t now, uint64_t penalty_ns);

/* Earliest end of a revocation penalty among g's waiters while the lock is
 * free (the lock may then be granted), 0 none. */
uint64_t nvs_fair_next_deadline(const struct gpu *g, uint64_t now);

/* Clears the penalties of g's waiters that ended by now; returns how many
 * (the lock, if free, may then be granted). */
int nvs_fair_penalties_ended(struct gpu *g, uint64_t now);

/* "pod:<uid>", "uid:<n>" or "unknown" into buf (cap >= 48). */
const char *nvs_fair_tenant_label(const struct client *cl, char *buf, unsigned cap);

/* Revocations counted against cl's tenant (0: none / no tenant). */
uint64_t nvs_fair_tenant_revocations(const struct client *cl);

#endif
