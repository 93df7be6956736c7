/*
 * Sizes of the Kubernetes names nvshare keeps, NUL included, defined once
 * for every component: the Pod UID a peer's cgroup names (parse.h) and
 * the names the API server gives Pods and nodes (scheduler/k8s/). Other
 * shared sizes live beside their users: a GPU's UUID is NVS_UUID_LEN
 * (protocol.h), a socket path NVS_SOCK_PATH_LEN (sockpath.h).
 */
#ifndef NVSHARE_COMMON_NAMES_H
#define NVSHARE_COMMON_NAMES_H

/* A Pod's metadata.uid (or a static Pod's config.mirror): a UUID, 36
 * chars with dashes, + NUL, rounded. */
#define NVS_POD_UID_LEN 40
/* A DNS subdomain (Pod and node names): 253 + NUL. */
#define NVS_K8S_NAME_LEN 254
/* A DNS label (namespaces): 63 + NUL. */
#define NVS_K8S_NS_LEN 64

#endif
