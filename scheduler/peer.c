#include "peer.h"

#include "log.h"
#include "parse.h"
#include "podsock.h"

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

/*
 * Was the process exiting when we looked? The kernel's own view, from
 * /proc whatever --proc-root says (a fact about the live process, which
 * tests do not fake). do_exit() sets PF_EXITING before it moves the task
 * out of its cgroups (cgroup_exit(): on cgroup v1 /proc/<pid>/cgroup then
 * shows the root of every hierarchy, "/"), so a read of the cgroup that is
 * followed by a look at a process that is neither PF_EXITING nor a zombie
 * read the cgroup the process lived in. A thread-group leader that called
 * pthread_exit() is a zombie with live threads: exiting too, for this.
 * Returns 1 exiting (or gone), 0 live.
 */
#define NVS_PF_EXITING 0x00000004u
static int exiting(pid_t pid)
{
	char path[48], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	ssize_t n;
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	/* "pid (comm) S ppid pgrp session tty_nr tpgid flags ...": comm may
	 * hold anything, ')' included: the fields start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 1;
	char state = p[2];
	if (state == 'Z' || state == 'X' || state == 'x' || state == '\0')
		return 1;
	unsigned long flags = 0;
	if (sscanf(p + 3, " %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return 1;
	return (flags & NVS_PF_EXITING) != 0;
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
	/* Read, then look: the cgroup counts only if, after the read, the
	 * process was neither exiting (exiting(), above) nor gone or replaced
	 * (alive(): through the pidfd, the same process). */
	int r = read_cgroup(p->pid, p->pod_uid, sizeof p->pod_uid);
	int leaving = exiting(p->pid);
	int live = alive(pidfd, p->pid);
	p->pidfd_checked = pidfd >= 0;
	if (pidfd >= 0)
		close(pidfd);
	if (!live || r == -ENOENT || r == -ESRCH) {
		unknown(p, "peer process exited before the connection was accepted");
	} else if (leaving) {
		unknown(p, "peer process was exiting when the connection was accepted");
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

void nvs_peer_bind(struct nvs_peer *p, const struct nvs_binding *b)
{
	p->ceil_core = b->core_limit;
	p->ceil_mem = b->mem_limit;
	snprintf(p->bind_key, sizeof p->bind_key, "%s", b->key);
	if (!b->name[0])
		return; /* no Pod: the identity is the cgroup's (podsock.h) */
	char cg[NVS_POD_UID_LEN] = "";
	if (p->kind == NVS_TENANT_POD && p->source == NVS_ID_CGROUP)
		snprintf(cg, sizeof cg, "%s", p->pod_uid);
	if (cg[0] && b->uid[0] && strcmp(cg, b->uid))
		NVS_WARN("pid %d connected on the socket of pod %s/%s (uid %s) but its cgroup "
			 "names pod uid %s: the socket decides",
			 (int)p->pid, b->ns, b->name, b->uid, cg);
	p->kind = NVS_TENANT_POD;
	p->source = NVS_ID_SOCKET;
	p->unknown_why = NULL;
	snprintf(p->cg_pod_uid, sizeof p->cg_pod_uid, "%s", cg);
	snprintf(p->pod_uid, sizeof p->pod_uid, "%s", b->uid);
	snprintf(p->pod_ns, sizeof p->pod_ns, "%s", b->ns);
	snprintf(p->pod_name, sizeof p->pod_name, "%s", b->name);
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
		/* A Pod not yet named by the watch ("", podsock.h) is no
		 * tenant to share a view with. */
		return pod_uid && pod_uid[0] && !strcmp(viewer->pod_uid, pod_uid);
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
	return s == NVS_ID_CGROUP	 ? "cgroup"
	       : s == NVS_ID_PID_HISTORY ? "pid-history"
	       : s == NVS_ID_SOCKET	 ? "socket"
					 : "none";
}
