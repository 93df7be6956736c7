#include "server.h"

#include "clock.h"
#include "conn.h"
#include "events.h"
#include "peer_limits.h"
#include "log.h"
#include "loop.h"
#include "peer.h"
#include "plog.h"
#include "podsock.h"
#include "core/state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int sig_fd = -1;
/* The shared socket listens with a short backlog now (over_budget). */
static int short_backlog;

/* What the loop calls (loop.h), defined at the end. */
static void on_listener(void *l, uint32_t events);
static void on_conn(void *c, uint32_t events);
static void on_signal(void *ctx, uint32_t events);
static void server_tick(uint64_t now);
static uint64_t server_next_deadline(uint64_t now);

/* A token bucket of accepts (NVSHARE_ACCEPT_RATE): one connection per
 * 1/rate s, as deep as a tenth of a second's worth (at least
 * ACCEPT_BATCH). One per tenant (accept_all), never one for everybody: a
 * tenant's churn spends its own budget only. */
struct rate_bucket {
	double tokens;
	uint64_t refilled_ns;
	int init;
};

/*
 * The two sockets (docs/security.md), and a Pod socket per binding
 * (podsock.h). All are set up, checked and re-created by the same code;
 * they differ only in these fields.
 */
struct nvs_listener {
	const char *what; /* "client socket" / "admin socket": for logs */
	enum conn_role role;
	mode_t dir_mode;  /* of the directory we create (the last component) */
	mode_t sock_mode; /* of the socket */
	const char *dir, *path;
	int fd, lock_fd;
	ino_t ino;
	int lost_logged;
	/* A Pod socket (podsock.h): whoever connects here is in that Pod;
	 * NULL for the two sockets above. Owned by podsock.c. */
	const struct nvs_binding *bind;
	/* Pod sockets: their own accept budget, and the chain of them. */
	struct rate_bucket rate;
	uint64_t rate_resume_ns; /* paused by its budget until then (0: not) */
	struct nvs_listener *next;
	char dir_buf[NVS_SOCK_PATH_LEN], path_buf[NVS_SOCK_PATH_LEN];
};

/* The admin socket is bound first: once the client socket exists, both
 * do (tests and scripts wait for the client socket only). */
static struct nvs_listener listeners[] = {
    /* 0700 / 0600: only the scheduler's user (root on the node, or the
     * scheduler Pod) may connect at all. */
    {.what = "admin socket",
     .role = CONN_ROLE_ADMIN,
     .dir_mode = 0700,
     .sock_mode = 0600,
     .dir = S.cfg.admin_sock_dir,
     .path = S.admin_sock_path,
     .fd = -1,
     .lock_fd = -1},
    /* 0755 / 0666: clients in containers run as any uid and must reach
     * the socket; what a peer may do there is decided per request. */
    {.what = "client socket",
     .role = CONN_ROLE_CLIENT,
     .dir_mode = 0755,
     .sock_mode = 0666,
     .dir = S.cfg.sock_dir,
     .path = S.sock_path,
     .fd = -1,
     .lock_fd = -1},
};
#define NLISTENERS (sizeof listeners / sizeof listeners[0])

/* An event about a listener's path: {"path":..., "reason":..., "socket":
 * "client"|"admin"} (reason left out when NULL). The path is the
 * operator's, escaped all the same. */
static void sock_event(const struct nvs_listener *l, const char *name, const char *reason)
{
	char p[2 * sizeof S.sock_path + 8];
	nvs_json_str(l->path, p, sizeof p);
	const char *who = l->role == CONN_ROLE_ADMIN ? "admin" : l->bind ? "pod" : "client";
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
 * hand them our admin socket. warn: say a client directory other users
 * cannot reach (once per opening, not for the first look at start). */
static int make_dirs(const struct nvs_listener *l, int warn)
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
	if (warn && l->role != CONN_ROLE_ADMIN && !l->bind)
		warn_unreachable(l->dir);
	return nvs_server_own_dir(l->dir, l->dir_mode, l->what);
}

