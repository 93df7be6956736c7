/* The node's GPUs as DRA devices (gpus.h). */
#include "gpus.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "parse.h"

typedef nvmlReturn_t (*pfn_driver_version)(char *, unsigned int);

/* NVML's strings into ours, cut to fit (a UUID or product name longer
 * than ours is not a real GPU's). */
static void copy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

int nvs_dra_gpus_init(struct nvs_dra_gpus *t, double oversubscription, uint64_t fallback_mem)
{
	memset(t, 0, sizeof *t);
	int n = nvs_dp_devices_init(&t->dp, 1);
	if (n < 0)
		return -1;
	char version[32] = "";
	if (t->dp.nvml_lib) {
		pfn_driver_version f =
		    (pfn_driver_version)dlsym(t->dp.nvml_lib, "nvmlSystemGetDriverVersion");
		if (!f || f(version, sizeof version) != NVML_SUCCESS)
			version[0] = '\0';
	}
	for (unsigned i = 0; i < t->dp.n; i++) {
		const struct nvs_dp_gpu *d = &t->dp.gpu[i];
		struct nvs_dra_gpu *g = &t->g[i];
		copy(g->uuid, sizeof g->uuid, d->uuid);
		copy(g->product, sizeof g->product, d->name);
		copy(g->driver_version, sizeof g->driver_version, version);
		g->index = (int)i;
		g->minor = d->minor;
		g->healthy = d->healthy;
		g->mem_physical = d->mem_total ? d->mem_total : fallback_mem;
		g->mem_capacity = nvs_dra_mem_capacity(g->mem_physical, oversubscription);
		nvs_dra_device_name(g->uuid, g->index, g->name, sizeof g->name);
		char a[32], b[32];
		if (g->mem_capacity)
			NVS_INFO("device %s: GPU %u %s (%s), memory %s, capacity %s", g->name, i,
				 g->uuid, g->product, nvs_format_size(g->mem_physical, a, sizeof a),
				 nvs_format_size(g->mem_capacity, b, sizeof b));
		else
			NVS_WARN("device %s: GPU %u %s: memory size unknown (no NVML; set "
				 "--gpu-memory-size): not published",
				 g->name, i, g->uuid);
	}
	t->n = t->dp.n;
	return (int)t->n;
}

void nvs_dra_gpus_fini(struct nvs_dra_gpus *t)
{
	nvs_dp_devices_fini(&t->dp);
}

int nvs_dra_gpus_poll(struct nvs_dra_gpus *t)
{
	return nvs_dp_devices_poll_health(&t->dp);
}

unsigned nvs_dra_gpus_snapshot(struct nvs_dra_gpus *t, struct nvs_dra_gpu *out, uint64_t *gen)
{
	pthread_mutex_lock(&t->dp.lock);
	for (unsigned i = 0; i < t->n; i++) {
		out[i] = t->g[i];
		out[i].healthy = t->dp.gpu[i].healthy;
	}
	if (gen)
		*gen = t->dp.generation;
	pthread_mutex_unlock(&t->dp.lock);
	return t->n;
}

int nvs_dra_gpus_find(struct nvs_dra_gpus *t, const char *device, struct nvs_dra_gpu *out)
{
	int found = -1;
	pthread_mutex_lock(&t->dp.lock);
	for (unsigned i = 0; i < t->n && found < 0; i++)
		if (!strcmp(t->g[i].name, device)) {
			*out = t->g[i];
			out->healthy = t->dp.gpu[i].healthy;
			found = (int)i;
		}
	pthread_mutex_unlock(&t->dp.lock);
	return found;
}
