#include "policy.h"

#include "bounds.h"
#include "fairness.h"
#include "log.h"
#include "parse.h"
#include "port.h"
#include "state.h"

#include <stdlib.h>
#include <string.h>

const uint64_t nvs_wait_bucket_le_us[NVS_WAIT_BUCKETS - 1] = {
    100, 1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000, 30000000, 120000000,
};

#define CG_FMT "client=%u pid=%d gpu=%d"
#define CG_ARGS(cg) (cg)->client->id, (int)(cg)->client->pid, (cg)->gpu->index
/* The same three as event fields (events.h; names are an interface). */
#define CG_EV "\"client\":%u,\"pid\":%d,\"gpu\":%d"

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* ---- the running-set layer (co-scheduling), reached only through this ---- */

static const struct nvs_policy_layer *layer;

void nvs_policy_set_layer(const struct nvs_policy_layer *l)
{
	layer = l;
}

static int set_active(const struct gpu *g)
{
	return layer && layer->active(g);
}

static void send_gpu(struct client_gpu *cg, uint16_t type, uint32_t value)
{
	struct nvs_msg m;
	nvs_msg_gpu(&m, type, cg->local_gpu, value);
	nvs_core_send(cg->client, &m);
}

/* A client whose Pod declared nvshare.com/gpu-memory is expected to grow
 * to it: counting it from the start serializes the GPU before the Pods'
 * memory collides, not after (the request comes from the Pod spec, which
 * the process cannot change; its limit caps what it can allocate). */
uint64_t nvs_policy_expected_of(const struct client_gpu *cg)
{
	uint64_t e = cg->client->pod_mem_request;
	if (e > cg->mem_limit)
		e = cg->mem_limit;
	return e > cg->allocated ? e : cg->allocated;
}

uint64_t nvs_policy_expected(const struct gpu *g)
{
	uint64_t sum = 0;
	for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
		sum += nvs_policy_expected_of(cg);
	return sum;
}

/* A client that keeps device memory (NVSHARE_UNIFIED_MEMORY=0, HELLO's
 * NVS_HELLO_DEVICE_MEMORY) cannot swap: the driver never evicts its memory
 * and a SWAP_OUT or SWAP_HINT would be wasted on it. Setting the flag only
 * ever makes the client's own scheduling worse (its memory counts while it
 * idles, so fewer run beside it), never another's beyond what its memory
 * really takes from the GPU. */
int nvs_policy_pinned(const struct client_gpu *cg)
{
	return cg->client->device_memory;
}

static int oversubscribed(const struct gpu *g)
{
	return nvs_policy_expected(g) > nvs_gpu_capacity(g);
}

/* ---- swap (docs/swap.md) ---- */

/* What of cg's memory is not on the GPU: what it swaps in when it runs. */
static uint64_t missing(const struct client_gpu *cg)
{
	return cg->allocated > cg->resident ? cg->allocated - cg->resident : 0;
}

/* Effective TQ = max(TQ, factor x recent swap time) while memory does not
 * fit; NVSHARE_SWAP_TQ_FACTOR (default 50, 0 = off). A hand-off costs about
 * one swap each way, so with factor k jobs taking turns lose about 1/k of
 * their GPU time to swapping: 50 keeps it near 2 %, which leaves issue 32's
 * 3 % pressure target room for the two extra hand-offs of a job's last,
 * partial quantum (33 did not: 1.032-1.049x on an H200). The factor was 10,
 * then 20 (issue 21: 5 %); with the swap engine moving memory at the link's
 * speed (docs/swap.md) a swap takes a fifth of what it took, so the same
 * factor would cut jobs five times as often and the hand-off's fixed costs
 * would show. The swap time is that of the coming hand-off: the bytes it
 * will move at the median speed of the last swaps in each direction
 * (bounds.c; a direction with few speeds borrows the other's, and with
 * none either way the median times stand in), so one client's
 * forged SWAP_STATS do not set it; the result is bounded by
 * NVSHARE_SWAP_TQ_MAX_FACTOR x TQ (default 4) and 60 s. */
#define SWAP_TQ_MAX_NS (60ull * 1000000000ull)

uint64_t nvs_policy_tq_ns(const struct gpu *g)
{
	uint64_t tq = g->tq_ms * 1000000ull;
	if (!g->serialized || !oversubscribed(g))
		return tq;
	uint64_t cap = nvs_bounds_tq_bound_ns(g);
	if (cap > SWAP_TQ_MAX_NS)
		cap = SWAP_TQ_MAX_NS;
	uint64_t f = S.cfg.swap_tq_factor, med = nvs_policy_handoff_ns(g);
	uint64_t k = f && med > cap / f ? cap : f * med;
	return k > tq ? k : tq;
}

/* The primary holder's quantum: nvs_policy_tq_ns, but never lowered within
 * one hold while the same client waits at the head and the settings stay.
 * The price follows the memory live, and a holder that frees memory makes
 * its own hand-off cheaper: that is how a job ends, so a live price cut the
 * holder just as it finished and had it swap out memory it was freeing (an
 * H200's pressure benchmark: 6 of 9 two-job pairs, ~17 ms each, 504 MiB
 * copied out of a tensor freed 20 ms later). Growth still lengthens it; a
 * new TQ or factor applies at once. */
