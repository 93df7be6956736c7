/*
 * The checkpoint of prepared claims: what nvshare-dra-plugin must remember
 * across its own restarts (the kubelet calls Unprepare later for a claim
 * prepared before, and counts on Prepare being idempotent), as the kubelet
 * keeps its own. One JSON file, rewritten whole (temporary file, fsync,
 * rename) after every change:
 *
 *   {"version": 1, "driver": "...", "node": "...", "checksum": "<16 hex>",
 *    "claims": [{"uid", "namespace", "name", "key", "pod": {"name",
 *       "uid"} | null, "core_limit", "memory_limit", "devices": [{"request",
 *       "pool", "device", "share_id", "uuid", "memory", "cores"}]}]}
 *
 * checksum: FNV-1a over the unformatted "claims" array, so that a file cut
 * short or edited by hand is noticed rather than half believed.
 */
#ifndef NVSHARE_DRA_CHECKPOINT_H
#define NVSHARE_DRA_CHECKPOINT_H

#include <stddef.h>

#include "prepared.h"

/* Writes the list. 0, or -1 with err. */
int nvs_dra_checkpoint_save(const char *path, const char *driver, const char *node,
			    const struct nvs_dra_prepared *list, char *err, size_t errcap);

/* Reads it into a new list (*list, caller frees each). Returns the number
 * of claims (0 also when the file does not exist), or -1 with err when the
 * file is there but unusable (not JSON, wrong checksum or version, another
 * driver or node, a claim with a bad field). */
int nvs_dra_checkpoint_load(const char *path, const char *driver, const char *node,
			    struct nvs_dra_prepared **list, char *err, size_t errcap);

#endif
