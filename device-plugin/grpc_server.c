/*
 * gRPC transport of nvshare-device-plugin: every call into the gRPC C core
 * is in this file (see grpc_server.h). Written against Debian bookworm's
 * libgrpc 1.51: grpc_channel_create()/grpc_server_add_http2_port() with
 * insecure credentials (the *_insecure_* functions are gone in 1.51).
 *
 * Server life cycle, all on one thread and one completion queue:
 *   - a few grpc_server_request_call() outstanding (struct waiting);
 *   - a new call gets RECV_MESSAGE; a unary one is then answered by one batch
 *     SEND_INITIAL_METADATA + SEND_MESSAGE + SEND_STATUS + RECV_CLOSE;
 *   - the streaming call posts RECV_CLOSE_ON_SERVER at once (to see the
 *     kubelet go away), then one SEND_MESSAGE at a time, never two in flight;
 *   - a call is freed when none of its batches is outstanding;
 *   - stop: shutdown_and_notify + cancel_all_calls, drain to the shutdown
 *     tag and until every call is freed, destroy the server, shut the queue
 *     down, drain to GRPC_QUEUE_SHUTDOWN, destroy the queue.
 */
#include "grpc_server.h"

#include "sockpath.h" /* NVS_SOCK_PATH_LEN */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "log.h"

#define NWAITING 4
#define TICK_MS 100

enum tag_kind { T_NEW, T_RECV, T_REPLY, T_SEND, T_CLOSE, T_SHUTDOWN };

struct tag {
	enum tag_kind kind;
	void *owner;
};

struct waiting {
	struct tag tag;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
};

struct call {
	struct nvs_rpc_server *srv;
	grpc_call *call;
	char method[128];
	int streaming;
	int ops; /* batches outstanding */
	struct tag t_recv, t_reply, t_send, t_close;
	grpc_byte_buffer *recv;
	grpc_byte_buffer *send;
	grpc_slice details;
	int has_details;
	int cancelled;
	int closed, send_busy, started, md_sent;
	uint64_t sent_gen;
	struct call *next; /* streaming calls */
};

struct nvs_rpc_server {
	grpc_server *server;
	grpc_completion_queue *cq;
	struct nvs_rpc_ops ops;
	pthread_t thread;
	atomic_int stop;
	atomic_int nstreams;
	int ncalls, nwaiting;
	struct call *streams;
	struct tag t_shutdown;
	char path[NVS_SOCK_PATH_LEN];
};

int nvs_rpc_init(void)
{
	grpc_init();
	return 0;
}

void nvs_rpc_fini(void)
{
	grpc_shutdown();
}

static gpr_timespec after_ms(unsigned ms)
{
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
			    gpr_time_from_millis((int64_t)ms, GPR_TIMESPAN));
}

