/*
 * The scheduler's event loop (scheduler/loop.c): one epoll set and a list
 * of timers, knowing nothing of who registers them. A module watches its
 * own descriptors (a handler and a context per fd) and registers its own
 * timers (a phase, a tick and its next deadline) where it starts;
 * nvs_loop_run() turns until nvs_loop_stop(). Loop thread only; nothing
 * here is locked.
 *
 * One turn: every timer's tick(now), phase by phase (enum nvs_loop_phase);
 * sleep until a descriptor is ready or the earliest next(now) (at most
 * 60 s); run the handlers of the ready descriptors (and of those asked to
 * run again), the urgent ones first, the others within a time budget;
 * then every after-events hook.
 */
#ifndef NVSHARE_SCHEDULER_LOOP_H
#define NVSHARE_SCHEDULER_LOOP_H

#include <stdint.h>

/* events: EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR as epoll reports them. */
typedef void (*nvs_loop_fn)(void *ctx, uint32_t events);

/* Creates the epoll set. 0, or -1 with errno. */
int nvs_loop_init(void);
/* Closes it (descriptors stay their owners'). */
void nvs_loop_close(void);

/* Watches fd for events (EPOLLIN, EPOLLOUT; 0: registered but quiet):
 * fn(ctx, ready) when ready. 0, or -1 with errno. */
int nvs_loop_add(int fd, uint32_t events, nvs_loop_fn fn, void *ctx);
/* Changes the events of a watched fd (same handler). 0, or -1 with errno. */
int nvs_loop_events(int fd, uint32_t events);
/* Stops watching fd; call before closing it. */
void nvs_loop_remove(int fd);
/* Serves fd's events before the others' in every turn from now on (until
 * it is removed): for the peers the scheduler is for (registered clients,
 * the admin socket), so that work from many other connections cannot
 * delay them. The others' handlers share NVS_LOOP_BULK_NS of each turn
 * (at least one runs); those left over run in a later turn (epoll reports
 * them again). */
void nvs_loop_urgent(int fd);
#define NVS_LOOP_BULK_NS (2ull * 1000000ull)
/* Runs fd's handler again next turn (EPOLLIN) although the descriptor may
 * not be ready: for a handler that stopped with work left in its own
 * buffers, to let the other descriptors have their turn. */
void nvs_loop_again(int fd);

/*
 * Where in a turn a timer ticks: phase by phase, in this order; within a
 * phase, in the order registered. A module picks its phase by what must
 * have happened before its tick in the same turn, so the order does not
 * depend on who starts first (main.c), and the loop names none of them.
 */
enum nvs_loop_phase {
	/* The turn began; nothing else has run (the /healthz heartbeat). */
	NVS_LOOP_START,
	/* Deadlines that change scheduling state and may end connections
	 * (policy: TQ expiry, DROP_LOCK grace; limits: handshake deadlines).
	 * Timers here must not depend on each other's order. */
	NVS_LOOP_DECIDE,
	/* Frees the connections the ticks before it ended (conn.c). */
	NVS_LOOP_REAP,
	/* The listening sockets: checked and re-created, accepting resumed
	 * once the reap has given descriptors back (server.c). */
	NVS_LOOP_ACCEPT,
	/* Looks at the world beyond the sockets, with this turn's
	 * connections settled (unmanaged GPU processes). */
	NVS_LOOP_OBSERVE,
	/* Reads the state the turn's ticks left (the metrics snapshot). */
	NVS_LOOP_PUBLISH,
};

/* A timer: tick(now) once per turn in its phase (NULL: none); the loop
 * wakes no later than next(now) (CLOCK_MONOTONIC ns; 0 or NULL: no
 * deadline). 0, or -1 (logged) when the table (16) is full. */
int nvs_loop_timer(enum nvs_loop_phase phase, void (*tick)(uint64_t now),
		   uint64_t (*next)(uint64_t now));
/* fn() after each turn's events (e.g. freeing what they ended). */
int nvs_loop_after_events(void (*fn)(void));

/* Turns until nvs_loop_stop(rc) (returns rc) or epoll fails (returns 1). */
int nvs_loop_run(void);
void nvs_loop_stop(int rc);

#endif
