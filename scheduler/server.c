#include "server.h"

#include "conn.h"
#include "events.h"
#include "limits.h"
#include "log.h"
#include "loop.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int sig_fd = -1;

/* What the loop calls (loop.h), defined at the end. */
static void on_listener(void *l, uint32_t events);
static void on_conn(void *c, uint32_t events);
static void on_signal(void *ctx, uint32_t events);
static void server_tick(uint64_t now);
static uint64_t server_next_deadline(uint64_t now);

/*
 * The two sockets (docs/security.md). Both are set up, checked and
 * re-created by the same code; they differ only in these fields.
 */
struct listener {
	const char *what; /* "client socket" / "admin socket": for logs */
	enum conn_role role;
	mode_t dir_mode;  /* of the directory we create (the last component) */
	mode_t sock_mode; /* of the socket */
	const char *dir, *path;
	int fd, lock_fd;
	ino_t ino;
	int lost_logged;
};

/* The admin socket is bound first: once the client socket exists, both
 * do (tests and scripts wait for the client socket only). */
static struct listener listeners[] = {
    /* 0700 / 0600: only the scheduler's user (root on the node, or the
     * scheduler Pod) may connect at all. */
    {"admin socket", CONN_ROLE_ADMIN, 0700, 0600, S.cfg.admin_sock_dir, S.admin_sock_path, -1, -1,
     0, 0},
    /* 0755 / 0666: clients in containers run as any uid and must reach
     * the socket; what a peer may do there is decided per request. */
    {"client socket", CONN_ROLE_CLIENT, 0755, 0666, S.cfg.sock_dir, S.sock_path, -1, -1, 0, 0},
};
#define NLISTENERS (sizeof listeners / sizeof listeners[0])

/* An event about a listener's path: {"path":..., "reason":..., "socket":
 * "client"|"admin"} (reason left out when NULL). The path is the
 * operator's, escaped all the same. */
static void sock_event(const struct listener *l, const char *name, const char *reason)
{
	char p[2 * sizeof S.sock_path + 8];
	nvs_json_str(l->path, p, sizeof p);
	const char *who = l->role == CONN_ROLE_ADMIN ? "admin" : "client";
	if (reason)
		nvs_event(name, "\"path\":%s,\"reason\":\"%s\",\"socket\":\"%s\"", p, reason, who);
	else
		nvs_event(name, "\"path\":%s,\"socket\":\"%s\"", p, who);
}

static void sock_event_path(const char *p, unsigned mode)
{
	char j[2 * sizeof S.sock_path + 8];
	nvs_event("sock_dir_unreachable", "\"path\":%s,\"mode\":\"%04o\"",
		  nvs_json_str(p, j, sizeof j), mode);
}

/* The client socket is 0666 so that every user's applications reach it,
 * but only through directories they may search. One that they may not (a
 * directory prepared 0700, a parent 0750) leaves them "not reachable":
 * they run ungated, or fail with NVSHARE_REQUIRE_SCHEDULER=1. Not
 * changed here (a group-only directory may be the operator's choice), but
 * said loudly at every start. */
static void warn_unreachable(const char *dir)
{
	char p[sizeof S.cfg.sock_dir];
	snprintf(p, sizeof p, "%s", dir);
	size_t n = strlen(p);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];
		p[i] = '\0';
		struct stat st;
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)) {
			NVS_WARN(
			    "client socket directory %s: %s is mode %04o, not searchable by other "
			    "users: applications of any uid but %d%s cannot reach the scheduler "
			    "and run UNGATED (or fail, with NVSHARE_REQUIRE_SCHEDULER=1); make it "
			    "0755 (chmod o+x %s)",
			    dir, p, (unsigned)(st.st_mode & 07777), (int)st.st_uid,
			    (st.st_mode & S_IXGRP) ? " and its group" : "", p);
			sock_event_path(p, (unsigned)(st.st_mode & 07777));
			return;
		}
		p[i] = c;
	}
}

