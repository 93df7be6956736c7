#include "status_json.h"

#include "core/bounds.h"
#include "conn.h"
#include "core/coschedule.h"
#include "gpus.h"
#include "health.h"
#include "k8s/k8s_watch.h"
#include "peer_limits.h"
#include "log.h"
#include "plog.h"
#include "core/policy.h"
#include "peer.h"
#include "podsock.h"
#include "core/quota.h"
#include "settings.h"
#include "core/state.h"
#include "unmanaged.h"

#include <unistd.h>

#include "nvs_version.h" /* generated: scripts/gen-version.sh */

static const char *state_name(const struct client_gpu *cg)
{
	switch (cg->state) {
	case CG_HOLDING:
		return "holding";
	case CG_WAITING:
		return "waiting";
	default:
		return cg->gpu->serialized ? "idle" : "running";
	}
}

/* JSON numbers are doubles: exact up to 2^53, plenty for bytes and ns. */
static void num(cJSON *o, const char *k, uint64_t v)
{
	cJSON_AddNumberToObject(o, k, (double)v);
}

static void limit(cJSON *o, const char *k, uint64_t v)
{
	if (v == NVS_NO_LIMIT)
		cJSON_AddNullToObject(o, k);
	else
		num(o, k, v);
}

static cJSON *stats(const struct lock_stats *st, uint64_t held_ns)
{
	cJSON *o = cJSON_CreateObject();
	num(o, "held_ns", held_ns);
	num(o, "grants", st->grants);
	num(o, "releases", st->releases);
	num(o, "idle_releases", st->idle_releases);
	num(o, "drops", st->drops);
	num(o, "revocations", st->revocations);
	num(o, "waits", st->waits);
	num(o, "wait_ns", st->wait_ns);
	cJSON *h = cJSON_AddArrayToObject(o, "wait_hist");
	for (unsigned i = 0; i < NVS_WAIT_BUCKETS; i++)
		cJSON_AddItemToArray(h, cJSON_CreateNumber((double)st->wait_hist[i]));
	num(o, "drain_ns", st->drain_ns);
	num(o, "drain_max_ns", st->drain_max_ns);
	return o;
}

static cJSON *who(const struct client_gpu *cg)
{
	cJSON *o = cJSON_CreateObject();
	num(o, "client", cg->client->id);
	num(o, "pid", (uint64_t)cg->client->pid);
	return o;
}

