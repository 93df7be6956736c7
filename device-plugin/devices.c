/* GPU discovery and health for nvshare-device-plugin (see devices.h). */
#include "devices.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "parse.h"

#define NVIDIA_DEVICES_DIR "/var/run/nvidia-container-devices"

static int add_uuid(char (*uuids)[NVS_DP_ID_MAX], size_t cap, size_t *n, const char *s, size_t len)
{
	while (len && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n'))
		len--;
	if (!len)
		return 0;
	/* The ID "<uuid>__<k>" must stay under the kubelet's 63 characters and
	 * must not contain our separator or characters the kubelet refuses. */
	if (len > NVS_DP_ID_MAX - 8) {
		NVS_ERROR("GPU ID \"%.*s\" is too long", (int)len, s);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
		if (!ok || (c == '_' && i + 1 < len && s[i + 1] == '_')) {
			NVS_ERROR("GPU ID \"%.*s\" has characters a device ID cannot hold",
				  (int)len, s);
			return -1;
		}
	}
	for (size_t i = 0; i < *n; i++)
		if (strlen(uuids[i]) == len && !memcmp(uuids[i], s, len))
			return 0; /* duplicate */
	if (*n >= cap) {
		NVS_ERROR("more than %zu GPUs", cap);
		return -1;
	}
	memcpy(uuids[*n], s, len);
	uuids[*n][len] = '\0';
	(*n)++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int read_devices_dir(const char *dir, char (*uuids)[NVS_DP_ID_MAX], size_t cap)
{
	DIR *dp = opendir(dir);
	if (!dp) {
		NVS_WARN("NVIDIA_VISIBLE_DEVICES=%s but it cannot be read", dir);
		return 0;
	}
	char *names[NVS_MAX_GPUS] = {0};
	size_t nn = 0;
	struct dirent *de;
	while ((de = readdir(dp)) && nn < NVS_MAX_GPUS) {
		if (de->d_name[0] == '.')
			continue;
		names[nn] = strdup(de->d_name);
		if (names[nn])
			nn++;
	}
	closedir(dp);
	qsort(names, nn, sizeof names[0], cmp_str);
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; i < nn; i++) {
		if (!rc && add_uuid(uuids, cap, &n, names[i], strlen(names[i])))
			rc = -1;
		free(names[i]);
	}
	return rc ? -1 : (int)n;
}

int nvs_dp_parse_visible_devices(const char *value, char (*uuids)[NVS_DP_ID_MAX], size_t cap)
{
	if (!value)
		return 0;
	if (!strcasecmp(value, "all") || !strcasecmp(value, "none") || !strcasecmp(value, "void") ||
	    !*value)
		return 0;
	if (value[0] == '/')
		return read_devices_dir(value, uuids, cap);
	size_t n = 0;
	const char *p = value;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (add_uuid(uuids, cap, &n, p, len))
			return -1;
		if (!comma)
			break;
		p = comma + 1;
	}
	return (int)n;
}

#define LOAD(field, sym)                                                                           \
	do {                                                                                       \
		*(void **)&d->field = dlsym(d->nvml_lib, sym);                                     \
		if (!d->field) {                                                                   \
			NVS_WARN("NVML lacks %s", sym);                                            \
			goto fail;                                                                 \
		}                                                                                  \
	} while (0)

static const char *nvml_err(struct nvs_dp_devices *d, nvmlReturn_t r)
{
	const char *s = d->error_string ? d->error_string(r) : NULL;
	return s ? s : "unknown error";
}

/* Returns the number of GPUs found through NVML, or -1 if NVML is unusable. */
static int nvml_discover(struct nvs_dp_devices *d)
{
	d->nvml_lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!d->nvml_lib) {
		NVS_INFO("NVML not available (%s)", dlerror());
		return -1;
	}
	LOAD(init, "nvmlInit_v2");
	LOAD(shutdown, "nvmlShutdown");
	LOAD(error_string, "nvmlErrorString");
	LOAD(get_count, "nvmlDeviceGetCount_v2");
	LOAD(by_index, "nvmlDeviceGetHandleByIndex_v2");
	LOAD(by_uuid, "nvmlDeviceGetHandleByUUID");
	LOAD(get_uuid, "nvmlDeviceGetUUID");
	LOAD(get_name, "nvmlDeviceGetName");
	LOAD(mem_info, "nvmlDeviceGetMemoryInfo");
	*(void **)&d->minor_number = dlsym(d->nvml_lib, "nvmlDeviceGetMinorNumber");
	nvmlReturn_t r = d->init();
	if (r != NVML_SUCCESS) {
		NVS_WARN("nvmlInit failed: %s", nvml_err(d, r));
		d->shutdown = NULL;
		goto fail;
	}
	unsigned count = 0;
	r = d->get_count(&count);
	if (r != NVML_SUCCESS) {
		NVS_WARN("nvmlDeviceGetCount failed: %s", nvml_err(d, r));
		goto fail;
	}
	for (unsigned i = 0; i < count && d->n < NVS_MAX_GPUS; i++) {
		struct nvs_dp_gpu *g = &d->gpu[d->n];
		nvmlDevice_t h;
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
		r = d->by_index(i, &h);
		if (r == NVML_SUCCESS)
			r = d->get_uuid(h, uuid, sizeof uuid);
		if (r != NVML_SUCCESS) {
			NVS_ERROR("GPU %u: cannot read its UUID (%s); skipped", i, nvml_err(d, r));
			continue;
		}
		size_t n = 0;
		char one[1][NVS_DP_ID_MAX];
		if (add_uuid(one, 1, &n, uuid, strlen(uuid)) || n != 1)
			continue;
		memcpy(g->uuid, one[0], sizeof g->uuid);
		if (d->get_name(h, g->name, sizeof g->name) != NVML_SUCCESS)
			snprintf(g->name, sizeof g->name, "GPU %u", i);
		g->handle = h;
		g->healthy = 1;
		unsigned minor;
		g->minor =
		    d->minor_number && d->minor_number(h, &minor) == NVML_SUCCESS ? (int)minor : -1;
		nvmlMemory_t mem;
		if (d->mem_info(h, &mem) == NVML_SUCCESS)
			g->mem_total = mem.total;
		d->n++;
	}
	if (d->n == 0) {
		NVS_WARN("NVML reports no GPU");
		goto fail;
	}
	d->source = "NVML";
	return (int)d->n;
