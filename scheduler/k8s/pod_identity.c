#include "pod_identity.h"

#include "k8s_json.h"
#include "k8s_watch.h"

/* The scheduler's side: the one file of this folder that knows clients. */
#include "../clients.h"
#include "../devmem.h"
#include "../events.h"
#include "../core/limits_apply.h"
#include "../core/state.h"

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

/* The Pod's annotation limits in force: percent, bytes; 0 none. */
static uint32_t ann_core(const struct nvs_k8s_cached_pod *p)
{
	const struct nvs_k8s_ann_in_force *a = &p->ann[NVS_POD_ANN_CORE];
	return a->has ? (uint32_t)a->v : 0;
}

static uint64_t ann_mem(const struct nvs_k8s_cached_pod *p)
{
	const struct nvs_k8s_ann_in_force *a = &p->ann[NVS_POD_ANN_MEM];
	return a->has ? a->v : 0;
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
	set_annotation_limits(cl, ann_core(p), ann_mem(p));
	/* The class for co-scheduling (coschedule.c): the Pod spec's word
	 * over HELLO's. */
	const struct nvs_k8s_ann_in_force *a = &p->ann[NVS_POD_ANN_PRIO];
	unsigned prio = a->has ? (unsigned)a->v : 0;
	if (cl->annot_prio != prio)
		NVS_INFO("client=%u pid=%d pod %s/%s priority annotation: %s", cl->id, (int)cl->pid,
			 p->ns, p->name,
			 prio == 1   ? "interactive"
			 : prio == 2 ? "batch"
				     : "none");
	cl->annot_prio = prio;
	/* nvshare.com/unified-memory: "false" (devmem.c; one-way). */
	a = &p->ann[NVS_POD_ANN_UNIFIED];
	nvs_devmem_pod(cl, a->has && a->v == 1);
}

/*
 * Unknown tenants (peer.h): the process was gone, exiting or invisible,
 * or its cgroup unreadable, when it connected. Never "no Pod, no
 * limits", and never looser than the Pod it may really be in: per field,
 * the most restrictive limit in force on the node, that is the smallest
 * of the unknown-tenant settings (NVSHARE_UNKNOWN_TENANT_*) and of every
 * cached Pod's annotation limits and memory request. The Pod its pid was
 * last seen in (source pid-history) is only shown, never applied.
 */
struct strictest {
	uint32_t core;			       /* percent, 0: none */
	uint64_t mem;			       /* bytes, 0: none */
	const struct nvs_k8s_cached_pod *skip; /* being removed */
};

static void tighten(uint32_t *core, uint64_t *mem, uint32_t c, uint64_t m)
{
	if (c && (!*core || c < *core))
		*core = c;
	if (m && (!*mem || m < *mem))
		*mem = m;
}

static void tighten_pod(const struct nvs_k8s_cached_pod *p, void *arg)
{
	struct strictest *s = arg;
	if (p == s->skip)
		return;
	tighten(&s->core, &s->mem, ann_core(p), ann_mem(p));
	tighten(&s->core, &s->mem, 0, p->mem_request);
}

static struct strictest strictest_limits(const struct nvs_k8s_cached_pod *skip)
{
	/* (a core limit of 100 % is none) */
	struct strictest s = {S.cfg.unknown_core_limit == 100 ? 0 : S.cfg.unknown_core_limit,
			      S.cfg.unknown_mem_limit == NVS_NO_LIMIT ? 0 : S.cfg.unknown_mem_limit,
			      skip};
	nvs_k8s_foreach_pod(tighten_pod, &s);
	return s;
}

static void apply_unknown(struct client *cl, const struct strictest *lim, int loud)
{
	if (loud)
		NVS_WARN("client=%u pid=%d uid=%d: unknown tenant (%s): the most restrictive "
			 "limits on the node apply",
			 cl->id, (int)cl->pid, (int)cl->uid,
			 cl->unknown_why ? cl->unknown_why : "?");
	set_annotation_limits(cl, lim->core, lim->mem);
}

/* Every unknown client again, after a Pod changed the strictest limits
 * (gone: skip, which the cache still holds). */
static void reapply_unknown(const struct nvs_k8s_cached_pod *skip)
{
	struct strictest lim = strictest_limits(skip);
	for (struct client *cl = S.clients; cl; cl = cl->next)
		if (cl->tenant == NVS_TENANT_UNKNOWN)
			apply_unknown(cl, &lim, 0);
}

