#include "sched_conn.h"

#include "sockpath.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int nvs_sconn_open(struct nvs_sconn *c)
{
	memset(c, 0, sizeof *c);
	c->fd = nvs_sock_connect();
	return c->fd < 0 ? c->fd : 0;
}

int nvs_sconn_open_path(struct nvs_sconn *c, const char *path)
{
	memset(c, 0, sizeof *c);
	c->fd = nvs_sock_connect_path(path);
	return c->fd < 0 ? c->fd : 0;
}

void nvs_sconn_close(struct nvs_sconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = c->consumed = 0;
}

int nvs_sconn_send_raw(struct nvs_sconn *c, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int nvs_sconn_send(struct nvs_sconn *c, struct nvs_msg *m)
{
	if (!m->seq)
		m->seq = ++c->seq;
	size_t cap = NVS_HEADER_SIZE + 1024 + (m->type == NVS_MSG_CTL_REPLY ? m->reply_len : 0);
	uint8_t *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	size_t n = nvs_msg_encode(m, buf, cap);
	int r = n ? nvs_sconn_send_raw(c, buf, n) : -EINVAL;
	free(buf);
	return r;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int nvs_sconn_recv(struct nvs_sconn *c, struct nvs_msg *m, int timeout_ms)
{
	/* Drop the frame handed out last time. */
	if (c->consumed) {
		memmove(c->buf, c->buf + c->consumed, c->len - c->consumed);
		c->len -= c->consumed;
		c->consumed = 0;
	}
	int64_t end = timeout_ms < 0 ? 0 : mono_ms() + timeout_ms;
	for (;;) {
		size_t used;
		if (c->len) {
			enum nvs_decode_result r = nvs_msg_decode(c->buf, c->len, m, &used);
			if (r == NVS_DECODE_OK) {
				c->consumed = used;
				return 1;
			}
			if (r == NVS_DECODE_BAD)
				return -EPROTO;
		}
		if (c->cap - c->len < 4096) {
			size_t cap = c->cap ? c->cap * 2 : 8192;
			/* It holds less than one frame when it grows (a whole
			 * one is decoded first), so doubling stays below two;
			 * a streamed reply's frames come back to back. */
			if (cap > 2 * (NVS_HEADER_SIZE + NVS_MAX_PAYLOAD) + 8192)
				return -EPROTO;
			uint8_t *p = realloc(c->buf, cap);
			if (!p)
				return -ENOMEM;
			c->buf = p;
			c->cap = cap;
		}
		int wait = -1;
		if (timeout_ms >= 0) {
			int64_t left = end - mono_ms();
			wait = left > 0 ? (int)left : 0;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		int pr = poll(&p, 1, wait);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pr == 0)
			return 0;
		ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n == 0)
			return -EPIPE;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		c->len += (size_t)n;
	}
}

int nvs_sconn_request(struct nvs_sconn *c, struct nvs_msg *req, struct nvs_msg *reply,
		      int timeout_ms)
{
	req->seq = 0;
	int r = nvs_sconn_send(c, req);
	if (r)
		return r;
	for (;;) {
		r = nvs_sconn_recv(c, reply, timeout_ms);
		if (r <= 0)
			return r;
		if (reply->type == NVS_MSG_CTL_REPLY && reply->seq == req->seq)
			return 1;
	}
}

int nvs_sconn_status(struct nvs_sconn *c, int timeout_ms, int32_t *status, char **text, size_t *len)
{
	struct nvs_msg req, rep;
	memset(&req, 0, sizeof req);
	req.type = NVS_MSG_CTL_STATUS;
	req.u.ctl_status.flags = NVS_CTL_STATUS_STREAM;
	*text = NULL;
	*len = 0;
	int r = nvs_sconn_request(c, &req, &rep, timeout_ms);
	char *buf = NULL;
	size_t n = 0;
	while (r == 1) {
		if (n + rep.reply_len > NVS_SCONN_STATUS_MAX) {
			r = -E2BIG;
			break;
		}
		char *p = realloc(buf, n + rep.reply_len + 1);
		if (!p) {
			r = -ENOMEM;
			break;
		}
		buf = p;
		memcpy(buf + n, rep.reply_text, rep.reply_len);
		n += rep.reply_len;
		buf[n] = '\0';
		if (rep.reply_status != NVS_CTL_REPLY_MORE) {
			*status = rep.reply_status;
			*text = buf;
			*len = n;
			return 1;
		}
		/* The next frame of the same reply. */
		do
			r = nvs_sconn_recv(c, &rep, timeout_ms);
		while (r == 1 && !(rep.type == NVS_MSG_CTL_REPLY && rep.seq == req.seq));
	}
	free(buf);
	return r;
}
