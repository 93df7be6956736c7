/*
 * A blocking connection to the scheduler for tools: nvsharectl, the test
 * client (tests/sched/fake_client) and bench/sched_latency. Frames are
 * read whole into a buffer owned by the connection; a decoded CTL_REPLY's
 * text stays valid until the next receive.
 */
#ifndef NVSHARE_CTL_SCHED_CONN_H
#define NVSHARE_CTL_SCHED_CONN_H

#include "protocol.h"

#include <stddef.h>
#include <stdint.h>

struct nvs_sconn {
	int fd;
	uint8_t *buf;
	size_t len, cap, consumed; /* consumed: the last frame handed out */
	uint32_t seq;
};

/* Connects to the client socket, $NVSHARE_SOCK_DIR/scheduler.sock. 0 or
 * -errno. */
int nvs_sconn_open(struct nvs_sconn *c);
/* Connects to the socket at path (the admin socket: nvsharectl). */
int nvs_sconn_open_path(struct nvs_sconn *c, const char *path);
void nvs_sconn_close(struct nvs_sconn *c);
/* Sends one message (assigns the next seq unless m->seq is set). 0 or
 * -errno. */
int nvs_sconn_send(struct nvs_sconn *c, struct nvs_msg *m);
/* Writes raw bytes (tests). 0 or -errno. */
int nvs_sconn_send_raw(struct nvs_sconn *c, const void *p, size_t n);
/* Receives one message. timeout_ms < 0 waits forever. Returns 1 with a
 * message, 0 on timeout, -EPIPE when the scheduler closed, -EPROTO on a
 * malformed frame, other -errno on errors. */
int nvs_sconn_recv(struct nvs_sconn *c, struct nvs_msg *m, int timeout_ms);
/* Sends a control request and waits for its CTL_REPLY. Same returns. */
int nvs_sconn_request(struct nvs_sconn *c, struct nvs_msg *req, struct nvs_msg *reply,
		      int timeout_ms);

/* Asks for the status (CTL_STATUS with NVS_CTL_STATUS_STREAM) and
 * reassembles its frames into *text (malloc'd, NUL-terminated, *len
 * bytes; the caller frees it). timeout_ms bounds each frame's wait.
 * Returns 1 with *status 0 and the text, or *status < 0 and the
 * scheduler's message as text; 0 on timeout; -errno as
 * nvs_sconn_recv (-E2BIG: more than NVS_SCONN_STATUS_MAX bytes). */
#define NVS_SCONN_STATUS_MAX (256u << 20)
int nvs_sconn_status(struct nvs_sconn *c, int timeout_ms, int32_t *status, char **text,
		     size_t *len);

#endif
