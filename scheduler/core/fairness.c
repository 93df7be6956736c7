/*
 * Per-tenant fairness of the lock queues (fairness.h, docs/scheduler.md
 * "Fairness between tenants"): the tenant registry, the choice of the next
 * holder by tenant rotation, and the revocation penalty.
 *
 * Rotation by "least recently served": each tenant remembers, per GPU, the
 * sequence number of its last grant there (one counter for all GPUs). The
 * tenant just served has the highest number and goes to the back. A new
 * tenant starts just below the GPU's latest grant: after every tenant
 * already waiting except the one served last, at the end of the round, so
 * closing every connection and reconnecting gains a tenant nothing. Inside
 * a tenant the queue's arrival order decides.
 *
 * Cost: O(waiters) per grant; tenants are found once per HELLO (O(tenants)).
 */
#include "fairness.h"

#include "log.h"
#include "port.h"
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvs_tenant {
	enum nvs_tenant_kind kind;
	uid_t uid;
	char pod_uid[NVS_POD_UID_LEN];
	unsigned refs; /* clients */
	uint64_t last_grant[NVS_MAX_GPUS];
	/* A revocation's penalty is the tenant's, on that GPU: another of its
	 * connections must not take the turn its revoked holder lost (two
	 * connections of one tenant alternated, each revoked in turn, and
	 * kept the GPU from other tenants). */
	uint64_t penalty_until[NVS_MAX_GPUS];
	uint64_t revocations;
	struct nvs_tenant *prev, *next;
};

static struct nvs_tenant *tenants;
static uint64_t grant_seq;
static uint64_t gpu_seq[NVS_MAX_GPUS]; /* each GPU's latest grant */

static int same(const struct nvs_tenant *t, const struct client *cl)
{
	if (t->kind != cl->tenant)
		return 0;
	switch (t->kind) {
	case NVS_TENANT_POD:
		return !strcmp(t->pod_uid, cl->pod_uid);
	case NVS_TENANT_UID:
		return t->uid == cl->uid;
	default:
		return 1; /* one bucket for every unknown peer */
	}
}

void nvs_fair_join(struct client *cl)
{
	struct nvs_tenant *t = tenants;
	while (t && !same(t, cl))
		t = t->next;
	if (!t) {
		t = calloc(1, sizeof *t);
		if (!t) {
			/* Out of memory: the client is scheduled as a tenant of
			 * its own that was never served (fair enough). */
			NVS_WARN("client=%u: no memory for its tenant record", cl->id);
			cl->fair = NULL;
			return;
		}
		t->kind = cl->tenant;
		t->uid = cl->tenant == NVS_TENANT_UID ? cl->uid : 0;
		if (cl->tenant == NVS_TENANT_POD)
			snprintf(t->pod_uid, sizeof t->pod_uid, "%s", cl->pod_uid);
		for (unsigned i = 0; i < NVS_MAX_GPUS; i++)
			t->last_grant[i] = gpu_seq[i] ? gpu_seq[i] - 1 : 0;
		t->next = tenants;
		if (tenants)
			tenants->prev = t;
		tenants = t;
	}
	t->refs++;
	cl->fair = t;
}

void nvs_fair_leave(struct client *cl)
{
	struct nvs_tenant *t = cl->fair;
	cl->fair = NULL;
	if (!t || --t->refs)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		tenants = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free(t);
}

static uint64_t last_of(const struct client_gpu *cg)
{
	const struct nvs_tenant *t = cg->client->fair;
	return t ? t->last_grant[cg->gpu->index] : 0;
}

/* Until when cg may not be granted: its own penalty or its tenant's. */
static uint64_t penalty_of(const struct client_gpu *cg)
{
	const struct nvs_tenant *t = cg->client->fair;
	uint64_t p = cg->penalty_until_ns;
	if (t && t->penalty_until[cg->gpu->index] > p)
		p = t->penalty_until[cg->gpu->index];
	return p;
}

