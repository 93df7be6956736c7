/*
 * Settings that survive a restart (docs/scheduler.md, "State file"): what
 * nvsharectl changed at run time (mode, TQ, capacity for all GPUs or one
 * GPU by UUID, idle release, and the limits set for a client in a Pod,
 * kept under the Pod's UID) is written to NVSHARE_STATE_FILE (default
 * /var/lib/nvshare/state.json) after every change and restored at start
 * over the configuration (flags, environment). Limits set for a process
 * outside a Pod are not written: the process keeps enforcing them and says
 * so when it reconnects (LIMITS_IN_FORCE, docs/protocol.md).
 *
 * A missing file is a first start. An unreadable, corrupt or unknown-version
 * file is reported, moved aside to <file>.bad and ignored: never fatal.
 * Writes are atomic (temporary file, fsync, rename, fsync of the
 * directory); a failed write is logged and scheduling goes on.
 *
 * Everything runs on the loop thread.
 */
#ifndef NVSHARE_SCHEDULER_STATE_FILE_H
#define NVSHARE_SCHEDULER_STATE_FILE_H

#include <stdint.h>

struct client;
struct gpu;

#define NVS_DEFAULT_STATE_FILE "/var/lib/nvshare/state.json"
#define NVS_STATE_FILE_VERSION 1
/* Pods with limits kept; beyond it the oldest entry is dropped (logged). */
#define NVS_STATE_MAX_PODS 1024

/* The file's path ("" or "none": off). 0, or -1 when too long. */
int nvs_state_file_set_path(const char *path);
const char *nvs_state_file_path(void);
/* Reads the file and applies its defaults to S.cfg (call after flags and
 * environment, before GPUs are added). Never fails. */
void nvs_state_file_load(void);

/* Applies the saved settings of this GPU (by UUID), as it is added. */
void nvs_state_apply_gpu(struct gpu *g);
/* Applies the limits saved for the client's Pod as its run-time
 * overrides (HELLO). */
void nvs_state_apply_client(struct client *cl);

/* Records a CTL_SET that was applied (gpu -1: all GPUs) and saves. */
void nvs_state_note_set(int gpu, uint32_t field, uint64_t value);
/* Records the run-time overrides of a client in a Pod for its Pod (no-op
 * for other clients) and saves. */
void nvs_state_note_pod(const struct client *cl);

#endif
