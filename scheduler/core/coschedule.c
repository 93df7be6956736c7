/*
 * Co-scheduling on a serialized GPU: the running set (primary holder plus
 * guests whose memory fits beside it), preemption of batch members for
 * interactive bursts, the batch floor, and the class of each client.
 * docs/scheduler.md "Co-scheduling" has the rules, a worked example and the
 * bounds; coschedule.h the hooks policy.c calls.
 *
 * Invariants:
 *  - g->holder == NULL implies no guests (a guest is promoted when the
 *    primary leaves), so "lock free" keeps meaning what it meant.
 *  - A waiter is granted only when the expected memory of the running set
 *    plus its own fits the capacity (an empty GPU admits its first waiter
 *    whatever its size, as before).
 *  - Every guest is a CG_HOLDING client_gpu with co.guest set; g->co.guests
 *    counts them.
 */
#include "coschedule.h"

#include "log.h"
#include "parse.h"
#include "policy.h"
#include "port.h"
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows of settings.def: their defaults are the table's. */
struct nvs_cosched_config nvs_cosched_cfg;

#define MS 1000000ull
#define CG_EV "\"client\":%u,\"pid\":%d,\"gpu\":%d"
#define CG_ARGS(cg) (cg)->client->id, (int)(cg)->client->pid, (cg)->gpu->index
/* Re-check the batch floor this often while it holds a burst back. */
#define FLOOR_RECHECK_NS (10 * MS)
/* Hysteresis of the floor, in points: batch gives way to bursts only once
 * its share is this far above the floor, and takes the GPU back from them
 * once it falls below the floor. Without it the share oscillates around
 * the floor, each dip as deep as a drop's drain, and averages below it
 * (48 % for a floor of 50 % under tests/sched/t_coschedule.sh's storm). */
#define FLOOR_MARGIN_PCT 5u

/* ---- classes ---- */

unsigned nvs_cosched_hello_prio(uint32_t flags)
{
	if ((flags & NVS_HELLO_PRIO_INTERACTIVE) && !(flags & NVS_HELLO_PRIO_BATCH))
		return NVS_PRIO_INTERACTIVE;
	if ((flags & NVS_HELLO_PRIO_BATCH) && !(flags & NVS_HELLO_PRIO_INTERACTIVE))
		return NVS_PRIO_BATCH;
	return NVS_PRIO_NONE;
}

/* The class the Pod or the process gave, 0 none; *src says which. */
static unsigned given_prio(const struct client_gpu *cg, const char **src)
{
	unsigned p = cg->client->annot_prio;
	const char *s = "annotation";
	if (!p) {
		p = nvs_cosched_hello_prio(cg->client->hello_flags);
		s = p ? "declared" : "observed";
	}
	if (src)
		*src = s;
	return p;
}

int nvs_cosched_interactive(const struct client_gpu *cg, const char **src)
{
	unsigned p = given_prio(cg, src);
	if (p)
		return p == NVS_PRIO_INTERACTIVE;
	/* Two holds in a row that were short, ended by the client's own idle
	 * release and followed by a pause longer than the hold: it works in
	 * bursts. */
	return cg->co.short_idle >= 2;
}

const char *nvs_cosched_class_name(const struct client_gpu *cg)
{
	return nvs_cosched_interactive(cg, NULL) ? "interactive" : "batch";
}

static void nvs_cosched_hold_ended(struct client_gpu *cg, int idle, uint64_t now)
{
	uint64_t held = now - cg->held_since_ns;
	if (idle && held < NVS_COSCHED_BURST_MS * MS) {
		if (cg->co.short_idle < 255)
			cg->co.short_idle++;
		cg->co.idle_end_ns = now;
		cg->co.idle_hold_ns = held;
	} else {
		cg->co.short_idle = 0;
		cg->co.idle_end_ns = 0;
	}
}

/* ---- the running set ---- */

/* Not where a policy hook (a compute quota, policy.h) decides who runs. */
int nvs_cosched_active(const struct gpu *g)
{
	return nvs_cosched_cfg.enabled && g->serialized && g->mode == NVS_MODE_AUTO &&
	       !g->unmanaged_force && !g->hook;
}

unsigned nvs_cosched_running(const struct gpu *g)
{
	return (g->holder ? 1u : 0u) + g->co.guests;
}

/* Device memory (policy.h nvs_policy_pinned) counts whether its client
 * runs or not: it stays on the GPU. */
