/*
 * Pod sockets (docs/security.md "Pod sockets"): one client socket per
 * device allocation, so that the socket a client connects on is its
 * identity. Nothing a process does (exit while connecting, hand its
 * socket to another process, change its cgroup) changes which Pod a
 * connection on a Pod socket belongs to: only that Pod's containers have
 * the socket's directory mounted.
 *
 * Who binds: the device plugin (or the DRA driver) writes one file per
 * allocation, <sock-dir>/bindings/<key>.json, {"namespace", "name",
 * optionally "uid", "origin"}, where <key> is 16 lower-case hex digits,
 * and mounts <sock-dir>/pods/<key>/ into the allocation's containers at
 * the client socket directory.
 *
 * A ceiling (the DRA driver's: what a ResourceClaim consumed) may come
 * with it: "core_limit" (integer percent 1..100) and "memory_limit"
 * (integer bytes). Every client accepted on the socket then has limits
 * no higher than these, whatever raises them: annotations, its
 * environment, nvsharectl --set-client (clients.c). A binding may also
 * name no Pod ("namespace" alone, with a ceiling): a claim several Pods
 * share; its clients are identified by their cgroup, as on the shared
 * socket, and get the ceiling. The ceiling is pinned when a client
 * connects, as its identity is. This module keeps one listening socket,
 * <sock-dir>/pods/<key>/scheduler.sock, per binding file: created when the
 * file appears (inotify, and a scan once a second), closed and removed
 * when it goes. The bindings directory must be the scheduler user's and
 * writable by nobody else; each file likewise.
 *
 * Loop thread only.
 */
#ifndef NVSHARE_SCHEDULER_PODSOCK_H
#define NVSHARE_SCHEDULER_PODSOCK_H

#include <stdint.h>

#include "names.h"

#define NVS_BIND_KEY_HEX 16
#define NVS_BIND_DIR "bindings"
#define NVS_PODS_DIR "pods"
/* Pod sockets at most (a node runs ~110 Pods by default). */
#define NVS_MAX_POD_SOCKETS 1024u

struct nvs_binding {
	char key[NVS_BIND_KEY_HEX + 1];
	char ns[NVS_K8S_NS_LEN];
	char name[NVS_K8S_NAME_LEN];
	char uid[NVS_POD_UID_LEN]; /* "" when the binder did not know it */
	char origin[32];	   /* who wrote it: "device-plugin", "dra", ... */
	/* name "": no Pod, identity from the cgroup (a shared claim) */
	uint32_t core_limit; /* ceiling, percent; 0 none */
	uint64_t mem_limit;  /* ceiling, bytes; 0 none */
};

/* Creates <sock-dir>/bindings (0700) and <sock-dir>/pods (0755) when
 * missing, refuses ones that others may write, and starts watching the
 * bindings. Called by server.c once the client socket listens. Returns 0,
 * or -1 (logged) when the directories are unsafe. */
int nvs_podsock_start(void);
/* Closes every Pod socket (removing the socket files). */
void nvs_podsock_stop(void);
/* Pod sockets listening now. */
unsigned nvs_podsock_count(void);

#endif