static grpc_byte_buffer *make_bb(const uint8_t *data, size_t len)
{
	grpc_slice s = grpc_slice_from_copied_buffer((const char *)data, len);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

/* Copies a received message out; NULL bb (no message) gives an empty one. */
static int read_bb(grpc_byte_buffer *bb, struct nvs_rpc_buf *out)
{
	out->data = NULL;
	out->len = 0;
	if (!bb)
		return 0;
	grpc_byte_buffer_reader r;
	if (!grpc_byte_buffer_reader_init(&r, bb))
		return -1;
	grpc_slice all = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	size_t len = GRPC_SLICE_LENGTH(all);
	out->data = malloc(len ? len : 1);
	if (!out->data) {
		grpc_slice_unref(all);
		return -1;
	}
	memcpy(out->data, GRPC_SLICE_START_PTR(all), len);
	out->len = len;
	grpc_slice_unref(all);
	return 0;
}

static void arm(struct nvs_rpc_server *s, struct waiting *w)
{
	memset(w, 0, sizeof *w);
	w->tag.kind = T_NEW;
	w->tag.owner = w;
	grpc_call_details_init(&w->details);
	grpc_metadata_array_init(&w->md);
	grpc_call_error e = grpc_server_request_call(s->server, &w->call, &w->details, &w->md,
						     s->cq, s->cq, &w->tag);
	if (e != GRPC_CALL_OK) {
		NVS_ERROR("grpc_server_request_call failed (%d)", (int)e);
		grpc_call_details_destroy(&w->details);
		grpc_metadata_array_destroy(&w->md);
		free(w);
		return;
	}
	s->nwaiting++;
}

static void call_free(struct call *c)
{
	struct nvs_rpc_server *s = c->srv;
	if (c->streaming) {
		for (struct call **pp = &s->streams; *pp; pp = &(*pp)->next) {
			if (*pp == c) {
				*pp = c->next;
				break;
			}
		}
		atomic_fetch_sub(&s->nstreams, 1);
	}
	if (c->recv)
		grpc_byte_buffer_destroy(c->recv);
	if (c->send)
		grpc_byte_buffer_destroy(c->send);
	if (c->has_details)
		grpc_slice_unref(c->details);
	grpc_call_unref(c->call);
	s->ncalls--;
	free(c);
}

static int start(struct call *c, const grpc_op *ops, size_t n, struct tag *t)
{
	grpc_call_error e = grpc_call_start_batch(c->call, ops, n, t, NULL);
	if (e != GRPC_CALL_OK) {
		NVS_ERROR("%s: grpc_call_start_batch failed (%d)", c->method, (int)e);
		return -1;
	}
	c->ops++;
	return 0;
}

static void stream_send(struct call *c)
{
	struct nvs_rpc_server *s = c->srv;
	struct nvs_rpc_buf msg = {0};
	uint64_t gen = 0;
	if (s->ops.snapshot(s->ops.ctx, &msg, &gen)) {
		NVS_ERROR("%s: cannot build the device list", c->method);
		return;
	}
	c->send = make_bb(msg.data, msg.len);
	free(msg.data);
	grpc_op ops[2];
	size_t n = 0;
	memset(ops, 0, sizeof ops);
	if (!c->md_sent) {
		ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
		n++;
	}
	ops[n].op = GRPC_OP_SEND_MESSAGE;
	ops[n].data.send_message.send_message = c->send;
	n++;
	if (start(c, ops, n, &c->t_send)) {
		grpc_byte_buffer_destroy(c->send);
		c->send = NULL;
		return;
	}
	c->md_sent = 1;
	c->send_busy = 1;
	c->sent_gen = gen;
	NVS_DEBUG("%s: sent device list (generation %llu)", c->method, (unsigned long long)gen);
}

static void unary_reply(struct call *c)
{
	struct nvs_rpc_server *s = c->srv;
	struct nvs_rpc_buf req = {0}, resp = {0};
	char msg[512] = "";
	int status;
	if (read_bb(c->recv, &req)) {
		status = NVS_RPC_INTERNAL;
		snprintf(msg, sizeof msg, "cannot read the request");
	} else {
		status =
		    s->ops.unary(s->ops.ctx, c->method, req.data, req.len, &resp, msg, sizeof msg);
	}
	free(req.data);
	grpc_op ops[4];
	size_t n = 0;
	memset(ops, 0, sizeof ops);
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (status == NVS_RPC_OK) {
		c->send = make_bb(resp.data ? resp.data : (const uint8_t *)"", resp.len);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = c->send;
		n++;
	} else {
		NVS_WARN("%s: %s", c->method, msg);
	}
	free(resp.data);
	if (msg[0]) {
		c->details = grpc_slice_from_copied_string(msg);
		c->has_details = 1;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.trailing_metadata_count = 0;
	ops[n].data.send_status_from_server.status = (grpc_status_code)status;
	ops[n].data.send_status_from_server.status_details = c->has_details ? &c->details : NULL;
	n++;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
	n++;
	start(c, ops, n, &c->t_reply);
}

static void new_call(struct nvs_rpc_server *s, struct waiting *w, int shutting)
{
	struct call *c = calloc(1, sizeof *c);
	char *method = grpc_slice_to_c_string(w->details.method);
	grpc_call *gc = w->call;
	grpc_call_details_destroy(&w->details);
	grpc_metadata_array_destroy(&w->md);
	if (shutting)
		free(w);
	else
		arm(s, w);
	if (!c) {
		gpr_free(method);
		grpc_call_cancel(gc, NULL);
		grpc_call_unref(gc);
		return;
	}
	s->ncalls++;
	c->srv = s;
	c->call = gc;
	snprintf(c->method, sizeof c->method, "%s", method ? method : "?");
	gpr_free(method);
	c->t_recv = (struct tag){T_RECV, c};
	c->t_reply = (struct tag){T_REPLY, c};
	c->t_send = (struct tag){T_SEND, c};
	c->t_close = (struct tag){T_CLOSE, c};
	c->streaming = !strcmp(c->method, s->ops.stream_method) ||
		       (s->ops.stream_method_alt && !strcmp(c->method, s->ops.stream_method_alt));
	NVS_DEBUG("call %s", c->method);
	if (c->streaming) {
		c->next = s->streams;
		s->streams = c;
		atomic_fetch_add(&s->nstreams, 1);
		grpc_op op;
		memset(&op, 0, sizeof op);
		op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
		op.data.recv_close_on_server.cancelled = &c->cancelled;
		if (start(c, &op, 1, &c->t_close))
			c->closed = 1;
	}
	grpc_op op;
	memset(&op, 0, sizeof op);
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->recv;
	start(c, &op, 1, &c->t_recv);
	if (c->ops == 0)
		call_free(c);
}

static void handle(struct nvs_rpc_server *s, struct tag *t, int success, int shutting)
{
	if (t->kind == T_NEW) {
		struct waiting *w = t->owner;
		s->nwaiting--;
		if (!success) {
			grpc_call_details_destroy(&w->details);
			grpc_metadata_array_destroy(&w->md);
			free(w);
			return;
		}
		new_call(s, w, shutting);
		return;
	}
	struct call *c = t->owner;
	c->ops--;
	switch (t->kind) {
	case T_RECV:
		if (!success) {
			c->closed = 1;
			break;
		}
		if (c->streaming) {
			if (c->recv) {
				grpc_byte_buffer_destroy(c->recv);
				c->recv = NULL;
			}
			c->started = 1;
			NVS_INFO("%s: stream opened", c->method);
			if (!c->closed && !shutting)
				stream_send(c);
		} else {
			unary_reply(c);
		}
		break;
	case T_SEND:
		c->send_busy = 0;
		if (c->send) {
			grpc_byte_buffer_destroy(c->send);
			c->send = NULL;
		}
		if (!success)
			c->closed = 1;
		break;
	case T_CLOSE:
		c->closed = 1;
		NVS_INFO("%s: stream closed by the peer%s", c->method,
			 c->cancelled ? " (cancelled)" : "");
		break;
	case T_REPLY:
	default:
		break;
	}
	if (c->ops == 0)
		call_free(c);
}

static void push_updates(struct nvs_rpc_server *s)
{
	if (!s->streams)
		return;
	uint64_t gen = s->ops.generation(s->ops.ctx);
	for (struct call *c = s->streams; c; c = c->next)
		if (c->started && !c->closed && !c->send_busy && c->sent_gen != gen)
			stream_send(c);
}

static void *serve(void *arg)
{
	struct nvs_rpc_server *s = arg;
	int shutting = 0, shut_done = 0;
	gpr_timespec give_up = gpr_inf_future(GPR_CLOCK_MONOTONIC);
	for (;;) {
		if (!shutting && atomic_load(&s->stop)) {
			shutting = 1;
			grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
			grpc_server_cancel_all_calls(s->server);
			give_up = after_ms(5000);
		}
		if (shut_done && s->ncalls == 0 && s->nwaiting == 0)
			break;
		if (shutting && gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), give_up) > 0) {
			NVS_WARN("gRPC server: %d calls still open at shutdown", s->ncalls);
			break;
		}
		grpc_event ev = grpc_completion_queue_next(s->cq, after_ms(TICK_MS), NULL);
		if (ev.type == GRPC_OP_COMPLETE) {
			struct tag *t = ev.tag;
			if (t->kind == T_SHUTDOWN)
				shut_done = 1;
			else
				handle(s, t, ev.success, shutting);
		}
		if (!shutting)
			push_updates(s);
	}
	grpc_server_destroy(s->server);
	s->server = NULL;
	grpc_completion_queue_shutdown(s->cq);
	for (;;) {
		grpc_event ev =
		    grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE) {
			struct tag *t = ev.tag;
			if (t->kind != T_SHUTDOWN)
				handle(s, t, 0, 1);
		}
	}
	grpc_completion_queue_destroy(s->cq);
	s->cq = NULL;
	return NULL;
}

