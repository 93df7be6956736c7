#include "peer.h"

#include "log.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Older headers lack these (Linux 6.5 / 5.1). */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

char nvs_proc_root[256] = "/proc";

int nvs_peer_set_proc_root(const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 0 || n >= sizeof nvs_proc_root)
		return -1;
	memcpy(nvs_proc_root, dir, n);
	nvs_proc_root[n] = '\0';
	return 0;
}

/* Reads <proc-root>/<pid>/cgroup. Returns 1 with the Pod UID in out, 0 when
 * the process is in no Pod, -errno when the file cannot be read. */
static int read_cgroup(pid_t pid, char *out, unsigned cap)
{
	char path[sizeof nvs_proc_root + 32];
	snprintf(path, sizeof path, "%s/%d/cgroup", nvs_proc_root, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* procfs: small, read in one go; a v1 hierarchy has ~15 lines. */
	char buf[16384];
	size_t len = 0;
	int err = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = errno;
		if (r <= 0)
			break;
		len += (size_t)r;
		if (len == sizeof buf - 1)
			break;
	}
	close(fd);
	if (err) /* ESRCH: the process went away while we read */
		return -err;
	buf[len] = '\0';
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (nvs_parse_cgroup_pod_uid(line, out, cap) == 0)
			return 1;
	return 0;
}

/*
 * Connect-then-exit: a process may connect, hand the socket to another
 * process and exit before we accept, so that its cgroup can no longer be
 * read. Its pid is remembered here each time it is seen in a Pod, so that
 * such a peer gets the limits of the Pod it was last seen in. A fixed
 * ring: a peer that floods it with connections pushes entries out, and
 * then gets the unknown-tenant limits, which are meant to be restrictive.
 */
#define HISTORY 1024
static struct {
	pid_t pid;
	char pod_uid[NVS_POD_UID_LEN];
} history[HISTORY];
static unsigned history_next;

static void history_add(pid_t pid, const char *pod_uid)
{
	for (unsigned i = 0; i < HISTORY; i++)
		if (history[i].pid == pid) {
			snprintf(history[i].pod_uid, sizeof history[i].pod_uid, "%s", pod_uid);
			return;
		}
	history[history_next].pid = pid;
	snprintf(history[history_next].pod_uid, sizeof history[history_next].pod_uid, "%s",
		 pod_uid);
	history_next = (history_next + 1) % HISTORY;
}

static const char *history_find(pid_t pid)
{
	for (unsigned i = 0; i < HISTORY; i++)
		if (history[i].pid == pid && pid > 0)
			return history[i].pod_uid;
	return NULL;
}

/* 1: the process is still alive, 0: gone. */
static int alive(int pidfd, pid_t pid)
{
	if (pidfd >= 0)
		return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
	return kill(pid, 0) == 0 || errno == EPERM;
}

static void unknown(struct nvs_peer *p, const char *why)
{
	p->kind = NVS_TENANT_UNKNOWN;
	p->source = NVS_ID_NONE;
	p->pod_uid[0] = '\0';
	p->unknown_why = why;
	const char *pod = history_find(p->pid);
	if (pod) {
		/* Not proof of the Pod, but its limits are the right ones to
		 * apply; the tenant stays unknown for status and admin. */
		snprintf(p->pod_uid, sizeof p->pod_uid, "%s", pod);
		p->source = NVS_ID_PID_HISTORY;
	}
}

int nvs_peer_resolve(int fd, struct nvs_peer *p)
{
	memset(p, 0, sizeof *p);
	struct ucred cred;
	socklen_t len = sizeof cred;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		NVS_WARN("new connection: SO_PEERCRED: %s", strerror(errno));
		return -1;
	}
	p->pid = cred.pid;
	p->uid = cred.uid;
	p->gid = cred.gid;
	if (cred.pid <= 0) {
		unknown(p, "peer outside the scheduler's PID namespace");
		return 0;
	}
	int pidfd = -1;
	len = sizeof pidfd;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
		pidfd = -1;
		/* ENOPROTOOPT: kernel < 6.5, fall back to the pid. Anything
		 * else: the peer process no longer exists. */
		if (errno != ENOPROTOOPT) {
			unknown(p, "peer process exited before the connection was accepted");
			return 0;
		}
	}
	int r = read_cgroup(p->pid, p->pod_uid, sizeof p->pod_uid);
	int live = alive(pidfd, p->pid);
	p->pidfd_checked = pidfd >= 0;
	if (pidfd >= 0)
		close(pidfd);
	if (!live || r == -ENOENT || r == -ESRCH) {
		unknown(p, "peer process exited before the connection was accepted");
	} else if (r < 0) {
		unknown(p, "peer's cgroup cannot be read");
	} else if (r == 1) {
		p->kind = NVS_TENANT_POD;
		p->source = NVS_ID_CGROUP;
		history_add(p->pid, p->pod_uid);
	} else {
		p->kind = NVS_TENANT_UID;
		p->source = NVS_ID_CGROUP;
		p->pod_uid[0] = '\0';
	}
	return 0;
}

int nvs_peer_pod_uid_of_pid(pid_t pid, char *out, unsigned cap)
{
	if (pid <= 0 || cap < 37)
		return -1;
	return read_cgroup(pid, out, cap) == 1 ? 0 : -1;
}

int nvs_peer_own_pod(char *out, unsigned cap)
{
	return read_cgroup(getpid(), out, cap) == 1 ? 0 : -1;
}

int nvs_peer_same_tenant(const struct nvs_peer *viewer, enum nvs_tenant_kind kind, uid_t uid,
			 const char *pod_uid)
{
	if (viewer->kind != kind)
		return 0;
	switch (kind) {
	case NVS_TENANT_POD:
		return pod_uid && !strcmp(viewer->pod_uid, pod_uid);
	case NVS_TENANT_UID:
		return viewer->uid == uid;
	default:
		return 0;
	}
}

const char *nvs_tenant_kind_name(enum nvs_tenant_kind k)
{
	return k == NVS_TENANT_POD ? "pod" : k == NVS_TENANT_UID ? "uid" : "unknown";
}

const char *nvs_id_source_name(enum nvs_id_source s)
{
	return s == NVS_ID_CGROUP ? "cgroup" : s == NVS_ID_PID_HISTORY ? "pid-history" : "none";
}
