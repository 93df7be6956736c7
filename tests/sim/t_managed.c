/*
 * Managed memory residency: prefetch moves 2 MiB pages and costs time at
 * the configured bandwidth; over-subscription evicts least-recently-used
 * pages; kernels that touch non-resident pages fault them in.
 */
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "sim_api.h"
#include "tap.h"

#define MiB (1ULL << 20)

static struct nvshare_sim_stats st(void)
{
	struct nvshare_sim_stats s;
	nvshareSimGetStats(0, &s);
	return s;
}

/* The CUDA 8 ABIs, which cuda.h 13 renames away: call them by their
 * exported names. */
static PFN_cuMemPrefetchAsync_v8000 prefetch_v1;
static PFN_cuMemAdvise_v8000 advise_v1;

static double ms_since(uint64_t t0)
{
	return (double)(nvshareSimNowNs() - t0) / 1e6;
}

int main(void)
{
	tap_private_state();
	setenv("NVSHARE_SIM_MEM", "1Gi", 1);
	setenv("NVSHARE_SIM_H2D_GBPS", "10", 1);  /* 512 MiB: ~54 ms */
	setenv("NVSHARE_SIM_D2H_GBPS", "5", 1);	  /* 256 MiB: ~54 ms */
	setenv("NVSHARE_SIM_FAULT_GBPS", "2", 1); /* 64 MiB: ~34 ms */
	unsetenv("NVSHARE_SIM_GPUS");
	unsetenv("CUDA_VISIBLE_DEVICES");

	CUcontext ctx;
	CUstream s;
	prefetch_v1 = (PFN_cuMemPrefetchAsync_v8000)dlsym(RTLD_DEFAULT, "cuMemPrefetchAsync");
	advise_v1 = (PFN_cuMemAdvise_v8000)dlsym(RTLD_DEFAULT, "cuMemAdvise");
	cuInit(0);
	cuDevicePrimaryCtxRetain(&ctx, 0);
	cuCtxSetCurrent(ctx);
	cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);

	CUdeviceptr a = 0, b = 0;
	OK(cuMemAllocManaged(&a, 512 * MiB, CU_MEM_ATTACH_GLOBAL) == 0, "managed 512 MiB (A)");
	OK(cuMemAllocManaged(&b, 768 * MiB, CU_MEM_ATTACH_GLOBAL) == 0, "managed 768 MiB (B)");
	memset((void *)(uintptr_t)a, 0x11, 4096); /* host access works */
	OK(nvshareSimPageLocation(a) == -1 && st().resident_bytes == 0,
	   "new managed memory is on the host");
	size_t fr, tot;
	cuMemGetInfo_v2(&fr, &tot);
	OK(fr == tot, "managed memory takes no GPU memory until resident");

	uint64_t t0 = nvshareSimNowNs();
	OK(prefetch_v1(a, 512 * MiB, 0, s) == 0, "prefetch A to GPU 0 (v1 API)");
	double call_ms = ms_since(t0);
	OK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "prefetch is asynchronous (stream busy)");
	cuStreamSynchronize(s);
	double ms = ms_since(t0);
	struct nvshare_sim_stats x = st();
	DIAG("prefetch call %.2f ms, complete after %.2f ms, counted %.2f ms", call_ms, ms,
	     x.prefetch_h2d_ns / 1e6);
	OK(x.prefetch_h2d_bytes == 512 * MiB && x.resident_bytes == 512 * MiB,
	   "512 MiB moved and resident");
	OK(x.prefetch_h2d_ns > 50e6 && x.prefetch_h2d_ns < 58e6, "counted time = bytes / 10 GB/s");
	OK(ms >= 50 && ms < 50 + BUSY_SLACK_MS, "stream sync waits for the transfer (%.1f ms)", ms);
	OK(nvshareSimPageLocation(a) == 0 && nvshareSimPageLocation(a + 511 * MiB) == 0,
	   "pages on GPU 0");
	cuMemGetInfo_v2(&fr, &tot);
	OK(tot - fr == 512 * MiB, "resident pages use GPU memory");

	/* B does not fit beside A: the 256 MiB oldest pages of A go. */
	CUmemLocation gpu0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
	OK(cuMemPrefetchAsync_v2(b, 768 * MiB, gpu0, 0, s) == 0, "prefetch B (v2 API)");
	cuStreamSynchronize(s);
	x = st();
	OK(x.resident_bytes == 1024 * MiB, "GPU full: 1 GiB resident");
	OK(x.evictions == 128 && x.evicted_bytes == 256 * MiB, "128 pages (256 MiB) evicted (%llu)",
	   (unsigned long long)x.evictions);
	OK(nvshareSimPageLocation(a) == -1 && nvshareSimPageLocation(a + 255 * MiB) == -1 &&
	       nvshareSimPageLocation(a + 256 * MiB) == 0,
	   "the least recently used pages (start of A) were evicted");
	OK(x.evict_ns > 50e6, "eviction write-back time counted (%.1f ms)", x.evict_ns / 1e6);

	/* Prefetch back to the host: D2H bandwidth. */
	CUmemLocation host = {CU_MEM_LOCATION_TYPE_HOST, 0};
	OK(cuMemPrefetchAsync_v2(a + 256 * MiB, 256 * MiB, host, 0, s) == 0,
	   "prefetch rest of A to host");
	cuStreamSynchronize(s);
	x = st();
	OK(x.prefetch_d2h_bytes == 256 * MiB && x.prefetch_d2h_ns > 50e6 &&
	       x.prefetch_d2h_ns < 58e6,
	   "256 MiB at 5 GB/s counted as D2H");
	OK(x.resident_bytes == 768 * MiB, "768 MiB resident");

	/* A kernel touching 64 MiB of A (on the host) faults it in. */
	CUmodule mod;
	CUfunction k;
	cuModuleLoadData(&mod, "sim");
	cuModuleGetFunction(&k, mod, NVSHARE_SIM_KERNEL_NAME);
	unsigned long long dur = 1000, bytes = 64 * MiB;
	CUdeviceptr touch = a;
	void *params[] = {&dur, &touch, &bytes};
	t0 = nvshareSimNowNs();
	OK(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == 0, "kernel touching 64 MiB");
	cuStreamSynchronize(s);
	ms = ms_since(t0);
	x = st();
	OK(x.fault_bytes == 64 * MiB && x.fault_ns > 30e6 && x.fault_ns < 37e6,
	   "64 MiB fault-migrated at 2 GB/s");
	OK(ms > 34 && ms < 34 + BUSY_SLACK_MS, "kernel time includes the faults (%.1f ms)", ms);
	OK(nvshareSimPageLocation(a) == 0, "touched pages now resident");
	OK(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == 0 &&
	       cuStreamSynchronize(s) == 0 && st().fault_bytes == 64 * MiB,
	   "second touch: no new faults");

	/* cuMemAlloc on a full GPU evicts managed pages. */
	CUdeviceptr d;
	uint64_t ev0 = st().evictions;
	OK(cuMemAlloc_v2(&d, 512 * MiB) == 0, "cuMemAlloc 512 MiB with managed pages resident");
	x = st();
	OK(x.used_bytes == 512 * MiB && x.resident_bytes <= 512 * MiB && x.evictions > ev0,
	   "managed pages evicted to make room");
	CUdeviceptr d2;
	OK(cuMemAlloc_v2(&d2, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY,
	   "device memory cannot be evicted: OOM");
	cuMemFree_v2(d);

	/* Prefetch order log: largest first is what nvshare asserts. */
	nvshareSimResetStats(-1);
	prefetch_v1(b, 768 * MiB, CU_DEVICE_CPU, s);
	prefetch_v1(b, 128 * MiB, 0, s);
	prefetch_v1(a, 64 * MiB, 0, s);
	cuStreamSynchronize(s);
	struct nvshare_sim_prefetch log[8];
	int n = nvshareSimGetPrefetchLog(log, 8);
	OK(n == 3 && log[0].dst == -1 && log[1].ptr == b && log[1].bytes == 128 * MiB &&
	       log[2].ptr == a && log[0].seq < log[1].seq && log[1].seq < log[2].seq &&
	       log[0].pid == getpid(),
	   "prefetch log in call order with target, range, pid");
	OK(log[1].start_ns >= log[0].end_ns, "prefetches on one stream are ordered");
	struct nvshare_sim_stats me;
	x = st();
	OK(nvshareSimGetProcStats(0, 0, &me) == 0 &&
	       me.prefetch_h2d_bytes == x.prefetch_h2d_bytes &&
	       me.prefetch_d2h_bytes == x.prefetch_d2h_bytes &&
	       me.resident_bytes == x.resident_bytes && x.prefetch_h2d_bytes >= 128 * MiB,
	   "per-process view matches (single process)");
	int lp = -2;
	OK(cuMemRangeGetAttribute(&lp, sizeof(lp), CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, a,
				  4096) == 0 &&
	       lp == 0,
	   "last prefetch location attribute");
	OK(cuMemAdvise_v2(a, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, gpu0) == 0,
	   "cuMemAdvise_v2 accepted");
	OK(advise_v1(d, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, 0) == CUDA_ERROR_INVALID_VALUE,
	   "cuMemAdvise on non-managed memory rejected");
	OK(cuMemFree_v2(a) == 0 && cuMemFree_v2(b) == 0 && st().resident_bytes == 0,
	   "free releases resident pages");
	TAP_DONE();
}
