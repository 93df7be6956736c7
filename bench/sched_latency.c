/*
 * sched_latency: lock latencies of a running nvshare-scheduler.
 *
 *   lock round trip  REQ_LOCK -> LOCK_OK with the GPU free
 *   handoff          holder's LOCK_RELEASED -> next holder's LOCK_OK
 *
 * For each client count (default 2 and 64) it opens that many connections,
 * attaches them all to a benchmark GPU (UUID GPU-nvshare-bench, reporting
 * more memory than any capacity so that mode auto serializes it; mode off
 * is refused), measures, and prints p50 / p99 / max in microseconds.
 * The holder re-queues at the tail right after releasing, so the handoff
 * loop cycles through every client (round robin).
 *
 *   sched_latency [--clients 2,64] [--rounds 2000] [--uuid U]
 *                 [--check-handoff-p99-ms MS]   exit 1 if any p99 exceeds it
 */
#include "ctl/sched_conn.h"
#include "parse.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fail(const char *what, int err)
{
	fprintf(stderr, "sched_latency: %s%s%s\n", what, err ? ": " : "",
		err ? strerror(-err) : "");
	exit(1);
}

static void send_gpu(struct nvs_sconn *c, uint16_t type)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	int r = nvs_sconn_send(c, &m);
	if (r)
		fail("send", r);
}

/* Receives until a message of `type` (others are ignored). */
static void wait_type(struct nvs_sconn *c, uint16_t type, struct nvs_msg *out)
{
	for (;;) {
		struct nvs_msg m;
		int r = nvs_sconn_recv(c, &m, 10000);
		if (r == 0)
			fail("no reply from the scheduler within 10 s", 0);
		if (r < 0)
			fail("connection lost", r);
		if (m.type == type) {
			if (out)
				*out = m;
			return;
		}
	}
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct result {
	double p50, p99, max;
};

static struct result summarize(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof v[0], cmp);
	struct result r = {
	    (double)v[n / 2] / 1e3,
	    (double)v[(size_t)((n - 1) * 0.99)] / 1e3,
	    (double)v[n - 1] / 1e3,
	};
	return r;
}

static void open_clients(struct nvs_sconn *c, unsigned n, const char *uuid)
{
	for (unsigned i = 0; i < n; i++) {
		int r = nvs_sconn_open(&c[i]);
		if (r) {
			fprintf(stderr,
				"sched_latency: cannot connect to the scheduler "
				"(NVSHARE_SOCK_DIR): %s\n",
				strerror(-r));
			exit(1);
		}
		struct nvs_msg m;
		nvs_msg_hello(&m, "sched_latency", 100, NVS_NO_LIMIT);
		nvs_sconn_send(&c[i], &m);
		/* allocated beyond any capacity: the GPU is serialized */
		nvs_msg_attach(&m, 0, uuid, 1ull << 30, 1ull << 50);
		nvs_sconn_send(&c[i], &m);
	}
	/* The last attach decides the mode; everyone has been told by now
	 * once the last client's GPU_MODE arrives. */
	for (unsigned i = 0; i < n; i++) {
		struct nvs_msg m;
		wait_type(&c[i], NVS_MSG_GPU_MODE, &m);
		if (i + 1 == n && m.u.gpu.value != 1)
			fail("the benchmark GPU is not serialized (scheduler mode off?): run "
			     "nvsharectl -S auto or on",
			     0);
	}
}

/* REQ_LOCK -> LOCK_OK on a free GPU, client 0 only. */
static struct result bench_rtt(struct nvs_sconn *c, unsigned rounds, uint64_t *lat)
{
	for (unsigned i = 0; i < rounds; i++) {
		uint64_t t0 = now_ns();
		send_gpu(&c[0], NVS_MSG_REQ_LOCK);
		wait_type(&c[0], NVS_MSG_LOCK_OK, NULL);
		lat[i] = now_ns() - t0;
		send_gpu(&c[0], NVS_MSG_LOCK_RELEASED);
	}
	return summarize(lat, rounds);
}

