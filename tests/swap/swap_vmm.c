/*
 * swap_vmm: a job that uses every kind of memory the swap engine handles,
 * run under LD_PRELOAD=libnvshare.so on the simulated GPU by t_swap_engine.sh.
 *
 *   converted  cuMemAlloc 64 MiB and 16 MiB      fast path
 *   managed    cuMemAllocManaged 32 MiB           prefetch path (the application's own)
 *   h1         cuMemCreate 32 MiB, mapped twice (an alias), access on both   fast path
 *   h2         cuMemCreate 8 MiB                  fast path, exported after the swap
 *   h3         cuMemCreate 8 MiB, access on half of its mapping only        pinned
 *   h4         cuMemCreate 8 MiB, exported before                           pinned
 *
 * It fills everything, runs a kernel over it (holding the lock), waits until
 * its host staging holds --staging bytes, prints READY and goes idle. The
 * test then starts another job, which makes this one release the lock idle
 * and swap everything out (scheduler: mode on, NVSHARE_SWAP_OUT=all). Seen
 * from the simulated GPU (its device memory is down to the pinned 16 MiB),
 * it checks what a swapped-out process looks like: the VMM ranges unmapped
 * (a GPU access that bypassed the gate is an illegal address), the
 * converted ranges discarded (or, in trap mode, unmapped), the handles
 * still answering. Then it launches again, which waits at the gate for the
 * grant and the swap-in, and checks that everything is back: data, both
 * mappings of the alias, access, the handles. Prints TAP lines and
 *   DONE result=ok|BAD stray=N
 * then waits for --end-file (the test reads the scheduler's status).
 */
#include <cuda.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/sim/sim_api.h"

#define MiB (1ull << 20)