static uint64_t running_sum(const struct gpu *g)
{
	uint64_t s = 0;
	for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
		if (cg->state == CG_HOLDING || nvs_policy_pinned(cg))
			s += nvs_policy_expected_of(cg);
	return s;
}

/* Expected memory of the running set without the members already asked to
 * drop (their memory is on its way out). */
static uint64_t staying_sum(const struct gpu *g)
{
	uint64_t s = 0;
	for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
		if ((cg->state == CG_HOLDING && !cg->drop.sent) || nvs_policy_pinned(cg))
			s += nvs_policy_expected_of(cg);
	return s;
}

/* What w adds to a sum of the running set when it joins: nothing if it
 * keeps device memory, which the sums count already, running or not (it
 * was counted twice before, so such a client never joined a set its
 * memory fitted: tests/core/t_cosched.c test_device_memory). */
static uint64_t joining(const struct client_gpu *w)
{
	return nvs_policy_pinned(w) ? 0 : nvs_policy_expected_of(w);
}

static int fits(const struct gpu *g, uint64_t base, const struct client_gpu *w)
{
	return base + joining(w) <= nvs_gpu_capacity(g);
}

/* ---- batch floor ---- */

static int batch_state(const struct gpu *g, int *running, int *waiting)
{
	int any = 0;
	*running = *waiting = 0;
	for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
		if (nvs_cosched_interactive(cg, NULL))
			continue;
		any = 1;
		if (cg->state == CG_HOLDING)
			*running = 1;
		else if (cg->state == CG_WAITING)
			*waiting = 1;
	}
	return any;
}

static void account(struct gpu *g, uint64_t now)
{
	struct gpu_co *c = &g->co;
	if (!c->acct_ns) {
		c->acct_ns = c->window_ns = now;
		return;
	}
	uint64_t dt = now > c->acct_ns ? now - c->acct_ns : 0;
	c->acct_ns = now;
	int run, wait;
	if (nvs_cosched_active(g) && batch_state(g, &run, &wait)) {
		if (run)
			c->batch_run_ns += dt;
		else if (wait)
			c->batch_wait_ns += dt;
	}
	/* A sliding window: the past counts half per window elapsed. */
	uint64_t w = (uint64_t)NVS_COSCHED_WINDOW_MS * MS;
	for (int i = 0; now - c->window_ns >= w && i < 64; i++) {
		c->batch_run_ns /= 2;
		c->batch_wait_ns /= 2;
		c->window_ns += w;
	}
	if (now - c->window_ns >= w)
		c->window_ns = now;
}

unsigned nvs_cosched_batch_share(const struct gpu *g)
{
	uint64_t t = g->co.batch_run_ns + g->co.batch_wait_ns;
	return t ? (unsigned)(g->co.batch_run_ns * 100 / t) : 100u;
}

/* Batch's share of the window is at least floor + margin points. */
static int share_at_least(const struct gpu *g, unsigned margin)
{
	uint64_t t = g->co.batch_run_ns + g->co.batch_wait_ns;
	unsigned pct = nvs_cosched_cfg.batch_floor_pct + margin;
	return g->co.batch_run_ns * 100 >= (uint64_t)(pct > 100 ? 100 : pct) * t;
}

/* Batch is at or above its floor: bursts in its way may stay. */
static int floor_ok(const struct gpu *g)
{
	return share_at_least(g, 0);
}

/* Batch has had its floor and the margin: it may give way to a burst. */
static int may_give_way(const struct gpu *g)
{
	return share_at_least(g, FLOOR_MARGIN_PCT);
}

/* ---- guests: grant, drop, end ---- */

static void end_guest(struct gpu *g, struct client_gpu *cg, uint64_t now)
{
	uint64_t held = now - cg->held_since_ns;
	cg->st.held_ns += held;
	g->st.held_ns += held;
	cg->state = CG_IDLE;
	cg->waiters_sent = 0;
	cg->co.guest = 0;
	memset(&cg->drop, 0, sizeof cg->drop);
	g->co.guests--;
}

