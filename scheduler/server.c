#include "server.h"

#include "conn.h"
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
static int listen_fd = -1, sig_fd = -1, lock_fd = -1, spare_fd = -1;
static ino_t sock_ino;
/* epoll data.ptr tags for the non-connection fds. */
static char tag_listen, tag_signal;

/* mkdir -p with mode 0755 for what we create: clients in containers run
 * as any uid and need to reach the socket (search permission). */
static int make_dirs(const char *dir)
{
	char p[sizeof S.cfg.sock_dir];
	snprintf(p, sizeof p, "%s", dir);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) == 0) {
			chmod(p, 0755); /* not narrowed by the umask */
		} else if (errno != EEXIST) {
			NVS_ERROR("cannot create %s: %s", p, strerror(errno));
			return -1;
		}
		*s = c;
		if (!c)
			break;
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
static int take_lock_file(const char *dir, int loud)
{
	char lock_path[sizeof S.cfg.sock_dir + 32];
	snprintf(lock_path, sizeof lock_path, "%s/scheduler.lock", dir);
	int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		if (loud)
			NVS_ERROR("cannot open %s: %s", lock_path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (loud)
			NVS_ERROR(
			    "another nvshare-scheduler is already running on %s (%s is locked)",
			    S.sock_path, lock_path);
		close(fd);
		return -1;
	}
	return fd;
}

/* Creates, binds and listens on the socket path (removing a stale socket
 * that nobody listens on). Returns the listening fd or -1 (logged when
 * loud).
 *
 * The socket is bound under a temporary name in the same directory and
 * renamed into place once it listens: a client that finds the path can
 * always connect. Bound in place, the path would exist before listen(),
 * and a client started beside the scheduler would get ECONNREFUSED and
 * run unscheduled. Only the holder of the lock file gets here, so one
 * fixed temporary name is enough; it is shorter than NVS_SOCK_NAME, so
 * it fits wherever the real path fits. */
static int bind_socket(ino_t *ino, int loud)
{
	struct stat st;
	if (lstat(S.sock_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			if (loud)
				NVS_ERROR("%s exists and is not a socket: refusing to remove it",
					  S.sock_path);
			return -1;
		}
		if (someone_listens(S.sock_path)) {
			if (loud)
				NVS_ERROR("another nvshare-scheduler is already listening on %s",
					  S.sock_path);
			return -1;
		}
		NVS_INFO("removing stale socket %s", S.sock_path);
		unlink(S.sock_path);
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/.sock-new", S.cfg.sock_dir);
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
	/* 0666: any uid may connect (clients in containers); what a peer may
	 * do is decided per request from SO_PEERCRED, not by file modes. */
	if (chmod(sa.sun_path, 0666) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    rename(sa.sun_path, S.sock_path) < 0 || lstat(S.sock_path, &st) < 0) {
		if (loud)
			NVS_ERROR("cannot set up %s: %s", S.sock_path, strerror(errno));
		unlink(sa.sun_path);
		close(fd);
		return -1;
	}
	*ino = st.st_ino;
	return fd;
}

int nvs_server_open(void)
{
	const char *dir = S.cfg.sock_dir;
	if (make_dirs(dir))
		return -1;
	/* The lock file settles races between two schedulers starting at
	 * once; the connect() check in bind_socket() catches one that lost
	 * its lock file (directory recreated). */
	lock_fd = take_lock_file(dir, 1);
	if (lock_fd < 0)
		return -1;
	listen_fd = bind_socket(&sock_ino, 1);
	if (listen_fd < 0)
		return -1;

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	nvs_epfd = epoll_create1(EPOLL_CLOEXEC);
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tag_listen};
	struct epoll_event es = {.events = EPOLLIN, .data.ptr = &tag_signal};
	if (sig_fd < 0 || nvs_epfd < 0 || epoll_ctl(nvs_epfd, EPOLL_CTL_ADD, listen_fd, &ev) < 0 ||
	    epoll_ctl(nvs_epfd, EPOLL_CTL_ADD, sig_fd, &es) < 0) {
		NVS_ERROR("event loop setup failed: %s", strerror(errno));
		unlink(S.sock_path);
		return -1;
	}
	NVS_INFO("listening on %s", S.sock_path);
	return 0;
}

/*
 * The socket directory is shared with other software (and mounted into
 * Pods): someone may remove it or replace it while we run. Once a second
 * the path is checked; when our socket is gone it is re-created (directory,
 * lock file, socket) and clients reconnect to it. A socket of another
 * scheduler, or a file that is not a socket, is never removed: that is
 * logged loudly (once) and the check goes on.
 */
#define SOCK_CHECK_NS (1000ull * 1000000ull)
static uint64_t next_sock_check_ns;
static int sock_lost_logged;