static cJSON *gpu_json(const struct gpu *g, uint64_t now)
{
	cJSON *o = cJSON_CreateObject();
	num(o, "index", (uint64_t)g->index);
	cJSON_AddStringToObject(o, "uuid", g->uuid);
	cJSON_AddStringToObject(o, "name", g->name);
	cJSON_AddBoolToObject(o, "nvml", g->from_nvml);
	cJSON_AddStringToObject(o, "mode", nvs_mode_name(g->mode));
	cJSON_AddBoolToObject(o, "serialized", g->serialized);
	num(o, "tq_ms", g->tq_ms);
	num(o, "tq_effective_ms", nvs_policy_tq_ns(g) / 1000000ull);
	uint64_t cap = nvs_gpu_capacity(g);
	limit(o, "capacity", cap);
	cJSON_AddBoolToObject(o, "capacity_override", g->capacity_override != 0);
	num(o, "total_memory", g->total_mem);
	num(o, "allocated", g->allocated_sum);
	num(o, "expected", nvs_policy_expected(g));
	num(o, "clients", g->nattached);
	if (g->holder) {
		cJSON *h = who(g->holder);
		num(h, "held_ns", now - g->holder->held_since_ns);
		cJSON_AddBoolToObject(h, "drop_sent", g->holder->drop.sent);
		cJSON_AddItemToObject(o, "holder", h);
	} else {
		cJSON_AddNullToObject(o, "holder");
	}
	cJSON *q = cJSON_AddArrayToObject(o, "queue");
	for (const struct client_gpu *cg = g->qhead; cg; cg = cg->qnext) {
		cJSON *w = who(cg);
		num(w, "waiting_ns", now - cg->wait_since_ns);
		cJSON_AddItemToArray(q, w);
	}
	/* Co-scheduling (docs/scheduler.md): who runs now and why. */
	cJSON_AddBoolToObject(o, "coschedule", nvs_cosched_active(g));
	cJSON *rs = cJSON_AddArrayToObject(o, "running_set");
	for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext) {
		if (cg->state != CG_HOLDING)
			continue;
		cJSON *r = who(cg);
		cJSON_AddStringToObject(r, "role", cg == g->holder ? "primary" : "guest");
		cJSON_AddStringToObject(r, "why", cg->co.why ? cg->co.why : "first");
		cJSON_AddStringToObject(r, "class", nvs_cosched_class_name(cg));
		num(r, "expected", nvs_policy_expected_of(cg));
		cJSON_AddItemToArray(rs, r);
	}
	cJSON *pr = cJSON_AddObjectToObject(o, "preemptions");
	num(pr, "interactive", g->co.preempt_interactive);
	num(pr, "batch_floor", g->co.preempt_floor);
	num(pr, "tq_expired", g->co.preempt_tq);
	num(pr, "overcommit", g->co.preempt_fit);
	num(o, "batch_share_pct", nvs_cosched_batch_share(g));
	num(o, "handoffs", g->handoffs);
	num(o, "revocations", g->st.revocations);
	num(o, "mode_switches", g->mode_switches);
	/* Hostile load (docs/scheduler.md "Client claims", "Fairness"). */
	num(o, "mode_switches_deferred", g->switches_deferred);
	num(o, "claims_clamped", g->claims_clamped);
	num(o, "reports_coalesced", g->reports_coalesced);
	num(o, "revoke_penalties", g->revoke_penalties);
	cJSON *sw = cJSON_AddObjectToObject(o, "swap");
	num(sw, "bytes_in", g->swap_bytes_in);
	num(sw, "bytes_out", g->swap_bytes_out);
	num(sw, "ns_in", g->swap_ns_in);
	num(sw, "ns_out", g->swap_ns_out);
	num(sw, "last_in_ns", g->swap_last_in_ns);
	num(sw, "last_out_ns", g->swap_last_out_ns);
	/* What the adaptive quantum uses: median recent in + out. */
	num(sw, "median_ns", nvs_bounds_swap_median(g));
	num(sw, "handoff_ns", nvs_policy_handoff_ns(g));
	/* Reports not taken (no hand-off of theirs) or cut to their bytes. */
	num(sw, "samples_refused", g->ev.swap_refused);
	/* NVML's used memory that no listed process accounts for. */
	if (g->ev.ok)
		num(o, "unattributed_memory", g->ev.unattributed);
	else
		cJSON_AddNullToObject(o, "unattributed_memory");
	cJSON_AddStringToObject(o, "policy", g->hook ? g->hook->name : "fcfs");
	/* Where its mode, TQ and capacity come from (settings.h). */
	cJSON_AddItemToObject(o, "sources", nvs_settings_gpu_sources(g->index));
	uint64_t held = g->st.held_ns + (g->holder ? now - g->holder->held_since_ns : 0);
	cJSON_AddItemToObject(o, "stats", stats(&g->st, held));
	return o;
}