struct client_gpu *nvs_fair_pick(struct gpu *g, uint64_t now,
				 int (*may)(struct gpu *, struct client_gpu *, uint64_t))
{
	/* Each pass takes the best candidate not yet refused; `may` is asked
	 * only about that one (it has side effects: quota throttling). */
	static uint64_t pass;
	pass++;
	for (;;) {
		struct client_gpu *best = NULL;
		uint64_t best_seq = 0;
		for (struct client_gpu *cg = g->qhead; cg; cg = cg->qnext) {
			if (cg->fair_refused == pass || penalty_of(cg) > now)
				continue;
			uint64_t s = last_of(cg);
			if (!best || s < best_seq) {
				best = cg;
				best_seq = s;
			}
		}
		if (!best || !may || may(g, best, now))
			return best;
		best->fair_refused = pass;
	}
}

void nvs_fair_granted(struct client_gpu *cg)
{
	struct nvs_tenant *t = cg->client->fair;
	gpu_seq[cg->gpu->index] = ++grant_seq;
	if (t)
		t->last_grant[cg->gpu->index] = grant_seq;
}

const char *nvs_fair_tenant_label(const struct client *cl, char *buf, unsigned cap)
{
	switch (cl->tenant) {
	case NVS_TENANT_POD:
		snprintf(buf, cap, "pod:%s", cl->pod_uid);
		break;
	case NVS_TENANT_UID:
		snprintf(buf, cap, "uid:%u", (unsigned)cl->uid);
		break;
	default:
		snprintf(buf, cap, "unknown");
		break;
	}
	return buf;
}

uint64_t nvs_fair_tenant_revocations(const struct client *cl)
{
	return cl->fair ? cl->fair->revocations : 0;
}

void nvs_fair_revoked(struct client_gpu *cg, uint64_t now, uint64_t penalty_ns)
{
	cg->penalty_until_ns = now + penalty_ns;
	cg->gpu->revoke_penalties++;
	struct nvs_tenant *t = cg->client->fair;
	if (!t)
		return;
	t->penalty_until[cg->gpu->index] = now + penalty_ns;
	t->revocations++;
	if (t->revocations < 2)
		return;
	char label[64];
	nvs_fair_tenant_label(cg->client, label, sizeof label);
	/* Logged at 2, 4, 8, ... (a hog is revoked once per quantum: its log
	 * lines stay few); the event comes every time, with the count. */
	if (!(t->revocations & (t->revocations - 1)))
		NVS_WARN("tenant %s revoked %llu times (client=%u gpu=%d): its holders ignore "
			 "DROP_LOCK; each waits one quantum after a revocation",
			 label, (unsigned long long)t->revocations, cg->client->id, cg->gpu->index);
	nvs_core_event("revoke_repeated",
		       "\"tenant\":\"%s\",\"client\":%u,\"gpu\":%d,\"revocations\":%llu,"
		       "\"penalty_ms\":%llu",
		       label, cg->client->id, cg->gpu->index, (unsigned long long)t->revocations,
		       (unsigned long long)(penalty_ns / 1000000ull));
}

uint64_t nvs_fair_next_deadline(const struct gpu *g, uint64_t now)
{
	if (!g->serialized || g->holder || !g->qhead)
		return 0;
	uint64_t d = 0;
	for (const struct client_gpu *cg = g->qhead; cg; cg = cg->qnext) {
		uint64_t p = penalty_of(cg);
		if (p > now && (!d || p < d))
			d = p;
	}
	return d;
}

int nvs_fair_penalties_ended(struct gpu *g, uint64_t now)
{
	int n = 0;
	for (struct client_gpu *cg = g->qhead; cg; cg = cg->qnext) {
		struct nvs_tenant *t = cg->client->fair;
		uint64_t *tp = t ? &t->penalty_until[g->index] : NULL;
		int ended = 0;
		if (cg->penalty_until_ns && cg->penalty_until_ns <= now) {
			cg->penalty_until_ns = 0;
			ended = 1;
		}
		if (tp && *tp && *tp <= now) {
			*tp = 0;
			ended = 1;
		}
		n += ended;
	}
	return n;
}
