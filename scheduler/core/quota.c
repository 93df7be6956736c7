/*
 * Compute quotas (scheduler/quota.h; docs/quotas.md has the math).
 *
 * Per GPU: a window of W ms (NVSHARE_COMPUTE_WINDOW_MS) and the number of
 * the current window. Per client and GPU (struct client_gpu .q): the limit
 * in force this window, the time billed in it, the expected billed drop
 * tail, the throttle state.
 *
 * Pacing: besides its quota per window, a limited client's use follows the
 * fluid line pct * t with at most one slice (NVSHARE_QUOTA_SLICE_MS) of
 * credit: a token bucket of depth `slice` filled at pct, kept as a virtual
 * clock (credit()). So over ANY interval T it gets at most
 * pct * T + slice + its drop tail, instead of up to 2Q in one stretch
 * across a window boundary (a client that starts late in one window and
 * runs on into the next), and measurements that know nothing of the
 * scheduler's windows see the cap too. Idle time banks at most one slice.
 *
 * Billing is hold time. A hold is billed continuously while it lasts
 * (bill_from_ns .. now), split at window boundaries; at release the part of
 * the DROP_LOCK -> LOCK_RELEASED tail that the client's own measured drain
 * does not cover (message and wake-up latency) is billed at
 * NVSHARE_DROP_TAIL_BILLING_PERCENT.
 */
#include "quota.h"

#include "log.h"
#include "parse.h"
#include "policy.h"
#include "state.h"

#include <stdlib.h>
#include <string.h>

/* A grant shorter than this is not worth a hand-off: a client with less
 * quota left than its expected tail plus this is throttled. */
#define MIN_GRANT_NS 1000000ull
/* First guess of the billed drop tail, before one was measured. */
#define TAIL_GUESS_NS 2000000ull

#define CG_FMT "client=%u pid=%d gpu=%d"
#define CG_ARGS(cg) (cg)->client->id, (int)(cg)->client->pid, (cg)->gpu->index

/* The window, sample interval, carry-over, tail share and slice are rows
 * of settings.def (S.cfg, validated there). */

static uint64_t window_ns(void)
{
	return (uint64_t)S.cfg.q_window_ms * 1000000ull;
}

static int limited(const struct client_gpu *cg)
{
	return cg->q.limit >= 1 && cg->q.limit < 100;
}

/* Holding or waiting now, or did so within the last window length W. A
 * sliding W rather than "this window or the previous one": that left a
 * client which had gone idle counted for up to two windows, and an H200 run
 * showed a lone 75 % client held to 50 % (scaled for an unlimited
 * co-runner that had stopped 2.5 s before). */
static int active(const struct client_gpu *cg, uint64_t now)
{
	return cg->state != CG_IDLE || (cg->q.seen_ns && now - cg->q.seen_ns < window_ns());
}

/* Limit in percent after scaling: the active clients' limits may not
 * oversubscribe the GPU, and active unlimited clients keep their fair
 * share (100/n each) so they are never starved. */
static double effective_pct(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	if (!limited(cg))
		return 100.0;
	unsigned n = 0, unl = 0;
	uint64_t lsum = 0;
	for (const struct client_gpu *a = g->ahead; a; a = a->anext) {
		if (a != cg && !active(a, now))
			continue;
		n++;
		if (limited(a))
			lsum += a->q.limit;
		else
			unl++;
	}
	double cap = unl ? 100.0 * (double)(n - unl) / (double)n : 100.0;
	double pct = cg->q.limit;
	if ((double)lsum > cap)
		pct = pct * cap / (double)lsum;
	return pct;
}

static uint64_t quota_ns(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	if (!limited(cg))
		return UINT64_MAX;
	return (uint64_t)((double)window_ns() * effective_pct(g, cg, now) / 100.0);
}

static uint64_t slice_ns(void)
{
	/* 0: not set, window / 20 */
	uint32_t ms = S.cfg.q_slice_ms ? S.cfg.q_slice_ms : S.cfg.q_window_ms / 20;
	return (uint64_t)ms * 1000000ull;
}

static uint64_t holding_ns(const struct client_gpu *cg, uint64_t now)
{
	if (cg->state == CG_HOLDING && cg->q.bill_from_ns && now > cg->q.bill_from_ns)
		return now - cg->q.bill_from_ns;
	return 0;
}

