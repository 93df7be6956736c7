/*
 * Pod identity of a client: the Pod UID pinned at connect (peer.h) -> the
 * Pod in the watch cache (name, namespace, nvshare annotations), and the
 * limits of unknown tenants. Names a client reports are never used. Loop
 * thread only.
 */
#ifndef NVSHARE_SCHEDULER_POD_IDENTITY_H
#define NVSHARE_SCHEDULER_POD_IDENTITY_H

#include <stdint.h>

struct client;
struct nvs_k8s_cached_pod;

/* At HELLO, from the identity pinned at connect (peer.h): when the
 * client's Pod is cached, its name, namespace and annotation limits; for
 * an unknown tenant, the limits of the Pod its pid was last seen in or the
 * unknown-tenant limits (not sent: ATTACH_GPU does). */
void nvs_pod_identify(struct client *cl);

/* The watch changed Pod p (added, modified, listed): update every client
 * in it and send SET_LIMITS where the effective limits changed. */
void nvs_pod_changed(const struct nvs_k8s_cached_pod *p);
/* Pod p is gone: its clients lose their annotation limits. */
void nvs_pod_removed(const struct nvs_k8s_cached_pod *p);

#endif