static uint64_t hold_quantum_ns(struct gpu *g)
{
	uint64_t q = nvs_policy_tq_ns(g);
	if (g->hold_q.grant_ns == g->grant_ns && g->hold_q.waiter == g->qhead &&
	    g->hold_q.tq_ms == g->tq_ms && g->hold_q.factor == S.cfg.swap_tq_factor &&
	    q < g->hold_q.ns)
		return g->hold_q.ns;
	g->hold_q.grant_ns = g->grant_ns;
	g->hold_q.waiter = g->qhead;
	g->hold_q.tq_ms = g->tq_ms;
	g->hold_q.factor = S.cfg.swap_tq_factor;
	g->hold_q.ns = q;
	return q;
}

uint64_t nvs_policy_handoff_ns(const struct gpu *g)
{
	/* The hand-off the quantum ends in: the holder moves out what the
	 * next waiter needs, which then moves in what it lacks. With nobody
	 * waiting (or no holder) there is none in sight: the median times. */
	const struct client_gpu *h = g->holder, *w = g->qhead;
	if (!h || !w)
		return nvs_bounds_swap_median(g);
	return nvs_bounds_handoff_ns(g, nvs_policy_swap_out_need(g, h, w), missing(w));
}

void nvs_policy_swap_stats(struct client_gpu *cg, const struct nvs_swap_stats *s)
{
	struct gpu *g = cg->gpu;
	/* Counters are cumulative per client: add the increase to the GPU's
	 * totals, remember the last swap of each direction. */
	if (s->bytes_in >= cg->swap_bytes_in && s->ns_in >= cg->swap_ns_in &&
	    s->bytes_out >= cg->swap_bytes_out && s->ns_out >= cg->swap_ns_out) {
		g->swap_bytes_in += s->bytes_in - cg->swap_bytes_in;
		g->swap_bytes_out += s->bytes_out - cg->swap_bytes_out;
		g->swap_ns_in += s->ns_in - cg->swap_ns_in;
		g->swap_ns_out += s->ns_out - cg->swap_ns_out;
		if (s->ns_in > cg->swap_ns_in)
			g->swap_last_in_ns = s->ns_in - cg->swap_ns_in;
		if (s->ns_out > cg->swap_ns_out)
			g->swap_last_out_ns = s->ns_out - cg->swap_ns_out;
		nvs_bounds_swap_sample(cg, s->ns_in - cg->swap_ns_in,
				       s->bytes_in - cg->swap_bytes_in, s->ns_out - cg->swap_ns_out,
				       s->bytes_out - cg->swap_bytes_out);
	}
	cg->swap_bytes_in = s->bytes_in;
	cg->swap_bytes_out = s->bytes_out;
	cg->swap_ns_in = s->ns_in;
	cg->swap_ns_out = s->ns_out;
	NVS_DEBUG("SWAP_STATS " CG_FMT " in=%llu B/%.3f ms out=%llu B/%.3f ms", CG_ARGS(cg),
		  (unsigned long long)s->bytes_in, ms(s->ns_in), (unsigned long long)s->bytes_out,
		  ms(s->ns_out));
}

static uint64_t resident_sum(const struct gpu *g)
{
	uint64_t sum = 0;
	for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
		sum += cg->resident;
	return sum;
}

/* More of cg's memory is on the GPU now (granted, or new memory it
 * touched while running). If the estimates exceed the capacity,
 * the driver made room by evicting others (unknown which: take it from the
 * other clients in list order). */
static void evict_others(struct gpu *g, struct client_gpu *cg)
{
	uint64_t cap = nvs_gpu_capacity(g), sum = resident_sum(g);
	/* Clients that do not run first: the driver evicts what is not in
	 * use (a co-scheduled set keeps its memory). */
	for (int pass = 0; pass < 2; pass++)
		for (struct client_gpu *o = g->ahead; o && sum > cap; o = o->anext) {
			if (o == cg || (pass == 0 && o->state == CG_HOLDING) ||
			    nvs_policy_pinned(o))
				continue;
			uint64_t d = sum - cap < o->resident ? sum - cap : o->resident;
			o->resident -= d;
			sum -= d;
		}
}

/* Bytes the holder should move to the host on release so that `next`
 * fits: next's non-resident bytes beyond the free capacity, at most what
 * the holder has resident. 0 when memory is not short. */
/* NVSHARE_SWAP_OUT: needed (default) | all | none, for measurements; the
 * positions of its choices in settings.def. */
enum { SWAP_OUT_NEEDED, SWAP_OUT_ALL, SWAP_OUT_NONE };

static int swap_out_policy(void)
{
	return (int)S.cfg.swap_out;
}

void nvs_policy_mem_sums(const struct gpu *g, struct nvs_mem_sums *s)
{
	s->expected = nvs_policy_expected(g);
	s->resident = resident_sum(g);
}

