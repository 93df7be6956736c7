/*
 * NVML memory information, virtualized like cuMemGetInfo: when a limit
 * applies (NVSHARE_GPU_MEMORY_LIMIT, or the scheduler's run-time limit for
 * the CUDA device with the same UUID), total := limit, used := this
 * process's accounted usage on that device, free := max(0, limit - used).
 * Without a limit the real values pass through. NVML devices are matched to
 * CUDA devices by UUID (NVML ignores CUDA_VISIBLE_DEVICES), and only when
 * this process has already initialised CUDA through us: nvidia-smi never
 * loads libcuda, sees the environment limit and zero usage, and never
 * contacts the scheduler.
 */
#include "client/accounting.h"
#include "client/internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void nvs_nvml_resolve(void)
{
	void *h = NULL;
	int tried = 0;
	for (unsigned i = 0; i < nvs_entries_count; i++) {
		const struct nvs_entry *e = &nvs_entries[i];
		if (e->family != NVS_FAM_NVML && e->family != NVS_FAM_USE_NVML)
			continue;
		if (__atomic_load_n(e->real, __ATOMIC_ACQUIRE))
			continue;
		if (!tried) {
			tried = 1;
			h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
		}
		void *f = h ? nvs_dlsym_real(h, e->name) : nvs_dlsym_real(RTLD_NEXT, e->name);
		if (f) {
			void *expect = NULL;
			__atomic_compare_exchange_n(e->real, &expect, f, 0, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED);
		}
	}
}

/* CUDA ordinal of an NVML device, -1 if unknown. */
static int cuda_device_of(nvmlDevice_t device)
{
	if (!atomic_load_explicit(&nvs_inited, memory_order_acquire) ||
	    !nvs_real.nvmlDeviceGetUUID || !nvs_real.cuDeviceGetCount || !nvs_real.cuDeviceGet ||
	    !nvs_real.cuDeviceGetUuid_v2)
		return -1;
	char want[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	if (nvs_real.nvmlDeviceGetUUID(device, want, sizeof want) != NVML_SUCCESS)
		return -1;
	int n = 0;
	if (nvs_real.cuDeviceGetCount(&n) != CUDA_SUCCESS)
		return -1;
	for (int i = 0; i < n && i < NVS_MAX_GPUS; i++) {
		CUdevice d;
		CUuuid u;
		if (nvs_real.cuDeviceGet(&d, i) != CUDA_SUCCESS ||
		    nvs_real.cuDeviceGetUuid_v2(&u, d) != CUDA_SUCCESS)
			continue;
		const unsigned char *b = (const unsigned char *)u.bytes;
		char s[64];
		snprintf(s, sizeof s,
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
			 b[12], b[13], b[14], b[15]);
		if (!strcmp(s, want))
			return i;
	}
	return -1;
}

/* Applies the limit; returns 1 if the values were replaced. */
static int virtualize(nvmlDevice_t device, unsigned long long *total, unsigned long long *free,
		      unsigned long long *used)
{
	int dev = cuda_device_of(device);
	uint64_t lim = nvs_acct_configured_limit(dev);
	if (lim >= *total)
		return 0;
	uint64_t u = dev >= 0 ? nvs_acct_used(dev) : 0;
	*total = lim;
	*used = u;
	*free = u < lim ? lim - u : 0;
	NVS_DEBUG("nvmlDeviceGetMemoryInfo: CUDA device %d, total %llu used %llu", dev, *total,
		  *used);
	return 1;
}

nvmlReturn_t nvs_wrap_nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	nvs_config_load();
	nvs_nvml_resolve();
	if (!nvs_real.nvmlDeviceGetMemoryInfo)
		return NVML_ERROR_FUNCTION_NOT_FOUND;
	nvmlReturn_t r = nvs_real.nvmlDeviceGetMemoryInfo(device, memory);
	if (r != NVML_SUCCESS || nvs_cfg.disable || !memory)
		return r;
	virtualize(device, &memory->total, &memory->free, &memory->used);
	return r;
}

nvmlReturn_t nvs_wrap_nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	nvs_config_load();
	nvs_nvml_resolve();
	if (!nvs_real.nvmlDeviceGetMemoryInfo_v2)
		return NVML_ERROR_FUNCTION_NOT_FOUND;
	/* The real call checks memory->version; a layout we do not know is
	 * passed through untouched. */
	nvmlReturn_t r = nvs_real.nvmlDeviceGetMemoryInfo_v2(device, memory);
	if (r != NVML_SUCCESS || nvs_cfg.disable || !memory || memory->version != nvmlMemory_v2)
		return r;
	if (virtualize(device, &memory->total, &memory->free, &memory->used))
		memory->reserved = 0;
	return r;
}
