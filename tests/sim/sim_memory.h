/*
 * Simulated GPU: memory. What the memory sources share.
 *
 * Every allocation is backed by real host memory (anonymous mmap, lazily
 * committed, so a "16 GiB" GPU costs nothing until touched) and a device
 * pointer is simply that host address: copies and memsets really move bytes
 * and tests can check data. What makes it a GPU is the accounting:
 *  - device allocations (cuMemAlloc*, pools, VMM handles, arrays) take
 *    "used" bytes of the simulated GPU, shared across processes;
 *  - managed allocations are tracked in 2 MiB pages, each either on the host
 *    or resident on one GPU (a slot in the GPU's shared slot table, which
 *    makes residency and LRU eviction global across processes); resident
 *    pages take GPU memory too, and are evicted LRU-first when something
 *    else needs room.
 *
 * One job a file: sim_alloc.c (the allocation registry; device, managed and
 * host allocations; graph memory nodes), sim_residency.c (where managed
 * pages are: migration, LRU eviction; device memory accounting, which
 * evicts), sim_managed.c (prefetch, advice, range attributes), sim_pool.c
 * (pools, stream-ordered allocation), sim_vmm.c (virtual memory
 * management), sim_ipc.c (IPC memory handles), sim_array.c (arrays), sim_copy.c (copies and
 * memsets), sim_pointer_attr.c (pointer attributes).
 */
#ifndef NVSHARE_TESTS_SIM_MEMORY_H
#define NVSHARE_TESTS_SIM_MEMORY_H

#include "sim_internal.h"

enum { A_DEVICE = 1, A_MANAGED, A_HOST, A_HOSTREG, A_VA };

struct sim_pool; /* sim_pool.c */
struct vmap;	 /* sim_vmm.c */

struct sim_alloc {
	uint64_t base, size;
	int kind;
	int dev; /* physical GPU, -1 host */
	uint64_t id;
	unsigned flags;
	void *map; /* what to munmap (NULL: not ours) */
	size_t maplen;
	uint64_t charged; /* device bytes reserved for it */
	struct sim_ctx *ctx;
	struct sim_pool *pool;
	uint32_t npages;    /* managed */
	int32_t *slot;	    /* managed: slot index, -1 = host */
	int8_t *pdev;	    /* managed: GPU of that slot */
	uint8_t *disc;	    /* managed: page discarded, nothing wrote or prefetched it since */
	int last_prefetch;  /* managed: last prefetch target ordinal, -1 host, -2 none */
	int graph;	    /* device memory of a graph allocation node */
	struct vmap *vmaps; /* VA reservation: what cuMemMap put there */
	char *ipc_path;	    /* exported (sim_ipc.c): the shared file backing it */
	int ipc_imported;   /* opened from another process's IPC handle */
};

/* ---- the allocation registry (sim_alloc.c) ---- */
/* The allocation that holds p, or NULL. sim_mu held. */
struct sim_alloc *sim_alloc_find_locked(uint64_t p);
/* Registers a and gives it its id. Returns 0 or -1. sim_mu held. */
int sim_alloc_insert_locked(struct sim_alloc *a);
/* Is [p, p+n) inside one allocation this process knows? Takes sim_mu. */
int sim_range_ok(uint64_t p, size_t n);
/* Creates an allocation of `kind` on phys GPU dev (or host, dev -1). */
CUresult sim_alloc_new(uint64_t *out, size_t size, int kind, int dev, unsigned flags,
		       struct sim_pool *pool);
/* Frees the allocation starting exactly at p, of one of the kinds in mask
 * (bit per kind). Memory imported by cuIpcOpenMemHandle only with
 * SIM_FREE_IPC in mask (cuIpcCloseMemHandle), never otherwise. */
#define SIM_FREE_IPC (1u << 30)
CUresult sim_free_kind(uint64_t p, unsigned mask);
/* Lazily committed anonymous memory: what backs a "GPU" allocation. */
void *sim_map_anon(size_t len);
size_t sim_round_up(size_t n, size_t a);
/* The current context's physical GPU, -1 without one. */
int sim_cur_dev(void);
#define SIM_NEED_CTX(d)                                                                            \
	SIM_REQUIRE_INIT();                                                                        \
	int d = sim_cur_dev();                                                                     \
	if (d < 0)                                                                                 \
	return CUDA_ERROR_INVALID_CONTEXT

/* A device pointer is the host address of its bytes. */
#define DP(x) ((void *)(uintptr_t)(x))

/* ---- residency (sim_residency.c) ---- */
/* Gives back the GPU slots of a managed allocation being freed. */
void sim_release_pages(struct sim_alloc *a);

/* ---- virtual memory management (sim_vmm.c) ---- */
/* Drops the cuMemMap mappings inside [p, p+n) of reservation a. sim_mu held. */
void sim_vmm_unmap_range(struct sim_alloc *a, uint64_t p, uint64_t n);
/* Whether [p, p+n) of reservation a is mapped throughout and readable and
 * writable from phys GPU dev (dev < 0: mapped is enough). sim_mu held. */
int sim_vmm_accessible(struct sim_alloc *a, uint64_t p, uint64_t n, int dev);
/* Managed residency: marks [p, p+n) discarded (data dropped). sim_mu held. */
void sim_discard_locked(struct sim_alloc *a, uint64_t p, uint64_t n);

/* ---- arrays (sim_array.c; their copies: sim_copy.c) ---- */
struct sim_array {
	uint32_t magic;
	CUDA_ARRAY3D_DESCRIPTOR d;
	size_t elem, row, bytes;
	char *data;
	int dev;
};
#define SIM_ARRAY_MAGIC 0x59525241u
struct sim_array *sim_array_check(CUarray h);

#endif