/* A Pod socket's client whose UID the watch had not given yet. */
static int named_pod(const struct client *cl, const struct nvs_k8s_cached_pod *p)
{
	return cl->tenant == NVS_TENANT_POD && !cl->pod_uid[0] &&
	       !strcmp(cl->pod_namespace, p->ns) && !strcmp(cl->pod_name, p->name);
}

/* The socket's Pod is p: its UID, and a word when the process's own
 * cgroup named another Pod (a misplaced mount, or a tenant's trick). */
static void socket_pod_is(struct client *cl, const struct nvs_k8s_cached_pod *p)
{
	snprintf(cl->pod_uid, sizeof cl->pod_uid, "%s", p->uid);
	if (cl->cg_pod_uid[0] && strcmp(cl->cg_pod_uid, p->uid) &&
	    (!p->mirror[0] || strcmp(cl->cg_pod_uid, p->mirror)))
		NVS_WARN("client=%u pid=%d connected on the socket of pod %s/%s (uid %s) but its "
			 "cgroup names pod uid %s: the socket decides",
			 cl->id, (int)cl->pid, p->ns, p->name, p->uid, cl->cg_pod_uid);
}

void nvs_pod_identify(struct client *cl)
{
	if (cl->tenant == NVS_TENANT_UNKNOWN) {
		const struct nvs_k8s_cached_pod *p =
		    cl->pod_uid[0] ? nvs_k8s_pod_lookup(cl->pod_uid) : NULL;
		if (p) {
			/* Shown (status "pod"), not applied. */
			snprintf(cl->pod_name, sizeof cl->pod_name, "%s", p->name);
			snprintf(cl->pod_namespace, sizeof cl->pod_namespace, "%s", p->ns);
		}
		struct strictest lim = strictest_limits(NULL);
		apply_unknown(cl, &lim, 1);
		return;
	}
	if (!cl->pod_uid[0] && cl->pod_name[0]) {
		/* A Pod socket's client: its binding named the Pod, the watch
		 * gives the UID. Until it does, the most restrictive limits
		 * (nvs_pod_changed applies the Pod's once it appears). */
		const struct nvs_k8s_cached_pod *p =
		    nvs_k8s_pod_by_name(cl->pod_namespace, cl->pod_name);
		if (p) {
			socket_pod_is(cl, p);
			apply(cl, p);
			return;
		}
		NVS_INFO("client=%u pid=%d is in pod %s/%s by its socket (not known to the watch "
			 "yet): the most restrictive limits until it is",
			 cl->id, (int)cl->pid, cl->pod_namespace, cl->pod_name);
		struct strictest lim = strictest_limits(NULL);
		set_annotation_limits(cl, lim.core, lim.mem);
		return;
	}
	if (!cl->pod_uid[0])
		return;
	const struct nvs_k8s_cached_pod *p = nvs_k8s_pod_lookup(cl->pod_uid);
	if (p) {
		apply(cl, p);
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
	for (struct client *cl = S.clients; cl; cl = cl->next) {
		if (named_pod(cl, p)) {
			socket_pod_is(cl, p);
			NVS_INFO("client=%u pid=%d: its socket's pod %s/%s is uid %s", cl->id,
				 (int)cl->pid, p->ns, p->name, p->uid);
		}
		if (cl->tenant != NVS_TENANT_UNKNOWN && in_pod(cl, p))
			apply(cl, p);
	}
	reapply_unknown(NULL);
}

void nvs_pod_removed(const struct nvs_k8s_cached_pod *p)
{
	for (struct client *cl = S.clients; cl; cl = cl->next) {
		if (cl->tenant == NVS_TENANT_UNKNOWN || !in_pod(cl, p))
			continue;
		NVS_INFO("client=%u pid=%d: pod %s/%s deleted; its annotation limits and "
			 "memory request no longer apply",
			 cl->id, (int)cl->pid, p->ns, p->name);
		set_request(cl, 0);
		cl->annot_prio = 0;
		set_annotation_limits(cl, 0, 0);
	}
	/* The cache no longer holds p (k8s_watch.c frees it after this). */
	reapply_unknown(p);
}
