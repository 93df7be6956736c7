/*
 * Pod sockets, the device plugin's side (docs/security.md "Pod sockets",
 * scheduler/podsock.h for the scheduler's). Each allocation (one
 * container's devices of one resource, one Allocate) gets a key of its own,
 * 64 random bits never used before, a directory <sock-dir>/pods/<key>/ that
 * Allocate mounts at the container's socket directory, and, once the
 * kubelet's PodResources API names the Pod, a binding file
 * <sock-dir>/bindings/<key>.json {"namespace", "name", "origin":
 * "device-plugin"}. The scheduler then listens on pods/<key>/scheduler.sock,
 * and every connection there is that Pod: the socket is the identity,
 * nothing the process does changes it.
 *
 * A key is bound once, to one Pod, for good: its record says which, and no
 * later event binds it to another (the same devices for another Pod get the
 * key of their own Allocate). A key that ends is removed, never reused.
 *
 *   Allocate            a new key; pods/<key>/ with a record of the
 *                       allocation in it, .device-plugin.json {"resource",
 *                       "devices", "seq", "pod" once bound}: it marks the
 *                       directory ours (the bindings directory is shared with
 *                       other binders, such as a DRA driver) and keeps it from
 *                       being empty, so that the scheduler, which removes an
 *                       empty Pod socket directory when its binding goes,
 *                       never removes one a container may have mounted. "seq"
 *                       orders the allocations (see below). A copy of the
 *                       record goes to the state directory (--state-dir, on
 *                       the node's disk), from which a directory lost with
 *                       the tmpfs the socket directory lives on (a reboot) is
 *                       made again: the kubelet restarts containers with the
 *                       mounts it checkpointed, without Allocate.
 *   PreStartContainer   asks PodResources which Pod holds exactly these
 *                       devices, binds its allocations of them, writes the
 *                       binding (temporary name, then rename) and waits,
 *                       bounded, for the scheduler's socket to appear, so the
 *                       container finds it when it starts.
 *   reconciliation      at start and every interval: binds what PodResources
 *                       implies and PreStartContainer could not, restores a
 *                       lost binding file, and removes an allocation (binding,
 *                       directory, record) that ended: a bound one at once
 *                       when its Pod is listed without its devices or another
 *                       Pod holds one of them, else after NVS_DP_STALE_LISTS
 *                       lists in a row without its Pod; an unbound one after
 *                       as many lists in which no container holds any of its
 *                       devices. A kubelet that restarted, which may list Pods
 *                       before it knows them all, starts that count again.
 *
 * Which allocations are the Pod's: PodResources names the Pod P whose
 * containers hold exactly the devices D, k of them (init containers and app
 * containers of one Pod may share devices). The kubelet gives a device to
 * one Pod at a time, so no allocation of D can follow P's until P ended:
 * P's allocations of D are the k newest of D ("seq"), and only those, and
 * only when not bound to another Pod, are bound to P. The reconciliation
 * reads PodResources before it looks at the allocations, so an allocation
 * made meanwhile is left for the next turn.
 *
 * An allocation that is not bound (from Allocate until its PreStartContainer,
 * or for good when PodResources cannot say: socket missing, an error, no
 * listed container with these devices, which is an init container's case)
 * has in its directory a hard link to the shared socket's inode,
 * pods/<key>/scheduler.sock: the container still reaches the scheduler,
 * which identifies it by its cgroup as before. Binding replaces the link
 * with the scheduler's Pod socket; nvs_dp_bind_tick keeps the links on the
 * live shared socket across scheduler restarts. A failing PodResources is
 * logged loudly once per outage.
 *
 * Thread-safe: Allocate and PreStartContainer run on the gRPC threads, the
 * reconciliation on the main thread.
 */
#ifndef NVSHARE_DP_BINDINGS_H
#define NVSHARE_DP_BINDINGS_H

#include <stddef.h>
#include <stdint.h>

#define NVS_DP_KEY_HEX 16
#define NVS_DP_STATE_DIR "/var/lib/nvshare/device-plugin"
#define NVS_DP_BIND_ORIGIN "device-plugin"
#define NVS_DP_RECORD ".device-plugin.json"
/* Lists in a row an allocation may be missing from PodResources before
 * it is removed (unless its devices are held by another one). */
#define NVS_DP_STALE_LISTS 10

struct nvs_dp_bind_cfg {
	const char *sock_dir;	  /* the scheduler's socket directory (--host-socket-dir) */
	const char *podres_sock;  /* the kubelet's PodResources socket */
	const char *state_dir;	  /* copies of the records on disk; NULL: none */
	const char *resources[2]; /* our resource names (the second may be NULL) */
	uint64_t wait_ms;	  /* PreStartContainer's wait for the scheduler's socket */
	unsigned list_timeout_ms; /* one PodResources List */
};

/* Checks (and creates) the directories. Returns 0, or -1 (logged) when
 * they cannot be used: Allocate then fails, naming why. */
int nvs_dp_bind_init(const struct nvs_dp_bind_cfg *cfg);

/* Allocate: a new key, pods/<key>/ and the record. Writes the directory's
 * path into dir. Returns 0, or -1 with why in err. */
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
