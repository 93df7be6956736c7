/*
 * Settings that survive a restart (docs/scheduler.md, "State file"): what
 * nvsharectl changed at run time (mode, TQ, capacity for all GPUs or one
 * GPU by UUID, idle release, and the limits set for a client in a Pod,
 * kept under the Pod's UID) is written to NVSHARE_STATE_FILE (default
 * /var/lib/nvshare/state.json) after every change, with the configured
 * value (flags, environment, defaults) it was set against. At start a
 * saved value applies over the configuration while the configuration is
 * still that one; when the configuration changed since, the configuration
 * wins and the saved value is dropped. Both are logged with the values.
 * Limits set for a process outside a Pod are not written: the process
 * keeps enforcing them and says so when it reconnects (LIMITS_IN_FORCE,
 * docs/protocol.md).
 *
 * Saved values are checked like configured ones (settings.h): a value out
 * of range makes the file corrupt; a capacity above a GPU's memory is not
 * restored. A missing file is a first start. An unreadable, corrupt,
 * non-regular, foreign-owned or unknown-version file is reported, moved
 * aside to <file>.bad and ignored: never fatal.
 *
 * The file's directory must be owned by the scheduler's user or root and
 * writable by no one else; otherwise the file is neither read nor written
 * (logged as an error naming the directory). Writes are atomic: a
 * temporary file created exclusively (O_EXCL, O_NOFOLLOW) in that
 * directory, fsync, rename, fsync of the directory; a failed write is
 * logged and scheduling goes on.
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

/* The file's path (a row of settings.def; "": off). Room is left for the
 * ".tmp" / ".bad" suffixes. */
extern char nvs_state_path[512];

/* Reads the file and applies its settings for all GPUs (call after the
 * settings are read, before GPUs are added). Never fails. */
void nvs_state_file_load(void);

/* Applies the saved settings of this GPU (by UUID), as it is added; drops
 * a saved capacity above its memory (logged). */
void nvs_state_apply_gpu(struct gpu *g);
/* Applies the limits saved for the client's Pod as its run-time
 * overrides (HELLO). */
void nvs_state_apply_client(struct client *cl);

/* Records a CTL_SET that was applied (gpu -1: all GPUs) and saves. */
void nvs_state_note_set(int gpu, uint32_t field, uint64_t value);
/* Forgets a setting nvsharectl reset (gpu -1: for all GPUs and every GPU)
 * and saves. */
void nvs_state_note_reset(int gpu, uint32_t field);
/* Records the run-time overrides of a client in a Pod for its Pod (no-op
 * for other clients) and saves. */
void nvs_state_note_pod(const struct client *cl);

#endif