/* mkdir -p: parents 0755 (search permission for clients), the last
 * component l->dir_mode. An admin directory that already exists must be
 * ours and is narrowed to 0700: a directory someone else prepared could
 * hand them our admin socket. */
static int make_dirs(const struct listener *l)
{
	char p[sizeof S.cfg.sock_dir];
	snprintf(p, sizeof p, "%s", l->dir);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		mode_t mode = c ? 0755 : l->dir_mode;
		if (mkdir(p, mode) == 0) {
			chmod(p, mode); /* not narrowed by the umask */
		} else if (errno != EEXIST) {
			NVS_ERROR("cannot create %s: %s", p, strerror(errno));
			return -1;
		}
		*s = c;
		if (!c)
			break;
	}
	if (l->role != CONN_ROLE_ADMIN) {
		warn_unreachable(l->dir);
		return 0;
	}
	struct stat st;
	if (lstat(l->dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		NVS_ERROR("%s: the admin socket directory must be a directory owned by uid %d "
			  "(the scheduler's user); refusing to use it",
			  l->dir, (int)geteuid());
		return -1;
	}
	if ((st.st_mode & 07777) != l->dir_mode && chmod(l->dir, l->dir_mode) < 0) {
		NVS_ERROR("cannot make %s mode 0700: %s", l->dir, strerror(errno));
		return -1;
	}
	return 0;
}

static int someone_listens(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int r = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return r;
}

/* Takes the directory's lock file (flock, held for the life of the
 * process). Returns the fd, or -1 (logged when loud). */
static int take_lock_file(const struct listener *l, int loud)
{
	char lock_path[sizeof S.cfg.sock_dir + 32];
	snprintf(lock_path, sizeof lock_path, "%s/scheduler.lock", l->dir);
	int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (loud)
			NVS_ERROR("cannot open %s: %s", lock_path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (loud) {
			NVS_ERROR(
			    "another nvshare-scheduler is already running on %s (%s is locked)",
			    l->path, lock_path);
			sock_event(l, "socket_blocked", "locked");
		}
		close(fd);
		return -1;
	}
	return fd;
}

/* Creates, binds and listens on l->path (removing a stale socket that
 * nobody listens on). Returns the listening fd or -1 (logged when loud).
 *
 * The socket is bound under a temporary name in the same directory and
 * renamed into place once it listens: a client that finds the path can
 * always connect. Bound in place, the path would exist before listen(),
 * and a client started beside the scheduler would get ECONNREFUSED and
 * run unscheduled. Only the holder of the lock file gets here, so one
 * fixed temporary name is enough; it is shorter than both socket names,
 * so it fits wherever the real path fits. */
