/*
 * Bounds on what clients' word can do (bounds.h, docs/scheduler.md "Client
 * claims"): the allocation counted for a claim, the swap samples behind the
 * adaptive quantum (median speeds and times, the price of a hand-off, the
 * quantum's bound) and the mode-switch budget. policy.c asks; claims.c (the
 * report gate in front of policy.c) feeds the clamp; nothing here calls
 * back into either, so the core's calls go one way: claims -> policy ->
 * bounds.
 *
 * The mode-switch budget is GCRA (a token bucket kept as one "theoretical
 * arrival time" tat): an event at `now` conforms when tat <= now + (burst
 * - 1) * interval, and then moves tat to max(tat, now) + interval. At most
 * burst + T / interval events conform in any interval T.
 */
#include "bounds.h"

#include "log.h"
#include "parse.h"
#include "port.h"
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation clamps ---- */

uint64_t nvs_bounds_clamp(struct client_gpu *cg, uint64_t claimed)
{
	struct gpu *g = cg->gpu;
	uint64_t v = claimed;
	const char *by = NULL;
	int bit = 0;
	uint64_t lim = cg->mem_limit;
	if (lim && lim != NVS_NO_LIMIT && v > lim) {
		v = lim;
		by = "memory-limit";
		bit = 1;
	}
	uint64_t cap = nvs_gpu_capacity(g), f = S.cfg.oversub_factor;
	if (cap != UINT64_MAX && f && cap <= UINT64_MAX / f && v > cap * f) {
		v = cap * f;
		by = "capacity";
		bit = 2;
	}
	/* What NVML shows (unmanaged.c): a process without a context on the
	 * GPU has no memory there; a claim left unproven while it could run
	 * counts as the evidence. */
	int ctx = nvs_core_context(cg);
	if (ctx == 0 && v) {
		v = 0;
		by = "no-context";
		bit = 8;
	} else if (ctx == 1 && cg->ev.clamped && v > cg->ev.cap) {
		v = cg->ev.cap;
		by = "evidence";
		bit = 4;
	}
	if (!by)
		return v;
	g->claims_clamped++;
	if (!(cg->clamp_logged & bit)) {
		/* Once per client, GPU and cause: a client that keeps claiming
		 * too much is counted (claims_clamped), not logged again. */
		char a[32], b[32];
		cg->clamp_logged |= bit;
		NVS_WARN("client=%u pid=%d gpu=%d claims %s allocated: counted as %s (%s)",
			 cg->client->id, (int)cg->client->pid, g->index,
			 nvs_format_size(claimed, a, sizeof a), nvs_format_size(v, b, sizeof b),
			 by);
		nvs_core_event(
		    "claim_clamped",
		    "\"client\":%u,\"pid\":%d,\"gpu\":%d,\"claimed\":%llu,\"counted\":%llu,"
		    "\"by\":\"%s\"",
		    cg->client->id, (int)cg->client->pid, g->index, (unsigned long long)claimed,
		    (unsigned long long)v, by);
	}
	return v;
}

/* ---- swap median ---- */