uint64_t nvs_policy_swap_out_need_with(const struct gpu *g, const struct client_gpu *h,
				       const struct client_gpu *next, const struct nvs_mem_sums *s)
{
	if (!next || swap_out_policy() == SWAP_OUT_NONE || nvs_policy_pinned(h))
		return 0;
	struct nvs_mem_sums own;
	if (!s) {
		nvs_policy_mem_sums(g, &own);
		s = &own;
	}
	uint64_t cap = nvs_gpu_capacity(g), sum = s->resident;
	if (s->expected <= cap) /* not oversubscribed */
		return 0;
	if (swap_out_policy() == SWAP_OUT_ALL)
		return h->allocated;
	uint64_t need = missing(next);
	uint64_t fr = cap > sum ? cap - sum : 0;
	if (need <= fr)
		return 0;
	uint64_t e = need - fr;
	return e < h->resident ? e : h->resident;
}

uint64_t nvs_policy_swap_out_need(const struct gpu *g, const struct client_gpu *h,
				  const struct client_gpu *next)
{
	return nvs_policy_swap_out_need_with(g, h, next, NULL);
}

/* ---- queue ---- */

static void q_push(struct gpu *g, struct client_gpu *cg)
{
	cg->qnext = NULL;
	cg->qprev = g->qtail;
	if (g->qtail)
		g->qtail->qnext = cg;
	else
		g->qhead = cg;
	g->qtail = cg;
	g->qlen++;
}

static void q_remove(struct gpu *g, struct client_gpu *cg)
{
	if (cg->qprev)
		cg->qprev->qnext = cg->qnext;
	else
		g->qhead = cg->qnext;
	if (cg->qnext)
		cg->qnext->qprev = cg->qprev;
	else
		g->qtail = cg->qprev;
	cg->qprev = cg->qnext = NULL;
	g->qlen--;
}

void nvs_policy_requeue_head(struct gpu *g, struct client_gpu *cg)
{
	q_remove(g, cg);
	cg->qprev = NULL;
	cg->qnext = g->qhead;
	if (g->qhead)
		g->qhead->qprev = cg;
	else
		g->qtail = cg;
	g->qhead = cg;
	g->qlen++;
}

/* Tells the holder how many wait, whenever that changes, so it can give
 * the lock back as soon as it goes idle (and not at all when nobody
 * waits); and, if it understands SWAP_HINT, how much the next holder needs
 * moved out, so that an idle release frees that room itself (a DROP_LOCK
 * carries the amount, an idle release has nobody to ask). Called after
 * every change of the queue, the holder, allocations or capacity. */
static void inform_holder(struct gpu *g)
{
	struct client_gpu *h = g->holder;
	if (!h)
		return;
	if (layer)
		layer->inform(g); /* the other members of the running set */
	/* The hint first: WAITERS is what lets an idle holder release, and a
	 * client that read WAITERS alone (the two writes apart, the client
	 * quick) would release without knowing what to move out. */
	if (h->client->hello_flags & NVS_HELLO_SWAP_HINT) {
		uint32_t mib = nvs_swap_mib(layer ? layer->hint_bytes(g, h)
						  : nvs_policy_swap_out_need(g, h, g->qhead));
		if (h->hint_sent_mib != mib) {
			h->hint_sent_mib = mib;
			send_gpu(h, NVS_MSG_SWAP_HINT, mib);
			NVS_DEBUG("SWAP_HINT " CG_FMT " mib=%u waiters=%u", CG_ARGS(h), mib,
				  g->qlen);
			nvs_core_event("swap_hint", CG_EV ",\"mib\":%u,\"waiters\":%u", CG_ARGS(h),
				       mib, g->qlen);
		}
	}
	uint32_t w = layer ? layer->waiters(g, h) : g->qlen;
	if (h->waiters_sent != w) {
		h->waiters_sent = w;
		send_gpu(h, NVS_MSG_WAITERS, w);
	}
}

static void record_wait(struct lock_stats *st, uint64_t waited)
{
	st->waits++;
	st->wait_ns += waited;
	uint64_t us = waited / 1000;
	unsigned b = 0;
	while (b < NVS_WAIT_BUCKETS - 1 && us > nvs_wait_bucket_le_us[b])
		b++;
	st->wait_hist[b]++;
}

/* ---- grant and release ---- */

static void grant(struct gpu *g, struct client_gpu *cg, uint64_t now, int handoff, int guest)
{
	uint64_t waited = now - cg->wait_since_ns;
	cg->state = CG_HOLDING;
	cg->held_since_ns = now;
	cg->waiters_sent = 0; /* the holder assumes 0 until told */
	cg->hint_sent_mib = 0;
	cg->co.guest = guest; /* a guest runs beside g->holder (coschedule.c) */
	memset(&cg->drop, 0, sizeof cg->drop);
	if (!guest) {
		g->holder = cg;
		g->grant_ns = now;
	}
	cg->st.grants++;
	g->st.grants++;
	nvs_fair_granted(cg);
	record_wait(&cg->st, waited);
	record_wait(&g->st, waited);
	if (handoff)
		g->handoffs++;
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_LOCK_OK;
	m.u.lock_ok.local_gpu = cg->local_gpu;
	m.u.lock_ok.flags = oversubscribed(g) ? NVS_LOCK_SWAP_IN : 0;
	m.u.lock_ok.quantum_ms = (uint32_t)(nvs_policy_tq_ns(g) / 1000000ull);
	/* The holder's memory is on the GPU once it runs (prefetched with
	 * SWAP_IN, or touched: memory it allocated while waiting too). */
	cg->resident = cg->allocated;
	evict_others(g, cg);
	nvs_core_send(cg->client, &m);
	NVS_INFO("LOCK_OK " CG_FMT " waited_ms=%.3f queue=%u%s", CG_ARGS(cg), ms(waited), g->qlen,
		 guest ? " guest=1" : "");
	nvs_core_event(
	    "lock_ok", CG_EV ",\"waited_ms\":%.3f,\"queue\":%u,\"quantum_ms\":%u,\"role\":\"%s\"",
	    CG_ARGS(cg), ms(waited), g->qlen, m.u.lock_ok.quantum_ms, guest ? "guest" : "primary");
	if (guest)
		return; /* coschedule.c informs the set once it is complete */
	if (g->hook && g->hook->on_grant)
		g->hook->on_grant(g, cg, now);
	inform_holder(g);
}

