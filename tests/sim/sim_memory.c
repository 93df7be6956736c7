/*
 * Simulated GPU: memory.
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
 * A page's local record names its slot; the slot names its owner (pid,
 * allocation id, page), so a page another process evicted is seen as back
 * on the host without telling us.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

int sim_phys(CUdevice d);
CUdevice sim_ordinal(int phys);

enum { A_DEVICE = 1, A_MANAGED, A_HOST, A_HOSTREG, A_VA };

struct sim_pool {
	uint32_t magic;
	int dev; /* physical */
	uint64_t threshold;
};
#define SIM_POOL_MAGIC 0x4c4f4f50u

struct sim_alloc {
	uint64_t base, size;
	int kind;
	int dev;          /* physical GPU, -1 host */
	uint64_t id;
	unsigned flags;
	void *map;        /* what to munmap (NULL: not ours) */
	size_t maplen;
	uint64_t charged; /* device bytes reserved for it */
	struct sim_ctx *ctx;
	struct sim_pool *pool;
	uint32_t npages;  /* managed */
	int32_t *slot;    /* managed: slot index, -1 = host */
	int8_t *pdev;     /* managed: GPU of that slot */
	int last_prefetch; /* managed: last prefetch target ordinal, -1 host, -2 none */
	int graph;         /* device memory of a graph allocation node */
	struct vmap *vmaps; /* VA reservation: what cuMemMap put there */
};

struct vmap {
	uint64_t ptr, size;
	struct sim_vmm *v;
	struct vmap *next;
};

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

static struct sim_alloc *find_locked(uint64_t p)
{
	size_t i = lower_bound(p);
	if (i == 0)
		return NULL;
	struct sim_alloc *a = allocs[i - 1];
	return p < a->base + (a->size ? a->size : 1) ? a : NULL;
}

static int insert_locked(struct sim_alloc *a)
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
static int range_ok(uint64_t p, size_t n)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(p);
	int ok = a && p + n <= a->base + a->size;
	pthread_mutex_unlock(&sim_mu);
	return ok;
}

/* ---- residency (sim_mu and the shared lock held) ---- */

static uint64_t page_bytes(const struct sim_alloc *a, uint32_t i)
{
	uint64_t off = (uint64_t)i * SIM_PAGE;
	return a->size - off < SIM_PAGE ? a->size - off : SIM_PAGE;
}

/* GPU the page is resident on, or -1. Drops stale records (evicted). */
static int page_loc(struct sim_alloc *a, uint32_t i)
{
	int32_t s = a->slot[i];
	if (s < 0)
		return -1;
	int d = a->pdev[i];
	struct sim_slot *sl = &sim_slots(d)[s];
	if (sl->pid == (int32_t)getpid() && sl->alloc_id == a->id && sl->page == i)
		return d;
	a->slot[i] = -1;
	return -1;
}

static void slot_free(int dev, uint32_t s)
{
	struct sim_slot *sl = &sim_slots(dev)[s];
	if (!sl->pid)
		return;
	sim_sh->gpu[dev].resident -= sl->bytes;
	struct sim_proc *p = sim_proc_find_locked(sl->pid);
	if (p)
		p->resident[dev] -= sl->bytes;
	memset(sl, 0, sizeof(*sl));
}

/* Evicts one slot: counted for the GPU and for the owner. Returns bytes. */
static uint64_t evict_slot(int dev, uint32_t s)
{
	struct sim_slot *sl = &sim_slots(dev)[s];
	uint64_t b = sl->bytes;
	struct sim_proc *owner = sim_proc_find_locked(sl->pid);
	sim_sh->gpu[dev].c.evictions++;
	sim_sh->gpu[dev].c.evicted_bytes += b;
	if (owner) {
		owner->c[dev].evictions++;
		owner->c[dev].evicted_bytes += b;
	}
	slot_free(dev, s);
	return b;
}

/* LRU candidates of one GPU, oldest first, excluding [x0, x1) of alloc xid. */
struct lru {
	uint32_t *idx;
	uint32_t n, pos;
	int dev;
	int built;
};

static struct sim_slot *cmp_slots;
static int cmp_lru(const void *x, const void *y)
{
	uint64_t a = cmp_slots[*(const uint32_t *)x].last_use;
	uint64_t b = cmp_slots[*(const uint32_t *)y].last_use;
	return a < b ? -1 : a > b;
}

static void lru_build(struct lru *l, int dev, uint64_t xid, uint32_t x0, uint32_t x1)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	struct sim_slot *s = sim_slots(dev);
	free(l->idx);
	l->idx = malloc(sizeof(uint32_t) * (g->nslots ? g->nslots : 1));
	l->n = l->pos = 0;
	l->dev = dev;
	l->built = 1;
	if (!l->idx)
		return;
	for (uint32_t i = 0; i < g->nslots; i++) {
		if (!s[i].pid)
			continue;
		if (s[i].alloc_id == xid && s[i].page >= x0 && s[i].page < x1)
			continue;
		l->idx[l->n++] = i;
	}
	cmp_slots = s; /* sim_mu is held: no concurrent sort in this process */
	qsort(l->idx, l->n, sizeof(uint32_t), cmp_lru);
}

/* Makes room for `need` more bytes on dev. Returns bytes evicted; *ok
 * says whether it now fits. */
static uint64_t make_room(int dev, uint64_t need, struct lru *l, uint64_t xid, uint32_t x0,
			  uint32_t x1, int *ok)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	uint64_t ev = 0;
	for (;;) {
		uint64_t inuse = sim_gpu_used_locked(dev) + g->resident;
		if (inuse + need <= g->total) {
			*ok = 1;
			return ev;
		}
		if (!l->built)
			lru_build(l, dev, xid, x0, x1);
		while (l->pos < l->n && !sim_slots(dev)[l->idx[l->pos]].pid)
			l->pos++;
		if (l->pos >= l->n) {
			*ok = 0;
			return ev;
		}
		ev += evict_slot(dev, l->idx[l->pos++]);
	}
}

static int slot_alloc(int dev)
{
	struct sim_gpu *g = &sim_sh->gpu[dev];
	struct sim_slot *s = sim_slots(dev);
	for (uint32_t k = 0; k < g->nslots; k++) {
		uint32_t i = (g->slot_hint + k) % g->nslots;
		if (!s[i].pid) {
			g->slot_hint = i + 1;
			return (int)i;
		}
	}
	return -1;
}

