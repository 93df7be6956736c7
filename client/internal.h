/*
 * Internals shared by the client library's files (not an interface for
 * other components; those are sched_client.h, accounting.h, real.h).
 */
#ifndef NVSHARE_CLIENT_INTERNAL_H
#define NVSHARE_CLIENT_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "client/sched_client.h"
#include "client/wrappers.h"
#include "log.h"

/* ---- configuration (config.c) ---- */
struct nvs_config {
	int disable;	    /* NVSHARE_DISABLE=1: every wrapper passes through */
	int single_oversub; /* NVSHARE_ENABLE_SINGLE_OVERSUB=1 */
	uint64_t mem_limit; /* NVSHARE_GPU_MEMORY_LIMIT in bytes, UINT64_MAX if unset,
			       lowered to mem_request */
	/* NVSHARE_GPU_MEMORY_REQUEST (bytes; the device plugin sets it from
	 * the Pod's nvshare.com/gpu-memory), 0 if unset. It only lowers
	 * mem_limit: the process can change its own environment, so the
	 * scheduler takes the request from the Pod spec to raise anything. */
	uint64_t mem_request;
	/* NVSHARE_UNIFIED_MEMORY (default 1). 0: cuMemAlloc* stay ordinary
	 * device memory (CUDA IPC works; no oversubscription for this
	 * process), still gated, limited and accounted (as pinned). */
	int unified_memory;
	/* NVSHARE_REQUIRE_SCHEDULER=1: gated calls fail while the scheduler
	 * cannot be reached (client/sched_require.c). */
	int require_scheduler;
};
extern struct nvs_config nvs_cfg;
/* Reads the environment once (idempotent, thread-safe). */
void nvs_config_load(void);
/* Re-reads it (tests; fork child). */
void nvs_config_reload(void);
/* Logs the library's version at DEBUG (version.c). */
void nvs_log_version(void);

/* ---- lazy init (entry.c) ---- */
extern atomic_int nvs_inited;
void nvs_init_slow(void);
/* Every CUDA wrapper starts with this: loads libcuda, resolves the real
 * pointers and starts the scheduler client, once (again in a fork child). */
static inline void nvs_init(void)
{
	if (__builtin_expect(!atomic_load_explicit(&nvs_inited, memory_order_acquire), 0))
		nvs_init_slow();
}
/* glibc's dlsym (never ours). Resolved on first use. */
void *nvs_dlsym_real(void *handle, const char *name);
/* Library the real driver pointers come from (NULL before init). */
extern void *nvs_libcuda_handle;
/* NVML real pointers (hooks_nvml.c resolves them on its own: nvidia-smi
 * never loads libcuda). */
void nvs_nvml_resolve(void);

/* Device ordinal of the calling thread's current context; 0 on success. */
CUresult nvs_current_device(int *dev);
/* First use of a device by this process: tells the scheduler client. */
void nvs_device_used(int dev);

/* For code on the dlsym path: the ASan runtime calls dlsym(RTLD_NEXT, ...)
 * before its shadow memory exists (SAN=1 builds). */
#define NVS_NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize("undefined")))

/* ---- the table (table.c) ---- */
enum nvs_family {
	NVS_FAM_ENTRY,
	NVS_FAM_RT,
	NVS_FAM_INIT,
	NVS_FAM_CTX,
	NVS_FAM_ALLOC,
	NVS_FAM_POOL,
	NVS_FAM_VMM,
	NVS_FAM_ARRAY,
	NVS_FAM_INFO,
	NVS_FAM_IPC,
	NVS_FAM_CAPTURE,
	NVS_FAM_LAUNCH,
	NVS_FAM_COPY,
	NVS_FAM_LEGACY,
	NVS_FAM_NVML,
	NVS_FAM_USE,
	NVS_FAM_USE_NVML,
};
struct nvs_entry {
	const char *name; /* exact ABI name */
	void *wrapper;	  /* NULL for NVS_USE entries */
	void **real;	  /* slot in nvs_real */
	unsigned char family;
};
extern const struct nvs_entry nvs_entries[];
extern const unsigned nvs_entries_count;
/* Exact-name lookup among wrapped names (NVS_USE entries excluded). No
 * locks, no allocation: safe on the dlsym path. */
const struct nvs_entry *nvs_table_find(const char *name);
/* Whether `name` (an exported driver name we do not wrap) is another
 * variant (_vN, _ptsz, _ptds) of a base name whose wrapped variants are
 * gated or accounted: such a pointer would bypass us. */
int nvs_table_is_unknown_variant_of_guarded(const char *name);

/* ---- substitution (procaddr.c) ---- */
enum nvs_subst {
	NVS_SUBST_KEEP = 0,	/* not a driver pointer we know: leave it */
	NVS_SUBST_REPLACED = 1, /* *pfn now points to our wrapper */
	NVS_SUBST_REFUSE = 2,	/* unknown variant of a guarded name: fail closed */
};
/* Given a pointer handed out by the driver (or by libcudart from it),
 * replaces it by our wrapper for the exact ABI name it is. */
enum nvs_subst nvs_substitute(void **pfn, const char *asked);

/* Which library a code address lies in. */
enum nvs_lib { NVS_LIB_OTHER, NVS_LIB_CUDA, NVS_LIB_NVML, NVS_LIB_CUDART, NVS_LIB_SELF };
enum nvs_lib nvs_lib_of_path(const char *path);

/* Gated wrappers (launch, copy): init, refuse if unresolved, gate, call,
 * leave the gate's in-flight count. */
#define NVS_GATED_CALL(member, args)                                                               \
	do {                                                                                       \
		nvs_init();                                                                        \
		if (__builtin_expect(!nvs_real.member, 0))                                         \
			return nvs_unresolved(#member);                                            \
		if (nvs_cfg.disable)                                                               \
			return nvs_real.member args;                                               \
		if (__builtin_expect(nvs_cfg.require_scheduler, 0) && !nvs_sched_require_ok())     \
			return nvs_require_refused(#member);                                       \
		nvs_gate();                                                                        \
		CUresult r_ = nvs_real.member args;                                                \
		nvs_gate_done();                                                                   \
		return r_;                                                                         \
	} while (0)

/* Logs once per name and returns CUDA_ERROR_NOT_SUPPORTED. */
CUresult nvs_unresolved(const char *name);
CUresult nvs_legacy_refused(const char *name);
/* NVSHARE_REQUIRE_SCHEDULER=1 and no scheduler: warns (rate-limited) and
 * returns CUDA_ERROR_SYSTEM_NOT_READY. */
CUresult nvs_require_refused(const char *name);

#endif
