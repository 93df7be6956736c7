/*
 * A claim nvshare-dra-plugin prepared: what it wrote for it and what it
 * consumed where. The registry (driver.c), the checkpoint (checkpoint.c)
 * and the files (files.c) share this record.
 */
#ifndef NVSHARE_DRA_PREPARED_H
#define NVSHARE_DRA_PREPARED_H

#include <stdint.h>

#include "claim.h"

#define NVS_DRA_KEY_HEX 16 /* the binding's key (scheduler/podsock.h) */

/* One allocated device of the claim (an allocation result). */
struct nvs_dra_pdev {
	char request[NVS_DRA_LABEL_LEN];
	char pool[NVS_DRA_POOL_LEN];
	char device[NVS_DRA_LABEL_LEN];
	char share_id[NVS_POD_UID_LEN];
	char uuid[96]; /* the GPU's, for the CDI IDs and logs */
	uint64_t mem;  /* bytes consumed on that GPU */
	uint64_t cores;
};

struct nvs_dra_prepared {
	char uid[NVS_POD_UID_LEN];
	char ns[NVS_K8S_NS_LEN];
	char name[NVS_K8S_NAME_LEN];
	char key[NVS_DRA_KEY_HEX + 1];
	/* The binding's Pod (a claim made for one Pod), or none: a claim
	 * several Pods may share binds no Pod (docs/dra.md "Shared claims"). */
	char pod_name[NVS_K8S_NAME_LEN];
	char pod_uid[NVS_POD_UID_LEN];
	/* The ceiling handed to the scheduler: the smallest over the claim's
	 * GPUs of what it consumed on each. */
	uint32_t core_limit; /* 1..100 */
	uint64_t mem_limit;  /* bytes */
	unsigned ndev;
	struct nvs_dra_pdev dev[NVS_DRA_MAX_RESULTS];
	struct nvs_dra_prepared *next;
};

#endif