/* Asks member h to release for waiter w (may be NULL). */
static void drop_member(struct gpu *g, struct client_gpu *h, struct client_gpu *w, uint64_t now,
			const char *why)
{
	if (h == g->holder) {
		nvs_policy_drop(g, now, why); /* counts it */
	} else {
		if (h->drop.sent)
			return;
		nvs_policy_count_drop(g, why);
		nvs_policy_drop_start(h, now, nvs_policy_swap_out_need(g, h, w));
		NVS_INFO("DROP_LOCK client=%u pid=%d gpu=%d held_ms=%.3f waiters=%u grace_ms=%u "
			 "reason=%s guest=1",
			 CG_ARGS(h), (double)(now - h->held_since_ns) / 1e6, g->qlen,
			 S.cfg.drop_grace_ms, why);
		nvs_core_event("drop_lock",
			       CG_EV
			       ",\"held_ms\":%.3f,\"waiters\":%u,\"grace_ms\":%u,\"reason\":\"%s\","
			       "\"role\":\"guest\"",
			       CG_ARGS(h), (double)(now - h->held_since_ns) / 1e6, g->qlen,
			       S.cfg.drop_grace_ms, why);
	}
	if (!strcmp(why, "interactive"))
		h->co.preempted = 1;
	if (w)
		nvs_core_event("preempt", CG_EV ",\"reason\":\"%s\",\"for\":%u,\"waited_ms\":%.3f",
			       CG_ARGS(h), why, w->client->id,
			       (double)(now - w->wait_since_ns) / 1e6);
}

static int nvs_cosched_guest_released(struct client_gpu *cg, uint32_t flags, uint64_t drain_ns,
				      uint64_t now)
{
	struct gpu *g = cg->gpu;
	if (!cg->co.guest || cg->state != CG_HOLDING)
		return 0;
	int idle = (flags & NVS_RELEASED_IDLE) != 0;
	uint64_t moved = nvs_policy_account_release(cg, flags, now);
	uint64_t held = now - cg->held_since_ns;
	const char *reason = idle ? "idle" : cg->drop.sent ? "dropped" : "early";
	NVS_INFO("LOCK_RELEASED client=%u pid=%d gpu=%d held_ms=%.3f idle=%d dropped=%d "
		 "drain_ms=%.3f waiters=%u guest=1",
		 CG_ARGS(cg), (double)held / 1e6, idle, cg->drop.sent, (double)drain_ns / 1e6,
		 g->qlen);
	nvs_core_event("lock_released",
		       CG_EV ",\"reason\":\"%s\",\"held_ms\":%.3f,\"drain_ms\":%.3f,"
			     "\"moved_mib\":%llu,\"waiters\":%u,\"role\":\"guest\"",
		       CG_ARGS(cg), reason, (double)held / 1e6, (double)drain_ns / 1e6,
		       (unsigned long long)(moved >> 20), g->qlen);
	account(g, now);
	nvs_cosched_hold_ended(cg, idle, now);
	end_guest(g, cg, now);
	return 1;
}

static int nvs_cosched_guest_detach(struct client_gpu *cg, uint64_t now)
{
	if (!cg->co.guest || cg->state != CG_HOLDING)
		return 0;
	account(cg->gpu, now);
	end_guest(cg->gpu, cg, now);
	NVS_INFO("LOCK_RELEASED client=%u pid=%d gpu=%d reason=disconnect guest=1", CG_ARGS(cg));
	nvs_core_event("lock_released", CG_EV ",\"reason\":\"disconnect\",\"role\":\"guest\"",
		       CG_ARGS(cg));
	return 1;
}

static void nvs_cosched_end_guests(struct gpu *g, uint64_t now)
{
	for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
		if (cg->co.guest && cg->state == CG_HOLDING) {
			end_guest(g, cg, now);
			nvs_core_event("lock_released",
				       CG_EV ",\"reason\":\"gpu-concurrent\",\"role\":\"guest\"",
				       CG_ARGS(cg));
		}
	g->co.guests = 0;
}

/* The primary left while guests run: the longest-running guest becomes the
 * primary (its quantum counts from its grant), so holder == NULL keeps
 * meaning "nobody runs". */
