/*
 * The files a prepared claim puts on the node (docs/dra.md "What Prepare
 * writes"):
 *
 *   <host-socket-dir>/bindings/<key>.json   the scheduler's Pod-socket
 *       binding (scheduler/podsock.h): {"namespace", "name", "uid",
 *       "origin": "dra", "claim": "<ns>/<name>", "core_limit",
 *       "memory_limit"}; "name" and "uid" only for a claim made for one
 *       Pod. Written to a temporary name and renamed; mode 0600.
 *   <host-socket-dir>/pods/<key>/           the directory the scheduler
 *       listens in, mounted into the claim's containers at the client
 *       socket directory.
 *   <cdi-spec-dir>/nvshare.com-claim_<uid>.json  the claim's CDI spec, kind
 *       nvshare.com/claim: one device <uid>-<device> per GPU (its device
 *       node) and claim-wide edits: LD_PRELOAD of the library, the library
 *       and socket directory mounts, the control device nodes.
 *
 * <key>: 16 hex digits of FNV-1a over "dra:" and the claim's UID, the same
 * after a restart.
 */
#ifndef NVSHARE_DRA_FILES_H
#define NVSHARE_DRA_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "prepared.h"

#define NVS_DRA_CDI_KIND "nvshare.com/claim"
#define NVS_DRA_ORIGIN "dra"

struct nvs_dra_files_cfg {
	const char *host_sock_dir;	/* the scheduler's client socket directory */
	const char *container_sock_dir; /* where containers see their Pod socket */
	const char *host_lib_dir, *container_lib_dir, *lib_name;
	int require_scheduler; /* NVSHARE_REQUIRE_SCHEDULER=1 in containers */
	const char *cdi_dir;
	const char *dev_root; /* where the node's /dev is seen */
};

/* The binding key of a claim UID. */
void nvs_dra_key(const char *claim_uid, char out[NVS_DRA_KEY_HEX + 1]);

/* Writes data to path through a temporary file in the same directory,
 * fsync and rename (mode: of the new file). 0, or -1 with err. */
int nvs_dra_write_atomic(const char *path, const char *data, unsigned mode, char *err,
			 size_t errcap);

/* Paths of a claim's files. */
void nvs_dra_binding_path(const struct nvs_dra_files_cfg *c, const char *key, char *out,
			  size_t cap);
void nvs_dra_pod_dir(const struct nvs_dra_files_cfg *c, const char *key, char *out, size_t cap);
void nvs_dra_cdi_path(const struct nvs_dra_files_cfg *c, const char *uid, char *out, size_t cap);
/* A device's fully qualified CDI name: nvshare.com/claim=<uid>-<device>. */
void nvs_dra_cdi_id(const char *uid, const char *device, char *out, size_t cap);

/* The binding's JSON text (malloc()ed). */
char *nvs_dra_binding_json(const struct nvs_dra_prepared *p);
/* Writes the binding. 0, or -1 with err (the scheduler's bindings
 * directory missing: it is not running, or on another directory). */
int nvs_dra_write_binding(const struct nvs_dra_files_cfg *c, const struct nvs_dra_prepared *p,
			  char *err, size_t errcap);

/* The CDI spec of a prepared claim; minors[i] is dev[i]'s GPU's
 * /dev/nvidia<minor> (-1 unknown). 0, or -1 with err (no NVIDIA control
 * device node under dev_root: nothing to hand a container). */
int nvs_dra_write_cdi(const struct nvs_dra_files_cfg *c, const struct nvs_dra_prepared *p,
		      const int *minors, char *err, size_t errcap);

/* Removes the claim's binding, CDI spec and (when empty) its Pod socket
 * directory; missing files are fine. */
void nvs_dra_remove_files(const struct nvs_dra_files_cfg *c, const struct nvs_dra_prepared *p);

#endif