uint64_t sim_migrate(uint64_t ptr, uint64_t bytes, int dst, uint64_t start, int kind,
		     uint64_t *moved_out)
{
	uint64_t moved = 0, evicted = 0, peer = 0;
	int from_dev = -1;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(ptr);
	if (!a || a->kind != A_MANAGED || !bytes) {
		pthread_mutex_unlock(&sim_mu);
		if (moved_out)
			*moved_out = 0;
		return start;
	}
	uint64_t end_addr = ptr + bytes > a->base + a->size ? a->base + a->size : ptr + bytes;
	uint32_t p0 = (uint32_t)((ptr - a->base) / SIM_PAGE);
	uint32_t p1 = (uint32_t)((end_addr - a->base + SIM_PAGE - 1) / SIM_PAGE);
	struct lru l = { 0 };
	uint32_t own = p0; /* fallback victims: this range's pages, oldest first */
	sim_lock();
	struct sim_proc *me = sim_self_locked();
	uint64_t now = sim_now();
	for (uint32_t i = p0; i < p1; i++) {
		int cur = page_loc(a, i);
		uint64_t pb = page_bytes(a, i);
		if (cur == dst) {
			if (cur >= 0)
				sim_slots(cur)[a->slot[i]].last_use = now;
			continue;
		}
		if (dst >= 0) {
			int ok;
			evicted += make_room(dst, pb, &l, a->id, p0, p1, &ok);
			while (!ok && own < i) {
				/* The range itself is larger than the GPU:
				 * its earliest pages make way (as UVM would). */
				int oc = page_loc(a, own);
				if (oc == dst) {
					evicted += evict_slot(dst, (uint32_t)a->slot[own]);
					a->slot[own] = -1;
				}
				own++;
				evicted += make_room(dst, pb, &l, a->id, p0, p1, &ok);
			}
			if (!ok)
				break;
		}
		if (cur >= 0) {
			slot_free(cur, (uint32_t)a->slot[i]);
			a->slot[i] = -1;
			from_dev = cur;
			if (dst >= 0)
				peer += pb;
		}
		if (dst >= 0) {
			int s = slot_alloc(dst);
			if (s < 0)
				break;
			struct sim_slot *sl = &sim_slots(dst)[s];
			sl->pid = (int32_t)getpid();
			sl->alloc_id = a->id;
			sl->page = i;
			sl->bytes = pb;
			sl->last_use = now;
			a->slot[i] = s;
			a->pdev[i] = (int8_t)dst;
			sim_sh->gpu[dst].resident += pb;
			me->resident[dst] += pb;
		}
		moved += pb;
	}
	free(l.idx);

	/* Time: evictions are written back first, then the pages move. */
	uint64_t ev_ns = sim_xfer_ns(evicted, sim_cfg.d2h_bps);
	uint64_t mv_ns;
	if (dst < 0)
		mv_ns = sim_xfer_ns(moved, sim_cfg.d2h_bps);
	else if (kind == 1)
		mv_ns = sim_xfer_ns(moved, sim_cfg.fault_bps);
	else
		mv_ns = sim_xfer_ns(moved, sim_cfg.h2d_bps);
	int cdev = dst >= 0 ? dst : from_dev;
	if (cdev >= 0) {
		struct sim_counters *cs[2] = { &sim_sh->gpu[cdev].c, &me->c[cdev] };
		for (int k = 0; k < 2; k++) {
			struct sim_counters *c = cs[k];
			c->evict_ns += ev_ns;
			if (kind == 1) {
				c->fault_bytes += moved;
				c->fault_ns += mv_ns;
			} else if (dst >= 0) {
				c->prefetch_h2d_bytes += moved;
				c->prefetch_h2d_ns += mv_ns;
			} else {
				c->prefetch_d2h_bytes += moved;
				c->prefetch_d2h_ns += mv_ns;
			}
		}
	}
	(void)peer;
	sim_unlock();
	pthread_mutex_unlock(&sim_mu);
	if (moved_out)
		*moved_out = moved;
	return start + ev_ns + mv_ns;
}

void sim_touch(uint64_t ptr, uint64_t bytes, int dev)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(ptr);
	if (a && a->kind == A_MANAGED && bytes) {
		uint64_t e = ptr + bytes > a->base + a->size ? a->base + a->size : ptr + bytes;
		uint64_t now = sim_now();
		sim_lock();
		for (uint32_t i = (uint32_t)((ptr - a->base) / SIM_PAGE);
		     i < (uint32_t)((e - a->base + SIM_PAGE - 1) / SIM_PAGE); i++)
			if (page_loc(a, i) == dev)
				sim_slots(dev)[a->slot[i]].last_use = now;
		sim_unlock();
	}
	pthread_mutex_unlock(&sim_mu);
}

int nvshareSimPageLocation(uint64_t ptr)
{
	sim_state_init();
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(ptr);
	int r = -2;
	if (a && a->kind == A_MANAGED) {
		sim_lock();
		r = page_loc(a, (uint32_t)((ptr - a->base) / SIM_PAGE));
		sim_unlock();
	}
	pthread_mutex_unlock(&sim_mu);
	return r;
}

/* ---- device memory accounting ---- */

int sim_mem_reserve(int dev, uint64_t bytes)
{
	struct lru l = { 0 };
	int ok;
	sim_lock();
	uint64_t ev = make_room(dev, bytes, &l, 0, 0, 0, &ok);
	if (ev) {
		sim_sh->gpu[dev].c.evict_ns += sim_xfer_ns(ev, sim_cfg.d2h_bps);
	}
	if (ok)
		sim_self_locked()->used[dev] += bytes;
	sim_unlock();
	free(l.idx);
	return ok ? 0 : -1;
}

void sim_mem_unreserve(int dev, uint64_t bytes)
{
	sim_lock();
	struct sim_proc *p = sim_self_locked();
	p->used[dev] = p->used[dev] >= bytes ? p->used[dev] - bytes : 0;
	sim_unlock();
}

