#include "pod_identity.h"

#include "k8s_json.h"
#include "k8s_watch.h"

/* The scheduler's side: the one file of this folder that knows clients. */
#include "../clients.h"
#include "../devmem.h"
#include "../events.h"
#include "../quota.h"
#include "../state.h"

#include "log.h"
#include "parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Annotation-sourced limits (core 0 / mem 0: none) through quota.c's
 * per-source setter (ctl > annotation > env), which sends SET_LIMITS to
 * the GPUs whose effective limits changed. */
static void set_annotation_limits(struct client *cl, uint32_t core, uint64_t mem)
{
	if (cl->annot_core == core && cl->has_annot_mem == (mem != 0) && cl->annot_mem == mem)
		return;
	char cb[16] = "none", mb[32] = "none";
	if (core)
		snprintf(cb, sizeof cb, "%u%%", core);
	if (mem)
		nvs_format_size(mem, mb, sizeof mb);
	NVS_INFO("client=%u pid=%d pod %s/%s annotation limits: core %s, memory %s", cl->id,
		 (int)cl->pid, cl->pod_namespace, cl->pod_name, cb, mb);
	nvs_client_set_limits_from(cl, NVS_LIMIT_SRC_ANNOTATION, core, mem);
}

/* The Pod's nvshare.com/gpu-memory request (bytes, 0 none). */
static void set_request(struct client *cl, uint64_t bytes)
{
	if (cl->pod_mem_request == bytes)
		return;
	char b[32] = "none";
	if (bytes)
		nvs_format_size(bytes, b, sizeof b);
	NVS_INFO("client=%u pid=%d pod %s/%s %s request: %s", cl->id, (int)cl->pid,
		 cl->pod_namespace, cl->pod_name, NVS_K8S_RES_MEM, b);
	nvs_client_set_limits_from(cl, NVS_LIMIT_SRC_REQUEST, 0, bytes);
}

/* The client's view of Pod p: name, namespace, annotation limits, memory
 * request. */
static void apply(struct client *cl, const struct nvs_k8s_cached_pod *p)
{
	if (strcmp(cl->pod_name, p->name) || strcmp(cl->pod_namespace, p->ns)) {
		snprintf(cl->pod_name, sizeof cl->pod_name, "%s", p->name);
		snprintf(cl->pod_namespace, sizeof cl->pod_namespace, "%s", p->ns);
		NVS_INFO("client=%u pid=%d is in pod %s/%s (uid %s)", cl->id, (int)cl->pid, p->ns,
			 p->name, cl->pod_uid);
	}
	/* At HELLO nothing is attached yet: ATTACH_GPU sends the limits. */
	set_request(cl, p->mem_request);
	set_annotation_limits(cl, p->has_core ? (uint32_t)p->core : 0, p->has_mem ? p->mem : 0);
	/* The class for co-scheduling (coschedule.c): the Pod spec's word
	 * over HELLO's. */
	unsigned prio = p->has_prio ? (unsigned)p->prio : 0;
	if (cl->annot_prio != prio)
		NVS_INFO("client=%u pid=%d pod %s/%s priority annotation: %s", cl->id, (int)cl->pid,
			 p->ns, p->name,
			 prio == 1   ? "interactive"
			 : prio == 2 ? "batch"
				     : "none");
	cl->annot_prio = prio;
	/* nvshare.com/unified-memory: "false" (devmem.c; one-way). */
	nvs_devmem_pod(cl, p->has_unified && p->unified == 1);
}

/* Unknown tenants (peer.h): the process was gone or its cgroup unreadable
 * when it connected. Never "no Pod, no limits": the limits of the Pod its
 * pid was last seen in, when that Pod is known, else the configured
 * unknown-tenant limits. */
static void apply_unknown(struct client *cl)
{
	NVS_WARN("client=%u pid=%d uid=%d: unknown tenant (%s): unknown-tenant limits apply",
		 cl->id, (int)cl->pid, (int)cl->uid, cl->unknown_why ? cl->unknown_why : "?");
	set_annotation_limits(cl, S.cfg.unknown_core_limit == 100 ? 0 : S.cfg.unknown_core_limit,
			      S.cfg.unknown_mem_limit == NVS_NO_LIMIT ? 0
								      : S.cfg.unknown_mem_limit);
}

void nvs_pod_identify(struct client *cl)
{
	if (!cl->pod_uid[0]) {
		if (cl->tenant == NVS_TENANT_UNKNOWN)
			apply_unknown(cl);
		return;
	}
	const struct nvs_k8s_cached_pod *p = nvs_k8s_pod_lookup(cl->pod_uid);
	if (p) {
		if (cl->tenant == NVS_TENANT_UNKNOWN)
			NVS_WARN("client=%u pid=%d: unknown tenant (%s); its pid was last seen in "
				 "pod %s/%s: that Pod's limits apply",
				 cl->id, (int)cl->pid, cl->unknown_why ? cl->unknown_why : "?",
				 p->ns, p->name);
		apply(cl, p);
	} else if (cl->tenant == NVS_TENANT_UNKNOWN) {
		apply_unknown(cl);
	} else {
		NVS_INFO("client=%u pid=%d is in pod uid %s (not known to the watch yet)", cl->id,
			 (int)cl->pid, cl->pod_uid);
		char uq[2 * sizeof cl->pod_uid];
		nvs_event("pod_unknown", "\"client\":%u,\"pid\":%d,\"pod_uid\":%s", cl->id,
			  (int)cl->pid, nvs_json_str(cl->pod_uid, uq, sizeof uq));
	}
}

static int in_pod(const struct client *cl, const struct nvs_k8s_cached_pod *p)
{
	if (!cl->pod_uid[0])
		return 0;
	return !strcmp(cl->pod_uid, p->uid) || (p->mirror[0] && !strcmp(cl->pod_uid, p->mirror));
}

void nvs_pod_changed(const struct nvs_k8s_cached_pod *p)
{
	for (struct client *cl = S.clients; cl; cl = cl->next)
		if (in_pod(cl, p))
			apply(cl, p);
}

void nvs_pod_removed(const struct nvs_k8s_cached_pod *p)
{
	for (struct client *cl = S.clients; cl; cl = cl->next) {
		if (!in_pod(cl, p))
			continue;
		NVS_INFO("client=%u pid=%d: pod %s/%s deleted; its annotation limits and "
			 "memory request no longer apply",
			 cl->id, (int)cl->pid, p->ns, p->name);
		set_request(cl, 0);
		cl->annot_prio = 0;
		if (cl->tenant == NVS_TENANT_UNKNOWN)
			apply_unknown(cl); /* it was only attributed to that Pod */
		else
			set_annotation_limits(cl, 0, 0);
	}
}
