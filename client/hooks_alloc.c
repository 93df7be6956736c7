/*
 * Allocation family: device allocations become managed (CU_MEM_ATTACH_GLOBAL)
 * so the scheduler can swap a process's memory out; every allocation is
 * reserved against the limit before the driver is asked.
 *
 * Stream-ordered allocations (cuMemAllocAsync): converted to a synchronous
 * managed allocation (valid earlier than the stream needs it, which is
 * allowed); cuMemFreeAsync of such memory synchronizes that stream and then
 * frees (the free must not overtake queued work). While the stream is being
 * captured a synchronous allocation is illegal, so the call passes through
 * and is accounted as pinned device memory (a graph memory node).
 * cuMemAllocFromPoolAsync (an explicit pool, possibly with IPC or
 * non-default attributes) passes through, accounted as pinned device memory.
 */
#include "client/accounting.h"
#include "client/internal.h"
#include "client/sched_swap.h"

#include "parse.h"

#include <string.h>

#define PITCH_ALIGN 512u

/* Device of the current context, first-use notification. */
static CUresult alloc_device(int *dev)
{
	CUresult r = nvs_current_device(dev);
	if (r == CUDA_SUCCESS)
		nvs_device_used(*dev);
	return r;
}

/* Managed allocation reserved against the limit. */
static CUresult alloc_managed(CUdeviceptr *dptr, size_t bytes, unsigned flags, const char *why)
{
	if (!nvs_real.cuMemAllocManaged)
		return nvs_unresolved("cuMemAllocManaged");
	if (!dptr || bytes == 0)
		return nvs_real.cuMemAllocManaged(dptr, bytes, flags); /* driver's error */
	int dev;
	CUresult r = alloc_device(&dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (nvs_acct_reserve(dev, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = nvs_real.cuMemAllocManaged(dptr, bytes, flags);
	if (r != CUDA_SUCCESS) {
		nvs_acct_unreserve(dev, bytes);
		return r;
	}
	nvs_acct_track(dev, *dptr, bytes, NVS_ALLOC_MANAGED);
	/* Converted device memory only: the application's own managed
	 * memory may be meant for the host first. */
	if (strcmp(why, "cuMemAllocManaged") != 0)
		nvs_swap_fresh(dev, *dptr, bytes);
	char b[32];
	NVS_DEBUG("%s: %s on GPU %d -> managed 0x%llx", why, nvs_format_size(bytes, b, sizeof b), dev,
		  (unsigned long long)*dptr);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI nvs_wrap_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	nvs_init();
	if (nvs_cfg.disable)
		return nvs_real.cuMemAlloc_v2 ? nvs_real.cuMemAlloc_v2(dptr, bytesize)
					      : nvs_unresolved("cuMemAlloc_v2");
	return alloc_managed(dptr, bytesize, CU_MEM_ATTACH_GLOBAL, "cuMemAlloc");
}

CUresult CUDAAPI nvs_wrap_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
					     size_t Height, unsigned int ElementSizeBytes)
{
	nvs_init();
	if (nvs_cfg.disable)
		return nvs_real.cuMemAllocPitch_v2
			       ? nvs_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height,
							     ElementSizeBytes)
			       : nvs_unresolved("cuMemAllocPitch_v2");
	if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	if (WidthInBytes > SIZE_MAX - PITCH_ALIGN)
		return CUDA_ERROR_INVALID_VALUE;
	size_t pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
	if (Height > SIZE_MAX / pitch)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult r = alloc_managed(dptr, pitch * Height, CU_MEM_ATTACH_GLOBAL, "cuMemAllocPitch");
	if (r == CUDA_SUCCESS)
		*pPitch = pitch;
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	nvs_init();
	if (nvs_cfg.disable)
		return nvs_real.cuMemAllocManaged ? nvs_real.cuMemAllocManaged(dptr, bytesize, flags)
						  : nvs_unresolved("cuMemAllocManaged");
	return alloc_managed(dptr, bytesize, flags, "cuMemAllocManaged");
}

/* Un-accounts ptr if we tracked it. */
static void forget(CUdeviceptr ptr)
{
	int dev;
	uint64_t b = nvs_acct_untrack(ptr, &dev);
	if (b) {
		nvs_acct_unreserve(dev, b);
		char s[32];
		NVS_DEBUG("free 0x%llx: %s on GPU %d released", (unsigned long long)ptr,
			  nvs_format_size(b, s, sizeof s), dev);
	}
}

CUresult CUDAAPI nvs_wrap_cuMemFree_v2(CUdeviceptr dptr)
{
	nvs_init();
	if (!nvs_real.cuMemFree_v2)
		return nvs_unresolved("cuMemFree_v2");
	CUresult r = nvs_real.cuMemFree_v2(dptr);
	if (r == CUDA_SUCCESS && !nvs_cfg.disable)
		forget(dptr);
	return r;
}

/* ---- stream-ordered ---- */

static int capturing(CUstream s, int ptsz)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult r;
	if (ptsz && nvs_real.cuStreamIsCapturing_ptsz)
		r = nvs_real.cuStreamIsCapturing_ptsz(s, &st);
	else if (nvs_real.cuStreamIsCapturing)
		r = nvs_real.cuStreamIsCapturing(ptsz && !s ? CU_STREAM_PER_THREAD : s, &st);
	else
		return 0;
	return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);

