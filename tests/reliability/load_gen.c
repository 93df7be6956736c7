/*
 * load_gen: many protocol clients in one process, for the scheduler's load
 * and fault tests. Each connection is a client (HELLO, ATTACH_GPU of one of
 * --gpus simulated GPUs) driven by one epoll loop; the wire format is
 * common/protocol.c's.
 *
 * Cycle mode (default): every client asks for its GPU's lock, releases it
 * the moment it gets it (hold ~0) and asks again, until --cycles grants in
 * total. The scheduler must be in mode on. Prints one line:
 *
 *   LOAD clients=256 gpus=4 cycles=100000 seconds=S cycles_per_s=R
 *        handoff_p50_us=A handoff_p99_us=B handoff_max_us=C jain=J
 *        grants_min=M grants_max=X violations=0
 *
 * handoff = one client's LOCK_RELEASED sent -> the next client's LOCK_OK
 * received, on the same GPU (one process: one clock). jain = Jain's
 * fairness index of the grants per client, (sum x)^2 / (n sum x^2).
 * violations = LOCK_OK while another client of ours held that GPU.
 *
 * Tenants (--tenants K, root only): every GPU has clients of every tenant,
 * in unequal numbers (tenant_of). Tenant 0 is
 * this process; tenant t > 0 is a child that switches to uid 61000 + t,
 * connects its clients' sockets and hands them over (SCM_RIGHTS: the
 * scheduler pins the connecting process's uid, so the uid is the tenant),
 * then waits until this process ends. Adds tenants=K, jain_tenants=J
 * (Jain's index of the tenants' grants on one GPU, the lowest over GPUs)
 * and jain_in_tenant=I (of the grants of one tenant's clients on one GPU,
 * the lowest) to the LOAD line; jain is then over unequal tenants and
 * only a figure.
 * Exit 0 when all cycles ran, 1 on a stall (no grant for --stall-ms) or a
 * connection lost, 2 usage.
 *
 * Hold mode (--hold-ms T): opens --clients connections, each HELLO, keeps
 * them T ms and prints "HOLD clients=N welcomed=W closed=C failed=F"
 * (--attach: each also attaches one of --gpus GPUs, for a large status)
 * (W: got WELCOME; C: closed by the scheduler; F: connect failed). For the
 * out-of-file-descriptors test.
 *
 * Environment: NVS_LOAD_CLIENTS, NVS_LOAD_GPUS, NVS_LOAD_CYCLES give the
 * defaults of --clients, --gpus, --cycles.
 */
#include "protocol.h"
#include "sockpath.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct lc {
	int fd;
	int idx, gpu;
	int welcomed, mode_known, serialized, holding, requested, closed;
	uint64_t grants;
	uint8_t in[NVS_HEADER_SIZE + 4096];
	size_t in_len;
};

static struct lc *cl;
static int nclients = 256, ngpus = 4;
static uint64_t target = 100000, total;
static int *holder;	      /* per GPU: our client holding it, -1 none */
static uint64_t *released_at; /* per GPU: when its last holder released */
static uint32_t *lat_ns;
static uint64_t nlat, violations;
static uint32_t seqno;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int env_int(const char *name, long dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : (int)dflt;
}

/* Sends one message whole (waits for room: the scheduler reads fast). */
static int send_msg(struct lc *c, struct nvs_msg *m)
{
	uint8_t buf[512];
	m->seq = ++seqno;
	size_t n = nvs_msg_encode(m, buf, sizeof buf), off = 0;
	if (!n)
		return -1;
	while (off < n) {
		ssize_t w = send(c->fd, buf + off, n - off, MSG_NOSIGNAL);
		if (w > 0) {
			off += (size_t)w;
		} else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = {.fd = c->fd, .events = POLLOUT};
			poll(&p, 1, 1000);
		} else {
			return -1;
		}
	}
	return 0;
}

static int send_gpu(struct lc *c, uint16_t type)
{
	struct nvs_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	return send_msg(c, &m); /* local_gpu 0, value/flags 0 */
}

