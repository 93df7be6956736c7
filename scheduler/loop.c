/*
 * The event loop: see loop.h. Handlers are kept in a table indexed by fd
 * (grown on demand), so a ready descriptor costs one index, and epoll's
 * data carries the fd alone.
 */
#include "loop.h"

#include "log.h"
#include "state.h" /* nvs_now_ns */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define MAX_TIMERS 16
#define MAX_AFTER 4
#define MAX_WAIT_MS 60000

struct watch {
	nvs_loop_fn fn;
	void *ctx;
	int urgent; /* served first in a turn (nvs_loop_urgent) */
};

static int epfd = -1;
static struct watch *watches; /* by fd */
static size_t nwatches;
/* Kept sorted by phase (stable: registration order within a phase). */
static struct {
	enum nvs_loop_phase phase;
	void (*tick)(uint64_t now);
	uint64_t (*next)(uint64_t now);
} timers[MAX_TIMERS];
static unsigned ntimers;
static void (*after[MAX_AFTER])(void);
static unsigned nafter;
static int stop_rc = -1;

int nvs_loop_init(void)
{
	epfd = epoll_create1(EPOLL_CLOEXEC);
	return epfd < 0 ? -1 : 0;
}

void nvs_loop_close(void)
{
	if (epfd >= 0)
		close(epfd);
	epfd = -1;
	free(watches);
	watches = NULL;
	nwatches = 0;
	ntimers = nafter = 0;
	stop_rc = -1;
}

static int ctl(int op, int fd, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.fd = fd};
	return epoll_ctl(epfd, op, fd, &ev);
}

int nvs_loop_add(int fd, uint32_t events, nvs_loop_fn fn, void *ctx)
{
	if (fd < 0 || !fn) {
		errno = EINVAL;
		return -1;
	}
	if ((size_t)fd >= nwatches) {
		size_t n = nwatches ? nwatches : 64;
		while (n <= (size_t)fd)
			n *= 2;
		struct watch *w = realloc(watches, n * sizeof *w);
		if (!w)
			return -1;
		memset(w + nwatches, 0, (n - nwatches) * sizeof *w);
		watches = w;
		nwatches = n;
	}
	if (ctl(EPOLL_CTL_ADD, fd, events) < 0)
		return -1;
	watches[fd].fn = fn;
	watches[fd].ctx = ctx;
	watches[fd].urgent = 0;
	return 0;
}

void nvs_loop_urgent(int fd)
{
	if (fd >= 0 && (size_t)fd < nwatches && watches[fd].fn)
		watches[fd].urgent = 1;
}

int nvs_loop_events(int fd, uint32_t events)
{
	return ctl(EPOLL_CTL_MOD, fd, events);
}

void nvs_loop_remove(int fd)
{
	if (fd < 0 || epfd < 0)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	if ((size_t)fd < nwatches) {
		watches[fd].fn = NULL;
		watches[fd].urgent = 0;
	}
}

int nvs_loop_timer(enum nvs_loop_phase phase, void (*tick)(uint64_t now),
		   uint64_t (*next)(uint64_t now))
{
	if (ntimers >= MAX_TIMERS) {
		NVS_ERROR("event loop: more than %d timers", MAX_TIMERS);
		return -1;
	}
	unsigned i = ntimers;
	for (; i > 0 && timers[i - 1].phase > phase; i--)
		timers[i] = timers[i - 1];
	timers[i].phase = phase;
	timers[i].tick = tick;
	timers[i].next = next;
	ntimers++;
	return 0;
}

int nvs_loop_after_events(void (*fn)(void))
{
	if (nafter >= MAX_AFTER)
		return -1;
	after[nafter++] = fn;
	return 0;
}

void nvs_loop_stop(int rc)
{
	stop_rc = rc;
}

/* epoll_wait's timeout for the earliest deadline: rounded up (waking early
 * would only turn again), at most MAX_WAIT_MS, -1 for none. */
static int timeout_ms(uint64_t now)
{
	uint64_t deadline = 0;
	for (unsigned i = 0; i < ntimers; i++) {
		uint64_t d = timers[i].next ? timers[i].next(now) : 0;
		if (d && (!deadline || d < deadline))
			deadline = d;
	}
	if (!deadline)
		return -1;
	uint64_t left = deadline > now ? deadline - now : 0;
	uint64_t t = (left + 999999) / 1000000;
	return t > MAX_WAIT_MS ? MAX_WAIT_MS : (int)t;
}

int nvs_loop_run(void)
{
	struct epoll_event evs[64];
	while (stop_rc < 0) {
		uint64_t now = nvs_now_ns();
		for (unsigned i = 0; i < ntimers; i++)
			if (timers[i].tick)
				timers[i].tick(now);
		int n = epoll_wait(epfd, evs, 64, timeout_ms(now));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			NVS_ERROR("epoll_wait: %s", strerror(errno));
			return 1;
		}
		/* Two passes: the urgent descriptors' handlers, then the
		 * rest's (a listener with a backlog of churn, new peers
		 * mid-handshake). A handler earlier in this batch may have
		 * removed a descriptor (fn NULL) and, in the second pass, an
		 * accept may have reused its number: a reused descriptor is
		 * not urgent, so each entry runs in one pass at most. */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < n && stop_rc < 0; i++) {
				int fd = evs[i].data.fd;
				if (fd < 0 || (size_t)fd >= nwatches || !watches[fd].fn)
					continue;
				if (watches[fd].urgent != (pass == 0))
					continue;
				watches[fd].fn(watches[fd].ctx, evs[i].events);
				evs[i].data.fd = -1;
			}
		for (unsigned i = 0; i < nafter; i++)
			after[i]();
	}
	return stop_rc;
}