/* Grants the lock to the waiter whose turn it is (fairness.c: tenants
 * take turns, first come first served within a tenant), skipping those a
 * hook passes over (throttled by a quota) and revoked ones still waiting
 * out their penalty. */
static void grant_next(struct gpu *g, uint64_t now, int handoff)
{
	if (set_active(g)) {
		layer->fill(g, now, handoff); /* a set that fits */
		return;
	}
	while (!g->holder && g->qhead) {
		struct client_gpu *cg = nvs_fair_pick(g, now, g->hook ? g->hook->may_grant : NULL);
		if (!cg)
			return;
		q_remove(g, cg);
		cg->state = CG_IDLE;
		/* A waiter whose connection is closing would only bounce the
		 * lock: its detach comes in the same loop iteration. */
		if (cg->client->flags & NVS_CLIENT_DOOMED)
			continue;
		grant(g, cg, now, handoff, 0);
	}
}

void nvs_policy_dequeue(struct gpu *g, struct client_gpu *cg)
{
	q_remove(g, cg);
	cg->state = CG_IDLE;
}

void nvs_policy_grant_member(struct gpu *g, struct client_gpu *cg, uint64_t now, int handoff,
			     int guest)
{
	nvs_policy_dequeue(g, cg);
	grant(g, cg, now, handoff, guest);
}

void nvs_policy_inform(struct gpu *g)
{
	inform_holder(g);
}

void nvs_policy_grant(struct gpu *g, uint64_t now)
{
	if (g->serialized && (!g->holder || set_active(g)))
		grant_next(g, now, 0);
}

/* Ends the current hold (accounting) without granting. */
static struct client_gpu *end_hold(struct gpu *g, uint64_t now)
{
	struct client_gpu *h = g->holder;
	if (!h)
		return NULL;
	uint64_t held = now - h->held_since_ns;
	h->st.held_ns += held;
	g->st.held_ns += held;
	h->state = CG_IDLE;
	h->waiters_sent = 0;
	g->holder = NULL;
	memset(&h->drop, 0, sizeof h->drop);
	if (g->hook && g->hook->on_release)
		g->hook->on_release(g, h, now);
	return h;
}

void nvs_policy_send_drop(struct client_gpu *h, uint32_t grace_ms)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_DROP_LOCK;
	m.u.drop.local_gpu = h->local_gpu;
	if (grace_ms && h->drop.swap_out_asked) {
		/* Just what the next holder needs, in MiB (rounded up); more
		 * than the field holds: all. */
		uint32_t mib = h->drop.swap_out_asked > (uint64_t)NVS_DROP_SWAP_MIB_MAX << 20
				   ? 0
				   : nvs_swap_mib(h->drop.swap_out_asked);
		m.u.drop.flags = NVS_LOCK_SWAP_OUT | (mib << NVS_DROP_SWAP_MIB_SHIFT);
	}
	m.u.drop.grace_ms = grace_ms;
	nvs_core_send(h->client, &m);
}

void nvs_policy_drop_start(struct client_gpu *h, uint64_t now, uint64_t swap_out)
{
	h->drop.sent = 1;
	h->drop.resent = 0;
	h->drop.sent_ns = now;
	h->drop.deadline_ns = now + (uint64_t)S.cfg.drop_grace_ms * 1000000ull;
	h->drop.swap_out_asked = swap_out;
	h->st.drops++;
	h->gpu->st.drops++;
	nvs_policy_send_drop(h, S.cfg.drop_grace_ms);
}

uint64_t nvs_policy_drop_due(const struct client_gpu *h)
{
	if (!h->drop.sent)
		return 0;
	if (h->drop.resent)
		return h->drop.deadline_ns;
	return h->drop.sent_ns + (h->drop.deadline_ns - h->drop.sent_ns) / 2;
}

uint64_t nvs_policy_drop_resend(struct client_gpu *h, uint64_t now)
{
	if (h->drop.sent && !h->drop.resent && now >= nvs_policy_drop_due(h) &&
	    now < h->drop.deadline_ns) {
		/* Once more, in case the first one met a busy client thread;
		 * the grace is what is left of it. */
		h->drop.resent = 1;
		nvs_policy_send_drop(h, (uint32_t)((h->drop.deadline_ns - now) / 1000000ull));
	}
	return nvs_policy_drop_due(h);
}

