/*
 * The scheduler's event loop (scheduler/loop.c): one epoll set and a list
 * of timers, knowing nothing of who registers them. A module watches its
 * own descriptors (a handler and a context per fd) and registers its own
 * timer (a tick and its next deadline); nvs_loop_run() turns until
 * nvs_loop_stop(). Loop thread only; nothing here is locked.
 *
 * One turn: every timer's tick(now), in the order registered; sleep until
 * a descriptor is ready or the earliest next(now) (at most 60 s); run the
 * handler of each ready descriptor; then every after-events hook.
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

/* A timer: tick(now) once per turn (NULL: none); the loop wakes no later
 * than next(now) (CLOCK_MONOTONIC ns; 0 or NULL: no deadline). 0, or -1
 * when the table (16) is full. */
int nvs_loop_timer(void (*tick)(uint64_t now), uint64_t (*next)(uint64_t now));
/* fn() after each turn's events (e.g. freeing what they ended). */
int nvs_loop_after_events(void (*fn)(void));

/* Turns until nvs_loop_stop(rc) (returns rc) or epoll fails (returns 1). */
int nvs_loop_run(void);
void nvs_loop_stop(int rc);

#endif