/*
 * A directory we put a socket or lock file in must be ours and writable
 * by nobody else: one that another user created first (or may write) lets
 * them plant a symlink where we create a file as root, or swap our socket
 * between bind and use. Not a symlink, owned by the scheduler's uid.
 * The admin directory is set to exactly its mode (0700). A client
 * directory keeps the operator's mode, less any write bits for group and
 * others (one that other uids cannot search is said by warn_unreachable,
 * not changed).
 */
int nvs_server_own_dir(const char *dir, mode_t mode, const char *what)
{
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		int gone = lstat(dir, &st) < 0;
		NVS_ERROR("%s: the %s directory must be a directory (not a symlink) owned by uid "
			  "%d, the scheduler's user; it %s: refusing to use it",
			  dir, what, (int)geteuid(),
			  gone			 ? "cannot be read"
			  : !S_ISDIR(st.st_mode) ? "is not a directory"
						 : "belongs to another uid");
		return -1;
	}
	mode_t have = st.st_mode & 07777;
	mode_t want = (mode & 0077) ? (have & ~(mode_t)022) : mode;
	if (have != want) {
		if (chmod(dir, want) < 0) {
			NVS_ERROR("cannot make %s mode %04o: %s", dir, (unsigned)want,
				  strerror(errno));
			return -1;
		}
		if (have & 022)
			NVS_WARN("%s (%s directory) was writable by others (mode %04o): made it "
				 "%04o",
				 dir, what, (unsigned)have, (unsigned)want);
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
static int take_lock_file(const struct nvs_listener *l, int loud)
{
	char lock_path[sizeof S.cfg.sock_dir + 32];
	snprintf(lock_path, sizeof lock_path, "%s/scheduler.lock", l->dir);
	/* Never through a symlink, and only a regular file of ours: the
	 * directory was checked (make_dirs), this is the second line. */
	int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
		close(fd);
		fd = -1;
		errno = EPERM;
	}
	if (fd < 0) {
		if (loud)
			NVS_ERROR("cannot open %s (a regular file of uid %d, not a symlink): %s",
				  lock_path, (int)geteuid(), strerror(errno));
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
static int bind_socket(const struct nvs_listener *l, ino_t *ino, int loud)
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
	/* The socket file gets its mode from the umask as bind() creates
	 * it: no chmod() by path afterwards, which a swapped path would
	 * turn onto another file. (The other threads create no files.) */
	mode_t old_mask = umask(0777 & ~l->sock_mode);
	int bound = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	umask(old_mask);
	if (!bound) {
		if (loud)
			NVS_ERROR("cannot bind %s: %s", sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (listen(fd, SOMAXCONN) < 0 || rename(sa.sun_path, l->path) < 0 ||
	    lstat(l->path, &st) < 0) {
		if (loud)
			NVS_ERROR("cannot set up %s: %s", l->path, strerror(errno));
		unlink(sa.sun_path);
		close(fd);
		return -1;
	}
	*ino = st.st_ino;
	return fd;
}

static int watch_listener(struct nvs_listener *l, int fd)
{
	return nvs_loop_add(fd, EPOLLIN, on_listener, l);
}

/* Directory, lock file and socket of one listener. */
static int open_listener(struct nvs_listener *l)
{
	if (make_dirs(l, 1))
		return -1;
	/* The lock file settles races between two schedulers starting at
	 * once; the connect() check in bind_socket() catches one that lost
	 * its lock file (directory recreated). A Pod socket's directory has
	 * none: the client directory's lock already says whose they are. */
	if (!l->bind) {
		l->lock_fd = take_lock_file(l, 1);
		if (l->lock_fd < 0)
			return -1;
	}
	l->fd = bind_socket(l, &l->ino, 1);
	if (l->fd < 0)
		return -1;
	if (watch_listener(l, l->fd) < 0) {
		NVS_ERROR("event loop setup failed: %s", strerror(errno));
		close(l->fd);
		unlink(l->path);
		l->fd = -1;
		return -1;
	}
	if (l->bind)
		NVS_INFO("listening on %s (pod %s/%s, mode %04o)", l->path, l->bind->ns,
			 l->bind->name, (unsigned)l->sock_mode);
	else
		NVS_INFO("listening on %s (%s, mode %04o)", l->path, l->what,
			 (unsigned)l->sock_mode);
	sock_event(l, "listening", NULL);
	return 0;
}

static void unlink_ours(const struct nvs_listener *l)
{
	struct stat st;
	/* Only our own socket: a successor may already have replaced it. */
	if (l->fd >= 0 && lstat(l->path, &st) == 0 && st.st_ino == l->ino)
		unlink(l->path);
}

/* Pod sockets (podsock.h), chained. */
static struct nvs_listener *pod_listeners;

/* The admin socket directory must not be the client directory or inside
 * it (that one is mounted into Pods), compared as the kernel resolves
 * them: "//", "x/.." and symlinked parents do not hide it. */
static int admin_outside_client(void)
{
	char c[PATH_MAX], a[PATH_MAX];
	if (!realpath(S.cfg.sock_dir, c) || !realpath(S.cfg.admin_sock_dir, a)) {
		NVS_ERROR("cannot resolve the socket directories %s and %s: %s", S.cfg.sock_dir,
			  S.cfg.admin_sock_dir, strerror(errno));
		return -1;
	}
	size_t cn = strlen(c);
	if (!strncmp(a, c, cn) && (a[cn] == '\0' || a[cn] == '/' || cn == 1)) {
		NVS_ERROR("the admin socket directory %s (%s) is (inside) the client socket "
			  "directory %s (%s), which is mounted into Pods: choose another one "
			  "(--admin-sock-dir, NVSHARE_ADMIN_SOCK_DIR)",
			  S.cfg.admin_sock_dir, a, S.cfg.sock_dir, c);
		return -1;
	}
	return 0;
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
	/* Both directories first: they are compared as they resolve. */
	if (make_dirs(&listeners[0], 0) || make_dirs(&listeners[1], 0) || admin_outside_client())
		return -1;
	for (unsigned i = 0; i < NLISTENERS; i++) {
		if (open_listener(&listeners[i])) {
			for (unsigned j = 0; j <= i; j++)
				unlink_ours(&listeners[j]);
			return -1;
		}
	}
	if (nvs_podsock_start()) {
		for (unsigned j = 0; j < NLISTENERS; j++)
			unlink_ours(&listeners[j]);
		return -1;
	}
	return 0;
}

struct nvs_listener *nvs_server_listen_pod(const char *dir, const struct nvs_binding *b)
{
	struct nvs_listener *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	*l = listeners[1]; /* the client socket's role and modes */
	l->what = "pod socket";
	l->bind = b;
	l->fd = l->lock_fd = -1;
	l->ino = 0;
	l->lost_logged = 0;
	memset(&l->rate, 0, sizeof l->rate);
	int n = snprintf(l->dir_buf, sizeof l->dir_buf, "%s", dir);
	int m = snprintf(l->path_buf, sizeof l->path_buf, "%s/%s", dir, NVS_SOCK_NAME);
	l->dir = l->dir_buf;
	l->path = l->path_buf;
	if (n < 0 || (size_t)n >= sizeof l->dir_buf || m < 0 || (size_t)m >= sizeof l->path_buf) {
		NVS_ERROR("pod %s/%s: socket path %s/%s is too long (at most %zu bytes): no Pod "
			  "socket (shorten NVSHARE_SOCK_DIR)",
			  b->ns, b->name, dir, NVS_SOCK_NAME, sizeof l->path_buf - 1);
		free(l);
		return NULL;
	}
	if (open_listener(l)) {
		free(l);
		return NULL;
	}
	l->next = pod_listeners;
	pod_listeners = l;
	return l;
}

static void close_listener(struct nvs_listener *l)
{
	unlink_ours(l);
	if (l->fd >= 0) {
		nvs_loop_remove(l->fd);
		close(l->fd);
	}
	if (l->lock_fd >= 0)
		close(l->lock_fd);
	l->fd = l->lock_fd = -1;
}

void nvs_server_unlisten_pod(struct nvs_listener *l)
{
	for (struct nvs_listener **pp = &pod_listeners; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	sock_event(l, "socket_closed", "unbound");
	close_listener(l);
	free(l);
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

static void check_listener(struct nvs_listener *l)
{
	struct stat st;
	int r = lstat(l->path, &st);
	if (r == 0 && S_ISSOCK(st.st_mode) && st.st_ino == l->ino && l->fd >= 0)
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
	else if (make_dirs(l, loud) == 0)
		lfd = l->bind ? -2 : take_lock_file(l, loud); /* -2: none needed */
	if (lfd != -1)
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
	if (lfd == -2)
		lfd = -1;
	if (watch_listener(l, fd) < 0) {
		NVS_ERROR("cannot watch the new socket: %s", strerror(errno));
		unlink(l->path);
		close(fd);
		if (lfd >= 0 && lfd != l->lock_fd)
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
	if (l == &listeners[1])
		short_backlog = 0; /* a new socket: the long backlog */
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
	for (struct nvs_listener *l = pod_listeners; l; l = l->next)
		check_listener(l);
}

/* Out of memory (or of descriptors system-wide): stop watching the
 * listeners for a moment instead of spinning on them. */
#define ACCEPT_PAUSE_NS (100ull * 1000000ull)
static uint64_t accept_paused_until;
/* Out of descriptors: the client-role listeners only (below). */
static uint64_t client_paused_until;
static int parked_paused; /* the shared socket waits for parked ones (below) */

static void watch_listener_in(struct nvs_listener *l, int on)
{
	if (l->fd >= 0)
		nvs_loop_events(l->fd, on ? EPOLLIN : 0);
}

/* Each listener watched again unless a pause still holds it: the global
 * ones (memory; descriptors for client-role listeners) or its own budget
 * (a Pod socket's rate pause). */
static void rewatch_all(uint64_t now)
{
	for (unsigned i = 0; i < NLISTENERS; i++) {
		struct nvs_listener *l = &listeners[i];
		int held = accept_paused_until ||
			   (l->role == CONN_ROLE_CLIENT && client_paused_until) ||
			   (l == &listeners[1] && parked_paused);
		watch_listener_in(l, !held);
	}
	for (struct nvs_listener *l = pod_listeners; l; l = l->next)
		watch_listener_in(l, !accept_paused_until && !client_paused_until &&
					 (!l->rate_resume_ns || now >= l->rate_resume_ns));
}

static void pause_accept(int on)
{
	accept_paused_until = on ? nvs_now_ns() + ACCEPT_PAUSE_NS : 0;
	if (on) {
		for (unsigned i = 0; i < NLISTENERS; i++)
			watch_listener_in(&listeners[i], 0);
		for (struct nvs_listener *l = pod_listeners; l; l = l->next)
			watch_listener_in(l, 0);
	} else {
		rewatch_all(nvs_now_ns());
	}
}

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

/*
 * Out of descriptors (peer_limits.h). First the connections that cost a
 * descriptor and do nothing (limits.c nvs_limits_evict_idle: the tenant
 * with the most connections gives up its oldest idle one; connections
 * parked over their uid's budget are not closed: they need no new
 * descriptor to be served), so that an honest newcomer is
 * served at once; only when there is none to give do the client-role
 * sockets stop being accepted: new peers wait in the kernel's backlog
 * (their connect() succeeds; HELLO is answered once they are accepted)
 * instead of being refused. Retried every 100 ms, or at the next turn
 * once an eviction's reap gave descriptors back. The admin socket stays
 * watched and is served from the reserve.
 */
static void client_accept_pause(uint64_t now)
{
	int evicted = nvs_limits_evict_idle(now);
	client_paused_until = now + (evicted ? 1 : ACCEPT_PAUSE_NS);
	for (unsigned i = 0; i < NLISTENERS; i++)
		if (listeners[i].role == CONN_ROLE_CLIENT)
			watch_listener_in(&listeners[i], 0);
	for (struct nvs_listener *l = pod_listeners; l; l = l->next)
		watch_listener_in(l, 0);
	if (evicted)
		return;
	nvs_limits_stats.accept_paused++;
	S.accept_pauses++;
	static struct pause_note note;
	unsigned quiet;
	if (!pause_noted(&note, now, &quiet))
		return;
	nvs_event("accept_paused", "\"reason\":\"out-of-fds\",\"open\":%u,\"quiet\":%u",
		  conn_count(), quiet);
	NVS_WARN("out of file descriptors (%u connections open, none idle to close): not "
		 "accepting on the client sockets until some close (new peers wait in the "
		 "backlog); the admin socket is still served (%u more pauses since the last "
		 "line)",
		 conn_count(), quiet);
}

static void client_accept_retry(uint64_t now)
{
	if (!client_paused_until || now < client_paused_until)
		return;
	if (!nvs_fd_reserve_refill()) {
		client_paused_until = now + ACCEPT_PAUSE_NS;
		return;
	}
	client_paused_until = 0;
	rewatch_all(now);
}

/*
 * Accept budgets per tenant (NVSHARE_ACCEPT_RATE, peer_limits.h). Resolving a
 * peer costs the loop ~100 us (cgroup read, pidfd, descriptors); a tenant
 * that churns connections must spend only its own share of that, and
 * never delay another tenant's WELCOME (one bucket for all did: a
 * newcomer waited seconds in the backlog behind a churner's connections,
 * then ran ungated).
 *  - A Pod socket is one tenant: its own bucket; empty, that socket alone
 *    is not watched until a token is back (its peers wait in its own
 *    backlog).
 *  - The shared client socket serves several tenants: every connection is
 *    accepted at once and the kernel's SO_PEERCRED uid (free to read,
 *    fixed at connect) picks its bucket. Over its uid's budget it is
 *    parked, unresolved, in that uid's queue (at most as many as a tenant
 *    may hold; beyond, it is closed) and resolved as the uid's tokens come
 *    back: the backlog
 *    drains at once, so other uids get in, and an honest process of a
 *    churning uid waits its turn instead of being refused.
 * Legitimate clients connect once per process (and after a restart); the
 * bucket holds half a second's worth for the bursts of a job's start.
 */
#define ACCEPT_BATCH 16
/* Parking is cheap: more of it per wake-up. */
#define ACCEPT_MAX 256
/* A uid may have as many connections parked as it may hold
 * (NVSHARE_MAX_CONNS_PER_TENANT), or this many when that is not capped. */
#define PARK_UNCAPPED 4096u

static unsigned park_max(void)
{
	unsigned cap = nvs_limits_cfg.max_conns_per_tenant;
	return cap && cap < PARK_UNCAPPED ? cap : PARK_UNCAPPED;
}

static double rate_depth(void)
{
	double d = nvs_limits_cfg.accept_rate / 2.0;
	return d < ACCEPT_BATCH ? ACCEPT_BATCH : d;
}

static void bucket_refill(struct rate_bucket *b, uint64_t now)
{
	unsigned rate = nvs_limits_cfg.accept_rate;
	if (!b->init) {
		b->init = 1;
		b->tokens = rate_depth();
		b->refilled_ns = now;
	}
	if (now > b->refilled_ns)
		b->tokens += (double)(now - b->refilled_ns) * rate / 1e9;
	b->refilled_ns = now;
	if (b->tokens > rate_depth())
		b->tokens = rate_depth();
}

/* 1: a connection may be resolved now (a token taken). */
static int bucket_take(struct rate_bucket *b, uint64_t now)
{
	if (!nvs_limits_cfg.accept_rate)
		return 1;
	bucket_refill(b, now);
	if (b->tokens < 1)
		return 0;
	b->tokens -= 1;
	return 1;
}

/* When the bucket has a token again. */
static uint64_t bucket_ready_ns(const struct rate_bucket *b, uint64_t now)
{
	if (b->tokens >= 1 || !nvs_limits_cfg.accept_rate)
		return now;
	return now + (uint64_t)((1.0 - b->tokens) * 1e9 / nvs_limits_cfg.accept_rate) + 1;
}

/* The shared socket's buckets, by uid: a fixed table. A uid not in it
 * takes a free slot, else the slot (with nothing parked) whose bucket is
 * fullest: a full bucket is what a fresh one would be, so flooding the
 * table with other uids hands nobody a fresh budget; when every slot is
 * busy spending, the newcomer inherits what is left of the fullest. */
#define UID_BUCKETS 256
static struct uid_slot {
	uid_t uid;
	int used;
	struct rate_bucket b;
	int *park; /* ring of accepted, unresolved fds (grown as needed) */
	unsigned pcap, phead, plen;
	uint64_t ready_ns; /* plen > 0: when its next token comes */
} uid_slot[UID_BUCKETS];
static unsigned parked_total;

static struct uid_slot *slot_of_uid(uid_t uid, uint64_t now)
{
	int pick = -1;
	for (int i = 0; i < UID_BUCKETS; i++) {
		struct uid_slot *u = &uid_slot[i];
		if (u->used && u->uid == uid)
			return u;
		if (!u->used) {
			if (pick < 0 || uid_slot[pick].used)
				pick = i;
			continue;
		}
		if (u->plen || (pick >= 0 && !uid_slot[pick].used))
			continue;
		bucket_refill(&u->b, now);
		if (pick < 0 || u->b.tokens > uid_slot[pick].b.tokens)
			pick = i;
	}
	if (pick < 0)
		return NULL; /* 256 uids all with connections parked */
	struct uid_slot *u = &uid_slot[pick];
	if (!u->used)
		memset(&u->b, 0, sizeof u->b);
	u->used = 1;
	u->uid = uid;
	return u;
}

/*
 * The shared client socket's backlog while a uid connects faster than it
 * can be parked (a churner: honest bursts fit the parking). The
 * kernel queues connections in arrival order: behind a churner's full
 * backlog of thousands a newcomer waited ~100 ms (at ~50,000 accepts a
 * second), however fast its own turn came. With a short queue a connect()
 * beyond it waits in the kernel for a free place instead, woken with the
 * churner's, not behind all of them (docs/security.md "Hostile load").
 * listen() again changes a listening socket's backlog; the long one is
 * back SHORT_BACKLOG_NS after the last connection refused, so an honest
 * burst of many processes queues as before.
 */
#define SHORT_BACKLOG 64
#define SHORT_BACKLOG_NS (5ull * 1000000000ull)
static uint64_t over_budget_ns; /* the last connection refused over a budget */

static void over_budget(uint64_t now)
{
	over_budget_ns = now;
	if (short_backlog || listeners[1].fd < 0)
		return;
	if (listen(listeners[1].fd, SHORT_BACKLOG) == 0)
		short_backlog = 1;
}

static void backlog_check(uint64_t now)
{
	if (short_backlog && now - over_budget_ns >= SHORT_BACKLOG_NS && listeners[1].fd >= 0 &&
	    listen(listeners[1].fd, SOMAXCONN) == 0)
		short_backlog = 0;
}

/* A connection on the shared client socket that cannot even be parked:
 * closed unresolved, counted, said once a second per uid at most. */
static void refuse_over_rate(int fd, uid_t uid)
{
	close(fd);
	nvs_limits_stats.refused_rate++;
	struct nvs_peer p = {.uid = uid, .kind = NVS_TENANT_UID};
	static char site;
	unsigned quiet;
	if (nvs_plog_allow(&site, "accept-rate", &p, &quiet)) {
		nvs_log_n(NVS_LOG_WARN, quiet,
			  "uid %d connects faster than NVSHARE_ACCEPT_RATE=%u a second on the "
			  "client socket, with %u connections already waiting: closing the rest",
			  (int)uid, nvs_limits_cfg.accept_rate, park_max());
		nvs_event("conn_refused",
			  "\"reason\":\"accept-rate\",\"uid\":%d,\"limit\":%u,\"quiet\":%u,"
			  "\"refused\":%llu",
			  (int)uid, nvs_limits_cfg.accept_rate, quiet,
			  (unsigned long long)nvs_limits_stats.refused_rate);
	}
}

/* Parked connections hold descriptors the kernel's backlog would not:
 * once all of them together hold a quarter of the descriptor limit, the
 * shared socket is not accepted until some are served (new peers wait in
 * the backlog), so that parking never runs the scheduler out of them. A
 * single uid cannot get there: it parks no more than it may hold. */
static unsigned parked_cap(void)
{
	static unsigned cap;
	if (!cap) {
		struct rlimit rl;
		cap = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
			      rl.rlim_cur / 4 < 65536
			  ? (unsigned)(rl.rlim_cur / 4)
			  : 65536;
		if (!cap)
			cap = 1;
	}
	return cap;
}

/* 0, or -1 when u cannot take another (its share is full, or out of
 * memory). At the total cap it is still taken, and accepting pauses. */
static int park(struct uid_slot *u, int fd, uint64_t now)
{
	if (u->plen >= park_max())
		return -1;
	if (parked_total + 1 >= parked_cap() && !parked_paused) {
		parked_paused = 1;
		watch_listener_in(&listeners[1], 0);
	}
	if (u->plen == u->pcap) {
		unsigned ncap = u->pcap ? 2 * u->pcap : 16;
		int *n = malloc(ncap * sizeof *n);
		if (!n)
			return -1;
		for (unsigned i = 0; i < u->plen; i++)
			n[i] = u->park[(u->phead + i) % u->pcap];
		free(u->park);
		u->park = n;
		u->pcap = ncap;
		u->phead = 0;
	}
	u->park[(u->phead + u->plen) % u->pcap] = fd;
	u->plen++;
	parked_total++;
	nvs_limits_stats.rate_parked++;
	u->ready_ns = bucket_ready_ns(&u->b, now);
	return 0;
}

/* A Pod socket's budget is spent: not watched until a token is back. */
static void pod_rate_pause(struct nvs_listener *l, uint64_t now)
{
	watch_listener_in(l, 0);
	nvs_limits_stats.rate_paused++;
	l->rate_resume_ns = bucket_ready_ns(&l->rate, now);
}

/* Resolves and registers an accepted fd (the budget already paid).
 * Returns 0 to go on accepting, -1 to stop (out of descriptors). */
static int admit(struct nvs_listener *l, int fd, uint64_t now)
{
	/* Its peer resolution needs two descriptors more (a pidfd, the
	 * cgroup file): lend them from the reserve, so the last peer
	 * before the limit is identified like any other. */
	nvs_fd_reserve_release(2);
	struct conn *c = conn_new(fd, l->role, l->bind);
	int full = nvs_fd_reserve_refill();
	if (!full && l->role == CONN_ROLE_CLIENT)
		client_accept_pause(now);
	if (!c)
		return full ? 0 : -1;
	if (nvs_loop_add(fd, EPOLLIN, on_conn, c) < 0) {
		conn_doom(c, "epoll_ctl: %s", strerror(errno));
		return 0;
	}
	S.conns_accepted++;
	NVS_DEBUG("conn %u on the %s from pid %d uid %d: tenant %s%s%s", c->id, l->what,
		  (int)c->peer.pid, (int)c->peer.uid, nvs_tenant_kind_name(c->peer.kind),
		  c->peer.pod_uid[0] ? " " : "", c->peer.pod_uid);
	return full ? 0 : -1;
}

/* Parked connections whose uid has tokens again, in arrival order per
 * uid, ACCEPT_BATCH a turn at most. */
static uint64_t next_parked_ns = UINT64_MAX;

static void admit_parked(uint64_t now)
{
	if (parked_paused && parked_total < parked_cap() / 2) {
		parked_paused = 0;
		rewatch_all(now);
	}
	if (!parked_total || now < next_parked_ns)
		return;
	struct nvs_listener *l = &listeners[1];
	int done = 0;
	next_parked_ns = UINT64_MAX;
	for (int i = 0; i < UID_BUCKETS && parked_total; i++) {
		struct uid_slot *u = &uid_slot[i];
		while (u->plen && done < ACCEPT_BATCH && !client_paused_until &&
		       bucket_take(&u->b, now)) {
			int fd = u->park[u->phead];
			u->phead = (u->phead + 1) % u->pcap;
			u->plen--;
			parked_total--;
			done++;
			if (admit(l, fd, now))
				break;
		}
		if (u->plen) {
			u->ready_ns = done >= ACCEPT_BATCH || client_paused_until
					  ? now
					  : bucket_ready_ns(&u->b, now);
			if (u->ready_ns < next_parked_ns)
				next_parked_ns = u->ready_ns;
		}
	}
}

/* One wake-up of a listener: at most ACCEPT_BATCH resolved, ACCEPT_MAX
 * taken, and ACCEPT_SLICE_NS spent, so that the registered clients
 * (served first in every turn) wait for a short slice at most. */
#define ACCEPT_SLICE_NS 500000ull

static void accept_all(struct nvs_listener *l)
{
	int listen_fd = l->fd;
	uint64_t now = nvs_now_ns(), start = now;
	int resolved = 0;
	for (int taken = 0; taken < ACCEPT_MAX && resolved < ACCEPT_BATCH; taken++) {
		if (taken && !(taken % 16) && (now = nvs_now_ns()) - start >= ACCEPT_SLICE_NS)
			return;
		if (l->bind && !bucket_take(&l->rate, now)) {
			pod_rate_pause(l, now);
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
			if (l->bind)
				l->rate.tokens += 1; /* not spent: nobody was there */
			if (l->role == CONN_ROLE_CLIENT && (errno == EMFILE || errno == ENFILE)) {
				client_accept_pause(now);
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
		if (l->role == CONN_ROLE_CLIENT && !l->bind && nvs_limits_cfg.accept_rate) {
			struct ucred cred;
			socklen_t len = sizeof cred;
			if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
				struct uid_slot *u = slot_of_uid(cred.uid, now);
				/* Behind its own parked ones, or over budget: wait. */
				if (!u ||
				    ((u->plen || !bucket_take(&u->b, now)) && park(u, fd, now))) {
					over_budget(now);
					refuse_over_rate(fd, cred.uid);
					continue;
				}
				if (u->plen) {
					if (u->ready_ns < next_parked_ns)
						next_parked_ns = u->ready_ns;
					continue;
				}
			}
		}
		resolved++;
		if (admit(l, fd, now))
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

/* The socket check, the end of accept pauses and of Pod sockets' rate
 * pauses. The socket check also wakes an idle loop at least once a
 * second: the heartbeat /healthz reads (health.h) stays fresh. */
static void server_tick(uint64_t now)
{
	check_socket(now);
	backlog_check(now);
	if (accept_paused_until && now >= accept_paused_until)
		pause_accept(0);
	client_accept_retry(now);
	if (accept_paused_until || client_paused_until)
		return;
	admit_parked(now);
	for (struct nvs_listener *l = pod_listeners; l; l = l->next)
		if (l->rate_resume_ns && now >= l->rate_resume_ns) {
			l->rate_resume_ns = 0;
			watch_listener_in(l, 1);
		}
}

static uint64_t server_next_deadline(uint64_t now)
{
	uint64_t deadline = next_sock_check_ns;
	if (accept_paused_until && accept_paused_until < deadline)
		deadline = accept_paused_until;
	if (client_paused_until && client_paused_until < deadline)
		deadline = client_paused_until;
	for (struct nvs_listener *l = pod_listeners; l; l = l->next)
		if (l->rate_resume_ns && l->rate_resume_ns < deadline)
			deadline = l->rate_resume_ns;
	if (short_backlog && over_budget_ns + SHORT_BACKLOG_NS < deadline)
		deadline = over_budget_ns + SHORT_BACKLOG_NS;
	if (parked_total && next_parked_ns < deadline)
		deadline = next_parked_ns;
	return deadline;
}

void nvs_server_close(void)
{
	for (int i = 0; i < UID_BUCKETS; i++) {
		struct uid_slot *u = &uid_slot[i];
		for (; u->plen; u->plen--) {
			close(u->park[u->phead]);
			u->phead = (u->phead + 1) % u->pcap;
		}
		free(u->park);
		u->park = NULL;
		u->pcap = u->phead = 0;
	}
	parked_total = 0;
	nvs_podsock_stop();
	conn_close_all();
	for (unsigned i = 0; i < NLISTENERS; i++)
		close_listener(&listeners[i]);
	if (sig_fd >= 0) {
		nvs_loop_remove(sig_fd);
		close(sig_fd);
	}
	sig_fd = -1;
	nvs_fd_reserve_close();
	NVS_INFO("stopped; removed %s and %s", S.sock_path, S.admin_sock_path);
}
