#include "gpus.h"

#include "log.h"
#include "nvml_api.h"
#include "parse.h"
#include "peer.h"
#include "state.h"
#include "state_file.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct gpu *gpu_add(const char *uuid, const char *name, uint64_t total, int nvml)
{
	if (S.ngpus >= NVS_MAX_GPUS) {
		NVS_ERROR("GPU table full (%d): ignoring %s", NVS_MAX_GPUS, uuid);
		return NULL;
	}
	struct gpu *g = &S.gpus[S.ngpus];
	memset(g, 0, sizeof *g);
	g->index = (int)S.ngpus++;
	snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
	snprintf(g->name, sizeof g->name, "%s", name);
	g->total_mem = total;
	g->from_nvml = nvml;
	g->mode = S.cfg.mode;
	g->tq_ms = S.cfg.tq_ms;
	g->capacity_override =
	    S.cfg.capacity[g->index] ? S.cfg.capacity[g->index] : S.cfg.capacity_all;
	nvs_state_apply_gpu(g); /* settings nvsharectl made for it (state file) */
	char b1[32], b2[32];
	NVS_INFO("GPU %d: %s \"%s\" memory %s capacity %s mode %s tq %llums (%s)", g->index,
		 g->uuid, g->name, nvs_format_size(total, b1, sizeof b1),
		 nvs_format_size(nvs_gpu_capacity(g), b2, sizeof b2), nvs_mode_name(g->mode),
		 (unsigned long long)g->tq_ms, nvml ? "NVML" : "learned from a client");
	return g;
}

int nvs_gpus_discover(void)
{
	/* RTLD_LOCAL: NVML's symbols are only reached through dlsym. The
	 * handle stays open for the life of the process. */
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		/* On a node with the NVIDIA driver loaded, a missing NVML is a
		 * broken install (the scheduler image without the driver's
		 * libraries, a wrong library path): the per-GPU capacity and
		 * the unmanaged-process check are gone. Elsewhere (the
		 * simulator, a machine without GPUs) it is expected. */
		char drv[sizeof nvs_proc_root + 32];
		snprintf(drv, sizeof drv, "%s/driver/nvidia/version", nvs_proc_root);
		if (access(drv, F_OK) == 0)
			NVS_WARN("NVML not available (%s) although the NVIDIA driver is loaded "
				 "(%s): GPUs will be learned from clients; install the driver's "
				 "libnvidia-ml.so.1 where the scheduler runs",
				 dlerror(), drv);
		else
			NVS_INFO("NVML not available (%s): GPUs will be learned from clients",
				 dlerror());
		return -1;
	}
#define SYM(name) nvs_pfn_##name name = (nvs_pfn_##name)dlsym(h, #name)
	SYM(nvmlInit_v2);
	SYM(nvmlDeviceGetCount_v2);
	SYM(nvmlDeviceGetHandleByIndex_v2);
	SYM(nvmlDeviceGetUUID);
	SYM(nvmlDeviceGetName);
	SYM(nvmlDeviceGetMemoryInfo);
	SYM(nvmlErrorString);
#undef SYM
	if (!nvmlInit_v2 || !nvmlDeviceGetCount_v2 || !nvmlDeviceGetHandleByIndex_v2 ||
	    !nvmlDeviceGetUUID) {
		NVS_WARN("NVML lacks required functions: GPUs will be learned from clients");
		return -1;
	}
	nvmlReturn_t r = nvmlInit_v2();
	if (r != NVML_SUCCESS) {
		NVS_WARN("nvmlInit_v2 failed: %s (%d): GPUs will be learned from clients",
			 nvmlErrorString ? nvmlErrorString(r) : "?", r);
		return -1;
	}
	unsigned count = 0;
	r = nvmlDeviceGetCount_v2(&count);
	if (r != NVML_SUCCESS) {
		NVS_WARN("nvmlDeviceGetCount_v2 failed (%d)", r);
		return -1;
	}
	int found = 0;
	for (unsigned i = 0; i < count; i++) {
		nvmlDevice_t dev;
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
		char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
		nvmlMemory_t mem = {0, 0, 0};
		if (nvmlDeviceGetHandleByIndex_v2(i, &dev) != NVML_SUCCESS ||
		    nvmlDeviceGetUUID(dev, uuid, sizeof uuid) != NVML_SUCCESS) {
			NVS_WARN("NVML GPU %u: no handle or UUID; skipped", i);
			continue;
		}
		uuid[sizeof uuid - 1] = '\0';
		if (nvmlDeviceGetName)
			nvmlDeviceGetName(dev, name, sizeof name);
		name[sizeof name - 1] = '\0';
		if (nvmlDeviceGetMemoryInfo)
			nvmlDeviceGetMemoryInfo(dev, &mem);
		if (gpu_add(uuid, name, mem.total, 1))
			found++;
	}
	S.nvml_ok = 1;
	NVS_INFO("NVML: %d GPU(s)", found);
	return found;
}

struct gpu *nvs_gpu_by_uuid(const char *uuid, uint64_t total_mem)
{
	if (!uuid[0])
		return NULL;
	for (unsigned i = 0; i < S.ngpus; i++)
		if (!strcmp(S.gpus[i].uuid, uuid)) {
			struct gpu *g = &S.gpus[i];
			/* A learned GPU's memory is what its clients say. */
			if (!g->from_nvml && total_mem > g->total_mem)
				g->total_mem = total_mem;
			return g;
		}
	if (S.nvml_ok)
		NVS_WARN("client reports GPU %s, which NVML did not list: adding it", uuid);
	return gpu_add(uuid, "", total_mem, 0);
}

struct gpu *nvs_gpu_by_index(int index)
{
	if (index < 0 || (unsigned)index >= S.ngpus)
		return NULL;
	return &S.gpus[index];
}

uint64_t nvs_gpu_capacity(const struct gpu *g)
{
	uint64_t cap;
	if (g->capacity_override)
		cap = g->capacity_override;
	else if (!g->total_mem)
		return UINT64_MAX;
	else
		cap = g->total_mem > S.cfg.reserve ? g->total_mem - S.cfg.reserve : g->total_mem;
	/* Memory that unmanaged processes hold (NVSHARE_UNMANAGED=serialize,
	 * unmanaged.c) is not there for clients: it is pinned. */
	return cap > g->unmanaged_pinned ? cap - g->unmanaged_pinned : 0;
}