struct nvs_rpc_server *nvs_rpc_server_start(const char *socket_path, const struct nvs_rpc_ops *ops)
{
	struct nvs_rpc_server *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	if (strlen(socket_path) >= sizeof s->path) {
		NVS_ERROR("socket path too long: %s", socket_path);
		free(s);
		return NULL;
	}
	snprintf(s->path, sizeof s->path, "%s", socket_path);
	s->ops = *ops;
	s->t_shutdown.kind = T_SHUTDOWN;
	if (unlink(socket_path) && errno != ENOENT)
		NVS_WARN("cannot remove stale %s: %s", socket_path, strerror(errno));

	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(NULL, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	char addr[sizeof s->path + 8];
	snprintf(addr, sizeof addr, "unix:%s", socket_path);
	grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
	int port = grpc_server_add_http2_port(s->server, addr, creds);
	grpc_server_credentials_release(creds);
	if (port == 0) {
		NVS_ERROR("cannot listen on %s", socket_path);
		grpc_server_destroy(s->server);
		grpc_completion_queue_shutdown(s->cq);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)
			   .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->cq);
		free(s);
		return NULL;
	}
	grpc_server_start(s->server);
	for (int i = 0; i < NWAITING; i++) {
		struct waiting *w = malloc(sizeof *w);
		if (w)
			arm(s, w);
	}
	int e = pthread_create(&s->thread, NULL, serve, s);
	if (e) {
		NVS_ERROR("pthread_create: %s", strerror(e));
		atomic_store(&s->stop, 1);
		serve(s);
		free(s);
		return NULL;
	}
	NVS_INFO("serving on %s", socket_path);
	return s;
}