/* Waits for a LOCK_OK on any connection; returns its index. */
static unsigned next_holder(struct nvs_sconn *c, unsigned n, struct pollfd *pf)
{
	for (;;) {
		/* Messages already buffered first. */
		for (unsigned i = 0; i < n; i++) {
			struct nvs_msg m;
			while (c[i].len > c[i].consumed) {
				int r = nvs_sconn_recv(&c[i], &m, 0);
				if (r < 0)
					fail("connection lost", r);
				if (r == 0)
					break;
				if (m.type == NVS_MSG_LOCK_OK)
					return i;
			}
		}
		int r = poll(pf, n, 10000);
		if (r == 0)
			fail("no LOCK_OK within 10 s", 0);
		if (r < 0 && errno != EINTR)
			fail("poll", -errno);
		for (unsigned i = 0; i < n; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			struct nvs_msg m;
			int k = nvs_sconn_recv(&c[i], &m, 0);
			if (k < 0)
				fail("connection lost", k);
			if (k == 1 && m.type == NVS_MSG_LOCK_OK)
				return i;
		}
	}
}

static struct result bench_handoff(struct nvs_sconn *c, unsigned n, unsigned rounds, uint64_t *lat)
{
	struct pollfd *pf = calloc(n, sizeof *pf);
	for (unsigned i = 0; i < n; i++) {
		pf[i].fd = c[i].fd;
		pf[i].events = POLLIN;
		send_gpu(&c[i], NVS_MSG_REQ_LOCK);
	}
	unsigned h = next_holder(c, n, pf);
	for (unsigned i = 0; i < rounds; i++) {
		uint64_t t0 = now_ns();
		send_gpu(&c[h], NVS_MSG_LOCK_RELEASED);
		unsigned nh = next_holder(c, n, pf);
		lat[i] = now_ns() - t0;
		send_gpu(&c[h], NVS_MSG_REQ_LOCK); /* back of the queue */
		h = nh;
	}
	free(pf);
	return summarize(lat, rounds);
}

int main(int argc, char **argv)
{
	const char *list = "2,64", *uuid = "GPU-nvshare-bench";
	uint64_t rounds = 2000;
	double check_ms = 0;
	static const struct option opts[] = {
	    {"clients", required_argument, 0, 'c'},
	    {"rounds", required_argument, 0, 'r'},
	    {"uuid", required_argument, 0, 'u'},
	    {"check-handoff-p99-ms", required_argument, 0, 'k'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "c:r:u:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			list = optarg;
			break;
		case 'r':
			if (nvs_parse_u64(optarg, 10, 10000000, &rounds))
				fail("--rounds: expected 10..10000000", 0);
			break;
		case 'u':
			uuid = optarg;
			break;
		case 'k':
			check_ms = atof(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: sched_latency [--clients 2,64] [--rounds N] [--uuid U] "
				"[--check-handoff-p99-ms MS]\n");
			return o == 'h' ? 0 : 2;
		}
	}
	uint64_t *lat = malloc(rounds * sizeof *lat);
	if (!lat)
		fail("out of memory", 0);
	int bad = 0;
	printf("%-8s %-10s %8s %10s %10s %10s\n", "clients", "test", "rounds", "p50_us", "p99_us",
	       "max_us");
	char *l = strdup(list), *save = NULL;
	for (char *t = strtok_r(l, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t n;
		if (nvs_parse_u64(t, 2, 1000, &n))
			fail("--clients: numbers 2..1000", 0);
		struct nvs_sconn *c = calloc(n, sizeof *c);
		open_clients(c, (unsigned)n, uuid);
		struct result r = bench_rtt(c, (unsigned)rounds, lat);
		printf("%-8u %-10s %8u %10.1f %10.1f %10.1f\n", (unsigned)n, "lock_rtt",
		       (unsigned)rounds, r.p50, r.p99, r.max);
		r = bench_handoff(c, (unsigned)n, (unsigned)rounds, lat);
		printf("%-8u %-10s %8u %10.1f %10.1f %10.1f\n", (unsigned)n, "handoff",
		       (unsigned)rounds, r.p50, r.p99, r.max);
		if (check_ms > 0 && r.p99 > check_ms * 1000) {
			printf("# handoff p99 %.1f us exceeds %.1f ms\n", r.p99, check_ms);
			bad = 1;
		}
		for (unsigned i = 0; i < n; i++)
			nvs_sconn_close(&c[i]);
		free(c);
		fflush(stdout);
	}
	free(l);
	free(lat);
	return bad;
}