void nvs_policy_count_drop(struct gpu *g, const char *why)
{
	if (!strcmp(why, "interactive"))
		g->co.preempt_interactive++;
	else if (!strcmp(why, "batch-floor"))
		g->co.preempt_floor++;
	else if (!strcmp(why, "tq-expired"))
		g->co.preempt_tq++;
	else if (!strcmp(why, "overcommit"))
		g->co.preempt_fit++;
}

void nvs_policy_drop(struct gpu *g, uint64_t now, const char *why)
{
	struct client_gpu *h = g->holder;
	if (!h || h->drop.sent)
		return;
	nvs_policy_count_drop(g, why);
	nvs_policy_drop_start(h, now, nvs_policy_swap_out_need(g, h, g->qhead));
	NVS_INFO("DROP_LOCK " CG_FMT " held_ms=%.3f waiters=%u grace_ms=%u reason=%s", CG_ARGS(h),
		 ms(now - h->held_since_ns), g->qlen, S.cfg.drop_grace_ms, why);
	nvs_core_event("drop_lock",
		       CG_EV ",\"held_ms\":%.3f,\"waiters\":%u,\"grace_ms\":%u,\"reason\":\"%s\"",
		       CG_ARGS(h), ms(now - h->held_since_ns), g->qlen, S.cfg.drop_grace_ms, why);
}

/* ---- mode ---- */

/* The policy that installs hooks (quota.c): reached only through this. */
static const struct nvs_policy_ops *ops;

void nvs_policy_set_ops(const struct nvs_policy_ops *o)
{
	ops = o;
}

/* 0 concurrent, 1 serialized, or what the GPU's hook says: 2 serialized
 * with a compute quota running (every client then caps its in-flight work:
 * docs/quotas.md). */
static int mode_value(const struct gpu *g)
{
	if (!g->serialized)
		return (int)NVS_GPU_MODE_CONCURRENT;
	if (g->hook && g->hook->gpu_mode)
		return (int)g->hook->gpu_mode;
	return (int)NVS_GPU_MODE_SERIALIZED;
}

/* GPU_MODE is coalesced per client: while a client's output is backed up
 * (it is not reading) no further GPU_MODE is queued behind it; the mode is
 * owed and the latest one sent once its output has drained (the tick polls
 * every MODE_OWED_POLL_NS while any is owed). A reading client's output
 * is empty (conn_send writes at once), so it is told at once. */
#define MODE_OWED_POLL_NS (10ull * 1000000ull)
static unsigned modes_owed;

static void owe(struct client_gpu *cg, int owed)
{
	if (cg->mode_owed == owed)
		return;
	cg->mode_owed = owed;
	if (owed)
		modes_owed++;
	else
		modes_owed--;
}

static int backed_up(const struct client_gpu *cg)
{
	return (cg->client->flags & NVS_CLIENT_BACKED_UP) != 0;
}

static void announce_mode(struct gpu *g)
{
	int v = mode_value(g);
	for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
		if (cg->mode_sent == v) {
			owe(cg, 0); /* flipped back before it was told: nothing owed */
			continue;
		}
		if (cg->mode_sent >= 0 && backed_up(cg)) {
			owe(cg, 1);
			continue;
		}
		owe(cg, 0);
		cg->mode_sent = v;
		send_gpu(cg, NVS_MSG_GPU_MODE, (uint32_t)v);
		nvs_core_event("gpu_mode_sent", CG_EV ",\"value\":%d", CG_ARGS(cg), v);
	}
}

/* force: an administrator's change (settings_changed) switches at once;
 * otherwise a switch waits for the GPU's mode-switch budget (bounds.h), so
 * that clients flapping their memory cannot flip the mode more than a few
 * times a second. */
