/*
 * A peer that sends requests but never reads its replies is disconnected;
 * the scheduler keeps serving everyone else. The peer is a tenant (client
 * socket, tenant status): what any Pod can do. Its requests stop being read
 * once 64 KiB of replies wait (back-pressure, scheduler/conn.c), so its
 * pending output stays small; it is closed at the handshake deadline (a
 * client-socket connection that never sent HELLO), or for not reading.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	(void)argc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	h_start(argv[0], (char *)NULL);
	struct nvs_sconn holder;
	int mode = h_client(&holder, "GPU-slow", 0);
	tap(mode == 0, "a client attaches (mode auto, memory fits: concurrent)");

	struct nvs_sconn s;
	if (nvs_sconn_open(&s)) {
		tap(0, "connect");
		return 1;
	}
	/* Shrink our receive buffer so the scheduler's output piles up in
	 * its own buffer. */
	int small = 4096;
	setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
	uint8_t frame[64];
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_CTL_STATUS;
	size_t n = nvs_msg_encode(&m, frame, sizeof frame);
	fcntl(s.fd, F_SETFL, O_NONBLOCK);
	int closed = 0;
	uint64_t end = mono_ns() + 20ull * 1000000000ull;
	long sent = 0;
	while (!closed && mono_ns() < end) {
		ssize_t w = send(s.fd, frame, n, MSG_NOSIGNAL);
		if (w == (ssize_t)n) {
			sent++;
			continue;
		}
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			closed = 1;
			break;
		}
		usleep(1000);
	}
	printf("# sent %ld status requests without reading\n", sent);
	tap(closed, "the scheduler disconnected a peer that never reads");

	struct nvs_sconn c;
	struct nvs_msg req, rep;
	memset(&req, 0, sizeof req);
	req.type = NVS_MSG_CTL_STATUS;
	int ok = h_admin_open(&c) == 0 && nvs_sconn_request(&c, &req, &rep, 5000) == 1 &&
		 rep.reply_status == 0;
	tap(ok, "status still answered afterwards");
	tap(ok && (memmem(rep.reply_text, rep.reply_len, "\"closed_not_reading\":1", 22) ||
		   memmem(rep.reply_text, rep.reply_len, "\"handshake_timeouts\":1", 22)),
	    "status counts the disconnected slow reader");
	/* The attached client is unaffected. */
	h_send_gpu(&holder, NVS_MSG_REQ_LOCK, 0);
	tap(h_wait(&holder, NVS_MSG_GPU_MODE, 2000, &m) == 1 && m.u.gpu.value == 0,
	    "other client still served (REQ_LOCK on a concurrent GPU answered by GPU_MODE 0)");
	nvs_sconn_close(&c);
	nvs_sconn_close(&s);
	nvs_sconn_close(&holder);
	return tap_failed ? 1 : 0;
}
