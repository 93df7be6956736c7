/*
 * The event loop: see loop.h. Handlers are kept in a table indexed by fd
 * (grown on demand), so a ready descriptor costs one index, and epoll's
 * data carries the fd alone.
 */
#include "clock.h"
#include "loop.h"

#include "log.h"
#include "core/state.h" /* nvs_now_ns */

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
	int urgent;	/* served first in a turn (nvs_loop_urgent) */
	int again;	/* asked to run again (nvs_loop_again) */
	int queued;	/* in the again list; kept across remove and add */
	int again_next; /* the list's next fd, -1: last */
	/* Skipped when the bulk budget ran out: runs before the bulk that
	 * was not (dispatch). */
	int skipped;
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
/* Descriptors to run again (nvs_loop_again): a FIFO chained through the
 * watch table, so asking costs no allocation (and cannot fail). */
static int again_head = -1, again_tail = -1;
#define AGAIN_PER_TURN 64
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
	again_head = again_tail = -1;
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
	watches[fd].again = 0;
	watches[fd].skipped = 0;
	return 0;
}

void nvs_loop_again(int fd)
{
	if (fd < 0 || (size_t)fd >= nwatches || !watches[fd].fn)
		return;
	watches[fd].again = 1;
	if (watches[fd].queued) /* still in the list (an earlier request) */
		return;
	watches[fd].queued = 1;
	watches[fd].again_next = -1;
	if (again_tail >= 0)
		watches[again_tail].again_next = fd;
	else
		again_head = fd;
	again_tail = fd;
}

/* The first fd of the again list that still wants to run, taken off it;
 * -1 when none. An entry whose descriptor was removed, or ran because
 * epoll reported it, has again cleared and is dropped. */
static int again_pop(void)
{
	while (again_head >= 0) {
		int fd = again_head;
		again_head = watches[fd].again_next;
		if (again_head < 0)
			again_tail = -1;
		watches[fd].queued = 0;
		if (watches[fd].again) {
			watches[fd].again = 0;
			return fd;
		}
	}
	return -1;
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
		watches[fd].skipped = 0;
		/* An again entry is skipped once fn is NULL; a descriptor
		 * added later under the same number starts without one. */
		watches[fd].again = 0;
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

/* One ready descriptor of this turn. */
struct ready {
	int fd;
	uint32_t events;
};

/* Runs the handlers of r[0..n), urgent ones first, the others until the
 * turn's bulk budget is spent (at least one); the skipped ones that had
 * asked to run again go back on the list (epoll reports the others
 * again). The bulk that an earlier turn skipped runs before the rest:
 * epoll reports ready descriptors in the same order turn after turn, so a
 * busy one ahead of them (a listener under churn) would otherwise spend
 * every turn's budget and starve the ones behind it (a newcomer's HELLO).
 * A handler may remove a descriptor (fn NULL) and, in a later pass, an
 * accept may reuse its number: a reused descriptor is neither urgent nor
 * skipped, so each entry runs in one pass at most. */
static void dispatch(struct ready *r, int n, const uint8_t *from_again)
{
	uint64_t bulk_start = 0;
	for (int pass = 0; pass < 3; pass++)
		for (int i = 0; i < n && stop_rc < 0; i++) {
			int fd = r[i].fd;
			if (fd < 0 || (size_t)fd >= nwatches || !watches[fd].fn)
				continue;
			struct watch *w = &watches[fd];
			if (pass == 0 ? !w->urgent : w->urgent || (pass == 1) != (w->skipped != 0))
				continue;
			if (pass > 0) {
				uint64_t now = nvs_now_ns();
				if (!bulk_start) {
					bulk_start = now;
				} else if (now - bulk_start >= NVS_LOOP_BULK_NS) {
					w->skipped = 1;
					if (from_again[i])
						nvs_loop_again(fd);
					continue;
				}
			}
			w->skipped = 0;
			w->fn(w->ctx, r[i].events);
			r[i].fd = -1;
		}
}

int nvs_loop_run(void)
{
	struct epoll_event evs[64];
	/* This turn's work: what epoll reported, then up to AGAIN_PER_TURN
	 * of the again list (the rest waits for a later turn). */
	struct ready r[64 + AGAIN_PER_TURN];
	uint8_t from_again[64 + AGAIN_PER_TURN];
	while (stop_rc < 0) {
		uint64_t now = nvs_now_ns();
		for (unsigned i = 0; i < ntimers; i++)
			if (timers[i].tick)
				timers[i].tick(now);
		int n = epoll_wait(epfd, evs, 64, again_head >= 0 ? 0 : timeout_ms(now));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			NVS_ERROR("epoll_wait: %s", strerror(errno));
			return 1;
		}
		int m = 0;
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			uint8_t again = fd >= 0 && (size_t)fd < nwatches && watches[fd].again;
			if (again) { /* reported and asked for: runs once */
				watches[fd].again = 0;
				evs[i].events |= EPOLLIN;
			}
			r[m].fd = fd;
			r[m].events = evs[i].events;
			from_again[m++] = again;
		}
		for (int k = 0, fd; k < AGAIN_PER_TURN && (fd = again_pop()) >= 0; k++) {
			r[m].fd = fd;
			r[m].events = EPOLLIN;
			from_again[m++] = 1;
		}
		dispatch(r, m, from_again);
		for (unsigned i = 0; i < nafter; i++)
			after[i]();
	}
	return stop_rc;
}
