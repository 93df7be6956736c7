/*
 * Simulated GPU: memory pools and stream-ordered allocation. A pool is a
 * device and a release threshold; what it hands out are ordinary device
 * allocations that name it.
 */
#include <stdlib.h>

#include "sim_memory.h"

struct sim_pool {
	uint32_t magic;
	int dev; /* physical */
	uint64_t threshold;
};
#define SIM_POOL_MAGIC 0x4c4f4f50u

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
		pool = current_pool[s->ctx->dev] ? current_pool[s->ctx->dev]
						 : pool_default(s->ctx->dev);
	return sim_alloc_new((uint64_t *)dptr, bytesize, A_DEVICE, pool->dev, 0, pool);
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
	return sim_free_kind(dptr, 1u << A_DEVICE);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 0);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(dptr, hStream, 1);
}