static cJSON *client_json(const struct client *cl, uint64_t now)
{
	cJSON *o = cJSON_CreateObject();
	num(o, "id", cl->id);
	num(o, "pid", (uint64_t)cl->pid);
	num(o, "uid", (uint64_t)cl->uid);
	/* Identity as pinned at connect (peer.h). */
	cJSON *t = cJSON_AddObjectToObject(o, "tenant");
	cJSON_AddStringToObject(t, "kind", nvs_tenant_kind_name(cl->tenant));
	cJSON_AddStringToObject(t, "source", nvs_id_source_name(cl->id_source));
	/* false: a kernel without SO_PEERPIDFD (pid reuse not excluded) */
	cJSON_AddBoolToObject(t, "pidfd", cl->id_pidfd);
	if (cl->tenant == NVS_TENANT_UNKNOWN && cl->unknown_why)
		cJSON_AddStringToObject(t, "why", cl->unknown_why);
	/* What HELLO said: claims, for people to read, never identity. */
	num(o, "claimed_pid", cl->reported_pid);
	cJSON_AddStringToObject(o, "claimed_name", cl->name);
	num(o, "connected_ns", now - cl->connected_ns);
	num(o, "core_limit", cl->hello_core_limit);
	limit(o, "mem_limit", cl->hello_mem_limit);
	/* Its allocations are device memory: counted as pinned (policy.h). */
	cJSON_AddBoolToObject(o, "device_memory", cl->device_memory);
	/* Its Pod socket's ceiling (a DRA claim's consumed capacity). */
	if (cl->ceil_core || cl->ceil_mem) {
		cJSON *ce = cJSON_AddObjectToObject(o, "ceiling");
		if (cl->ceil_core)
			num(ce, "core_limit", cl->ceil_core);
		else
			cJSON_AddNullToObject(ce, "core_limit");
		if (cl->ceil_mem)
			num(ce, "mem_limit", cl->ceil_mem);
		else
			cJSON_AddNullToObject(ce, "mem_limit");
	} else {
		cJSON_AddNullToObject(o, "ceiling");
	}
	/* What it reported of runs without the gate (UNGATED: a claim). */
	cJSON *ug = cJSON_AddObjectToObject(o, "ungated");
	num(ug, "runs", cl->ungated_runs);
	cJSON_AddNumberToObject(ug, "seconds", (double)cl->ungated_ns / 1e9);
	/* (a Pod socket's Pod may be named before the watch gives its UID) */
	if (cl->pod_uid[0] || cl->pod_name[0]) {
		/* From the cgroup and the API watch, never from the client
		 * (tenant unknown: the Pod its pid was last seen in). */
		cJSON *p = cJSON_AddObjectToObject(o, "pod");
		cJSON_AddStringToObject(p, "uid", cl->pod_uid);
		cJSON_AddStringToObject(p, "name", cl->pod_name);
		cJSON_AddStringToObject(p, "namespace", cl->pod_namespace);
		if (cl->annot_core)
			num(p, "core_limit", cl->annot_core);
		else
			cJSON_AddNullToObject(p, "core_limit");
		if (cl->has_annot_mem)
			num(p, "mem_limit", cl->annot_mem);
		else
			cJSON_AddNullToObject(p, "mem_limit");
		/* spec: nvshare.com/gpu-memory x unit */
		if (cl->pod_mem_request)
			num(p, "mem_request", cl->pod_mem_request);
		else
			cJSON_AddNullToObject(p, "mem_request");
	} else {
		cJSON_AddNullToObject(o, "pod");
	}
	cJSON *gs = cJSON_AddArrayToObject(o, "gpus");
	for (unsigned i = 0; i < cl->ngpus; i++) {
		const struct client_gpu *cg = cl->gpus[i];
		cJSON *x = cJSON_CreateObject();
		num(x, "gpu", (uint64_t)cg->gpu->index);
		num(x, "local_gpu", cg->local_gpu);
		num(x, "allocated", cg->allocated);
		num(x, "claimed", cg->claimed);
		cJSON_AddStringToObject(x, "state", state_name(cg));
		const char *csrc;
		cJSON_AddStringToObject(
		    x, "class", nvs_cosched_interactive(cg, &csrc) ? "interactive" : "batch");
		cJSON_AddStringToObject(x, "class_source", csrc);
		if (cg->state == CG_HOLDING)
			cJSON_AddStringToObject(x, "role",
						cg == cg->gpu->holder ? "primary" : "guest");
		num(x, "held_ns", nvs_policy_held_ns(cg, now));
		cJSON *l = cJSON_AddObjectToObject(x, "limits");
		num(l, "core_limit", cg->core_limit);
		limit(l, "mem_limit", cg->mem_limit);
		cJSON_AddItemToObject(x, "stats", stats(&cg->st, nvs_policy_held_ns(cg, now)));
		/* Compute quota (docs/quotas.md): shares are of the window. */
		struct nvs_quota_view qv;
		nvs_quota_view(cg, now, &qv);
		cJSON *qj = cJSON_AddObjectToObject(x, "quota");
		num(qj, "limit", qv.limit);
		cJSON_AddNumberToObject(qj, "effective_pct", qv.effective_pct);
		num(qj, "window_ns", qv.window_ns);
		num(qj, "window_elapsed_ns", qv.window_elapsed_ns);
		num(qj, "used_ns", qv.used_ns);
		num(qj, "last_used_ns", qv.last_used_ns);
		num(qj, "billed_ns", qv.billed_ns);
		cJSON_AddNumberToObject(qj, "share_current",
					(double)qv.used_ns / (double)qv.window_ns);
		cJSON_AddNumberToObject(qj, "share_last",
					(double)qv.last_used_ns / (double)qv.window_ns);
		cJSON_AddBoolToObject(qj, "throttled", qv.throttled);
		num(qj, "throttled_ns", qv.throttled_ns);
		/* What NVML shows of it (docs/security.md "Claims checked
		 * against NVML"); null before a detection pass covered it. */
		if (cg->ev.checked) {
			cJSON *ev = cJSON_AddObjectToObject(x, "evidence");
			cJSON_AddBoolToObject(ev, "context", cg->ev.listed);
			num(ev, "nvml_used", cg->ev.used);
			num(ev, "nvml_highest", cg->ev.hwm);
			limit(ev, "allows", cg->ev.cap);
			cJSON_AddBoolToObject(ev, "unproven", cg->ev.unproven);
			cJSON_AddBoolToObject(ev, "clamped", cg->ev.clamped);
			num(ev, "ungated_passes", cg->ev.ungated);
		} else {
			cJSON_AddNullToObject(x, "evidence");
		}
		cJSON *sw = cJSON_AddObjectToObject(x, "swap");
		num(sw, "bytes_in", cg->swap_bytes_in);
		num(sw, "bytes_out", cg->swap_bytes_out);
		num(sw, "ns_in", cg->swap_ns_in);
		num(sw, "ns_out", cg->swap_ns_out);
		/* The client's word (SWAP_PATHS): where its memory goes when it
		 * swaps, and the pinned host staging it holds for that. */
		num(sw, "fast_bytes", cg->paths.fast);
		num(sw, "prefetch_bytes", cg->paths.prefetch);
		num(sw, "pinned_bytes", cg->paths.pinned);
		num(sw, "staging_bytes", cg->paths.staging);
		num(sw, "staging_used_bytes", cg->paths.staging_used);
		cJSON_AddBoolToObject(sw, "staging_pin_failed",
				      (cg->paths.flags & NVS_SWAP_PATHS_PIN_FAILED) != 0);
		cJSON_AddBoolToObject(sw, "trap_mode",
				      (cg->paths.flags & NVS_SWAP_PATHS_TRAP) != 0);
		cJSON_AddItemToArray(gs, x);
	}
	return o;
}

