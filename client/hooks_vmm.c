/*
 * Virtual memory management and arrays.
 *
 * VMM: every call that takes a handle or changes a mapping goes to
 * client/swap_vmm.c, which gives the application virtual handles for the
 * device memory it creates (so the swap engine can release the physical
 * memory and create it again behind the same handle), records mappings and
 * access, and counts the memory against the limit (NVS_ALLOC_VMM) from
 * cuMemCreate until the driver would free it (last reference and last
 * mapping gone). Host-located handles (host, host NUMA) are not GPU memory:
 * they pass through, uncounted, as do imported handles.
 *
 * Arrays cannot move: counted as pinned device memory (their level-0, and
 * for mipmaps every level's, element bytes) on the current context's
 * device.
 */
#include "client/accounting.h"
#include "client/internal.h"
#include "client/swap_engine.h"

/* Arrays share the allocation table with device pointers; a tag bit keeps
 * the key spaces apart (user-space pointers never set it). */
#define KEY_ARRAY (1ull << 62)

#define VMM_WRAPPER_INIT(name)                                                                     \
	do {                                                                                       \
		nvs_init();                                                                        \
		if (!nvs_real.name)                                                                \
			return nvs_unresolved(#name);                                              \
	} while (0)

CUresult CUDAAPI nvs_wrap_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				      const CUmemAllocationProp *prop, unsigned long long flags)
{
	VMM_WRAPPER_INIT(cuMemCreate);
	if (nvs_cfg.disable || !handle || !prop || size == 0 ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return nvs_real.cuMemCreate(handle, size, prop, flags);
	int dev = prop->location.id;
	if (dev < 0 || dev >= NVS_MAX_GPUS)
		return nvs_real.cuMemCreate(handle, size, prop, flags); /* driver's error */
	nvs_device_used(dev);
	return nvs_svmm_create(handle, size, prop, flags);
}

CUresult CUDAAPI nvs_wrap_cuMemRelease(CUmemGenericAllocationHandle handle)
{
	VMM_WRAPPER_INIT(cuMemRelease);
	return nvs_cfg.disable ? nvs_real.cuMemRelease(handle) : nvs_svmm_release(handle);
}

CUresult CUDAAPI nvs_wrap_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
				   CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	VMM_WRAPPER_INIT(cuMemMap);
	return nvs_cfg.disable ? nvs_real.cuMemMap(ptr, size, offset, handle, flags)
			       : nvs_svmm_map(ptr, size, offset, handle, flags);
}

CUresult CUDAAPI nvs_wrap_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	VMM_WRAPPER_INIT(cuMemUnmap);
	return nvs_cfg.disable ? nvs_real.cuMemUnmap(ptr, size) : nvs_svmm_unmap(ptr, size);
}

CUresult CUDAAPI nvs_wrap_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
					 size_t count)
{
	VMM_WRAPPER_INIT(cuMemSetAccess);
	return nvs_cfg.disable ? nvs_real.cuMemSetAccess(ptr, size, desc, count)
			       : nvs_svmm_set_access(ptr, size, desc, count);
}

CUresult CUDAAPI nvs_wrap_cuMemExportToShareableHandle(void *shareableHandle,
						       CUmemGenericAllocationHandle handle,
						       CUmemAllocationHandleType handleType,
						       unsigned long long flags)
{
	VMM_WRAPPER_INIT(cuMemExportToShareableHandle);
	return nvs_cfg.disable ? nvs_real.cuMemExportToShareableHandle(shareableHandle, handle,
								       handleType, flags)
			       : nvs_svmm_export(shareableHandle, handle, handleType, flags);
}

CUresult CUDAAPI nvs_wrap_cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
	VMM_WRAPPER_INIT(cuMemGetAllocationPropertiesFromHandle);
	return nvs_cfg.disable ? nvs_real.cuMemGetAllocationPropertiesFromHandle(prop, handle)
			       : nvs_svmm_props(prop, handle);
}

CUresult CUDAAPI nvs_wrap_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
						      void *addr)
{
	VMM_WRAPPER_INIT(cuMemRetainAllocationHandle);
	return nvs_cfg.disable ? nvs_real.cuMemRetainAllocationHandle(handle, addr)
			       : nvs_svmm_retain(handle, addr);
}

