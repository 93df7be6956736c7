#include "gpus.h"

#include "clock.h"
#include "events.h"
#include "log.h"
#include "nvml_api.h"
#include "parse.h"
#include "peer.h"
#include "core/policy.h"
#include "core/state.h"
#include "state_file.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define STR_(x) #x
#define STR(x) STR_(x)

/* NVML's lookup by UUID (MIG instances included), kept from discovery:
 * a client's UUID that NVML does not resolve is not one of this node's. */
static nvs_pfn_nvmlDeviceGetHandleByUUID nvml_by_uuid;
static nvs_pfn_nvmlDeviceGetMemoryInfo nvml_mem;
static nvs_pfn_nvmlDeviceGetName nvml_name;

static void gpu_init(struct gpu *g, int index, const char *uuid, const char *name, uint64_t total,
		     int nvml)
{
	memset(g, 0, sizeof *g);
	g->index = index;
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
}

/* A learned GPU no client uses any more (nothing attached, queued or
 * holding, no policy hook): its place may be taken by a new one. The one
 * unused longest. */
static struct gpu *unused_learned(void)
{
	struct gpu *best = NULL;
	for (unsigned i = 0; i < S.ngpus; i++) {
		struct gpu *g = &S.gpus[i];
		if (g->from_nvml || g->nattached || g->qlen || g->holder || g->hook)
			continue;
		if (!best || g->unused_since_ns < best->unused_since_ns)
			best = g;
	}
	return best;
}

static struct gpu *gpu_add(const char *uuid, const char *name, uint64_t total, int nvml)
{
	if (S.ngpus < NVS_MAX_GPUS) {
		struct gpu *g = &S.gpus[S.ngpus];
		gpu_init(g, (int)S.ngpus++, uuid, name, total, nvml);
		return g;
	}
	struct gpu *g = nvml ? NULL : unused_learned();
	if (!g) {
		NVS_ERROR("GPU table full (%d, every learned GPU in use): ignoring %s",
			  NVS_MAX_GPUS, uuid);
		return NULL;
	}
	NVS_INFO("GPU table full: GPU %d (%s, learned, no client since) is forgotten for %s",
		 g->index, g->uuid, uuid);
	char oq[2 * NVS_UUID_LEN + 8];
	nvs_event("gpu_forgotten", "\"gpu\":%d,\"uuid\":%s", g->index,
		  nvs_json_str(g->uuid, oq, sizeof oq));
	gpu_init(g, g->index, uuid, name, total, nvml);
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
	SYM(nvmlDeviceGetHandleByUUID);
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
		if (!nvs_gpu_uuid_valid(uuid)) {
			NVS_WARN("NVML GPU %u: malformed UUID; skipped", i);
			continue;
		}
		if (nvmlDeviceGetName)
			nvmlDeviceGetName(dev, name, sizeof name);
		name[sizeof name - 1] = '\0';
		if (nvmlDeviceGetMemoryInfo)
			nvmlDeviceGetMemoryInfo(dev, &mem);
		if (gpu_add(uuid, name, mem.total, 1))
			found++;
	}
	S.nvml_ok = 1;
	nvml_by_uuid = nvmlDeviceGetHandleByUUID;
	nvml_mem = nvmlDeviceGetMemoryInfo;
	nvml_name = nvmlDeviceGetName;
	NVS_INFO("NVML: %d GPU(s)", found);
	return found;
}

int nvs_gpu_uuid_valid(const char *uuid)
{
	if (strncmp(uuid, "GPU-", 4) && strncmp(uuid, "MIG-", 4))
		return 0;
	size_t n = strlen(uuid);
	if (n < 5 || n >= NVS_UUID_LEN)
		return 0;
	for (size_t i = 4; i < n; i++) {
		unsigned char c = (unsigned char)uuid[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '-' || c == '/'))
			return 0;
	}
	return 1;
}

static struct gpu *find(const char *uuid)
{
	for (unsigned i = 0; i < S.ngpus; i++)
		if (!strcmp(S.gpus[i].uuid, uuid))
			return &S.gpus[i];
	return NULL;
}

/* Learned GPUs cl's tenant is attached to (cl->fair: one record per
 * tenant, fairness.h), g excluded. */
static unsigned tenant_learned(const struct client *cl, const struct gpu *except)
{
	unsigned n = 0;
	for (unsigned i = 0; i < S.ngpus; i++) {
		const struct gpu *g = &S.gpus[i];
		if (g->from_nvml || g == except)
			continue;
		for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
			if (cg->client->fair == cl->fair) {
				n++;
				break;
			}
	}
	return n;
}

struct gpu *nvs_gpu_for_attach(const char *uuid, uint64_t total_mem, const struct client *cl,
			       const char **why)
{
	if (!nvs_gpu_uuid_valid(uuid)) {
		*why = "malformed UUID (expected GPU-... or MIG-..., letters, digits, '-')";
		return NULL;
	}
	struct gpu *g = find(uuid);
	if (g && g->from_nvml)
		return g;
	if (!g && S.nvml_ok) {
		/* Only NVML names this node's GPUs: one it does not list at
		 * start may still be a MIG instance it resolves. */
		nvmlDevice_t d;
		if (!nvml_by_uuid || nvml_by_uuid(uuid, &d) != NVML_SUCCESS) {
			*why = "not a GPU of this node (NVML does not know the UUID)";
			return NULL;
		}
		char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
		nvmlMemory_t mem = {0, 0, 0};
		if (nvml_name)
			nvml_name(d, name, sizeof name);
		name[sizeof name - 1] = '\0';
		if (nvml_mem)
			nvml_mem(d, &mem);
		NVS_INFO("client reports GPU %s, which NVML resolves (not listed at start)", uuid);
		g = gpu_add(uuid, name, mem.total, 1);
		if (!g)
			*why = "GPU table full";
		return g;
	}
	/* Learned (no NVML): a bounded number per tenant, so that made-up
	 * UUIDs cannot take every place; a place no client uses is given to
	 * the next new GPU. */
	if (tenant_learned(cl, g) >= NVS_LEARNED_GPUS_PER_TENANT) {
		*why = "too many learned GPUs for this tenant (at most " STR(
		    NVS_LEARNED_GPUS_PER_TENANT) ")";
		return NULL;
	}
	if (!g)
		g = gpu_add(uuid, "", total_mem, 0);
	if (!g)
		*why = "GPU table full (every learned GPU in use)";
	return g;
}

void nvs_gpu_learned_memory(struct gpu *g)
{
	if (g->from_nvml)
		return;
	/* What its clients say, the smallest report: a client that lies
	 * upwards (1 EiB) cannot make the GPU look big enough never to
	 * serialize; one that lies downwards only makes it serialize, the
	 * safe side. 0 says nothing. */
	uint64_t m = 0;
	for (const struct client_gpu *cg = g->ahead; cg; cg = cg->anext)
		if (cg->reported_total && (!m || cg->reported_total < m))
			m = cg->reported_total;
	if (!g->nattached)
		g->unused_since_ns = nvs_now_ns();
	if (!m || m == g->total_mem)
		return;
	char a[32], b[32];
	NVS_INFO("GPU %d (learned): memory %s -> %s (smallest its clients report)", g->index,
		 nvs_format_size(g->total_mem, a, sizeof a), nvs_format_size(m, b, sizeof b));
	g->total_mem = m;
	nvs_policy_settings_changed(g, nvs_now_ns());
}

struct gpu *nvs_gpu_by_index(int index)
{
	if (index < 0 || (unsigned)index >= S.ngpus)
		return NULL;
	return &S.gpus[index];
}
