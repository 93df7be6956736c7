/*
 * Client registry: HELLO, ATTACH_GPU, MEM_UPDATE, SWAP_STATS, and the
 * lock messages (checked, then handed to policy.c). A protocol violation
 * dooms the connection and touches nothing else.
 */
#ifndef NVSHARE_SCHEDULER_CLIENTS_H
#define NVSHARE_SCHEDULER_CLIENTS_H

#include "limit_resolve.h"
#include "protocol.h"

#include <stdint.h>

struct conn;
struct client;
struct client_gpu;

void nvs_client_msg(struct conn *c, const struct nvs_msg *m);
/* The client's connection is closing: release, dequeue, free. */
void nvs_client_gone(struct client *cl);

void nvs_client_send(struct client *cl, const struct nvs_msg *m);
/* Sends SET_LIMITS for one of the client's GPUs (its effective limits). */
void nvs_client_send_limits(struct client_gpu *cg);
/* The sources of cg's limits (limit_resolve.h): its client's HELLO, Pod
 * request and annotations, nvsharectl's client-wide and per-GPU values,
 * its LIMITS_IN_FORCE claim, its Pod socket binding's ceiling. */
void nvs_client_limit_sources(const struct client_gpu *cg, struct nvs_limit_sources *src);
/* Recomputes cg's limits in force from those sources (the one place they
 * are resolved, nvs_limits_resolve) and stores them in cg; returns them
 * with the source that decided each. Sends nothing. */
struct nvs_limits nvs_client_update_limits(struct client_gpu *cg);

#endif
