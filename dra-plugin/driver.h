/*
 * Prepare and Unprepare (docs/dra.md): a claim's consumed capacity becomes
 * a ceiling the scheduler enforces on every process that uses the claim.
 *
 * Prepare(namespace, uid, name):
 *   1. already prepared (the kubelet retries, or asks again after it
 *      restarted): the same answer from the registry, its files rewritten
 *      if they went missing; no API call;
 *   2. GET the ResourceClaim; it must have that UID and an allocation with
 *      devices of this driver in this node's pool, on GPUs that are here
 *      and healthy;
 *   3. what it consumes on each GPU (consumedCapacity memory and cores; a
 *      missing entry is the whole GPU) must fit beside the claims already
 *      prepared on that GPU, else it is refused naming the GPU and what is
 *      left (the Kubernetes scheduler counted the same capacity, so this
 *      catches a stale or hand-made allocation);
 *   4. the binding file (files.h) with the ceiling, for the Pod the claim
 *      was made for or, for a claim several Pods may share, for none; then
 *      wait (--scheduler-wait) until the scheduler listens on the claim's
 *      Pod socket, so that no container starts without its limits;
 *   5. the CDI spec; the checkpoint; the answer: per device its request,
 *      pool, name, CDI IDs (ours, then the driver's, e.g. nvidia.com/gpu=
 *      <uuid>) and shareID.
 * Any failure undoes what the attempt wrote. Unprepare removes the files
 * and the checkpoint entry; an unknown claim is already unprepared.
 *
 * Calls come from the gRPC thread, one at a time; the lock guards the
 * registry against the main thread's readers (status, health).
 */
#ifndef NVSHARE_DRA_DRIVER_H
#define NVSHARE_DRA_DRIVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "files.h"
#include "gpus.h"
#include "kube.h"
#include "prepared.h"

struct nvs_dra_cfg {
	const char *driver; /* gpu.nvshare.com */
	const char *node;   /* = the pool's name */
	struct nvs_dra_files_cfg files;
	int check_library;	     /* refuse when the library is not on the node */
	const char *cdi_driver_kind; /* "" none: only our CDI devices */
	const char *checkpoint;
	uint64_t scheduler_wait_ms;
};

struct nvs_dra_driver {
	const struct nvs_dra_cfg *cfg;
	struct nvs_dra_gpus *gpus;
	struct nvs_kube *kube; /* the gRPC thread's */
	pthread_mutex_t lock;
	struct nvs_dra_prepared *prepared;
	unsigned nprepared;
};

/* Loads the checkpoint and rewrites the files of every claim in it that
 * went missing. Returns the number of claims recovered; -1 only when the
 * checkpoint cannot be read at all (a broken one is moved aside to
 * <checkpoint>.bad, logged, and the driver starts empty). */
int nvs_dra_driver_init(struct nvs_dra_driver *d, const struct nvs_dra_cfg *cfg,
			struct nvs_dra_gpus *gpus, struct nvs_kube *kube);
void nvs_dra_driver_fini(struct nvs_dra_driver *d);

/* The answer for one claim: a copy of its record. */
int nvs_dra_prepare(struct nvs_dra_driver *d, const char *ns, const char *uid, const char *name,
		    struct nvs_dra_prepared *out, char *err, size_t errcap);
int nvs_dra_unprepare(struct nvs_dra_driver *d, const char *ns, const char *uid, const char *name,
		      char *err, size_t errcap);

/* Claims prepared now. */
unsigned nvs_dra_prepared_count(struct nvs_dra_driver *d);

#endif