static void check_socket(uint64_t now)
{
	if (now < next_sock_check_ns)
		return;
	next_sock_check_ns = now + SOCK_CHECK_NS;
	struct stat st;
	int r = lstat(S.sock_path, &st);
	if (r == 0 && S_ISSOCK(st.st_mode) && st.st_ino == sock_ino)
		return;
	if (!sock_lost_logged)
		NVS_ERROR("socket %s was %s while running: re-creating it (clients reconnect)",
			  S.sock_path, r < 0 ? "removed" : "replaced");
	int loud = !sock_lost_logged;
	ino_t ino = 0;
	int fd = -1, lfd = -1;
	/* Only the socket went: the lock file we hold is still the one in
	 * the directory (a second flock on it would fail). */
	char lock_path[sizeof S.cfg.sock_dir + 32];
	snprintf(lock_path, sizeof lock_path, "%s/scheduler.lock", S.cfg.sock_dir);
	struct stat a, b;
	int same_lock = lock_fd >= 0 && fstat(lock_fd, &a) == 0 && stat(lock_path, &b) == 0 &&
			a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	if (same_lock)
		lfd = lock_fd;
	else if (make_dirs(S.cfg.sock_dir) == 0)
		lfd = take_lock_file(S.cfg.sock_dir, loud);
	if (lfd >= 0)
		fd = bind_socket(&ino, loud);
	if (fd < 0) {
		if (lfd >= 0 && lfd != lock_fd)
			close(lfd);
		if (!sock_lost_logged)
			NVS_ERROR("cannot re-create %s: new clients cannot connect; connected "
				  "clients are still served; retrying every second",
				  S.sock_path);
		sock_lost_logged = 1;
		return;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tag_listen};
	if (epoll_ctl(nvs_epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		NVS_ERROR("cannot watch the new socket: %s", strerror(errno));
		unlink(S.sock_path);
		close(fd);
		if (lfd != lock_fd)
			close(lfd);
		sock_lost_logged = 1;
		return;
	}
	if (listen_fd >= 0) {
		epoll_ctl(nvs_epfd, EPOLL_CTL_DEL, listen_fd, NULL);
		close(listen_fd);
	}
	if (lock_fd >= 0 && lock_fd != lfd)
		close(lock_fd);
	listen_fd = fd;
	lock_fd = lfd;
	sock_ino = ino;
	sock_lost_logged = 0;
	S.sock_recreated++;
	NVS_WARN("re-created %s; listening again", S.sock_path);
}

/* Out of file descriptors and the spare one could not be used: stop
 * watching the listener for a moment instead of spinning on it. */
#define ACCEPT_PAUSE_NS (100ull * 1000000ull)
static uint64_t accept_paused_until;

static void pause_accept(int on)
{
	struct epoll_event ev = {.events = on ? 0 : EPOLLIN, .data.ptr = &tag_listen};
	if (epoll_ctl(nvs_epfd, EPOLL_CTL_MOD, listen_fd, &ev) == 0)
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
	NVS_WARN("out of file descriptors (%u connections open): refusing a connection "
		 "(%u more refused since the last line; %llu in all)",
		 conn_count(), quiet, (unsigned long long)S.accept_refused);
	last_ns = now;
	quiet = 0;
}

static void accept_all(void)
{
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
		struct conn *c = conn_new(fd);
		if (!c)
			continue;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(nvs_epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			conn_doom(c, "epoll_ctl: %s", strerror(errno));
			continue;
		}
		S.conns_accepted++;
		NVS_DEBUG("conn %u from pid %d uid %d", c->id, (int)c->pid, (int)c->uid);
	}
}

int nvs_server_run(void)
{
	struct epoll_event evs[64];
	for (;;) {
		uint64_t now = nvs_now_ns();
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
			if (p == &tag_listen) {
				accept_all();
			} else if (p == &nvs_k8s_tag) {
				nvs_k8s_on_event();
			} else if (p == &tag_signal) {
				struct signalfd_siginfo si;
				if (read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
					NVS_INFO("signal %u (%s): shutting down", si.ssi_signo,
						 strsignal((int)si.ssi_signo));
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
	struct stat st;
	/* Only our own socket: a successor may already have replaced it. */
	if (S.sock_path[0] && lstat(S.sock_path, &st) == 0 && st.st_ino == sock_ino)
		unlink(S.sock_path);
	if (listen_fd >= 0)
		close(listen_fd);
	if (sig_fd >= 0)
		close(sig_fd);
	if (nvs_epfd >= 0)
		close(nvs_epfd);
	if (spare_fd >= 0)
		close(spare_fd);
	if (lock_fd >= 0)
		close(lock_fd);
	NVS_INFO("stopped; removed %s", S.sock_path);
}
