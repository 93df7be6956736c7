#include "conn.h"

#include "clients.h"
#include "control.h"
#include "events.h"
#include "peer_limits.h"
#include "log.h"
#include "loop.h"
#include "plog.h"
#include "core/port.h"
#include "core/state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct conn *conns;
static struct conn *doomed;
static unsigned nconns;
static uint32_t next_conn_id;
/* The connection whose input is being decoded: its buffer is in use. */
static struct conn *reading;

static void conn_read(struct conn *c);
static void process_input(struct conn *c);

#define IN_INITIAL 4096u
#define IN_MAX (NVS_HEADER_SIZE + NVS_MAX_PAYLOAD)
/* Requests handled per connection and turn; the rest wait for the next. */
#define MSGS_PER_TURN 16u

struct conn *conn_new(int fd, enum conn_role role, const struct nvs_binding *bind)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		NVS_WARN("new connection: out of memory");
	if (!c || nvs_peer_resolve(fd, &c->peer)) {
		free(c);
		close(fd);
		return NULL;
	}
	if (bind)
		nvs_peer_bind(&c->peer, bind);
	c->fd = fd;
	c->id = ++next_conn_id;
	c->role = role;
	if (nvs_limits_admit(c)) {
		free(c);
		close(fd);
		return NULL;
	}
	c->next = conns;
	if (conns)
		conns->prev = c;
	conns = c;
	nconns++;
	return c;
}

unsigned conn_count(void)
{
	return nconns;
}

struct conn *conn_list(void)
{
	return conns;
}

/* Buffers are resized through here so the budget (limits.c) sees every
 * byte. Returns 0, or -1 (out of memory; nothing changed). */
static int resize(struct conn *c, uint8_t **buf, size_t *cap, size_t want)
{
	uint8_t *p = want ? realloc(*buf, want) : NULL;
	if (want && !p)
		return -1;
	if (!want)
		free(*buf);
	nvs_limits_charge(c, (long long)want - (long long)*cap);
	*buf = p;
	*cap = want;
	return 0;
}

/* Buffers are given back once empty: an idle connection holds none (the
 * budget then counts only what is in flight, and a thousand idle clients
 * cost it nothing), and a burst (a large frame, a status) does not pin
 * memory for the life of the connection. A malloc per message batch is
 * the price. */
#define KEEP_CAP 0u

void conn_reason(struct conn *c, const char *code)
{
	if (!c->doomed && !c->reason)
		c->reason = code;
}

void conn_sync_client(const struct conn *c)
{
	struct client *cl = c->client;
	if (!cl)
		return;
	cl->flags = (c->doomed ? NVS_CLIENT_DOOMED : 0u) |
		    (c->out_len > c->out_off ? NVS_CLIENT_BACKED_UP : 0u);
}

void conn_doom(struct conn *c, const char *fmt, ...)
{
	if (c->doomed)
		return;
	c->doomed = 1;
	conn_sync_client(c);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	c->doom_next = doomed;
	doomed = c;
}

/* Output a peer may leave unread before its requests stop being read
 * (back-pressure): a peer that asks and never reads the answers costs at
 * most this much work and memory, not one status per request it sent. */
#define OUT_PAUSE (64u * 1024u)

static int input_paused(const struct conn *c)
{
	return c->stream || c->out_len - c->out_off > OUT_PAUSE;
}

/* EPOLLIN unless input is paused, EPOLLOUT while output is pending. */
static void update_events(struct conn *c, int want_out)
{
	int in = !input_paused(c);
	if ((c->want_out == want_out && c->in_paused == !in) || c->doomed)
		return;
	if (nvs_loop_events(c->fd, (in ? EPOLLIN : 0) | (want_out ? EPOLLOUT : 0)) == 0) {
		c->want_out = want_out;
		c->in_paused = !in;
	}
}

static void set_want_out(struct conn *c, int on)
{
	update_events(c, on);
}

static int enqueue(struct conn *c, const struct nvs_msg *m);

/* Queues the next frame of c's stream (or its last, which frees it). */
static void pump(struct conn *c)
{
	size_t left = c->stream_len - c->stream_off;
	size_t n = left > NVS_MAX_PAYLOAD - 8 ? NVS_MAX_PAYLOAD - 8 : left;
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_CTL_REPLY;
	m.seq = c->stream_seq;
	m.reply_status = n < left ? NVS_CTL_REPLY_MORE : 0;
	m.reply_text = c->stream + c->stream_off;
	m.reply_len = (uint32_t)n;
	c->stream_off += n;
	int r = enqueue(c, &m);
	if (c->stream && (r || c->stream_off == c->stream_len)) {
		free(c->stream);
		nvs_limits_charge(c, -(long long)c->stream_len);
		c->stream = NULL;
		c->stream_len = c->stream_off = 0;
	}
}

