/*
 * Test-facing API of the simulated GPU (tests/sim): the fake libcuda.so.1
 * exports these functions beside the driver API, so a test (or nvshare's own
 * tests run against the fake) can read what the "GPU" did. Declare them weak
 * or look them up with dlsym() if the program must also run on a real driver.
 *
 * THE SIMULATED KERNEL
 * Any name passed to cuModuleGetFunction / cuLibraryGetKernel gives a fake
 * kernel whose duration is NVSHARE_SIM_KERNEL_US (default 100 us). A function
 * obtained under the name "nvshare_sim_kernel" (NVSHARE_SIM_KERNEL_NAME)
 * reads its kernelParams when they are non-NULL. The array must have three
 * entries (the driver cannot know a fake kernel's parameter count):
 *   params[0] -> unsigned long long   duration in microseconds
 *   params[1] -> CUdeviceptr          start of a range the kernel touches,
 *                                     or params[1] == NULL: no touch
 *   params[2] -> unsigned long long   byte count of that range
 * e.g.  unsigned long long us = 2000, n = 64 << 20; CUdeviceptr p = buf;
 *       void *params[] = { &us, &p, &n };   or  { &us, NULL, NULL }
 * Managed pages of the touched range that are not resident on the kernel's
 * GPU are fault-migrated at NVSHARE_SIM_FAULT_GBPS before the kernel body
 * runs (time added to the kernel, counted in fault_bytes/fault_ns), evicting
 * least-recently-used pages if the GPU is full. A NULL params[1] means no
 * touch. Launching with kernelParams == NULL uses the default duration.
 *
 * TIMING MODEL (real wall time)
 * Each stream has a completion time ("tail"). A kernel starts at
 * max(now, stream tail, GPU busy-until) and the GPU's busy-until is shared by
 * every process on the same NVSHARE_SIM_STATE_DIR, so kernels of co-running
 * processes serialize as under time-slicing. Synchronizing calls
 * (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize, synchronous
 * copies) sleep until the relevant completion time. Prefetches are ordered
 * on their stream but use the copy engines (they do not occupy busy-until).
 * Residency changes are applied when the call is made; the time they cost
 * is reflected in the stream's completion time.
 */
#ifndef NVSHARE_TESTS_SIM_API_H
#define NVSHARE_TESTS_SIM_API_H

#include <stdint.h>

#define NVSHARE_SIM_KERNEL_NAME "nvshare_sim_kernel"
#define NVSHARE_SIM_PAGE_SIZE (2ULL << 20) /* managed residency granule */
/* What a discarded managed range holds (cuMemDiscardBatchAsync: indeterminate
 * on a real GPU): this word at both ends and at the start of every 4 KiB. */
#define NVSHARE_SIM_DISCARD_POISON 0xdeadbeefdeadbeefULL
#define NVSHARE_SIM_MAX_GPUS 16

/* Counters of one GPU, for the whole GPU (all processes sharing the state
 * file) or for one process. Times are nanoseconds of simulated (= wall) time. */
struct nvshare_sim_stats {
	uint64_t total_bytes;	     /* GPU memory size */
	uint64_t used_bytes;	     /* device allocations (cuMemAlloc, pools, VMM, arrays) */
	uint64_t resident_bytes;     /* managed bytes resident on the GPU now */
	uint64_t prefetch_h2d_bytes; /* cuMemPrefetchAsync to this GPU */
	uint64_t prefetch_h2d_ns;
	uint64_t prefetch_d2h_bytes; /* cuMemPrefetchAsync from this GPU to host */
	uint64_t prefetch_d2h_ns;
	uint64_t fault_bytes; /* migrated to the GPU by kernel touches */
	uint64_t fault_ns;
	uint64_t evictions; /* pages evicted to make room */
	uint64_t evicted_bytes;
	uint64_t evict_ns;	 /* time spent writing evicted pages back */
	uint64_t kernels;	 /* kernels run (graph nodes included) */
	uint64_t kernel_busy_ns; /* time the GPU spent running kernels */
	uint64_t busy_until_ns;	 /* CLOCK_MONOTONIC ns; whole-GPU view only */
	uint64_t nprocs;	 /* processes with a context; whole-GPU view only */
	uint64_t discard_bytes;	 /* managed bytes discarded (cuMemDiscard*BatchAsync) */
	/* GPU accesses that a correct program (and nvshare) never makes: a
	 * read of a discarded managed page before anything wrote or
	 * prefetched it (its value is indeterminate on a real GPU), or an
	 * access to a VMM range with no mapping or no access for that GPU
	 * (CUDA_ERROR_ILLEGAL_ADDRESS on a real GPU, and here). */
	uint64_t stray_accesses;
	uint64_t host_pinned_bytes; /* host memory the process pinned; process view only */
};

/* Whole-GPU counters. Returns 0, or -1 for a bad device. Works before cuInit. */
int nvshareSimGetStats(int dev, struct nvshare_sim_stats *out);
/* One process's counters on dev (pid 0 = the caller). -1 if unknown. */
int nvshareSimGetProcStats(int dev, int pid, struct nvshare_sim_stats *out);
/* Zeroes the counters (whole-GPU and every process) and the prefetch log;
 * keeps residency and allocations. dev -1 = every GPU. */
int nvshareSimResetStats(int dev);

/* One cuMemPrefetchAsync call, in call order. */
struct nvshare_sim_prefetch {
	uint64_t seq; /* global order, from 1 */
	int32_t pid;
	int32_t dst;	   /* GPU index, or -1 = host */
	uint64_t ptr;	   /* start of the prefetched range */
	uint64_t bytes;	   /* bytes requested */
	uint64_t moved;	   /* bytes that actually migrated */
	uint64_t start_ns; /* simulated copy interval (CLOCK_MONOTONIC) */
	uint64_t end_ns;
};
/* Copies the most recent prefetch records (oldest first, at most max, all
 * processes; the log keeps the last 1024) and returns how many. */
int nvshareSimGetPrefetchLog(struct nvshare_sim_prefetch *out, int max);

/* Where the managed page holding ptr lives: GPU index, -1 = host, -2 = not a
 * managed address of this process. */
int nvshareSimPageLocation(uint64_t ptr);

/* A GPU access from the current context's device to [ptr, ptr+bytes), as a
 * kernel reading the range would make, but through no CUDA entry point (so
 * nothing in between can gate it): CUDA_SUCCESS, CUDA_ERROR_ILLEGAL_ADDRESS
 * (unmapped or inaccessible VMM range), CUDA_ERROR_INVALID_CONTEXT. Tests use
 * it to stand for work that bypassed nvshare's gate. */
int nvshareSimTouch(uint64_t ptr, uint64_t bytes);

/* CLOCK_MONOTONIC now in ns (the clock the simulation uses). */
uint64_t nvshareSimNowNs(void);

/* Whether the simulated GPU's cross-process state lock can be taken within
 * timeout_ms: 1 (it was taken and released at once), 0 (it stayed held).
 * The lock is the simulator's own (a real GPU has none): a process stopped
 * while holding it stops every process on the same state. sim_stop uses
 * this to stop a process only outside it. */
int nvshareSimLockFree(int timeout_ms);

#endif