fail:
	if (d->shutdown)
		d->shutdown();
	dlclose(d->nvml_lib);
	d->nvml_lib = NULL;
	d->shutdown = NULL;
	d->n = 0;
	return -1;
}

int nvs_dp_devices_init(struct nvs_dp_devices *d, unsigned replicas)
{
	memset(d, 0, sizeof *d);
	pthread_mutex_init(&d->lock, NULL);
	d->replicas = replicas;
	d->generation = 1;
	if (nvml_discover(d) > 0)
		goto done;
	const char *env = getenv("NVIDIA_VISIBLE_DEVICES");
	char uuids[NVS_MAX_GPUS][NVS_DP_ID_MAX];
	int n = nvs_dp_parse_visible_devices(env, uuids, NVS_MAX_GPUS);
	if (n < 0)
		return -1;
	if (env && (!strcasecmp(env, "all") || !*env))
		NVS_WARN("NVIDIA_VISIBLE_DEVICES=%s names no UUID and NVML is not available:"
			 " no GPU to advertise",
			 env);
	for (int i = 0; i < n; i++) {
		struct nvs_dp_gpu *g = &d->gpu[d->n++];
		memcpy(g->uuid, uuids[i], sizeof g->uuid);
		snprintf(g->name, sizeof g->name, "GPU");
		g->healthy = 1;
		g->minor = -1; /* no NVML: the CDI spec lists no node of its own */
		if (strncmp(g->uuid, "GPU-", 4) && strncmp(g->uuid, "MIG-", 4))
			NVS_WARN("NVIDIA_VISIBLE_DEVICES entry \"%s\" is not a UUID; containers"
				 " will get it as it is",
				 g->uuid);
	}
	d->source = "NVIDIA_VISIBLE_DEVICES";
done:
	for (unsigned i = 0; i < d->n; i++)
		NVS_INFO("GPU %u: %s (%s) from %s, %u virtual devices", i, d->gpu[i].uuid,
			 d->gpu[i].name, d->source, replicas);
	return (int)d->n;
}

void nvs_dp_devices_fini(struct nvs_dp_devices *d)
{
	if (d->nvml_lib) {
		if (d->shutdown)
			d->shutdown();
		dlclose(d->nvml_lib);
		d->nvml_lib = NULL;
	}
	pthread_mutex_destroy(&d->lock);
}

/* 1 healthy, 0 unhealthy. Called with the lock held. */
static int check_one(struct nvs_dp_devices *d, struct nvs_dp_gpu *g, char *why, size_t cap)
{
	nvmlReturn_t r;
	if (!g->handle || !g->healthy) {
		/* Handles of a lost GPU are stale: look it up again. */
		nvmlDevice_t h;
		r = d->by_uuid(g->uuid, &h);
		if (r != NVML_SUCCESS) {
			snprintf(why, cap, "nvmlDeviceGetHandleByUUID: %s", nvml_err(d, r));
			return 0;
		}
		g->handle = h;
	}
	nvmlMemory_t mem;
	r = d->mem_info(g->handle, &mem);
	switch (r) {
	case NVML_SUCCESS:
	case NVML_ERROR_NOT_SUPPORTED:
	case NVML_ERROR_NO_PERMISSION:
		return 1;
	case NVML_ERROR_GPU_IS_LOST:
	case NVML_ERROR_UNKNOWN:
	case NVML_ERROR_UNINITIALIZED:
	case NVML_ERROR_DRIVER_NOT_LOADED:
	case NVML_ERROR_NOT_FOUND:
	case NVML_ERROR_INVALID_ARGUMENT:
		snprintf(why, cap, "nvmlDeviceGetMemoryInfo: %s", nvml_err(d, r));
		return 0;
	default:
		/* Other errors say nothing about the GPU itself. */
		return 1;
	}
}

