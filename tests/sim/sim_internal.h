/*
 * Internals shared by the fake driver's sources. Two layers:
 *  - the shared state (sim_state.c): what every process using the same
 *    NVSHARE_SIM_STATE_DIR sees, in one mmap()ed file guarded by a robust
 *    process-shared mutex: GPU config, busy-until, memory use, resident
 *    managed pages (a slot table per GPU), counters, process table;
 *  - per-process objects (contexts, streams, allocations) kept in ordinary
 *    memory, guarded by sim_mu.
 */
#ifndef NVSHARE_TESTS_SIM_INTERNAL_H
#define NVSHARE_TESTS_SIM_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The driver's own view of cuda.h: every exported ABI (cuMemAlloc_v2,
 * cuMemAlloc, cuLaunchKernel_ptsz...) declared under its exact name, so our
 * definitions are checked against the real prototypes. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "sim_api.h"

#define SIM_MAX_GPUS NVSHARE_SIM_MAX_GPUS
#define SIM_MAX_PROCS 256
#define SIM_PAGE NVSHARE_SIM_PAGE_SIZE
#define SIM_DISCARD_POISON NVSHARE_SIM_DISCARD_POISON
#define SIM_UTIL_BUCKET_NS 10000000ULL /* utilization granularity: 10 ms */
#define SIM_UTIL_BUCKETS 400	       /* 4 s of history/future */
#define SIM_PREFETCH_LOG 1024
#define SIM_DRIVER_VERSION 13000

/* ---- shared state (layout is the file format; bump SIM_STATE_VERSION) ---- */

struct sim_counters {
	uint64_t prefetch_h2d_bytes, prefetch_h2d_ns;
	uint64_t prefetch_d2h_bytes, prefetch_d2h_ns;
	uint64_t fault_bytes, fault_ns;
	uint64_t evictions, evicted_bytes, evict_ns;
	uint64_t kernels, kernel_busy_ns;
	uint64_t discard_bytes;	 /* cuMemDiscard[AndPrefetch]BatchAsync */
	uint64_t stray_accesses; /* GPU reads of discarded pages, accesses to unmapped VMM */
};

/* A resident managed page. Owner identified by (pid, alloc_id, page). */
struct sim_slot {
	int32_t pid; /* 0 = free */
	uint32_t page;
	uint64_t alloc_id;
	uint64_t bytes; /* bytes of the allocation in this page (<= 2 MiB) */
	uint64_t last_use;
};

struct sim_gpu {
	char name[96];
	char uuid[96];
	uint64_t total;
	uint64_t busy_until;
	uint64_t resident; /* sum of slots' bytes */
	struct sim_counters c;
	uint64_t util_epoch[SIM_UTIL_BUCKETS]; /* bucket number held */
	uint64_t util_busy[SIM_UTIL_BUCKETS];  /* busy ns in it */
	uint64_t slot_off;		       /* byte offset of this GPU's slots in the file */
	uint32_t nslots;
	uint32_t slot_hint;
};

struct sim_proc {
	int32_t pid;			 /* 0 = free entry */
	uint32_t ctx_mask;		 /* GPUs this process holds a context on */
	uint64_t used[SIM_MAX_GPUS];	 /* device allocations */
	uint64_t resident[SIM_MAX_GPUS]; /* managed pages on the GPU */
	uint64_t host_pinned;		 /* host bytes it pinned (cuMemHostRegister) */
	struct sim_counters c[SIM_MAX_GPUS];
	/* Its latest kernel on each GPU (sim_now times): what NVML's
	 * per-process utilization samples report. */
	uint64_t k_start[SIM_MAX_GPUS], k_end[SIM_MAX_GPUS];
};

struct sim_shared {
	uint32_t magic, version;
	uint64_t file_size;
	pthread_mutex_t lock; /* robust, process-shared */
	uint32_t ngpus;
	uint64_t prefetch_seq;
	struct nvshare_sim_prefetch prefetch[SIM_PREFETCH_LOG];
	struct sim_proc procs[SIM_MAX_PROCS];
	struct sim_gpu gpu[SIM_MAX_GPUS];
	/* slot tables follow */
};

