#include "clients.h"
#include "peer_limits.h"

#include "core/bounds.h"
#include "core/claims.h"
#include "conn.h"
#include "devmem.h"
#include "clock.h"
#include "core/port.h"
#include "core/registry.h"
#include "events.h"
#include "core/fairness.h"
#include "gpus.h"
#include "loop.h"
#include "log.h"
#include "parse.h"
#include "k8s/pod_identity.h"
#include "core/limit_resolve.h"
#include "core/policy.h"
#include "state_file.h"
#include "unmanaged.h"
#include "core/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nvs_client_send(struct client *cl, const struct nvs_msg *m)
{
	if (cl->conn)
		conn_send(cl->conn, m);
}

/* ---- the decision core's port (core/port.h) ---- */

static void port_send(void *ctx, struct client *cl, const struct nvs_msg *m)
{
	(void)ctx;
	nvs_client_send(cl, m);
}

static void port_event(void *ctx, const char *name, const char *fields)
{
	(void)ctx;
	nvs_event(name, "%s", fields);
}

static int port_context(void *ctx, struct client_gpu *cg)
{
	(void)ctx;
	return nvs_unmanaged_context(cg);
}

void nvs_clients_start(void)
{
	static const struct nvs_core_port port = {
	    .send = port_send,
	    .event = port_event,
	    .context = port_context,
	};
	nvs_core_set_port(&port);
	nvs_loop_timer(NVS_LOOP_DECIDE, nvs_core_tick, nvs_core_next_deadline);
}

int nvs_client_set_limits_from(struct client *cl, enum nvs_limit_src src, uint32_t core,
			       uint64_t mem)
{
	return nvs_limits_set_from(cl, src, core, mem, nvs_now_ns());
}

static struct client_gpu *find_gpu(struct client *cl, uint32_t local_gpu)
{
	for (unsigned i = 0; i < cl->ngpus; i++)
		if (cl->gpus[i]->local_gpu == local_gpu)
			return cl->gpus[i];
	return NULL;
}

/* Program names travel into logs and the status view: keep them
 * printable. */
static void sanitize(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			*s = '?';
}

