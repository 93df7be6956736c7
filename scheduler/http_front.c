/*
 * The exporter's listening socket: accept, wait for the request head by
 * peeking, answer /healthz here, hand the rest to libmicrohttpd
 * (http_front.h). One thread, one epoll set: the listener, the stop
 * eventfd, and up to NVS_HTTP_PENDING connections whose head has not
 * come yet (edge-triggered: each arrival of bytes wakes it once).
 */
#include "clock.h"
#include "http_front.h"

#include "health.h"
#include "log.h"
#include "core/state.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ACCEPT_BATCH 16
#define EMFILE_PAUSE_MS 100

struct pend {
	int fd; /* -1: free slot */
	uint64_t t0;
	struct sockaddr_storage a;
	socklen_t alen;
};

static struct pend tab[NVS_HTTP_PENDING];
static unsigned npend;
static int lfd = -1, efd = -1, ep = -1;
static int listening; /* the listener is in the epoll set */
static uint64_t paused_until;
static pthread_t thr;
static int started;
static struct MHD_Daemon *mhd;
static _Atomic uint64_t st_timeouts, st_evicted, st_large, st_healthz, st_handed;

void nvs_http_front_stats(struct nvs_http_front_stats *o)
{
	o->head_timeouts = atomic_load(&st_timeouts);
	o->evicted = atomic_load(&st_evicted);
	o->too_large = atomic_load(&st_large);
	o->healthz = atomic_load(&st_healthz);
	o->handed = atomic_load(&st_handed);
}

/* ---- the table of connections waiting for their head ---- */

static void drop(struct pend *p)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, p->fd, NULL);
	close(p->fd);
	p->fd = -1;
	npend--;
}

static struct pend *by_fd(int fd)
{
	for (unsigned i = 0; i < NVS_HTTP_PENDING; i++)
		if (tab[i].fd == fd)
			return &tab[i];
	return NULL;
}

static int same_peer(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			       &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr));
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return 1;
}

/* The oldest waiting connection, of peer a only when a is given. */
static struct pend *oldest(const struct sockaddr_storage *a, unsigned *count)
{
	struct pend *o = NULL;
	unsigned n = 0;
	for (unsigned i = 0; i < NVS_HTTP_PENDING; i++) {
		struct pend *p = &tab[i];
		if (p->fd < 0 || (a && !same_peer(&p->a, a)))
			continue;
		n++;
		if (!o || p->t0 < o->t0)
			o = p;
	}
	if (count)
		*count = n;
	return o;
}

/* ---- /healthz ---- */

unsigned nvs_http_healthz(char *body, size_t cap)
{
	uint64_t age = nvs_health_age_ms(nvs_now_ns());
	if (age <= nvs_health_stall_ms) {
		snprintf(body, cap, "ok\n");
		return 200;
	}
	if (age == UINT64_MAX)
		snprintf(body, cap, "event loop not started\n");
	else
		snprintf(body, cap, "event loop stalled: no turn for %llu ms (limit %u ms)\n",
			 (unsigned long long)age, nvs_health_stall_ms);
	return 503;
}

static void answer_healthz(int fd, int head_only, size_t headlen)
{
	char body[160], resp[512];
	unsigned code = nvs_http_healthz(body, sizeof body);
	int n = snprintf(
	    resp, sizeof resp,
	    "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
	    "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
	    "%s",
	    code, code == 200 ? "OK" : "Service Unavailable", strlen(body), head_only ? "" : body);
	/* Read the head first: closing with unread bytes would reset the
	 * connection before the answer is read. */
	char sink[NVS_HTTP_HEAD_MAX];
	while (headlen) {
		ssize_t r = recv(fd, sink, headlen < sizeof sink ? headlen : sizeof sink, 0);
		if (r <= 0)
			break;
		headlen -= (size_t)r;
	}
	/* A few hundred bytes into an empty socket buffer: never blocks. */
	if (n > 0 && send(fd, resp, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		NVS_DEBUG("metrics: /healthz answer not sent: %s", strerror(errno));
	shutdown(fd, SHUT_WR);
	atomic_fetch_add(&st_healthz, 1);
}

/* "METHOD TARGET ..." of a complete head: 1 when it asks GET or HEAD of
 * /healthz (query ignored); *head_only for HEAD. */
static int is_healthz(const char *h, size_t len, int *head_only)
{
	const char *sp = memchr(h, ' ', len);
	if (!sp)
		return 0;
	size_t ml = (size_t)(sp - h);
	int get = ml == 3 && !memcmp(h, "GET", 3), head = ml == 4 && !memcmp(h, "HEAD", 4);
	if (!get && !head)
		return 0;
	const char *t = sp + 1, *end = h + len;
	static const char path[] = "/healthz";
	size_t pl = sizeof path - 1;
	if ((size_t)(end - t) <= pl || memcmp(t, path, pl))
		return 0;
	*head_only = head;
	return t[pl] == ' ' || t[pl] == '?';
}

/* Bytes arrived (or the peer went away) on a waiting connection. */
static void on_readable(struct pend *p)
{
	char buf[NVS_HTTP_HEAD_MAX];
	ssize_t r = recv(p->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (r <= 0) {
		drop(p);
		return;
	}
	const char *end = memmem(buf, (size_t)r, "\r\n\r\n", 4);
	if (!end) {
		if ((size_t)r == sizeof buf) {
			atomic_fetch_add(&st_large, 1);
			drop(p);
		}
		return;
	}
	size_t headlen = (size_t)(end - buf) + 4;
	int head_only = 0;
	int fd = p->fd;
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	p->fd = -1;
	npend--;
	if (is_healthz(buf, headlen, &head_only)) {
		answer_healthz(fd, head_only, headlen);
		close(fd);
		return;
	}
	/* MHD reads the request itself (it was only peeked) and closes the
	 * socket whatever happens. */
	atomic_fetch_add(&st_handed, 1);
	if (MHD_add_connection(mhd, fd, (const struct sockaddr *)&p->a, p->alen) != MHD_YES)
		NVS_DEBUG("metrics: request not taken (%s)", strerror(errno));
}

/* ---- accept ---- */

static void set_listening(int on)
{
	if (on == listening)
		return;
	struct epoll_event e = {.events = on ? EPOLLIN : 0, .data.fd = lfd};
	epoll_ctl(ep, EPOLL_CTL_MOD, lfd, &e);
	listening = on;
}

static void accept_some(uint64_t now)
{
	for (int k = 0; k < ACCEPT_BATCH; k++) {
		struct sockaddr_storage a;
		socklen_t alen = sizeof a;
		int fd = accept4(lfd, (struct sockaddr *)&a, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Give a waiting connection's descriptor back,
				 * else rest a while (no busy loop). */
				struct pend *o = oldest(NULL, NULL);
				if (o) {
					atomic_fetch_add(&st_evicted, 1);
					drop(o);
				} else {
					set_listening(0);
					paused_until = now + EMFILE_PAUSE_MS * 1000000ull;
				}
			}
			return;
		}
		/* Room: the oldest of this address beyond its share, the
		 * oldest of all beyond the table. */
		unsigned mine = 0;
		struct pend *o = oldest(&a, &mine);
		if (mine >= NVS_HTTP_PENDING_PER_PEER ||
		    (npend >= NVS_HTTP_PENDING && (o = oldest(NULL, NULL)))) {
			atomic_fetch_add(&st_evicted, 1);
			drop(o);
		}
		struct pend *p = by_fd(-1);
		struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd};
		if (!p || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e)) {
			close(fd);
			continue;
		}
		p->fd = fd;
		p->t0 = now;
		p->a = a;
		p->alen = alen;
		npend++;
		on_readable(p); /* the head may be there already */
	}
}

