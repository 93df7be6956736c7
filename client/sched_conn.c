/*
 * The scheduler client thread and its connection (see
 * client/sched_client_internal.h for how the scheduler client is split, and
 * docs/client-lock.md): the loop the thread runs, the socket it owns
 * (connect, reconnect with jitter, non-blocking flush, read and decode), and
 * the outgoing messages, composed from what application threads asked for.
 * Everything here runs on the client thread, except start-up configuration
 * and the fork handler.
 */
#include "sched_client_internal.h"

#include "sched_quota.h"
#include "sched_swap.h"

#include "log.h"
#include "parse.h"
#include "protocol.h"
#include "sockpath.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Reconnect period while the scheduler is absent (+-25 % jitter). */
#define NVS_RECONNECT_MS 1000u
/* While a thread waits for a grant, a PING goes out once a second of
 * silence; NVSHARE_SCHED_TIMEOUT without any answer and the scheduler is
 * taken for gone (docs/client-lock.md "A scheduler that stops answering"). */
#define NVS_PING_NS 1000000000ull
#define NVS_SCHED_TIMEOUT_DEFAULT_NS 10000000000ull
#define NVS_OUTBUF_SIZE (64u * 1024u)

/* Configuration read at start (nvs_sc_conn_configure). */
static unsigned hello_core_limit = 100;
static uint64_t hello_mem_limit = NVS_NO_LIMIT;
static char sock_path[NVS_SOCK_PATH_LEN];
static uint64_t sched_timeout_ns = NVS_SCHED_TIMEOUT_DEFAULT_NS; /* 0: never */
/* NVS_HELLO_DEVICE_MEMORY when NVSHARE_UNIFIED_MEMORY=0 (config.c reports a
 * bad value; here it is only read). */
static uint32_t hello_mem_flags;
/* NVSHARE_PRIORITY=interactive|batch: the class the scheduler's
 * co-scheduling gives this process (docs/scheduler.md); unset: observed. */
static uint32_t hello_prio_flags;

/* Client-thread-only state. */
static int sock = -1;
static uint8_t inbuf[NVS_HEADER_SIZE + NVS_MAX_PAYLOAD];
static size_t inlen;
static uint8_t outbuf[NVS_OUTBUF_SIZE];
static size_t outlen;
static int out_overflow;
static uint32_t seq;
static uint64_t next_connect_ns;
static int warned_absent;
static unsigned jitter_seed;
static int paths_ok;	      /* this scheduler takes SWAP_PATHS (SWAP_PATHS_OK) */
static int ungated_asked;     /* this scheduler asked for UNGATED reports */
static uint64_t last_rx_ns;   /* when it last sent anything */
static uint64_t ping_sent_ns; /* an unanswered PING (0: none) */
static uint32_t ping_token;

void nvs_sc_conn_configure(void)
{
	if (nvs_sock_path(sock_path, sizeof sock_path))
		snprintf(sock_path, sizeof sock_path, "(path too long)");
	unsigned core = 100;
	if (nvs_env_percent("NVSHARE_GPU_CORE_LIMIT", 1, 100, &core) == 1)
		hello_core_limit = core;
	/* The memory limit this process enforces itself (config.c, the one
	 * reader of NVSHARE_GPU_MEMORY_LIMIT and NVSHARE_GPU_MEMORY_REQUEST):
	 * the scheduler checks the request against the Pod spec anyway. */
	hello_mem_limit = nvs_config_env_mem_limit();
	const char *um = getenv("NVSHARE_UNIFIED_MEMORY");
	int unified = 1;
	if (um && *um && nvs_parse_bool(um, &unified) == 0 && !unified)
		hello_mem_flags = NVS_HELLO_DEVICE_MEMORY;
	const char *pr = getenv("NVSHARE_PRIORITY");
	if (pr && *pr) {
		if (!strcmp(pr, "interactive"))
			hello_prio_flags = NVS_HELLO_PRIO_INTERACTIVE;
		else if (!strcmp(pr, "batch"))
			hello_prio_flags = NVS_HELLO_PRIO_BATCH;
		else
			NVS_WARN(
			    "ignoring NVSHARE_PRIORITY=\"%s\" (expected interactive or batch); "
			    "the scheduler observes this process instead",
			    pr);
	}
	uint64_t ms;
	const char *t = getenv("NVSHARE_SCHED_TIMEOUT");
	if (t && *t) {
		/* Whole seconds ("10"), or a duration with a unit ("500ms",
		 * "10s"); 0 turns the check off. */
		char *end;
		unsigned long long secs = strtoull(t, &end, 10);
		if (*end == '\0' && secs <= 3600)
			sched_timeout_ns = secs * 1000000000ull;
		else if (nvs_parse_duration_ms(t, &ms) == 0 && ms <= 3600000ull)
			sched_timeout_ns = ms * 1000000ull;
		else
			NVS_WARN(
			    "ignoring NVSHARE_SCHED_TIMEOUT=\"%s\" (expected seconds 0..3600 or "
			    "a duration such as 500ms); using %llu s",
			    t, (unsigned long long)(sched_timeout_ns / 1000000000ull));
	}
	jitter_seed = (unsigned)getpid() ^ (unsigned)nvs_sc_now_ns();
}

