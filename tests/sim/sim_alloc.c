/*
 * Simulated GPU: allocations. The registry of this process's allocations
 * (sorted by base, so an address anywhere inside one finds it), how one is
 * created and freed, and the entry points for device, managed and host
 * memory and graph memory nodes. The model: sim_memory.h.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_memory.h"

static struct sim_alloc **allocs; /* sorted by base */
static size_t nallocs, capallocs;
static uint64_t next_id = 1;

/* ---- registry (sim_mu held) ---- */

static size_t lower_bound(uint64_t p)
{
	size_t lo = 0, hi = nallocs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (allocs[mid]->base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo; /* first with base > p */
}

struct sim_alloc *sim_alloc_find_locked(uint64_t p)
{
	size_t i = lower_bound(p);
	if (i == 0)
		return NULL;
	struct sim_alloc *a = allocs[i - 1];
	return p < a->base + (a->size ? a->size : 1) ? a : NULL;
}

int sim_alloc_insert_locked(struct sim_alloc *a)
{
	if (nallocs == capallocs) {
		size_t n = capallocs ? capallocs * 2 : 64;
		struct sim_alloc **x = realloc(allocs, n * sizeof(*x));
		if (!x)
			return -1;
		allocs = x;
		capallocs = n;
	}
	size_t i = lower_bound(a->base);
	memmove(&allocs[i + 1], &allocs[i], (nallocs - i) * sizeof(*allocs));
	allocs[i] = a;
	nallocs++;
	a->id = ((uint64_t)getpid() << 32) | next_id++;
	return 0;
}

static void remove_locked(struct sim_alloc *a)
{
	for (size_t i = 0; i < nallocs; i++)
		if (allocs[i] == a) {
			memmove(&allocs[i], &allocs[i + 1], (nallocs - i - 1) * sizeof(*allocs));
			nallocs--;
			return;
		}
}

/* Is [p, p+n) inside one allocation this process knows? */
int sim_range_ok(uint64_t p, size_t n)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(p);
	int ok = a && p + n <= a->base + a->size;
	pthread_mutex_unlock(&sim_mu);
	return ok;
}

static struct sim_ctx *cur_ctx_or_null(void)
{
	return sim_ctx_current();
}

void *sim_map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