static void reevaluate_as(struct gpu *g, uint64_t now, int force)
{
	int want;
	switch (g->mode) {
	case NVS_MODE_ON:
		want = 1;
		break;
	case NVS_MODE_OFF:
		want = 0;
		break;
	default:
		/* A process that bypasses nvshare shares the GPU:
		 * NVSHARE_UNMANAGED=serialize makes the clients take turns
		 * (unmanaged.c). Mode off stays off: the admin's word. */
		want = oversubscribed(g) || g->unmanaged_force;
		break;
	}
	/* A limited client runs only while it holds the lock (quota.h). */
	if (ops && ops->refresh && ops->refresh(g, now))
		want = 1;
	if (want != g->serialized && !force && nvs_bounds_switch_at(g) > now) {
		if (!g->switch_pending) {
			g->switch_pending = 1;
			g->switches_deferred++;
			NVS_DEBUG(
			    "GPU_MODE gpu=%d serialized=%d deferred %.0f ms (mode-switch budget)",
			    g->index, want, ms(nvs_bounds_switch_at(g) - now));
			nvs_core_event("gpu_mode_deferred",
				       "\"gpu\":%d,\"serialized\":%d,\"wait_ms\":%.3f", g->index,
				       want, ms(nvs_bounds_switch_at(g) - now));
		}
		announce_mode(g);
		return;
	}
	g->switch_pending = 0;
	if (want != g->serialized) {
		char a[32], c[32], e[32];
		nvs_bounds_switched(g, now);
		g->serialized = want;
		g->mode_switches++;
		NVS_INFO("GPU_MODE gpu=%d serialized=%d mode=%s allocated=%s capacity=%s "
			 "clients=%u expected=%s",
			 g->index, want, nvs_mode_name(g->mode),
			 nvs_format_size(g->allocated_sum, a, sizeof a),
			 nvs_format_size(nvs_gpu_capacity(g), c, sizeof c), g->nattached,
			 nvs_format_size(nvs_policy_expected(g), e, sizeof e));
		nvs_core_event("gpu_mode",
			       "\"gpu\":%d,\"serialized\":%d,\"mode\":\"%s\",\"allocated\":%llu,"
			       "\"capacity\":%llu,\"clients\":%u,\"expected\":%llu",
			       g->index, want, nvs_mode_name(g->mode),
			       (unsigned long long)g->allocated_sum,
			       (unsigned long long)nvs_gpu_capacity(g), g->nattached,
			       (unsigned long long)nvs_policy_expected(g));
		if (!want) {
			/* Concurrent: the lock means nothing any more. Clients
			 * learn it from GPU_MODE(0); a LOCK_RELEASED still in
			 * flight is ignored. */
			if (layer)
				layer->end_members(g, now);
			struct client_gpu *h = end_hold(g, now);
			if (h) {
				NVS_INFO("LOCK_RELEASED " CG_FMT " reason=gpu-concurrent",
					 CG_ARGS(h));
				nvs_core_event("lock_released",
					       CG_EV ",\"reason\":\"gpu-concurrent\"", CG_ARGS(h));
			}
			while (g->qhead) {
				struct client_gpu *cg = g->qhead;
				q_remove(g, cg);
				cg->state = CG_IDLE;
			}
			/* Everyone runs, with all its memory. */
			for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
				cg->resident = cg->allocated;
		}
	}
	announce_mode(g);
}

static void reevaluate(struct gpu *g, uint64_t now)
{
	reevaluate_as(g, now, 0);
}

/* ---- events ---- */

void nvs_policy_attach(struct client_gpu *cg, uint64_t now)
{
	struct gpu *g = cg->gpu;
	cg->mode_sent = -1;
	cg->state = CG_IDLE;
	cg->aprev = NULL;
	cg->anext = g->ahead;
	if (g->ahead)
		g->ahead->aprev = cg;
	g->ahead = cg;
	g->nattached++;
	g->allocated_sum += cg->allocated;
	cg->resident = g->serialized && !nvs_policy_pinned(cg) ? 0 : cg->allocated;
	reevaluate(g, now);
}

void nvs_policy_detach(struct client_gpu *cg, uint64_t now)
{
	struct gpu *g = cg->gpu;
	int was_holder = cg->state == CG_HOLDING;
	if (was_holder && layer && layer->member_detach(cg, now)) {
		was_holder = 0; /* a guest: the primary keeps the lock */
	} else if (was_holder) {
		end_hold(g, now);
		NVS_INFO("LOCK_RELEASED " CG_FMT " reason=disconnect", CG_ARGS(cg));
		nvs_core_event("lock_released", CG_EV ",\"reason\":\"disconnect\"", CG_ARGS(cg));
	} else if (cg->state == CG_WAITING) {
		q_remove(g, cg);
		cg->state = CG_IDLE;
	}
	owe(cg, 0);
	if (cg->aprev)
		cg->aprev->anext = cg->anext;
	else
		g->ahead = cg->anext;
	if (cg->anext)
		cg->anext->aprev = cg->aprev;
	g->nattached--;
	g->allocated_sum -= cg->allocated;
	/* Mode first: when the memory it frees makes the GPU concurrent, the
	 * next waiter needs GPU_MODE(0), not a LOCK_OK. */
	reevaluate(g, now);
	if (g->serialized && (!g->holder || set_active(g)))
		grant_next(g, now, was_holder);
	inform_holder(g);
}

static void set_allocated(struct client_gpu *cg, uint64_t allocated)
{
	struct gpu *g = cg->gpu;
	g->allocated_sum = g->allocated_sum - cg->allocated + allocated;
	/* New memory becomes resident when it runs (holding, or everyone runs),
	 * at the others' expense once the capacity is reached. */
	int grew = allocated > cg->allocated &&
		   (cg->state == CG_HOLDING || !g->serialized || nvs_policy_pinned(cg));
	if (grew)
		cg->resident += allocated - cg->allocated;
	cg->allocated = allocated;
	if (cg->resident > allocated)
		cg->resident = allocated;
	if (grew)
		evict_others(g, cg);
}

void nvs_policy_mem_update(struct client_gpu *cg, uint64_t allocated, uint64_t now)
{
	set_allocated(cg, allocated);
	reevaluate(cg->gpu, now);
	if (set_active(cg->gpu))
		grant_next(cg->gpu, now, 0); /* a waiter may fit now */
	inform_holder(cg->gpu);
}

void nvs_policy_resend_mode(struct client_gpu *cg)
{
	cg->mode_sent = -1;
	announce_mode(cg->gpu);
}