unsigned nvs_sc_hello_core_limit(void)
{
	return hello_core_limit;
}

/* ---------------------------------------------------------------------- */
/* Outgoing messages (client thread only)                                  */

static void queue_msg(struct nvs_msg *m)
{
	if (sock < 0)
		return;
	m->seq = ++seq;
	size_t n = nvs_msg_encode(m, outbuf + outlen, sizeof outbuf - outlen);
	if (n == 0) {
		/* The scheduler stopped reading for a long time (or a bug):
		 * the loop drops the connection and starts over. */
		out_overflow = 1;
		return;
	}
	outlen += n;
	NVS_DEBUG("-> %s", nvs_msg_type_name(m->type));
}

void nvs_sc_queue_gpu_msg(uint16_t type, int dev, uint32_t value)
{
	struct nvs_msg m;
	nvs_msg_gpu(&m, type, (uint32_t)dev, value);
	queue_msg(&m);
}

void nvs_sc_queue_released(int dev, uint32_t flags, uint64_t drain_ns)
{
	struct nvs_msg m;
	nvs_msg_released(&m, (uint32_t)dev, flags, drain_ns);
	queue_msg(&m);
}

/* Sends the swap counters of dev if they changed (client thread). */
void nvs_sc_queue_swap_stats(int dev)
{
	struct nvs_swap_totals t;
	if (!nvs_swap_totals(dev, &t))
		return;
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = NVS_MSG_SWAP_STATS;
	m.u.swap.local_gpu = (uint32_t)dev;
	m.u.swap.bytes_in = t.bytes_in;
	m.u.swap.bytes_out = t.bytes_out;
	m.u.swap.ns_in = t.ns_in;
	m.u.swap.ns_out = t.ns_out;
	queue_msg(&m);
}

/* SWAP_PATHS for every announced GPU whose figures changed (outside mu:
 * the engine's and staging's locks are taken after it, never inside). */
static void send_swap_paths(void)
{
	if (!paths_ok || sock < 0)
		return;
	int devs[NVS_MAX_GPUS], n = 0;
	pthread_mutex_lock(&nvs_sc.mu);
	for (int i = 0; i < nvs_sc.ndev; i++)
		if (nvs_sc.gpus[i].attached && nvs_sc.gpus[i].announced)
			devs[n++] = i;
	pthread_mutex_unlock(&nvs_sc.mu);
	for (int k = 0; k < n; k++) {
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		if (!nvs_swap_report(devs[k], &m.u.paths))
			continue;
		m.type = NVS_MSG_SWAP_PATHS;
		queue_msg(&m);
	}
}

/* Sends what application threads asked for: ATTACH_GPU for new devices,
 * REQ_LOCK, coalesced MEM_UPDATE. Called with mu held, while connected. */
