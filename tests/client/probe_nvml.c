/*
 * NVML memory information under the preload (run by t_nvml.sh): looked up
 * the way monitoring tools do (dlopen + dlsym), optionally after this
 * process allocated CUDA memory (argv[1] = MiB to allocate first).
 * Prints "total used free" for nvmlDeviceGetMemoryInfo and _v2.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "nvml_api.h"

int main(int argc, char **argv)
{
	if (argc > 1 && atoi(argv[1]) > 0) {
		CUdevice d;
		CUcontext c;
		CUdeviceptr p;
		if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
		    cuCtxSetCurrent(c) || cuMemAlloc(&p, (size_t)atoi(argv[1]) << 20)) {
			printf("cuda setup failed\n");
			return 1;
		}
	}
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (!h)
		return 1;
	nvs_pfn_nvmlInit_v2 init = (nvs_pfn_nvmlInit_v2)dlsym(h, "nvmlInit_v2");
	nvs_pfn_nvmlDeviceGetHandleByIndex_v2 byidx =
	    (nvs_pfn_nvmlDeviceGetHandleByIndex_v2)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	nvs_pfn_nvmlDeviceGetMemoryInfo mi =
	    (nvs_pfn_nvmlDeviceGetMemoryInfo)dlsym(h, "nvmlDeviceGetMemoryInfo");
	nvs_pfn_nvmlDeviceGetMemoryInfo_v2 mi2 =
	    (nvs_pfn_nvmlDeviceGetMemoryInfo_v2)dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
	Dl_info di;
	printf("lib %s\n", mi && dladdr((void *)mi, &di) ? di.dli_fname : "?");
	nvmlDevice_t dev;
	if (!init || !byidx || !mi || !mi2 || init() || byidx(0, &dev))
		return 1;
	nvmlMemory_t m;
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
	if (mi(dev, &m) || mi2(dev, &m2))
		return 1;
	printf("v1 %llu %llu %llu\n", m.total, m.used, m.free);
	printf("v2 %llu %llu %llu\n", m2.total, m2.used, m2.free);
	return 0;
}
