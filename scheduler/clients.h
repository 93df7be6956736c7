/*
 * Client registry: HELLO, ATTACH_GPU, MEM_UPDATE, SWAP_STATS, and the
 * lock messages (checked, then handed to policy.c). A protocol violation
 * dooms the connection and touches nothing else.
 */
#ifndef NVSHARE_SCHEDULER_CLIENTS_H
#define NVSHARE_SCHEDULER_CLIENTS_H

#include "core/limits_apply.h"
#include "protocol.h"

#include <stdint.h>

struct conn;
struct client;
struct client_gpu;

void nvs_client_msg(struct conn *c, const struct nvs_msg *m);
/* The client's connection is closing: release, dequeue, free. */
void nvs_client_gone(struct client *cl);

/* Registers the decision core's port (core/port.h: sends go to the
 * client's connection, events to the stream, NVML's evidence from
 * unmanaged.c) and its timer with the loop (NVS_LOOP_DECIDE). Before any
 * client connects. */
void nvs_clients_start(void);

void nvs_client_send(struct client *cl, const struct nvs_msg *m);
/* nvs_limits_set_from (core/limits_apply.h) now: the Pod watch's entry. */
int nvs_client_set_limits_from(struct client *cl, enum nvs_limit_src src, uint32_t core,
			       uint64_t mem);

#endif
