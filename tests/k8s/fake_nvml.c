/*
 * A tiny libnvidia-ml.so.1 for the device-plugin tests: just the functions
 * nvshare-device-plugin looks up, with GPUs and failures set from the
 * environment so that a test can make a GPU "fall off the bus".
 *
 *   FAKE_NVML_GPUS=uuid1,uuid2   the GPUs (default two fixed UUIDs)
 *   FAKE_NVML_LOST_FILE=path     UUIDs listed in this file (any separator)
 *                                answer NVML_ERROR_GPU_IS_LOST, re-read on
 *                                every call
 *   FAKE_NVML_INIT_FAIL=1        nvmlInit_v2 fails (NVML "absent")
 *   (nvmlDeviceGetMinorNumber: 10 + the GPU's index, so that a test tells
 *   a minor number from an index)
 *
 * The colleague-owned tests/sim fake NVML is the general one; this one
 * exists for health-failure injection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_api.h"

#define MAXG 16

struct fake_gpu {
	char uuid[96];
	int index;
};

static struct fake_gpu gpus[MAXG];
static unsigned ngpus;
static int inited;

static void load(void)
{
	const char *env = getenv("FAKE_NVML_GPUS");
	if (!env)
		env = "GPU-fa4e0000-0000-4000-8000-000000000001,GPU-fa4e0000-0000-4000-8000-"
		      "000000000002";
	ngpus = 0;
	const char *p = env;
	while (*p && ngpus < MAXG) {
		size_t len = strcspn(p, ",");
		if (len && len < sizeof gpus[0].uuid) {
			memcpy(gpus[ngpus].uuid, p, len);
			gpus[ngpus].uuid[len] = 0;
			gpus[ngpus].index = (int)ngpus;
			ngpus++;
		}
		p += len;
		if (*p == ',')
			p++;
	}
}

static int lost(const struct fake_gpu *g)
{
	const char *f = getenv("FAKE_NVML_LOST_FILE");
	if (!f)
		return 0;
	FILE *fp = fopen(f, "r");
	if (!fp)
		return 0;
	char buf[4096];
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = 0;
	return strstr(buf, g->uuid) != NULL;
}

static struct fake_gpu *from_handle(nvmlDevice_t h)
{
	struct fake_gpu *g = (struct fake_gpu *)h;
	if (g < gpus || g >= gpus + ngpus)
		return NULL;
	return g;
}

nvmlReturn_t nvmlInit_v2(void)
{
	const char *f = getenv("FAKE_NVML_INIT_FAIL");
	if (f && *f == '1')
		return NVML_ERROR_DRIVER_NOT_LOADED;
	load();
	inited = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
	inited = 0;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	default:
		return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	*count = ngpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *h)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (i >= ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*h = (nvmlDevice_t)&gpus[i];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *h)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	for (unsigned i = 0; i < ngpus; i++) {
		if (!strcmp(gpus[i].uuid, uuid)) {
			if (lost(&gpus[i]))
				return NVML_ERROR_GPU_IS_LOST;
			*h = (nvmlDevice_t)&gpus[i];
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *buf, unsigned int len)
{
	struct fake_gpu *g = from_handle(h);
	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(g->uuid) >= len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(buf, g->uuid);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *buf, unsigned int len)
{
	struct fake_gpu *g = from_handle(h);
	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	snprintf(buf, len, "Fake GPU %d", g->index);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m)
{
	struct fake_gpu *g = from_handle(h);
	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (lost(g))
		return NVML_ERROR_GPU_IS_LOST;
	m->total = 16ULL << 30;
	m->used = 0;
	m->free = m->total;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned int *minor)
{
	struct fake_gpu *g = from_handle(h);
	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	*minor = 10u + (unsigned)g->index;
	return NVML_SUCCESS;
}