static uint64_t billed(const struct client_gpu *cg, uint64_t now)
{
	return cg->q.used_ns + holding_ns(cg, now);
}

/* Adds billed time (used in this window and ever). */
static void bill(struct client_gpu *cg, uint64_t ns)
{
	cg->q.used_ns += ns;
	cg->q.total_ns += ns;
}

/* Virtual time of the client's fluid line: each ns it used moves it
 * 100/pct ns; it never lags `now` by more than slice * 100/pct (the bucket
 * is full). Credit = (now - vt) * pct/100, at most one slice. */
static double pace_vt(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	double p = effective_pct(g, cg, now) / 100.0;
	double used = (double)(cg->q.total_ns + holding_ns(cg, now) - cg->q.pace_billed_ns);
	double vt = (double)cg->q.pace_vt_ns + used / p;
	double floor = (double)now - (double)slice_ns() / p;
	return vt > floor ? vt : floor;
}

static double credit(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	return ((double)now - pace_vt(g, cg, now)) * effective_pct(g, cg, now) / 100.0;
}

/* Fixes the virtual clock at `now` (before a grant, after a release, when
 * the window turns): the full-bucket floor then holds for what follows. */
static void pace_commit(const struct gpu *g, struct client_gpu *cg, uint64_t now)
{
	if (!limited(cg))
		return;
	double vt = pace_vt(g, cg, now);
	cg->q.pace_vt_ns = vt > 0 ? (uint64_t)vt : 0;
	cg->q.pace_billed_ns = cg->q.total_ns + holding_ns(cg, now);
}

/* Credit a grant must find: half a slice beyond the expected tail, at most
 * the bucket. Less would hand the GPU over for slivers: a lone capped client
 * granted at every millisecond of credit ran 3 ms holds with ~1 ms of
 * hand-off each on an H200. With two clients whose caps sum to 100 the sum
 * of their credits is conserved while one holds, so once it covers both
 * thresholds no gap recurs. */
static double grant_credit(const struct client_gpu *cg)
{
	/* With another client waiting the GPU would idle while this one's
	 * credit grows to half a slice (a client with the larger cap of a
	 * pair lost 2-3 points that way on the simulated GPU): an eighth. */
	int others = 0;
	for (const struct client_gpu *w = cg->gpu->qhead; w && !others; w = w->qnext)
		others = w != cg;
	double want = (double)cg->q.tail_est_ns + (double)slice_ns() / (others ? 8 : 2);
	/* Below the bucket depth: credit never exceeds one slice (and in
	 * floating point may stay a hair under it), so a threshold of a whole
	 * slice (a tail estimate near a slice) kept the client out for good. */
	double most = 0.9 * (double)slice_ns();
	return want < most ? want : most;
}

/* Not worth granting: what is left does not cover the expected tail. */
static int exhausted(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	if (!limited(cg))
		return 0;
	uint64_t q = quota_ns(g, cg, now);
	/* At most half the quota counts as expected tail: an estimate larger
	 * than the quota would keep the client out for good (it is updated
	 * only when the client runs). */
	uint64_t tail = cg->q.tail_est_ns < q / 2 ? cg->q.tail_est_ns : q / 2;
	uint64_t need = billed(cg, now) + tail + MIN_GRANT_NS;
	return need >= q;
}

/* Ahead of its pace line: the quota is not used up, but the client must
 * wait until the line has moved on by about half a slice (a shorter grant
 * would cost a hand-off for a sliver of GPU time). Only while the pace, not
 * the quota, binds: the last bit of quota in a window is always grantable
 * (exhausted() decides then). */
static int paced_out(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	return limited(cg) && credit(g, cg, now) < grant_credit(cg);
}

/* May run now: quota left and not ahead of its pace. */
static int eligible(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	return !exhausted(g, cg, now) && !paced_out(g, cg, now);
}

/* When a waiting limited client becomes eligible by pacing (absolute ns),
 * or UINT64_MAX if only the next window helps. */
static uint64_t paced_ready_at(const struct gpu *g, const struct client_gpu *cg, uint64_t now)
{
	if (exhausted(g, cg, now))
		return UINT64_MAX;
	if (!paced_out(g, cg, now))
		return now;
	/* Waiting, the credit grows at pct. */
	double t = (double)now +
		   (grant_credit(cg) - credit(g, cg, now)) * 100.0 / effective_pct(g, cg, now);
	return t <= (double)now ? now : (uint64_t)t;
}