/* Closes the connections whose head did not come in time; returns the
 * next deadline (0: none). */
static uint64_t expire(uint64_t now)
{
	uint64_t lim = NVS_HTTP_HEAD_MS * 1000000ull, next = 0;
	for (unsigned i = 0; i < NVS_HTTP_PENDING; i++) {
		struct pend *p = &tab[i];
		if (p->fd < 0)
			continue;
		if (now - p->t0 >= lim) {
			atomic_fetch_add(&st_timeouts, 1);
			drop(p);
		} else if (!next || p->t0 + lim < next) {
			next = p->t0 + lim;
		}
	}
	if (!listening && now >= paused_until)
		set_listening(1);
	if (!listening && (!next || paused_until < next))
		next = paused_until;
	return next;
}

static void *run(void *arg)
{
	(void)arg;
	struct epoll_event ev[64];
	uint64_t next = 0;
	for (;;) {
		uint64_t now = nvs_now_ns();
		int timeout = -1;
		if (next)
			timeout = next > now ? (int)((next - now) / 1000000ull + 1) : 0;
		int n = epoll_wait(ep, ev, 64, timeout);
		if (n < 0 && errno != EINTR)
			break;
		now = nvs_now_ns();
		int acc = 0;
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			if (fd == efd)
				return NULL;
			if (fd == lfd) {
				acc = 1;
				continue;
			}
			struct pend *p = by_fd(fd);
			if (p)
				on_readable(p);
		}
		/* Waiting heads first, then new connections. */
		if (acc)
			accept_some(now);
		next = expire(now);
	}
	return NULL;
}

int nvs_http_front_start(const struct sockaddr *sa, socklen_t len, struct MHD_Daemon *d,
			 unsigned *port)
{
	for (unsigned i = 0; i < NVS_HTTP_PENDING; i++)
		tab[i].fd = -1;
	npend = 0;
	mhd = d;
	lfd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -1;
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_storage b;
	socklen_t blen = sizeof b;
	if (bind(lfd, sa, len) || listen(lfd, 1024) ||
	    getsockname(lfd, (struct sockaddr *)&b, &blen))
		goto fail;
	*port = ntohs(b.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&b)->sin6_port
					      : ((struct sockaddr_in *)&b)->sin_port);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (efd < 0 || ep < 0)
		goto fail;
	struct epoll_event e = {.events = EPOLLIN, .data.fd = lfd};
	struct epoll_event s = {.events = EPOLLIN, .data.fd = efd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e) || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &s))
		goto fail;
	listening = 1;
	/* No signal for this thread: the loop reads them from a signalfd. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = pthread_create(&thr, NULL, run, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		errno = r;
		goto fail;
	}
	started = 1;
	return 0;
fail:;
	int err = errno;
	if (ep >= 0)
		close(ep);
	if (efd >= 0)
		close(efd);
	close(lfd);
	ep = efd = lfd = -1;
	errno = err;
	return -1;
}

void nvs_http_front_stop(void)
{
	if (!started)
		return;
	uint64_t one = 1;
	if (write(efd, &one, sizeof one) < 0)
		NVS_WARN("metrics: cannot stop the HTTP front thread: %s", strerror(errno));
	pthread_join(thr, NULL);
	started = 0;
	for (unsigned i = 0; i < NVS_HTTP_PENDING; i++)
		if (tab[i].fd >= 0)
			drop(&tab[i]);
	close(ep);
	close(efd);
	close(lfd);
	ep = efd = lfd = -1;
}
