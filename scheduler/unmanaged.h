/*
 * Unmanaged GPU processes: the lock and the limits are cooperative (only
 * processes that load libnvshare.so are gated), so the scheduler looks for
 * the others. Every NVSHARE_UNMANAGED_INTERVAL_MS (and at start) it lists
 * each NVML GPU's compute processes and compares their host pids with its
 * clients' SO_PEERCRED pids. A process on a GPU without an nvshare
 * connection, seen so for NVS_UNMANAGED_CONFIRM_MS (an extra check comes
 * then), is unmanaged: logged
 * once (with its Pod from its cgroup when readable, else uid/pid), counted
 * per GPU (g->unmanaged), listed in the admin status. Nothing is killed.
 *
 * NVSHARE_UNMANAGED=report (default) only reports; serialize also makes
 * the GPU serialized (mode auto) and keeps the memory the unmanaged
 * processes use out of its capacity (g->unmanaged_pinned), so managed
 * clients take turns instead of thrashing against memory they cannot see.
 *
 * Loop thread only. The work per check is bounded: at most
 * NVS_UNMANAGED_MAX_PROCS processes per GPU are read, at most
 * NVS_UNMANAGED_MAX_TRACKED are remembered (beyond that they are counted,
 * not logged one by one).
 */
#ifndef NVSHARE_SCHEDULER_UNMANAGED_H
#define NVSHARE_SCHEDULER_UNMANAGED_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* A process must be seen without a connection this long before it counts:
 * longer than a client's reconnect period (1 s +- 25 %), so clients
 * reconnecting after a scheduler restart are not reported. */
#define NVS_UNMANAGED_CONFIRM_MS 1500u
#define NVS_UNMANAGED_MAX_PROCS 256u
#define NVS_UNMANAGED_MAX_TRACKED 256u
/* New unmanaged processes logged one by one per check; the rest in one
 * summary line (a Pod starting processes in a loop cannot flood the log). */
#define NVS_UNMANAGED_LOG_PER_CHECK 16u

enum nvs_unmanaged_policy {
	NVS_UNMANAGED_REPORT = 0,
	NVS_UNMANAGED_SERIALIZE = 1,
};

/* NVSHARE_UNMANAGED, NVSHARE_UNMANAGED_INTERVAL_MS (settings.def). */
struct nvs_unmanaged_config {
	unsigned policy;      /* enum nvs_unmanaged_policy */
	uint32_t interval_ms; /* 0: detection off */
};

extern struct nvs_unmanaged_config nvs_unmanaged_cfg;

/* After the GPUs are discovered: finds NVML's process query, runs the
 * first check and registers the next ones with the event loop (loop.h,
 * NVS_LOOP_OBSERVE). Without NVML detection is off (logged). */
void nvs_unmanaged_start(void);

/* The admin status section: policy, per-GPU counts, the processes. */
cJSON *nvs_unmanaged_json(uint64_t now);

#endif