static struct sim_ctx *cur_ctx_or_null(void)
{
	return sim_ctx_current();
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static size_t round_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* Creates an allocation of `kind` on phys GPU dev (or host, dev -1). */
static CUresult alloc_new(uint64_t *out, size_t size, int kind, int dev, unsigned flags,
			  struct sim_pool *pool)
{
	if (!out || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	size_t len = round_up(size, 4096);
	uint64_t charge = kind == A_DEVICE ? round_up(size, SIM_PAGE) : 0;
	if (charge && sim_mem_reserve(dev, charge) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct sim_alloc *a = calloc(1, sizeof(*a));
	void *m = map_anon(len);
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
		if (!a->slot || !a->pdev) {
			free(a->slot);
			free(a->pdev);
			free(a);
			munmap(m, len);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (uint32_t i = 0; i < a->npages; i++)
			a->slot[i] = -1;
	}
	pthread_mutex_lock(&sim_mu);
	int r = insert_locked(a);
	pthread_mutex_unlock(&sim_mu);
	if (r != 0) {
		free(a->slot);
		free(a->pdev);
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

static void release_pages(struct sim_alloc *a)
{
	if (a->kind != A_MANAGED)
		return;
	sim_lock();
	for (uint32_t i = 0; i < a->npages; i++) {
		int d = page_loc(a, i);
		if (d >= 0)
			slot_free(d, (uint32_t)a->slot[i]);
	}
	sim_unlock();
}

static void vmm_unmap_range(struct sim_alloc *a, uint64_t p, uint64_t n);

static void alloc_destroy(struct sim_alloc *a)
{
	if (a->kind == A_VA) {
		pthread_mutex_lock(&sim_mu);
		vmm_unmap_range(a, a->base, a->size);
		pthread_mutex_unlock(&sim_mu);
	}
	release_pages(a);
	if (a->charged && a->dev >= 0)
		sim_mem_unreserve(a->dev, a->charged);
	if (a->map)
		munmap(a->map, a->maplen);
	free(a->slot);
	free(a->pdev);
	free(a);
}

/* free_kind mask bit: only memory a graph allocation node returned. */
#define ONLY_GRAPH (1u << 31)

/* Removes the allocation starting exactly at p, of one of the kinds in
 * mask (bit per kind). */
static CUresult free_kind(uint64_t p, unsigned mask)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(p);
	if (!a || a->base != p || !(mask & (1u << a->kind)) || ((mask & ONLY_GRAPH) && !a->graph)) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	remove_locked(a);
	pthread_mutex_unlock(&sim_mu);
	sim_log("call free 0x%llx size=%llu", (unsigned long long)p, (unsigned long long)a->size);
	alloc_destroy(a);
	return CUDA_SUCCESS;
}

static int cur_dev(void)
{
	struct sim_ctx *c = sim_ctx_current();
	return c ? c->dev : -1;
}

#define NEED_CTX(d)                                 \
	SIM_REQUIRE_INIT();                         \
	int d = cur_dev();                          \
	if (d < 0)                                  \
		return CUDA_ERROR_INVALID_CONTEXT

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	NEED_CTX(d);
	return alloc_new((uint64_t *)dptr, bytesize, A_DEVICE, d, 0, NULL);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
			    unsigned int ElementSizeBytes)
{
	NEED_CTX(d);
	if (!pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	size_t pitch = round_up(WidthInBytes, 512);
	CUresult r = alloc_new((uint64_t *)dptr, pitch * Height, A_DEVICE, d, 0, NULL);
	if (r == CUDA_SUCCESS)
		*pPitch = pitch;
	return r;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	NEED_CTX(d);
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_new((uint64_t *)dptr, bytesize, A_MANAGED, d, flags, NULL);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	SIM_REQUIRE_INIT();
	if (!dptr)
		return CUDA_SUCCESS;
	return free_kind(dptr, 1u << A_DEVICE | 1u << A_MANAGED);
}

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total)
{
	NEED_CTX(d);
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
	struct sim_alloc *a = find_locked(dptr);
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
	return alloc_new((uint64_t *)pp, bytesize, A_HOST, -1, Flags, NULL);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return cuMemHostAlloc(pp, bytesize, 0);
}

CUresult cuMemFreeHost(void *p)
{
	SIM_REQUIRE_INIT();
	return free_kind((uint64_t)(uintptr_t)p, 1u << A_HOST);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	SIM_REQUIRE_INIT();
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked((uint64_t)(uintptr_t)p);
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
	struct sim_alloc *a = find_locked((uint64_t)(uintptr_t)p);
	int ok = a && (a->kind == A_HOST || a->kind == A_HOSTREG);
	if (ok && pFlags)
		*pFlags = a->flags;
	pthread_mutex_unlock(&sim_mu);
	return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	SIM_REQUIRE_INIT();
	if (!p || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	int dup = find_locked((uint64_t)(uintptr_t)p) != NULL;
	pthread_mutex_unlock(&sim_mu);
	if (dup)
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
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
	insert_locked(a);
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
	CUresult r = free_kind((uint64_t)(uintptr_t)p, 1u << A_HOSTREG);
	return r == CUDA_SUCCESS ? r : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* ---- pools and stream-ordered allocation ---- */

static struct sim_pool default_pool[SIM_MAX_GPUS];
static struct sim_pool *current_pool[SIM_MAX_GPUS];

static struct sim_pool *pool_default(int phys)
{
	struct sim_pool *p = &default_pool[phys];
	p->magic = SIM_POOL_MAGIC;
	p->dev = phys;
	return p;
}

static struct sim_pool *pool_check(CUmemoryPool h)
{
	struct sim_pool *p = (struct sim_pool *)h;
	return p && p->magic == SIM_POOL_MAGIC ? p : NULL;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	SIM_REQUIRE_INIT();
	int p = sim_phys(dev);
	if (p < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool_out)
		return CUDA_ERROR_INVALID_VALUE;
	*pool_out = (CUmemoryPool)pool_default(p);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	SIM_REQUIRE_INIT();
	int p = sim_phys(dev);
	if (p < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!pool)
		return CUDA_ERROR_INVALID_VALUE;
	*pool = (CUmemoryPool)(current_pool[p] ? current_pool[p] : pool_default(p));
	return CUDA_SUCCESS;
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	SIM_REQUIRE_INIT();
	int p = sim_phys(dev);
	struct sim_pool *x = pool_check(pool);
	if (p < 0 || !x || x->dev != p)
		return CUDA_ERROR_INVALID_VALUE;
	current_pool[p] = x;
	return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	SIM_REQUIRE_INIT();
	if (!pool || !poolProps || poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	int p = sim_phys(poolProps->location.id);
	if (p < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	struct sim_pool *x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->magic = SIM_POOL_MAGIC;
	x->dev = p;
	sim_keep(x);
	*pool = (CUmemoryPool)x;
	return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	struct sim_pool *x = pool_check(pool);
	if (!x || x == &default_pool[x->dev])
		return CUDA_ERROR_INVALID_VALUE;
	x->magic = 0; /* never freed: allocations may still name it */
	return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct sim_pool *x = pool_check(pool);
	if (!x || !value)
		return CUDA_ERROR_INVALID_VALUE;
	if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
		x->threshold = *(cuuint64_t *)value;
	return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	struct sim_pool *x = pool_check(pool);
	if (!x || !value)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attr) {
	case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
		*(cuuint64_t *)value = x->threshold;
		break;
	case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
	case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
		*(int *)value = 1;
		break;
	default:
		*(cuuint64_t *)value = 0;
	}
	return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	return pool_check(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
	return pool_check(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
	if (!pool_check(memPool) || !flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return CUDA_SUCCESS;
}

/* Stream-ordered allocation, simplified: the memory exists at once and a
 * free takes effect at once (after the stream's queued work, which the
 * simulated kernels do not read anyway). */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, struct sim_pool *pool, CUstream h,
			    int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!pool)
		pool = current_pool[s->ctx->dev] ? current_pool[s->ctx->dev] : pool_default(s->ctx->dev);
	return alloc_new((uint64_t *)dptr, bytesize, A_DEVICE, pool->dev, 0, pool);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(dptr, bytesize, NULL, hStream, 0);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(dptr, bytesize, NULL, hStream, 1);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				 CUstream hStream)
{
	struct sim_pool *x = pool_check(pool);
	return x ? alloc_async(dptr, bytesize, x, hStream, 0) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
				      CUstream hStream)
{
	struct sim_pool *x = pool_check(pool);
	return x ? alloc_async(dptr, bytesize, x, hStream, 1) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	if (!sim_stream_get(h, pt))
		return CUDA_ERROR_INVALID_HANDLE;
	return free_kind(dptr, 1u << A_DEVICE);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 0);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 1);
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
	CUresult r = alloc_new((uint64_t *)dptr, bytes, A_DEVICE, p, 0, NULL);
	if (r == CUDA_SUCCESS) {
		pthread_mutex_lock(&sim_mu);
		struct sim_alloc *a = find_locked(*dptr);
		if (a)
			a->graph = 1;
		pthread_mutex_unlock(&sim_mu);
	}
	return r;
}

CUresult sim_graph_mem_free(CUdeviceptr dptr)
{
	return free_kind(dptr, 1u << A_DEVICE | ONLY_GRAPH);
}

/* ---- virtual memory management ----
 * A physical handle is a memfd (so mappings really share bytes); a
 * reservation is a PROT_NONE mapping; cuMemMap maps the memfd over it. */

struct sim_vmm {
	uint32_t magic;
	int fd;
	size_t size;
	int dev; /* physical, -1 host */
	int maps;
	int released;
	CUmemAllocationProp prop;
};
#define SIM_VMM_MAGIC 0x4d4d5653u

static struct sim_vmm *vmm_check(CUmemGenericAllocationHandle h)
{
	struct sim_vmm *v = (struct sim_vmm *)(uintptr_t)h;
	return v && v->magic == SIM_VMM_MAGIC ? v : NULL;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
				       CUmemAllocationGranularity_flags option)
{
	SIM_REQUIRE_INIT();
	if (!granularity || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = SIM_PAGE;
	return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	SIM_REQUIRE_INIT();
	if (!handle || !prop || !size || size % SIM_PAGE)
		return CUDA_ERROR_INVALID_VALUE;
	int dev = -1;
	if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
		dev = sim_phys(prop->location.id);
		if (dev < 0)
			return CUDA_ERROR_INVALID_DEVICE;
	}
	if (dev >= 0 && sim_mem_reserve(dev, size) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct sim_vmm *v = calloc(1, sizeof(*v));
	int fd = memfd_create("nvshare-sim-vmm", MFD_CLOEXEC);
	if (!v || fd < 0 || ftruncate(fd, (off_t)size) != 0) {
		free(v);
		if (fd >= 0)
			close(fd);
		if (dev >= 0)
			sim_mem_unreserve(dev, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	v->magic = SIM_VMM_MAGIC;
	v->fd = fd;
	v->size = size;
	v->dev = dev;
	v->prop = *prop;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
	sim_log("call cuMemCreate dev=%d size=%zu", dev, size);
	return CUDA_SUCCESS;
}

static void vmm_maybe_free(struct sim_vmm *v)
{
	if (!v->released || v->maps > 0)
		return;
	if (v->dev >= 0)
		sim_mem_unreserve(v->dev, v->size);
	close(v->fd);
	v->magic = 0;
	free(v);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	SIM_REQUIRE_INIT();
	pthread_mutex_lock(&sim_mu);
	struct sim_vmm *v = vmm_check(handle);
	if (!v || v->released) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	v->released = 1;
	vmm_maybe_free(v);
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

/* Drops the mappings inside [p, p+n); a released handle whose last mapping
 * goes away frees its physical memory (the driver's rule). sim_mu held. */
static void vmm_unmap_range(struct sim_alloc *a, uint64_t p, uint64_t n)
{
	for (struct vmap **pm = &a->vmaps; *pm;) {
		struct vmap *m = *pm;
		if (m->ptr >= p && m->ptr + m->size <= p + n) {
			*pm = m->next;
			m->v->maps--;
			vmm_maybe_free(m->v);
			free(m);
		} else {
			pm = &m->next;
		}
	}
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags)
{
	SIM_REQUIRE_INIT();
	if (!ptr || !size || size % SIM_PAGE)
		return CUDA_ERROR_INVALID_VALUE;
	size_t al = alignment > SIM_PAGE ? alignment : SIM_PAGE;
	size_t len = size + al;
	char *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t b = ((uintptr_t)m + al - 1) / al * al;
	if (b > (uintptr_t)m)
		munmap(m, b - (uintptr_t)m);
	uintptr_t e = (uintptr_t)m + len;
	if (e > b + size)
		munmap((void *)(b + size), e - (b + size));
	struct sim_alloc *a = calloc(1, sizeof(*a));
	if (!a) {
		munmap((void *)b, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->base = b;
	a->size = size;
	a->kind = A_VA;
	a->dev = -1;
	a->map = (void *)b;
	a->maplen = size;
	a->ctx = cur_ctx_or_null();
	a->last_prefetch = -2;
	pthread_mutex_lock(&sim_mu);
	insert_locked(a);
	pthread_mutex_unlock(&sim_mu);
	*ptr = b;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	SIM_REQUIRE_INIT();
	return free_kind(ptr, 1u << A_VA);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags)
{
	SIM_REQUIRE_INIT();
	pthread_mutex_lock(&sim_mu);
	struct sim_vmm *v = vmm_check(handle);
	struct sim_alloc *a = find_locked(ptr);
	if (!v || !a || a->kind != A_VA || ptr + size > a->base + a->size || offset + size > v->size ||
	    size % SIM_PAGE || offset % SIM_PAGE) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	void *m = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		       v->fd, (off_t)offset);
	if (m == MAP_FAILED) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	struct vmap *vm = calloc(1, sizeof(*vm));
	if (vm) {
		vm->ptr = ptr;
		vm->size = size;
		vm->v = v;
		vm->next = a->vmaps;
		a->vmaps = vm;
		v->maps++;
	}
	a->dev = v->dev;
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	SIM_REQUIRE_INIT();
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(ptr);
	if (!a || a->kind != A_VA) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
	     MAP_NORESERVE, -1, 0);
	vmm_unmap_range(a, ptr, size);
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	SIM_REQUIRE_INIT();
	return range_ok(ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
						CUmemGenericAllocationHandle handle)
{
	struct sim_vmm *v = vmm_check(handle);
	if (!v || !prop)
		return CUDA_ERROR_INVALID_VALUE;
	*prop = v->prop;
	return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
				      CUmemAllocationHandleType handleType,
				      unsigned long long flags)
{
	struct sim_vmm *v = vmm_check(handle);
	if (!v || !shareableHandle)
		return CUDA_ERROR_INVALID_VALUE;
	if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	*(int *)shareableHandle = dup(v->fd);
	return CUDA_SUCCESS;
}

/* ---- arrays ---- */

struct sim_array {
	uint32_t magic;
	CUDA_ARRAY3D_DESCRIPTOR d;
	size_t elem, row, bytes;
	char *data;
	int dev;
};
#define SIM_ARRAY_MAGIC 0x59525241u

static struct sim_array *array_check(CUarray h)
{
	struct sim_array *a = (struct sim_array *)h;
	return a && a->magic == SIM_ARRAY_MAGIC ? a : NULL;
}

static size_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT: return 4;
	default: return 4;
	}
}

static CUresult array_new(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	NEED_CTX(dev);
	if (!pHandle || !d || !d->Width || !d->NumChannels)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_array *a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->magic = SIM_ARRAY_MAGIC;
	a->d = *d;
	a->elem = format_bytes(d->Format) * d->NumChannels;
	a->row = a->elem * d->Width;
	a->bytes = a->row * (d->Height ? d->Height : 1) * (d->Depth ? d->Depth : 1);
	a->dev = dev;
	if (sim_mem_reserve(dev, round_up(a->bytes, SIM_PAGE)) != 0) {
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->data = map_anon(round_up(a->bytes, 4096));
	if (!a->data) {
		sim_mem_unreserve(dev, round_up(a->bytes, SIM_PAGE));
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pHandle = (CUarray)a;
	return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_ARRAY3D_DESCRIPTOR d = { .Width = p->Width, .Height = p->Height, .Depth = 0,
				      .Format = p->Format, .NumChannels = p->NumChannels };
	return array_new(pHandle, &d);
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
	return array_new(pHandle, p);
}

CUresult cuArrayDestroy(CUarray hArray)
{
	SIM_REQUIRE_INIT();
	struct sim_array *a = array_check(hArray);
	if (!a)
		return CUDA_ERROR_INVALID_HANDLE;
	a->magic = 0;
	sim_mem_unreserve(a->dev, round_up(a->bytes, SIM_PAGE));
	munmap(a->data, round_up(a->bytes, 4096));
	free(a);
	return CUDA_SUCCESS;
}

CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *p, CUarray hArray)
{
	struct sim_array *a = array_check(hArray);
	if (!a || !p)
		return CUDA_ERROR_INVALID_HANDLE;
	p->Width = a->d.Width;
	p->Height = a->d.Height;
	p->Format = a->d.Format;
	p->NumChannels = a->d.NumChannels;
	return CUDA_SUCCESS;
}

CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *p, CUarray hArray)
{
	struct sim_array *a = array_check(hArray);
	if (!a || !p)
		return CUDA_ERROR_INVALID_HANDLE;
	*p = a->d;
	return CUDA_SUCCESS;
}

/* ---- copies and sets ----
 * Bytes move at call time. Synchronous forms first wait for the (legacy or
 * per-thread) default stream, as the real ones do; asynchronous forms return
 * at once. Copies take no simulated time. */

static CUresult sync_default(int pt)
{
	struct sim_stream *s = sim_stream_get(NULL, pt);
	if (!s)
		return CUDA_ERROR_INVALID_CONTEXT;
	sim_sleep_until(sim_stream_ready(s));
	return CUDA_SUCCESS;
}

static CUresult async_check(CUstream h, int pt)
{
	return sim_stream_get(h, pt) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

#define DP(x) ((void *)(uintptr_t)(x))

static CUresult copy_bytes(uint64_t dst, int dst_dev, uint64_t src, int src_dev, size_t n)
{
	if (!n)
		return CUDA_SUCCESS;
	if ((dst_dev && !range_ok(dst, n)) || (src_dev && !range_ok(src, n)))
		return CUDA_ERROR_INVALID_VALUE;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	memmove(DP(dst), DP(src), n);
	return CUDA_SUCCESS;
}

/* Sync (pt: 0 legacy, 1 per-thread) or async (stream h) prologue. */
#define SYNC_PRE(pt)                                \
	SIM_REQUIRE_INIT();                         \
	{                                           \
		CUresult r_ = sync_default(pt);     \
		if (r_ != CUDA_SUCCESS)             \
			return r_;                  \
	}
#define ASYNC_PRE(h, pt)                            \
	SIM_REQUIRE_INIT();                         \
	{                                           \
		CUresult r_ = async_check(h, pt);   \
		if (r_ != CUDA_SUCCESS)             \
			return r_;                  \
	}

#define COPY_FUNCS(name, dsttype, dexpr, srctype, sexpr, dflag, sflag)                      \
	CUresult name##_v2(dsttype dst, srctype src, size_t n)                              \
	{                                                                                    \
		SYNC_PRE(0);                                                                 \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                            \
	}                                                                                    \
	CUresult name##_v2_ptds(dsttype dst, srctype src, size_t n)                         \
	{                                                                                    \
		SYNC_PRE(1);                                                                 \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                            \
	}                                                                                    \
	CUresult name##Async_v2(dsttype dst, srctype src, size_t n, CUstream h)             \
	{                                                                                    \
		ASYNC_PRE(h, 0);                                                             \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                            \
	}                                                                                    \
	CUresult name##Async_v2_ptsz(dsttype dst, srctype src, size_t n, CUstream h)        \
	{                                                                                    \
		ASYNC_PRE(h, 1);                                                             \
		return copy_bytes(dexpr, dflag, sexpr, sflag, n);                            \
	}

COPY_FUNCS(cuMemcpyHtoD, CUdeviceptr, dst, const void *, (uint64_t)(uintptr_t)src, 1, 0)
COPY_FUNCS(cuMemcpyDtoH, void *, (uint64_t)(uintptr_t)dst, CUdeviceptr, src, 0, 1)
COPY_FUNCS(cuMemcpyDtoD, CUdeviceptr, dst, CUdeviceptr, src, 1, 1)

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	SYNC_PRE(0);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	SYNC_PRE(1);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
	ASYNC_PRE(h, 0);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h)
{
	ASYNC_PRE(h, 1);
	return copy_bytes(dst, 0, src, 0, n);
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n)
{
	SYNC_PRE(0);
	return copy_bytes(dst, 1, src, 1, n);
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n)
{
	SYNC_PRE(1);
	return copy_bytes(dst, 1, src, 1, n);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
			   CUstream h)
{
	ASYNC_PRE(h, 0);
	return copy_bytes(dst, 1, src, 1, n);
}

CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc,
				size_t n, CUstream h)
{
	ASYNC_PRE(h, 1);
	return copy_bytes(dst, 1, src, 1, n);
}

/* Array <-> linear copies. */
static CUresult array_span(CUarray h, size_t off, size_t n, char **p)
{
	struct sim_array *a = array_check(h);
	if (!a || off + n > a->bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*p = a->data + off;
	return CUDA_SUCCESS;
}

#define ARRAY_COPY(name, pre, params, body)     \
	CUresult name params                    \
	{                                       \
		pre;                            \
		char *ap;                       \
		body                            \
	}

ARRAY_COPY(cuMemcpyHtoA_v2, SYNC_PRE(0), (CUarray dstArray, size_t off, const void *src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap); if (r) return r; memcpy(ap, src, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyHtoA_v2_ptds, SYNC_PRE(1),
	   (CUarray dstArray, size_t off, const void *src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap); if (r) return r; memcpy(ap, src, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoH_v2, SYNC_PRE(0), (void *dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap); if (r) return r; memcpy(dst, ap, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoH_v2_ptds, SYNC_PRE(1), (void *dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap); if (r) return r; memcpy(dst, ap, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyHtoAAsync_v2, ASYNC_PRE(h, 0),
	   (CUarray dstArray, size_t off, const void *src, size_t n, CUstream h),
	   CUresult r = array_span(dstArray, off, n, &ap); if (r) return r; memcpy(ap, src, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyHtoAAsync_v2_ptsz, ASYNC_PRE(h, 1),
	   (CUarray dstArray, size_t off, const void *src, size_t n, CUstream h),
	   CUresult r = array_span(dstArray, off, n, &ap); if (r) return r; memcpy(ap, src, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoHAsync_v2, ASYNC_PRE(h, 0),
	   (void *dst, CUarray srcArray, size_t off, size_t n, CUstream h),
	   CUresult r = array_span(srcArray, off, n, &ap); if (r) return r; memcpy(dst, ap, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoHAsync_v2_ptsz, ASYNC_PRE(h, 1),
	   (void *dst, CUarray srcArray, size_t off, size_t n, CUstream h),
	   CUresult r = array_span(srcArray, off, n, &ap); if (r) return r; memcpy(dst, ap, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyDtoA_v2, SYNC_PRE(0),
	   (CUarray dstArray, size_t off, CUdeviceptr src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap); if (r) return r;
	   if (!range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE; memcpy(ap, DP(src), n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyDtoA_v2_ptds, SYNC_PRE(1),
	   (CUarray dstArray, size_t off, CUdeviceptr src, size_t n),
	   CUresult r = array_span(dstArray, off, n, &ap); if (r) return r;
	   if (!range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE; memcpy(ap, DP(src), n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoD_v2, SYNC_PRE(0),
	   (CUdeviceptr dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap); if (r) return r;
	   if (!range_ok(dst, n)) return CUDA_ERROR_INVALID_VALUE; memcpy(DP(dst), ap, n);
	   return CUDA_SUCCESS;)
ARRAY_COPY(cuMemcpyAtoD_v2_ptds, SYNC_PRE(1),
	   (CUdeviceptr dst, CUarray srcArray, size_t off, size_t n),
	   CUresult r = array_span(srcArray, off, n, &ap); if (r) return r;
	   if (!range_ok(dst, n)) return CUDA_ERROR_INVALID_VALUE; memcpy(DP(dst), ap, n);
	   return CUDA_SUCCESS;)

static CUresult atoa(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
	char *d, *s;
	CUresult r = array_span(dst, doff, n, &d);
	if (!r)
		r = array_span(src, soff, n, &s);
	if (r)
		return r;
	memmove(d, s, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
	SYNC_PRE(0);
	return atoa(dst, doff, src, soff, n);
}

CUresult cuMemcpyAtoA_v2_ptds(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
	SYNC_PRE(1);
	return atoa(dst, doff, src, soff, n);
}

/* 2D/3D copies, every memory type. */
struct side {
	char *base;
	size_t pitch, height;
};

static CUresult resolve_side(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr,
			     size_t pitch, size_t height, struct side *s)
{
	switch (t) {
	case CU_MEMORYTYPE_HOST:
		s->base = (char *)host;
		break;
	case CU_MEMORYTYPE_DEVICE:
	case CU_MEMORYTYPE_UNIFIED:
		s->base = (char *)DP(dev);
		break;
	case CU_MEMORYTYPE_ARRAY: {
		struct sim_array *a = array_check(arr);
		if (!a)
			return CUDA_ERROR_INVALID_VALUE;
		s->base = a->data;
		s->pitch = a->row;
		s->height = a->d.Height ? a->d.Height : 1;
		return CUDA_SUCCESS;
	}
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!s->base)
		return CUDA_ERROR_INVALID_VALUE;
	s->pitch = pitch;
	s->height = height;
	return CUDA_SUCCESS;
}

static CUresult copy3d(const CUDA_MEMCPY3D *c)
{
	if (!c)
		return CUDA_ERROR_INVALID_VALUE;
	struct side s, d;
	size_t depth = c->Depth ? c->Depth : 1, h = c->Height ? c->Height : 1;
	CUresult r = resolve_side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray,
				  c->srcPitch ? c->srcPitch : c->WidthInBytes,
				  c->srcHeight ? c->srcHeight : h, &s);
	if (!r)
		r = resolve_side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray,
				 c->dstPitch ? c->dstPitch : c->WidthInBytes,
				 c->dstHeight ? c->dstHeight : h, &d);
	if (r)
		return r;
	for (size_t z = 0; z < depth; z++)
		for (size_t y = 0; y < h; y++) {
			char *dp = d.base + ((c->dstZ + z) * d.height + c->dstY + y) * d.pitch +
				   c->dstXInBytes;
			const char *sp = s.base + ((c->srcZ + z) * s.height + c->srcY + y) * s.pitch +
					 c->srcXInBytes;
			memmove(dp, sp, c->WidthInBytes);
		}
	return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_MEMCPY3D c = {
		.srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
		.srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcArray = p->srcArray,
		.srcPitch = p->srcPitch, .srcHeight = p->Height + p->srcY,
		.dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType,
		.dstHost = p->dstHost, .dstDevice = p->dstDevice, .dstArray = p->dstArray,
		.dstPitch = p->dstPitch, .dstHeight = p->Height + p->dstY,
		.WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = 1,
	};
	return copy3d(&c);
}

static CUresult copy3d_peer(const CUDA_MEMCPY3D_PEER *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	CUDA_MEMCPY3D c = {
		.srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ,
		.srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
		.srcArray = p->srcArray, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
		.dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ,
		.dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
		.dstArray = p->dstArray, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
		.WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth,
	};
	return copy3d(&c);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) { SYNC_PRE(0); return copy2d(p); }
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p) { SYNC_PRE(1); return copy2d(p); }
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) { SYNC_PRE(0); return copy2d(p); }
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p) { SYNC_PRE(1); return copy2d(p); }
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream h) { ASYNC_PRE(h, 0); return copy2d(p); }
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream h) { ASYNC_PRE(h, 1); return copy2d(p); }
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p) { SYNC_PRE(0); return copy3d(p); }
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p) { SYNC_PRE(1); return copy3d(p); }
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream h) { ASYNC_PRE(h, 0); return copy3d(p); }
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream h) { ASYNC_PRE(h, 1); return copy3d(p); }
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p) { SYNC_PRE(0); return copy3d_peer(p); }
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p) { SYNC_PRE(1); return copy3d_peer(p); }
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream h) { ASYNC_PRE(h, 0); return copy3d_peer(p); }
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream h) { ASYNC_PRE(h, 1); return copy3d_peer(p); }

/* Memsets: width elements of `size` bytes, height rows `pitch` apart. */
static CUresult set2d(CUdeviceptr dst, size_t pitch, unsigned v, size_t size, size_t w, size_t h)
{
	if (!w || !h)
		return CUDA_SUCCESS;
	if (h > 1 && pitch < w * size)
		return CUDA_ERROR_INVALID_VALUE;
	if (!range_ok(dst, (h - 1) * pitch + w * size))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t y = 0; y < h; y++) {
		char *row = (char *)DP(dst) + y * pitch;
		if (size == 1) {
			memset(row, (int)v, w);
		} else if (size == 2) {
			uint16_t x = (uint16_t)v;
			for (size_t i = 0; i < w; i++)
				memcpy(row + 2 * i, &x, 2);
		} else {
			uint32_t x = v;
			for (size_t i = 0; i < w; i++)
				memcpy(row + 4 * i, &x, 4);
		}
	}
	return CUDA_SUCCESS;
}

#define SET_FUNCS(bits, T, size)                                                              \
	CUresult cuMemsetD##bits##_v2(CUdeviceptr d, T v, size_t n)                          \
	{                                                                                     \
		SYNC_PRE(0);                                                                  \
		return set2d(d, 0, v, size, n, 1);                                            \
	}                                                                                     \
	CUresult cuMemsetD##bits##_v2_ptds(CUdeviceptr d, T v, size_t n)                     \
	{                                                                                     \
		SYNC_PRE(1);                                                                  \
		return set2d(d, 0, v, size, n, 1);                                            \
	}                                                                                     \
	CUresult cuMemsetD##bits##Async(CUdeviceptr d, T v, size_t n, CUstream h)            \
	{                                                                                     \
		ASYNC_PRE(h, 0);                                                              \
		return set2d(d, 0, v, size, n, 1);                                            \
	}                                                                                     \
	CUresult cuMemsetD##bits##Async_ptsz(CUdeviceptr d, T v, size_t n, CUstream h)       \
	{                                                                                     \
		ASYNC_PRE(h, 1);                                                              \
		return set2d(d, 0, v, size, n, 1);                                            \
	}                                                                                     \
	CUresult cuMemsetD2D##bits##_v2(CUdeviceptr d, size_t p, T v, size_t w, size_t h)    \
	{                                                                                     \
		SYNC_PRE(0);                                                                  \
		return set2d(d, p, v, size, w, h);                                            \
	}                                                                                     \
	CUresult cuMemsetD2D##bits##_v2_ptds(CUdeviceptr d, size_t p, T v, size_t w, size_t h) \
	{                                                                                     \
		SYNC_PRE(1);                                                                  \
		return set2d(d, p, v, size, w, h);                                            \
	}                                                                                     \
	CUresult cuMemsetD2D##bits##Async(CUdeviceptr d, size_t p, T v, size_t w, size_t h,  \
					  CUstream s)                                         \
	{                                                                                     \
		ASYNC_PRE(s, 0);                                                              \
		return set2d(d, p, v, size, w, h);                                            \
	}                                                                                     \
	CUresult cuMemsetD2D##bits##Async_ptsz(CUdeviceptr d, size_t p, T v, size_t w,       \
					       size_t h, CUstream s)                          \
	{                                                                                     \
		ASYNC_PRE(s, 1);                                                              \
		return set2d(d, p, v, size, w, h);                                            \
	}

SET_FUNCS(8, unsigned char, 1)
SET_FUNCS(16, unsigned short, 2)
SET_FUNCS(32, unsigned int, 4)

/* ---- pointer attributes ---- */

static CUresult attr_one(void *data, CUpointer_attribute attr, uint64_t p, struct sim_alloc *a)
{
	int managed = a->kind == A_MANAGED;
	int hostmem = a->kind == A_HOST || a->kind == A_HOSTREG;
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)a->ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = hostmem ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = p;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (!hostmem && !managed)
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = DP(p);
		break;
	case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = 1;
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a->id;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(int *)data = managed;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
		int d = a->dev >= 0 ? sim_ordinal(a->dev) : (a->ctx ? sim_ordinal(a->ctx->dev) : 0);
		*(int *)data = d;
		break;
	}
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = a->kind == A_DEVICE && !a->pool;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(void **)data = DP(a->base);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a->size;
		break;
	case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = (CUmemoryPool)a->pool;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
		*(size_t *)data = a->size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
		*(void **)data = DP(a->base);
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
		*(unsigned long long *)data = a->id;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(ptr);
	CUresult r = a ? attr_one(data, attribute, ptr, a) : CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&sim_mu);
	return r;
}

