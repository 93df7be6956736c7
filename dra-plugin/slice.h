/*
 * The node's GPUs as DRA devices, and the ResourceSlice (resource.k8s.io/v1)
 * that publishes them. Pure functions over cJSON: publish.c sends what
 * these build; the unit tests read it.
 *
 * One slice per node, named <node>-<driver> (a hash when that is longer
 * than a name may be), pool = the node name, resourceSliceCount 1. Each
 * healthy GPU is one device (an unhealthy one is left out, so that the
 * Kubernetes scheduler allocates nothing more on it):
 *
 *   name                      gpu-<UUID without "GPU-", lower case>
 *   allowMultipleAllocations  true (KEP-5075 consumable capacity)
 *   attributes                uuid, productName (strings), index (int),
 *                             physicalMemory (int, bytes), driverVersion
 *                             (a version, when NVML tells)
 *   capacity memory           the GPU's memory x --memory-oversubscription,
 *                             in whole MiB; requests in 1 MiB steps from
 *                             1 MiB; default (a request that names no
 *                             memory) all of it
 *   capacity cores            100 (percent of the GPU's time), steps of 1
 *                             from 1; default 100
 *
 * A claim that asks for nothing therefore consumes the whole GPU: a whole
 * GPU is a claim with no capacity requests (docs/dra.md).
 */
#ifndef NVSHARE_DRA_SLICE_H
#define NVSHARE_DRA_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "claim.h"

#define NVS_DRA_MIB (1ull << 20)

struct nvs_dra_gpu {
	char name[NVS_DRA_LABEL_LEN]; /* the device's name in the slice */
	char uuid[96];
	char product[96];
	char driver_version[32]; /* "" unknown */
	int index;		 /* NVML's */
	int minor;		 /* /dev/nvidia<minor>, -1 unknown */
	int healthy;
	uint64_t mem_physical; /* bytes, 0 unknown */
	uint64_t mem_capacity; /* bytes, a multiple of 1 MiB: what is published */
};

/* The device name of a GPU: gpu-<uuid less "GPU-", lower case> when that
 * is a DNS label, else gpu-<index>. */
void nvs_dra_device_name(const char *uuid, int index, char *out, size_t cap);

/* memory capacity: physical x factor, rounded down to whole MiB. */
uint64_t nvs_dra_mem_capacity(uint64_t physical, double factor);

/* The slice's name for this node and driver (a DNS subdomain). */
void nvs_dra_slice_name(const char *node, const char *driver, char *out, size_t cap);

struct cJSON;
/* The slice's spec for GPUs g[0..n) (unhealthy ones and ones of unknown
 * memory left out): caller frees with cJSON_Delete. */
struct cJSON *nvs_dra_slice_spec(const char *driver, const char *node, uint64_t generation,
				 const struct nvs_dra_gpu *g, unsigned n);
/* A whole ResourceSlice object around spec (taken over): metadata.name,
 * and metadata.resourceVersion when rv is not NULL (an update). */
struct cJSON *nvs_dra_slice_object(const char *name, const char *rv, struct cJSON *spec);

/* Whether two specs publish the same thing, the pool's generation aside. */
int nvs_dra_slice_same(const struct cJSON *a, const struct cJSON *b);

#endif