size_t sim_round_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* Creates an allocation of `kind` on phys GPU dev (or host, dev -1). */
CUresult sim_alloc_new(uint64_t *out, size_t size, int kind, int dev, unsigned flags,
		       struct sim_pool *pool)
{
	if (!out || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	size_t len = sim_round_up(size, 4096);
	uint64_t charge = kind == A_DEVICE ? sim_round_up(size, SIM_PAGE) : 0;
	if (charge && sim_mem_reserve(dev, charge) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct sim_alloc *a = calloc(1, sizeof(*a));
	void *m = sim_map_anon(len);
	if (!a || !m) {
		free(a);
		if (m)
			munmap(m, len);
		if (charge)
			sim_mem_unreserve(dev, charge);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->base = (uint64_t)(uintptr_t)m;
	a->size = size;
	a->kind = kind;
	a->dev = dev;
	a->flags = flags;
	a->map = m;
	a->maplen = len;
	a->charged = charge;
	a->ctx = cur_ctx_or_null();
	a->pool = pool;
	a->last_prefetch = -2;
	if (kind == A_MANAGED) {
		a->npages = (uint32_t)((size + SIM_PAGE - 1) / SIM_PAGE);
		a->slot = malloc(a->npages * sizeof(int32_t));
		a->pdev = calloc(a->npages, 1);
		a->disc = calloc(a->npages, 1);
		if (!a->slot || !a->pdev || !a->disc) {
			free(a->slot);
			free(a->pdev);
			free(a->disc);
			free(a);
			munmap(m, len);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (uint32_t i = 0; i < a->npages; i++)
			a->slot[i] = -1;
	}
	pthread_mutex_lock(&sim_mu);
	int r = sim_alloc_insert_locked(a);
	pthread_mutex_unlock(&sim_mu);
	if (r != 0) {
		free(a->slot);
		free(a->pdev);
		free(a->disc);
		free(a);
		munmap(m, len);
		if (charge)
			sim_mem_unreserve(dev, charge);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = a->base;
	sim_log("call alloc kind=%d dev=%d size=%zu -> 0x%llx", kind, dev, size,
		(unsigned long long)a->base);
	return CUDA_SUCCESS;
}

static void alloc_destroy(struct sim_alloc *a)
{
	if (a->kind == A_VA) {
		pthread_mutex_lock(&sim_mu);
		sim_vmm_unmap_range(a, a->base, a->size);
		pthread_mutex_unlock(&sim_mu);
	}
	sim_release_pages(a);
	if (a->charged && a->dev >= 0)
		sim_mem_unreserve(a->dev, a->charged);
	if (a->map)
		munmap(a->map, a->maplen);
	if (a->ipc_path) /* exported: importers keep their own mappings */
		unlink(a->ipc_path);
	free(a->ipc_path);
	free(a->slot);
	free(a->pdev);
	free(a->disc);
	free(a);
}

/* sim_free_kind mask bit: only memory a graph allocation node returned. */
#define ONLY_GRAPH (1u << 31)

/* Removes the allocation starting exactly at p, of one of the kinds in
 * mask (bit per kind). */
CUresult sim_free_kind(uint64_t p, unsigned mask)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(p);
	if (!a || a->base != p || !(mask & (1u << a->kind)) || ((mask & ONLY_GRAPH) && !a->graph) ||
	    a->ipc_imported != !!(mask & SIM_FREE_IPC)) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	remove_locked(a);
	pthread_mutex_unlock(&sim_mu);
	sim_log("call free 0x%llx size=%llu", (unsigned long long)p, (unsigned long long)a->size);
	alloc_destroy(a);
	return CUDA_SUCCESS;
}

int sim_cur_dev(void)
{
	struct sim_ctx *c = sim_ctx_current();
	return c ? c->dev : -1;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	SIM_NEED_CTX(d);
	return sim_alloc_new((uint64_t *)dptr, bytesize, A_DEVICE, d, 0, NULL);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			    unsigned int ElementSizeBytes)
{
	SIM_NEED_CTX(d);
	if (!pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	size_t pitch = sim_round_up(WidthInBytes, 512);
	CUresult r = sim_alloc_new((uint64_t *)dptr, pitch * Height, A_DEVICE, d, 0, NULL);
	if (r == CUDA_SUCCESS)
		*pPitch = pitch;
	return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	SIM_NEED_CTX(d);
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return sim_alloc_new((uint64_t *)dptr, bytesize, A_MANAGED, d, flags, NULL);
}

/* NVSHARE_SIM_FREE_GATE: a free of managed memory returns only once that
 * file exists (at most 30 s), so a test can look at what happens while the
 * driver is inside a slow free (an H200 takes ~7 ms per GiB of managed
 * memory, 0.5 ms for device memory). */
static void free_gate(uint64_t p)
{
	const char *f = getenv("NVSHARE_SIM_FREE_GATE");
	if (!f || !*f)
		return;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(p);
	int managed = a && a->base == p && a->kind == A_MANAGED;
	pthread_mutex_unlock(&sim_mu);
	for (int i = 0; managed && i < 30000 && access(f, F_OK) != 0; i++)
		usleep(1000);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	SIM_REQUIRE_INIT();
	if (!dptr)
		return CUDA_SUCCESS;
	/* A free synchronizes: refused during a capture, as CUDA does. */
	CUresult cr = sim_capture_unsafe_call("cuMemFree_v2");
	if (cr != CUDA_SUCCESS)
		return cr;
	free_gate(dptr);
	return sim_free_kind(dptr, 1u << A_DEVICE | 1u << A_MANAGED);
}

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total)
{
	SIM_NEED_CTX(d);
	if (!free_ || !total)
		return CUDA_ERROR_INVALID_VALUE;
	sim_lock();
	uint64_t t = sim_sh->gpu[d].total;
	uint64_t u = sim_gpu_used_locked(d) + sim_sh->gpu[d].resident;
	sim_unlock();
	*total = t;
	*free_ = u >= t ? 0 : t - u;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	SIM_REQUIRE_INIT();
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(dptr);
	if (a) {
		if (pbase)
			*pbase = a->base;
		if (psize)
			*psize = a->size;
	}
	pthread_mutex_unlock(&sim_mu);
	return a ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- host memory ---- */

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	SIM_REQUIRE_INIT();
	return sim_alloc_new((uint64_t *)pp, bytesize, A_HOST, -1, Flags, NULL);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p)
{
	SIM_REQUIRE_INIT();
	return sim_free_kind((uint64_t)(uintptr_t)p, 1u << A_HOST);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	SIM_REQUIRE_INIT();
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked((uint64_t)(uintptr_t)p);
	int ok = a && (a->kind == A_HOST || a->kind == A_HOSTREG);
	pthread_mutex_unlock(&sim_mu);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	SIM_REQUIRE_INIT();
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked((uint64_t)(uintptr_t)p);
	int ok = a && (a->kind == A_HOST || a->kind == A_HOSTREG);
	if (ok && pFlags)
		*pFlags = a->flags;
	pthread_mutex_unlock(&sim_mu);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#ifdef MADV_POPULATE_WRITE
#define SIM_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define SIM_MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Host bytes this process has pinned (cuMemHostRegister), under sim_mu;
 * also in its process entry of the shared state (the stats). */
static uint64_t pinned_bytes;

static void pinned_publish(void)
{
	sim_lock();
	sim_self_locked()->host_pinned = pinned_bytes;
	sim_unlock();
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	SIM_REQUIRE_INIT();
	if (!p || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult cr = sim_capture_unsafe_call("cuMemHostRegister");
	if (cr != CUDA_SUCCESS)
		return cr;
	pthread_mutex_lock(&sim_mu);
	int dup = sim_alloc_find_locked((uint64_t)(uintptr_t)p) != NULL;
	int over = sim_cfg.pin_limit && pinned_bytes + bytesize > sim_cfg.pin_limit;
	if (!dup && !over)
		pinned_bytes += bytesize;
	pthread_mutex_unlock(&sim_mu);
	if (dup)
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (over) {
		sim_log("call cuMemHostRegister %zu bytes refused (NVSHARE_SIM_PIN_LIMIT)",
			bytesize);
		return CUDA_ERROR_OUT_OF_MEMORY; /* as memlock or the cgroup refuse it */
	}
	/* Pinning faults every page in, writable (later copies to it take no
	 * faults); the contents stay as they are. */
	uint64_t q0 = (uint64_t)(uintptr_t)p & ~4095ull;
	(void)madvise((void *)(uintptr_t)q0, (uint64_t)(uintptr_t)p + bytesize - q0,
		      SIM_MADV_POPULATE_WRITE);
	if (sim_cfg.pin_us_per_mib) /* and locks them: what it costs on a real host */
		sim_sleep_until(sim_now() + (bytesize >> 20) * sim_cfg.pin_us_per_mib * 1000);
	pthread_mutex_lock(&sim_mu);
	pinned_publish();
	pthread_mutex_unlock(&sim_mu);
	struct sim_alloc *a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->base = (uint64_t)(uintptr_t)p;
	a->size = bytesize;
	a->kind = A_HOSTREG;
	a->dev = -1;
	a->flags = Flags;
	a->ctx = cur_ctx_or_null();
	pthread_mutex_lock(&sim_mu);
	sim_alloc_insert_locked(a);
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	return cuMemHostRegister_v2(p, bytesize, Flags);
}

CUresult cuMemHostUnregister(void *p)
{
	SIM_REQUIRE_INIT();
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked((uint64_t)(uintptr_t)p);
	if (a && a->kind == A_HOSTREG && a->base == (uint64_t)(uintptr_t)p) {
		pinned_bytes -= pinned_bytes >= a->size ? a->size : pinned_bytes;
		pinned_publish();
	}
	pthread_mutex_unlock(&sim_mu);
	CUresult r = sim_free_kind((uint64_t)(uintptr_t)p, 1u << A_HOSTREG);
	return r == CUDA_SUCCESS ? r : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* ---- graph memory nodes (the nodes themselves: sim_launch.c) ----
 * Simplified like stream-ordered allocation: an allocation node's device
 * memory exists from the node's creation (the real driver fixes the address
 * then and backs it when the graph runs) and a free node frees it at once.
 * A free node accepts only an address an allocation node returned, once;
 * cuMemFree[Async] of such memory works too (allowed for graph memory not
 * freed in its graph). Destroying a graph does not free it. */
CUresult sim_graph_mem_alloc(CUdeviceptr *dptr, size_t bytes, const CUmemPoolProps *pp)
{
	if (!dptr || !pp || pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
	    pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	int p = sim_phys(pp->location.id);
	if (p < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	CUresult r = sim_alloc_new((uint64_t *)dptr, bytes, A_DEVICE, p, 0, NULL);
	if (r == CUDA_SUCCESS) {
		pthread_mutex_lock(&sim_mu);
		struct sim_alloc *a = sim_alloc_find_locked(*dptr);
		if (a)
			a->graph = 1;
		pthread_mutex_unlock(&sim_mu);
	}
	return r;
}

CUresult sim_graph_mem_free(CUdeviceptr dptr)
{
	return sim_free_kind(dptr, 1u << A_DEVICE | ONLY_GRAPH);
}
