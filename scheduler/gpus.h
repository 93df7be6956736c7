/*
 * The GPU table: discovered through NVML at start (when the driver's
 * libnvidia-ml.so.1 can be loaded), else learned from the UUIDs clients
 * report in ATTACH_GPU. Indexes are NVML's; learned GPUs take the next free
 * index in order of first appearance.
 *
 * A UUID is a client's claim (docs/security.md "GPU identifiers"): with
 * NVML only those NVML resolves are accepted; without it a learned GPU must
 * look like one (nvs_gpu_uuid_valid), a tenant keeps at most
 * NVS_LEARNED_GPUS_PER_TENANT of them, its memory is the smallest its
 * clients report, and once no client uses it its place in the full table
 * goes to the next new GPU.
 */
#ifndef NVSHARE_SCHEDULER_GPUS_H
#define NVSHARE_SCHEDULER_GPUS_H

#include <stdint.h>

struct gpu;

/* Loads NVML and adds every GPU it reports. Returns the number found, or
 * -1 when NVML is unavailable (logged; not an error). */
int nvs_gpus_discover(void);

/* More learned GPUs than a node has: a real application attaches each of
 * its GPUs once. */
#define NVS_LEARNED_GPUS_PER_TENANT 16

struct client;

/* "GPU-" or "MIG-" then letters, digits, '-' or '/' (no space, no control
 * character), shorter than NVS_UUID_LEN. */
int nvs_gpu_uuid_valid(const char *uuid);

/* The GPU a client attaches by UUID, added if new (memory from total_mem,
 * a learned GPU's first report). NULL, with *why set (static text), when
 * the UUID is malformed, unknown to NVML, one too many for cl's tenant, or
 * the table is full. */
struct gpu *nvs_gpu_for_attach(const char *uuid, uint64_t total_mem, const struct client *cl,
			       const char **why);

/* A learned GPU's attached clients changed: its memory is the smallest
 * total they report (client_gpu.reported_total), and with none attached
 * it becomes unused (its place may be reused). NVML GPUs: nothing. */
void nvs_gpu_learned_memory(struct gpu *g);
struct gpu *nvs_gpu_by_index(int index);

/* Scheduling capacity: nvs_gpu_capacity (core/policy.h). */

#endif