void nvs_rpc_server_stop(struct nvs_rpc_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, 1);
	pthread_join(s->thread, NULL);
	/* The socket file is ours: remove it so that nobody dials a dead
	 * endpoint (the kubelet also deletes it when it restarts). */
	unlink(s->path);
	free(s);
}

int nvs_rpc_server_streams(struct nvs_rpc_server *s)
{
	return s ? atomic_load(&s->nstreams) : 0;
}

int nvs_rpc_call(const char *socket_path, const char *method, const uint8_t *req, size_t req_len,
		 struct nvs_rpc_buf *resp, unsigned timeout_ms, char *msg, size_t msgcap)
{
	char addr[NVS_SOCK_PATH_LEN + 8];
	snprintf(addr, sizeof addr, "unix:%s", socket_path);
	msg[0] = '\0';
	resp->data = NULL;
	resp->len = 0;

	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_channel *ch = grpc_channel_create(addr, creds, NULL);
	grpc_channel_credentials_release(creds);
	grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
	grpc_slice path = grpc_slice_from_copied_string(method);
	gpr_timespec deadline = gpr_time_add(
	    gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis((int64_t)timeout_ms, GPR_TIMESPAN));
	grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, path,
						   NULL, deadline, NULL);
	grpc_slice_unref(path);

	grpc_byte_buffer *send = make_bb(req, req_len), *recv = NULL;
	grpc_metadata_array md, trailing;
	grpc_metadata_array_init(&md);
	grpc_metadata_array_init(&trailing);
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	int rc;

	grpc_op ops[6];
	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	static struct tag client_tag = {T_REPLY, NULL};
	grpc_call_error e = grpc_call_start_batch(call, ops, 6, &client_tag, NULL);
	if (e != GRPC_CALL_OK) {
		snprintf(msg, msgcap, "grpc_call_start_batch failed (%d)", (int)e);
		rc = NVS_RPC_INTERNAL;
	} else {
		grpc_event ev;
		do {
			ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME),
							NULL);
		} while (ev.type != GRPC_OP_COMPLETE || ev.tag != &client_tag);
		rc = (int)status;
		if (status != GRPC_STATUS_OK) {
			char *d = grpc_slice_to_c_string(details);
			snprintf(msg, msgcap, "%s", d ? d : "");
			gpr_free(d);
		} else if (read_bb(recv, resp)) {
			snprintf(msg, msgcap, "cannot read the response");
			rc = NVS_RPC_INTERNAL;
		}
	}
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md);
	grpc_metadata_array_destroy(&trailing);
	grpc_byte_buffer_destroy(send);
	if (recv)
		grpc_byte_buffer_destroy(recv);
	grpc_call_unref(call);
	grpc_channel_destroy(ch);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return rc;
}
