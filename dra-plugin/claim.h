/*
 * A ResourceClaim (resource.k8s.io/v1) as nvshare-dra-plugin reads it, and
 * Kubernetes quantities. Pure functions (cJSON only, no I/O, no globals):
 * the gRPC thread parses what the API server returned, the unit tests and
 * the fuzz-style cases feed them anything.
 *
 * What is read (docs/dra.md "What Prepare reads"):
 *   metadata.{namespace,name,uid,ownerReferences[]}
 *   status.allocation.devices.results[]{request,driver,pool,device,
 *       shareID,consumedCapacity{memory,cores}}   (our driver's only)
 *   status.reservedFor[]{apiGroup,resource,name,uid}
 */
#ifndef NVSHARE_DRA_CLAIM_H
#define NVSHARE_DRA_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"

/* Allocation results of our driver in one claim (the API allows 32
 * requests, each up to 128 devices; a GPU claim has a handful). */
#define NVS_DRA_MAX_RESULTS 32
/* Pods kept from status.reservedFor (the API allows 256): one decides the
 * binding's Pod, more only say "shared". */
#define NVS_DRA_MAX_PODS 8
/* DRA names: a request or device name is a DNS label (63), a pool a
 * path of subdomains (253). */
#define NVS_DRA_LABEL_LEN 64
#define NVS_DRA_POOL_LEN 254

/* The capacities nvshare publishes (slice.h) and reads back. */
#define NVS_DRA_CAP_MEMORY "memory"
#define NVS_DRA_CAP_CORES "cores"

struct nvs_dra_result {
	char request[NVS_DRA_LABEL_LEN];
	char pool[NVS_DRA_POOL_LEN];
	char device[NVS_DRA_LABEL_LEN];
	char share_id[NVS_POD_UID_LEN]; /* "" none (an exclusive allocation) */
	int has_mem, has_cores;		/* consumedCapacity carried the entry */
	uint64_t mem;			/* bytes */
	uint64_t cores;			/* percent of the GPU's time, 0..100 */
};

struct nvs_dra_pod_ref {
	char name[NVS_K8S_NAME_LEN];
	char uid[NVS_POD_UID_LEN];
};

struct nvs_dra_claim {
	char ns[NVS_K8S_NS_LEN];
	char name[NVS_K8S_NAME_LEN];
	char uid[NVS_POD_UID_LEN];
	int allocated; /* status.allocation present */
	unsigned nres;
	struct nvs_dra_result res[NVS_DRA_MAX_RESULTS];
	unsigned nother; /* results of other drivers (not ours to prepare) */
	/* status.reservedFor: the Pods (first NVS_DRA_MAX_PODS), how many
	 * there were, and consumers that are not Pods. */
	unsigned npods, npods_total, nnonpods;
	struct nvs_dra_pod_ref pod[NVS_DRA_MAX_PODS];
	/* metadata.ownerReferences: the controller, when it is a Pod (a
	 * claim made from a ResourceClaimTemplate for that Pod). */
	char owner_pod_uid[NVS_POD_UID_LEN];
};

/*
 * Parses a ResourceClaim object (the API server's JSON body) into c,
 * keeping the results whose driver is `driver`. Returns 0, or -1 with err
 * saying what is wrong, naming the field and value (a claim that is not
 * one, results with a missing or over-long pool/device, a consumed
 * capacity that is not a quantity, cores over 100, more results than
 * NVS_DRA_MAX_RESULTS). A claim without status.allocation parses (allocated
 * 0): whether that is an error is the caller's word.
 */
int nvs_dra_claim_parse(const char *json, size_t len, const char *driver, struct nvs_dra_claim *c,
			char *err, size_t errcap);

/* Whether the claim belongs to exactly one Pod: reserved for that Pod
 * alone, and made for it (its controller owner). Returns the index in
 * c->pod, or -1 (several consumers, a shared ResourceClaim, not a Pod). */
int nvs_dra_claim_single_pod(const struct nvs_dra_claim *c);

/*
 * A Kubernetes quantity ("10Gi", "30", "1.5G", "500m", "1e3", "12884901888")
 * into a whole number, rounded up (a fraction of a byte or of a percent
 * counts as one more). Binary suffixes Ki..Ei, decimal n u m k M G T P E,
 * or a decimal exponent; an optional leading '+'. Returns 0, or -1 for a
 * negative value, junk, or more than UINT64_MAX.
 */
int nvs_dra_quantity(const char *s, uint64_t *out);

/* Bytes as an exact quantity, in the largest binary unit that divides
 * them ("16Gi", "13313Mi", "1536Ki", "1000"), so that two different
 * amounts never read the same in a message. Returns out. */
const char *nvs_dra_format_bytes(uint64_t v, char *out, size_t cap);

#endif