void nvs_policy_req_lock(struct client_gpu *cg, uint64_t now)
{
	struct gpu *g = cg->gpu;
	if (!g->serialized) {
		/* Raced with a switch to concurrent: repeat the mode, which
		 * tells the client no lock is needed. */
		NVS_DEBUG("REQ_LOCK " CG_FMT " on a concurrent GPU: resending GPU_MODE(0)",
			  CG_ARGS(cg));
		cg->mode_sent = 0;
		send_gpu(cg, NVS_MSG_GPU_MODE, 0);
		return;
	}
	if (cg->state == CG_HOLDING) {
		NVS_DEBUG("REQ_LOCK " CG_FMT " from the holder: repeating LOCK_OK", CG_ARGS(cg));
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_LOCK_OK;
		m.u.lock_ok.local_gpu = cg->local_gpu;
		m.u.lock_ok.quantum_ms = (uint32_t)g->tq_ms;
		nvs_core_send(cg->client, &m);
		return;
	}
	if (cg->state == CG_WAITING) {
		NVS_DEBUG("REQ_LOCK " CG_FMT " already waiting", CG_ARGS(cg));
		return;
	}
	NVS_INFO("REQ_LOCK " CG_FMT " holder=%d queue=%u", CG_ARGS(cg),
		 g->holder ? (int)g->holder->client->id : -1, g->qlen);
	nvs_core_event("req_lock", CG_EV ",\"holder\":%d,\"queue\":%u", CG_ARGS(cg),
		       g->holder ? (int)g->holder->client->id : -1, g->qlen);
	cg->state = CG_WAITING;
	cg->wait_since_ns = now;
	q_push(g, cg);
	if (layer)
		layer->queued(cg, now);
	if (!g->holder || set_active(g))
		grant_next(g, now, 0);
	else
		inform_holder(g);
}

uint64_t nvs_policy_account_release(struct client_gpu *cg, uint32_t flags, uint64_t now)
{
	struct gpu *g = cg->gpu;
	if (cg->drop.sent) {
		uint64_t d = now - cg->drop.sent_ns;
		cg->st.drain_ns += d;
		g->st.drain_ns += d;
		if (d > cg->st.drain_max_ns)
			cg->st.drain_max_ns = d;
		if (d > g->st.drain_max_ns)
			g->st.drain_max_ns = d;
	}
	cg->st.releases++;
	g->st.releases++;
	/* What it moved to the host: as DROP_LOCK's SWAP_OUT asked, or, for
	 * an idle release, as SWAP_HINT asked (MiB in the upper bits). */
	uint64_t moved = cg->drop.swap_out_asked;
	if (flags & NVS_RELEASED_IDLE) {
		cg->st.idle_releases++;
		g->st.idle_releases++;
		moved = (uint64_t)(flags >> NVS_DROP_SWAP_MIB_SHIFT) << 20;
	}
	if (nvs_policy_pinned(cg))
		moved = 0; /* device memory: whatever the release said */
	cg->resident = cg->resident > moved ? cg->resident - moved : 0;
	return moved;
}

void nvs_policy_released(struct client_gpu *cg, uint32_t flags, uint64_t drain_ns, uint64_t now)
{
	struct gpu *g = cg->gpu;
	if (g->holder != cg && layer && layer->member_released(cg, flags, drain_ns, now)) {
		grant_next(g, now, 1);
		inform_holder(g);
		return;
	}
	if (g->holder != cg) {
		/* Revoked earlier, or the GPU went concurrent: harmless. */
		NVS_INFO("LOCK_RELEASED " CG_FMT
			 " ignored: not the holder (revoked or not serialized)",
			 CG_ARGS(cg));
		nvs_core_event("lock_release_ignored", CG_EV ",\"reason\":\"not-holder\"",
			       CG_ARGS(cg));
		return;
	}
	uint64_t held = now - cg->held_since_ns;
	uint64_t moved = nvs_policy_account_release(cg, flags, now);
	NVS_INFO(
	    "LOCK_RELEASED " CG_FMT " held_ms=%.3f idle=%u dropped=%d drain_ms=%.3f waiters=%u",
	    CG_ARGS(cg), ms(held), flags & NVS_RELEASED_IDLE, cg->drop.sent, ms(drain_ns), g->qlen);
	nvs_core_event("lock_released",
		       CG_EV ",\"reason\":\"%s\",\"held_ms\":%.3f,\"drain_ms\":%.3f,"
			     "\"moved_mib\":%llu,\"waiters\":%u",
		       CG_ARGS(cg),
		       (flags & NVS_RELEASED_IDLE) ? "idle"
		       : cg->drop.sent		   ? "dropped"
						   : "early",
		       ms(held), ms(drain_ns), (unsigned long long)(moved >> 20), g->qlen);
	if (g->hook && g->hook->on_drained)
		g->hook->on_drained(g, cg, flags, drain_ns, now);
	if (layer)
		layer->hold_ended(cg, flags & NVS_RELEASED_IDLE, now);
	end_hold(g, now);
	grant_next(g, now, 1);
}

void nvs_policy_settings_changed(struct gpu *g, uint64_t now)
{
	/* Limits or the capacity may have changed: count the claims anew. */
	for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
		uint64_t v = nvs_bounds_clamp(cg, cg->claimed);
		if (v != cg->allocated)
			set_allocated(cg, v);
	}
	reevaluate_as(g, now, 1);
	if (g->serialized && set_active(g))
		grant_next(g, now, 0); /* a raised capacity fits more */
	inform_holder(g);	       /* the capacity may have changed */
	/* A new TQ applies to the current quantum: the tick re-checks it. */
}

