#include "server.h"

#include "conn.h"
#include "events.h"
#include "health.h"
#include "k8s_watch.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
#include "state.h"
#include "unmanaged.h"

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

int nvs_epfd = -1;
static int sig_fd = -1, spare_fd = -1;
/* epoll data.ptr tag for the signalfd; listeners are tagged with their
 * own struct listener. */
static char tag_signal;

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
	if (l->role != CONN_ROLE_ADMIN)
		return 0;
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

static int watch_listener(struct listener *l, int fd, int op)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
	return epoll_ctl(nvs_epfd, op, fd, &ev);
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
	if (watch_listener(l, l->fd, EPOLL_CTL_ADD) < 0) {
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
	nvs_epfd = epoll_create1(EPOLL_CLOEXEC);
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct epoll_event es = {.events = EPOLLIN, .data.ptr = &tag_signal};
	if (sig_fd < 0 || nvs_epfd < 0 || epoll_ctl(nvs_epfd, EPOLL_CTL_ADD, sig_fd, &es) < 0) {
		NVS_ERROR("event loop setup failed: %s", strerror(errno));
		return -1;
	}
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
	if (watch_listener(l, fd, EPOLL_CTL_ADD) < 0) {
		NVS_ERROR("cannot watch the new socket: %s", strerror(errno));
		unlink(l->path);
		close(fd);
		if (lfd != l->lock_fd)
			close(lfd);
		l->lost_logged = 1;
		return;
	}
	if (l->fd >= 0) {
		epoll_ctl(nvs_epfd, EPOLL_CTL_DEL, l->fd, NULL);
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

/* Out of file descriptors and the spare one could not be used: stop
 * watching the listener for a moment instead of spinning on it. */
#define ACCEPT_PAUSE_NS (100ull * 1000000ull)
static uint64_t accept_paused_until;

static void pause_accept(int on)
{
	/* Out of fds or memory is the process's state: pause both. */
	int done = 0;
	for (unsigned i = 0; i < NLISTENERS; i++) {
		struct epoll_event ev = {.events = on ? 0 : EPOLLIN, .data.ptr = &listeners[i]};
		if (listeners[i].fd >= 0 &&
		    epoll_ctl(nvs_epfd, EPOLL_CTL_MOD, listeners[i].fd, &ev) == 0)
			done = 1;
	}
	if (done)
		accept_paused_until = on ? nvs_now_ns() + ACCEPT_PAUSE_NS : 0;
}

/* One line per second at most: a peer reconnecting in a loop must not
 * fill the log. */
static void log_refusal(void)
{
	static uint64_t last_ns;
	static unsigned quiet;
	uint64_t now = nvs_now_ns();
	if (last_ns && now - last_ns < 1000000000ull) {
		quiet++;
		return;
	}
	nvs_event("conn_refused",
		  "\"reason\":\"out-of-fds\",\"open\":%u,\"quiet\":%u,\"refused\":%llu",
		  conn_count(), quiet, (unsigned long long)S.accept_refused);
	NVS_WARN("out of file descriptors (%u connections open): refusing a connection "
		 "(%u more refused since the last line; %llu in all)",
		 conn_count(), quiet, (unsigned long long)S.accept_refused);
	last_ns = now;
	quiet = 0;
}

static void accept_all(struct listener *l)
{
	int listen_fd = l->fd;
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
				/* Out of fds: refuse this one rather than spin on a
				 * listening socket that stays readable. */
				/* Out of fds: take the pending connection with the
				 * spare descriptor and close it, rather than spin on a
				 * listening socket that stays readable. accept()
				 * reports EMFILE even when nothing is pending, so
				 * stop as soon as the queue is empty. */
				close(spare_fd);
				fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
				int empty = fd < 0;
				if (fd >= 0) {
					close(fd);
					S.accept_refused++;
					log_refusal();
				}
				spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				if (spare_fd < 0) {
					S.accept_pauses++;
					pause_accept(1);
					return;
				}
				if (empty)
					return;
				continue;
			}
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				NVS_WARN("accept: %s: not accepting for %llu ms", strerror(errno),
					 ACCEPT_PAUSE_NS / 1000000ull);
				S.accept_pauses++;
				pause_accept(1);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
				NVS_WARN("accept: %s", strerror(errno));
			}
			return;
		}
		struct conn *c = conn_new(fd, l->role);
		if (!c)
			continue;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(nvs_epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			conn_doom(c, "epoll_ctl: %s", strerror(errno));
			continue;
		}
		S.conns_accepted++;
		NVS_DEBUG("conn %u on the %s from pid %d uid %d: tenant %s%s%s", c->id, l->what,
			  (int)c->peer.pid, (int)c->peer.uid, nvs_tenant_kind_name(c->peer.kind),
			  c->peer.pod_uid[0] ? " " : "", c->peer.pod_uid);
	}
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

int nvs_server_run(void)
{
	struct epoll_event evs[64];
	for (;;) {
		uint64_t now = nvs_now_ns();
		nvs_health_stamp(now);
		nvs_policy_tick(now);
		conn_reap();
		check_socket(now);
		if (accept_paused_until && now >= accept_paused_until)
			pause_accept(0);
		nvs_unmanaged_tick(now);
		nvs_metrics_loop(now);
		uint64_t deadline = nvs_policy_next_deadline(now);
		uint64_t udeadline = nvs_unmanaged_next_deadline();
		if (udeadline && (!deadline || udeadline < deadline))
			deadline = udeadline;
		uint64_t mdeadline = nvs_metrics_next_deadline(now);
		if (mdeadline && (!deadline || mdeadline < deadline))
			deadline = mdeadline;
		if (!deadline || next_sock_check_ns < deadline)
			deadline = next_sock_check_ns;
		if (accept_paused_until && accept_paused_until < deadline)
			deadline = accept_paused_until;
		int timeout = -1;
		if (deadline) {
			uint64_t left = deadline > now ? deadline - now : 0;
			/* Round up: waking early would only loop. */
			uint64_t t = (left + 999999) / 1000000;
			timeout = t > 60000 ? 60000 : (int)t;
		}
		int n = epoll_wait(nvs_epfd, evs, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			NVS_ERROR("epoll_wait: %s", strerror(errno));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			struct listener *l = NULL;
			for (unsigned k = 0; k < NLISTENERS; k++)
				if (p == &listeners[k])
					l = &listeners[k];
			if (l) {
				accept_all(l);
			} else if (p == &nvs_k8s_tag) {
				nvs_k8s_on_event();
			} else if (p == &tag_signal) {
				struct signalfd_siginfo si;
				if (read(sig_fd, &si, sizeof si) != (ssize_t)sizeof si)
					continue;
				if (si.ssi_signo == SIGHUP) {
					sighup();
				} else {
					NVS_INFO("signal %u (%s): shutting down", si.ssi_signo,
						 strsignal((int)si.ssi_signo));
					nvs_event("shutdown", "\"signal\":%u", si.ssi_signo);
					return 0;
				}
			} else {
				struct conn *c = p;
				if (evs[i].events & EPOLLOUT)
					conn_on_writable(c);
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					conn_on_readable(c);
			}
		}
		conn_reap();
	}
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
	if (sig_fd >= 0)
		close(sig_fd);
	if (nvs_epfd >= 0)
		close(nvs_epfd);
	if (spare_fd >= 0)
		close(spare_fd);
	NVS_INFO("stopped; removed %s and %s", S.sock_path, S.admin_sock_path);
}
