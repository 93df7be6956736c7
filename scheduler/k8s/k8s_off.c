/*
 * The Pod watch of a scheduler built with K8S=0 (no libcurl): never on.
 * Asked for anyway (--kube-api / NVSHARE_KUBE_API, NVSHARE_KUBE=1, or
 * NODE_NAME inside a cluster, where the full build would watch), the
 * scheduler refuses to start rather than run without the annotation limits
 * the operator expects. Pods are still identified from the cgroup
 * (peer.c); only their names and annotations are unknown.
 */
#include "k8s_watch.h"

#include "../events.h"

#include "log.h"
#include "parse.h"

#include <stdlib.h>

static int asked(const char **why)
{
	const struct nvs_k8s_config *kc = &nvs_k8s_cfg;
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	int on = 0;
	if (kc->api[0])
		*why = "--kube-api / NVSHARE_KUBE_API";
	else if (nvs_env_bool("NVSHARE_KUBE", &on) == 1 && on)
		*why = "NVSHARE_KUBE=1";
	else if (kc->node_name[0] && host && *host)
		*why = "NODE_NAME inside a cluster (KUBERNETES_SERVICE_HOST)";
	else
		return 0;
	return 1;
}

int nvs_k8s_start(void)
{
	const char *why;
	if (nvs_k8s_cfg.disabled || !asked(&why)) {
		NVS_INFO("k8s: Pod watch not built (K8S=0)");
		nvs_event("k8s_watch", "\"state\":\"off\",\"reason\":\"not-built\"");
		return 0;
	}
	NVS_ERROR("k8s: the Pod watch is asked for (%s) but this nvshare-scheduler was built "
		  "with K8S=0 (no libcurl): build it with K8S=1, or pass --no-kube "
		  "(NVSHARE_KUBE=0) to run without Pod names and annotation limits",
		  why);
	nvs_event("k8s_watch", "\"state\":\"off\",\"reason\":\"not-built\"");
	return -1;
}

void nvs_k8s_stop(void)
{
}

void nvs_k8s_on_event(void)
{
}

void nvs_k8s_on_change(void (*changed)(const struct nvs_k8s_cached_pod *p),
		       void (*removed)(const struct nvs_k8s_cached_pod *p))
{
}

const struct nvs_k8s_cached_pod *nvs_k8s_pod_lookup(const char *cgroup_uid)
{
	return NULL;
}

const struct nvs_k8s_cached_pod *nvs_k8s_pod_by_name(const char *ns, const char *name)
{
	return NULL;
}

void nvs_k8s_foreach_pod(void (*fn)(const struct nvs_k8s_cached_pod *p, void *arg), void *arg)
{
}

const char *nvs_k8s_state(void)
{
	return "not-built";
}

unsigned nvs_k8s_npods(void)
{
	return 0;
}