static int bind_socket(const struct listener *l, ino_t *ino, int loud)
{
	struct stat st;
	if (lstat(l->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			if (loud) {
				NVS_ERROR("%s exists and is not a socket: refusing to remove it",
					  l->path);
				sock_event(l, "socket_blocked", "not-a-socket");
			}
			return -1;
		}
		if (someone_listens(l->path)) {
			if (loud) {
				NVS_ERROR("another nvshare-scheduler is already listening on %s",
					  l->path);
				sock_event(l, "socket_blocked", "in-use");
			}
			return -1;
		}
		NVS_INFO("removing stale socket %s", l->path);
		sock_event(l, "stale_socket_removed", NULL);
		unlink(l->path);
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/.sock-new", l->dir);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path) /* cannot be: see above */
		return -1;
	unlink(sa.sun_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (loud)
			NVS_ERROR("cannot bind %s: %s", sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (chmod(sa.sun_path, l->sock_mode) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    rename(sa.sun_path, l->path) < 0 || lstat(l->path, &st) < 0) {
		if (loud)
			NVS_ERROR("cannot set up %s: %s", l->path, strerror(errno));
		unlink(sa.sun_path);
		close(fd);
		return -1;
	}
	*ino = st.st_ino;
	return fd;
}

static int watch_listener(struct listener *l, int fd)
{
	return nvs_loop_add(fd, EPOLLIN, on_listener, l);
}

/* Directory, lock file and socket of one listener. */
static int open_listener(struct listener *l)
{
	if (make_dirs(l))
		return -1;
	/* The lock file settles races between two schedulers starting at
	 * once; the connect() check in bind_socket() catches one that lost
	 * its lock file (directory recreated). */
	l->lock_fd = take_lock_file(l, 1);
	if (l->lock_fd < 0)
		return -1;
	l->fd = bind_socket(l, &l->ino, 1);
	if (l->fd < 0)
		return -1;
	if (watch_listener(l, l->fd) < 0) {
		NVS_ERROR("event loop setup failed: %s", strerror(errno));
		return -1;
	}
	NVS_INFO("listening on %s (%s, mode %04o)", l->path, l->what, (unsigned)l->sock_mode);
	sock_event(l, "listening", NULL);
	return 0;
}

static void unlink_ours(const struct listener *l)
{
	struct stat st;
	/* Only our own socket: a successor may already have replaced it. */
	if (l->fd >= 0 && lstat(l->path, &st) == 0 && st.st_ino == l->ino)
		unlink(l->path);
}

int nvs_server_open(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP); /* logged, never fatal: nvs_sighup() */
	sigprocmask(SIG_BLOCK, &set, NULL);
	sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (nvs_fd_reserve_open())
		NVS_WARN("cannot open the descriptor reserve: %s", strerror(errno));
	if (sig_fd < 0 || nvs_loop_add(sig_fd, EPOLLIN, on_signal, NULL) < 0) {
		NVS_ERROR("event loop setup failed: %s", strerror(errno));
		return -1;
	}
	nvs_loop_urgent(sig_fd); /* SIGTERM is heard whatever the load */
	/* The socket check and the end of an accept pause, once the turn's
	 * reap has given descriptors back (loop.h). */
	nvs_loop_timer(NVS_LOOP_ACCEPT, server_tick, server_next_deadline);
	for (unsigned i = 0; i < NLISTENERS; i++)
		if (open_listener(&listeners[i])) {
			for (unsigned j = 0; j <= i; j++)
				unlink_ours(&listeners[j]);
			return -1;
		}
	return 0;
}

/*
 * A socket directory may be removed or replaced while we run (the client
 * directory is shared with other software and mounted into Pods). Once a
 * second each path is checked; when our socket is gone it is re-created
 * (directory, lock file, socket) and clients reconnect to it. A socket of
 * another scheduler, or a file that is not a socket, is never removed:
 * that is logged loudly (once) and the check goes on.
 */
#define SOCK_CHECK_NS (1000ull * 1000000ull)
static uint64_t next_sock_check_ns;

static void check_listener(struct listener *l)
{
	struct stat st;
	int r = lstat(l->path, &st);
	if (r == 0 && S_ISSOCK(st.st_mode) && st.st_ino == l->ino)
		return;
	if (!l->lost_logged) {
		NVS_ERROR("socket %s (%s) was %s while running: re-creating it (peers "
			  "reconnect)",
			  l->path, l->what, r < 0 ? "removed" : "replaced");
		sock_event(l, "socket_lost", r < 0 ? "removed" : "replaced");
	}
	int loud = !l->lost_logged;
	ino_t ino = 0;
	int fd = -1, lfd = -1;
	/* Only the socket went: the lock file we hold is still the one in
	 * the directory (a second flock on it would fail). */
	char lock_path[sizeof S.cfg.sock_dir + 32];
	snprintf(lock_path, sizeof lock_path, "%s/scheduler.lock", l->dir);
	struct stat a, b;
	int same_lock = l->lock_fd >= 0 && fstat(l->lock_fd, &a) == 0 && stat(lock_path, &b) == 0 &&
			a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	if (same_lock)
		lfd = l->lock_fd;
	else if (make_dirs(l) == 0)
		lfd = take_lock_file(l, loud);
	if (lfd >= 0)
		fd = bind_socket(l, &ino, loud);
	if (fd < 0) {
		if (lfd >= 0 && lfd != l->lock_fd)
			close(lfd);
		if (!l->lost_logged)
			NVS_ERROR("cannot re-create %s: new peers cannot connect; connected "
				  "ones are still served; retrying every second",
				  l->path);
		l->lost_logged = 1;
		return;
	}
	if (watch_listener(l, fd) < 0) {
		NVS_ERROR("cannot watch the new socket: %s", strerror(errno));
		unlink(l->path);
		close(fd);
		if (lfd != l->lock_fd)
			close(lfd);
		l->lost_logged = 1;
		return;
	}
	if (l->fd >= 0) {
		nvs_loop_remove(l->fd);
		close(l->fd);
	}
	if (l->lock_fd >= 0 && l->lock_fd != lfd)
		close(l->lock_fd);
	l->fd = fd;
	l->lock_fd = lfd;
	l->ino = ino;
	l->lost_logged = 0;
	S.sock_recreated++;
	NVS_WARN("re-created %s; listening again", l->path);
	sock_event(l, "socket_recreated", NULL);
}

static void check_socket(uint64_t now)
{
	if (now < next_sock_check_ns)
		return;
	next_sock_check_ns = now + SOCK_CHECK_NS;
	for (unsigned i = 0; i < NLISTENERS; i++)
		check_listener(&listeners[i]);
}

/* Out of memory (or of descriptors system-wide): stop watching both
 * listeners for a moment instead of spinning on them. */
#define ACCEPT_PAUSE_NS (100ull * 1000000ull)
static uint64_t accept_paused_until;

static void watch_listener_in(struct listener *l, int on)
{
	if (l->fd >= 0)
		nvs_loop_events(l->fd, on ? EPOLLIN : 0);
}

static uint64_t client_paused_until;
static uint64_t rate_paused_until; /* the accept rate, below */

static void pause_accept(int on)
{
	for (unsigned i = 0; i < NLISTENERS; i++)
		if (on || listeners[i].role != CONN_ROLE_CLIENT ||
		    (!client_paused_until && !rate_paused_until))
			watch_listener_in(&listeners[i], !on);
	accept_paused_until = on ? nvs_now_ns() + ACCEPT_PAUSE_NS : 0;
}

static struct listener *client_listener(void)
{
	for (unsigned i = 0; i < NLISTENERS; i++)
		if (listeners[i].role == CONN_ROLE_CLIENT)
			return &listeners[i];
	return NULL;
}

/*
 * Out of descriptors (limits.h). The client socket stops being accepted:
 * new peers wait in the kernel's backlog (their connect() succeeds; HELLO
 * is answered once they are accepted) instead of being refused and running
 * ungated. It is retried every 100 ms, once the descriptor reserve is
 * full again (connections closed: handshake deadlines, departures). The
 * admin socket stays watched and is served from the reserve.
 */

/* An accept pause's line and event: one a second per reason at most.
 * pause_noted() says whether to write them now, with *quiet the pauses
 * held back since the last ones. */
struct pause_note {
	uint64_t last_ns;
	unsigned quiet;
};

static int pause_noted(struct pause_note *n, uint64_t now, unsigned *quiet)
{
	if (n->last_ns && now - n->last_ns < 1000000000ull) {
		n->quiet++;
		return 0;
	}
	*quiet = n->quiet;
	n->last_ns = now;
	n->quiet = 0;
	return 1;
}

static void client_accept_pause(void)
{
	watch_listener_in(client_listener(), 0);
	uint64_t now = nvs_now_ns();
	client_paused_until = now + ACCEPT_PAUSE_NS;
	nvs_limits_stats.accept_paused++;
	S.accept_pauses++;
	static struct pause_note note;
	unsigned quiet;
	if (!pause_noted(&note, now, &quiet))
		return;
	nvs_event("accept_paused", "\"reason\":\"out-of-fds\",\"open\":%u,\"quiet\":%u",
		  conn_count(), quiet);
	NVS_WARN("out of file descriptors (%u connections open): not accepting on the client "
		 "socket until some close (new peers wait in the backlog); the admin socket is "
		 "still served (%u more pauses since the last line)",
		 conn_count(), quiet);
}

/*
 * The accept rate (NVSHARE_ACCEPT_RATE, limits.h): a token bucket of one
 * connection per 1/rate s, as deep as a tenth of a second's worth (at
 * least ACCEPT_BATCH). Empty, the client socket is not watched until
 * ACCEPT_BATCH tokens are back: peers wait in the kernel's backlog, and
 * the loop's time goes to the clients it already has. Each accept costs
 * the loop ~100 us (peer resolution, cgroup read, descriptors): at 20,000
 * connections a second of churn the loop had no time left, and honest
 * lock waits reached 10-20 ms at p99; at the default 1,000 a second they
 * stay ~1-3 ms (docs/reliability.md). Legitimate clients connect once per
 * process (and again after a scheduler restart).
 */
static double rate_tokens = -1;
static uint64_t rate_refilled_ns;

#define ACCEPT_BATCH 16

static double rate_depth(void)
{
	double d = nvs_limits_cfg.accept_rate / 10.0;
	return d < ACCEPT_BATCH ? ACCEPT_BATCH : d;
}

/* 1: a client-socket connection may be accepted now (a token taken). */
static int rate_take(uint64_t now)
{
	unsigned rate = nvs_limits_cfg.accept_rate;
	if (!rate)
		return 1;
	if (rate_tokens < 0) {
		rate_tokens = rate_depth();
		rate_refilled_ns = now;
	}
	rate_tokens += (double)(now - rate_refilled_ns) * rate / 1e9;
	rate_refilled_ns = now;
	if (rate_tokens > rate_depth())
		rate_tokens = rate_depth();
	if (rate_tokens >= 1) {
		rate_tokens -= 1;
		return 1;
	}
	return 0;
}

static void rate_pause(uint64_t now)
{
	watch_listener_in(client_listener(), 0);
	rate_paused_until =
	    now + (uint64_t)((ACCEPT_BATCH - rate_tokens) * 1e9 / nvs_limits_cfg.accept_rate);
	nvs_limits_stats.rate_paused++;
	static struct pause_note note;
	unsigned quiet;
	if (!pause_noted(&note, now, &quiet))
		return;
	nvs_event("accept_paused", "\"reason\":\"rate-limit\",\"open\":%u,\"quiet\":%u",
		  conn_count(), quiet);
	NVS_WARN("client socket: %u connections a second reached (NVSHARE_ACCEPT_RATE): new peers "
		 "wait in the backlog (%u more pauses since the last line)",
		 nvs_limits_cfg.accept_rate, quiet);
}

static void client_accept_retry(uint64_t now)
{
	if (rate_paused_until && now >= rate_paused_until) {
		rate_paused_until = 0;
		if (!client_paused_until && !accept_paused_until)
			watch_listener_in(client_listener(), 1);
	}
	if (!client_paused_until || now < client_paused_until)
		return;
	if (!nvs_fd_reserve_refill()) {
		client_paused_until = now + ACCEPT_PAUSE_NS;
		return;
	}
	client_paused_until = 0;
	if (!accept_paused_until && !rate_paused_until)
		watch_listener_in(client_listener(), 1);
}

/* Connections taken per wake-up (ACCEPT_BATCH, above): a peer connecting
 * in a loop must not keep the loop in accept() while clients wait for their
 * lock (the listener stays readable; the rest are taken after the other
 * events). */

static void accept_all(struct listener *l)
{
	int listen_fd = l->fd;
	for (int taken = 0; taken < ACCEPT_BATCH; taken++) {
		if (l->role == CONN_ROLE_CLIENT && !rate_take(nvs_now_ns())) {
			rate_pause(nvs_now_ns());
			return;
		}
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE) && l->role == CONN_ROLE_ADMIN) {
			/* The admin socket is served from the reserve: the
			 * operator can always look and act. */
			nvs_fd_reserve_release(NVS_FD_RESERVE);
			fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd >= 0)
				nvs_limits_stats.reserve_accepts++;
		}
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (l->role == CONN_ROLE_CLIENT && (errno == EMFILE || errno == ENFILE)) {
				client_accept_pause();
			} else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
				   errno == ENOMEM) {
				NVS_WARN("accept: %s: not accepting for %llu ms", strerror(errno),
					 ACCEPT_PAUSE_NS / 1000000ull);
				S.accept_pauses++;
				pause_accept(1);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				NVS_WARN("accept: %s", strerror(errno));
			}
			nvs_fd_reserve_refill();
			return;
		}
		/* Its peer resolution needs two descriptors more (a pidfd, the
		 * cgroup file): lend them from the reserve, so the last peer
		 * before the limit is identified like any other. */
		nvs_fd_reserve_release(2);
		struct conn *c = conn_new(fd, l->role);
		int full = nvs_fd_reserve_refill();
		if (!full && l->role == CONN_ROLE_CLIENT)
			client_accept_pause();
		if (!c) {
			if (!full)
				return;
			continue;
		}
		if (nvs_loop_add(fd, EPOLLIN, on_conn, c) < 0) {
			conn_doom(c, "epoll_ctl: %s", strerror(errno));
			continue;
		}
		S.conns_accepted++;
		NVS_DEBUG("conn %u on the %s from pid %d uid %d: tenant %s%s%s", c->id, l->what,
			  (int)c->peer.pid, (int)c->peer.uid, nvs_tenant_kind_name(c->peer.kind),
			  c->peer.pod_uid[0] ? " " : "", c->peer.pod_uid);
		if (!full)
			return;
	}
}