static int fails;
static void ok(int c, const char *what)
{
	printf("%sok - %s\n", c ? "" : "not ", what);
	fflush(stdout);
	fails += !c;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static struct nvshare_sim_stats me(void)
{
	struct nvshare_sim_stats s;
	memset(&s, 0, sizeof s);
	nvshareSimGetProcStats(0, 0, &s);
	return s;
}

static CUfunction fn;

static CUresult kernel(CUdeviceptr p, unsigned long long n)
{
	unsigned long long us = 500;
	void *args[3] = {&us, &p, &n};
	CUresult r = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
	return r ? r : cuStreamSynchronize(NULL);
}

/* Fills n bytes at p with words pat+i (i the word index). */
static int fill(CUdeviceptr p, uint64_t n, uint32_t pat)
{
	uint32_t *h = malloc(n);
	if (!h)
		return -1;
	for (uint64_t i = 0; i < n / 4; i++)
		h[i] = pat + (uint32_t)i;
	CUresult r = cuMemcpyHtoD(p, h, n);
	free(h);
	return r ? -1 : 0;
}

static int same(CUdeviceptr p, uint64_t n, uint32_t pat)
{
	uint32_t *h = malloc(n);
	if (!h || cuMemcpyDtoH(h, p, n)) {
		free(h);
		return 0;
	}
	uint64_t i = 0;
	while (i < n / 4 && h[i] == pat + (uint32_t)i)
		i++;
	free(h);
	return i == n / 4;
}

int main(int argc, char **argv)
{
	const char *end_file = NULL;
	uint64_t staging = 0;
	int trap = 0;
	long long discard_mib = 80; /* -1: any (the fallbacks move some by prefetch) */
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--end-file"))
			end_file = argv[i + 1];
		else if (!strcmp(argv[i], "--staging"))
			staging = strtoull(argv[i + 1], NULL, 10) * MiB;
		else if (!strcmp(argv[i], "--trap"))
			trap = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--discard-mib"))
			discard_mib = atoll(argv[i + 1]);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
	    cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, "swap_vmm") ||
	    cuModuleGetFunction(&fn, mod, NVSHARE_SIM_KERNEL_NAME)) {
		printf("DONE result=FAILED(setup)\n");
		return 1;
	}
	CUdeviceptr c1, c2, m1;
	ok(!cuMemAlloc(&c1, 64 * MiB) && !cuMemAlloc(&c2, 16 * MiB), "cuMemAlloc 64 + 16 MiB");
	ok(!cuMemAllocManaged(&m1, 32 * MiB, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged 32 MiB");
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0},
				    .requestedHandleTypes =
					CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
	CUmemAccessDesc rw = {.location = prop.location,
			      .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CUmemGenericAllocationHandle h1, h2, h3, h4;
	CUdeviceptr va1, va2, va3, va4;
	ok(!cuMemCreate(&h1, 32 * MiB, &prop, 0) && !cuMemCreate(&h2, 8 * MiB, &prop, 0) &&
	       !cuMemCreate(&h3, 8 * MiB, &prop, 0) && !cuMemCreate(&h4, 8 * MiB, &prop, 0),
	   "cuMemCreate 32 + 3 x 8 MiB");
	ok((h1 >> 32) == 0x4e565348 && (h4 >> 32) == 0x4e565348,
	   "the handles are nvshare's virtual ones");
	ok(!cuMemAddressReserve(&va1, 64 * MiB, 0, 0, 0) &&
	       !cuMemAddressReserve(&va2, 8 * MiB, 0, 0, 0) &&
	       !cuMemAddressReserve(&va3, 8 * MiB, 0, 0, 0) &&
	       !cuMemAddressReserve(&va4, 8 * MiB, 0, 0, 0),
	   "address ranges reserved");
	ok(!cuMemMap(va1, 32 * MiB, 0, h1, 0) && !cuMemMap(va1 + 32 * MiB, 32 * MiB, 0, h1, 0) &&
	       !cuMemMap(va2, 8 * MiB, 0, h2, 0) && !cuMemMap(va3, 8 * MiB, 0, h3, 0) &&
	       !cuMemMap(va4, 8 * MiB, 0, h4, 0),
	   "mapped (h1 twice)");
	ok(!cuMemSetAccess(va1, 64 * MiB, &rw, 1) && !cuMemSetAccess(va2, 8 * MiB, &rw, 1) &&
	       !cuMemSetAccess(va3, 4 * MiB, &rw, 1) && !cuMemSetAccess(va4, 8 * MiB, &rw, 1),
	   "access given (h3: half of its mapping)");
	int fd = -1;
	ok(!cuMemExportToShareableHandle(&fd, h4, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) &&
	       fd >= 0,
	   "h4 exported");
	ok(!fill(c1, 64 * MiB, 0x10000000) && !fill(c2, 16 * MiB, 0x20000000) &&
	       !fill(m1, 32 * MiB, 0x30000000) && !fill(va1, 32 * MiB, 0x40000000) &&
	       !fill(va2, 8 * MiB, 0x50000000) && !fill(va3, 4 * MiB, 0x60000000) &&
	       !fill(va4, 8 * MiB, 0x70000000),
	   "everything filled");
	ok(!kernel(c1, 64 * MiB) && !kernel(va1, 64 * MiB) && !kernel(m1, 32 * MiB),
	   "kernels over it");

	/* The staging pins in the background once memory is short. */
	for (int i = 0; i < 2000 && me().host_pinned_bytes < staging; i++)
		sleep_ms(10);
	char b[96];
	snprintf(b, sizeof b, "host staging pinned: %llu MiB (waited for %llu)",
		 (unsigned long long)(me().host_pinned_bytes / MiB),
		 (unsigned long long)(staging / MiB));
	ok(me().host_pinned_bytes >= staging, b);
	struct nvshare_sim_stats s0 = me();
	printf("READY used_mib=%llu\n", (unsigned long long)(s0.used_bytes / MiB));

	/* Out: the device memory left is the pinned handles' (16 MiB), and the
	 * application's managed memory (moved last, by prefetch) is on the host. */
	int out = 0;
	for (int i = 0; i < 6000 && !out; i++) {
		out = me().used_bytes == 16 * MiB && nvshareSimPageLocation(m1) == -1;
		if (!out)
			sleep_ms(10);
	}
	ok(out, "swapped out: the GPU holds only the pinned 16 MiB of this job (h3, h4)");
	struct nvshare_sim_stats s1 = me();
	snprintf(b, sizeof b, "converted ranges %s while out (discarded: %llu MiB)",
		 trap ? "unmapped, not discarded" : "discarded",
		 (unsigned long long)((s1.discard_bytes - s0.discard_bytes) / MiB));
	ok(trap ? s1.discard_bytes == s0.discard_bytes
		: discard_mib < 0 ||
		      s1.discard_bytes - s0.discard_bytes == (uint64_t)discard_mib * MiB,
	   b);
	ok(nvshareSimPageLocation(m1) == -1, "the application's managed memory went to the host");
	uint64_t st0 = me().stray_accesses;
	ok(nvshareSimTouch(va2, 8 * MiB) == CUDA_ERROR_ILLEGAL_ADDRESS &&
	       me().stray_accesses == st0 + 1,
	   "a GPU access bypassing the gate to swapped-out VMM memory: illegal address (counted)");
	int rc = nvshareSimTouch(c1, 64 * MiB);
	uint64_t d = me().stray_accesses - st0 - 1;
	if (trap)
		ok(rc == CUDA_ERROR_ILLEGAL_ADDRESS && d == 1,
		   "... to a converted range in trap mode: illegal address (counted)");
	else if (discard_mib == 80)
		ok(rc == CUDA_SUCCESS && d == 1,
		   "... to a converted range: reads discarded pages (counted as a stray access)");
	else
		ok(rc == CUDA_SUCCESS && d <= 1, "... to a converted range: discarded (a stray "
						 "access) or moved by prefetch (none)");
	uint64_t strays = me().stray_accesses - s0.stray_accesses;
	CUmemAllocationProp p2;
	memset(&p2, 0, sizeof p2);
	ok(!cuMemGetAllocationPropertiesFromHandle(&p2, h1) && p2.location.id == 0 &&
	       p2.type == CU_MEM_ALLOCATION_TYPE_PINNED,
	   "a swapped-out handle still answers for its properties");
	CUmemGenericAllocationHandle hr = 0;
	ok(!cuMemRetainAllocationHandle(&hr, (void *)(uintptr_t)(va2 + 4096)) && hr == h2 &&
	       !cuMemRelease(hr),
	   "cuMemRetainAllocationHandle gives the same handle while out");

	/* Back: the launch waits at the gate for the grant and the swap-in. */
	ok(!kernel(c1, 64 * MiB), "a kernel after the swap (it waited for the swap-in)");
	struct nvshare_sim_stats s2 = me();
	ok(s2.used_bytes == s0.used_bytes, "the VMM memory was created again");
	ok(same(c1, 64 * MiB, 0x10000000) && same(c2, 16 * MiB, 0x20000000),
	   "converted ranges: every byte back");
	ok(same(m1, 32 * MiB, 0x30000000), "managed range: every byte");
	ok(same(va1, 32 * MiB, 0x40000000) && same(va1 + 32 * MiB, 32 * MiB, 0x40000000),
	   "h1: every byte, through both of its mappings");
	ok(same(va2, 8 * MiB, 0x50000000) && same(va3, 4 * MiB, 0x60000000) &&
	       same(va4, 8 * MiB, 0x70000000),
	   "h2, h3, h4: every byte");
	ok(!fill(va1 + 32 * MiB, 4 * MiB, 0x41000000) && same(va1, 4 * MiB, 0x41000000),
	   "the alias still shares h1's memory (one handle behind both mappings)");
	unsigned long long fl = 0;
	ok(!cuMemGetAccess(&fl, &prop.location, va1 + 32 * MiB) &&
	       fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE && !kernel(va1, 64 * MiB) &&
	       !kernel(va2, 8 * MiB),
	   "access restored: kernels over both mappings run");
	fl = 0;
	ok(!cuMemGetAccess(&fl, &prop.location, va3) && fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	   "h3 (pinned) kept its access");
	int fd2 = -1;
	ok(!cuMemExportToShareableHandle(&fd2, h2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) &&
	       fd2 >= 0,
	   "h2 exports after its swap (the handle is valid)");
	ok(me().stray_accesses == s0.stray_accesses + strays, "no stray access after the swap-in");
	printf("DONE result=%s stray=%llu\n", fails ? "BAD" : "ok",
	       (unsigned long long)(me().stray_accesses - s0.stray_accesses));
	while (end_file && access(end_file, F_OK) != 0)
		sleep_ms(10);
	ok(!cuMemUnmap(va1, 64 * MiB) && !cuMemUnmap(va2, 8 * MiB) && !cuMemUnmap(va3, 8 * MiB) &&
	       !cuMemUnmap(va4, 8 * MiB),
	   "unmapped");
	ok(!cuMemRelease(h1) && !cuMemRelease(h2) && !cuMemRelease(h3) && !cuMemRelease(h4) &&
	       cuMemRelease(h1) != CUDA_SUCCESS,
	   "released (a second release is refused)");
	ok(!cuMemFree(c1) && !cuMemFree(c2) && !cuMemFree(m1), "freed");
	ok(me().used_bytes == 0, "nothing left on the GPU");
	return fails ? 1 : 0;
}
