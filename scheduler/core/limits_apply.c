/* A client's limits: sources, resolution, SET_LIMITS (limits.h). */
#include "limits_apply.h"

#include "log.h"
#include "policy.h"
#include "port.h"
#include "protocol.h"
#include "state.h"

#include <stdio.h>
#include <string.h>

#define CG_FMT "client=%u pid=%d gpu=%d"
#define CG_ARGS(cg) (cg)->client->id, (int)(cg)->client->pid, (cg)->gpu->index

void nvs_client_limit_sources(const struct client_gpu *cg, struct nvs_limit_sources *src)
{
	const struct client *cl = cg->client;
	memset(src, 0, sizeof *src);
	src->hello_core = cl->hello_core_limit;
	src->hello_mem = cl->hello_mem_limit;
	src->request = cl->pod_mem_request;
	src->annot_core = cl->annot_core;
	src->has_annot_mem = cl->has_annot_mem;
	src->annot_mem = cl->annot_mem;
	src->ctl_core = cl->core_override;
	src->has_ctl_mem = cl->has_mem_override;
	src->ctl_mem = cl->mem_override;
	src->gpu_core = cg->gpu_core_override;
	src->has_gpu_mem = cg->has_gpu_mem_override;
	src->gpu_mem = cg->gpu_mem_override;
	src->has_claim = cg->has_claim;
	src->claim_core = cg->claim_core;
	src->claim_mem = cg->claim_mem;
	src->ceil_core = cl->ceil_core;
	src->ceil_mem = cl->ceil_mem;
}

struct nvs_limits nvs_client_update_limits(struct client_gpu *cg)
{
	struct nvs_limit_sources src;
	nvs_client_limit_sources(cg, &src);
	struct nvs_limits l = nvs_limits_resolve(&src);
	cg->core_limit = l.core;
	cg->mem_limit = l.mem;
	return l;
}

void nvs_client_send_limits(struct client_gpu *cg)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_SET_LIMITS;
	m.u.limits.local_gpu = cg->local_gpu;
	m.u.limits.core_limit = cg->core_limit;
	m.u.limits.mem_limit = cg->mem_limit;
	nvs_core_send(cg->client, &m);
	char mem[24] = "null";
	if (cg->mem_limit != NVS_NO_LIMIT)
		snprintf(mem, sizeof mem, "%llu", (unsigned long long)cg->mem_limit);
	nvs_core_event("set_limits",
		       "\"client\":%u,\"pid\":%d,\"gpu\":%d,\"core_limit\":%u,\"mem_limit\":%s",
		       cg->client->id, (int)cg->client->pid, cg->gpu->index, cg->core_limit, mem);
}

void nvs_limits_claim(struct client_gpu *cg, const struct nvs_set_limits *l, uint64_t now)
{
	struct client *cl = cg->client;
	if (l->core_limit < 1 || l->core_limit > 100 || l->mem_limit == 0) {
		NVS_DEBUG("LIMITS_IN_FORCE client=%u gpu=%d out of range: ignored", cl->id,
			  cg->gpu->index);
		return;
	}
	cg->has_claim = 1;
	cg->claim_core = l->core_limit;
	cg->claim_mem = l->mem_limit;
	uint32_t core = cg->core_limit;
	uint64_t mem = cg->mem_limit;
	nvs_client_update_limits(cg);
	char m[24] = "null";
	if (l->mem_limit != NVS_NO_LIMIT)
		snprintf(m, sizeof m, "%llu", (unsigned long long)l->mem_limit);
	nvs_core_event("limits_claimed",
		       "\"client\":%u,\"pid\":%d,\"gpu\":%d,\"core_limit\":%u,\"mem_limit\":%s",
		       cl->id, (int)cl->pid, cg->gpu->index, l->core_limit, m);
	/* Tell the client the result when the configured limits are
	 * stricter than its claim (or changed): it then enforces those. */
	if (cg->core_limit != l->core_limit || cg->mem_limit != l->mem_limit ||
	    core != cg->core_limit || mem != cg->mem_limit)
		nvs_client_send_limits(cg);
	if (core != cg->core_limit)
		nvs_policy_settings_changed(cg->gpu, now);
}

