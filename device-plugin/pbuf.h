/* protobuf-c messages to and from the raw buffers grpc_server.c carries:
 * shared by the protobuf sides of the device plugin and the DRA driver. */
#ifndef NVSHARE_DP_PBUF_H
#define NVSHARE_DP_PBUF_H

#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>

#include "grpc_server.h"

/* Packs m into out (malloc()ed). 0, or -1 out of memory. */
static inline int nvs_pb_pack(const ProtobufCMessage *m, struct nvs_rpc_buf *out)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	out->data = malloc(n ? n : 1);
	if (!out->data)
		return -1;
	out->len = protobuf_c_message_pack(m, out->data);
	return 0;
}

/* A received message's bytes (NULL for an empty one) for unpacking. */
static inline const uint8_t *nvs_pb_bytes(const uint8_t *p)
{
	return p ? p : (const uint8_t *)"";
}

/* A handler's answer: m packed into out, NVS_RPC_OK; or NVS_RPC_INTERNAL
 * with "out of memory" in msg. */
static inline int nvs_pb_reply(const ProtobufCMessage *m, struct nvs_rpc_buf *out, char *msg,
			       size_t msgcap)
{
	if (!nvs_pb_pack(m, out))
		return NVS_RPC_OK;
	snprintf(msg, msgcap, "out of memory");
	return NVS_RPC_INTERNAL;
}

/* A handler's request: the message of descriptor d, or NULL with "cannot
 * decode <Message>" in msg (the handler answers NVS_RPC_INVALID_ARGUMENT). */
static inline void *nvs_pb_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *data,
				  size_t len, char *msg, size_t msgcap)
{
	void *m = protobuf_c_message_unpack(d, NULL, len, nvs_pb_bytes(data));
	if (!m)
		snprintf(msg, msgcap, "cannot decode %s", d->short_name);
	return m;
}

#endif