static void promote(struct gpu *g)
{
	struct client_gpu *best = NULL;
	for (struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
		if (cg->co.guest && cg->state == CG_HOLDING &&
		    (!best || cg->held_since_ns < best->held_since_ns))
			best = cg;
	if (!best)
		return;
	best->co.guest = 0;
	g->co.guests--;
	g->holder = best;
	g->grant_ns = best->held_since_ns;
	/* Its DROP_LOCK state (best->drop) and quantum come along. */
	best->co.why = "promoted";
	NVS_INFO("PROMOTE client=%u pid=%d gpu=%d: primary holder of the running set",
		 CG_ARGS(best));
	nvs_core_event("promote", CG_EV, CG_ARGS(best));
}

/* May waiters behind `blocked` (the first that does not fit) be granted?
 * Not once it waited a quantum (nothing starves), and not past a batch
 * waiter while batch is below its floor. */
static int may_overtake(const struct gpu *g, const struct client_gpu *blocked, uint64_t now,
			uint64_t tq)
{
	if (now - blocked->wait_since_ns >= tq)
		return 0;
	if (!nvs_cosched_interactive(blocked, NULL) && !may_give_way(g))
		return 0;
	return 1;
}

static void nvs_cosched_fill(struct gpu *g, uint64_t now, int handoff)
{
	account(g, now);
	if (!g->holder)
		promote(g);
	uint64_t run = running_sum(g);
	/* The quantum is O(clients) to compute and the same for every
	 * waiter (granting changes neither the memory attached nor the swap
	 * times). */
	uint64_t tq = nvs_policy_tq_ns(g);
	struct client_gpu *blocked = NULL, *next;
	for (struct client_gpu *cg = g->qhead; cg; cg = next) {
		next = cg->qnext;
		if (cg->client->flags & NVS_CLIENT_DOOMED) {
			/* Its detach comes in this loop iteration. */
			nvs_policy_dequeue(g, cg);
			continue;
		}
		if (blocked && !may_overtake(g, blocked, now, tq))
			break;
		if (g->holder && !fits(g, run, cg)) {
			if (!blocked)
				blocked = cg;
			continue;
		}
		int guest = g->holder != NULL;
		run += joining(cg);
		cg->co.preempted = 0;
		nvs_policy_grant_member(g, cg, now, handoff && !guest, guest);
		if (guest) {
			g->co.guests++;
			cg->co.why = "fits";
		} else {
			cg->co.why = "first";
		}
	}
	nvs_policy_inform(g);
}

static void nvs_cosched_queued(struct client_gpu *cg, uint64_t now)
{
	struct gpu *g = cg->gpu;
	/* A job that releases whenever it pauses (it is told WAITERS, below)
	 * but asks again sooner than it held is busy, not bursty: a training
	 * loop with short gaps between steps, not a notebook. */
	if (cg->co.idle_end_ns && now - cg->co.idle_end_ns < cg->co.idle_hold_ns)
		cg->co.short_idle = 0;
	cg->co.idle_end_ns = 0;
	if (!cg->co.preempted || g->qhead == cg)
		return;
	/* Back to the head: the burst that took its place goes idle soon. */
	nvs_policy_requeue_head(g, cg);
}

/* ---- what members are told ---- */

/* One pass over the GPU's clients for what every member is told: the
 * expected memory of all and how many do not run. */
struct gpu_sums {
	uint64_t exp;
	unsigned idle;
	struct nvs_mem_sums m; /* for nvs_policy_swap_out_need_with */
};

static struct gpu_sums sums(const struct gpu *g)
{
	struct gpu_sums s;
	memset(&s, 0, sizeof s);
	for (const struct client_gpu *c = g->ahead; c; c = c->anext) {
		s.exp += nvs_policy_expected_of(c);
		s.m.resident += c->resident;
		if (c->state != CG_HOLDING)
			s.idle++;
	}
	s.m.expected = s.exp;
	return s;
}

static uint32_t waiters_with(const struct gpu *g, const struct client_gpu *h,
			     const struct gpu_sums *s)
{
	/* An interactive member releases as soon as it idles, even when
	 * nobody waits yet: the next burst (its own or another's) then finds
	 * room, and its memory stops counting as resident. So does a member
	 * that declared nothing, whatever it was observed to be: that is how
	 * its bursts show (told 0 it holds through its pauses, its holds look
	 * long, and an idle notebook would stay resident for good), while a
	 * busy job never idles and keeps its hold. Only a class the Pod or
	 * the process gave as batch holds through its pauses. */
	if (nvs_cosched_active(g) && !g->qlen && s->exp > nvs_gpu_capacity(g) &&
	    (nvs_cosched_interactive(h, NULL) || !given_prio(h, NULL)))
		return 1;
	return g->qlen;
}

static uint64_t hint_with(const struct gpu *g, const struct client_gpu *h, const struct gpu_sums *s)
{
	if (nvs_policy_pinned(h))
		return 0; /* device memory: nothing to move */
	uint64_t need = nvs_policy_swap_out_need_with(g, h, g->qhead, &s->m);
	if (!nvs_cosched_active(g) || !nvs_cosched_interactive(h, NULL))
		return need;
	/* Proactive, so that the next burst of any idle client swaps in
	 * without waiting for a swap-out: the memory that does not fit (E =
	 * expected - capacity) is spread over the k idle clients (h included)
	 * and the free room, each missing m = E / (k - 1) and the room m too:
	 * then any one of them fits on its next burst by swapping in m, the
	 * least per burst (k = 1: all of E from h). */
	uint64_t cap = nvs_gpu_capacity(g), exp = s->exp;
	unsigned k = s->idle + (h->state == CG_HOLDING);
	if (exp <= cap)
		return need;
	uint64_t m = (exp - cap) / (k > 1 ? k - 1 : 1);
	uint64_t eh = nvs_policy_expected_of(h);
	uint64_t miss = eh > h->resident ? eh - h->resident : 0;
	uint64_t pro = m > miss ? m - miss : 0;
	if (pro > h->resident)
		pro = h->resident;
	return pro > need ? pro : need;
}

static uint32_t nvs_cosched_waiters(const struct gpu *g, const struct client_gpu *h)
{
	struct gpu_sums s = sums(g);
	return waiters_with(g, h, &s);
}

static uint64_t nvs_cosched_hint_bytes(const struct gpu *g, const struct client_gpu *h)
{
	struct gpu_sums s = sums(g);
	return hint_with(g, h, &s);
}

static void nvs_cosched_inform(struct gpu *g)
{
	if (!g->co.guests)
		return;
	struct gpu_sums s = sums(g);
	for (struct client_gpu *h = g->ahead; h; h = h->anext) {
		if (!h->co.guest || h->state != CG_HOLDING)
			continue;
		struct nvs_msg m;
		/* The hint before WAITERS, as policy.c's inform_holder. */
		uint32_t mib = nvs_swap_mib(hint_with(g, h, &s));
		if ((h->client->hello_flags & NVS_HELLO_SWAP_HINT) && h->hint_sent_mib != mib) {
			h->hint_sent_mib = mib;
			nvs_msg_gpu(&m, NVS_MSG_SWAP_HINT, h->local_gpu, mib);
			nvs_core_send(h->client, &m);
			nvs_core_event("swap_hint", CG_EV ",\"mib\":%u,\"waiters\":%u", CG_ARGS(h),
				       mib, g->qlen);
		}
		uint32_t w = waiters_with(g, h, &s);
		if (h->waiters_sent != w) {
			h->waiters_sent = w;
			nvs_msg_gpu(&m, NVS_MSG_WAITERS, h->local_gpu, w);
			nvs_core_send(h->client, &m);
		}
	}
}

/* ---- timers: preemption, floor, guest quanta, drops ---- */

static void earliest(uint64_t *d, uint64_t t)
{
	if (t && (!*d || t < *d))
		*d = t;
}

/*
 * Drops members of class `victim_interactive` (in list order, those that
 * had their minimum slice) until w fits. act = 0 only computes when that
 * can happen. Returns the time at which it can (0: never / done).
 */
static uint64_t make_room(struct gpu *g, struct client_gpu *w, int victim_interactive,
			  uint64_t not_before, uint64_t now, int act, const char *why)
{
	uint64_t base = staying_sum(g), cap = nvs_gpu_capacity(g);
	uint64_t e = joining(w);
	if (base + e <= cap)
		return 0; /* room is on its way (drops pending) */
	uint64_t slice = (uint64_t)nvs_cosched_cfg.min_slice_ms * MS, t = not_before, freed = 0;
	struct client_gpu *v[NVS_MAX_GPUS * 4];
	unsigned nv = 0;
	for (struct client_gpu *h = g->ahead; h && base - freed + e > cap; h = h->anext) {
		if (h->state != CG_HOLDING || h->drop.sent || nvs_policy_pinned(h) ||
		    nvs_cosched_interactive(h, NULL) != victim_interactive)
			continue;
		if (nv == sizeof v / sizeof v[0])
			break;
		v[nv++] = h;
		freed += nvs_policy_expected_of(h);
		if (h->held_since_ns + slice > t)
			t = h->held_since_ns + slice;
	}
	if (base - freed + e > cap)
		return 0; /* the other class blocks it: it idles soon */
	if (now < t || !act)
		return t;
	for (unsigned i = 0; i < nv; i++)
		drop_member(g, v[i], w, now, why);
	return 0;
}

static uint64_t guest_timers(struct gpu *g, uint64_t now, int act)
{
	uint64_t d = 0;
	for (struct client_gpu *h = g->ahead; h; h = h->anext) {
		if (!h->co.guest || h->state != CG_HOLDING || !h->drop.sent)
			continue;
		if (act && now >= h->drop.deadline_ns) {
			/* The primary's revocation, but for the lock's turn: the
			 * guest leaves the set (counted, told, penalized). */
			nvs_policy_revoked(h, now);
			account(g, now);
			end_guest(g, h, now);
			continue;
		}
		earliest(&d, act ? nvs_policy_drop_resend(h, now) : nvs_policy_drop_due(h));
	}
	return d;
}

static uint64_t run_policy(struct gpu *g, uint64_t now, int act)
{
	uint64_t d = guest_timers(g, now, act);
	if (!nvs_cosched_active(g)) {
		/* Mode on, a quota or an unmanaged process took over: the set
		 * shrinks to the primary. */
		for (struct client_gpu *h = g->ahead; h; h = h->anext)
			if (h->co.guest && h->state == CG_HOLDING && !h->drop.sent) {
				if (act)
					drop_member(g, h, NULL, now, "overcommit");
				else
					earliest(&d, now);
			}
		return d;
	}
	uint64_t cap = nvs_gpu_capacity(g);
	/* A member grew after it was admitted: the newest guests leave. */
	while (staying_sum(g) > cap) {
		struct client_gpu *n = NULL;
		for (struct client_gpu *h = g->ahead; h; h = h->anext)
			if (h->co.guest && h->state == CG_HOLDING && !h->drop.sent &&
			    !nvs_policy_pinned(h) && (!n || h->held_since_ns > n->held_since_ns))
				n = h;
		if (!n)
			break;
		if (!act) {
			earliest(&d, now);
			break;
		}
		drop_member(g, n, NULL, now, "overcommit");
	}
	if (!g->qlen)
		return d;
	/* The first waiter that did not fit (fill() granted all that did). */
	struct client_gpu *w = g->qhead;
	int interactive = nvs_cosched_interactive(w, NULL);
	if (interactive) {
		/* A burst: batch members give way after the bound, if batch
		 * has had its floor (and the margin). */
		if (!may_give_way(g)) {
			earliest(&d, now + FLOOR_RECHECK_NS);
		} else {
			uint64_t nb = w->wait_since_ns + (uint64_t)nvs_cosched_cfg.preempt_ms * MS;
			earliest(&d, make_room(g, w, 0, nb, now, act, "interactive"));
		}
	} else if (!floor_ok(g)) {
		/* Batch below its floor: the bursts in its way give way. */
		earliest(&d, make_room(g, w, 1, now, now, act, "batch-floor"));
		earliest(&d, now + FLOOR_RECHECK_NS);
	}
	/* Guests get the quantum too when someone waits. */
	uint64_t tq = nvs_policy_tq_ns(g);
	for (struct client_gpu *h = g->ahead; h; h = h->anext) {
		if (!h->co.guest || h->state != CG_HOLDING || h->drop.sent)
			continue;
		if (now >= h->held_since_ns + tq) {
			if (act)
				drop_member(g, h, w, now, "tq-expired");
		} else {
			earliest(&d, h->held_since_ns + tq);
		}
	}
	/* The head may stop being overtaken (fill re-checks). */
	if (now - w->wait_since_ns < tq)
		earliest(&d, w->wait_since_ns + tq);
	return d;
}

static uint64_t nvs_cosched_deadline(struct gpu *g, uint64_t now)
{
	if (!nvs_cosched_active(g) && !g->co.guests)
		return 0;
	return run_policy(g, now, 0);
}

static void nvs_cosched_tick(struct gpu *g, uint64_t now)
{
	if (!nvs_cosched_active(g) && !g->co.guests)
		return;
	account(g, now);
	run_policy(g, now, 1);
	if (nvs_cosched_active(g))
		nvs_cosched_fill(g, now, 0);
}

/* nvs_cosched_active, with the layer's signature. */
static int active_of(const struct gpu *g)
{
	return nvs_cosched_active(g);
}

static const struct nvs_policy_layer cosched_layer = {
    .active = active_of,
    .fill = nvs_cosched_fill,
    .member_released = nvs_cosched_guest_released,
    .member_detach = nvs_cosched_guest_detach,
    .hold_ended = nvs_cosched_hold_ended,
    .end_members = nvs_cosched_end_guests,
    .queued = nvs_cosched_queued,
    .waiters = nvs_cosched_waiters,
    .hint_bytes = nvs_cosched_hint_bytes,
    .inform = nvs_cosched_inform,
    .next_deadline = nvs_cosched_deadline,
    .on_tick = nvs_cosched_tick,
};

void nvs_cosched_start(void)
{
	nvs_policy_set_layer(&cosched_layer);
}
