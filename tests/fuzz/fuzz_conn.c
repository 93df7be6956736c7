/*
 * libFuzzer target for the scheduler's connection input path: the bytes a
 * peer sends go through the same code as in the daemon (conn_on_readable:
 * buffering, nvs_msg_decode, dispatch to clients.c / control.c / policy.c,
 * conn_send, conn_reap), with every scheduler source but main.c linked in.
 * Each connection is one end of a socketpair; the fuzzer plays the peers.
 *
 * Input: byte 0 = setup (bits 0-1 mode: off/on/auto; bit 2 peers are not
 * root; bit 3 uid of connection 1 differs from the others), then chunks:
 *   op byte: bits 0-1 connection (4), bits 2-4 action
 *     0-3 data: u16 length (LE) + that many bytes written by the peer
 *     4   peer closes its end
 *     5   timer tick, u8 seconds ahead (TQ expiry, DROP grace, revocation)
 *     6   the connection is reaped now (conn_reap)
 *     7   new connection in this slot (the old one closes)
 * Logging is compiled out (a stub formats each line and drops it).
 *
 *   make fuzz && build/fuzz/fuzz_conn tests/fuzz/corpus/conn
 */
#include "clock.h"
#include "clients.h"
#include "conn.h"
#include "coschedule.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "quota.h"
#include "settings.h"
#include "sockpath.h"
#include "state.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* log.c replaced: format (so bad arguments still show) and drop. */
void nvs_log_init(const char *c)
{
	(void)c;
}
void nvs_log_reload_env(void)
{
}
int nvs_log_debug_enabled(void)
{
	return 1;
}
void nvs_log(enum nvs_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	(void)level;
}
void nvs_log_n(enum nvs_log_level level, unsigned suppressed, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	(void)level, (void)suppressed;
}
unsigned long long nvs_log_dropped(void)
{
	return 0;
}
void nvs_log_set_filter(nvs_log_filter_fn f)
{
	(void)f;
}
void nvs_log_set_warn_interval(unsigned long long ns)
{
	(void)ns;
}
void nvs_log_site(struct nvs_log_site *site, enum nvs_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	(void)site, (void)level;
}

#define NC 4
static struct conn *conns[NC];
static int peers[NC] = {-1, -1, -1, -1};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	nvs_quota_start(); /* as main.c: quotas run where clients are limited */
	nvs_cosched_start();
	if (nvs_loop_init())
		return -1;
	nvs_clients_start(); /* the core's port: sends reach the connections */
	return 0;
}

static void reset(uint8_t setup)
{
	memset(&S, 0, sizeof S);
	nvs_settings_defaults();
	S.cfg.use_nvml = 0;
	S.cfg.mode = (setup & 3) > NVS_MODE_AUTO ? NVS_MODE_AUTO : (setup & 3);
	S.cfg.drop_grace_ms = 100;
	S.euid = 0;
	S.start_ns = nvs_now_ns();
	snprintf(S.cfg.sock_dir, sizeof S.cfg.sock_dir, "/nonexistent");
	snprintf(S.sock_path, sizeof S.sock_path, "/nonexistent/%s", NVS_SOCK_NAME);
}

static void no_handler(void *ctx, uint32_t events)
{
	(void)ctx, (void)events;
}

static struct conn *conn_by_slot(int i)
{
	return conns[i];
}

static void open_slot(int i, uint8_t setup)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		return;
	/* Bit 4: the admin socket (control messages accepted), else the
	 * client socket (refused). */
	struct conn *c = conn_new(sv[0], (setup & 16) ? CONN_ROLE_ADMIN : CONN_ROLE_CLIENT, NULL);
	if (!c) {
		close(sv[1]);
		return;
	}
	/* SO_PEERCRED of a socketpair is ourselves: pick the uid. */
	c->peer.uid = (setup & 4) ? 1000 : 0;
	if ((setup & 8) && i == 1)
		c->peer.uid = 2000;
	/* Registered as the server does (conn.c changes its events); the
	 * input is fed by hand, so the handler never runs. */
	nvs_loop_add(sv[0], EPOLLIN, no_handler, c);
	conns[i] = c;
	peers[i] = sv[1];
}

static void drain_peer(int i)
{
	char buf[65536];
	while (peers[i] >= 0 && recv(peers[i], buf, sizeof buf, MSG_DONTWAIT) > 0) {
	}
}

/* The slot's connection may have been freed by conn_reap: forget it. */
static void sync_slots(void)
{
	for (int i = 0; i < NC; i++) {
		if (!conns[i])
			continue;
		/* conn.c keeps no lookup by slot: a freed connection closed
		 * its end, so the drained peer reads end-of-file. */
		drain_peer(i);
		char b;
		if (recv(peers[i], &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			conns[i] = NULL;
			close(peers[i]);
			peers[i] = -1;
		}
	}
}

static void reap(void)
{
	conn_reap();
	sync_slots();
}

static void feed(int i)
{
	struct conn *c = conn_by_slot(i);
	for (int guard = 0; c && guard < 64; guard++) {
		int avail = 0;
		if (ioctl(c->fd, FIONREAD, &avail) < 0 || avail <= 0 || c->doomed)
			break;
		conn_on_readable(c);
		drain_peer(i);
		conn_on_writable(c);
	}
	for (int k = 0; k < NC; k++)
		drain_peer(k);
	reap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t setup = data[0];
	reset(setup);
	for (int i = 0; i < NC; i++)
		open_slot(i, setup);
	size_t p = 1;
	uint64_t ahead = 0;
	while (p < size) {
		uint8_t op = data[p++];
		int i = op & 3, act = (op >> 2) & 7;
		if (act <= 3) {
			if (p + 2 > size)
				break;
			size_t len = (size_t)data[p] | (size_t)data[p + 1] << 8;
			p += 2;
			if (len > size - p)
				len = size - p;
			if (conns[i] && len) {
				ssize_t w =
				    send(peers[i], data + p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
				(void)w;
				feed(i);
			}
			p += len;
		} else if (act == 4) {
			if (conns[i]) {
				shutdown(peers[i], SHUT_WR);
				conn_on_readable(conns[i]);
				reap();
			}
		} else if (act == 5) {
			if (p < size)
				ahead += (uint64_t)data[p++] * 1000000000ull;
			nvs_policy_tick(nvs_now_ns() + ahead);
			for (int k = 0; k < NC; k++)
				drain_peer(k);
			reap();
		} else if (act == 6) {
			reap();
		} else {
			if (conns[i])
				conn_doom(conns[i], "fuzz: slot reused");
			reap();
			conns[i] = NULL;
			if (peers[i] >= 0)
				close(peers[i]);
			peers[i] = -1;
			open_slot(i, setup);
		}
	}
	conn_close_all();
	for (int i = 0; i < NC; i++) {
		conns[i] = NULL;
		if (peers[i] >= 0)
			close(peers[i]);
		peers[i] = -1;
	}
	return 0;
}