cJSON *nvs_status_json(uint64_t now)
{
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "version", NVS_VERSION_FULL);
	num(root, "protocol", NVS_PROTO_VERSION);
	cJSON_AddStringToObject(root, "view", "admin");
	num(root, "pid", (uint64_t)getpid());
	cJSON_AddStringToObject(root, "socket", S.sock_path);
	cJSON_AddStringToObject(root, "admin_socket", S.admin_sock_path);
	num(root, "uptime_ns", now - S.start_ns);
	/* The snapshot's CLOCK_MONOTONIC time: clients and tests can line
	 * cumulative counters (billed_ns, held_ns) up with their own clock. */
	num(root, "now_ns", now);
	/* Stalls of the event loop (health.c): an interval that holds one
	 * was not scheduled throughout (quota tests discard it). */
	struct nvs_health_stalls hs;
	nvs_health_stalls(&hs);
	cJSON *lp = cJSON_AddObjectToObject(root, "loop");
	num(lp, "stall_threshold_ms", nvs_health_stall_ms);
	num(lp, "stalls", hs.count);
	num(lp, "stalled_ns", hs.stalled_ns);
	num(lp, "longest_stall_ns", hs.longest_ns);
	cJSON_AddBoolToObject(root, "nvml", S.nvml_ok);
	/* Every setting: value, text, source (settings.def; docs/scheduler.md
	 * "Where a setting comes from"). "defaults" and "limits" below are
	 * the older views of some of them, kept for existing readers. */
	cJSON_AddItemToObject(root, "settings", nvs_settings_json());
	cJSON *d = cJSON_AddObjectToObject(root, "defaults");
	cJSON_AddStringToObject(d, "mode", nvs_mode_name(S.cfg.mode));
	num(d, "tq_ms", S.cfg.tq_ms);
	num(d, "memory_reserve", S.cfg.reserve);
	num(d, "idle_release_ms", S.cfg.idle_release_ms);
	num(d, "drop_grace_ms", S.cfg.drop_grace_ms);
	cJSON_AddBoolToObject(d, "coschedule", nvs_cosched_cfg.enabled);
	num(d, "preempt_ms", nvs_cosched_cfg.preempt_ms);
	num(d, "min_slice_ms", nvs_cosched_cfg.min_slice_ms);
	num(d, "batch_floor_percent", nvs_cosched_cfg.batch_floor_pct);
	num(d, "compute_window_ms", S.cfg.q_window_ms);
	num(d, "quota_sample_interval_ms", S.cfg.q_sample_ms);
	num(d, "quota_carryover_percent", S.cfg.q_carry_pct);
	num(d, "drop_tail_billing_percent", S.cfg.q_tail_pct);
	cJSON *b = cJSON_AddArrayToObject(root, "wait_buckets_le_us");
	for (unsigned i = 0; i < NVS_WAIT_BUCKETS - 1; i++)
		cJSON_AddItemToArray(b, cJSON_CreateNumber((double)nvs_wait_bucket_le_us[i]));
	cJSON *k = cJSON_AddObjectToObject(root, "kube");
	cJSON_AddStringToObject(k, "watch", nvs_k8s_state());
	num(k, "pods", nvs_k8s_npods());
	cJSON *c = cJSON_AddObjectToObject(root, "connections");
	num(c, "open", conn_count());
	num(c, "accepted", S.conns_accepted);
	num(c, "closed_malformed", S.conns_closed_bad);
	num(c, "closed_not_reading", S.conns_closed_slow);
	num(c, "refused_no_fd", S.accept_refused);
	num(c, "accept_pauses", S.accept_pauses);
	num(c, "socket_recreated", S.sock_recreated);
	/* Bounds (peer_limits.h): what hostile peers were refused or cut. */
	num(c, "refused_tenant_limit", nvs_limits_stats.refused_tenant);
	num(c, "handshake_timeouts", nvs_limits_stats.handshake_timeouts);
	num(c, "buffer_budget_cuts", nvs_limits_stats.budget_cuts);
	num(c, "accept_rate_pauses", nvs_limits_stats.rate_paused);
	num(c, "accept_rate_parked", nvs_limits_stats.rate_parked);
	num(c, "accept_rate_refusals", nvs_limits_stats.refused_rate);
	num(c, "idle_client_cuts", nvs_limits_stats.idle_cuts);
	num(c, "fd_pressure_closes", nvs_limits_stats.fd_evictions);
	num(c, "pod_sockets", nvs_podsock_count());
	/* Clients' reports of runs without the gate, by reason. */
	cJSON *ug = cJSON_AddObjectToObject(root, "ungated");
	for (unsigned r = 1; r <= NVS_UNGATED_REASONS; r++) {
		cJSON *e = cJSON_AddObjectToObject(ug, nvs_ungated_reason_name(r));
		num(e, "runs", S.ungated_runs[r]);
		cJSON_AddNumberToObject(e, "seconds", (double)S.ungated_ns[r] / 1e9);
	}
	num(c, "admin_from_reserve", nvs_limits_stats.reserve_accepts);
	num(c, "buffered_bytes", nvs_limits_stats.buffered);
	num(c, "buffered_max_bytes", nvs_limits_stats.buffered_max);
	cJSON *lim = cJSON_AddObjectToObject(root, "limits");
	num(lim, "max_conns_per_tenant", nvs_limits_cfg.max_conns_per_tenant);
	num(lim, "handshake_timeout_ms", nvs_limits_cfg.handshake_ms);
	num(lim, "accept_rate", nvs_limits_cfg.accept_rate);
	num(lim, "max_idle_clients_per_tenant", nvs_limits_cfg.max_idle_per_tenant);
	num(lim, "conn_buffer_budget", nvs_limits_cfg.buffer_budget);
	num(lim, "log_rate", nvs_plog_rate);
	num(lim, "log_lines_suppressed", nvs_plog_suppressed_total);
	num(lim, "log_lines_dropped", nvs_log_dropped());
	cJSON *gs = cJSON_AddArrayToObject(root, "gpus");
	for (unsigned i = 0; i < S.ngpus; i++)
		cJSON_AddItemToArray(gs, gpu_json(&S.gpus[i], now));
	cJSON *cs = cJSON_AddArrayToObject(root, "clients");
	/* Oldest first: the list is kept newest first. */
	const struct client *last = S.clients;
	while (last && last->next)
		last = last->next;
	for (const struct client *cl = last; cl; cl = cl->prev)
		cJSON_AddItemToArray(cs, client_json(cl, now));
	/* GPU processes without an nvshare connection: admin view only. */
	cJSON_AddItemToObject(root, "unmanaged", nvs_unmanaged_json(now));
	return root;
}

