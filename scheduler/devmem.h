/*
 * Device memory chosen by the Pod: the annotation nvshare.com/unified-memory:
 * "false" tells the Pod's processes (HELLO flag NVS_HELLO_MEMORY_MODE) to
 * keep their allocations as device memory, as NVSHARE_UNIFIED_MEMORY=0 does
 * (docs/kubernetes.md "Device memory for CUDA IPC"). Loop thread only.
 */
#ifndef NVSHARE_SCHEDULER_DEVMEM_H
#define NVSHARE_SCHEDULER_DEVMEM_H

struct client;

/* The client's Pod says device memory (1) or not (0); pod_identity.c calls
 * it whenever the Pod's view is applied. */
void nvs_devmem_pod(struct client *cl, int device);
/* WELCOME went out (clients.c hello): the word may follow now. */
void nvs_devmem_welcomed(struct client *cl);

#endif
