/*
 * CUDA IPC (cuIpcGetMemHandle): observed, never changed. The driver cannot
 * export managed memory (CUDA_ERROR_INVALID_VALUE), and by default nvshare
 * makes every cuMemAlloc managed, so an IPC program (NVIDIA's simpleIPC,
 * torch.multiprocessing sharing CUDA tensors) fails under nvshare where it
 * works natively. The driver's answer is returned as is; the first such
 * failure in a process is explained by one warning naming the setting that
 * fixes it (NVSHARE_UNIFIED_MEMORY=0, hooks_alloc.c), later ones go to DEBUG
 * (a program may retry per tensor).
 */
#include "client/accounting.h"
#include "client/internal.h"
#include "client/sched_client.h"

/* Is ptr managed memory? The driver's attribute covers pointers inside an
 * allocation; our table, the exact starts of the ones we made. */
static int is_managed(CUdeviceptr ptr)
{
	int managed = 0;
	if (nvs_real.cuPointerGetAttribute &&
	    nvs_real.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr) ==
		CUDA_SUCCESS)
		return managed != 0;
	enum nvs_alloc_kind kind;
	return nvs_acct_lookup(ptr, NULL, NULL, &kind) == 0 && kind == NVS_ALLOC_MANAGED;
}

CUresult CUDAAPI nvs_wrap_cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	nvs_init();
	if (!nvs_real.cuIpcGetMemHandle)
		return nvs_unresolved("cuIpcGetMemHandle");
	CUresult r = nvs_real.cuIpcGetMemHandle(pHandle, dptr);
	if (r != CUDA_ERROR_INVALID_VALUE || nvs_cfg.disable || !nvs_config_unified() ||
	    !is_managed(dptr))
		return r;
	static atomic_int hinted;
	if (!atomic_exchange(&hinted, 1))
		NVS_WARN("cuIpcGetMemHandle(0x%llx): CUDA_ERROR_INVALID_VALUE: nvshare made this "
			 "allocation managed memory, which CUDA IPC cannot export; set "
			 "NVSHARE_UNIFIED_MEMORY=0 for this process to keep its allocations device "
			 "memory (no oversubscription for it)",
			 (unsigned long long)dptr);
	else
		NVS_DEBUG("cuIpcGetMemHandle(0x%llx): managed memory, CUDA_ERROR_INVALID_VALUE",
			  (unsigned long long)dptr);
	return r;
}