/* ---- per-process configuration (environment, read once) ---- */
struct sim_config {
	uint64_t kernel_ns;
	uint64_t max_pending;		    /* launches a stream holds before a launch blocks */
	double h2d_bps, d2h_bps, fault_bps; /* bytes per second */
	uint64_t lock_hold_us;		    /* NVSHARE_SIM_LOCK_HOLD_US (tests) */
	/* NVML's per-process used memory counts the process's resident
	 * managed pages (NVSHARE_SIM_NVML_PROC_MANAGED, default 1); 0: only
	 * its device allocations, as drivers have been seen to report. */
	int nvml_proc_managed;
	uint64_t pin_limit;	 /* NVSHARE_SIM_PIN_LIMIT: host bytes cuMemHostRegister pins */
	uint64_t pin_us_per_mib; /* NVSHARE_SIM_PIN_US_PER_MIB: what pinning costs */
};
extern struct sim_config sim_cfg;
extern struct sim_shared *sim_sh;

/* sim_state.c */
void sim_state_init(void); /* idempotent; every entry point calls it */
void sim_lock(void);
void sim_unlock(void);
uint64_t sim_now(void);
void sim_sleep_until(uint64_t t);
struct sim_slot *sim_slots(int dev);
struct sim_proc *sim_self_locked(void); /* this process's entry (created) */
struct sim_proc *sim_proc_find_locked(int pid);
void sim_reap_dead_locked(void);
uint64_t sim_gpu_used_locked(int dev); /* device allocations, all processes */
void sim_util_add_locked(int dev, uint64_t start, uint64_t end);
unsigned sim_util_percent_locked(int dev, uint64_t now);
uint64_t sim_xfer_ns(uint64_t bytes, double bps);
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int sim_log_enabled(void);

/* Per-process lock for contexts, streams, allocation registry. */
extern pthread_mutex_t sim_mu;

/* ---- contexts (sim_device.c) ---- */
struct sim_stream;
struct sim_ctx {
	uint32_t magic;
	int dev;
	unsigned flags;
	int primary;
	int refs; /* primary: retain count */
	int active;
	struct sim_stream *legacy; /* the NULL stream */
	uint64_t retired;	   /* latest tail of its destroyed streams */
};
#define SIM_CTX_MAGIC 0x43545853u
struct sim_ctx *sim_ctx_current(void);
struct sim_ctx *sim_ctx_check(CUcontext c);
int sim_dev_valid(CUdevice d);
int sim_initialized(void);
#define SIM_REQUIRE_INIT()                                                                         \
	do {                                                                                       \
		if (!sim_initialized())                                                            \
			return CUDA_ERROR_NOT_INITIALIZED;                                         \
	} while (0)

/* ---- streams & events (sim_stream.c) ---- */
struct sim_graph;
struct sim_stream {
	uint32_t magic;
	struct sim_ctx *ctx;
	uint64_t tail; /* completion time of the last queued work */
	/* Completion times of its last launches (a ring of sim_cfg.max_pending
	 * slots once full, grown up to that before): the bound on pending work. */
	uint64_t *done;
	size_t done_cap;
	uint64_t launches; /* launches recorded in `done` so far */
	unsigned flags;
	int prio;
	int kind;		  /* 0 created, 1 legacy, 2 per-thread */
	int capturing;		  /* CUstreamCaptureStatus */
	int capture_mode;	  /* CUstreamCaptureMode it began with */
	pthread_t capture_thread; /* the thread that began it */
	uint64_t capture_id;
	struct sim_graph *capture_graph;
};
#define SIM_STREAM_MAGIC 0x4d525453u
/* Resolves a stream handle; per_thread: NULL means the per-thread stream
 * (the _ptsz/_ptds entry points). NULL if invalid or no context. */
struct sim_stream *sim_stream_get(CUstream h, int per_thread);
/* Start time for new work on s: after its tail and, for the legacy stream,
 * after every blocking stream of its context. */
