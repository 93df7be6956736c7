/*
 * The GPU table: discovered through NVML at start (when the driver's
 * libnvidia-ml.so.1 can be loaded), else learned from the UUIDs clients
 * report in ATTACH_GPU. Indexes are NVML's; learned GPUs take the next free
 * index in order of first appearance.
 */
#ifndef NVSHARE_SCHEDULER_GPUS_H
#define NVSHARE_SCHEDULER_GPUS_H

#include <stdint.h>

struct gpu;

/* Loads NVML and adds every GPU it reports. Returns the number found, or
 * -1 when NVML is unavailable (logged; not an error). */
int nvs_gpus_discover(void);

/* Finds the GPU with this UUID, or adds it (memory from total_mem).
 * Returns NULL when the table is full or the UUID is empty. */
struct gpu *nvs_gpu_by_uuid(const char *uuid, uint64_t total_mem);
struct gpu *nvs_gpu_by_index(int index);

/* Scheduling capacity in bytes: the override, else memory minus reserve,
 * less the memory pinned by unmanaged processes (NVSHARE_UNMANAGED=
 * serialize). UINT64_MAX when the memory is unknown (never serialize on
 * memory). */
uint64_t nvs_gpu_capacity(const struct gpu *g);

#endif
