/*
 * Simulated GPU: CUDA arrays. Like linear allocations they are real host
 * memory and count as used device memory; copies to and from them are in
 * sim_copy.c.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "sim_memory.h"

struct sim_array *sim_array_check(CUarray h)
{
	struct sim_array *a = (struct sim_array *)h;
	return a && a->magic == SIM_ARRAY_MAGIC ? a : NULL;
}

static size_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 4;
	}
}

static CUresult array_new(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	SIM_NEED_CTX(dev);
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
	if (sim_mem_reserve(dev, sim_round_up(a->bytes, SIM_PAGE)) != 0) {
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->data = sim_map_anon(sim_round_up(a->bytes, 4096));
	if (!a->data) {
		sim_mem_unreserve(dev, sim_round_up(a->bytes, SIM_PAGE));
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
	CUDA_ARRAY3D_DESCRIPTOR d = {.Width = p->Width,
				     .Height = p->Height,
				     .Depth = 0,
				     .Format = p->Format,
				     .NumChannels = p->NumChannels};
	return array_new(pHandle, &d);
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
	return array_new(pHandle, p);
}

CUresult cuArrayDestroy(CUarray hArray)
{
	SIM_REQUIRE_INIT();
	struct sim_array *a = sim_array_check(hArray);
	if (!a)
		return CUDA_ERROR_INVALID_HANDLE;
	a->magic = 0;
	sim_mem_unreserve(a->dev, sim_round_up(a->bytes, SIM_PAGE));
	munmap(a->data, sim_round_up(a->bytes, 4096));
	free(a);
	return CUDA_SUCCESS;
}

CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *p, CUarray hArray)
{
	struct sim_array *a = sim_array_check(hArray);
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
	struct sim_array *a = sim_array_check(hArray);
	if (!a || !p)
		return CUDA_ERROR_INVALID_HANDLE;
	*p = a->d;
	return CUDA_SUCCESS;
}
