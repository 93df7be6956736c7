/*
 * Bounds on what peers may cost the daemon (issue 17, docs/security.md
 * "Hostile load"): every Pod shares one scheduler, so no peer may take its
 * memory, descriptors or loop time from the others.
 *
 *  - connections per tenant (a Pod, a uid outside Kubernetes, or the
 *    unknown bucket; peer.h): over the cap a connection is closed at once;
 *  - a handshake deadline: a client-socket connection that has not sent
 *    HELLO within it is closed (the admin socket has none);
 *  - a global budget for buffered input and output across client-socket
 *    connections: over it, the largest consumers are cut first;
 *  - a descriptor reserve: when descriptors run out the client socket
 *    stops being accepted (peers wait in the kernel's backlog) while the
 *    admin socket is still served from the reserve;
 *  - an accept rate per tenant (server.c): a Pod socket, or a uid on the
 *    shared socket, gets at most so many connections a second resolved;
 *    churn spends the churner's budget, never another tenant's;
 *  - idle clients: a tenant keeps at most so many registered clients
 *    without a GPU, and when descriptors run out the idle connections of
 *    the tenant holding the most are closed first.
 *
 * Everything runs on the loop thread.
 */
#ifndef NVSHARE_SCHEDULER_LIMITS_H
#define NVSHARE_SCHEDULER_LIMITS_H

#include <stddef.h>
#include <stdint.h>

struct conn;

struct nvs_limits_config {
	unsigned max_conns_per_tenant; /* NVSHARE_MAX_CONNS_PER_TENANT; 0: no cap */
	uint32_t handshake_ms;	       /* NVSHARE_HANDSHAKE_TIMEOUT_MS; 0: none */
	uint64_t buffer_budget;	       /* NVSHARE_CONN_BUFFER_BUDGET, bytes */
	unsigned accept_rate;	       /* NVSHARE_ACCEPT_RATE: a second per tenant; 0: no cap */
	unsigned max_idle_per_tenant;  /* NVSHARE_MAX_IDLE_CLIENTS_PER_TENANT; 0: no cap */
};
extern struct nvs_limits_config nvs_limits_cfg;

/* Counters (status "connections", metrics). */
struct nvs_limits_stats {
	uint64_t refused_tenant;     /* over the per-tenant cap */
	uint64_t handshake_timeouts; /* no HELLO in time */
	uint64_t budget_cuts;	     /* closed to keep the buffer budget */
	uint64_t accept_paused;	     /* client socket paused: out of descriptors */
	uint64_t rate_paused;	     /* a Pod socket paused: its accept budget spent */
	uint64_t refused_rate;	     /* shared socket: closed, too many parked */
	uint64_t rate_parked;	     /* shared socket: parked over the uid's budget */
	uint64_t idle_cuts;	     /* closed: over the tenant's idle clients */
	uint64_t fd_evictions;	     /* idle ones closed when descriptors ran out */
	uint64_t reserve_accepts;    /* admin connections taken with the reserve */
	uint64_t buffered;	     /* bytes buffered now (client socket) */
	uint64_t buffered_max;	     /* high-water mark */
};
extern struct nvs_limits_stats nvs_limits_stats;

/* A new connection whose peer is resolved: counts it against its tenant
 * (client socket only). Returns 0, or -1 when the tenant is over its cap
 * (logged and evented, rate-limited): the caller closes it. */
int nvs_limits_admit(struct conn *c);
/* The connection is being freed: uncounts it everywhere. */
void nvs_limits_conn_gone(struct conn *c);

/* A client registered with no GPU (idle 1: HELLO), or attached its first
 * one (idle 0). Over NVSHARE_MAX_IDLE_CLIENTS_PER_TENANT the tenant's
 * oldest idle client is closed (logged, rate-limited). */
void nvs_limits_client_idle(struct conn *c, int idle);
/* Out of descriptors: closes the oldest idle connection (no HELLO yet, a
 * status request, a client without a GPU) of the tenant that holds the
 * most connections. Returns 1 when one was closed (freed at the reap). */
int nvs_limits_evict_idle(uint64_t now);

/* Its buffers changed size by delta bytes (client socket only). */
void nvs_limits_charge(struct conn *c, long long delta);
/* Over the budget: dooms the largest consumers until under it. */
void nvs_limits_enforce_budget(void);

/* Registers the handshake deadlines and the periodic work (log summaries,
 * plog.h) with the event loop (loop.h, NVS_LOOP_DECIDE). */
void nvs_limits_start(void);

/* Descriptor reserve (server.c): opened at start. */
int nvs_fd_reserve_open(void);
void nvs_fd_reserve_close(void);
/* Closes n of the reserve's descriptors (all: NVS_FD_RESERVE) so that an
 * accept and its peer resolution (a pidfd, the cgroup file) find free
 * descriptors; nvs_fd_reserve_refill takes them back. */
#define NVS_FD_RESERVE 4
void nvs_fd_reserve_release(int n);
/* Refills the reserve; 1 when it is full. */
int nvs_fd_reserve_refill(void);

#endif
