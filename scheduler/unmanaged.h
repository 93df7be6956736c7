/*
 * Unmanaged GPU processes: the lock and the limits are cooperative (only
 * processes that load libnvshare.so are gated), so the scheduler looks for
 * the others. Every NVSHARE_UNMANAGED_INTERVAL_MS (3/4 to 5/4 of it, at
 * random, and at start) it lists each NVML GPU's compute processes and
 * compares their host pids with its clients' SO_PEERCRED pids. A process
 * is managed only while its connection shows it: it attached that GPU and,
 * on a serialized GPU, runs kernels only while it holds the lock. Any
 * other process on a GPU, seen so for NVS_UNMANAGED_CONFIRM_MS (an extra
 * check comes then), or whose owner is known for short-lived ones, is
 * unmanaged: logged
 * once (with its Pod from its cgroup when readable, else uid/pid), counted
 * per GPU (g->unmanaged), listed in the admin status. Nothing is killed.
 *
 * NVSHARE_UNMANAGED=report (default) only reports; serialize also makes
 * the GPU serialized (mode auto) and keeps the memory the unmanaged
 * processes use out of its capacity (g->unmanaged_pinned), so managed
 * clients take turns instead of thrashing against memory they cannot see.
 *
 * The same passes gather the evidence claims are checked against
 * (struct cg_ev, claims.c): whether each client's process has a context on
 * its GPU, the memory NVML shows for it, and the GPU's memory no process
 * accounts for.
 *
 * Loop thread only. The work per check is bounded: at most
 * NVS_UNMANAGED_MAX_PROCS processes per GPU are read, at most
 * NVS_UNMANAGED_MAX_TRACKED are remembered (beyond that they are counted,
 * not logged one by one).
 */
#ifndef NVSHARE_SCHEDULER_UNMANAGED_H
#define NVSHARE_SCHEDULER_UNMANAGED_H

#include "nvml_api.h"

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
/* Short-lived processes, counted per owner (a Pod, else a uid): this many
 * leaving the GPU unmanaged (confirmed or not yet), within the window,
 * confirm the owner; its processes then count at once, and it
 * counts for the hold time (at least 4 intervals) after its last one. */
#define NVS_UNMANAGED_MAX_OWNERS 64u
#define NVS_UNMANAGED_OWNER_VANISHED 2u
#define NVS_UNMANAGED_OWNER_WINDOW_MS 60000u
#define NVS_UNMANAGED_OWNER_HOLD_MS 10000u
/* A client's process that runs kernels on a serialized GPU without the
 * lock (NVML's per-process utilization) in this many passes in a row is
 * unmanaged ("ungated"), its connection notwithstanding. */
#define NVS_UNGATED_PASSES 2u
/* Claims checked against NVML (claims.c, docs/security.md): a claim above
 * what NVML shows (its process's highest use + the GPU's unattributed
 * memory) by more than max(this, 1/8) is "unproven"; after this many
 * passes in which it could have run, it is counted as the evidence. */
#define NVS_EVIDENCE_SLACK (256ull << 20)
#define NVS_EVIDENCE_CHANCES 2u

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

/* The NVML functions detection calls: the driver's (dlsym'd by
 * nvs_unmanaged_start), or a test's (tests/core/t_unmanaged.c drives
 * detection on a virtual clock with its own). list_v1 is used only
 * without list_v2; mem_info and proc_util may be NULL. */
struct nvs_unmanaged_nvml {
	nvs_pfn_nvmlDeviceGetComputeRunningProcesses_v3 list_v2;
	nvs_pfn_nvmlDeviceGetComputeRunningProcesses list_v1;
	nvs_pfn_nvmlDeviceGetHandleByUUID by_uuid;
	nvs_pfn_nvmlDeviceGetMemoryInfo mem_info;
	nvs_pfn_nvmlDeviceGetProcessUtilization proc_util;
};
/* Detection on with f, from a clean slate: the first pass at now; seed
 * draws the passes' jitter. */
void nvs_unmanaged_begin(const struct nvs_unmanaged_nvml *f, uint64_t now, uint64_t seed);
/* The pass timer: a pass when due (next_deadline's value; 0 while
 * detection is off). Every decision takes the pass's now. */
void nvs_unmanaged_tick(uint64_t now);
uint64_t nvs_unmanaged_next_deadline(uint64_t now);

struct client_gpu;
/* Whether cg's process has a context on its GPU by NVML: 1, 0 (listed
 * nowhere there: no memory on it), -1 unknown (no NVML GPU, detection
 * off, pids unmatched so far, or no look possible now). Attached since the
 * last pass: looks now, at most every 50 ms a GPU. */
int nvs_unmanaged_context(struct client_gpu *cg);

/* The admin status section: policy, per-GPU counts, the processes. */
cJSON *nvs_unmanaged_json(uint64_t now);

#endif