/* Unlike the single form, unknown pointers are not an error: attributes get
 * zero values (documented driver behaviour). */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
				void **data, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	if (!attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(ptr);
	for (unsigned i = 0; i < numAttributes; i++) {
		if (!data[i])
			continue;
		if (!a || attr_one(data[i], attributes[i], ptr, a) != CUDA_SUCCESS) {
			switch (attributes[i]) {
			case CU_POINTER_ATTRIBUTE_CONTEXT:
			case CU_POINTER_ATTRIBUTE_HOST_POINTER:
			case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
			case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
			case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
				*(void **)data[i] = NULL;
				break;
			case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
			case CU_POINTER_ATTRIBUTE_BUFFER_ID:
			case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
			case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
			case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
			case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
				*(unsigned long long *)data[i] = 0;
				break;
			case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
				*(int *)data[i] = -2;
				break;
			default:
				*(unsigned *)data[i] = 0;
			}
		}
	}
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	return range_ok(ptr, 1) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- managed-memory hints and prefetch ---- */

static int managed_range(uint64_t p, size_t n)
{
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(p);
	int ok = a && a->kind == A_MANAGED && p + n <= a->base + a->size;
	pthread_mutex_unlock(&sim_mu);
	return ok;
}

CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
	SIM_REQUIRE_INIT();
	if (!managed_range(devPtr, count))
		return CUDA_ERROR_INVALID_VALUE;
	sim_log("call cuMemAdvise 0x%llx %zu advice=%d dev=%d", (unsigned long long)devPtr, count,
		(int)advice, device);
	return CUDA_SUCCESS;
}

CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
			CUmemLocation location)
{
	SIM_REQUIRE_INIT();
	if (!managed_range(devPtr, count))
		return CUDA_ERROR_INVALID_VALUE;
	sim_log("call cuMemAdvise_v2 0x%llx %zu advice=%d loc=%d/%d", (unsigned long long)devPtr,
		count, (int)advice, (int)location.type, location.id);
	return CUDA_SUCCESS;
}

/* dst_ord: device ordinal or CU_DEVICE_CPU. */
static CUresult prefetch(CUdeviceptr p, size_t n, int dst_ord, CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	int dst = -1;
	if (dst_ord != CU_DEVICE_CPU) {
		dst = sim_phys(dst_ord);
		if (dst < 0)
			return CUDA_ERROR_INVALID_DEVICE;
	}
	if (!managed_range(p, n))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(p);
	if (a)
		a->last_prefetch = dst_ord;
	pthread_mutex_unlock(&sim_mu);
	sim_stream_admit(s);
	uint64_t start = sim_stream_ready(s), moved = 0;
	uint64_t end = sim_migrate(p, n, dst, start, 0, &moved);
	sim_stream_enqueue(s, end, 1);
	sim_lock();
	uint64_t seq = ++sim_sh->prefetch_seq;
	struct nvshare_sim_prefetch *r = &sim_sh->prefetch[(seq - 1) % SIM_PREFETCH_LOG];
	r->seq = seq;
	r->pid = (int32_t)getpid();
	r->dst = dst;
	r->ptr = p;
	r->bytes = n;
	r->moved = moved;
	r->start_ns = start;
	r->end_ns = end;
	sim_unlock();
	sim_log("call cuMemPrefetchAsync 0x%llx %zu dst=%d moved=%llu ns=%llu",
		(unsigned long long)p, n, dst, (unsigned long long)moved,
		(unsigned long long)(end - start));
	return CUDA_SUCCESS;
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
	return prefetch(devPtr, count, dstDevice, hStream, 0);
}

CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
				 CUstream hStream)
{
	return prefetch(devPtr, count, dstDevice, hStream, 1);
}

static int loc_ordinal(CUmemLocation l)
{
	return l.type == CU_MEM_LOCATION_TYPE_DEVICE ? l.id : CU_DEVICE_CPU;
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
			       unsigned int flags, CUstream hStream)
{
	return prefetch(devPtr, count, loc_ordinal(location), hStream, 0);
}

CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
				    unsigned int flags, CUstream hStream)
{
	return prefetch(devPtr, count, loc_ordinal(location), hStream, 1);
}

CUresult cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
				CUdeviceptr devPtr, size_t count)
{
	SIM_REQUIRE_INIT();
	if (!data || !managed_range(devPtr, count))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = find_locked(devPtr);
	int lp = a->last_prefetch == -2 ? CU_DEVICE_INVALID : a->last_prefetch;
	pthread_mutex_unlock(&sim_mu);
	switch (attribute) {
	case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
		*(int *)data = lp;
		break;
	case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
		*(int *)data = CU_DEVICE_INVALID;
		break;
	default:
		memset(data, 0, dataSize);
	}
	return CUDA_SUCCESS;
}

CUresult cuMemRangeGetAttributes(void **data, size_t *dataSizes,
				 CUmem_range_attribute *attributes, size_t numAttributes,
				 CUdeviceptr devPtr, size_t count)
{
	for (size_t i = 0; i < numAttributes; i++) {
		CUresult r = cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr,
						    count);
		if (r)
			return r;
	}
	return CUDA_SUCCESS;
}