CUresult CUDAAPI nvs_wrap_cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
							CUmemRangeHandleType handleType,
							unsigned long long flags)
{
	VMM_WRAPPER_INIT(cuMemGetHandleForAddressRange);
	return nvs_cfg.disable
		   ? nvs_real.cuMemGetHandleForAddressRange(handle, dptr, size, handleType, flags)
		   : nvs_svmm_range_handle(handle, dptr, size, handleType, flags);
}

CUresult CUDAAPI nvs_wrap_cuMemMapArrayAsync(CUarrayMapInfo *mapInfoList, unsigned int count,
					     CUstream hStream)
{
	VMM_WRAPPER_INIT(cuMemMapArrayAsync);
	return nvs_cfg.disable ? nvs_real.cuMemMapArrayAsync(mapInfoList, count, hStream)
			       : nvs_svmm_map_array(mapInfoList, count, hStream, 0);
}

CUresult CUDAAPI nvs_wrap_cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList, unsigned int count,
						  CUstream hStream)
{
	VMM_WRAPPER_INIT(cuMemMapArrayAsync_ptsz);
	return nvs_cfg.disable ? nvs_real.cuMemMapArrayAsync_ptsz(mapInfoList, count, hStream)
			       : nvs_svmm_map_array(mapInfoList, count, hStream, 1);
}

CUresult CUDAAPI nvs_wrap_cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
					     CUmemGenericAllocationHandle memHandle,
					     size_t memOffset, size_t size,
					     unsigned long long flags)
{
	VMM_WRAPPER_INIT(cuMulticastBindMem);
	return nvs_cfg.disable
		   ? nvs_real.cuMulticastBindMem(mcHandle, mcOffset, memHandle, memOffset, size,
						 flags)
		   : nvs_svmm_mc_bind_mem(mcHandle, mcOffset, memHandle, memOffset, size, flags);
}

CUresult CUDAAPI nvs_wrap_cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle,
					      size_t mcOffset, CUdeviceptr memptr, size_t size,
					      unsigned long long flags)
{
	VMM_WRAPPER_INIT(cuMulticastBindAddr);
	return nvs_cfg.disable
		   ? nvs_real.cuMulticastBindAddr(mcHandle, mcOffset, memptr, size, flags)
		   : nvs_svmm_mc_bind_addr(mcHandle, mcOffset, memptr, size, flags);
}

CUresult CUDAAPI nvs_wrap_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
					      CUdeviceptr addr, unsigned long long flags)
{
	VMM_WRAPPER_INIT(cuMemAddressReserve);
	CUresult r = nvs_real.cuMemAddressReserve(ptr, size, alignment, addr, flags);
	if (r == CUDA_SUCCESS && ptr && !nvs_cfg.disable)
		nvs_svmm_reserved(*ptr, size);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	VMM_WRAPPER_INIT(cuMemAddressFree);
	CUresult r = nvs_real.cuMemAddressFree(ptr, size);
	if (r == CUDA_SUCCESS && !nvs_cfg.disable)
		nvs_svmm_unreserved(ptr);
	return r;
}

static uint64_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	default:
		return 4; /* 32-bit and packed/compressed formats: an upper bound per channel */
	}
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t extent_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch)
{
	uint64_t v = mul_sat(w ? w : 1, h ? h : 1);
	v = mul_sat(v, d ? d : 1);
	return mul_sat(v, mul_sat(format_bytes(f), ch ? ch : 1));
}