static void flush_out(struct conn *c)
{
	for (;;) {
		while (c->out_off < c->out_len) {
			ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) {
				c->out_off += (size_t)n;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				set_want_out(c, 1);
				return;
			}
			conn_reason(c, "write-error");
			conn_doom(c, "write failed: %s", n < 0 ? strerror(errno) : "closed");
			return;
		}
		c->out_off = c->out_len = 0;
		if (!c->stream || c->doomed)
			break;
		pump(c);
	}
	if (c->out_cap > KEEP_CAP)
		resize(c, &c->out, &c->out_cap, 0);
	set_want_out(c, 0);
}

static void flush(struct conn *c)
{
	flush_out(c);
	conn_sync_client(c);
}

int conn_send_stream(struct conn *c, uint32_t seq, char *text, size_t len)
{
	if (c->stream)
		return -EBUSY;
	c->stream = text;
	c->stream_len = len;
	c->stream_off = 0;
	c->stream_seq = seq;
	nvs_limits_charge(c, (long long)len);
	if (c->doomed) {
		pump(c); /* frees it: nothing is sent to a doomed peer */
		return 0;
	}
	if (!c->want_out) {
		pump(c);
		flush(c);
	}
	nvs_limits_enforce_budget();
	return 0;
}

/* Appends m to c's output. 0, or -1 when c was doomed (not reading, out
 * of memory) or is doomed already. */
static int enqueue_out(struct conn *c, const struct nvs_msg *m)
{
	if (c->doomed)
		return -1;
	size_t need = NVS_HEADER_SIZE + 512 + (m->type == NVS_MSG_CTL_REPLY ? m->reply_len : 0);
	size_t pending = c->out_len - c->out_off;
	if (pending + need > NVS_SCHED_OUTBUF_MAX + IN_MAX) {
		c->slow = 1;
		S.conns_closed_slow++;
		conn_reason(c, "not-reading");
		conn_doom(c, "peer is not reading: %zu bytes of output pending", pending);
		conn_release_buffers(c);
		return -1;
	}
	if (c->out_off && c->out_len + need > c->out_cap) {
		memmove(c->out, c->out + c->out_off, pending);
		c->out_len = pending;
		c->out_off = 0;
	}
	if (c->out_len + need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 1024;
		while (cap < c->out_len + need)
			cap *= 2;
		if (resize(c, &c->out, &c->out_cap, cap)) {
			conn_reason(c, "out-of-memory");
			conn_doom(c, "out of memory");
			return -1;
		}
	}
	size_t n = nvs_msg_encode(m, c->out + c->out_len, c->out_cap - c->out_len);
	if (!n) {
		NVS_ERROR("cannot encode %s for connection %u", nvs_msg_type_name(m->type), c->id);
		return -1;
	}
	c->out_len += n;
	if (pending + n > NVS_SCHED_OUTBUF_MAX) {
		c->slow = 1;
		S.conns_closed_slow++;
		conn_reason(c, "not-reading");
		conn_doom(c, "peer is not reading: %zu bytes of output pending", pending + n);
		conn_release_buffers(c);
		return -1;
	}
	return 0;
}

static int enqueue(struct conn *c, const struct nvs_msg *m)
{
	int r = enqueue_out(c, m);
	conn_sync_client(c);
	return r;
}

void conn_send(struct conn *c, const struct nvs_msg *m)
{
	if (enqueue(c, m))
		return;
	if (!c->want_out)
		flush(c);
	nvs_limits_enforce_budget();
}

void conn_on_writable(struct conn *c)
{
	if (c->doomed)
		return;
	flush(c);
	/* Drained below the back-pressure mark: requests that waited in the
	 * input buffer are taken now (no new byte may ever come). */
	if (!c->doomed && c->in_len && !input_paused(c)) {
		reading = c;
		process_input(c);
		reading = NULL;
		nvs_limits_enforce_budget();
	}
}

/* Who may send what comes from the table (common/messages.def): FROM says
 * which handler a message goes to, accepted_on where it is accepted. */