int nvs_dp_devices_poll_health(struct nvs_dp_devices *d)
{
	int changed = 0;
	pthread_mutex_lock(&d->lock);
	if (d->nvml_lib) {
		for (unsigned i = 0; i < d->n; i++) {
			struct nvs_dp_gpu *g = &d->gpu[i];
			char why[160] = "";
			int h = check_one(d, g, why, sizeof why);
			if (h != g->healthy) {
				if (h)
					NVS_INFO("GPU %s is healthy again", g->uuid);
				else
					NVS_WARN("GPU %s is unhealthy (%s)", g->uuid, why);
				g->healthy = h;
				changed = 1;
			}
		}
	}
	if (changed)
		d->generation++;
	pthread_mutex_unlock(&d->lock);
	return changed;
}

int nvs_dp_devices_set_memory(struct nvs_dp_devices *d, uint64_t unit, double oversubscription,
			      uint64_t fallback_total)
{
	pthread_mutex_lock(&d->lock);
	d->mem_unit = unit;
	uint64_t total = 0;
	int rc = 0;
	for (unsigned i = 0; i < d->n && unit; i++) {
		struct nvs_dp_gpu *g = &d->gpu[i];
		uint64_t bytes = g->mem_total ? g->mem_total : fallback_total;
		if (!g->mem_total && fallback_total)
			g->mem_total = fallback_total;
		/* long double: 141 GiB x 1.5 is exact enough; a unit is >= 1 MiB. */
		uint64_t units =
		    (uint64_t)((long double)bytes * oversubscription / (long double)unit);
		if (!bytes)
			NVS_WARN("GPU %s: memory size unknown (no NVML; set --gpu-memory-size): no "
				 "memory units",
				 g->uuid);
		if (units > NVS_DP_MAX_UNITS_PER_GPU) {
			char b[32];
			NVS_ERROR("GPU %s: %llu memory units of %s are more than %d: use a larger "
				  "--memory-unit",
				  g->uuid, (unsigned long long)units,
				  nvs_format_size(unit, b, sizeof b), NVS_DP_MAX_UNITS_PER_GPU);
			rc = -1;
		}
		g->units = units > NVS_DP_MAX_UNITS_PER_GPU ? 0 : (unsigned)units;
		total += units;
	}
	if (total > NVS_DP_MAX_UNITS) {
		NVS_ERROR("%llu memory units on this node are more than %d: use a larger "
			  "--memory-unit",
			  (unsigned long long)total, NVS_DP_MAX_UNITS);
		rc = -1;
	}
	pthread_mutex_unlock(&d->lock);
	return rc ? -1 : (int)total;
}

uint64_t nvs_dp_devices_mem_total(struct nvs_dp_devices *d, const char *uuid)
{
	uint64_t t = 0;
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->n; i++)
		if (!strcmp(d->gpu[i].uuid, uuid))
			t = d->gpu[i].mem_total;
	pthread_mutex_unlock(&d->lock);
	return t;
}

/* Virtual devices of GPU g for a resource. Called with the lock held. */
static unsigned count_of(const struct nvs_dp_devices *d, const struct nvs_dp_gpu *g,
			 enum nvs_dp_kind kind)
{
	return kind == NVS_DP_KIND_MEMORY ? g->units : d->replicas;
}

uint64_t nvs_dp_devices_foreach(struct nvs_dp_devices *d, enum nvs_dp_kind kind,
				void (*fn)(void *arg, const char *id, int healthy), void *arg)
{
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->n; i++) {
		unsigned count = count_of(d, &d->gpu[i], kind);
		for (unsigned k = 1; k <= count; k++) {
			char id[NVS_DP_ID_MAX];
			if (nvs_dp_format_id(id, sizeof id, d->gpu[i].uuid, k) == 0)
				fn(arg, id, d->gpu[i].healthy);
		}
	}
	uint64_t gen = d->generation;
	pthread_mutex_unlock(&d->lock);
	return gen;
}

uint64_t nvs_dp_devices_generation(struct nvs_dp_devices *d)
{
	pthread_mutex_lock(&d->lock);
	uint64_t gen = d->generation;
	pthread_mutex_unlock(&d->lock);
	return gen;
}

int nvs_dp_devices_has_id(struct nvs_dp_devices *d, enum nvs_dp_kind kind, const char *id)
{
	char uuid[NVS_DP_ID_MAX];
	unsigned slice;
	if (nvs_dp_parse_id(id, uuid, sizeof uuid, &slice))
		return 0;
	int found = 0;
	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < d->n && !found; i++)
		if (!strcmp(d->gpu[i].uuid, uuid) && slice >= 1 &&
		    slice <= count_of(d, &d->gpu[i], kind))
			found = 1;
	pthread_mutex_unlock(&d->lock);
	return found;
}