/* ---- what the loop calls (registered in nvs_server_open) ---- */

static void on_listener(void *l, uint32_t events)
{
	accept_all(l);
}

static void on_conn(void *c, uint32_t events)
{
	if (events & EPOLLOUT)
		conn_on_writable(c);
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		conn_on_readable(c);
}

/* SIGHUP is logged and otherwise ignored (docs/scheduler.md): settings
 * change through nvsharectl and are kept in the state file; a daemon
 * killed by a stray hang-up would leave its clients ungated. */
static void sighup(void)
{
	NVS_INFO("SIGHUP: ignored (change settings with nvsharectl; they are kept in the "
		 "state file)");
	nvs_event("sighup", "\"signal\":%d", SIGHUP);
}

static void on_signal(void *ctx, uint32_t events)
{
	struct signalfd_siginfo si;
	if (read(sig_fd, &si, sizeof si) != (ssize_t)sizeof si)
		return;
	if (si.ssi_signo == SIGHUP) {
		sighup();
	} else {
		NVS_INFO("signal %u (%s): shutting down", si.ssi_signo,
			 strsignal((int)si.ssi_signo));
		nvs_event("shutdown", "\"signal\":%u", si.ssi_signo);
		nvs_loop_stop(0);
	}
}

/* The socket check and the end of an accept pause. The socket check also
 * wakes an idle loop at least once a second: the heartbeat /healthz reads
 * (health.h) stays fresh. */
static void server_tick(uint64_t now)
{
	check_socket(now);
	if (accept_paused_until && now >= accept_paused_until)
		pause_accept(0);
	client_accept_retry(now);
}

static uint64_t server_next_deadline(uint64_t now)
{
	uint64_t deadline = next_sock_check_ns;
	if (accept_paused_until && accept_paused_until < deadline)
		deadline = accept_paused_until;
	if (client_paused_until && client_paused_until < deadline)
		deadline = client_paused_until;
	if (rate_paused_until && rate_paused_until < deadline)
		deadline = rate_paused_until;
	return deadline;
}

void nvs_server_close(void)
{
	conn_close_all();
	for (unsigned i = 0; i < NLISTENERS; i++) {
		struct listener *l = &listeners[i];
		unlink_ours(l);
		if (l->fd >= 0)
			close(l->fd);
		if (l->lock_fd >= 0)
			close(l->lock_fd);
		l->fd = l->lock_fd = -1;
	}
	if (sig_fd >= 0) {
		nvs_loop_remove(sig_fd);
		close(sig_fd);
	}
	sig_fd = -1;
	nvs_fd_reserve_close();
	NVS_INFO("stopped; removed %s and %s", S.sock_path, S.admin_sock_path);
}
