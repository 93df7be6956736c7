/*
 * The fast swap path: what the library can move at the link's speed
 * (docs/swap.md "The swap engine").
 *
 *   - managed ranges the library converted from cuMemAlloc* (swap_fast.c):
 *     copied to pinned host staging, then discarded (cuMemDiscardBatchAsync:
 *     the GPU pages are dropped, nothing migrates); back: discarded and
 *     placed on the GPU in one batch (cuMemDiscardAndPrefetchBatchAsync),
 *     then copied in;
 *   - cuMemCreate handles (swap_vmm.c): copied out, every mapping unmapped
 *     and the physical memory released; back: created again with the same
 *     properties, mapped at the same addresses with the same access, copied
 *     in. The application's handle values are virtual and stay valid.
 *
 * Everything else stays where it was: the application's own managed memory
 * (it may use it from the host) goes by the prefetch path (sched_swap.c);
 * pools, arrays, graph memory, device memory (NVSHARE_UNIFIED_MEMORY=0) and
 * VMM handles that were exported, bound to a multicast object, mapped into
 * a sparse array or given access to part of a mapping are pinned.
 *
 * Swapped-out memory is unusable until it is restored: while any is out on
 * a GPU, that GPU's gate stays closed (nvs_swap_must_restore), and the
 * client thread restores it before the gate opens, whatever opens it (a
 * grant, the GPU becoming concurrent, the scheduler going away).
 *
 * NVSHARE_SWAP_TRAP=1 (a test mode): converted allocations are backed by
 * VMM memory instead of managed memory, so everything the engine swaps out
 * is unmapped while out, and any GPU access to it then fails with an
 * illegal-address error instead of reading indeterminate values.
 */
#ifndef NVSHARE_CLIENT_SWAP_ENGINE_H
#define NVSHARE_CLIENT_SWAP_ENGINE_H

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

/* Guards every object of the engine (swap_fast.c's ranges, swap_vmm.c's
 * handles and mappings). Held across a whole swap by the client thread;
 * application threads take it briefly and never wait for a restore while
 * holding it. */
extern pthread_mutex_t nvs_swap_mu;

/* NVSHARE_SWAP_FAST (default 1; 0: every allocation on the prefetch path,
 * VMM handles pinned) and NVSHARE_SWAP_TRAP (default 0). */
int nvs_fast_enabled(void);
int nvs_swap_trap(void);

/* ---- managed ranges (swap_fast.c), application threads ---- */
/* A managed range the library converted (or, in trap mode, the VMM memory
 * backing one): the fast path's. */
void nvs_fast_track(int dev, CUdeviceptr p, uint64_t bytes);
/* Before the range is freed: forgets it (its staging, if out). */
void nvs_fast_untrack(CUdeviceptr p);
/* Whether the managed range (or trap-mode backing) at p is the engine's:
 * a swap-out's prefetch path leaves those to it. */
int nvs_fast_owns(CUdeviceptr p);
/* Whether the last swap-in placed and filled the range at p (it is on the
 * GPU: the swap-in's prefetch walk skips it). */
int nvs_fast_just_restored(CUdeviceptr p);

/* ---- trap mode: converted allocations backed by VMM (swap_vmm.c) ---- */
CUresult nvs_svmm_alloc_backing(int dev, uint64_t bytes, CUdeviceptr *p);
/* 1 and freed if p was such a backing, else 0. */
int nvs_svmm_free_backing(CUdeviceptr p, CUresult *r);
int nvs_svmm_is_backing(CUdeviceptr p);

/* ---- VMM handles (swap_vmm.c), called by hooks_vmm.c ---- */
CUresult nvs_svmm_create(CUmemGenericAllocationHandle *h, size_t size,
			 const CUmemAllocationProp *prop, unsigned long long flags);
CUresult nvs_svmm_release(CUmemGenericAllocationHandle h);
CUresult nvs_svmm_map(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags);
CUresult nvs_svmm_unmap(CUdeviceptr va, size_t size);
CUresult nvs_svmm_set_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc,
			     size_t count);
