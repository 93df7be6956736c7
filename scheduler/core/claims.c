/*
 * The report gate (claims.h, docs/scheduler.md "Client claims"): the
 * per-connection budget of MEM_UPDATE and SWAP_STATS reports, with
 * coalescing, in front of policy.c. What a report may count for (the
 * clamp, the swap samples' medians) is bounds.c's.
 *
 * The budget is GCRA (a token bucket kept as one "theoretical arrival
 * time" tat): an event at `now` conforms when tat <= now + (burst - 1) *
 * interval, and then moves tat to max(tat, now) + interval. At most
 * burst + T / interval events conform in any interval T.
 */
#include "claims.h"

#include "bounds.h"
#include "log.h"
#include "policy.h"
#include "port.h"
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- report budget ---- */

#define PEND_MEM 1
#define PEND_SWAP 2

static unsigned npending; /* client_gpus with something kept */

static uint64_t report_interval_ns(void)
{
	return 1000000000ull / (S.cfg.report_rate ? S.cfg.report_rate : 1);
}

static uint64_t report_at(const struct client *cl)
{
	uint64_t iv = report_interval_ns(), slack = (uint64_t)(S.cfg.report_rate - 1) * iv;
	return cl->report_tat_ns > slack ? cl->report_tat_ns - slack : 0;
}

/* Takes one report from cl's budget if it has one. */
static int report_take(struct client *cl, uint64_t now)
{
	if (report_at(cl) > now)
		return 0;
	cl->report_tat_ns =
	    (cl->report_tat_ns > now ? cl->report_tat_ns : now) + report_interval_ns();
	return 1;
}

static void keep(struct client_gpu *cg, int what)
{
	if (!cg->pending)
		npending++;
	cg->pending |= what;
	cg->client->reports_coalesced++;
	cg->gpu->reports_coalesced++;
}

static void apply_mem(struct client_gpu *cg, uint64_t claimed, uint64_t now)
{
	cg->claimed = claimed;
	nvs_policy_mem_update(cg, nvs_bounds_clamp(cg, claimed), now);
}

void nvs_claims_mem_update(struct client_gpu *cg, uint64_t claimed, uint64_t now)
{
	if ((cg->pending & PEND_MEM) || !report_take(cg->client, now)) {
		/* Replaces what was kept: only the latest matters. */
		cg->pending_mem = claimed;
		keep(cg, PEND_MEM);
		return;
	}
	apply_mem(cg, claimed, now);
}

void nvs_claims_swap_stats(struct client_gpu *cg, const struct nvs_swap_stats *s, uint64_t now)
{
	/* Cumulative counters: the latest report holds all earlier ones. */
	if ((cg->pending & PEND_SWAP) || !report_take(cg->client, now)) {
		cg->pending_swap = *s;
		keep(cg, PEND_SWAP);
		return;
	}
	nvs_policy_swap_stats(cg, s);
}

void nvs_claims_forget(struct client_gpu *cg)
{
	if (cg->pending)
		npending--;
	cg->pending = 0;
}

uint64_t nvs_claims_next_deadline(uint64_t now)
{
	(void)now;
	if (!npending)
		return 0;
	uint64_t d = 0;
	for (const struct client *cl = S.clients; cl; cl = cl->next)
		for (unsigned i = 0; i < cl->ngpus; i++)
			if (cl->gpus[i]->pending) {
				uint64_t t = report_at(cl);
				if (!d || t < d)
					d = t;
				break;
			}
	return d;
}

void nvs_claims_tick(uint64_t now)
{
	if (!npending)
		return;
	for (struct client *cl = S.clients; cl; cl = cl->next)
		for (unsigned i = 0; i < cl->ngpus; i++) {
			struct client_gpu *cg = cl->gpus[i];
			if (!cg->pending)
				continue;
			/* Memory first: it may change the mode. */
			if ((cg->pending & PEND_MEM) && report_take(cl, now)) {
				cg->pending &= ~PEND_MEM;
				apply_mem(cg, cg->pending_mem, now);
			}
			if ((cg->pending & PEND_SWAP) && report_take(cl, now)) {
				cg->pending &= ~PEND_SWAP;
				nvs_policy_swap_stats(cg, &cg->pending_swap);
			}
			if (!cg->pending)
				npending--;
		}
}

/* ---- the core's timer ---- */

void nvs_core_tick(uint64_t now)
{
	nvs_claims_tick(now);
	nvs_policy_tick(now);
}

uint64_t nvs_core_next_deadline(uint64_t now)
{
	uint64_t a = nvs_claims_next_deadline(now), b = nvs_policy_next_deadline(now);
	return !a ? b : !b ? a : a < b ? a : b;
}
