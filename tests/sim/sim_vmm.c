/*
 * Simulated GPU: virtual memory management.
 * A physical handle is a memfd (so mappings really share bytes); a
 * reservation is a PROT_NONE mapping; cuMemMap maps the memfd over it.
 * A handle is counted (cuMemCreate 1, cuMemRetainAllocationHandle +1,
 * cuMemRelease -1) and its memory freed once the count is 0 and nothing
 * maps it, as the driver does. Each mapping remembers the access
 * cuMemSetAccess gave it per location; a kernel (or nvshareSimTouch) that
 * touches a range that is not mapped, or not accessible from its GPU, fails
 * with CUDA_ERROR_ILLEGAL_ADDRESS and is counted as a stray access.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_memory.h"

struct sim_vmm {
	uint32_t magic;
	int fd;
	size_t size;
	int dev; /* physical, -1 host */
	int maps;
	int refs; /* cuMemCreate + retains - releases */
	int released;
	CUmemAllocationProp prop;
};
#define SIM_VMM_MAGIC 0x4d4d5653u

#define VMAP_ACC_MAX 16
struct vmap {
	uint64_t ptr, size;
	struct sim_vmm *v;
	struct vmap *next;
	struct {
		CUmemLocation loc;
		unsigned long long flags;
	} acc[VMAP_ACC_MAX]; /* what cuMemSetAccess granted */
	int nacc;
};

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
	v->refs = 1;
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
	if (--v->refs == 0) {
		v->released = 1;
		vmm_maybe_free(v);
	}
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

/* Drops the mappings inside [p, p+n); a released handle whose last mapping
 * goes away frees its physical memory (the driver's rule). sim_mu held. */
void sim_vmm_unmap_range(struct sim_alloc *a, uint64_t p, uint64_t n)
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
	a->ctx = sim_ctx_current();
	a->last_prefetch = -2;
	pthread_mutex_lock(&sim_mu);
	sim_alloc_insert_locked(a);
	pthread_mutex_unlock(&sim_mu);
	*ptr = b;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	SIM_REQUIRE_INIT();
	return sim_free_kind(ptr, 1u << A_VA);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags)
{
	SIM_REQUIRE_INIT();
	pthread_mutex_lock(&sim_mu);
	struct sim_vmm *v = vmm_check(handle);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	if (!v || v->released || !a || a->kind != A_VA || ptr + size > a->base + a->size ||
	    offset + size > v->size || size % SIM_PAGE || offset % SIM_PAGE) {
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
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	if (!a || a->kind != A_VA) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	sim_vmm_unmap_range(a, ptr, size);
	pthread_mutex_unlock(&sim_mu);
	return CUDA_SUCCESS;
}

/* The mapping of reservation a that holds p, or NULL. sim_mu held. */
static struct vmap *vmap_at(struct sim_alloc *a, uint64_t p)
{
	for (struct vmap *m = a->vmaps; m; m = m->next)
		if (p >= m->ptr && p < m->ptr + m->size)
			return m;
	return NULL;
}

static unsigned long long vmap_access(const struct vmap *m, CUmemLocation loc)
{
	for (int i = 0; i < m->nacc; i++)
		if (m->acc[i].loc.type == loc.type && m->acc[i].loc.id == loc.id)
			return m->acc[i].flags;
	return 0;
}

int sim_vmm_accessible(struct sim_alloc *a, uint64_t p, uint64_t n, int dev)
{
	CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev >= 0 ? sim_ordinal(dev) : 0};
	uint64_t e = p + n;
	while (p < e) {
		struct vmap *m = vmap_at(a, p);
		if (!m || (dev >= 0 && vmap_access(m, loc) != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
			return 0;
		p = m->ptr + m->size;
	}
	return 1;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	SIM_REQUIRE_INIT();
	if (!desc || !count || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	if (!a || a->kind != A_VA || ptr + size > a->base + a->size ||
	    !sim_vmm_accessible(a, ptr, size, -1)) {
		pthread_mutex_unlock(&sim_mu);
		return CUDA_ERROR_INVALID_VALUE; /* the whole range must be mapped */
	}
	for (struct vmap *m = a->vmaps; m; m = m->next) {
		if (m->ptr + m->size <= ptr || m->ptr >= ptr + size)
			continue;
		for (size_t k = 0; k < count; k++) {
			int i = 0;
			while (i < m->nacc && (m->acc[i].loc.type != desc[k].location.type ||
					       m->acc[i].loc.id != desc[k].location.id))
				i++;
			if (i == m->nacc && m->nacc < VMAP_ACC_MAX)
				m->nacc++;
			if (i < m->nacc) {
				m->acc[i].loc = desc[k].location;
				m->acc[i].flags = desc[k].flags;
			}
		}
	}
	pthread_mutex_unlock(&sim_mu);
	sim_log("call cuMemSetAccess 0x%llx %zu count=%zu", (unsigned long long)ptr, size, count);
	return CUDA_SUCCESS;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
	SIM_REQUIRE_INIT();
	if (!flags || !location)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked(ptr);
	struct vmap *m = a && a->kind == A_VA ? vmap_at(a, ptr) : NULL;
	if (m)
		*flags = vmap_access(m, *location);
	pthread_mutex_unlock(&sim_mu);
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	SIM_REQUIRE_INIT();
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_mu);
	struct sim_alloc *a = sim_alloc_find_locked((uint64_t)(uintptr_t)addr);
	struct vmap *m = a && a->kind == A_VA ? vmap_at(a, (uint64_t)(uintptr_t)addr) : NULL;
	if (m) {
		m->v->refs++; /* a released handle that is still mapped comes back */
		m->v->released = 0;
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)m->v;
	}
	pthread_mutex_unlock(&sim_mu);
	return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
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