static void compose_locked(void)
{
	for (int i = 0; i < nvs_sc.ndev; i++) {
		struct sc_gpu *g = &nvs_sc.gpus[i];
		if (!g->attached)
			continue;
		if (!g->announced) {
			struct nvs_msg m;
			g->mem_sent = nvs_sc_take_mem(i, NULL);
			nvs_msg_attach(&m, (uint32_t)i, g->uuid, g->total_mem, g->mem_sent);
			queue_msg(&m);
			g->announced = 1;
		}
		if (g->req_pending) {
			g->req_pending = 0;
			nvs_sc_queue_gpu_msg(NVS_MSG_REQ_LOCK, i, 0);
		}
		int changed;
		uint64_t v = nvs_sc_take_mem(i, &changed);
		if (changed && v != g->mem_sent) {
			struct nvs_msg m;
			memset(&m, 0, sizeof m);
			m.type = NVS_MSG_MEM_UPDATE;
			m.u.mem.local_gpu = (uint32_t)i;
			m.u.mem.allocated = v;
			queue_msg(&m);
			g->mem_sent = v;
		}
	}
}

/* ---------------------------------------------------------------------- */
/* Connection                                                             */

static uint64_t reconnect_delay_ns(void)
{
	/* 750..1250 ms: clients started together do not retry in lockstep. */
	unsigned j = (unsigned)rand_r(&jitter_seed) % (NVS_RECONNECT_MS / 2);
	return (uint64_t)(NVS_RECONNECT_MS * 3 / 4 + j) * 1000000ull;
}

static void disconnect_for(int reason, const char *why);

static void disconnect(const char *why)
{
	disconnect_for(NVS_UNGATED_LOST, why);
}

static void disconnect_for(int reason, const char *why)
{
	if (sock >= 0)
		close(sock);
	sock = -1;
	inlen = outlen = 0;
	out_overflow = 0;
	nvs_sc_idle_watch_stop();
	paths_ok = 0;
	ping_sent_ns = 0;
	ungated_asked = 0;
	pthread_mutex_lock(&nvs_sc.mu);
	nvs_sc_ungated_cause(reason);
	nvs_sc.connected = 0;
	for (int i = 0; i < nvs_sc.ndev; i++) {
		struct sc_gpu *g = &nvs_sc.gpus[i];
		g->announced = 0;
		g->mode_known = 0;
		g->mode_wait_over = 0;
		nvs_qclient_set_gpu_quota(i, 0); /* told again on the next connection */
		g->serialized = 0;
		g->lock = L_NONE; /* a lock we held is forgotten */
		g->req_pending = 0;
		g->waiters = 0;
	}
	nvs_sc_recompute_gate();
	pthread_cond_broadcast(&nvs_sc.cv);
	pthread_mutex_unlock(&nvs_sc.mu);
	NVS_WARN("scheduler connection lost (%s); %s, will reconnect", why, nvs_sc_ungated_words());
	warned_absent = 1;
	next_connect_ns = nvs_sc_now_ns() + reconnect_delay_ns();
}

