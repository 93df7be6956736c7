/*
 * The kubelet's PodResources API v1 (List), as the device plugin reads it:
 * which container of which Pod holds which device IDs of which resource.
 * The only way the plugin learns a Pod's name, since Allocate and
 * PreStartContainer carry none (docs/kubernetes.md "Pod sockets").
 *
 * One unary call per List over a fresh channel (grpc_server.c's
 * nvs_rpc_call): the kubelet re-creates its socket when it restarts, and a
 * List is rare (PreStartContainer, the reconciliation every 30 s). The
 * protobuf side stays here; callers get plain C strings.
 */
#ifndef NVSHARE_DP_PODRES_H
#define NVSHARE_DP_PODRES_H

#include <stddef.h>

#define NVS_DP_PODRES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define NVS_DP_PODRES_METHOD_LIST "/v1.PodResourcesLister/List"

/* One container's devices of one resource. */
struct nvs_dp_podres_entry {
	const char *ns, *pod, *container, *resource;
	const char *const *ids;
	size_t n_ids;
};

struct nvs_dp_podres {
	struct nvs_dp_podres_entry *e;
	size_t n;
	void *msg; /* the decoded response: owns every string above */
};

/* Lists the Pods on socket_path, waiting at most timeout_ms. Returns 0, or
 * -1 with why in err (the socket missing, the call's status, an
 * undecodable answer). */
int nvs_dp_podres_list(const char *socket_path, unsigned timeout_ms, struct nvs_dp_podres *out,
		       char *err, size_t errcap);
void nvs_dp_podres_free(struct nvs_dp_podres *r);

#endif