/* What a tenant may know about a GPU: what it is and how it is run. Not
 * who else is on it, what they allocated, or who holds or waits (the
 * tenant's own clients' lock state says only that someone does). */
static cJSON *gpu_tenant_json(const struct gpu *g)
{
	cJSON *o = cJSON_CreateObject();
	num(o, "index", (uint64_t)g->index);
	cJSON_AddStringToObject(o, "uuid", g->uuid);
	cJSON_AddStringToObject(o, "name", g->name);
	cJSON_AddStringToObject(o, "mode", nvs_mode_name(g->mode));
	cJSON_AddBoolToObject(o, "serialized", g->serialized);
	num(o, "tq_ms", g->tq_ms);
	num(o, "total_memory", g->total_mem);
	return o;
}

cJSON *nvs_status_tenant_json(uint64_t now, const struct nvs_peer *viewer,
			      const struct client *self)
{
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "version", NVS_VERSION_FULL);
	num(root, "protocol", NVS_PROTO_VERSION);
	cJSON_AddStringToObject(root, "view", "tenant");
	cJSON_AddStringToObject(root, "socket", S.sock_path);
	cJSON *t = cJSON_AddObjectToObject(root, "tenant");
	cJSON_AddStringToObject(t, "kind", nvs_tenant_kind_name(viewer->kind));
	if (viewer->kind == NVS_TENANT_POD)
		cJSON_AddStringToObject(t, "pod_uid", viewer->pod_uid);
	else if (viewer->kind == NVS_TENANT_UID)
		num(t, "uid", (uint64_t)viewer->uid);
	else if (viewer->unknown_why)
		cJSON_AddStringToObject(t, "why", viewer->unknown_why);
	cJSON *gs = cJSON_AddArrayToObject(root, "gpus");
	for (unsigned i = 0; i < S.ngpus; i++)
		cJSON_AddItemToArray(gs, gpu_tenant_json(&S.gpus[i]));
	cJSON *cs = cJSON_AddArrayToObject(root, "clients");
	const struct client *last = S.clients;
	while (last && last->next)
		last = last->next;
	for (const struct client *cl = last; cl; cl = cl->prev)
		/* An unknown viewer belongs to no tenant: it sees only the
		 * client of its own connection (if it registered one). */
		if (cl == self || nvs_peer_same_tenant(viewer, cl->tenant, cl->uid, cl->pod_uid))
			cJSON_AddItemToArray(cs, client_json(cl, now));
	return root;
}
