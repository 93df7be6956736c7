/*
 * The client registry's core side: a client joining and leaving S.clients
 * and its tenant, and a client's GPU leaving the policy. The shell
 * allocates and frees the structs (clients.c on HELLO, ATTACH_GPU and
 * disconnect; tests/core/ the same way) and calls these.
 */
#ifndef NVSHARE_SCHEDULER_CORE_REGISTRY_H
#define NVSHARE_SCHEDULER_CORE_REGISTRY_H

#include <stdint.h>

struct client;
struct client_gpu;

/* cl (identity filled in) joins S.clients and its tenant (fairness.h). */
void nvs_core_client_add(struct client *cl);
/* cg goes away: released or dequeued, unlinked, its GPU re-evaluated,
 * reports it had pending forgotten. The caller frees it. */
void nvs_core_gpu_detach(struct client_gpu *cg, uint64_t now);
/* cl (its GPUs detached) leaves S.clients and its tenant. The caller frees
 * it. */
void nvs_core_client_remove(struct client *cl);

#endif