static void hello(struct conn *c, const struct nvs_hello *h)
{
	if (c->kind != CONN_NEW) {
		conn_reason(c, "second-hello");
		conn_doom(c, "second HELLO on one connection");
		return;
	}
	struct client *cl = calloc(1, sizeof *cl);
	if (!cl) {
		conn_reason(c, "out-of-memory");
		conn_doom(c, "out of memory");
		return;
	}
	c->kind = CONN_CLIENT;
	c->client = cl;
	cl->conn = c;
	conn_sync_client(c); /* its flags (core/port.h) */
	cl->id = ++S.next_client_id;
	/* Identity as pinned at accept (peer.h); HELLO's pid and name are
	 * kept as claims only. */
	cl->pid = c->peer.pid;
	cl->uid = c->peer.uid;
	cl->tenant = c->peer.kind;
	cl->id_source = c->peer.source;
	cl->unknown_why = c->peer.unknown_why;
	cl->id_pidfd = c->peer.pidfd_checked;
	snprintf(cl->pod_uid, sizeof cl->pod_uid, "%s", c->peer.pod_uid);
	/* A Pod socket's binding names its Pod (podsock.h); the watch may
	 * not have named its UID yet (pod_identity.c). */
	snprintf(cl->pod_namespace, sizeof cl->pod_namespace, "%s", c->peer.pod_ns);
	snprintf(cl->pod_name, sizeof cl->pod_name, "%s", c->peer.pod_name);
	snprintf(cl->cg_pod_uid, sizeof cl->cg_pod_uid, "%s", c->peer.cg_pod_uid);
	cl->ceil_core = c->peer.ceil_core;
	cl->ceil_mem = c->peer.ceil_mem;
	cl->reported_pid = h->client_pid;
	snprintf(cl->name, sizeof cl->name, "%s", h->name);
	sanitize(cl->name);
	/* Out-of-range core limits mean "none", as an unset variable. */
	cl->hello_core_limit = (h->core_limit >= 1 && h->core_limit <= 100) ? h->core_limit : 100;
	cl->hello_mem_limit = h->mem_limit ? h->mem_limit : NVS_NO_LIMIT;
	cl->hello_flags = h->flags;
	cl->device_memory = (h->flags & NVS_HELLO_DEVICE_MEMORY) != 0;
	cl->connected_ns = nvs_now_ns();
	nvs_core_client_add(cl);      /* S.clients and its tenant (core/registry.h) */
	nvs_limits_client_idle(c, 1); /* no GPU yet: bounded per tenant (peer_limits.h) */
	nvs_pod_identify(cl);	      /* the Pod's name and limits, or unknown-tenant limits */
	nvs_state_apply_client(cl);   /* limits nvsharectl set for its Pod (state file) */

	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_WELCOME;
	m.u.welcome.client_id = cl->id;
	m.u.welcome.idle_release_ms = S.cfg.idle_release_ms;
	conn_send(c, &m);
	if (h->flags & NVS_HELLO_PING) {
		/* "I answer PINGs": only now may the client send them. */
		nvs_msg_gpu(&m, NVS_MSG_PONG, 0, 0);
		conn_send(c, &m);
	}
	if (h->flags & NVS_HELLO_LIMITS) {
		/* "Which limits do you enforce?": only now may it say. */
		nvs_msg_gpu(&m, NVS_MSG_LIMITS_ASK, 0, 0);
		conn_send(c, &m);
	}
	if (h->flags & NVS_HELLO_UNGATED) {
		/* "Tell me when you ran ungated": only now may it. */
		nvs_msg_gpu(&m, NVS_MSG_UNGATED_ASK, 0, 0);
		conn_send(c, &m);
	}
	if (h->flags & NVS_HELLO_SWAP_PATHS) {
		/* "Tell me your swap paths": only now may it send them. */
		nvs_msg_gpu(&m, NVS_MSG_SWAP_PATHS_OK, 0, 0);
		conn_send(c, &m);
	}
	nvs_devmem_welcomed(cl); /* MEMORY_MODE for a device-memory Pod */
	char b[32];
	NVS_INFO("HELLO client=%u pid=%d uid=%d tenant=%s claimed_name=\"%s\" core_limit=%u "
		 "mem_limit=%s",
		 cl->id, (int)cl->pid, (int)cl->uid, nvs_tenant_kind_name(cl->tenant), cl->name,
		 cl->hello_core_limit,
		 cl->hello_mem_limit == NVS_NO_LIMIT
		     ? "none"
		     : nvs_format_size(cl->hello_mem_limit, b, sizeof b));
	char name[2 * sizeof cl->name + 8], tenant[64], tj[2 * sizeof tenant + 8];
	nvs_event("hello",
		  "\"client\":%u,\"pid\":%d,\"uid\":%d,\"name\":%s,\"tenant\":%s,"
		  "\"claimed_pid\":%d",
		  cl->id, (int)cl->pid, (int)cl->uid, nvs_json_str(cl->name, name, sizeof name),
		  nvs_json_str(nvs_fair_tenant_label(cl, tenant, sizeof tenant), tj, sizeof tj),
		  (int)cl->reported_pid); /* display only: the claim */
}

/* UNGATED: the client ran without the gate (docs/client-lock.md "Failure
 * behaviour") and says so once it is connected again. Statistics: counted
 * (status, metrics, an event, a warning), never used for anything else;
 * one report per reason and connection, values bounded. */
static void ungated(struct client *cl, const struct nvs_ungated *u)
{
	if (!u->reason || u->reason > NVS_UNGATED_REASONS || !u->runs ||
	    (cl->ungated_reported & (1u << u->reason)))
		return;
	cl->ungated_reported |= 1u << u->reason;
	uint64_t runs = u->runs > 1000000u ? 1000000u : u->runs;
	uint64_t ns =
	    u->ns > 86400ull * 1000000000ull * 365 ? 86400ull * 1000000000ull * 365 : u->ns;
	cl->ungated_runs += runs;
	cl->ungated_ns += ns;
	S.ungated_runs[u->reason] += runs;
	S.ungated_ns[u->reason] += ns;
	const char *why = nvs_ungated_reason_name(u->reason);
	NVS_WARN("client=%u pid=%d ran ungated %llu time(s), %.3f s in all, before it was "
		 "scheduled again: %s",
		 cl->id, (int)cl->pid, (unsigned long long)runs, (double)ns / 1e9, why);
	nvs_event("ungated", "\"client\":%u,\"pid\":%d,\"reason\":\"%s\",\"runs\":%llu,\"ms\":%.3f",
		  cl->id, (int)cl->pid, why, (unsigned long long)runs, (double)ns / 1e6);
}