static void dispatch(struct conn *c, const struct nvs_msg *m)
{
	unsigned on = nvs_msg_accepted_on(m->type);
	switch (nvs_msg_from(m->type)) {
	case NVS_FROM_CLIENT:
		/* The admin socket is for nvsharectl only: no GPU client is
		 * ever served there. */
		if (c->kind == CONN_CTL || !(on & conn_socket(c))) {
			conn_reason(c, c->role == CONN_ROLE_ADMIN ? "client-msg-on-admin"
								  : "client-msg-on-control");
			conn_doom(c, "client message %s on %s", nvs_msg_type_name(m->type),
				  c->role == CONN_ROLE_ADMIN ? "the admin socket"
							     : "a control connection");
			return;
		}
		nvs_client_msg(c, m);
		return;
	case NVS_FROM_CTL:
		/* A request the socket does not accept is answered by
		 * control.c (permission denied), not closed on. */
		if (c->kind == CONN_CLIENT) {
			conn_reason(c, "control-msg-on-client");
			conn_doom(c, "control message %s on a client connection",
				  nvs_msg_type_name(m->type));
			return;
		}
		c->kind = CONN_CTL;
		nvs_control_msg(c, m);
		return;
	case NVS_FROM_SCHED:
	case NVS_FROM_NONE:
		break;
	}
	conn_reason(c, "scheduler-only-msg");
	conn_doom(c, "%s is sent by the scheduler, not to it", nvs_msg_type_name(m->type));
}

void conn_release_buffers(struct conn *c)
{
	if (!c->doomed)
		return;
	if (c != reading) {
		resize(c, &c->in, &c->in_cap, 0);
		c->in_len = 0;
	}
	resize(c, &c->out, &c->out_cap, 0);
	c->out_len = c->out_off = 0;
	conn_sync_client(c);
	if (c->stream) {
		free(c->stream);
		nvs_limits_charge(c, -(long long)c->stream_len);
		c->stream = NULL;
		c->stream_len = c->stream_off = 0;
	}
}

void conn_on_readable(struct conn *c)
{
	if (c->doomed)
		return;
	reading = c;
	conn_read(c);
	reading = NULL;
	nvs_limits_enforce_budget();
}

/* Decodes and dispatches the complete frames in c's input, until its
 * output asks for back-pressure (the rest waits in the buffer). */
static void process_input(struct conn *c)
{
	size_t off = 0;
	unsigned handled = 0;
	while (!c->doomed && !input_paused(c)) {
		/* A fair share of the turn: the rest of a long queue of
		 * requests waits for the next (loop.h nvs_loop_again), so
		 * one peer's thousand status requests cannot delay the
		 * others' lock requests. */
		if (handled == MSGS_PER_TURN) {
			if (c->in_len - off >= NVS_HEADER_SIZE)
				nvs_loop_again(c->fd);
			break;
		}
		handled++;
		struct nvs_msg m;
		size_t used = 0;
		enum nvs_decode_result r = nvs_msg_decode(c->in + off, c->in_len - off, &m, &used);
		if (r == NVS_DECODE_NEED_MORE)
			break;
		if (r == NVS_DECODE_BAD) {
			S.conns_closed_bad++;
			conn_reason(c, "malformed-frame");
			conn_doom(c,
				  "malformed frame (bad magic, version, length, type or payload)");
			break;
		}
		off += used;
		NVS_DEBUG("conn %u pid %d: %s", c->id, (int)c->peer.pid, nvs_msg_type_name(m.type));
		nvs_plog_set_peer(&c->peer); /* lines it causes: its tenant's */
		dispatch(c, &m);
		nvs_plog_set_peer(NULL);
		/* A registered client or the admin: served before the
		 * other connections from now on (loop.h). A tenant's status
		 * requests on the client socket are not urgent. */
		if (!c->doomed && !c->urgent &&
		    (c->kind == CONN_CLIENT || c->role == CONN_ROLE_ADMIN)) {
			nvs_loop_urgent(c->fd);
			c->urgent = 1;
		}
	}
	if (off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	if (!c->doomed)
		update_events(c, c->want_out); /* EPOLLIN off while paused */
	/* A frame larger than the buffer: grow to exactly its size (its
	 * length was checked against NVS_MAX_PAYLOAD by the decoder). */
	if (!c->doomed && c->in_len >= NVS_HEADER_SIZE) {
		uint32_t plen = (uint32_t)c->in[8] | (uint32_t)c->in[9] << 8 |
				(uint32_t)c->in[10] << 16 | (uint32_t)c->in[11] << 24;
		size_t need = NVS_HEADER_SIZE + (size_t)plen;
		if (need > c->in_cap && need <= IN_MAX && resize(c, &c->in, &c->in_cap, need)) {
			conn_reason(c, "out-of-memory");
			conn_doom(c, "out of memory");
			return;
		}
	}
	if (!c->in_len && c->in_cap > KEEP_CAP)
		resize(c, &c->in, &c->in_cap, 0);
}

static void conn_read(struct conn *c)
{
	if (c->in_cap - c->in_len < 1024 && c->in_cap < IN_MAX) {
		size_t cap = c->in_cap ? c->in_cap * 2 : IN_INITIAL;
		if (cap > IN_MAX)
			cap = IN_MAX;
		if (resize(c, &c->in, &c->in_cap, cap)) {
			conn_reason(c, "out-of-memory");
			conn_doom(c, "out of memory");
			return;
		}
	}
	if (c->in_len == c->in_cap) {
		/* Full (input paused with a whole frame waiting): reading now
		 * would look like EOF. */
		process_input(c);
		return;
	}
	ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
	if (n == 0) {
		conn_doom(c, "closed by peer");
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			conn_reason(c, "read-error");
			conn_doom(c, "read failed: %s", strerror(errno));
			return;
		}
		/* Nothing new: run again for what is buffered (MSGS_PER_TURN). */
		if (c->in_len)
			process_input(c);
		return;
	}
	c->in_len += (size_t)n;
	process_input(c);
}

