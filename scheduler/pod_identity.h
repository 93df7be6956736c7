/*
 * Pod identity of a client: SO_PEERCRED pid (host PID namespace) ->
 * <proc-root>/<pid>/cgroup -> Pod UID -> the Pod in the watch cache
 * (name, namespace, nvshare annotations). Names a client reports are never
 * used. Loop thread only.
 */
#ifndef NVSHARE_SCHEDULER_POD_IDENTITY_H
#define NVSHARE_SCHEDULER_POD_IDENTITY_H

#include <stdint.h>

struct client;
struct nvs_k8s_cached_pod;

/* /proc, or NVSHARE_PROC_ROOT / --proc-root (tests: fake cgroup files). */
extern char nvs_proc_root[256];
/* Sets the proc root; -1 if too long. */
int nvs_pod_set_proc_root(const char *dir);

/* Reads <proc-root>/<pid>/cgroup and writes the Pod UID (36 chars + NUL)
 * into out. Returns 0, or -1 when the process is in no Pod (or gone). */
int nvs_pod_uid_of_pid(int pid, char *out, unsigned cap);

/* At HELLO: finds the client's Pod UID and, when the Pod is cached, its
 * name, namespace and annotation limits (not sent: ATTACH_GPU does). */
void nvs_pod_identify(struct client *cl);

/* The watch changed Pod p (added, modified, listed): update every client
 * in it and send SET_LIMITS where the effective limits changed. */
void nvs_pod_changed(const struct nvs_k8s_cached_pod *p);
/* Pod p is gone: its clients lose their annotation limits. */
void nvs_pod_removed(const struct nvs_k8s_cached_pod *p);

#endif
