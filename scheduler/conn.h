/*
 * One peer connection: a client library process or an nvsharectl. Owns the
 * socket, a bounded input buffer (one frame at most) and a bounded output
 * buffer, and turns bytes into decoded messages for clients.c / control.c.
 *
 * Errors never close a connection in the middle of processing: conn_doom()
 * marks it, and the server frees it after the current batch of events (so
 * a lock hand-off can send to other connections without reentrancy).
 */
#ifndef NVSHARE_SCHEDULER_CONN_H
#define NVSHARE_SCHEDULER_CONN_H

#include "peer.h"
#include "protocol.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum conn_kind {
	CONN_NEW = 0,	 /* no message yet */
	CONN_CLIENT = 1, /* sent HELLO */
	CONN_CTL = 2,	 /* sent a CTL_* request */
};

/* Which socket the connection came in on (docs/security.md). */
enum conn_role {
	CONN_ROLE_CLIENT = 0, /* client socket: mounted into Pods */
	CONN_ROLE_ADMIN = 1,  /* admin socket: never mounted into Pods */
};
/* The connection's socket as messages.def's accepted_on sees it
 * (NVS_ON_CLIENT, NVS_ON_ADMIN). */
#define conn_socket(c) ((c)->role == CONN_ROLE_ADMIN ? NVS_ON_ADMIN : NVS_ON_CLIENT)

struct client;

struct conn {
	int fd;
	uint32_t id; /* for logs */
	enum conn_kind kind;
	enum conn_role role;
	struct nvs_peer peer; /* pinned at accept */
	int doomed;
	int slow; /* doomed for not reading */
	char why[128];
	const char *reason; /* stable code for the conn_closed event, or NULL */
	uint8_t *in;
	size_t in_len, in_cap;
	uint8_t *out;
	size_t out_off, out_len, out_cap; /* pending bytes: out[out_off..out_len) */
	int want_out;			  /* EPOLLOUT registered */
	int urgent;			  /* served first in a turn (loop.h) */
	int in_paused;			  /* EPOLLIN dropped: back-pressure (conn.c) */
	struct client *client;
	/* A status streamed in several CTL_REPLY frames (conn_send_stream):
	 * the text (owned), how much is sent, the request's seq. */
	char *stream;
	size_t stream_len, stream_off;
	uint32_t stream_seq;
	/* limits.c's bookkeeping */
	struct {
		uint64_t accepted_ns;
		size_t charged;	  /* bytes of buffers counted in the budget */
		void *tenant;	  /* its tenant's count (limits.c), NULL: none */
		int hs_listed;	  /* in the handshake FIFO */
		int idle_counted; /* in its tenant's idle clients */
		struct conn *hs_prev, *hs_next;
	} lim;
	struct conn *prev, *next;
	struct conn *doom_next;
};

/* Creates a connection for an accepted socket (non-blocking already) and
 * pins its peer's identity (peer.h): bind, when it came in on a Pod
 * socket (podsock.h), decides the Pod. NULL on failure (fd closed). */
struct nvs_binding;
struct conn *conn_new(int fd, enum conn_role role, const struct nvs_binding *bind);
/* Queues a message; writes at once when possible. A peer whose pending
 * output exceeds NVS_SCHED_OUTBUF_MAX is doomed. */
void conn_send(struct conn *c, const struct nvs_msg *m);
/* Sends text as CTL_REPLY frames of seq: status 1 ("more follows") on
 * every frame but the last, 0 on the last; the next frame is queued only
 * once the previous ones were written, so the output buffer stays small
 * whatever the size. Takes ownership of text (malloc'd). Returns 0, or
 * -EBUSY when a stream is already under way on c (text not taken). */
int conn_send_stream(struct conn *c, uint32_t seq, char *text, size_t len);
/* Marks c to be closed after the current event batch; the first reason
 * wins and is logged then. */
void conn_doom(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Names why c is about to be doomed with a stable code (a string
 * literal, lower-case-with-dashes) for the conn_closed event; call it just
 * before conn_doom(). The first reason wins, as for conn_doom(). */
void conn_reason(struct conn *c, const char *code);
/* Copies what the decision core must know of c into its client's flags
 * (core/port.h NVS_CLIENT_*: doomed, output backed up); conn.c calls it
 * wherever those change, clients.c when the client is created. */
void conn_sync_client(const struct conn *c);
void conn_on_readable(struct conn *c);
void conn_on_writable(struct conn *c);
/* Frees the buffers of a doomed connection now rather than at the reap
 * (the buffer budget: limits.c); a no-op while its input is decoded. */
void conn_release_buffers(struct conn *c);
/* Frees every doomed connection (client state first). */
void conn_reap(void);
/* Registers the reaping with the event loop (loop.h): a timer in
 * NVS_LOOP_REAP frees what the ticks before it doomed, an after-events
 * hook what the turn's events doomed. */
void conn_start(void);
/* Closes every connection (shutdown). */
void conn_close_all(void);
unsigned conn_count(void);
/* All connections (limits.c walks them). */
struct conn *conn_list(void);

#endif