static void attach(struct conn *c, struct client *cl, const struct nvs_attach_gpu *a)
{
	struct client_gpu *cg = find_gpu(cl, a->local_gpu);
	if (cg) {
		/* Re-registration of the same device: only memory may change. */
		if (strcmp(cg->gpu->uuid, a->uuid)) {
			conn_reason(c, "bad-attach");
			conn_doom(c, "ATTACH_GPU %u: UUID %s differs from the attached %s",
				  a->local_gpu, a->uuid, cg->gpu->uuid);
			return;
		}
		/* A MEM_UPDATE in effect: the same budget and clamp. */
		if (a->total_mem != cg->reported_total) {
			cg->reported_total = a->total_mem;
			nvs_gpu_learned_memory(cg->gpu);
		}
		nvs_claims_mem_update(cg, a->allocated, nvs_now_ns());
		nvs_policy_resend_mode(cg); /* the client may have reset */
		return;
	}
	if (cl->ngpus >= NVS_MAX_GPUS) {
		conn_reason(c, "bad-attach");
		conn_doom(c, "more than %d GPUs attached", NVS_MAX_GPUS);
		return;
	}
	const char *why = NULL;
	struct gpu *g = nvs_gpu_for_attach(a->uuid, a->total_mem, cl, &why);
	if (!g) {
		/* The UUID is the peer's: log.c keeps it on one line. */
		conn_reason(c, "bad-attach");
		conn_doom(c, "ATTACH_GPU %u: GPU \"%s\" refused: %s", a->local_gpu, a->uuid, why);
		return;
	}
	for (unsigned i = 0; i < cl->ngpus; i++)
		if (cl->gpus[i]->gpu == g) {
			conn_reason(c, "bad-attach");
			conn_doom(c, "ATTACH_GPU %u: GPU %s already attached as %u", a->local_gpu,
				  a->uuid, cl->gpus[i]->local_gpu);
			return;
		}
	cg = calloc(1, sizeof *cg);
	if (!cg) {
		conn_reason(c, "out-of-memory");
		conn_doom(c, "out of memory");
		return;
	}
	cg->client = cl;
	cg->gpu = g;
	cg->local_gpu = a->local_gpu;
	cg->claimed = a->allocated;
	cg->reported_total = a->total_mem;
	nvs_client_update_limits(cg);
	cg->allocated = nvs_bounds_clamp(cg, cg->claimed);
	cl->gpus[cl->ngpus++] = cg;
	if (cl->ngpus == 1)
		nvs_limits_client_idle(cl->conn, 0);
	char b[32];
	NVS_INFO("ATTACH_GPU client=%u pid=%d gpu=%d cuda_dev=%u allocated=%s", cl->id,
		 (int)cl->pid, g->index, a->local_gpu, nvs_format_size(a->allocated, b, sizeof b));
	nvs_event("attach",
		  "\"client\":%u,\"pid\":%d,\"gpu\":%d,\"cuda_dev\":%u,\"allocated\":%llu", cl->id,
		  (int)cl->pid, g->index, a->local_gpu, (unsigned long long)a->allocated);
	nvs_policy_attach(cg, nvs_now_ns());
	nvs_gpu_learned_memory(g);
	if (cl->core_override || cl->has_mem_override || cl->annot_core || cl->has_annot_mem ||
	    cl->pod_mem_request || cl->ceil_core || cl->ceil_mem)
		nvs_client_send_limits(cg);
}