/* quiet: pacing waits happen every slice; only quota exhaustion is news. */
static void throttle(struct client_gpu *cg, uint64_t now, int quiet)
{
	if (cg->q.throttled)
		return;
	cg->q.throttled = 1;
	cg->q.throttled_since_ns = now;
	if (quiet)
		NVS_DEBUG("PACE " CG_FMT " used_ms=%.3f limit=%u%%", CG_ARGS(cg),
			  (double)cg->q.used_ns / 1e6, cg->q.limit);
	else
		NVS_INFO("THROTTLE " CG_FMT " used_ms=%.3f limit=%u%%", CG_ARGS(cg),
			 (double)cg->q.used_ns / 1e6, cg->q.limit);
}

/* Throttled time that counts: while it waited for the lock. */
static uint64_t throttled_open_ns(const struct client_gpu *cg, uint64_t now)
{
	if (!cg->q.throttled || cg->state != CG_WAITING)
		return 0;
	uint64_t from = cg->q.throttled_since_ns > cg->wait_since_ns ? cg->q.throttled_since_ns
								     : cg->wait_since_ns;
	return now > from ? now - from : 0;
}

static void unthrottle(struct client_gpu *cg, uint64_t now)
{
	if (!cg->q.throttled)
		return;
	cg->q.throttled_ns += throttled_open_ns(cg, now);
	cg->q.throttled = 0;
}

/* An unlimited holder gives way to a waiting limited client with quota. */
static int limited_waiter_ready(const struct gpu *g, uint64_t now)
{
	for (const struct client_gpu *w = g->qhead; w; w = w->qnext)
		if (limited(w) && eligible(g, w, now))
			return 1;
	return 0;
}

/* Earliest time a waiting limited client becomes eligible by pacing. */
static uint64_t next_paced_ready(const struct gpu *g, uint64_t now)
{
	uint64_t t = UINT64_MAX;
	for (const struct client_gpu *w = g->qhead; w; w = w->qnext) {
		if (!limited(w))
			continue;
		uint64_t r = paced_ready_at(g, w, now);
		if (r < t)
			t = r;
	}
	return t;
}

static int want_preempt(const struct gpu *g, uint64_t now)
{
	const struct client_gpu *h = g->holder;
	return h && !h->drop.sent && !limited(h) && limited_waiter_ready(g, now);
}

/* When the limited holder must get DROP_LOCK: when its expected tail would
 * overrun the window's quota, or use up its pacing credit (which a hold
 * drains at 100 % - pct). */
static uint64_t drop_at(const struct gpu *g, const struct client_gpu *h, uint64_t now)
{
	uint64_t q = quota_ns(g, h, now);
	uint64_t b = billed(h, now) + h->q.tail_est_ns;
	if (b >= q)
		return now;
	uint64_t t = now + (q - b); /* quota line */
	double c = credit(g, h, now) - (double)h->q.tail_est_ns;
	if (c <= 0)
		return now;
	double tp = (double)now + c / (1.0 - effective_pct(g, h, now) / 100.0);
	return tp < (double)t ? (uint64_t)tp : t;
}

/* ---- the hook ---- */

static int q_may_grant(struct gpu *g, struct client_gpu *cg, uint64_t now)
{
	cg->q.seen_ns = now;
	if (limited(cg)) {
		if (exhausted(g, cg, now)) {
			throttle(cg, now, 0);
			return 0;
		}
		if (paced_out(g, cg, now)) {
			throttle(cg, now, 1);
			return 0;
		}
		unthrottle(cg, now);
		return 1;
	}
	/* Limited clients with quota left first: their quota bounds how long
	 * an unlimited client waits. */
	return !limited_waiter_ready(g, now);
}

static void q_on_grant(struct gpu *g, struct client_gpu *cg, uint64_t now)
{
	pace_commit(g, cg, now);
	cg->q.bill_from_ns = now;
	cg->q.tail_adj_ns = 0;
	cg->q.seen_ns = now;
}

