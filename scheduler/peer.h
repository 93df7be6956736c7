/*
 * Who is on the other end of a connection, pinned when it is accepted
 * (docs/security.md): SO_PEERCRED (uid, host pid), the process's cgroup
 * (<proc-root>/<pid>/cgroup) and from it the tenant: a Kubernetes Pod,
 * a host uid outside Kubernetes, or unknown. Never from what the peer
 * says: HELLO's pid and name are claims.
 *
 * Race-free where the kernel allows it: SO_PEERPIDFD (Linux >= 6.5) names
 * the process that connected; the cgroup is read by pid and the pidfd is
 * then signalled with 0 to confirm that process was still alive (so the
 * pid was not reused in between). Older kernels: SO_PEERCRED, an
 * immediate read and kill(pid, 0) afterwards (a pid reused in that window
 * is not detected; documented).
 *
 * A peer that is gone, invisible (pid 0: another PID namespace) or whose
 * cgroup cannot be read is an UNKNOWN tenant: pod_identity.c gives it the
 * limits of the Pod its pid was last seen in, else the unknown-tenant
 * limits; it sees no one in a tenant status and is refused on the admin
 * socket.
 */
#ifndef NVSHARE_SCHEDULER_PEER_H
#define NVSHARE_SCHEDULER_PEER_H

#include <stdint.h>
#include <sys/types.h>

#include "core/tenant.h"
#include "names.h"

struct nvs_peer {
	pid_t pid; /* SO_PEERCRED at connect, host PID namespace (0: invisible) */
	uid_t uid;
	gid_t gid;
	enum nvs_tenant_kind kind;
	enum nvs_id_source source;
	char pod_uid[NVS_POD_UID_LEN]; /* kind POD: 36 chars, dashes */
	const char *unknown_why;       /* kind UNKNOWN: static text for logs/status */
	int pidfd_checked;	       /* the read was confirmed through a pidfd */
	/* Source SOCKET: the Pod socket's binding (podsock.h). pod_uid may be
	 * "" until the Pod watch names the Pod (pod_identity.c). */
	char bind_key[17];
	char pod_ns[NVS_K8S_NS_LEN];
	char pod_name[NVS_K8S_NAME_LEN];
	/* Source SOCKET: the Pod a sound cgroup read named, "" none. */
	char cg_pod_uid[NVS_POD_UID_LEN];
	/* Accepted on a Pod socket whose binding has a ceiling (podsock.h):
	 * its limits never go above these. 0: none. */
	uint32_t ceil_core;
	uint64_t ceil_mem;
};

/* /proc, or NVSHARE_PROC_ROOT / --proc-root: set only by whoever starts
 * the scheduler (tests: fake cgroup files). Peers cannot influence it. */
extern char nvs_proc_root[256];
/* Sets the proc root; -1 if too long. */
int nvs_peer_set_proc_root(const char *dir);

/* Resolves the peer of an accepted socket. Returns 0 (p filled, possibly
 * kind UNKNOWN), or -1 when not even SO_PEERCRED works (logged). */
int nvs_peer_resolve(int fd, struct nvs_peer *p);

/* A connection accepted on a Pod socket (podsock.h) belongs to that
 * socket's Pod, whatever its process did: the binding overrides what
 * nvs_peer_resolve found (kind POD, source SOCKET; the binding's UID, or
 * "" until the watch names the Pod, pod_identity.c). What a sound cgroup
 * read said is kept in cg_pod_uid, so that a disagreement is logged.
 * The binding's ceiling (ceil_core, ceil_mem) comes along; a binding that
 * names no Pod (a shared DRA claim) gives only that, and the identity
 * stays what nvs_peer_resolve found. */
struct nvs_binding;
void nvs_peer_bind(struct nvs_peer *p, const struct nvs_binding *b);

/* The Pod UID of any host process (its cgroup, outermost pod<uid>), e.g.
 * one NVML lists on a GPU. 0 with out filled (cap >= 37), -1 when it is in
 * no Pod or its cgroup cannot be read. Not pinned: for reports only. */
int nvs_peer_pod_uid_of_pid(pid_t pid, char *out, unsigned cap);

/* The Pod UID the scheduler itself runs in (its own cgroup), written into
 * out (cap >= 37). Returns 0, or -1 when it runs in no Pod. */
int nvs_peer_own_pod(char *out, unsigned cap);

/* Does a client of (kind, uid, pod_uid) belong to viewer's tenant? An
 * unknown viewer belongs to no tenant, and an unknown client to none. */
int nvs_peer_same_tenant(const struct nvs_peer *viewer, enum nvs_tenant_kind kind, uid_t uid,
			 const char *pod_uid);

const char *nvs_tenant_kind_name(enum nvs_tenant_kind k);
const char *nvs_id_source_name(enum nvs_id_source s);

#endif
