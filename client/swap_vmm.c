/*
 * VMM handles the swap engine can release and re-create (client/swap_engine.h,
 * docs/swap.md "VMM memory").
 *
 * The application gets a virtual handle ("NVSH" in the upper 32 bits, a
 * counter below) for every device-located cuMemCreate; the real handle
 * behind it changes each time the memory comes back. Every wrapper that
 * takes a handle translates it here; handles we did not make (imported
 * ones, host-located ones) pass through untouched. Every mapping made
 * through cuMemMap is recorded with the access cuMemSetAccess gave it, so a
 * swap-in maps the new physical memory at the same addresses with the same
 * access. The application's references follow the driver's rules:
 * cuMemCreate 1, cuMemRetainAllocationHandle +1, cuMemRelease -1; the
 * memory lives while referenced or mapped, and so does our record.
 *
 * A handle is swappable while a mapping covers it whole with read-write
 * access for its GPU (the copy's source and destination) and it was never
 * exported, bound to a multicast object or a sparse array, or given access
 * on part of a mapping: those pin it for good (the other side keeps using
 * the physical memory; a partial access cannot be replayed exactly).
 *
 * An application call that needs a handle's memory while it is out
 * (mapping it again, changing access, exporting) waits for the GPU's gate
 * to open, i.e. for the swap-in; dropping a mapping or a reference of
 * memory that is out is bookkeeping only, unless the last reference stays
 * and its data would be unreachable (then it waits as well).
 */
#include "swap_engine.h"

#include "accounting.h"
#include "internal.h"
#include "real.h"
#include "sched_client.h"
#include "swap_staging.h"

#include "log.h"
#include "parse.h"

#include <stdlib.h>
#include <string.h>

#define VH_TAG 0x4e56534800000000ull /* "NVSH" */
#define VH_MASK 0xffffffff00000000ull
#define KEY_VMM (1ull << 63) /* accounting's key space for handles (hooks_vmm.c) */
#define ACC_MAX 8
#define NBUCKETS 16384u

enum { V_RES, V_STAGED, V_HOST };

struct vobj;

struct vmapping {
	CUdeviceptr va;
	uint64_t size, offset;
	unsigned long long flags;
	struct vobj *o; /* NULL: a handle we do not track */
	CUmemAccessDesc acc[ACC_MAX];
	int nacc;
};

struct vobj {
	uint64_t vh;
	CUmemGenericAllocationHandle real;
	int real_live; /* we hold a reference on `real` */
	CUmemAllocationProp prop;
	unsigned long long cflags;
	uint64_t bytes;
	int dev;
	int refs;	    /* the application's references */
	int backing;	    /* trap mode: the memory of a converted allocation */
	const char *pinned; /* why it never moves (NULL: it may) */
	int state;
	uint64_t off; /* V_STAGED: where in dev's staging */
	void *host;   /* V_HOST: pageable buffer */
	unsigned mark;
	struct vmapping **maps;
	unsigned nmaps, capmaps;
	struct vobj *next;
};

static struct vobj *bucket[NBUCKETS];
static uint32_t counter;
/* Every recorded mapping, sorted by address. */
static struct vmapping **byva;
static size_t nva, capva;
static unsigned mark_gen;
static uint64_t fast_b[NVS_MAX_GPUS], pinned_b[NVS_MAX_GPUS];
static unsigned nout[NVS_MAX_GPUS];

static int is_virtual(uint64_t h)
{
	return (h & VH_MASK) == VH_TAG;
}

static unsigned hslot(uint64_t vh)
{
	return (unsigned)(vh * 0x9e3779b97f4a7c15ull >> 50) % NBUCKETS;
}

static struct vobj *find(uint64_t vh)
{
	if (!is_virtual(vh))
		return NULL;
	for (struct vobj *o = bucket[hslot(vh)]; o; o = o->next)
		if (o->vh == vh)
			return o;
	return NULL;
}

static int devok(int d)
{
	return d >= 0 && d < NVS_MAX_GPUS;
}

static void count(struct vobj *o, int sign)
{
	if (!devok(o->dev))
		return;
	uint64_t *b = o->pinned ? &pinned_b[o->dev] : &fast_b[o->dev];
	*b = sign > 0 ? *b + o->bytes : (*b >= o->bytes ? *b - o->bytes : 0);
}

