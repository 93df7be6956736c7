#include "server.h"

#include "conn.h"
#include "k8s_watch.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
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
	for (char *s = p + 1; ; s++) {
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

int nvs_server_open(void)
{
	const char *dir = S.cfg.sock_dir;
	if (make_dirs(dir))
		return -1;
	/* The lock file settles races between two schedulers starting at
	 * once; the connect() check below catches one that lost its lock
	 * file (directory recreated). */
	char lock_path[sizeof S.cfg.sock_dir + 32];
	snprintf(lock_path, sizeof lock_path, "%s/scheduler.lock", dir);
	lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock_fd < 0) {
		NVS_ERROR("cannot open %s: %s", lock_path, strerror(errno));
		return -1;
	}
	if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
		NVS_ERROR("another nvshare-scheduler is already running on %s (%s is locked)",
			  S.sock_path, lock_path);
		return -1;
	}
	struct stat st;
	if (lstat(S.sock_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			NVS_ERROR("%s exists and is not a socket: refusing to remove it", S.sock_path);
			return -1;
		}
		if (someone_listens(S.sock_path)) {
			NVS_ERROR("another nvshare-scheduler is already listening on %s", S.sock_path);
			return -1;
		}
		NVS_INFO("removing stale socket %s", S.sock_path);
		unlink(S.sock_path);
	}
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", S.sock_path);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		NVS_ERROR("cannot bind %s: %s", S.sock_path, strerror(errno));
		return -1;
	}
	/* 0666: any uid may connect (clients in containers); what a peer may
	 * do is decided per request from SO_PEERCRED, not by file modes. */
	if (chmod(S.sock_path, 0666) < 0 || listen(listen_fd, SOMAXCONN) < 0 ||
	    lstat(S.sock_path, &st) < 0) {
		NVS_ERROR("cannot set up %s: %s", S.sock_path, strerror(errno));
		unlink(S.sock_path);
		return -1;
	}
	sock_ino = st.st_ino;

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
				NVS_WARN("out of file descriptors: refusing a connection");
				close(spare_fd);
				fd = accept(listen_fd, NULL, NULL);
				if (fd >= 0)
					close(fd);
				spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				continue;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				NVS_WARN("accept: %s", strerror(errno));
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
		nvs_metrics_loop(now);
		uint64_t deadline = nvs_policy_next_deadline(now);
		uint64_t mdeadline = nvs_metrics_next_deadline(now);
		if (mdeadline && (!deadline || mdeadline < deadline))
			deadline = mdeadline;
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