uint64_t sim_stream_ready(struct sim_stream *s);
/* The push buffer's bound: sleeps until fewer than sim_cfg.max_pending
 * launches queued on s are incomplete. Called before queuing a launch. */
void sim_stream_admit(struct sim_stream *s);
/* Queues work on s that ends at `end` (raises its tail); launch: it is a
 * launch of its own, recorded for sim_stream_admit (its completion: the new
 * tail, as a stream completes its work in order). */
void sim_stream_enqueue(struct sim_stream *s, uint64_t end, int launch);
void sim_ctx_tail_all(struct sim_ctx *ctx, uint64_t *max_tail);
/* Any stream of ctx capturing? Invalidates those captures (a context-wide
 * sync during capture is illegal) and returns 1. */
int sim_ctx_capture_violation(struct sim_ctx *ctx);
/* A "potentially unsafe" call (cuMemHostRegister) during capture, as CUDA
 * rules it (cuThreadExchangeStreamCaptureMode): refused when the calling
 * thread is not in relaxed mode and a capture begun in global mode is under
 * way in the process (any thread's), or one of the thread's own not begun
 * in relaxed mode. Those captures are invalidated; returns
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, else CUDA_SUCCESS. */
CUresult sim_capture_unsafe_call(const char *what);
int sim_phys(CUdevice d);
CUdevice sim_ordinal(int phys);
struct sim_graph *sim_graph_new(void);
void sim_graph_free(struct sim_graph *g);
/* Driver objects that live until exit (contexts, modules, destroyed
 * streams kept so stale handles fail cleanly) are recorded here, so they
 * stay reachable and leak checkers do not report them. */
void sim_keep(void *p);
void sim_streams_forget_ctx(struct sim_ctx *ctx);

/* ---- memory (sim_residency.c, sim_alloc.c; what only the memory sources
 * share: sim_memory.h) ---- */
/* Reserves/returns device allocation bytes; evicts managed pages if needed.
 * Returns 0 or -1 (out of memory). */
int sim_mem_reserve(int dev, uint64_t bytes);
void sim_mem_unreserve(int dev, uint64_t bytes);
/* Migrates the managed pages of [ptr, ptr+bytes) to dst (GPU or -1 host)
 * starting at `start`. Returns the end time. kind: 0 prefetch, 1 fault,
 * 2 populate (discard-and-prefetch: the pages are placed, nothing moves). */
uint64_t sim_migrate(uint64_t ptr, uint64_t bytes, int dst, uint64_t start, int kind,
		     uint64_t *moved);
/* Mark managed pages of a range used now (LRU). */
void sim_touch(uint64_t ptr, uint64_t bytes, int dev);
/* A GPU access (kernel, copy) to [ptr, ptr+bytes) on dev (-1: a copy's host
 * side does not count). CUDA_SUCCESS, or CUDA_ERROR_ILLEGAL_ADDRESS for a
 * VMM range that is not mapped or not accessible from dev (counted as a
 * stray access). write: the access makes discarded managed pages defined
 * again; a read of one is counted as a stray access. */
CUresult sim_gpu_access(uint64_t ptr, uint64_t bytes, int dev, int write);
/* Counts one stray access for this process on dev (the shared lock held). */
void sim_count_stray_locked(int dev);
/* Graph memory nodes: the allocation node's device memory (pp->location),
 * and the free node's release of it (only such memory, once). */
CUresult sim_graph_mem_alloc(CUdeviceptr *dptr, size_t bytes, const CUmemPoolProps *pp);
CUresult sim_graph_mem_free(CUdeviceptr dptr);

/* ---- launches (sim_launch.c) ---- */
/* A kernel as recorded (captured or direct). */
struct sim_kernel_desc {
	uint64_t dur_ns;
	uint64_t touch_ptr, touch_bytes;
	int host_fn; /* cuLaunchHostFunc node */
	CUhostFn fn;
	void *user;
};
CUresult sim_run_kernel(struct sim_stream *s, const struct sim_kernel_desc *k);
CUresult sim_graph_record(struct sim_stream *s, const struct sim_kernel_desc *k);

#endif
