/*
 * Init, context creation (first use of a device) and the memory
 * information the application sees.
 *
 * cuMemGetInfo_v2 / cuDeviceTotalMem_v2: when a limit below the GPU's
 * physical memory applies (NVSHARE_GPU_MEMORY_LIMIT or the scheduler's
 * run-time limit), total := that limit and free := limit - this process's
 * accounted usage, clamped at 0. Otherwise the driver's physical values are
 * returned unchanged (also with NVSHARE_ENABLE_SINGLE_OVERSUB=1: the GPU
 * really has that much; oversubscription is a permission, not more memory).
 * Free is not capped by the physical free memory: other processes' memory is
 * swapped out while we hold the GPU.
 */
#include "client/accounting.h"
#include "client/internal.h"

#include "parse.h"

CUresult CUDAAPI nvs_wrap_cuInit(unsigned int Flags)
{
	nvs_init();
	if (!nvs_real.cuInit)
		return nvs_unresolved("cuInit");
	return nvs_real.cuInit(Flags);
}

static void ctx_created(CUresult r, CUdevice dev)
{
	if (r == CUDA_SUCCESS)
		nvs_device_used((int)dev);
}

CUresult CUDAAPI nvs_wrap_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	nvs_init();
	if (!nvs_real.cuCtxCreate_v2)
		return nvs_unresolved("cuCtxCreate_v2");
	CUresult r = nvs_real.cuCtxCreate_v2(pctx, flags, dev);
	ctx_created(r, dev);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
					 int numParams, unsigned int flags, CUdevice dev)
{
	nvs_init();
	if (!nvs_real.cuCtxCreate_v3)
		return nvs_unresolved("cuCtxCreate_v3");
	CUresult r = nvs_real.cuCtxCreate_v3(pctx, paramsArray, numParams, flags, dev);
	ctx_created(r, dev);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
					 unsigned int flags, CUdevice dev)
{
	nvs_init();
	if (!nvs_real.cuCtxCreate_v4)
		return nvs_unresolved("cuCtxCreate_v4");
	CUresult r = nvs_real.cuCtxCreate_v4(pctx, ctxCreateParams, flags, dev);
	ctx_created(r, dev);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	nvs_init();
	if (!nvs_real.cuDevicePrimaryCtxRetain)
		return nvs_unresolved("cuDevicePrimaryCtxRetain");
	CUresult r = nvs_real.cuDevicePrimaryCtxRetain(pctx, dev);
	ctx_created(r, dev);
	return r;
}

/* Limit below the physical size for dev, or 0 if none applies. */
static uint64_t virtual_total(int dev, uint64_t physical)
{
	uint64_t lim = nvs_acct_configured_limit(dev);
	return lim < physical ? lim : 0;
}

CUresult CUDAAPI nvs_wrap_cuMemGetInfo_v2(size_t *free, size_t *total)
{
	nvs_init();
	if (!nvs_real.cuMemGetInfo_v2)
		return nvs_unresolved("cuMemGetInfo_v2");
	if (nvs_cfg.disable || !free || !total)
		return nvs_real.cuMemGetInfo_v2(free, total);
	size_t f = 0, t = 0;
	CUresult r = nvs_real.cuMemGetInfo_v2(&f, &t);
	if (r != CUDA_SUCCESS)
		return r;
	int dev;
	uint64_t vt = 0;
	if (nvs_current_device(&dev) == CUDA_SUCCESS)
		vt = virtual_total(dev, t);
	if (vt) {
		uint64_t u = nvs_acct_used(dev);
		char a[32], b[32];
		*total = (size_t)vt;
		*free = (size_t)(u < vt ? vt - u : 0);
		NVS_DEBUG("cuMemGetInfo on GPU %d: virtual total %s, free %s", dev,
			  nvs_format_size(*total, a, sizeof a),
			  nvs_format_size(*free, b, sizeof b));
	} else {
		*free = f;
		*total = t;
	}
	return CUDA_SUCCESS;
}

CUresult CUDAAPI nvs_wrap_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	nvs_init();
	if (!nvs_real.cuDeviceTotalMem_v2)
		return nvs_unresolved("cuDeviceTotalMem_v2");
	CUresult r = nvs_real.cuDeviceTotalMem_v2(bytes, dev);
	if (r != CUDA_SUCCESS || nvs_cfg.disable || !bytes)
		return r;
	uint64_t vt = virtual_total((int)dev, *bytes);
	if (vt)
		*bytes = (size_t)vt;
	return r;
}
