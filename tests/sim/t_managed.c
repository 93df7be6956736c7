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
	setenv("NVSHARE_SIM_PIN_LIMIT", "64Mi", 1);
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
	OK(ms >= 50 && ms < 50 + HANG_GUARD_MS, "stream sync waits for the transfer (%.1f ms)", ms);
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
	OK(ms > 34 && ms < 34 + HANG_GUARD_MS, "kernel time includes the faults (%.1f ms)", ms);
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

	/* Discard (CUDA 13): the pages leave without a write-back, the range
	 * reads as zeros, and a kernel that reads a discarded page before
	 * anything wrote or prefetched it is a stray access. */
	CUdeviceptr c = 0;
	OK(cuMemAllocManaged(&c, 64 * MiB, CU_MEM_ATTACH_GLOBAL) == 0, "managed 64 MiB (C)");
	memset((void *)(uintptr_t)c, 0x5a, 64 * MiB);
	cuMemPrefetchAsync_v2(c, 64 * MiB, gpu0, 0, s);
	cuStreamSynchronize(s);
	struct nvshare_sim_stats b0 = st();
	CUdeviceptr dp[1] = {c};
	size_t ds[1] = {32 * MiB}, idx0 = 0;
	OK(cuMemDiscardBatchAsync(dp, ds, 1, 0, NULL) == CUDA_ERROR_INVALID_VALUE,
	   "discard refuses the legacy default stream");
	OK(cuMemDiscardBatchAsync(dp, ds, 1, 0, s) == 0, "discard the first 32 MiB of C");
	x = st();
	OK(x.discard_bytes - b0.discard_bytes == 32 * MiB &&
	       b0.resident_bytes - x.resident_bytes == 32 * MiB &&
	       x.prefetch_d2h_bytes == b0.prefetch_d2h_bytes && x.evicted_bytes == b0.evicted_bytes,
	   "discarded pages leave the GPU without a write-back");
	const unsigned char *cb = (const unsigned char *)(uintptr_t)c;
	uint64_t w0, w1;
	memcpy(&w0, cb + 4096, 8);
	memcpy(&w1, cb + 32 * MiB - 8, 8);
	OK(w0 == NVSHARE_SIM_DISCARD_POISON && w1 == NVSHARE_SIM_DISCARD_POISON &&
	       cb[32 * MiB] == 0x5a,
	   "discarded bytes are gone (poisoned here), the rest intact");
	touch = c;
	bytes = 64 * MiB;
	OK(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == 0 &&
	       cuStreamSynchronize(s) == 0 && st().stray_accesses == b0.stray_accesses + 1,
	   "a kernel reading discarded pages is counted as a stray access");
	OK(cuMemDiscardBatchAsync(dp, ds, 1, 0, s) == 0, "discard again");
	b0 = st();
	OK(cuMemDiscardAndPrefetchBatchAsync(dp, ds, 1, &gpu0, &idx0, 1, 0, s) == 0 &&
	       cuStreamSynchronize(s) == 0,
	   "discard-and-prefetch to GPU 0");
	x = st();
	OK(x.resident_bytes - b0.resident_bytes == 32 * MiB &&
	       x.prefetch_h2d_bytes == b0.prefetch_h2d_bytes && nvshareSimPageLocation(c) == 0,
	   "discard-and-prefetch places the pages on the GPU, moving nothing");
	OK(cuMemcpyHtoD_v2(c, cb + 32 * MiB, 4096) == 0 &&
	       cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == 0 &&
	       cuStreamSynchronize(s) == 0 && st().stray_accesses == b0.stray_accesses &&
	       st().fault_bytes == b0.fault_bytes,
	   "prefetched pages are defined again: no stray access, no fault");
	OK(cuMemFree_v2(c) == 0, "free C");

	/* VMM: a mapping without access for the kernel's GPU, or no mapping at
	 * all, is an illegal address (and a stray access). */
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
	CUmemGenericAllocationHandle h = 0, h2 = 0;
	CUdeviceptr va = 0;
	OK(cuMemCreate(&h, 8 * MiB, &prop, 0) == 0 &&
	       cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0) == 0 &&
	       cuMemMap(va, 8 * MiB, 0, h, 0) == 0,
	   "VMM: 8 MiB created and mapped");
	b0 = st();
	touch = va;
	bytes = 8 * MiB;
	OK(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == CUDA_ERROR_ILLEGAL_ADDRESS &&
	       st().stray_accesses == b0.stray_accesses + 1,
	   "a kernel on a mapping without access: illegal address, stray access");
	CUmemAccessDesc acc = {.location = prop.location,
			       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	unsigned long long fl = 0;
	OK(cuMemSetAccess(va, 16 * MiB, &acc, 1) == CUDA_ERROR_INVALID_VALUE,
	   "access on a range that is not all mapped is refused");
	OK(cuMemSetAccess(va, 8 * MiB, &acc, 1) == 0 &&
	       cuMemGetAccess(&fl, &prop.location, va) == 0 &&
	       fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	   "access recorded per mapping (cuMemGetAccess)");
	OK(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == 0 &&
	       cuStreamSynchronize(s) == 0 && st().stray_accesses == b0.stray_accesses + 1,
	   "with access the kernel runs");
	OK(nvshareSimTouch(va, 8 * MiB) == 0, "nvshareSimTouch: a mapped range is fine");
	OK(nvshareSimTouch(va + 8 * MiB, 4096) == CUDA_ERROR_ILLEGAL_ADDRESS,
	   "nvshareSimTouch: the unmapped half is an illegal address");
	OK(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 4096)) == 0 && h2 == h,
	   "cuMemRetainAllocationHandle finds the handle by address");
	OK(cuMemRelease(h) == 0 && cuMemRelease(h2) == 0 && cuMemRelease(h) != 0,
	   "retain counts: two releases, a third is refused");
	OK(cuMemsetD8_v2(va, 1, 4096) == 0, "the mapping keeps the memory after the releases");
	OK(cuMemUnmap(va, 8 * MiB) == 0 && cuMemsetD8_v2(va, 1, 4096) == CUDA_ERROR_ILLEGAL_ADDRESS,
	   "a copy into an unmapped range: illegal address, not a crash");
	OK(cuMemAddressFree(va, 16 * MiB) == 0 && st().used_bytes == b0.used_bytes - 8 * MiB,
	   "unmapped and released: the memory is free");

	/* Pinning host memory within NVSHARE_SIM_PIN_LIMIT (64 MiB here). */
	static char hostbuf[112 * MiB];
	struct nvshare_sim_stats me2;
	OK(cuMemHostRegister(hostbuf, 32 * MiB, 0) == 0 &&
	       cuMemHostRegister(hostbuf + 32 * MiB, 48 * MiB, 0) == CUDA_ERROR_OUT_OF_MEMORY,
	   "pinning beyond NVSHARE_SIM_PIN_LIMIT is refused (out of memory)");
	OK(nvshareSimGetProcStats(0, 0, &me2) == 0 && me2.host_pinned_bytes == 32 * MiB,
	   "the process's pinned bytes are in its stats");
	OK(cuMemHostUnregister(hostbuf) == 0 &&
	       cuMemHostRegister(hostbuf + 32 * MiB, 48 * MiB, 0) == 0 &&
	       cuMemHostUnregister(hostbuf + 32 * MiB) == 0,
	   "unpinned memory counts no more");
	TAP_DONE();
}
