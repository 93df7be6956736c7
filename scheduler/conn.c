#include "conn.h"

#include "clients.h"
#include "control.h"
#include "events.h"
#include "log.h"
#include "server.h"
#include "state.h"

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

#define IN_INITIAL 4096u
#define IN_MAX (NVS_HEADER_SIZE + NVS_MAX_PAYLOAD)

struct conn *conn_new(int fd, enum conn_role role)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		NVS_WARN("new connection: out of memory");
	if (!c || nvs_peer_resolve(fd, &c->peer)) {
		free(c);
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->id = ++next_conn_id;
	c->role = role;
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

void conn_reason(struct conn *c, const char *code)
{
	if (!c->doomed && !c->reason)
		c->reason = code;
}

void conn_doom(struct conn *c, const char *fmt, ...)
{
	if (c->doomed)
		return;
	c->doomed = 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	c->doom_next = doomed;
	doomed = c;
}

static void set_want_out(struct conn *c, int on)
{
	if (c->want_out == on || c->doomed)
		return;
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
	if (epoll_ctl(nvs_epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->want_out = on;
}

static void flush(struct conn *c)
{
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
	set_want_out(c, 0);
}

void conn_send(struct conn *c, const struct nvs_msg *m)
{
	if (c->doomed)
		return;
	size_t need = NVS_HEADER_SIZE + 512 + (m->type == NVS_MSG_CTL_REPLY ? m->reply_len : 0);
	size_t pending = c->out_len - c->out_off;
	if (pending + need > NVS_SCHED_OUTBUF_MAX + IN_MAX) {
		c->slow = 1;
		S.conns_closed_slow++;
		conn_reason(c, "not-reading");
		conn_doom(c, "peer is not reading: %zu bytes of output pending", pending);
		return;
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
		uint8_t *p = realloc(c->out, cap);
		if (!p) {
			conn_reason(c, "out-of-memory");
			conn_doom(c, "out of memory");
			return;
		}
		c->out = p;
		c->out_cap = cap;
	}
	size_t n = nvs_msg_encode(m, c->out + c->out_len, c->out_cap - c->out_len);
	if (!n) {
		NVS_ERROR("cannot encode %s for connection %u", nvs_msg_type_name(m->type), c->id);
		return;
	}
	c->out_len += n;
	if (pending + n > NVS_SCHED_OUTBUF_MAX) {
		c->slow = 1;
		S.conns_closed_slow++;
		conn_reason(c, "not-reading");
		conn_doom(c, "peer is not reading: %zu bytes of output pending", pending + n);
		return;
	}
	if (!c->want_out)
		flush(c);
}

void conn_on_writable(struct conn *c)
{
	if (!c->doomed)
		flush(c);
}

static void dispatch(struct conn *c, const struct nvs_msg *m)
{
	switch (m->type) {
	case NVS_MSG_HELLO:
	case NVS_MSG_ATTACH_GPU:
	case NVS_MSG_REQ_LOCK:
	case NVS_MSG_LOCK_RELEASED:
	case NVS_MSG_MEM_UPDATE:
	case NVS_MSG_SWAP_STATS:
	case NVS_MSG_PING:
	case NVS_MSG_LIMITS_IN_FORCE:
		/* The admin socket is for nvsharectl only: no GPU client is
		 * ever served there. */
		if (c->kind == CONN_CTL || c->role == CONN_ROLE_ADMIN) {
			conn_reason(c, c->role == CONN_ROLE_ADMIN ? "client-msg-on-admin"
								  : "client-msg-on-control");
			conn_doom(c, "client message %s on %s", nvs_msg_type_name(m->type),
				  c->role == CONN_ROLE_ADMIN ? "the admin socket"
							     : "a control connection");
			return;
		}
		nvs_client_msg(c, m);
		return;
	case NVS_MSG_CTL_SET:
	case NVS_MSG_CTL_SET_CLIENT:
	case NVS_MSG_CTL_STATUS:
		if (c->kind == CONN_CLIENT) {
			conn_reason(c, "control-msg-on-client");
			conn_doom(c, "control message %s on a client connection",
				  nvs_msg_type_name(m->type));
			return;
		}
		c->kind = CONN_CTL;
		nvs_control_msg(c, m);
		return;
	default:
		conn_reason(c, "scheduler-only-msg");
		conn_doom(c, "%s is sent by the scheduler, not to it", nvs_msg_type_name(m->type));
	}
}

void conn_on_readable(struct conn *c)
{
	if (c->doomed)
		return;
	if (c->in_cap - c->in_len < 1024 && c->in_cap < IN_MAX) {
		size_t cap = c->in_cap ? c->in_cap * 2 : IN_INITIAL;
		if (cap > IN_MAX)
			cap = IN_MAX;
		uint8_t *p = realloc(c->in, cap);
		if (!p) {
			conn_reason(c, "out-of-memory");
			conn_doom(c, "out of memory");
			return;
		}
		c->in = p;
		c->in_cap = cap;
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
		}
		return;
	}
	c->in_len += (size_t)n;

	size_t off = 0;
	while (!c->doomed) {
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
		dispatch(c, &m);
	}
	if (off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	/* A frame larger than the buffer: grow to exactly its size (its
	 * length was checked against NVS_MAX_PAYLOAD by the decoder). */
	if (!c->doomed && c->in_len >= NVS_HEADER_SIZE) {
		uint32_t plen = (uint32_t)c->in[8] | (uint32_t)c->in[9] << 8 |
				(uint32_t)c->in[10] << 16 | (uint32_t)c->in[11] << 24;
		size_t need = NVS_HEADER_SIZE + (size_t)plen;
		if (need > c->in_cap && need <= IN_MAX) {
			uint8_t *p = realloc(c->in, need);
			if (!p) {
				conn_reason(c, "out-of-memory");
				conn_doom(c, "out of memory");
				return;
			}
			c->in = p;
			c->in_cap = need;
		}
	}
}

static void conn_free(struct conn *c)
{
	if (c->client)
		nvs_client_gone(c->client);
	c->client = NULL;
	epoll_ctl(nvs_epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	nconns--;
	free(c->in);
	free(c->out);
	free(c);
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
		else {
			NVS_WARN("closing conn %u (%s, pid %d, uid %d): %s", c->id, kind,
				 (int)c->peer.pid, (int)c->peer.uid, c->why);
			/* Same rate as the line above (issue 17 limits both). The
			 * detail may quote what the peer sent: escaped. */
			char d[2 * sizeof c->why + 8];
			nvs_json_str(c->why, d, sizeof d);
			nvs_event(
			    "conn_closed",
			    "\"conn\":%u,\"kind\":\"%s\",\"pid\":%d,\"uid\":%d,\"reason\":\"%s\","
			    "\"detail\":%s",
			    c->id, kind, (int)c->peer.pid, (int)c->peer.uid,
			    c->reason ? c->reason : "other", d);
		}
		conn_free(c);
	}
}

void conn_close_all(void)
{
	/* Doom all first: sends to doomed connections are dropped, so no
	 * hand-off messages go out while everything closes. */
	for (struct conn *c = conns; c; c = c->next)
		conn_doom(c, "scheduler shutting down");
	conn_reap();
}
