/*
 * A minimal "newer driver" (built as fakedrv/libcuda.so.1): its
 * cuGetProcAddress hands out variants libnvshare does not know
 * (cuMemAlloc_v9, cuLaunchKernel_v9, cuGraphAddNode_v9, cuModuleLoad_v9), to
 * check that unknown variants of gated/accounted names fail closed and others
 * pass through.
 */
#include <cuda.h>
#include <string.h>

CUresult cuMemAlloc_v9(void);
CUresult cuMemAlloc_v9(void)
{
	return CUDA_SUCCESS;
}
CUresult cuLaunchKernel_v9(void);
CUresult cuLaunchKernel_v9(void)
{
	return CUDA_SUCCESS;
}
CUresult cuGraphAddNode_v9(void);
CUresult cuGraphAddNode_v9(void)
{
	return CUDA_SUCCESS;
}
CUresult cuModuleLoad_v9(void);
CUresult cuModuleLoad_v9(void)
{
	return CUDA_SUCCESS;
}
CUresult cuInit(unsigned int f)
{
	(void)f;
	return CUDA_SUCCESS;
}

static void *pick(const char *s)
{
	if (!strcmp(s, "cuMemAlloc"))
		return (void *)cuMemAlloc_v9;
	if (!strcmp(s, "cuLaunchKernel"))
		return (void *)cuLaunchKernel_v9;
	if (!strcmp(s, "cuGraphAddNode"))
		return (void *)cuGraphAddNode_v9;
	if (!strcmp(s, "cuModuleLoad"))
		return (void *)cuModuleLoad_v9;
	return NULL;
}

CUresult cuGetProcAddress_v2(const char *s, void **pfn, int v, cuuint64_t fl,
			     CUdriverProcAddressQueryResult *st)
{
	(void)v;
	(void)fl;
	*pfn = s ? pick(s) : NULL;
	if (st)
		*st = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_SUCCESS;
}
