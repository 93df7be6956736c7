/*
 * Swapping of a process's managed memory at lock hand-offs, and the
 * prefetch of fresh allocations while memory fits (client/sched_swap.c;
 * docs/swap.md has the design and the measurements).
 *
 * Called by the scheduler client thread (client/sched_lock.c), never with
 * the client's mutex held, with the application's context of `dev` already
 * current on the calling thread:
 *
 *   nvs_swap_in(dev, cudev)    after LOCK_OK carrying NVS_LOCK_SWAP_IN, just
 *                              before the gate opens: prefetches every
 *                              managed range on dev to the GPU, largest
 *                              first, on a private stream, and waits for it,
 *                              so the first kernel finds its data resident.
 *                              Nothing happens with NVSHARE_SWAP=0.
 *   nvs_swap_out(dev, bytes)   while draining for a DROP_LOCK carrying
 *                              NVS_LOCK_SWAP_OUT, or on an idle release
 *                              after a SWAP_HINT, once the context
 *                              synchronized: moves `bytes` (UINT64_MAX: all)
 *                              of the ranges on dev to host memory, largest
 *                              ranges first, waits for it, and returns the
 *                              bytes it moved.
 *   nvs_swap_released(dev)     after every release: the hold is over.
 *
 * Called by application threads (hooks_alloc.c) for memory the library
 * converted from device to managed memory:
 *
 *   nvs_swap_fresh(dev, ptr, bytes)  prefetches a new allocation to the GPU
 *                              when the scheduler says the GPU is not
 *                              serialized and the driver reports the room
 *                              free (NVSHARE_PREFETCH_ON_ALLOC=0 disables).
 *
 * Only real driver pointers (nvs_real.*) are used, never wrappers.
 */
#ifndef NVSHARE_CLIENT_SCHED_SWAP_H
#define NVSHARE_CLIENT_SCHED_SWAP_H

#include "protocol.h"

#include <cuda.h>
#include <stdint.h>

struct nvs_swap_totals {
	uint64_t bytes_in, bytes_out; /* cumulative since the process started */
	uint64_t ns_in, ns_out;
};

void nvs_swap_in(int dev, CUdevice cudev);
uint64_t nvs_swap_out(int dev, uint64_t bytes);
void nvs_swap_released(int dev);
void nvs_swap_fresh(int dev, CUdeviceptr ptr, uint64_t bytes);

/* Copies dev's cumulative counters; returns 1 if they changed since the
 * last call that returned 1 (a SWAP_STATS is due), else 0. */
int nvs_swap_totals(int dev, struct nvs_swap_totals *out);

/* dev has memory the swap engine took out (client/swap_engine.h): its gate
 * stays closed until nvs_swap_restore (or nvs_swap_in) brought it back. */
int nvs_swap_must_restore(int dev);
/* Brings back what the engine took out of dev (no prefetch of anything
 * else); counted as swap-in. Client thread, context current. */
void nvs_swap_restore(int dev, CUdevice cudev);
/* Memory may be short on dev: the engine's pinned staging starts growing
 * in the background. Client thread, context current. */
void nvs_swap_prepare(int dev);

/* dev's bytes per swap path and its staging (a SWAP_PATHS message);
 * returns 1 if they changed since the last call that returned 1. */
int nvs_swap_report(int dev, struct nvs_swap_paths *out);
/* The next nvs_swap_report(dev) returns 1 (a new connection). */
void nvs_swap_report_again(int dev);

/* NVSHARE_SWAP (default 1): prefetch on grant. */
int nvs_swap_enabled(void);

/* In a forked child: counters and streams belong to the parent. */
void nvs_swap_atfork_child(void);

#endif