static int open_client(struct lc *c, int attach)
{
	if (c->fd <= 0)
		c->fd = nvs_sock_connect();
	if (c->fd < 0)
		return -1;
	struct nvs_msg m;
	char buf[32];
	snprintf(buf, sizeof buf, "load%d", c->idx);
	nvs_msg_hello(&m, buf, 100, NVS_NO_LIMIT);
	if (send_msg(c, &m))
		return -1;
	if (attach) {
		snprintf(buf, sizeof buf, "GPU-load-%04d", c->gpu);
		nvs_msg_attach(&m, 0, buf, 16ull << 30, 1ull << 20);
		if (send_msg(c, &m))
			return -1;
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

static int stopping;

/* Got the lock: count, release at once, ask again (cycle mode). */
static int on_lock_ok(struct lc *c, uint64_t now)
{
	if (c->holding)
		return 0; /* a repeated LOCK_OK */
	if (holder[c->gpu] >= 0 && holder[c->gpu] != c->idx)
		violations++;
	c->holding = 1;
	c->requested = 0;
	c->grants++;
	total++;
	if (released_at[c->gpu] && nlat < target)
		lat_ns[nlat++] =
		    (uint32_t)(now - released_at[c->gpu] > UINT32_MAX ? UINT32_MAX
								      : now - released_at[c->gpu]);
	holder[c->gpu] = c->idx;
	if (total >= target)
		stopping = 1;
	c->holding = 0;
	holder[c->gpu] = -1;
	if (send_gpu(c, NVS_MSG_LOCK_RELEASED))
		return -1;
	released_at[c->gpu] = now_ns();
	if (!stopping) {
		c->requested = 1;
		return send_gpu(c, NVS_MSG_REQ_LOCK);
	}
	return 0;
}

static int handle(struct lc *c, const struct nvs_msg *m, uint64_t now)
{
	switch (m->type) {
	case NVS_MSG_WELCOME:
		c->welcomed = 1;
		return 0;
	case NVS_MSG_GPU_MODE:
		c->mode_known = 1;
		c->serialized = m->u.gpu.value != 0;
		return 0;
	case NVS_MSG_LOCK_OK:
		return on_lock_ok(c, now);
	case NVS_MSG_DROP_LOCK:
		/* Never expected with hold 0; answer like a client would. */
		if (c->holding && m->u.drop.grace_ms) {
			c->holding = 0;
			return send_gpu(c, NVS_MSG_LOCK_RELEASED);
		}
		return 0;
	default:
		return 0;
	}
}

/* Reads and handles what arrived. -1: connection closed or broken. */
static int on_readable(struct lc *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->in_len += (size_t)n;
		uint64_t now = now_ns();
		size_t off = 0;
		for (;;) {
			struct nvs_msg m;
			size_t used;
			enum nvs_decode_result r =
			    nvs_msg_decode(c->in + off, c->in_len - off, &m, &used);
			if (r == NVS_DECODE_NEED_MORE)
				break;
			if (r == NVS_DECODE_BAD)
				return -1;
			off += used;
			if (handle(c, &m, now))
				return -1;
		}
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
}

static int cmp32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int hold_attach; /* --attach: hold-mode clients attach a GPU too */

static int hold_mode(int hold_ms)
{
	int ep = epoll_create1(0), welcomed = 0, closed = 0, failed = 0;
	for (int i = 0; i < nclients; i++) {
		cl[i].idx = i;
		cl[i].gpu = i % ngpus;
		if (open_client(&cl[i], hold_attach)) {
			failed++;
			if (cl[i].fd >= 0)
				close(cl[i].fd);
			cl[i].fd = -1;
			cl[i].closed = 1;
			continue;
		}
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cl[i]};
		epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev);
	}
	uint64_t end = now_ns() + (uint64_t)hold_ms * 1000000ull;
	for (uint64_t now; (now = now_ns()) < end;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, (int)((end - now) / 1000000 + 1));
		for (int i = 0; i < n; i++) {
			struct lc *c = evs[i].data.ptr;
			if (on_readable(c) < 0 && !c->closed) {
				c->closed = 1;
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
			}
		}
	}
	for (int i = 0; i < nclients; i++) {
		welcomed += cl[i].welcomed;
		closed += cl[i].closed && cl[i].fd >= 0;
	}
	printf("HOLD clients=%d welcomed=%d closed=%d failed=%d\n", nclients, welcomed, closed,
	       failed);
	return 0;
}

/* Tenant t's child: connect n sockets as uid 61000 + t, pass them back
 * over sp, stay until the parent closes sp. Never returns. */
static void tenant_child(int sp, int t, int n)
{
	if (setgroups(0, NULL) || setresgid(61000 + t, 61000 + t, 61000 + t) ||
	    setresuid(61000 + t, 61000 + t, 61000 + t)) {
		fprintf(stderr, "load_gen: tenant %d: cannot switch uid: %s\n", t, strerror(errno));
		_exit(1);
	}
	for (int i = 0; i < n; i++) {
		int fd = nvs_sock_connect();
		if (fd < 0)
			_exit(1);
		char b = 0;
		struct iovec io = {.iov_base = &b, .iov_len = 1};
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} u;
		memset(&u, 0, sizeof u);
		struct msghdr mh = {.msg_iov = &io,
				    .msg_iovlen = 1,
				    .msg_control = u.buf,
				    .msg_controllen = sizeof u.buf};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof fd);
		if (sendmsg(sp, &mh, 0) != 1)
			_exit(1);
		close(fd);
	}
	char b;
	while (read(sp, &b, 1) > 0)
		;
	_exit(0);
}

