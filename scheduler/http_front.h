/*
 * The exporter's listening socket (docs/metrics.md, docs/security.md
 * "/healthz under load"). A thread of its own accepts every connection and
 * waits for its request head without reading it (MSG_PEEK): /healthz is
 * answered right there, every other request is handed, unread, to
 * libmicrohttpd (MHD_add_connection), whose 32 connections thus only ever
 * hold complete requests. So /healthz, what the kubelet's probes ask,
 * never waits behind slow peers:
 *
 * - a connection has NVS_HTTP_HEAD_MS to send its whole head (one
 *   deadline from accept, not renewed by each byte), at most
 *   NVS_HTTP_HEAD_MAX bytes of it;
 * - at most NVS_HTTP_PENDING connections wait for their head, at most
 *   NVS_HTTP_PENDING_PER_PEER from one address: beyond either bound the
 *   oldest waiting one (of that address first) is closed to make room, so
 *   a new connection always gets in, and one whose head comes at once is
 *   answered whatever else is open.
 *
 * The thread touches no scheduler state: /healthz reads the loop's
 * heartbeat (health.h, an atomic).
 */
#ifndef NVSHARE_SCHEDULER_HTTP_FRONT_H
#define NVSHARE_SCHEDULER_HTTP_FRONT_H

#include <stdint.h>
#include <sys/socket.h>

#define NVS_HTTP_HEAD_MS 2000u
#define NVS_HTTP_HEAD_MAX 8192u
#define NVS_HTTP_PENDING 256u
#define NVS_HTTP_PENDING_PER_PEER 64u

struct MHD_Daemon;

/* Bound counters (any thread): connections closed for a late head, for
 * room (the oldest of a full table or peer), for a head over the bound;
 * /healthz answered here; requests handed to libmicrohttpd. */
struct nvs_http_front_stats {
	uint64_t head_timeouts, evicted, too_large, healthz, handed;
};
void nvs_http_front_stats(struct nvs_http_front_stats *out);

/* The /healthz answer (any thread): 200 and "ok\n" while the event loop
 * turns, else 503 and why (health.h); the body into body. Also what
 * libmicrohttpd answers for /healthz on a connection it already serves
 * (keep-alive). */
unsigned nvs_http_healthz(char *body, size_t cap);

/* Binds and listens on sa (its port 0: any free one, *port set to the one
 * bound), starts the thread; requests other than /healthz go to mhd (a
 * daemon started with MHD_USE_NO_LISTEN_SOCKET). Returns 0, or -1 with
 * errno (the socket could not be bound). */
int nvs_http_front_start(const struct sockaddr *sa, socklen_t len, struct MHD_Daemon *mhd,
			 unsigned *port);
/* Stops the thread and closes the socket and what waits; before
 * MHD_stop_daemon. */
void nvs_http_front_stop(void);

#endif
