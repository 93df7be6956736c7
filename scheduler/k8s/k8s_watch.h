/*
 * Node-scoped Pod watch: a libcurl thread LISTs then WATCHes the Pods of
 * this node on the API server and hands each change to the event loop
 * through a mutex-protected queue and an eventfd (never blocking the
 * loop). The loop keeps a Pod cache (UID and static-pod mirror UID ->
 * name, namespace, nvshare annotations) and applies annotation limits to
 * the clients of each Pod (pod_identity.c). See docs/kubernetes-identity.md.
 */
#ifndef NVSHARE_SCHEDULER_K8S_WATCH_H
#define NVSHARE_SCHEDULER_K8S_WATCH_H

#include <stdint.h>

#include "annotations.h"
#include "names.h"

#define NVS_K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct nvs_k8s_config {
	int disabled;			  /* --no-kube / NVSHARE_KUBE=0 */
	char api[512];			  /* https://host:port, "" = in-cluster */
	char token_file[512];		  /* "" = in-cluster path */
	char ca_file[512];		  /* "" = in-cluster path */
	char node_name[NVS_K8S_NAME_LEN]; /* --node-name / NODE_NAME */
	/* Bytes per unit of nvshare.com/gpu-memory: NVSHARE_GPU_MEMORY_UNIT,
	 * default 1Gi; must match the device plugin's --memory-unit. */
	uint64_t mem_unit;
};

extern struct nvs_k8s_config nvs_k8s_cfg;

/* Resolves the configuration (in-cluster when NODE_NAME is set and
 * KUBERNETES_SERVICE_HOST + the service-account token exist, or the
 * explicit flags) and starts the thread. Returns 0 when started or not
 * configured (logged), -1 on a configuration error. Loop thread. */
int nvs_k8s_start(void);
/* Stops and joins the thread. Loop thread. */
void nvs_k8s_stop(void);

/* Applies the changes the thread queued (the watch's eventfd in the event
 * loop calls it). Loop thread. */
void nvs_k8s_on_event(void);

/* Pod cache lookup by the UID found in a client's cgroup (metadata.uid or
 * a static pod's config.mirror). Loop thread. NULL when not cached. */
struct nvs_k8s_cached_pod {
	char uid[NVS_POD_UID_LEN], mirror[NVS_POD_UID_LEN];
	char name[NVS_K8S_NAME_LEN], ns[NVS_K8S_NS_LEN];
	uint64_t mem_request; /* bytes: spec's nvshare.com/gpu-memory x unit, 0 none */
	/* The annotations in force for the Pod (annotations.def, by enum
	 * nvs_pod_ann; the values as in struct nvs_k8s_pod), and the last
	 * invalid value of each that was logged. */
	struct nvs_k8s_ann_in_force {
		int has;
		uint64_t v;
		char bad[48];
	} ann[NVS_POD_ANN_N];
	int mark; /* re-list bookkeeping */
	struct nvs_k8s_cached_pod *next;
};
const struct nvs_k8s_cached_pod *nvs_k8s_pod_lookup(const char *cgroup_uid);
/* The cached Pod namespace/name (a Pod socket's binding names its Pod so:
 * the kubelet's PodResources API has no UID). NULL when not cached. */
const struct nvs_k8s_cached_pod *nvs_k8s_pod_by_name(const char *ns, const char *name);
/* Calls fn for every cached Pod. Loop thread. */
void nvs_k8s_foreach_pod(void (*fn)(const struct nvs_k8s_cached_pod *p, void *arg), void *arg);

/* Who is told, on the loop thread, when a cached Pod changed (added,
 * modified, listed) or is gone (pod_identity.c; main.c wires it before
 * nvs_k8s_start). The watch knows nothing of clients. */
void nvs_k8s_on_change(void (*changed)(const struct nvs_k8s_cached_pod *p),
		       void (*removed)(const struct nvs_k8s_cached_pod *p));

/* Watch state for the status view: "off", "listing", "watching",
 * "backoff". */
const char *nvs_k8s_state(void);
/* Number of Pods in the cache. Loop thread. */
unsigned nvs_k8s_npods(void);

#endif