int nvs_limits_set_from(struct client *cl, enum nvs_limit_src src, uint32_t core, uint64_t mem,
			uint64_t now)
{
	if (core > 100)
		return -1;
	switch (src) {
	case NVS_LIMIT_SRC_ENV:
		cl->hello_core_limit = core ? core : 100;
		cl->hello_mem_limit = mem ? mem : NVS_NO_LIMIT;
		break;
	case NVS_LIMIT_SRC_ANNOTATION:
		cl->annot_core = core;
		cl->has_annot_mem = mem != 0;
		cl->annot_mem = mem;
		break;
	case NVS_LIMIT_SRC_CTL:
		cl->core_override = core;
		cl->has_mem_override = mem != 0;
		cl->mem_override = mem;
		break;
	case NVS_LIMIT_SRC_REQUEST:
		if (core || mem == NVS_NO_LIMIT)
			return -1;
		if (cl->pod_mem_request == mem)
			return 0;
		cl->pod_mem_request = mem;
		break;
	}
	int told = 0;
	for (unsigned i = 0; i < cl->ngpus; i++) {
		struct client_gpu *cg = cl->gpus[i];
		uint32_t oc = cg->core_limit;
		uint64_t om = cg->mem_limit;
		nvs_client_update_limits(cg);
		if (cg->core_limit == oc && cg->mem_limit == om)
			continue;
		nvs_client_send_limits(cg);
		told++;
		NVS_INFO("SET_LIMITS " CG_FMT " core_limit=%u mem_limit=%llu source=%s",
			 CG_ARGS(cg), cg->core_limit, (unsigned long long)cg->mem_limit,
			 src == NVS_LIMIT_SRC_CTL	   ? "ctl"
			 : src == NVS_LIMIT_SRC_ANNOTATION ? "annotation"
			 : src == NVS_LIMIT_SRC_REQUEST	   ? "request"
							   : "env");
		nvs_policy_settings_changed(cg->gpu, now);
	}
	/* A request also changes what fits where the limit stayed. */
	if (src == NVS_LIMIT_SRC_REQUEST)
		for (unsigned i = 0; i < cl->ngpus; i++)
			nvs_policy_settings_changed(cl->gpus[i]->gpu, now);
	return told;
}

unsigned nvs_limits_ctl_set(struct client *cl, int gpu, int core_set, uint32_t core, int mem_set,
			    uint64_t mem, uint64_t now, unsigned *capped)
{
	unsigned sent = 0;
	/* The administrator's word replaces what the client claimed after a
	 * restart (LIMITS_IN_FORCE). */
	for (unsigned i = 0; i < cl->ngpus; i++)
		if (gpu == -1 || cl->gpus[i]->gpu->index == gpu)
			cl->gpus[i]->has_claim = 0;
	if (gpu == -1) {
		if (core_set)
			cl->core_override = core; /* 0: default */
		if (mem_set) {
			cl->has_mem_override = 1;
			cl->mem_override = mem;
		}
	}
	for (unsigned i = 0; i < cl->ngpus; i++) {
		struct client_gpu *cg = cl->gpus[i];
		if (gpu != -1 && cg->gpu->index != gpu)
			continue;
		/* The newest word of the administrator for a field: for one
		 * GPU, that GPU's own value (default: none, back to the
		 * client-wide value, the annotation or HELLO); for all GPUs,
		 * it replaces the per-GPU ones. */
		if (core_set)
			cg->gpu_core_override = gpu == -1 ? 0 : core;
		if (mem_set) {
			cg->has_gpu_mem_override = gpu != -1;
			cg->gpu_mem_override = mem;
		}
		struct nvs_limits l = nvs_client_update_limits(cg);
		/* A value above the binding's ceiling: capped (said). */
		*capped += (core && l.core_from == NVS_LIMIT_FROM_CEILING) ||
			   (mem_set && l.mem_from == NVS_LIMIT_FROM_CEILING);
		nvs_client_send_limits(cg);
		/* Quotas: serialize / re-evaluate the GPU for the new core
		 * limit (in force from its next window). */
		nvs_policy_settings_changed(cg->gpu, now);
		sent++;
		NVS_INFO("SET_LIMITS client=%u pid=%d gpu=%d core_limit=%u (%s) "
			 "mem_limit=%llu (%s)",
			 cl->id, (int)cl->pid, cg->gpu->index, cg->core_limit,
			 nvs_limit_from_name(l.core_from), (unsigned long long)cg->mem_limit,
			 nvs_limit_from_name(l.mem_from));
	}
	return sent;
}