CUresult nvs_svmm_export(void *shareable, CUmemGenericAllocationHandle h,
			 CUmemAllocationHandleType type, unsigned long long flags);
CUresult nvs_svmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h);
CUresult nvs_svmm_retain(CUmemGenericAllocationHandle *h, void *addr);
CUresult nvs_svmm_range_handle(void *handle, CUdeviceptr va, size_t size, CUmemRangeHandleType type,
			       unsigned long long flags);
CUresult nvs_svmm_map_array(CUarrayMapInfo *infos, unsigned count, CUstream s, int ptsz);
CUresult nvs_svmm_mc_bind_mem(CUmemGenericAllocationHandle mc, size_t mc_off,
			      CUmemGenericAllocationHandle h, size_t off, size_t size,
			      unsigned long long flags);
CUresult nvs_svmm_mc_bind_addr(CUmemGenericAllocationHandle mc, size_t mc_off, CUdeviceptr va,
			       size_t size, unsigned long long flags);

/* Address reservations (cuMemAddressReserve / Free): a copy may span the
 * mappings of one reservation. nvs_svmm_region(va): the start of the
 * reservation holding va, or 0 (not known). */
void nvs_svmm_reserved(CUdeviceptr va, size_t size);
void nvs_svmm_unreserved(CUdeviceptr va);
CUdeviceptr nvs_svmm_region(CUdeviceptr va);

/* ---- the swap itself (swap_fast.c), client thread, the application's
 * context current, on the private stream st ---- */
struct nvs_fast_result {
	uint64_t fast;	     /* bytes moved by the fast path */
	uint64_t prefetched; /* converted bytes that went by prefetch (no staging) */
	uint64_t pageable;   /* VMM bytes that went to a pageable buffer */
	unsigned objects;
};
/* Moves whole objects of dev, at least `budget` bytes when it can
 * (UINT64_MAX: all). */
void nvs_fast_out(int dev, uint64_t budget, CUstream st, struct nvs_fast_result *res);
/* Restores everything of dev that is out. Returns the bytes copied back. */
uint64_t nvs_fast_in(int dev, CUdevice cudev, CUstream st);
/* dev has swapped-out memory that must come back before its gate opens. */
int nvs_fast_pending(int dev);

/* Bytes of dev per path, for the status. */
struct nvs_path_bytes {
	uint64_t fast, prefetch, pinned;
};
void nvs_fast_paths(int dev, struct nvs_path_bytes *out);
/* Bytes of dev the fast path can move now (the staging it wants). */
uint64_t nvs_fast_bytes(int dev);

/* ---- what swap_fast.c and swap_vmm.c share, nvs_swap_mu held ---- */
struct nvs_vcand {
	uint64_t vh;	/* virtual handle */
	CUdeviceptr va; /* the mapping that covers it whole: copy source */
	uint64_t bytes;
};
/* dev's resident handles that can go: a malloc()ed array (*out), by address. */
size_t nvs_svmm_candidates(int dev, struct nvs_vcand **out);
/* After its bytes were copied out: unmaps and releases it. host: the
 * pageable buffer holding them, or NULL (staging at `off`). */
CUresult nvs_svmm_put_out(uint64_t vh, uint64_t off, void *host);
/* dev's handles that are out: a malloc()ed array of candidates. */
size_t nvs_svmm_outs(int dev, struct nvs_vcand **out);
/* Creates, maps and gives access again (no data yet); *host: its pageable
 * buffer or NULL (then *off: its staging). */
CUresult nvs_svmm_bring_in(uint64_t vh, uint64_t *off, void **host);
/* Its data is back (lost: it could not be created again; pinned from now
 * on): resident again, the pageable buffer freed. */
void nvs_svmm_settle(uint64_t vh, int lost);
/* Bytes per path of dev's handles. */
void nvs_svmm_paths(int dev, uint64_t *fast, uint64_t *pinned);
/* dev's handles that are out (must be restored). */
unsigned nvs_svmm_out_count(int dev);
void nvs_svmm_atfork_child(void);
void nvs_fast_atfork_child(void);

#endif