static CUresult alloc_async(alloc_async_fn real, const char *name, CUdeviceptr *dptr, size_t bytes,
			    CUstream s, int ptsz)
{
	nvs_init();
	if (!real)
		return nvs_unresolved(name);
	if (nvs_cfg.disable)
		return real(dptr, bytes, s);
	if (!capturing(s, ptsz))
		return alloc_managed(dptr, bytes, CU_MEM_ATTACH_GLOBAL, name);
	/* Captured: becomes a graph memory node; count it as pinned. */
	int dev;
	CUresult r = alloc_device(&dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!dptr || bytes == 0)
		return real(dptr, bytes, s);
	if (nvs_acct_reserve(dev, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = real(dptr, bytes, s);
	if (r != CUDA_SUCCESS) {
		nvs_acct_unreserve(dev, bytes);
		return r;
	}
	nvs_acct_track(dev, *dptr, bytes, NVS_ALLOC_PINNED_DEVICE);
	NVS_DEBUG("%s during stream capture: passed through, %zu bytes counted as pinned", name, bytes);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI nvs_wrap_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(nvs_real.cuMemAllocAsync, "cuMemAllocAsync", dptr, bytesize, hStream, 0);
}

CUresult CUDAAPI nvs_wrap_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(nvs_real.cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz", dptr, bytesize,
			   hStream, 1);
}

typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);

static CUresult alloc_pool(alloc_pool_fn real, const char *name, CUdeviceptr *dptr, size_t bytes,
			   CUmemoryPool pool, CUstream s)
{
	nvs_init();
	if (!real)
		return nvs_unresolved(name);
	if (nvs_cfg.disable || !dptr || bytes == 0)
		return real(dptr, bytes, pool, s);
	int dev;
	CUresult r = alloc_device(&dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (nvs_acct_reserve(dev, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = real(dptr, bytes, pool, s);
	if (r != CUDA_SUCCESS) {
		nvs_acct_unreserve(dev, bytes);
		return r;
	}
	nvs_acct_track(dev, *dptr, bytes, NVS_ALLOC_PINNED_DEVICE);
	NVS_DEBUG("%s: %zu bytes from an explicit pool, counted as pinned on GPU %d", name, bytes, dev);
	return CUDA_SUCCESS;
}

CUresult CUDAAPI nvs_wrap_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
						  CUmemoryPool pool, CUstream hStream)
{
	return alloc_pool(nvs_real.cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", dptr, bytesize,
			  pool, hStream);
}

CUresult CUDAAPI nvs_wrap_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						       CUmemoryPool pool, CUstream hStream)
{
	return alloc_pool(nvs_real.cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz", dptr,
			  bytesize, pool, hStream);
}

typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

static CUresult free_async(free_async_fn real, const char *name, CUdeviceptr dptr, CUstream s,
			   int ptsz)
{
	nvs_init();
	if (!real)
		return nvs_unresolved(name);
	if (nvs_cfg.disable)
		return real(dptr, s);
	enum nvs_alloc_kind kind;
	if (nvs_acct_lookup(dptr, NULL, NULL, &kind) == 0 && kind == NVS_ALLOC_MANAGED) {
		/* Ours (converted): wait for the stream's queued work, then
		 * free. A captured stream cannot be synchronized: refuse. */
		if (capturing(s, ptsz))
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		if (!nvs_real.cuStreamSynchronize || !nvs_real.cuMemFree_v2)
			return nvs_unresolved("cuStreamSynchronize");
		CUresult r = nvs_real.cuStreamSynchronize(ptsz && !s ? CU_STREAM_PER_THREAD : s);
		if (r != CUDA_SUCCESS)
			return r;
		r = nvs_real.cuMemFree_v2(dptr);
		if (r == CUDA_SUCCESS)
			forget(dptr);
		NVS_DEBUG("%s of converted 0x%llx: stream synchronized, freed", name,
			  (unsigned long long)dptr);
		return r;
	}
	CUresult r = real(dptr, s);
	if (r == CUDA_SUCCESS)
		forget(dptr);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(nvs_real.cuMemFreeAsync, "cuMemFreeAsync", dptr, hStream, 0);
}

CUresult CUDAAPI nvs_wrap_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(nvs_real.cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", dptr, hStream, 1);
}
