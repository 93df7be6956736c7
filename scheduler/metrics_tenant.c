/*
 * Client series per tenant and GPU (metrics_snap.h, struct msnap_tenant):
 * what the exporter shows unless NVSHARE_METRICS_PROCESS_LABELS=1. A tenant
 * is a verified Pod, or a uid outside Kubernetes; the pids and program
 * names of its processes are not shown, and Prometheus keeps one series per
 * tenant and GPU however many processes come and go.
 *
 * Summing live clients alone would make a tenant's counters drop when one
 * of its processes exits while others stay (Prometheus would read that as
 * a reset and count everything again). So the counters of a client that
 * leaves a tenant still present are kept here ("retired") and added to the
 * tenant's from then on, until the tenant has no client on that GPU left
 * and its series ends. Memory: one record per live entry and per live
 * tenant, freed with them.
 *
 * Runs on the loop thread, once per snapshot (or in render_sample).
 */
#include "metrics_snap.h"

#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "P ns/name", "U pod-uid" or "u uid": one string per tenant. */
#define KEY_LEN 336

struct prev_entry {
	uint32_t client;
	int gpu;
	char key[KEY_LEN];
	struct mcounters c;
};

struct retired {
	int gpu;
	char key[KEY_LEN];
	struct mcounters c;
};

static struct prev_entry *prev;
static unsigned nprev;
static struct retired *ret;
static unsigned nret;

static void key_of(const struct msnap_client *c, char *k)
{
	if (c->pod[0])
		snprintf(k, KEY_LEN, "P %s/%s", c->pod_namespace, c->pod);
	else if (c->pod_uid[0])
		snprintf(k, KEY_LEN, "U %s", c->pod_uid);
	else
		snprintf(k, KEY_LEN, "u %u", c->uid);
}

static void add(struct mcounters *a, const struct mcounters *b)
{
#define ADD(f) a->f += b->f;
	NVS_MCOUNTERS(ADD)
#undef ADD
}

static struct retired *ret_find(struct retired *r, unsigned n, const char *key, int gpu)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i].gpu == gpu && !strcmp(r[i].key, key))
			return &r[i];
	return NULL;
}

/* Is prev entry p still a live entry (same client, GPU and tenant)?
 * Both lists run newest client first (ids descending): *cur walks along. */
static int still_there(const struct msnap *s, const char (*keys)[KEY_LEN],
		       const struct prev_entry *p, unsigned *cur)
{
	while (*cur < s->nentries && s->clients[s->entries[*cur].client].id > p->client)
		(*cur)++;
	for (unsigned j = *cur; j < s->nentries; j++) {
		const struct msnap_entry *e = &s->entries[j];
		if (s->clients[e->client].id != p->client)
			break;
		if (e->gpu == p->gpu)
			return !strcmp(keys[j], p->key);
	}
	return 0;
}

void nvs_metrics_tenants(struct msnap *s)
{
	s->ntenants = 0;
	char(*keys)[KEY_LEN] = s->nentries ? malloc(s->nentries * sizeof *keys) : NULL;
	struct prev_entry *np = s->nentries ? malloc(s->nentries * sizeof *np) : NULL;
	/* first[t]: tenant t's first entry (its key is keys[first[t]]). */
	unsigned *first = s->nentries ? malloc(s->nentries * sizeof *first) : NULL;
	if (s->nentries && (!keys || !np || !first)) {
		/* Out of memory: no tenant series this time; keep the state. */
		free(keys);
		free(np);
		free(first);
		return;
	}
	/* Group the live entries. */
	for (unsigned j = 0; j < s->nentries; j++) {
		const struct msnap_entry *e = &s->entries[j];
		const struct msnap_client *c = &s->clients[e->client];
		key_of(c, keys[j]);
		unsigned t = 0;
		for (; t < s->ntenants; t++)
			if (s->tenants[t].gpu == e->gpu && !strcmp(keys[first[t]], keys[j]))
				break;
		struct msnap_tenant *x = &s->tenants[t];
		if (t == s->ntenants) {
			s->ntenants++;
			memset(x, 0, sizeof *x);
			x->gpu = e->gpu;
			if (c->pod[0]) {
				snprintf(x->pod, sizeof x->pod, "%s", c->pod);
				snprintf(x->pod_namespace, sizeof x->pod_namespace, "%s",
					 c->pod_namespace);
			} else if (c->pod_uid[0]) {
				snprintf(x->pod_uid, sizeof x->pod_uid, "%s", c->pod_uid);
			} else {
				x->has_uid = 1;
				x->uid = c->uid;
			}
			first[t] = j;
		}
		x->nclients++;
		if (e->state < 3)
			x->state[e->state]++;
		x->allocated += e->allocated;
		if (e->core_limit > x->core_limit)
			x->core_limit = e->core_limit;
		if (x->nclients == 1 || e->mem_limit > x->mem_limit)
			x->mem_limit = e->mem_limit;
		add(&x->c, &e->c);
		np[j].client = c->id;
		np[j].gpu = e->gpu;
		memcpy(np[j].key, keys[j], KEY_LEN);
		np[j].c = e->c;
	}
	/* Clients that left a tenant still present: their counters stay. */
	struct retired *nr = s->ntenants ? calloc(s->ntenants, sizeof *nr) : NULL;
	if (s->ntenants && !nr) {
		/* Without the retired counters a tenant's could go down: show
		 * none this time rather than wrong ones. */
		s->ntenants = 0;
		free(keys);
		free(np);
		free(first);
		return;
	}
	for (unsigned t = 0; t < s->ntenants; t++) {
		nr[t].gpu = s->tenants[t].gpu;
		memcpy(nr[t].key, keys[first[t]], KEY_LEN);
		const struct retired *o = ret_find(ret, nret, nr[t].key, nr[t].gpu);
		if (o)
			nr[t].c = o->c;
	}
	unsigned cur = 0;
	for (unsigned i = 0; i < nprev; i++) {
		if (still_there(s, (const char(*)[KEY_LEN])keys, &prev[i], &cur))
			continue;
		struct retired *r = ret_find(nr, s->ntenants, prev[i].key, prev[i].gpu);
		if (r)
			add(&r->c, &prev[i].c);
	}
	for (unsigned t = 0; t < s->ntenants; t++)
		add(&s->tenants[t].c, &nr[t].c);
	free(prev);
	prev = np;
	nprev = s->nentries;
	free(ret);
	ret = nr;
	nret = s->ntenants;
	free(keys);
	free(first);
}