static void q_on_drained(struct gpu *g, struct client_gpu *cg, uint32_t flags, uint64_t drain_ns,
			 uint64_t now)
{
	if (!cg->drop.sent || now < cg->drop.sent_ns)
		return;
	uint64_t tail = now - cg->drop.sent_ns;
	uint64_t d = drain_ns < tail ? drain_ns : tail;
	/* The client's drain is GPU time it had; the rest of the tail (the
	 * DROP_LOCK and LOCK_RELEASED trips, its wake-up) is billed at p %. */
	uint64_t unbilled = (tail - d) * (100u - S.cfg.q_tail_pct) / 100u;
	uint64_t bill = tail - unbilled;
	cg->q.tail_adj_ns = unbilled;
	/* Expected billed tail: mean of the last measurement and the past,
	 * at most one pacing slice. A longer tail is not the client's own
	 * queued work (its in-flight work is capped) but an outlier, e.g. work
	 * another process queued before it was capped: under a sanitizer
	 * build one such 1 s drain kept a 30 % client throttled for good. */
	uint64_t est = cg->q.tail_est_ns ? (cg->q.tail_est_ns + bill) / 2 : bill;
	cg->q.tail_est_ns = est < slice_ns() ? est : slice_ns();
	(void)flags;
}

static void q_on_release(struct gpu *g, struct client_gpu *cg, uint64_t now)
{
	uint64_t add =
	    cg->q.bill_from_ns && now > cg->q.bill_from_ns ? now - cg->q.bill_from_ns : 0;
	add = add > cg->q.tail_adj_ns ? add - cg->q.tail_adj_ns : 0;
	bill(cg, add);
	cg->q.bill_from_ns = 0;
	cg->q.tail_adj_ns = 0;
	cg->q.seen_ns = now;
	pace_commit(g, cg, now);
	if (exhausted(g, cg, now))
		throttle(cg, now, 0);
}

static void start_window(struct gpu *g, uint64_t now)
{
	g->q_window_start_ns = now;
	g->q_window++;
	if (!g->q_window)
		g->q_window = 1;
}

/* Window end: overuse carried over (c %), limits changed with nvsharectl
 * come into force, throttled clients re-admitted. */
static void window_reset(struct gpu *g, uint64_t now)
{
	uint64_t w = window_ns();
	for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
		pace_commit(g, cg, now);
		if (cg->state == CG_HOLDING && cg->q.bill_from_ns && now > cg->q.bill_from_ns) {
			bill(cg, now - cg->q.bill_from_ns);
			cg->q.bill_from_ns = now;
			cg->q.pace_billed_ns = cg->q.total_ns;
		}
		uint64_t q = quota_ns(g, cg, now);
		uint64_t over = limited(cg) && cg->q.used_ns > q ? cg->q.used_ns - q : 0;
		cg->q.last_used_ns = cg->q.used_ns;
		cg->q.used_ns = over * S.cfg.q_carry_pct / 100u;
	}
	if (now - g->q_window_start_ns >= 2 * w)
		g->q_window_start_ns = now; /* idle for a while: start afresh */
	else
		g->q_window_start_ns += w;
	g->q_window++;
	for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
		unthrottle(cg, now);
		if (cg->q.limit != cg->core_limit)
			NVS_INFO("QUOTA " CG_FMT " limit %u%% -> %u%% from this window",
				 CG_ARGS(cg), cg->q.limit, cg->core_limit);
		cg->q.limit = cg->core_limit;
	}
	NVS_DEBUG("QUOTA gpu=%d window %u", g->index, g->q_window);
}

static uint64_t q_next_deadline(struct gpu *g, uint64_t now)
{
	uint64_t d = g->q_window_start_ns + window_ns();
	struct client_gpu *h = g->holder;
	if (h && !h->drop.sent) {
		if (limited(h)) {
			uint64_t t = drop_at(g, h, now);
			if (g->grant_ns < g->q_window_start_ns && limited_waiter_ready(g, now))
				t = now;
			uint64_t s = now + (uint64_t)S.cfg.q_sample_ms * 1000000ull;
			if (s < t)
				t = s;
			if (t < d)
				d = t;
		} else if (want_preempt(g, now)) {
			d = now;
		}
	}
	/* A waiter held back by pacing: wake up when it may run, if that
	 * can change anything then: the lock is free (grant), or an
	 * unlimited holder not yet asked to drop (quota-priority). While an
	 * asked holder drains, its release is what comes next: a deadline
	 * of `now` here kept the loop turning without sleeping for the
	 * whole drain (found by tests/core/t_quota). */
	if (!h || (!limited(h) && !h->drop.sent)) {
		uint64_t r = next_paced_ready(g, now);
		if (r < d)
			d = r > now ? r : now;
	}
	return d;
}

