/*
 * Per-process, per-GPU memory accounting and limits (client/accounting.c).
 *
 * Every allocation reserves its size atomically against the limit before the
 * driver is asked (no check-then-allocate race) and releases the reservation
 * if the driver fails. The limit for a device is the smallest of: the GPU's
 * memory (unless NVSHARE_ENABLE_SINGLE_OVERSUB=1), NVSHARE_GPU_MEMORY_LIMIT,
 * and what the scheduler set at run time.
 */
#ifndef NVSHARE_CLIENT_ACCOUNTING_H
#define NVSHARE_CLIENT_ACCOUNTING_H

#include "protocol.h" /* NVS_MAX_GPUS */

#include <cuda.h>
#include <stdint.h>

enum nvs_alloc_kind {
	NVS_ALLOC_MANAGED = 0,	     /* ours (converted) or the application's */
	NVS_ALLOC_PINNED_DEVICE = 1, /* pools, arrays, graph and device memory: not swappable */
	NVS_ALLOC_VMM = 2,	     /* cuMemCreate handles (swap_vmm.c says which can move) */
};
#define NVS_ALLOC_KINDS 3

/* Reserve `bytes` on dev; 0 if within the limit, else -1 (logged). */
int nvs_acct_reserve(int dev, uint64_t bytes);
/* Undo a reservation whose allocation failed, or account a free. */
void nvs_acct_unreserve(int dev, uint64_t bytes);
/* Counts bytes again that were un-accounted for a free the driver then
 * refused: the allocation lives, whatever the limit says. */
void nvs_acct_recount(int dev, uint64_t bytes);

/* Remember / forget an allocation so frees can be un-accounted and managed
 * ranges prefetched on swap. */
void nvs_acct_track(int dev, CUdeviceptr ptr, uint64_t bytes, enum nvs_alloc_kind kind);
/* Returns the bytes the allocation had (0 if unknown) and forgets it. */
uint64_t nvs_acct_untrack(CUdeviceptr ptr, int *dev);

uint64_t nvs_acct_used(int dev);
/* The one observer of the byte counts (the scheduler client): on_change(dev)
 * runs after every change of dev's used bytes, on the thread that made it,
 * and reads the new count with nvs_acct_used(). It must be cheap and must
 * not allocate. Accounting calls nothing else outside itself, so the
 * scheduler client depends on accounting and never the other way round.
 * Replaces the previous observer; NULL: none. */
void nvs_acct_observe(void (*on_change)(int dev));
/* Effective limit in bytes (NVS_NO_LIMIT-like UINT64_MAX if none). */
uint64_t nvs_acct_limit(int dev);
/* Run-time limit from the scheduler (SET_LIMITS: the effective limit, which
 * replaces NVSHARE_GPU_MEMORY_LIMIT); UINT64_MAX = no limit. */
void nvs_acct_set_runtime_limit(int dev, uint64_t bytes);

/* Calls cb for each managed range on dev, largest first. */
void nvs_acct_foreach_managed(int dev, void (*cb)(CUdeviceptr, uint64_t, void *), void *ctx);

void nvs_acct_atfork_child(void);

/* Additions (libnvshare-internal users: hooks_info.c, hooks_nvml.c,
 * hooks_alloc.c). */
/* Physical memory of dev in bytes (0 if the driver cannot tell yet). */
uint64_t nvs_acct_gpu_total(int dev);
/* The smaller of NVSHARE_GPU_MEMORY_LIMIT and the scheduler's run-time
 * limit, ignoring the GPU's size (UINT64_MAX if neither is set). */
uint64_t nvs_acct_configured_limit(int dev);
/* Bytes tracked on dev of one kind. */
uint64_t nvs_acct_kind_bytes(int dev, enum nvs_alloc_kind kind);
/* Looks an allocation up without forgetting it; 0 if found. */
int nvs_acct_lookup(CUdeviceptr ptr, int *dev, uint64_t *bytes, enum nvs_alloc_kind *kind);

#endif
