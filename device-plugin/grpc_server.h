/*
 * The only part of nvshare-device-plugin that calls gRPC (C core, Debian's
 * libgrpc 1.51). The core API changes between minor releases, so it stays
 * behind this small interface of raw message bytes; plugin.c does the
 * protobuf side.
 *
 * Server: one completion queue and one thread. Unary methods are answered by
 * ops->unary. The streaming method ops->stream_method gets ops->snapshot()
 * at once and again whenever ops->generation() changes (checked every
 * 100 ms); it is never ended by the server while the server runs.
 *
 * Client: nvs_rpc_call() makes one unary call (Register on kubelet.sock).
 */
#ifndef NVSHARE_DP_GRPC_SERVER_H
#define NVSHARE_DP_GRPC_SERVER_H

#include <stddef.h>
#include <stdint.h>

/* gRPC status codes used here (same values as grpc_status_code). */
enum {
	NVS_RPC_OK = 0,
	NVS_RPC_INVALID_ARGUMENT = 3,
	NVS_RPC_FAILED_PRECONDITION = 9,
	NVS_RPC_UNIMPLEMENTED = 12,
	NVS_RPC_INTERNAL = 13,
	NVS_RPC_UNAVAILABLE = 14,
};

struct nvs_rpc_buf {
	uint8_t *data; /* malloc()ed */
	size_t len;
};

struct nvs_rpc_ops {
	void *ctx;
	/* Answers a unary call: fills *resp and returns NVS_RPC_OK, or returns
	 * a status code with a message in msg. */
	int (*unary)(void *ctx, const char *method, const uint8_t *req, size_t req_len,
		     struct nvs_rpc_buf *resp, char *msg, size_t msgcap);
	/* The server-streaming method's path, its current message and the
	 * generation that message belongs to. */
	const char *stream_method;
	/* Another path for the same stream (an older version of the API
	 * with the same messages), or NULL. */
	const char *stream_method_alt;
	int (*snapshot)(void *ctx, struct nvs_rpc_buf *msg, uint64_t *generation);
	uint64_t (*generation)(void *ctx);
};

int nvs_rpc_init(void);
void nvs_rpc_fini(void);

struct nvs_rpc_server;

/* Listens on the UNIX socket path (unlinking a stale one) and starts the
 * server thread. Returns NULL on failure (logged). */
struct nvs_rpc_server *nvs_rpc_server_start(const char *socket_path, const struct nvs_rpc_ops *ops);
/* Cancels every call, stops the thread, frees everything. */
void nvs_rpc_server_stop(struct nvs_rpc_server *s);
/* Number of open streams of the streaming method. */
int nvs_rpc_server_streams(struct nvs_rpc_server *s);

/* One unary call over a UNIX socket, waiting at most timeout_ms. Returns the
 * gRPC status (NVS_RPC_OK: *resp filled, free resp->data), with the status
 * message in msg. */
int nvs_rpc_call(const char *socket_path, const char *method, const uint8_t *req, size_t req_len,
		 struct nvs_rpc_buf *resp, unsigned timeout_ms, char *msg, size_t msgcap);

#endif
