/*
 * Client registry: HELLO, ATTACH_GPU, MEM_UPDATE, SWAP_STATS, and the
 * lock messages (checked, then handed to policy.c). A protocol violation
 * dooms the connection and touches nothing else.
 */
#ifndef NVSHARE_SCHEDULER_CLIENTS_H
#define NVSHARE_SCHEDULER_CLIENTS_H

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
/* Recomputes cg's effective limits from HELLO and the overrides. */
void nvs_client_update_limits(struct client_gpu *cg);
/* Lowers cg's limits to the client's ceiling (its Pod socket's binding,
 * podsock.h), if above; 1 when it did. nvs_client_update_limits applies
 * it; so does whoever sets cg's limits directly (control.c). */
int nvs_client_ceil(struct client_gpu *cg);

#endif