static void pin(struct vobj *o, const char *why)
{
	if (!o || o->pinned)
		return;
	count(o, -1);
	o->pinned = why;
	count(o, 1);
	char b[32];
	NVS_DEBUG("VMM handle 0x%llx (%s on GPU %d): pinned, %s", (unsigned long long)o->vh,
		  nvs_format_size(o->bytes, b, sizeof b), o->dev, why);
	nvs_sched_kick(); /* its paths changed: the status shows it */
}

static void set_state(struct vobj *o, int s)
{
	if (devok(o->dev) && (o->state != V_RES) != (s != V_RES)) {
		if (s != V_RES)
			__atomic_add_fetch(&nout[o->dev], 1, __ATOMIC_RELEASE);
		else if (nout[o->dev])
			__atomic_sub_fetch(&nout[o->dev], 1, __ATOMIC_RELEASE);
	}
	o->state = s;
}

/* ---- the sorted mapping list ---- */

/* First index whose mapping starts at or after va. */
static size_t lower(CUdeviceptr va)
{
	size_t lo = 0, hi = nva;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (byva[mid]->va < va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The mapping holding addr, or NULL. */
static struct vmapping *at(CUdeviceptr addr)
{
	size_t i = lower(addr + 1);
	if (i == 0)
		return NULL;
	struct vmapping *m = byva[i - 1];
	return addr < m->va + m->size ? m : NULL;
}

/* Mappings overlapping [va, va+size): indexes [*a, *b). */
static void overlap(CUdeviceptr va, uint64_t size, size_t *a, size_t *b)
{
	size_t i = lower(va);
	if (i > 0 && byva[i - 1]->va + byva[i - 1]->size > va)
		i--;
	size_t j = i;
	while (j < nva && byva[j]->va < va + size)
		j++;
	*a = i;
	*b = j;
}

static int add_mapping(CUdeviceptr va, uint64_t size, uint64_t offset, unsigned long long flags,
		       struct vobj *o)
{
	struct vmapping *m = calloc(1, sizeof *m);
	if (!m)
		return -1;
	*m = (struct vmapping){.va = va, .size = size, .offset = offset, .flags = flags, .o = o};
	if (nva == capva) {
		size_t cap = capva ? capva * 2 : 256;
		struct vmapping **n = realloc(byva, cap * sizeof *n);
		if (!n) {
			free(m);
			return -1;
		}
		byva = n;
		capva = cap;
	}
	if (o && o->nmaps == o->capmaps) {
		unsigned cap = o->capmaps ? o->capmaps * 2 : 2;
		struct vmapping **n = realloc(o->maps, cap * sizeof *n);
		if (!n) {
			free(m);
			return -1;
		}
		o->maps = n;
		o->capmaps = cap;
	}
	size_t i = lower(va);
	memmove(&byva[i + 1], &byva[i], (nva - i) * sizeof *byva);
	byva[i] = m;
	nva++;
	if (o)
		o->maps[o->nmaps++] = m;
	return 0;
}

static void delete_obj(struct vobj *o);

/* Drops the record at index i (the real mapping is gone already). */
static void drop_mapping(size_t i)
{
	struct vmapping *m = byva[i];
	memmove(&byva[i], &byva[i + 1], (nva - i - 1) * sizeof *byva);
	nva--;
	struct vobj *o = m->o;
	if (o) {
		for (unsigned k = 0; k < o->nmaps; k++)
			if (o->maps[k] == m) {
				o->maps[k] = o->maps[--o->nmaps];
				break;
			}
		if (o->refs == 0 && o->nmaps == 0)
			delete_obj(o); /* the driver freed its memory with the last mapping */
	}
	free(m);
}

/* ---- objects ---- */

static struct vobj *new_obj(CUmemGenericAllocationHandle real, uint64_t bytes,
			    const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct vobj *o = calloc(1, sizeof *o);
	if (!o)
		return NULL;
	do
		o->vh = VH_TAG | ++counter;
	while (find(o->vh) || !(o->vh & ~VH_MASK));
	o->real = real;
	o->real_live = 1;
	o->prop = *prop;
	o->cflags = flags;
	o->bytes = bytes;
	o->dev = prop->location.id;
	o->refs = 1;
	unsigned s = hslot(o->vh);
	o->next = bucket[s];
	bucket[s] = o;
	count(o, 1);
	return o;
}

static void delete_obj(struct vobj *o)
{
	struct vobj **pp = &bucket[hslot(o->vh)];
	while (*pp && *pp != o)
		pp = &(*pp)->next;
	if (*pp)
		*pp = o->next;
	count(o, -1);
	set_state(o, V_RES);
	if (!o->backing) {
		int dev;
		uint64_t b = nvs_acct_untrack((CUdeviceptr)(o->vh | KEY_VMM), &dev);
		if (b)
			nvs_acct_unreserve(dev, b);
	}
	char s[32];
	NVS_DEBUG("VMM handle 0x%llx (%s on GPU %d) gone", (unsigned long long)o->vh,
		  nvs_format_size(o->bytes, s, sizeof s), o->dev);
	free(o->host);
	free(o->maps);
	free(o);
}

/* Whether mapping m is readable and writable from GPU dev. */
static int rw_for(const struct vmapping *m, int dev)
{
	for (int i = 0; i < m->nacc; i++)
		if (m->acc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
		    m->acc[i].location.id == dev)
			return m->acc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return 0;
}

/* The mapping covering o whole with read-write access for its GPU. */
static struct vmapping *full_mapping(const struct vobj *o)
{
	for (unsigned k = 0; k < o->nmaps; k++) {
		struct vmapping *m = o->maps[k];
		if (m->offset == 0 && m->size == o->bytes && rw_for(m, o->dev))
			return m;
	}
	return NULL;
}

/* Releases nvs_swap_mu, waits for dev's gate (the swap-in), takes it again. */
static void wait_in(int dev)
{
	pthread_mutex_unlock(&nvs_swap_mu);
	nvs_sched_wait_open(dev);
	pthread_mutex_lock(&nvs_swap_mu);
}

/* Waits (at most twice) until o is resident; 0 if it is (or is not ours:
 * *po NULL), -1 if it is still out, -2 for a virtual handle that is gone
 * (the driver must never see one of those). */
static int resident(uint64_t vh, struct vobj **po)
{
	for (int tries = 0;; tries++) {
		struct vobj *o = find(vh);
		*po = o;
		if (!o)
			return is_virtual(vh) ? -2 : 0;
		if (o->state == V_RES)
			return 0;
		if (tries == 2)
			return -1;
		wait_in(o->dev);
	}
}

/* ---- the application's calls ---- */

CUresult nvs_svmm_create(CUmemGenericAllocationHandle *h, size_t size,
			 const CUmemAllocationProp *prop, unsigned long long flags)
{
	int dev = prop->location.id;
	if (nvs_acct_reserve(dev, size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&nvs_swap_mu);
	CUmemGenericAllocationHandle real = 0;
	CUresult r = nvs_real.cuMemCreate(&real, size, prop, flags);
	struct vobj *o = NULL;
	if (r == CUDA_SUCCESS && nvs_fast_enabled()) {
		o = new_obj(real, size, prop, flags);
		if (!o) {
			(void)nvs_real.cuMemRelease(real);
			r = CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	if (r == CUDA_SUCCESS) {
		*h = o ? o->vh : real;
		nvs_acct_track(dev, (CUdeviceptr)(*h | KEY_VMM), size, NVS_ALLOC_VMM);
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	if (r != CUDA_SUCCESS) {
		nvs_acct_unreserve(dev, size);
		return r;
	}
	if (o)
		nvs_stage_want(dev, nvs_fast_bytes(dev), NULL); /* grows with it, once started */
	char b[32];
	NVS_DEBUG("cuMemCreate: %s on GPU %d, handle 0x%llx%s", nvs_format_size(size, b, sizeof b),
		  dev, (unsigned long long)*h,
		  o ? " (swappable: fast path)" : " (pinned: NVSHARE_SWAP_FAST=0)");
	return CUDA_SUCCESS;
}

CUresult nvs_svmm_release(CUmemGenericAllocationHandle h)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct vobj *o = find(h);
	if (!o) {
		pthread_mutex_unlock(&nvs_swap_mu);
		if (is_virtual(h))
			return CUDA_ERROR_INVALID_VALUE; /* one of ours, released */
		CUresult r = nvs_real.cuMemRelease(h);
		if (r == CUDA_SUCCESS) {
			int dev;
			uint64_t b = nvs_acct_untrack((CUdeviceptr)(h | KEY_VMM), &dev);
			if (b)
				nvs_acct_unreserve(dev, b);
		}
		return r;
	}
	CUresult r = CUDA_SUCCESS;
	if (o->refs <= 0 || o->backing) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (--o->refs == 0) {
		if (o->real_live) {
			r = nvs_real.cuMemRelease(o->real);
			if (r == CUDA_SUCCESS)
				o->real_live = 0;
			else
				o->refs++;
		}
		if (r == CUDA_SUCCESS && o->nmaps == 0)
			delete_obj(o);
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

CUresult nvs_svmm_map(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct vobj *o;
	CUresult r;
	int rs = resident(h, &o);
	if (rs)
		r = rs == -2 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_READY;
	else if (o && (o->refs == 0 || o->backing))
		r = CUDA_ERROR_INVALID_VALUE; /* released: the driver refuses it too */
	else
		r = nvs_real.cuMemMap(va, size, offset, o ? o->real : h, flags);
	if (r == CUDA_SUCCESS && add_mapping(va, size, offset, flags, o))
		pin(o, "out of host memory recording a mapping");
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

CUresult nvs_svmm_unmap(CUdeviceptr va, size_t size)
{
	pthread_mutex_lock(&nvs_swap_mu);
	size_t a, b;
	int out = 0;
	for (int tries = 0;; tries++) {
		overlap(va, size, &a, &b);
		int wait_dev = -1;
		out = 0;
		for (size_t i = a; i < b; i++) {
			struct vobj *o = byva[i]->o;
			if (o && o->state != V_RES) {
				out = 1;
				/* Bookkeeping only if this frees it (released, and
				 * every mapping of it goes): else its data would
				 * have no way back. */
				unsigned inside = 0;
				for (unsigned k = 0; k < o->nmaps; k++)
					inside += o->maps[k]->va >= va &&
						  o->maps[k]->va + o->maps[k]->size <= va + size;
				if (o->refs > 0 || inside < o->nmaps)
					wait_dev = o->dev;
			}
		}
		if (wait_dev < 0 || tries == 2)
			break;
		wait_in(wait_dev);
	}
	CUresult r = CUDA_SUCCESS;
	if (!out) {
		r = nvs_real.cuMemUnmap(va, size);
	} else {
		/* Only the mappings that really exist go to the driver. */
		for (size_t i = a; i < b; i++) {
			struct vmapping *m = byva[i];
			if ((!m->o || m->o->state == V_RES) && r == CUDA_SUCCESS)
				r = nvs_real.cuMemUnmap(m->va, m->size);
		}
	}
	if (r == CUDA_SUCCESS) {
		overlap(va, size, &a, &b);
		for (size_t i = b; i-- > a;)
			if (byva[i]->va >= va && byva[i]->va + byva[i]->size <= va + size)
				drop_mapping(i);
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

/* Waits until no mapping overlapping [va, va+size) belongs to memory that
 * is out; marks their handles pinned with `why` if given. */
static int range_resident(CUdeviceptr va, size_t size, const char *why, size_t *pa, size_t *pb)
{
	for (int tries = 0;; tries++) {
		size_t a, b;
		overlap(va, size, &a, &b);
		int dev = -1;
		for (size_t i = a; i < b; i++) {
			struct vobj *o = byva[i]->o;
			if (why)
				pin(o, why);
			if (o && o->state != V_RES)
				dev = o->dev;
		}
		*pa = a;
		*pb = b;
		if (dev < 0)
			return 0;
		if (tries == 2)
			return -1;
		wait_in(dev);
	}
}

static void merge_access(struct vmapping *m, const CUmemAccessDesc *d)
{
	int i = 0;
	while (i < m->nacc && (m->acc[i].location.type != d->location.type ||
			       m->acc[i].location.id != d->location.id))
		i++;
	if (i == ACC_MAX) {
		pin(m->o, "access given to more locations than recorded");
		return;
	}
	if (i == m->nacc)
		m->nacc++;
	m->acc[i] = *d;
}

CUresult nvs_svmm_set_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	pthread_mutex_lock(&nvs_swap_mu);
	size_t a, b;
	CUresult r = range_resident(va, size, NULL, &a, &b)
			 ? CUDA_ERROR_NOT_READY
			 : nvs_real.cuMemSetAccess(va, size, desc, count);
	if (r == CUDA_SUCCESS && desc) {
		overlap(va, size, &a, &b);
		for (size_t i = a; i < b; i++) {
			struct vmapping *m = byva[i];
			if (!m->o)
				continue;
			if (m->va < va || m->va + m->size > va + size) {
				pin(m->o, "access set on part of a mapping");
				continue;
			}
			for (size_t k = 0; k < count; k++)
				merge_access(m, &desc[k]);
		}
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

CUresult nvs_svmm_export(void *shareable, CUmemGenericAllocationHandle h,
			 CUmemAllocationHandleType type, unsigned long long flags)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct vobj *o;
	int rs = resident(h, &o);
	CUresult r =
	    rs == -2 ? CUDA_ERROR_INVALID_VALUE
	    : rs     ? CUDA_ERROR_NOT_READY
		 : nvs_real.cuMemExportToShareableHandle(shareable, o ? o->real : h, type, flags);
	if (r == CUDA_SUCCESS)
		pin(o, "exported (another process may map it)");
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

CUresult nvs_svmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct vobj *o = find(h);
	CUresult r;
	if (!o && is_virtual(h)) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else if (o && o->state != V_RES) {
		r = prop ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
		if (prop)
			*prop = o->prop; /* what it was created with, and will be again */
	} else {
		r = nvs_real.cuMemGetAllocationPropertiesFromHandle(prop, o ? o->real : h);
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

CUresult nvs_svmm_retain(CUmemGenericAllocationHandle *h, void *addr)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct vmapping *m = at((CUdeviceptr)(uintptr_t)addr);
	CUresult r;
	if (m && m->o && !m->o->backing) {
		/* A reference of ours, the real one untouched: the mapping
		 * keeps the memory alive meanwhile. */
		r = h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
		if (h) {
			m->o->refs++;
			*h = m->o->vh;
		}
	} else {
		r = nvs_real.cuMemRetainAllocationHandle(h, addr);
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

/* A call on a range of mappings (real_call) once none of them is out;
 * `why` pins their handles. */
#define RANGE_CALL(va, size, why, real_call)                                                       \
	do {                                                                                       \
		pthread_mutex_lock(&nvs_swap_mu);                                                  \
		size_t a_, b_;                                                                     \
		CUresult r_ =                                                                      \
		    range_resident(va, size, why, &a_, &b_) ? CUDA_ERROR_NOT_READY : (real_call);  \
		pthread_mutex_unlock(&nvs_swap_mu);                                                \
		return r_;                                                                         \
	} while (0)

CUresult nvs_svmm_range_handle(void *handle, CUdeviceptr va, size_t size, CUmemRangeHandleType type,
			       unsigned long long flags)
{
	RANGE_CALL(va, size, "exported as a dma-buf",
		   nvs_real.cuMemGetHandleForAddressRange(handle, va, size, type, flags));
}

CUresult nvs_svmm_map_array(CUarrayMapInfo *infos, unsigned count, CUstream s, int ptsz)
{
	PFN_cuMemMapArrayAsync_v11010 real =
	    ptsz ? nvs_real.cuMemMapArrayAsync_ptsz : nvs_real.cuMemMapArrayAsync;
	pthread_mutex_lock(&nvs_swap_mu);
	CUresult r = CUDA_SUCCESS;
	int ours = 0;
	for (unsigned i = 0; infos && i < count && r == CUDA_SUCCESS; i++) {
		if (infos[i].memHandleType != CU_MEM_HANDLE_TYPE_GENERIC ||
		    !is_virtual(infos[i].memHandle.memHandle))
			continue;
		struct vobj *o;
		int rs = resident(infos[i].memHandle.memHandle, &o);
		if (rs)
			r = rs == -2 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_READY;
		if (o) {
			pin(o, "mapped into a sparse array");
			ours = 1;
		}
	}
	/* Translated on a copy: the array is the application's. */
	CUarrayMapInfo *copy = NULL;
	if (r == CUDA_SUCCESS && ours) {
		copy = malloc(count * sizeof *copy);
		if (!copy)
			r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (copy) {
		memcpy(copy, infos, count * sizeof *copy);
		for (unsigned i = 0; i < count; i++) {
			struct vobj *o = copy[i].memHandleType == CU_MEM_HANDLE_TYPE_GENERIC
					     ? find(copy[i].memHandle.memHandle)
					     : NULL;
			if (o)
				copy[i].memHandle.memHandle = o->real;
		}
	}
	if (r == CUDA_SUCCESS)
		r = real(copy ? copy : infos, count, s);
	pthread_mutex_unlock(&nvs_swap_mu);
	free(copy);
	return r;
}

CUresult nvs_svmm_mc_bind_mem(CUmemGenericAllocationHandle mc, size_t mc_off,
			      CUmemGenericAllocationHandle h, size_t off, size_t size,
			      unsigned long long flags)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct vobj *o;
	int rs = resident(h, &o);
	CUresult r = rs == -2 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_READY;
	if (!rs) {
		pin(o, "bound to a multicast object");
		r = nvs_real.cuMulticastBindMem(mc, mc_off, o ? o->real : h, off, size, flags);
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

CUresult nvs_svmm_mc_bind_addr(CUmemGenericAllocationHandle mc, size_t mc_off, CUdeviceptr va,
			       size_t size, unsigned long long flags)
{
	RANGE_CALL(va, size, "bound to a multicast object",
		   nvs_real.cuMulticastBindAddr(mc, mc_off, va, size, flags));
}

/* ---- address reservations: copies may span one, never two ---- */

struct resv {
	CUdeviceptr va;
	uint64_t size;
};
static struct resv *resv;
static size_t nresv, capresv;

static size_t resv_lower(CUdeviceptr va)
{
	size_t lo = 0, hi = nresv;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (resv[mid].va < va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void nvs_svmm_reserved(CUdeviceptr va, size_t size)
{
	pthread_mutex_lock(&nvs_swap_mu);
	if (nresv == capresv) {
		size_t cap = capresv ? capresv * 2 : 64;
		struct resv *n = realloc(resv, cap * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&nvs_swap_mu);
			return; /* unknown: its copies are not merged */
		}
		resv = n;
		capresv = cap;
	}
	size_t i = resv_lower(va);
	memmove(&resv[i + 1], &resv[i], (nresv - i) * sizeof *resv);
	resv[i] = (struct resv){va, size};
	nresv++;
	pthread_mutex_unlock(&nvs_swap_mu);
}

void nvs_svmm_unreserved(CUdeviceptr va)
{
	pthread_mutex_lock(&nvs_swap_mu);
	size_t i = resv_lower(va);
	if (i < nresv && resv[i].va == va) {
		memmove(&resv[i], &resv[i + 1], (nresv - i - 1) * sizeof *resv);
		nresv--;
	}
	pthread_mutex_unlock(&nvs_swap_mu);
}

/* nvs_swap_mu held. */
CUdeviceptr nvs_svmm_region(CUdeviceptr va)
{
	size_t i = resv_lower(va + 1);
	if (i == 0)
		return 0;
	const struct resv *r = &resv[i - 1];
	return va < r->va + r->size ? r->va : 0;
}

/* ---- trap mode: VMM memory behind converted allocations ---- */

CUresult nvs_svmm_alloc_backing(int dev, uint64_t bytes, CUdeviceptr *p)
{
	if (!nvs_real.cuMemAddressReserve || !nvs_real.cuMemAddressFree || !nvs_real.cuMemCreate ||
	    !nvs_real.cuMemMap || !nvs_real.cuMemSetAccess || !nvs_real.cuMemUnmap ||
	    !nvs_real.cuMemGetAllocationGranularity)
		return CUDA_ERROR_NOT_SUPPORTED;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
	size_t gran = 0;
	CUresult r =
	    nvs_real.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS || !gran)
		return r ? r : CUDA_ERROR_NOT_SUPPORTED;
	uint64_t size = (bytes + gran - 1) / gran * gran;
	CUdeviceptr va = 0;
	CUmemGenericAllocationHandle real = 0;
	CUmemAccessDesc acc = {.location = prop.location,
			       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	pthread_mutex_lock(&nvs_swap_mu);
	r = nvs_real.cuMemAddressReserve(&va, size, 0, 0, 0);
	if (r == CUDA_SUCCESS) {
		r = nvs_real.cuMemCreate(&real, size, &prop, 0);
		if (r == CUDA_SUCCESS) {
			r = nvs_real.cuMemMap(va, size, 0, real, 0);
			if (r == CUDA_SUCCESS) {
				r = nvs_real.cuMemSetAccess(va, size, &acc, 1);
				if (r != CUDA_SUCCESS)
					(void)nvs_real.cuMemUnmap(va, size);
			}
			if (r != CUDA_SUCCESS)
				(void)nvs_real.cuMemRelease(real);
		}
		if (r != CUDA_SUCCESS)
			(void)nvs_real.cuMemAddressFree(va, size);
	}
	struct vobj *o = r == CUDA_SUCCESS ? new_obj(real, size, &prop, 0) : NULL;
	if (o) {
		o->backing = 1;
		if (add_mapping(va, size, 0, 0, o)) {
			pin(o, "out of host memory recording a mapping");
		} else {
			o->maps[0]->acc[0] = acc;
			o->maps[0]->nacc = 1;
		}
		*p = va;
	} else if (r == CUDA_SUCCESS) {
		(void)nvs_real.cuMemUnmap(va, size);
		(void)nvs_real.cuMemRelease(real);
		(void)nvs_real.cuMemAddressFree(va, size);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

static struct vmapping *backing_at(CUdeviceptr p)
{
	struct vmapping *m = at(p);
	return m && m->va == p && m->o && m->o->backing ? m : NULL;
}

int nvs_svmm_is_backing(CUdeviceptr p)
{
	pthread_mutex_lock(&nvs_swap_mu);
	int r = backing_at(p) != NULL;
	pthread_mutex_unlock(&nvs_swap_mu);
	return r;
}

int nvs_svmm_free_backing(CUdeviceptr p, CUresult *r)
{
	pthread_mutex_lock(&nvs_swap_mu);
	struct vmapping *m = backing_at(p);
	if (!m) {
		pthread_mutex_unlock(&nvs_swap_mu);
		return 0;
	}
	struct vobj *o = m->o;
	uint64_t size = m->size;
	*r = CUDA_SUCCESS;
	if (o->state == V_RES)
		*r = nvs_real.cuMemUnmap(p, size);
	if (*r == CUDA_SUCCESS && o->real_live) {
		(void)nvs_real.cuMemRelease(o->real);
		o->real_live = 0;
	}
	if (*r == CUDA_SUCCESS) {
		(void)nvs_real.cuMemAddressFree(p, size);
		o->refs = 0;
		drop_mapping(lower(p)); /* deletes o */
	}
	pthread_mutex_unlock(&nvs_swap_mu);
	return 1;
}

/* ---- the swap (swap_fast.c), nvs_swap_mu held ---- */

/* Appends x to *out (*n of *cap); -1 if out of memory (what is there stays). */
static int vcand_push(struct nvs_vcand **out, size_t *n, size_t *cap, struct nvs_vcand x)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct nvs_vcand *v = realloc(*out, c * sizeof *v);
		if (!v)
			return -1;
		*out = v;
		*cap = c;
	}
	(*out)[(*n)++] = x;
	return 0;
}

size_t nvs_svmm_candidates(int dev, struct nvs_vcand **out)
{
	*out = NULL;
	size_t n = 0, cap = 0;
	mark_gen++;
	for (size_t i = 0; i < nva; i++) {
		struct vmapping *m = byva[i];
		struct vobj *o = m->o;
		if (!o || o->dev != dev || o->state != V_RES || o->pinned || o->mark == mark_gen ||
		    m->offset != 0 || m->size != o->bytes || !rw_for(m, dev))
			continue;
		o->mark = mark_gen;
		if (vcand_push(out, &n, &cap, (struct nvs_vcand){o->vh, m->va, o->bytes}))
			break;
	}
	return n;
}

CUresult nvs_svmm_put_out(uint64_t vh, uint64_t off, void *host)
{
	struct vobj *o = find(vh);
	if (!o)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = CUDA_SUCCESS;
	for (unsigned k = 0; k < o->nmaps && r == CUDA_SUCCESS; k++)
		r = nvs_real.cuMemUnmap(o->maps[k]->va, o->maps[k]->size);
	if (r != CUDA_SUCCESS) {
		/* Not expected; the mappings already gone are restored by the
		 * swap-in all the same (it maps every record). */
		NVS_WARN("VMM handle 0x%llx: cuMemUnmap failed (%d) during a swap-out",
			 (unsigned long long)vh, (int)r);
	}
	if (o->real_live) {
		(void)nvs_real.cuMemRelease(o->real);
		o->real_live = 0;
	}
	o->off = off;
	o->host = host;
	set_state(o, host ? V_HOST : V_STAGED);
	return r;
}

size_t nvs_svmm_outs(int dev, struct nvs_vcand **out)
{
	*out = NULL;
	size_t n = 0, cap = 0;
	mark_gen++;
	for (size_t i = 0; i < nva; i++) {
		struct vobj *o = byva[i]->o;
		if (!o || o->dev != dev || o->state == V_RES || o->mark == mark_gen)
			continue;
		/* No mapping covers it whole any more (not expected: unmaps
		 * of memory that is out wait for it): it comes back empty
		 * (va 0), so that its gate can open. */
		struct vmapping *m = full_mapping(o);
		o->mark = mark_gen;
		if (vcand_push(out, &n, &cap, (struct nvs_vcand){o->vh, m ? m->va : 0, o->bytes}))
			break;
	}
	return n;
}

CUresult nvs_svmm_bring_in(uint64_t vh, uint64_t *off, void **host)
{
	struct vobj *o = find(vh);
	if (!o || o->state == V_RES)
		return CUDA_ERROR_INVALID_VALUE;
	CUmemGenericAllocationHandle real = 0;
	CUresult r = nvs_real.cuMemCreate(&real, o->bytes, &o->prop, o->cflags);
	if (r != CUDA_SUCCESS)
		return r;
	unsigned k = 0;
	for (; k < o->nmaps && r == CUDA_SUCCESS; k++)
		r = nvs_real.cuMemMap(o->maps[k]->va, o->maps[k]->size, o->maps[k]->offset, real,
				      o->maps[k]->flags);
	for (unsigned j = 0; j < o->nmaps && r == CUDA_SUCCESS; j++)
		if (o->maps[j]->nacc)
			r = nvs_real.cuMemSetAccess(o->maps[j]->va, o->maps[j]->size,
						    o->maps[j]->acc, (size_t)o->maps[j]->nacc);
	if (r != CUDA_SUCCESS) {
		for (unsigned j = 0; j + 1 < k; j++)
			(void)nvs_real.cuMemUnmap(o->maps[j]->va, o->maps[j]->size);
		(void)nvs_real.cuMemRelease(real);
		return r;
	}
	o->real = real;
	o->real_live = 1;
	if (o->refs == 0) {
		/* The application released it while out: the mappings keep
		 * it alive, as they did before. */
		(void)nvs_real.cuMemRelease(real);
		o->real_live = 0;
	}
	*off = o->off;
	*host = o->host;
	return CUDA_SUCCESS;
}

void nvs_svmm_settle(uint64_t vh, int lost)
{
	struct vobj *o = find(vh);
	if (!o)
		return;
	if (lost)
		pin(o, "lost: it could not be created again");
	free(o->host);
	o->host = NULL;
	set_state(o, V_RES);
}

void nvs_svmm_paths(int dev, uint64_t *fast, uint64_t *pinned)
{
	*fast = devok(dev) ? fast_b[dev] : 0;
	*pinned = devok(dev) ? pinned_b[dev] : 0;
}

unsigned nvs_svmm_out_count(int dev)
{
	return devok(dev) ? __atomic_load_n(&nout[dev], __ATOMIC_ACQUIRE) : 0;
}

void nvs_svmm_atfork_child(void)
{
	/* The parent's handles mean nothing here; the records leak in the
	 * child (CUDA itself is unusable after fork without exec). */
	memset(bucket, 0, sizeof bucket);
	byva = NULL;
	nva = capva = 0;
	resv = NULL;
	nresv = capresv = 0;
	memset(fast_b, 0, sizeof fast_b);
	memset(pinned_b, 0, sizeof pinned_b);
	memset(nout, 0, sizeof nout);
}
