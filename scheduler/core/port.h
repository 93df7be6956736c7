/*
 * The decision core's port: everything the core (scheduler/core/: the lock
 * policy, co-scheduling, quotas, fairness, claims, limits) needs from the
 * rest of the scheduler, registered by the shell (clients.c) at start.
 * Dependencies run one way: the shell calls the core's entry points with
 * the time (`now`, CLOCK_MONOTONIC ns) and what arrived; the core answers
 * through this port and the deadlines it returns (nvs_policy_next_deadline,
 * which the shell turns into a loop timer). The core includes no
 * transport header, reads no clock and owns no descriptor; tests/core/
 * links it in process with a port that records what it sends, on a
 * virtual clock.
 *
 * What the core must know about a connection comes as client flags
 * (struct client .flags), kept up to date by the shell (conn.c).
 */
#ifndef NVSHARE_SCHEDULER_CORE_PORT_H
#define NVSHARE_SCHEDULER_CORE_PORT_H

#include <stdint.h>

struct client;
struct client_gpu;
struct nvs_msg;

/* struct client .flags */
/* Its connection is closing (a protocol error, not reading): the lock is
 * not granted to it (its detach comes in the same loop turn). */
#define NVS_CLIENT_DOOMED 1u
/* Output is waiting to be written to it (it is not reading right now):
 * a GPU_MODE is owed rather than queued behind it. */
#define NVS_CLIENT_BACKED_UP 2u

struct nvs_core_port {
	void *ctx;
	/* Queues m for cl's connection; a client whose connection is gone
	 * gets nothing. Required. */
	void (*send)(void *ctx, struct client *cl, const struct nvs_msg *m);
	/* One event of the stream (events.h): its name and its fields as a
	 * JSON fragment. NULL: none kept. */
	void (*event)(void *ctx, const char *name, const char *fields);
	/* The evidence (unmanaged.c): does cg's process have a context on its
	 * GPU per NVML: 1 yes, 0 no, -1 not known. NULL: always -1. */
	int (*context)(void *ctx, struct client_gpu *cg);
};

/* Registers the port (copied); before any entry point runs. */
void nvs_core_set_port(const struct nvs_core_port *p);

/* The core's side of the port. */
void nvs_core_send(struct client *cl, const struct nvs_msg *m);
void nvs_core_event(const char *name, const char *fields_fmt, ...)
    __attribute__((format(printf, 2, 3)));
int nvs_core_context(struct client_gpu *cg);

#endif