static int recv_fd(int sp)
{
	char b;
	struct iovec io = {.iov_base = &b, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {
	    .msg_iov = &io, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	if (recvmsg(sp, &mh, 0) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	return fd;
}

static int ntenants = 1;

/*
 * Tenants of unequal size: on every GPU tenant t has about (t + 1) shares
 * of the clients (with 8 tenants and 64 clients a GPU: 1 to 14 clients),
 * so a scheduler that took turns per connection would give the largest
 * tenant 14 times the smallest one's grants. Where a GPU has too few
 * clients for that (fewer than 1 + 2 + ... + K), the tenants take turns
 * client by client: equal sizes.
 */
static int tenant_of(int i)
{
	int per_gpu = (nclients + ngpus - 1) / ngpus, b = i / ngpus;
	int weights = ntenants * (ntenants + 1) / 2;
	if (per_gpu < weights)
		return b % ntenants;
	int cum = 0;
	for (int t = 0; t < ntenants; t++) {
		cum += t + 1;
		if (b < per_gpu * cum / weights)
			return t;
	}
	return ntenants - 1;
}

/* Pre-connects the sockets of tenants 1.. through their children. */
static int tenant_sockets(void)
{
	for (int t = 1; t < ntenants; t++) {
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
			return -1;
		int n = 0;
		for (int i = 0; i < nclients; i++)
			n += tenant_of(i) == t;
		pid_t p = fork();
		if (p < 0)
			return -1;
		if (p == 0) {
			close(sp[0]);
			tenant_child(sp[1], t, n);
		}
		close(sp[1]);
		for (int i = 0; i < nclients; i++)
			if (tenant_of(i) == t && (cl[i].fd = recv_fd(sp[0])) < 0) {
				fprintf(stderr, "load_gen: tenant %d's child failed\n", t);
				return -1;
			}
		/* sp[0] stays open: the child lives until we exit. */
	}
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	nclients = env_int("NVS_LOAD_CLIENTS", 256);
	ngpus = env_int("NVS_LOAD_GPUS", 4);
	target = (uint64_t)env_int("NVS_LOAD_CYCLES", 100000);
	int stall_ms = 5000, hold_ms = -1;
	static const struct option opts[] = {
	    {"clients", required_argument, 0, 'n'}, {"gpus", required_argument, 0, 'g'},
	    {"cycles", required_argument, 0, 'c'},  {"stall-ms", required_argument, 0, 's'},
	    {"hold-ms", required_argument, 0, 'H'}, {"tenants", required_argument, 0, 'T'},
	    {"attach", no_argument, 0, 'a'},	    {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "n:g:c:s:H:T:a", opts, NULL)) != -1) {
		switch (o) {
		case 'n':
			nclients = atoi(optarg);
			break;
		case 'g':
			ngpus = atoi(optarg);
			break;
		case 'c':
			target = strtoull(optarg, NULL, 10);
			break;
		case 's':
			stall_ms = atoi(optarg);
			break;
		case 'H':
			hold_ms = atoi(optarg);
			break;
		case 'T':
			ntenants = atoi(optarg);
			break;
		case 'a':
			hold_attach = 1;
			break;
		default:
			fprintf(stderr,
				"usage: load_gen [--clients N] [--gpus G] [--cycles C] "
				"[--stall-ms MS] [--tenants K] | --hold-ms MS [--attach]\n");
			return 2;
		}
	}
	if (nclients < 1 || ngpus < 1 || target < 1 || ntenants < 1 || ntenants > 1000) {
		fprintf(stderr, "load_gen: clients, gpus and cycles must be > 0\n");
		return 2;
	}
	cl = calloc((size_t)nclients, sizeof *cl);
	holder = malloc(sizeof *holder * (size_t)ngpus);
	released_at = calloc((size_t)ngpus, sizeof *released_at);
	lat_ns = malloc(sizeof *lat_ns * target);
	if (!cl || !holder || !released_at || !lat_ns)
		return 1;
	for (int g = 0; g < ngpus; g++)
		holder[g] = -1;
	if (hold_ms >= 0)
		return hold_mode(hold_ms);

	for (int i = 0; i < nclients; i++) {
		cl[i].idx = i;
		cl[i].gpu = i % ngpus;
	}
	if (ntenants > 1 && tenant_sockets())
		return 1;
	int ep = epoll_create1(0);
	for (int i = 0; i < nclients; i++) {
		if (open_client(&cl[i], 1)) {
			fprintf(stderr, "load_gen: client %d cannot connect: %s\n", i,
				strerror(errno));
			return 1;
		}
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cl[i]};
		epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev);
	}
	/* Everyone registered and told the mode: then all ask at once. */
	int ready = 0;
	uint64_t t_reg = now_ns();
	while (ready < nclients) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, 1000);
		for (int i = 0; i < n; i++)
			if (on_readable(evs[i].data.ptr) < 0) {
				fprintf(stderr, "load_gen: connection lost while registering\n");
				return 1;
			}
		ready = 0;
		for (int i = 0; i < nclients; i++)
			ready += cl[i].mode_known;
		if (now_ns() - t_reg > 10000000000ull) {
			fprintf(stderr, "load_gen: only %d of %d clients registered\n", ready,
				nclients);
			return 1;
		}
	}
	for (int i = 0; i < nclients; i++)
		if (!cl[i].serialized) {
			fprintf(
			    stderr,
			    "load_gen: GPU not serialized (run the scheduler with --mode on)\n");
			return 1;
		}
	uint64_t t0 = now_ns();
	for (int i = 0; i < nclients; i++) {
		cl[i].requested = 1;
		if (send_gpu(&cl[i], NVS_MSG_REQ_LOCK))
			return 1;
	}
	uint64_t last_total = 0, last_progress = now_ns();
	while (!stopping) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, 100);
		for (int i = 0; i < n; i++)
			if (on_readable(evs[i].data.ptr) < 0) {
				struct lc *c = evs[i].data.ptr;
				fprintf(stderr, "load_gen: client %d: connection lost\n", c->idx);
				return 1;
			}
		uint64_t now = now_ns();
		if (total != last_total) {
			last_total = total;
			last_progress = now;
		} else if (now - last_progress > (uint64_t)stall_ms * 1000000ull) {
			printf("STALL after %llu cycles: no grant for %d ms\n",
			       (unsigned long long)total, stall_ms);
			return 1;
		}
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	qsort(lat_ns, nlat, sizeof *lat_ns, cmp32);
	double sum = 0, sum2 = 0;
	uint64_t gmin = UINT64_MAX, gmax = 0;
	for (int i = 0; i < nclients; i++) {
		double x = (double)cl[i].grants;
		sum += x;
		sum2 += x * x;
		if (cl[i].grants < gmin)
			gmin = cl[i].grants;
		if (cl[i].grants > gmax)
			gmax = cl[i].grants;
	}
	double jain = sum2 > 0 ? sum * sum / ((double)nclients * sum2) : 0;
	/* Per tenant: its grants on each GPU (tenants take turns per GPU),
	 * Jain's index over tenants of those; and inside each tenant, over
	 * its clients on one GPU (FCFS inside a tenant), the lowest. */
	double jain_t = 1, jain_in = 1;
	for (int g = 0; g < ngpus; g++) {
		double tsum = 0, tsum2 = 0;
		int nt = 0;
		for (int t = 0; t < ntenants; t++) {
			double s1 = 0, s2 = 0;
			int n = 0;
			for (int i = g; i < nclients; i += ngpus)
				if (tenant_of(i) == t) {
					s1 += (double)cl[i].grants;
					s2 += (double)cl[i].grants * (double)cl[i].grants;
					n++;
				}
			if (!n)
				continue;
			nt++;
			tsum += s1;
			tsum2 += s1 * s1;
			double ji = s2 > 0 ? s1 * s1 / ((double)n * s2) : 0;
			if (ji < jain_in)
				jain_in = ji;
		}
		double jt = tsum2 > 0 ? tsum * tsum / ((double)nt * tsum2) : 0;
		if (jt < jain_t)
			jain_t = jt;
	}
	printf("LOAD clients=%d gpus=%d cycles=%llu seconds=%.2f cycles_per_s=%.0f "
	       "handoff_p50_us=%.1f handoff_p99_us=%.1f handoff_max_us=%.1f jain=%.5f "
	       "grants_min=%llu grants_max=%llu violations=%llu tenants=%d jain_tenants=%.5f "
	       "jain_in_tenant=%.5f\n",
	       nclients, ngpus, (unsigned long long)total, secs, (double)total / secs,
	       nlat ? lat_ns[nlat / 2] / 1e3 : 0.0, nlat ? lat_ns[nlat * 99 / 100] / 1e3 : 0.0,
	       nlat ? lat_ns[nlat - 1] / 1e3 : 0.0, jain, (unsigned long long)gmin,
	       (unsigned long long)gmax, (unsigned long long)violations, ntenants, jain_t, jain_in);
	for (int i = 0; i < nclients; i++)
		close(cl[i].fd);
	free(cl);
	free(holder);
	free(released_at);
	free(lat_ns);
	return violations ? 1 : 0;
}