/* Reserve, create, track; `create` performs the real call. */
static CUresult counted(uint64_t bytes, CUresult (*create)(void *), void *arg, uint64_t *key_out,
			const char *name)
{
	int dev;
	CUresult r = nvs_current_device(&dev);
	if (r != CUDA_SUCCESS)
		return create(arg); /* no context: the driver reports it */
	nvs_device_used(dev);
	if (nvs_acct_reserve(dev, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = create(arg);
	if (r != CUDA_SUCCESS) {
		nvs_acct_unreserve(dev, bytes);
		return r;
	}
	nvs_acct_track(dev, (CUdeviceptr)(*key_out | KEY_ARRAY), bytes, NVS_ALLOC_PINNED_DEVICE);
	NVS_DEBUG("%s: %llu bytes on GPU %d counted as pinned", name, (unsigned long long)bytes,
		  dev);
	return CUDA_SUCCESS;
}

struct arr_args {
	CUarray *ph;
	const void *desc;
	unsigned levels;
	CUmipmappedArray *pm;
	uint64_t key;
};

static CUresult do_array(void *p)
{
	struct arr_args *a = p;
	CUresult r = nvs_real.cuArrayCreate_v2(a->ph, a->desc);
	if (r == CUDA_SUCCESS)
		a->key = (uint64_t)(uintptr_t)*a->ph;
	return r;
}

static CUresult do_array3d(void *p)
{
	struct arr_args *a = p;
	CUresult r = nvs_real.cuArray3DCreate_v2(a->ph, a->desc);
	if (r == CUDA_SUCCESS)
		a->key = (uint64_t)(uintptr_t)*a->ph;
	return r;
}

static CUresult do_mipmapped(void *p)
{
	struct arr_args *a = p;
	CUresult r = nvs_real.cuMipmappedArrayCreate(a->pm, a->desc, a->levels);
	if (r == CUDA_SUCCESS)
		a->key = (uint64_t)(uintptr_t)*a->pm;
	return r;
}

CUresult CUDAAPI nvs_wrap_cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
	nvs_init();
	if (!nvs_real.cuArrayCreate_v2)
		return nvs_unresolved("cuArrayCreate_v2");
	if (nvs_cfg.disable || !pHandle || !desc)
		return nvs_real.cuArrayCreate_v2(pHandle, desc);
	struct arr_args a = {.ph = pHandle, .desc = desc};
	uint64_t b = extent_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
	return counted(b, do_array, &a, &a.key, "cuArrayCreate_v2");
}

CUresult CUDAAPI nvs_wrap_cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
	nvs_init();
	if (!nvs_real.cuArray3DCreate_v2)
		return nvs_unresolved("cuArray3DCreate_v2");
	if (nvs_cfg.disable || !pHandle || !desc)
		return nvs_real.cuArray3DCreate_v2(pHandle, desc);
	struct arr_args a = {.ph = pHandle, .desc = desc};
	uint64_t b =
	    extent_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
	return counted(b, do_array3d, &a, &a.key, "cuArray3DCreate_v2");
}

CUresult CUDAAPI nvs_wrap_cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
						 const CUDA_ARRAY3D_DESCRIPTOR *desc,
						 unsigned int numMipmapLevels)
{
	nvs_init();
	if (!nvs_real.cuMipmappedArrayCreate)
		return nvs_unresolved("cuMipmappedArrayCreate");
	if (nvs_cfg.disable || !pHandle || !desc)
		return nvs_real.cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
	uint64_t b = 0;
	size_t w = desc->Width, h = desc->Height, d = desc->Depth;
	int layered = (desc->Flags & CUDA_ARRAY3D_LAYERED) != 0;
	for (unsigned l = 0; l < (numMipmapLevels ? numMipmapLevels : 1) && l < 64; l++) {
		uint64_t lb = extent_bytes(w, h, d, desc->Format, desc->NumChannels);
		b = b > UINT64_MAX - lb ? UINT64_MAX : b + lb;
		w = w > 1 ? w / 2 : w;
		h = h > 1 ? h / 2 : h;
		if (!layered)
			d = d > 1 ? d / 2 : d;
	}
	struct arr_args a = {.pm = pHandle, .desc = desc, .levels = numMipmapLevels};
	return counted(b, do_mipmapped, &a, &a.key, "cuMipmappedArrayCreate");
}

static void uncount(uint64_t key)
{
	int dev;
	uint64_t b = nvs_acct_untrack((CUdeviceptr)(key | KEY_ARRAY), &dev);
	if (b)
		nvs_acct_unreserve(dev, b);
}

CUresult CUDAAPI nvs_wrap_cuArrayDestroy(CUarray hArray)
{
	nvs_init();
	if (!nvs_real.cuArrayDestroy)
		return nvs_unresolved("cuArrayDestroy");
	CUresult r = nvs_real.cuArrayDestroy(hArray);
	if (r == CUDA_SUCCESS && !nvs_cfg.disable)
		uncount((uint64_t)(uintptr_t)hArray);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	nvs_init();
	if (!nvs_real.cuMipmappedArrayDestroy)
		return nvs_unresolved("cuMipmappedArrayDestroy");
	CUresult r = nvs_real.cuMipmappedArrayDestroy(hMipmappedArray);
	if (r == CUDA_SUCCESS && !nvs_cfg.disable)
		uncount((uint64_t)(uintptr_t)hMipmappedArray);
	return r;
}