static void try_connect(void)
{
	int fd = nvs_sock_connect();
	if (fd < 0) {
		if (!warned_absent) {
			NVS_WARN("scheduler not reachable at %s; %s, will retry", sock_path,
				 nvs_sc_ungated_words());
			warned_absent = 1;
		} else {
			NVS_DEBUG("scheduler not reachable at %s (%s)", sock_path, strerror(-fd));
		}
		next_connect_ns = nvs_sc_now_ns() + reconnect_delay_ns();
		pthread_mutex_lock(&nvs_sc.mu);
		nvs_sc_ungated_cause(NVS_UNGATED_UNREACHABLE);
		nvs_sc.first_try_done = 1;
		pthread_cond_broadcast(&nvs_sc.cv);
		pthread_mutex_unlock(&nvs_sc.mu);
		return;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	sock = fd;
	inlen = outlen = 0;
	out_overflow = 0;
	if (warned_absent)
		NVS_INFO("scheduler reachable at %s; registering", sock_path);
	else
		NVS_DEBUG("connected to scheduler at %s", sock_path);
	warned_absent = 0;

	struct nvs_msg m;
	nvs_msg_hello(&m, program_invocation_short_name, hello_core_limit, hello_mem_limit);
	/* Device memory already (the variable, or an earlier MEMORY_MODE):
	 * say so; else offer to switch on the Pod's word. */
	m.u.hello.flags = NVS_HELLO_SWAP_HINT | NVS_HELLO_LIMITS | NVS_HELLO_UNGATED |
			  NVS_HELLO_SWAP_PATHS | (sched_timeout_ns ? NVS_HELLO_PING : 0) |
			  (hello_mem_flags || !nvs_config_unified() ? NVS_HELLO_DEVICE_MEMORY
								    : NVS_HELLO_MEMORY_MODE) |
			  hello_prio_flags;
	queue_msg(&m);
	paths_ok = 0;
	ping_sent_ns = 0;
	ungated_asked = 0;
	last_rx_ns = nvs_sc_now_ns();

	pthread_mutex_lock(&nvs_sc.mu);
	nvs_sc.connected = 1;
	nvs_sc.first_try_done = 1;
	nvs_sc_recompute_gate(); /* GPU_MODE pending on every attached GPU */
	compose_locked();	 /* ATTACH_GPU for every device in use */
	pthread_cond_broadcast(&nvs_sc.cv);
	pthread_mutex_unlock(&nvs_sc.mu);
}

static void flush_out(void)
{
	while (sock >= 0 && outlen > 0) {
		ssize_t n = send(sock, outbuf, outlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			disconnect(strerror(errno));
			return;
		}
		memmove(outbuf, outbuf + n, outlen - (size_t)n);
		outlen -= (size_t)n;
	}
}

/* LIMITS_ASK: a scheduler that started after this process gave it limits
 * asks which ones it enforces (a restart). Only limits that came from a
 * SET_LIMITS: the environment's travel in HELLO. The scheduler takes
 * them as a claim that can only tighten (docs/protocol.md). */
static void announce_limits(void)
{
	pthread_mutex_lock(&nvs_sc.mu);
	for (int i = 0; i < nvs_sc.ndev; i++) {
		const struct sc_gpu *g = &nvs_sc.gpus[i];
		if (!g->attached || !g->announced || !g->limits_set)
			continue;
		struct nvs_msg m;
		memset(&m, 0, sizeof m);
		m.type = NVS_MSG_LIMITS_IN_FORCE;
		m.u.limits.local_gpu = (uint32_t)i;
		m.u.limits.core_limit = g->core_limit;
		m.u.limits.mem_limit = g->mem_limit;
		queue_msg(&m);
	}
	pthread_mutex_unlock(&nvs_sc.mu);
}

/* Reads what the scheduler sent and handles every complete message. */
static void on_readable(void)
{
	for (;;) {
		if (inlen == sizeof inbuf) {
			disconnect("oversized message");
			return;
		}
		ssize_t n = recv(sock, inbuf + inlen, sizeof inbuf - inlen, MSG_DONTWAIT);
		if (n == 0) {
			disconnect("closed by the scheduler");
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			disconnect(strerror(errno));
			return;
		}
		inlen += (size_t)n;
		size_t off = 0;
		while (off < inlen) {
			struct nvs_msg m;
			size_t used = 0;
			enum nvs_decode_result r =
			    nvs_msg_decode(inbuf + off, inlen - off, &m, &used);
			if (r == NVS_DECODE_NEED_MORE)
				break;
			if (r != NVS_DECODE_OK) {
				disconnect("protocol error");
				return;
			}
			/* Anything it sends proves the scheduler alive. */
			last_rx_ns = nvs_sc_now_ns();
			ping_sent_ns = 0;
			if (m.type == NVS_MSG_PONG)
				; /* its arrival (above) was the point */
			else if (m.type == NVS_MSG_LIMITS_ASK)
				announce_limits();
			else if (m.type == NVS_MSG_UNGATED_ASK)
				ungated_asked = 1;
			else if (m.type == NVS_MSG_SWAP_PATHS_OK) {
				/* Everything is news to this scheduler. */
				paths_ok = 1;
				for (int i = 0; i < NVS_MAX_GPUS; i++)
					nvs_swap_report_again(i);
			} else if (m.type == NVS_MSG_MEMORY_MODE) {
				if (m.u.gpu.value == NVS_MEMORY_MODE_DEVICE)
					nvs_config_device_memory();
			} else
				nvs_sc_handle_msg(&m);
			off += used;
		}
		memmove(inbuf, inbuf + off, inlen - off);
		inlen -= off;
	}
}

/* ---------------------------------------------------------------------- */
/* Liveness                                                                */

/*
 * A thread waiting for LOCK_OK depends on the scheduler answering. A
 * stopped (SIGSTOP), hung or silent scheduler keeps the connection open and
 * would hold that thread forever; so while anyone waits, the client PINGs
 * after a second of silence, and when nothing at all arrived for
 * NVSHARE_SCHED_TIMEOUT after a PING, drops the connection as if it had
 * been closed: the application runs ungated (one warning) and reconnects,
 * which registers it again once the scheduler answers. A scheduler that
 * never announced PONG is pinged all the same: one that made the GPU
 * serialized and then says nothing must not hold the application forever
 * (it did: killed at 40 s); a scheduler too old to know PING closes the
 * connection on it, which ends the wait the same way. Returns the poll
 * timeout in ms (-1: none).
 */
static int check_alive(void)
{
	if (!sched_timeout_ns)
		return -1;
	int waiting = 0;
	pthread_mutex_lock(&nvs_sc.mu);
	for (int i = 0; i < nvs_sc.ndev; i++)
		waiting |= nvs_sc.gpus[i].attached && nvs_sc.gpus[i].lock == L_REQUESTED;
	pthread_mutex_unlock(&nvs_sc.mu);
	if (!waiting) {
		ping_sent_ns = 0;
		return -1;
	}
	uint64_t now = nvs_sc_now_ns();
	if (ping_sent_ns && now - ping_sent_ns >= sched_timeout_ns) {
		char why[96];
		snprintf(why, sizeof why, "no answer to a ping for %.1f s (NVSHARE_SCHED_TIMEOUT)",
			 (double)(now - ping_sent_ns) / 1e9);
		disconnect_for(NVS_UNGATED_PING_TIMEOUT, why);
		return 0;
	}
	if (!ping_sent_ns && now - last_rx_ns >= NVS_PING_NS) {
		struct nvs_msg m;
		nvs_msg_gpu(&m, NVS_MSG_PING, 0, ++ping_token);
		queue_msg(&m);
		ping_sent_ns = now;
	}
	uint64_t next = ping_sent_ns ? ping_sent_ns + sched_timeout_ns : last_rx_ns + NVS_PING_NS;
	return next > now ? (int)((next - now + 999999) / 1000000) : 0;
}

/* ---------------------------------------------------------------------- */
/* Ungated runs                                                            */

/*
 * While the process has a GPU attached and the scheduler cannot gate it
 * (not reachable, the connection lost, no answer), its gates are open: it
 * runs ungated. Each such episode is said once, by the code that found the
 * cause (the warnings name it), and counted here: it starts when a cause
 * is set and a GPU is attached, and ends once connected with every
 * attached GPU's GPU_MODE known. Finished episodes are reported to a
 * scheduler that asked (UNGATED_ASK): one UNGATED per reason, so that the
 * scheduler's status and metrics show them. Fail-closed mode
 * (NVSHARE_REQUIRE_SCHEDULER=1) runs nothing ungated and counts nothing.
 */
void nvs_sc_ungated_cause(int reason)
{
	if (!nvs_sc.ungated_cause && !nvs_sc_fail_closed())
		nvs_sc.ungated_cause = reason;
}

/* Once per pass of the client thread: episodes begin and end. */
static void ungated_tick(void)
{
	uint64_t now = nvs_sc_now_ns();
	pthread_mutex_lock(&nvs_sc.mu);
	int any = 0, gated = nvs_sc.connected;
	for (int i = 0; i < nvs_sc.ndev; i++) {
		const struct sc_gpu *g = &nvs_sc.gpus[i];
		if (!g->attached)
			continue;
		any = 1;
		if (!g->mode_known || g->mode_wait_over)
			gated = 0;
	}
	int c = nvs_sc.ungated_cause;
	if (c && any && !nvs_sc.ungated_since_ns)
		nvs_sc.ungated_since_ns = now;
	if (c && gated) {
		if (nvs_sc.ungated_since_ns) {
			nvs_sc.ungated_runs[c]++;
			nvs_sc.ungated_ns[c] += now - nvs_sc.ungated_since_ns;
		}
		nvs_sc.ungated_cause = 0;
		nvs_sc.ungated_since_ns = 0;
	}
	struct nvs_msg m[NVS_UNGATED_REASONS];
	int n = 0;
	for (int r = 1; ungated_asked && r <= NVS_UNGATED_REASONS; r++) {
		if (!nvs_sc.ungated_runs[r])
			continue;
		memset(&m[n], 0, sizeof m[n]);
		m[n].type = NVS_MSG_UNGATED;
		m[n].u.ungated.reason = (uint32_t)r;
		m[n].u.ungated.runs = nvs_sc.ungated_runs[r];
		m[n].u.ungated.ns = nvs_sc.ungated_ns[r];
		nvs_sc.ungated_runs[r] = 0;
		nvs_sc.ungated_ns[r] = 0;
		n++;
	}
	pthread_mutex_unlock(&nvs_sc.mu);
	for (int i = 0; i < n; i++)
		queue_msg(&m[i]);
}

/* ---------------------------------------------------------------------- */
/* The client thread                                                       */

static int min_timeout(int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return a < b ? a : b;
}

void *nvs_sc_thread_main(void *arg)
{
	int evfd = (int)(intptr_t)arg;
	for (;;) {
		if (nvs_sc_stopping())
			return NULL;
		if (sock < 0 && nvs_sc_now_ns() >= next_connect_ns)
			try_connect();
		/* Swapped-out memory whose gate may open now comes back first. */
		nvs_sc_restore_tick();
		if (sock >= 0) {
			pthread_mutex_lock(&nvs_sc.mu);
			compose_locked();
			pthread_mutex_unlock(&nvs_sc.mu);
			send_swap_paths();
		}
		ungated_tick();
		int timeout = -1;
		if (sock >= 0)
			timeout = nvs_sc_idle_tick();
		if (sock >= 0)
			timeout = min_timeout(timeout, check_alive());
		if (out_overflow)
			disconnect("send buffer full");
		flush_out();
		if (sock < 0) {
			uint64_t now = nvs_sc_now_ns();
			int t = next_connect_ns > now
				    ? (int)((next_connect_ns - now + 999999) / 1000000)
				    : 0;
			timeout = min_timeout(timeout, t);
		}

		struct pollfd p[2];
		int np = 0;
		p[np].fd = evfd;
		p[np].events = POLLIN;
		p[np].revents = 0;
		np++;
		if (sock >= 0) {
			p[np].fd = sock;
			p[np].events = POLLIN | (outlen ? POLLOUT : 0);
			p[np].revents = 0;
			np++;
		}
		int r = poll(p, (nfds_t)np, timeout);
		if (r < 0)
			continue; /* EINTR cannot happen (signals blocked) */
		if (p[0].revents & POLLIN) {
			uint64_t v;
			ssize_t n = read(evfd, &v, sizeof v);
			(void)n;
		}
		if (np > 1 && sock >= 0) {
			if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
				on_readable();
			if (sock >= 0 && (p[1].revents & POLLOUT))
				flush_out();
		}
	}
	return NULL;
}

void nvs_sc_conn_atfork_child(void)
{
	/* The parent still owns the connection: close our copy, send nothing. */
	if (sock >= 0)
		close(sock);
	sock = -1;
	inlen = outlen = 0;
	out_overflow = 0;
	seq = 0;
	paths_ok = 0;
	warned_absent = 0;
	next_connect_ns = 0;
	ungated_asked = 0;
	/* The parent's episodes are the parent's to report. */
	nvs_sc.ungated_cause = 0;
	nvs_sc.ungated_since_ns = 0;
	memset(nvs_sc.ungated_runs, 0, sizeof nvs_sc.ungated_runs);
	memset(nvs_sc.ungated_ns, 0, sizeof nvs_sc.ungated_ns);
}