static void q_on_tick(struct gpu *g, uint64_t now)
{
	if (now >= g->q_window_start_ns + window_ns()) {
		window_reset(g, now);
		nvs_policy_grant(g, now);
	}
	struct client_gpu *h = g->holder;
	if (!h && next_paced_ready(g, now) <= now)
		nvs_policy_grant(g, now); /* a paced waiter may run now */
	h = g->holder;
	if (!h || h->drop.sent)
		return;
	if (limited(h)) {
		h->q.seen_ns = now;
		if (now >= drop_at(g, h, now))
			nvs_policy_drop(g, now, "quota");
		else if (g->grant_ns < g->q_window_start_ns && limited_waiter_ready(g, now))
			/* Granted in an earlier window: a limited waiter with
			 * fresh quota goes first (no double-length holds
			 * across the boundary). */
			nvs_policy_drop(g, now, "quota-window");
	} else if (want_preempt(g, now)) {
		nvs_policy_drop(g, now, "quota-priority");
	}
}

static const struct nvs_policy_hook quota_hook = {
    .name = "quota",
    .gpu_mode = NVS_GPU_MODE_SERIALIZED_QUOTA,
    .may_grant = q_may_grant,
    .on_grant = q_on_grant,
    .on_drained = q_on_drained,
    .on_release = q_on_release,
    .next_deadline = q_next_deadline,
    .on_tick = q_on_tick,
};

/* Installs or removes the quota hook on g after its clients or their
 * limits changed. Returns 1 if g must be serialized for quotas. */
static int q_refresh(struct gpu *g, uint64_t now)
{
	int want = 0;
	if (g->mode != NVS_MODE_OFF)
		for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
			if (cg->core_limit >= 1 && cg->core_limit < 100)
				want = 1;
	if (want && g->hook != &quota_hook) {
		if (g->hook)
			return 0; /* another policy owns this GPU */
		g->hook = &quota_hook;
		start_window(g, now);
		/* A fresh start: limits apply at once, nothing billed yet. */
		for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
			memset(&cg->q, 0, sizeof cg->q);
			cg->q.limit = cg->core_limit;
			if (cg->state == CG_HOLDING)
				cg->q.bill_from_ns = now;
			if (cg->state != CG_IDLE)
				cg->q.seen_ns = now;
		}
		NVS_INFO("QUOTA gpu=%d enabled (window %u ms)", g->index, S.cfg.q_window_ms);
	} else if (!want && g->hook == &quota_hook) {
		for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
			unthrottle(cg, now);
			cg->q.limit = cg->core_limit;
		}
		g->hook = NULL;
		NVS_INFO("QUOTA gpu=%d disabled (no limited client)", g->index);
	} else if (want) {
		/* A client that attached in the middle of a window. */
		for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
			if (!cg->q.limit)
				cg->q.limit = cg->core_limit;
	}
	return g->hook == &quota_hook;
}

void nvs_quota_start(void)
{
	static const struct nvs_policy_ops ops = {.refresh = q_refresh};
	nvs_policy_set_ops(&ops);
}

/* ---- views ---- */

uint64_t nvs_quota_throttled_ns(const struct client_gpu *cg, uint64_t now)
{
	return cg->q.throttled_ns + throttled_open_ns(cg, now);
}

void nvs_quota_view(const struct client_gpu *cg, uint64_t now, struct nvs_quota_view *v)
{
	const struct gpu *g = cg->gpu;
	memset(v, 0, sizeof *v);
	int on = g->hook == &quota_hook;
	v->limit = on && cg->q.limit ? cg->q.limit : cg->core_limit;
	v->effective_pct = on ? effective_pct(g, cg, now) : (double)v->limit;
	v->window_ns = window_ns();
	if (on) {
		v->window_elapsed_ns = now > g->q_window_start_ns ? now - g->q_window_start_ns : 0;
		v->used_ns = billed(cg, now);
		v->last_used_ns = cg->q.last_used_ns;
		v->billed_ns = cg->q.total_ns + holding_ns(cg, now);
	}
	v->throttled = cg->q.throttled;
	v->throttled_ns = nvs_quota_throttled_ns(cg, now);
}
