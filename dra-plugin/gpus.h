/*
 * The node's GPUs as DRA devices (slice.h struct nvs_dra_gpu) over the
 * device plugin's discovery and health checks (device-plugin/devices.h:
 * NVML through dlopen, else NVIDIA_VISIBLE_DEVICES; a GPU that NVML says is
 * lost is unhealthy until a check succeeds again). Adds what DRA publishes
 * beyond that: the device name, the driver version, the memory capacity.
 *
 * Thread safety: the health flags live in the device plugin's table,
 * under its lock; everything else is fixed after init.
 */
#ifndef NVSHARE_DRA_GPUS_H
#define NVSHARE_DRA_GPUS_H

#include <stdint.h>

#include "devices.h"
#include "slice.h"

struct nvs_dra_gpus {
	struct nvs_dp_devices dp;
	struct nvs_dra_gpu g[NVS_MAX_GPUS];
	unsigned n;
};

/* Finds the GPUs. Returns their number (0 is not an error), -1 on a bad
 * NVIDIA_VISIBLE_DEVICES. fallback_mem: the memory of a GPU NVML does not
 * size (0: such a GPU is not published). */
int nvs_dra_gpus_init(struct nvs_dra_gpus *t, double oversubscription, uint64_t fallback_mem);
void nvs_dra_gpus_fini(struct nvs_dra_gpus *t);

/* Health check; 1 when a GPU changed state. */
int nvs_dra_gpus_poll(struct nvs_dra_gpus *t);

/* A copy of the table with current health; returns n, *gen the health
 * generation (changes with every health change). */
unsigned nvs_dra_gpus_snapshot(struct nvs_dra_gpus *t, struct nvs_dra_gpu *out, uint64_t *gen);

/* The GPU named `device` (the slice's name), with current health; -1 when
 * there is none. */
int nvs_dra_gpus_find(struct nvs_dra_gpus *t, const char *device, struct nvs_dra_gpu *out);

#endif