void nvs_client_msg(struct conn *c, const struct nvs_msg *m)
{
	if (m->type == NVS_MSG_HELLO) {
		hello(c, &m->u.hello);
		return;
	}
	struct client *cl = c->client;
	if (!cl) {
		conn_reason(c, "before-hello");
		conn_doom(c, "%s before HELLO", nvs_msg_type_name(m->type));
		return;
	}
	if (m->type == NVS_MSG_ATTACH_GPU) {
		attach(c, cl, &m->u.attach);
		return;
	}
	if (m->type == NVS_MSG_UNGATED) {
		ungated(cl, &m->u.ungated);
		return;
	}
	if (m->type == NVS_MSG_PING) {
		/* A waiting client checks we still answer (docs/client-lock.md
		 * "A scheduler that stops answering"). One small reply per
		 * request; a peer that does not read is cut off by conn.c's
		 * output bound like any other. */
		struct nvs_msg p;
		nvs_msg_gpu(&p, NVS_MSG_PONG, 0, m->u.gpu.value);
		conn_send(c, &p);
		/* One event a second per client, or one per 1,000 PINGs, with
		 * the PINGs answered since the last one: a flood of PINGs must
		 * not turn into a flood of event lines (227 MiB in 10 s). */
		uint64_t now = nvs_now_ns();
		cl->pings_unreported++;
		if (!cl->ping_event_ns || now - cl->ping_event_ns >= 1000000000ull ||
		    cl->pings_unreported >= 1000) {
			nvs_event("ping", "\"client\":%u,\"pid\":%d,\"answered\":%llu", cl->id,
				  (int)cl->pid, (unsigned long long)cl->pings_unreported);
			cl->ping_event_ns = now;
			cl->pings_unreported = 0;
		}
		return;
	}
	/* Every other client message names an attached GPU first. */
	uint32_t local = m->u.gpu.local_gpu;
	switch (m->type) {
	case NVS_MSG_LOCK_RELEASED:
		local = m->u.released.local_gpu;
		break;
	case NVS_MSG_MEM_UPDATE:
		local = m->u.mem.local_gpu;
		break;
	case NVS_MSG_SWAP_STATS:
		local = m->u.swap.local_gpu;
		break;
	case NVS_MSG_SWAP_PATHS:
		local = m->u.paths.local_gpu;
		break;
	case NVS_MSG_LIMITS_IN_FORCE:
		local = m->u.limits.local_gpu;
		break;
	default:
		break;
	}
	struct client_gpu *cg = find_gpu(cl, local);
	if (!cg) {
		conn_reason(c, "gpu-not-attached");
		conn_doom(c, "%s for GPU %u, which is not attached", nvs_msg_type_name(m->type),
			  local);
		return;
	}
	switch (m->type) {
	case NVS_MSG_REQ_LOCK:
		nvs_policy_req_lock(cg, nvs_now_ns());
		break;
	case NVS_MSG_LOCK_RELEASED:
		nvs_policy_released(cg, m->u.released.flags, m->u.released.drain_ns, nvs_now_ns());
		break;
	case NVS_MSG_MEM_UPDATE:
		NVS_DEBUG("MEM_UPDATE client=%u gpu=%d allocated=%llu", cl->id, cg->gpu->index,
			  (unsigned long long)m->u.mem.allocated);
		nvs_claims_mem_update(cg, m->u.mem.allocated, nvs_now_ns());
		break;
	case NVS_MSG_SWAP_STATS:
		/* Cumulative counters from the client (policy.c keeps them
		 * and the GPU's totals), within its report budget. */
		nvs_claims_swap_stats(cg, &m->u.swap, nvs_now_ns());
		break;
	case NVS_MSG_LIMITS_IN_FORCE:
		nvs_limits_claim(cg, &m->u.limits, nvs_now_ns());
		break;
	case NVS_MSG_SWAP_PATHS:
		/* Shown as it is; nothing is decided on it. */
		cg->paths = m->u.paths;
		NVS_DEBUG("SWAP_PATHS client=%u gpu=%d fast=%llu prefetch=%llu pinned=%llu "
			  "staging=%llu used=%llu flags=%u",
			  cl->id, cg->gpu->index, (unsigned long long)m->u.paths.fast,
			  (unsigned long long)m->u.paths.prefetch,
			  (unsigned long long)m->u.paths.pinned,
			  (unsigned long long)m->u.paths.staging,
			  (unsigned long long)m->u.paths.staging_used, m->u.paths.flags);
		break;
	default:
		break;
	}
}

void nvs_client_gone(struct client *cl)
{
	NVS_INFO("BYE client=%u pid=%d gpus=%u", cl->id, (int)cl->pid, cl->ngpus);
	nvs_event("bye", "\"client\":%u,\"pid\":%d", cl->id, (int)cl->pid);
	/* Detach first so that a hand-off never sends to this client. */
	cl->conn = NULL;
	cl->flags = 0;
	uint64_t now = nvs_now_ns();
	for (unsigned i = 0; i < cl->ngpus; i++) {
		struct gpu *g = cl->gpus[i]->gpu;
		nvs_core_gpu_detach(cl->gpus[i], now);
		free(cl->gpus[i]);
		nvs_gpu_learned_memory(g);
	}
	nvs_core_client_remove(cl);
	free(cl);
}
