/*
 * Pod sockets, the device plugin's side (docs/security.md "Pod sockets",
 * scheduler/podsock.h for the scheduler's). Each allocation (one
 * container's devices of one resource) gets a key, a directory
 * <sock-dir>/pods/<key>/ that Allocate mounts at the container's socket
 * directory, and, once the kubelet's PodResources API names the Pod, a
 * binding file <sock-dir>/bindings/<key>.json {"namespace", "name",
 * "origin": "device-plugin"}. The scheduler then listens on
 * pods/<key>/scheduler.sock, and every connection there is that Pod: the
 * socket is the identity, nothing the process does changes it.
 *
 *   Allocate            creates pods/<key>/ with a record of the allocation
 *                       in it, .device-plugin.json {"resource", "devices"}:
 *                       it marks the directory ours (the bindings directory
 *                       is shared with other binders, such as a DRA driver)
 *                       and keeps it from being empty, so that the scheduler,
 *                       which removes an empty Pod socket directory when its
 *                       binding goes, never removes one a container may have
 *                       mounted (a directory made again is not the one the
 *                       container sees).
 *   PreStartContainer   asks PodResources which Pod holds exactly these
 *                       devices, writes the binding (temporary name, then
 *                       rename) and waits, bounded, for the scheduler's
 *                       socket to appear, so the container finds it when it
 *                       starts.
 *   reconciliation      at start and every interval: writes the bindings
 *                       PodResources implies, and removes an allocation (its
 *                       binding, directory and record) that PodResources no
 *                       longer lists: at once when another allocation now
 *                       holds one of its devices (it surely ended), else
 *                       after NVS_DP_STALE_LISTS lists in a row without it
 *                       (5 minutes at the default 30 s); a kubelet that
 *                       restarted, which may list Pods before it knows them
 *                       all, starts that count again.
 *
 * An allocation that is not bound (from Allocate until its PreStartContainer,
 * or for good when PodResources cannot say: socket missing, an error, no
 * Pod with these devices) has in its directory a hard link to the shared
 * socket's inode, pods/<key>/scheduler.sock: the container still reaches
 * the scheduler, which identifies it by its cgroup as before. Binding
 * replaces the link with the scheduler's Pod socket; nvs_dp_bind_tick keeps
 * the links on the live shared socket across scheduler restarts. A failing
 * PodResources is logged loudly once per outage.
 *
 * Thread-safe: Allocate and PreStartContainer run on the gRPC threads, the
 * reconciliation on the main thread.
 */
#ifndef NVSHARE_DP_BINDINGS_H
#define NVSHARE_DP_BINDINGS_H

#include <stddef.h>
#include <stdint.h>

#define NVS_DP_KEY_HEX 16
#define NVS_DP_BIND_ORIGIN "device-plugin"
#define NVS_DP_RECORD ".device-plugin.json"
/* Lists in a row an allocation may be missing from PodResources before
 * it is removed (unless its devices are held by another one). */
#define NVS_DP_STALE_LISTS 10

struct nvs_dp_bind_cfg {
	const char *sock_dir;	  /* the scheduler's socket directory (--host-socket-dir) */
	const char *podres_sock;  /* the kubelet's PodResources socket */
	const char *resources[2]; /* our resource names (the second may be NULL) */
	uint64_t wait_ms;	  /* PreStartContainer's wait for the scheduler's socket */
	unsigned list_timeout_ms; /* one PodResources List */
};

/* The allocation's key: 16 lower-case hex digits of a 64-bit FNV-1a hash of
 * the resource name and the sorted device IDs. The kubelet checkpoints
 * Allocate's answer, which names pods/<key>/, for the container's life and
 * across plugin upgrades: this function must never change. Returns 0, or
 * -1 when out of memory. */
int nvs_dp_bind_key(const char *resource, const char *const *ids, size_t n,
		    char key[NVS_DP_KEY_HEX + 1]);

/* Checks (and creates) the directories. Returns 0, or -1 (logged) when
 * they cannot be used: Allocate then fails, naming why. */
int nvs_dp_bind_init(const struct nvs_dp_bind_cfg *cfg);

/* Allocate: pods/<key>/ and the record. Writes the directory's path into
 * dir. Returns 0, or -1 with why in err. */
int nvs_dp_bind_allocate(const char *resource, const char *const *ids, size_t n, char *dir,
			 size_t cap, char *err, size_t errcap);

/* PreStartContainer: binds the allocation to its Pod, or falls back (see
 * above). Never fails the container: every outcome is logged. */
void nvs_dp_bind_prestart(const char *resource, const char *const *ids, size_t n);

/* The reconciliation, every interval. Returns 0 when PodResources
 * answered. */
int nvs_dp_bind_reconcile(void);

/* The kubelet (re)started: absences counted so far are forgotten (a
 * kubelet that has just started may list Pods before it knows them all). */
void nvs_dp_bind_kubelet_restarted(void);

/* Main loop, every turn: re-links unbound allocations when the shared
 * socket was re-created (a restarted scheduler). Cheap: one stat(). */
void nvs_dp_bind_tick(void);

#endif
