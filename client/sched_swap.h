/*
 * Hand-off hooks of the scheduler lock (client/sched_swap.c).
 *
 * Called by the scheduler client thread (client/sched_client.c), never from
 * an application thread, never with the client's mutex held:
 *
 *   nvs_swap_in(dev)   after LOCK_OK carrying NVS_LOCK_SWAP_IN, just before
 *                      the gate opens: bring this process's managed ranges on
 *                      dev back to the GPU (prefetch).
 *   nvs_swap_out(dev)  while draining for a DROP_LOCK carrying
 *                      NVS_LOCK_SWAP_OUT, after the context synchronized:
 *                      move the ranges to host memory.
 *
 * Both are placeholders for now (they do nothing); the swap issue fills them.
 * They must only use real driver pointers (nvs_real.*), never wrappers.
 */
#ifndef NVSHARE_CLIENT_SCHED_SWAP_H
#define NVSHARE_CLIENT_SCHED_SWAP_H

void nvs_swap_in(int dev);
void nvs_swap_out(int dev);

#endif
