/*
 * Publishing the node's ResourceSlice (slice.h) through the API server, on
 * the main thread, never blocking Prepare:
 *
 *   - at start: GET our slice by name (its resourceVersion and pool
 *     generation), delete other slices of this driver on this node (an
 *     older version's names), then create it or replace it with the pool
 *     generation one higher;
 *   - whenever a GPU's health changes: replace it (an unhealthy GPU is
 *     left out), pool generation + 1;
 *   - every --slice-resync (default 5 min): GET it again and put it back
 *     if someone deleted or changed it;
 *   - errors (no answer, 5xx, 403, a 409 conflict) are retried after 1 s,
 *     doubling to 30 s, and logged once per kind until it works again.
 *
 * Quantities come back from the API server in its canonical form, so what
 * was last sent, not what a GET returns, is compared with what should be.
 */
#ifndef NVSHARE_DRA_PUBLISH_H
#define NVSHARE_DRA_PUBLISH_H

#include <stdint.h>

#include "gpus.h"
#include "kube.h"

struct cJSON;

struct nvs_dra_publisher {
	const char *driver, *node;
	char name[256];
	struct nvs_kube *kube;
	struct nvs_dra_gpus *gpus;
	uint64_t resync_ms;
	/* state */
	uint64_t generation; /* pool generation of the slice we know */
	char rv[256];	     /* its resourceVersion, "" none known */
	int known;	     /* rv and generation were read from the server */
	int strays_done;     /* other slices of ours deleted */
	struct cJSON *sent;  /* the spec the server last took from us */
	uint64_t health_gen;
	uint64_t next_ms, resync_at_ms;
	unsigned backoff_ms;
	char last_err[300]; /* logged once until it changes */
	unsigned published; /* successful creates and replaces */
	unsigned ndevices;  /* devices in what was published */
};

void nvs_dra_publish_init(struct nvs_dra_publisher *p, const char *driver, const char *node,
			  struct nvs_kube *kube, struct nvs_dra_gpus *gpus, uint64_t resync_ms);
void nvs_dra_publish_fini(struct nvs_dra_publisher *p);

/* Does what is due at now (ms, CLOCK_MONOTONIC); returns when to call it
 * again at the latest. */
uint64_t nvs_dra_publish_step(struct nvs_dra_publisher *p, uint64_t now);

#endif