/* ---- timers ---- */

static uint64_t gpu_deadline(struct gpu *g, uint64_t now)
{
	uint64_t d = 0;
#define EARLIEST(t)                                                                                \
	do {                                                                                       \
		uint64_t t_ = (t);                                                                 \
		if (!d || t_ < d)                                                                  \
			d = t_;                                                                    \
	} while (0)
	if (g->holder && g->qlen) {
		if (!g->holder->drop.sent)
			EARLIEST(g->grant_ns + hold_quantum_ns(g));
		else
			EARLIEST(nvs_policy_drop_due(g->holder));
	}
	if (g->hook && g->hook->next_deadline) {
		uint64_t h = g->hook->next_deadline(g, now);
		if (h)
			EARLIEST(h);
	}
	if (g->switch_pending)
		EARLIEST(nvs_bounds_switch_at(g));
	uint64_t p = nvs_fair_next_deadline(g, now);
	if (p)
		EARLIEST(p);
	if (layer) {
		uint64_t c = layer->next_deadline(g, now);
		if (c)
			EARLIEST(c);
	}
#undef EARLIEST
	return d;
}

uint64_t nvs_policy_next_deadline(uint64_t now)
{
	uint64_t d = modes_owed ? now + MODE_OWED_POLL_NS : 0;
	for (unsigned i = 0; i < S.ngpus; i++) {
		uint64_t t = gpu_deadline(&S.gpus[i], now);
		if (t && (!d || t < d))
			d = t;
	}
	return d;
}

void nvs_policy_revoked(struct client_gpu *h, uint64_t now)
{
	struct gpu *g = h->gpu;
	const char *role = h == g->holder ? "primary" : "guest";
	h->st.revocations++;
	g->st.revocations++;
	NVS_WARN("REVOKE " CG_FMT " held_ms=%.3f role=%s: no LOCK_RELEASED within %u ms of "
		 "DROP_LOCK",
		 CG_ARGS(h), ms(now - h->held_since_ns), role, S.cfg.drop_grace_ms);
	/* The penalty runs from this decision's time, which the event's own
	 * stamp (taken when it is written) trails: the event says when it
	 * ends, on the same clock as mono_ns. */
	uint64_t penalty = nvs_policy_tq_ns(g);
	nvs_core_event("revoke",
		       CG_EV ",\"held_ms\":%.3f,\"grace_ms\":%u,\"penalty_ms\":%.3f,"
			     "\"penalty_until_ns\":%llu,\"role\":\"%s\"",
		       CG_ARGS(h), ms(now - h->held_since_ns), S.cfg.drop_grace_ms, ms(penalty),
		       (unsigned long long)(now + penalty), role);
	/* DROP_LOCK with grace 0 tells the client it no longer holds the
	 * lock; its late LOCK_RELEASED is ignored and it may REQ_LOCK again. */
	nvs_policy_send_drop(h, 0);
	/* It goes to the back and waits one quantum (fairness.c). */
	nvs_fair_revoked(h, now, penalty);
}

static void revoke(struct gpu *g, uint64_t now)
{
	struct client_gpu *h = g->holder;
	nvs_policy_revoked(h, now);
	end_hold(g, now);
	NVS_INFO("LOCK_RELEASED " CG_FMT " reason=revoked", CG_ARGS(h));
	nvs_core_event("lock_released", CG_EV ",\"reason\":\"revoked\"", CG_ARGS(h));
	grant_next(g, now, 1);
}

void nvs_policy_tick(uint64_t now)
{
	if (modes_owed)
		for (unsigned i = 0; i < S.ngpus; i++)
			announce_mode(&S.gpus[i]);
	for (unsigned i = 0; i < S.ngpus; i++) {
		struct gpu *g = &S.gpus[i];
		if (g->switch_pending && now >= nvs_bounds_switch_at(g)) {
			reevaluate(g, now);
			if (g->serialized && !g->holder)
				grant_next(g, now, 0);
			inform_holder(g);
		}
		if (g->hook && g->hook->on_tick)
			g->hook->on_tick(g, now);
		/* A revoked waiter's penalty ended and the lock is free. */
		if (g->serialized && !g->holder && g->qhead && nvs_fair_penalties_ended(g, now))
			grant_next(g, now, 0);
		if (layer)
			layer->on_tick(g, now);
		if (!g->holder || !g->qlen)
			continue; /* nobody waits: a lone holder is never asked */
		struct client_gpu *h = g->holder;
		if (!h->drop.sent) {
			if (now >= g->grant_ns + hold_quantum_ns(g))
				nvs_policy_drop(g, now, "tq-expired");
		} else if (now >= h->drop.deadline_ns) {
			revoke(g, now);
		} else if (!h->drop.resent) {
			nvs_policy_drop_resend(h, now);
			if (h->drop.resent)
				NVS_INFO("DROP_LOCK " CG_FMT " resent, %.0f ms of grace left",
					 CG_ARGS(h), ms(h->drop.deadline_ns - now));
		}
	}
}

uint64_t nvs_policy_held_ns(const struct client_gpu *cg, uint64_t now)
{
	return cg->st.held_ns + (cg->state == CG_HOLDING ? now - cg->held_since_ns : 0);
}