static void ring_push(uint64_t *ring, unsigned *n, uint64_t v)
{
	/* *n counts every sample; the ring holds the last NVS_SWAP_SAMPLES. */
	ring[*n % NVS_SWAP_SAMPLES] = v;
	(*n)++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t ring_median(const uint64_t *ring, unsigned n)
{
	uint64_t v[NVS_SWAP_SAMPLES];
	unsigned k = n < NVS_SWAP_SAMPLES ? n : NVS_SWAP_SAMPLES;
	if (k == 0)
		return 0;
	memcpy(v, ring, k * sizeof *v);
	qsort(v, k, sizeof *v, cmp_u64);
	/* Even count: the lower middle (a forged high half does not move it). */
	return v[(k - 1) / 2];
}

/* The longest a swap of `bytes` may take to be believed: the bytes at
 * NVS_SWAP_FLOOR_BPS. */
static uint64_t swap_bound_ns(uint64_t bytes)
{
	if (bytes > UINT64_MAX / 1000000000ull)
		return UINT64_MAX;
	return bytes * 1000000000ull / NVS_SWAP_FLOOR_BPS;
}

/* One sample of a direction, if its evidence allows: one per hand-off the
 * scheduler saw (mark: the grants, or releases and revocations, when the
 * last one was taken), its bytes counted at most as the memory cg is
 * counted for on the GPU (a report of more does not make the link look
 * faster), its time cut to what those bytes allow; its speed kept too if
 * it moved enough to say something about the link. */
static void swap_take(struct client_gpu *cg, uint64_t ns, uint64_t bytes, uint64_t handoffs,
		      uint64_t *mark, struct swap_samples *d)
{
	struct gpu *g = cg->gpu;
	if (!ns)
		return;
	if (handoffs == *mark) {
		g->ev.swap_refused++; /* no hand-off of its since the last one */
		return;
	}
	*mark = handoffs;
	if (bytes > cg->allocated)
		bytes = cg->allocated;
	uint64_t b = swap_bound_ns(bytes);
	if (ns > b) {
		g->ev.swap_refused++;
		ns = b;
	}
	if (!ns)
		return;
	ring_push(d->time, &d->n, ns);
	if (bytes >= NVS_SWAP_RATE_MIN_BYTES && ns <= UINT64_MAX >> 30)
		ring_push(d->per_gib, &d->rate_n, (ns << 30) / bytes);
}

void nvs_bounds_swap_sample(struct client_gpu *cg, uint64_t in_ns, uint64_t in_bytes,
			    uint64_t out_ns, uint64_t out_bytes)
{
	struct gpu *g = cg->gpu;
	swap_take(cg, in_ns, in_bytes, cg->st.grants, &cg->ev.swap_in_mark, &g->swap_in_samples);
	swap_take(cg, out_ns, out_bytes, cg->st.releases + cg->st.revocations,
		  &cg->ev.swap_out_mark, &g->swap_out_samples);
}

/* A direction's median time once it has NVS_SWAP_MIN_SAMPLES samples, else
 * 0: one report, true or not, does not stretch the quantum. */
static uint64_t dir_median(const struct swap_samples *d)
{
	return d->n < NVS_SWAP_MIN_SAMPLES ? 0 : ring_median(d->time, d->n);
}

uint64_t nvs_bounds_swap_median(const struct gpu *g)
{
	return dir_median(&g->swap_in_samples) + dir_median(&g->swap_out_samples);
}

/* One direction of a hand-off: bytes at its median speed, else at the
 * other direction's, else its median time (bounds.h). */
static uint64_t dir_cost(const struct swap_samples *d, const struct swap_samples *other,
			 uint64_t bytes)
{
	const struct swap_samples *r = d->rate_n >= NVS_SWAP_MIN_SAMPLES ? d : other;
	if (r->rate_n < NVS_SWAP_MIN_SAMPLES)
		return dir_median(d);
	uint64_t per_gib = ring_median(r->per_gib, r->rate_n);
	uint64_t gib = bytes >> 30, rest = bytes & ((1ull << 30) - 1);
	if (per_gib && gib > UINT64_MAX / per_gib)
		return UINT64_MAX;
	return gib * per_gib + ((rest * per_gib) >> 30);
}

uint64_t nvs_bounds_handoff_ns(const struct gpu *g, uint64_t out_bytes, uint64_t in_bytes)
{
	uint64_t o = dir_cost(&g->swap_out_samples, &g->swap_in_samples, out_bytes);
	uint64_t i = dir_cost(&g->swap_in_samples, &g->swap_out_samples, in_bytes);
	return o > UINT64_MAX - i ? UINT64_MAX : o + i;
}

uint64_t nvs_bounds_tq_bound_ns(const struct gpu *g)
{
	return g->tq_ms * 1000000ull * (S.cfg.swap_tq_max_factor ? S.cfg.swap_tq_max_factor : 1);
}

/* ---- mode-switch budget ---- */

uint64_t nvs_bounds_switch_at(const struct gpu *g)
{
	uint64_t iv = (uint64_t)S.cfg.mode_dwell_ms * 1000000ull;
	uint64_t burst = S.cfg.mode_switch_burst ? S.cfg.mode_switch_burst : 1;
	uint64_t slack = (burst - 1) * iv;
	return g->switch_tat_ns > slack ? g->switch_tat_ns - slack : 0;
}

void nvs_bounds_switched(struct gpu *g, uint64_t now)
{
	uint64_t iv = (uint64_t)S.cfg.mode_dwell_ms * 1000000ull;
	g->switch_tat_ns = (g->switch_tat_ns > now ? g->switch_tat_ns : now) + iv;
}