static void conn_free(struct conn *c)
{
	if (c->client)
		nvs_client_gone(c->client);
	c->client = NULL;
	nvs_loop_remove(c->fd);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	nconns--;
	nvs_limits_conn_gone(c);
	free(c->in);
	free(c->out);
	free(c->stream);
	free(c);
}

/* The close line and its conn_closed event, rate-limited per tenant and
 * reason (plog.h): a Pod that connects, sends garbage and closes in a
 * loop must not fill the log. The event carries how many were held back
 * ("quiet"). */
static void log_close(struct conn *c, const char *kind)
{
	static char site;
	const char *reason = c->reason ? c->reason : "other";
	unsigned quiet;
	if (!nvs_plog_allow(&site, reason, &c->peer, &quiet))
		return;
	nvs_log_n(NVS_LOG_WARN, quiet, "closing conn %u (%s, pid %d, uid %d): %s", c->id, kind,
		  (int)c->peer.pid, (int)c->peer.uid, c->why);
	/* The detail may quote what the peer sent: escaped. */
	char d[2 * sizeof c->why + 8];
	nvs_json_str(c->why, d, sizeof d);
	nvs_event("conn_closed",
		  "\"conn\":%u,\"kind\":\"%s\",\"pid\":%d,\"uid\":%d,\"reason\":\"%s\","
		  "\"detail\":%s,\"quiet\":%u",
		  c->id, kind, (int)c->peer.pid, (int)c->peer.uid, reason, d, quiet);
}

void conn_reap(void)
{
	/* Freeing a client can hand its lock to another connection, whose
	 * send may doom it in turn: loop until the list stays empty. */
	while (doomed) {
		struct conn *c = doomed;
		doomed = c->doom_next;
		const char *kind = c->kind == CONN_CLIENT	? "client"
				   : c->role == CONN_ROLE_ADMIN ? "admin"
				   : c->kind == CONN_CTL	? "control"
								: "new";
		if (!strcmp(c->why, "closed by peer") || !strcmp(c->why, "scheduler shutting down"))
			NVS_DEBUG("conn %u (%s, pid %d): %s", c->id, kind, (int)c->peer.pid,
				  c->why);
		else
			log_close(c, kind);
		conn_free(c);
	}
}

static void reap_tick(uint64_t now)
{
	conn_reap();
}

void conn_start(void)
{
	nvs_loop_timer(NVS_LOOP_REAP, reap_tick, NULL);
	nvs_loop_after_events(conn_reap);
}

void conn_close_all(void)
{
	/* Doom all first: sends to doomed connections are dropped, so no
	 * hand-off messages go out while everything closes. */
	for (struct conn *c = conns; c; c = c->next)
		conn_doom(c, "scheduler shutting down");
	conn_reap();
}
