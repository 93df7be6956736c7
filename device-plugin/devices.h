/*
 * The node's GPUs as nvshare-device-plugin sees them, and their health.
 *
 * Discovery: NVML (dlopen "libnvidia-ml.so.1", never linked) enumerates the
 * GPUs visible to the plugin's container. Without NVML (library missing,
 * nvmlInit failing, or no GPU) the UUIDs come from NVIDIA_VISIBLE_DEVICES
 * (a comma list, or NVIDIA's volume-mount strategy: the value
 * "/var/run/nvidia-container-devices" and one file per UUID there).
 *
 * Health (NVML only): every poll, nvmlDeviceGetMemoryInfo on each GPU's
 * handle; GPU_IS_LOST, UNKNOWN, UNINITIALIZED, DRIVER_NOT_LOADED or a
 * handle that cannot be found by UUID any more mark the GPU Unhealthy, a
 * later successful query marks it Healthy again. GPUs known only from the
 * environment are always Healthy.
 *
 * Thread safety: the table is read by the gRPC thread and updated by the
 * main thread; every function takes the table's lock.
 */
#ifndef NVSHARE_DP_DEVICES_H
#define NVSHARE_DP_DEVICES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nvml_api.h"
#include "policy.h"
#include "protocol.h" /* NVS_MAX_GPUS */

#define NVS_DP_MAX_REPLICAS 1000
/* Memory units: the kubelet reads ListAndWatch with a 4 MiB message limit
 * (~60 bytes a device), so units are capped per GPU and per node. */
#define NVS_DP_MAX_UNITS_PER_GPU 4096
#define NVS_DP_MAX_UNITS 32768

enum nvs_dp_kind {
	NVS_DP_KIND_GPU = 0,	/* nvshare.com/gpu: replicas slices per GPU */
	NVS_DP_KIND_MEMORY = 1, /* nvshare.com/gpu-memory: units per GPU */
};

struct nvs_dp_gpu {
	char uuid[NVS_DP_ID_MAX];
	char name[96];
	int healthy;
	nvmlDevice_t handle; /* NULL without NVML */
	uint64_t mem_total;  /* bytes: NVML, else --gpu-memory-size; 0 unknown */
	unsigned units;	     /* memory units advertised */
	int minor;	     /* /dev/nvidia<minor> (NVML), -1 unknown (the CDI spec) */
};

struct nvs_dp_devices {
	pthread_mutex_t lock;
	struct nvs_dp_gpu gpu[NVS_MAX_GPUS];
	unsigned n;
	unsigned replicas;
	uint64_t mem_unit;   /* bytes per memory unit (0: no memory resource) */
	uint64_t generation; /* bumped by every health change */
	const char *source;  /* "NVML" or "NVIDIA_VISIBLE_DEVICES" */
	/* NVML, when loaded. */
	void *nvml_lib;
	nvs_pfn_nvmlInit_v2 init;
	nvs_pfn_nvmlShutdown shutdown;
	nvs_pfn_nvmlErrorString error_string;
	nvs_pfn_nvmlDeviceGetCount_v2 get_count;
	nvs_pfn_nvmlDeviceGetHandleByIndex_v2 by_index;
	nvs_pfn_nvmlDeviceGetHandleByUUID by_uuid;
	nvs_pfn_nvmlDeviceGetUUID get_uuid;
	nvs_pfn_nvmlDeviceGetName get_name;
	nvs_pfn_nvmlDeviceGetMemoryInfo mem_info;
	nvs_pfn_nvmlDeviceGetMinorNumber minor_number; /* optional */
};

/* Finds the GPUs. Returns the number found (0 is not an error: the plugin
 * then advertises nothing), or -1 on a bad NVIDIA_VISIBLE_DEVICES entry. */
int nvs_dp_devices_init(struct nvs_dp_devices *d, unsigned replicas);
void nvs_dp_devices_fini(struct nvs_dp_devices *d);

/* Sets up the memory units: each GPU gets floor(total x oversubscription /
 * unit) units; GPUs whose size NVML did not give use fallback_total (0:
 * none, such a GPU gets no unit, logged). Returns the total number of units,
 * or -1 (logged) when that exceeds the caps above. */
int nvs_dp_devices_set_memory(struct nvs_dp_devices *d, uint64_t unit, double oversubscription,
			      uint64_t fallback_total);

/* Physical memory of a GPU in bytes (0 unknown). */
uint64_t nvs_dp_devices_mem_total(struct nvs_dp_devices *d, const char *uuid);

/* Re-checks health. Returns 1 if any GPU changed state, else 0. */
int nvs_dp_devices_poll_health(struct nvs_dp_devices *d);

/* Snapshot of the virtual devices of one resource for ListAndWatch: calls
 * fn once per virtual device under the lock; returns the generation seen. */
uint64_t nvs_dp_devices_foreach(struct nvs_dp_devices *d, enum nvs_dp_kind kind,
				void (*fn)(void *arg, const char *id, int healthy), void *arg);
uint64_t nvs_dp_devices_generation(struct nvs_dp_devices *d);

/* Whether a virtual device ID of that resource belongs to this node (right
 * UUID, number in 1..replicas or 1..units of that GPU). */
int nvs_dp_devices_has_id(struct nvs_dp_devices *d, enum nvs_dp_kind kind, const char *id);

/* Parses an NVIDIA_VISIBLE_DEVICES value into UUIDs (exposed for tests).
 * "all", "none", "void" and "" give 0 entries. Returns the count or -1. */
int nvs_dp_parse_visible_devices(const char *value, char (*uuids)[NVS_DP_ID_MAX], size_t cap);

#endif
