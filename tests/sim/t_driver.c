/*
 * Devices, contexts and plain memory from the environment, and
 * cuGetProcAddress semantics (shared/notes/interposition.md §2).
 */
#include <dlfcn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "tap.h"

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2_ptds(void *, CUdeviceptr, size_t);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);

typedef CUresult (*gpa1_t)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);

static const char *sym_name(void *p)
{
	Dl_info di;
	if (!p || !dladdr(p, &di) || di.dli_saddr != p || !di.dli_sname)
		return "?";
	return di.dli_sname;
}

/* Look up base@ver with flags through _v2; returns exported name or "-". */
static const char *lookup(const char *base, int ver, int flags, int *status, CUresult *rc)
{
	void *p = (void *)1;
	CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
	*rc = cuGetProcAddress_v2(base, &p, ver, (cuuint64_t)flags, &st);
	*status = (int)st;
	return p ? sym_name(p) : "-";
}

static void procaddr_tests(void)
{
	static const struct {
		const char *base;
		int ver, flags;
		const char *want;
	} cases[] = {
	    {"cuMemAlloc", 2000, 0, "cuMemAlloc"},
	    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
	    {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2"},
	    {"cuCtxCreate", 3020, 0, "cuCtxCreate_v2"},
	    {"cuCtxCreate", 11040, 0, "cuCtxCreate_v3"},
	    {"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
	    {"cuCtxCreate", 12040, 0, "cuCtxCreate_v3"},
	    {"cuMemAdvise", 8000, 0, "cuMemAdvise"},
	    {"cuMemAdvise", 12020, 0, "cuMemAdvise_v2"},
	    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
	    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
	    {"cuCtxSynchronize", 12090, 0, "cuCtxSynchronize"},
	    {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"},
	    {"cuLaunchKernel", 7000, 2, "cuLaunchKernel_ptsz"},
	    {"cuLaunchKernel", 7000, 1, "cuLaunchKernel"},
	    {"cuLaunchKernel", 7000, 0, "cuLaunchKernel"},
	    {"cuLaunchKernel", 4000, 2, "cuLaunchKernel"},
	    {"cuMemcpyHtoD", 7000, 2, "cuMemcpyHtoD_v2_ptds"},
	    {"cuMemcpyHtoD", 3020, 0, "cuMemcpyHtoD_v2"},
	    {"cuMemPrefetchAsync", 12020, 2, "cuMemPrefetchAsync_v2_ptsz"},
	    {"cuMemPrefetchAsync", 8000, 2, "cuMemPrefetchAsync_ptsz"},
	    {"cuMemAdvise", 12020, 2, "cuMemAdvise_v2"},
	    {"cuStreamGetCaptureInfo", 11030, 2, "cuStreamGetCaptureInfo_v2_ptsz"},
	    {"cuGraphInstantiate", 10000, 0, "cuGraphInstantiate"},
	    {"cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2"},
	    {"cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st;
		CUresult rc;
		const char *got = lookup(cases[i].base, cases[i].ver, cases[i].flags, &st, &rc);
		OK(rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS &&
		       strcmp(got, cases[i].want) == 0,
		   "%s@%d flags %d -> %s (got %s)", cases[i].base, cases[i].ver, cases[i].flags,
		   cases[i].want, got);
	}
	int st;
	CUresult rc;
	const char *got = lookup("cuNoSuchThing", 12000, 0, &st, &rc);
	OK(rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && !strcmp(got, "-"),
	   "unknown symbol: success, NULL, SYMBOL_NOT_FOUND");
	got = lookup("cuMemAdvise", 7000, 0, &st, &rc);
	OK(rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT &&
	       !strcmp(got, "-"),
	   "cuMemAdvise@7000: VERSION_NOT_SUFFICIENT");
	got = lookup("cuMemAlloc", 13010, 0, &st, &rc);
	OK(rc == CUDA_ERROR_INVALID_VALUE && !strcmp(got, "-"),
	   "version above the driver's: INVALID_VALUE");
	got = lookup("", 0, 0, &st, &rc);
	OK(rc == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "empty symbol probe");
	void *p = NULL;
	OK(cuGetProcAddress_v2(NULL, &p, 12000, 0, NULL) == CUDA_ERROR_INVALID_VALUE,
	   "NULL symbol");
	OK(cuGetProcAddress_v2("cuInit", &p, 2000, 0, NULL) == CUDA_SUCCESS && p == (void *)cuInit,
	   "NULL status pointer accepted; result is the exported cuInit");
	/* The 4-argument ABI, reached by its exported name. */
	gpa1_t v1 = (gpa1_t)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
	p = NULL;
	OK(v1 && v1("cuMemFree", &p, 3020, 0) == CUDA_SUCCESS &&
	       !strcmp(sym_name(p), "cuMemFree_v2"),
	   "4-argument cuGetProcAddress works");
	/* Every exported driver symbol has its own address. */
	void *a = dlsym(RTLD_DEFAULT, "cuLaunchKernel"),
	     *b = dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz");
	void *c = dlsym(RTLD_DEFAULT, "cuGraphicsGLRegisterBuffer");
	OK(a && b && a != b && !strcmp(sym_name(b), "cuLaunchKernel_ptsz"),
	   "distinct exported addresses");
	OK(!c, "names the stub does not export stay absent");
}

static int visible_devices_child(void)
{
	/* Fresh process: CUDA_VISIBLE_DEVICES picks physical GPU 2 only. */
	setenv("CUDA_VISIBLE_DEVICES", "2", 1);
	int n = -1;
	char name[128];
	CUuuid u;
	if (cuInit(0) || cuDeviceGetCount(&n) || n != 1 || cuDeviceGetName(name, sizeof(name), 0) ||
	    cuDeviceGetUuid_v2(&u, 0))
		return 1;
	return (unsigned char)u.bytes[15] == 2 ? 0 : 2;
}

int main(void)
{
	tap_private_state();
	setenv("NVSHARE_SIM_GPUS", "3", 1);
	setenv("NVSHARE_SIM_MEM", "4Gi", 1);
	setenv("NVSHARE_SIM_NAME", "Test GPU", 1);
	unsetenv("NVSHARE_SIM_UUIDS");
	unsetenv("CUDA_VISIBLE_DEVICES");

	pid_t pid = fork();
	if (pid == 0)
		_exit(visible_devices_child());
	int ws = 0;
	waitpid(pid, &ws, 0);
	OK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
	   "CUDA_VISIBLE_DEVICES=2 shows one device, UUID ...0002");

	int n = -1, v = 0;
	OK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED, "calls before cuInit fail");
	OK(cuInit(0) == CUDA_SUCCESS, "cuInit");
	OK(cuDriverGetVersion(&v) == CUDA_SUCCESS && v == 13000, "driver version 13000");
	OK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 3, "3 devices from NVSHARE_SIM_GPUS");
	for (int d = 0; d < 3; d++) {
		char name[128], bus[32];
		size_t mem = 0;
		CUuuid u;
		cuDeviceGetName(name, sizeof(name), d);
		cuDeviceTotalMem_v2(&mem, d);
		cuDeviceGetUuid_v2(&u, d);
		unsigned char want[16] = {0x5e, 0x1f, 0, 0, 0, 0, 0x40, 0,
					  0x80, 0,    0, 0, 0, 0, 0,	(unsigned char)d};
		OK(!strcmp(name, "Test GPU") && mem == (4ULL << 30) && !memcmp(u.bytes, want, 16),
		   "device %d: name, 4 GiB, UUID GPU-5e1f0000-0000-4000-8000-00000000000%d", d, d);
		cuDeviceGetPCIBusId(bus, sizeof(bus), d);
		DIAG("device %d pci %s", d, bus);
	}
	int major = 0, minor = -1, cma = 0, mm = 0, ua = 0;
	cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0);
	cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0);
	cuDeviceGetAttribute(&cma, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0);
	cuDeviceGetAttribute(&mm, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0);
	cuDeviceGetAttribute(&ua, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0);
	OK(major == 9 && minor == 0 && cma == 1 && mm == 1 && ua == 1,
	   "attributes: sm_90, concurrent managed access, managed memory, UVA");
	OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0) == CUDA_ERROR_INVALID_VALUE,
	   "bad attribute");
	OK(cuDeviceGetName((char[8]){0}, 8, 3) == CUDA_ERROR_INVALID_DEVICE, "bad device");

	CUcontext p0 = NULL, cur = NULL, c1 = NULL;
	unsigned flags;
	int active = 0;
	OK(cuDevicePrimaryCtxRetain(&p0, 0) == CUDA_SUCCESS && p0, "primary context retain");
	cuDevicePrimaryCtxGetState(0, &flags, &active);
	OK(active == 1, "primary context active");
	OK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "retain does not make it current");
	OK(cuCtxSetCurrent(p0) == CUDA_SUCCESS && cuCtxGetCurrent(&cur) == CUDA_SUCCESS &&
	       cur == p0,
	   "set current");
	CUdevice dev = -1;
	OK(cuCtxCreate_v4(&c1, NULL, 0, 1) == CUDA_SUCCESS &&
	       cuCtxGetDevice(&dev) == CUDA_SUCCESS && dev == 1,
	   "cuCtxCreate_v4 on device 1 becomes current");
	OK(cuCtxGetDevice_v2(&dev, p0) == CUDA_SUCCESS && dev == 0,
	   "cuCtxGetDevice_v2 of another context");
	OK(cuCtxPopCurrent_v2(&cur) == CUDA_SUCCESS && cur == c1 && cuCtxGetCurrent(&cur) == 0 &&
	       cur == p0,
	   "pop returns to the previous context");
	OK(cuCtxDestroy_v2(c1) == CUDA_SUCCESS &&
	       cuCtxPushCurrent_v2(c1) == CUDA_ERROR_INVALID_CONTEXT,
	   "destroyed context is invalid");

	size_t fr0, tot, fr1;
	CUdeviceptr d = 0;
	OK(cuMemGetInfo_v2(&fr0, &tot) == CUDA_SUCCESS && tot == (4ULL << 30) && fr0 == tot,
	   "cuMemGetInfo: all free");
	OK(cuMemAlloc_v2(&d, 100 << 20) == CUDA_SUCCESS && d, "cuMemAlloc_v2 100 MiB");
	cuMemGetInfo_v2(&fr1, &tot);
	OK(fr0 - fr1 >= (100 << 20) && fr0 - fr1 < (104 << 20),
	   "free drops by the allocation (2 MiB granules)");
	char src[4096], dst[4096];
	for (int i = 0; i < 4096; i++)
		src[i] = (char)(i * 31);
	OK(cuMemcpyHtoD_v2(d + 4096, src, sizeof(src)) == 0 &&
	       cuMemcpyDtoH_v2(dst, d + 4096, sizeof(dst)) == 0 && !memcmp(src, dst, sizeof(src)),
	   "H2D then D2H returns the bytes");
	OK(cuMemsetD32_v2(d, 0xdeadbeef, 4) == 0 && cuMemcpyDtoH_v2(dst, d, 16) == 0 &&
	       ((unsigned *)dst)[3] == 0xdeadbeef,
	   "cuMemsetD32");
	OK(cuMemcpyDtoH_v2(dst, d + (100 << 20) - 8, 16) == CUDA_ERROR_INVALID_VALUE,
	   "copy past the end fails");
	CUdeviceptr base = 0;
	size_t sz = 0;
	OK(cuMemGetAddressRange_v2(&base, &sz, d + 12345) == 0 && base == d && sz == (100 << 20),
	   "address range");
	unsigned mt = 0;
	OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) == 0 &&
	       mt == CU_MEMORYTYPE_DEVICE,
	   "pointer attribute: device memory");
	CUdeviceptr big = 0;
	OK(cuMemAlloc_v2(&big, 5ULL << 30) == CUDA_ERROR_OUT_OF_MEMORY,
	   "allocation over capacity: OOM");
	OK(cuMemFree_v2(d) == 0, "cuMemFree_v2");
	cuMemGetInfo_v2(&fr1, &tot);
	OK(fr1 == fr0, "free memory back");
	OK(cuMemFree_v2(d) == CUDA_ERROR_INVALID_VALUE, "double free rejected");

	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	size_t gran = 0;
	cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	int vmm_ok = cuMemCreate(&h, 4 * gran, &prop, 0) == 0 &&
		     cuMemAddressReserve(&va, 4 * gran, 0, 0, 0) == 0 &&
		     cuMemMap(va, 4 * gran, 0, h, 0) == 0;
	cuMemGetInfo_v2(&fr1, &tot);
	OK(vmm_ok && fr0 - fr1 == 4 * gran, "VMM create/reserve/map; counted as used");
	OK(cuMemsetD8_v2(va, 7, 4 * gran) == 0 &&
	       ((unsigned char *)(uintptr_t)va)[4 * gran - 1] == 7,
	   "VMM mapping is real memory");
	OK(cuMemUnmap(va, 4 * gran) == 0 && cuMemRelease(h) == 0 &&
	       cuMemAddressFree(va, 4 * gran) == 0,
	   "VMM unmap/release/free");
	cuMemGetInfo_v2(&fr1, &tot);
	OK(fr1 == fr0, "VMM memory returned");

	/* Pitch, 2D copies, arrays, host memory, pools. */
	CUdeviceptr pd;
	size_t pitch = 0;
	OK(cuMemAllocPitch_v2(&pd, &pitch, 100, 8, 4) == 0 && pitch >= 100 && pitch % 256 == 0,
	   "pitched allocation");
	char host2d[8][100], back2d[8][100];
	for (int y = 0; y < 8; y++)
		for (int x = 0; x < 100; x++)
			host2d[y][x] = (char)(x ^ y);
	CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_HOST,
			    .srcHost = host2d,
			    .srcPitch = 100,
			    .dstMemoryType = CU_MEMORYTYPE_DEVICE,
			    .dstDevice = pd,
			    .dstPitch = pitch,
			    .WidthInBytes = 100,
			    .Height = 8};
	CUDA_MEMCPY2D c3 = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
			    .srcDevice = pd,
			    .srcPitch = pitch,
			    .dstMemoryType = CU_MEMORYTYPE_HOST,
			    .dstHost = back2d,
			    .dstPitch = 100,
			    .WidthInBytes = 100,
			    .Height = 8};
	OK(cuMemcpy2D_v2(&c2) == 0 && cuMemcpy2D_v2(&c3) == 0 &&
	       !memcmp(host2d, back2d, sizeof(host2d)),
	   "2D copy round trip through pitched memory");
	cuMemFree_v2(pd);
	CUarray arr;
	CUDA_ARRAY_DESCRIPTOR ad = {
	    .Width = 256, .Height = 256, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
	size_t fa;
	OK(cuArrayCreate_v2(&arr, &ad) == 0 && cuMemGetInfo_v2(&fa, &tot) == 0 &&
	       fr0 - fa == (2 << 20),
	   "array counts as device memory");
	OK(cuMemcpyHtoA_v2(arr, 16, src, 64) == 0 && cuMemcpyAtoH_v2(dst, arr, 16, 64) == 0 &&
	       !memcmp(src, dst, 64),
	   "array copies");
	OK(cuArrayDestroy(arr) == 0, "array destroy");
	void *hp = NULL;
	OK(cuMemHostAlloc(&hp, 1 << 20, CU_MEMHOSTALLOC_PORTABLE) == 0 &&
	       cuMemGetInfo_v2(&fa, &tot) == 0 && fa == fr0 && cuMemFreeHost(hp) == 0,
	   "pinned host memory does not use GPU memory");
	CUmemoryPool pool;
	CUstream st;
	cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
	OK(cuDeviceGetDefaultMemPool(&pool, 0) == 0 &&
	       cuMemAllocFromPoolAsync(&d, 8 << 20, pool, st) == 0 &&
	       cuMemGetInfo_v2(&fa, &tot) == 0 && fr0 - fa == (8 << 20),
	   "pool allocation counts");
	CUmemoryPool pp = NULL;
	OK(cuPointerGetAttribute(&pp, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, d) == 0 && pp == pool,
	   "pointer knows its pool");
	OK(cuMemFreeAsync(d, st) == 0 && cuMemAllocAsync(&d, 4 << 20, st) == 0 &&
	       cuMemFreeAsync_ptsz(d, NULL) == 0,
	   "async alloc/free (+_ptsz)");

	/* Graph memory nodes: device memory from the allocation node's creation,
	 * released by a free node of that address (only such an address, once). */
	CUgraph g;
	CUgraphNode an, fnode;
	CUgraphNodeType ty;
	CUgraphExec ge;
	CUDA_MEM_ALLOC_NODE_PARAMS ap = {
	    .poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
			  .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
	    .bytesize = 6 << 20};
	OK(cuGraphCreate(&g, 0) == 0 && cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap) == 0 &&
	       ap.dptr && cuGraphNodeGetType(an, &ty) == 0 && ty == CU_GRAPH_NODE_TYPE_MEM_ALLOC,
	   "cuGraphAddMemAllocNode returns an address");
	OK(cuMemGetInfo_v2(&fa, &tot) == 0 && fr0 - fa == (6 << 20), "graph memory counts as used");
	CUDA_MEM_ALLOC_NODE_PARAMS gp = {0};
	OK(cuGraphMemAllocNodeGetParams(an, &gp) == 0 && gp.dptr == ap.dptr &&
	       gp.bytesize == (6 << 20),
	   "cuGraphMemAllocNodeGetParams");
	OK(cuMemAlloc_v2(&d, 4096) == 0 &&
	       cuGraphAddMemFreeNode(&fnode, g, NULL, 0, d) == CUDA_ERROR_INVALID_VALUE &&
	       cuMemFree_v2(d) == 0,
	   "free node of memory no allocation node returned: rejected");
	CUdeviceptr fd = 0;
	OK(cuGraphAddMemFreeNode(&fnode, g, &an, 1, ap.dptr) == 0 &&
	       cuGraphMemFreeNodeGetParams(fnode, &fd) == 0 && fd == ap.dptr &&
	       cuMemGetInfo_v2(&fa, &tot) == 0 && fa == fr0,
	   "free node releases it");
	OK(cuGraphAddMemFreeNode(&fnode, g, NULL, 0, ap.dptr) == CUDA_ERROR_INVALID_VALUE,
	   "second free node rejected");
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_HOST;
	OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap) == CUDA_ERROR_INVALID_VALUE,
	   "host-located allocation node rejected");
	CUgraphNodeParams np;
	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
	np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.alloc.bytesize = 2 << 20;
	np.reserved0[1] = 1;
	OK(cuGraphAddNode(&an, g, NULL, NULL, 0, &np) == CUDA_ERROR_INVALID_VALUE,
	   "cuGraphAddNode: non-zero reserved bytes rejected");
	np.reserved0[1] = 0;
	OK(cuGraphAddNode(&an, g, NULL, NULL, 0, &np) == 0 && np.alloc.dptr &&
	       cuMemGetInfo_v2(&fa, &tot) == 0 && fr0 - fa == (2 << 20),
	   "cuGraphAddNode MEM_ALLOC");
	CUdeviceptr gd = np.alloc.dptr;
	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
	np.free.dptr = gd;
	OK(cuGraphAddNode(&fnode, g, &an, NULL, 1, &np) == 0 &&
	       cuGraphNodeGetType(fnode, &ty) == 0 && ty == CU_GRAPH_NODE_TYPE_MEM_FREE &&
	       cuMemGetInfo_v2(&fa, &tot) == 0 && fa == fr0,
	   "cuGraphAddNode MEM_FREE");
	OK(cuGraphInstantiateWithFlags(&ge, g, 0) == 0 && cuGraphLaunch(ge, st) == 0 &&
	       cuStreamSynchronize(st) == 0 && cuGraphExecDestroy(ge) == 0 &&
	       cuGraphDestroy(g) == 0,
	   "a graph with memory nodes instantiates and runs");
	cuStreamDestroy_v2(st);
	char hb[64];
	OK(cuMemAlloc_v2(&d, 4096) == 0 && cuMemcpyHtoD_v2_ptds(d, src, 64) == 0 &&
	       cuMemcpyDtoH_v2_ptds(hb, d, 64) == 0 && !memcmp(src, hb, 64) && cuMemFree_v2(d) == 0,
	   "per-thread (_ptds) copies");

	const char *en = NULL;
	OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &en) == 0 &&
	       !strcmp(en, "CUDA_ERROR_OUT_OF_MEMORY"),
	   "cuGetErrorName");

	procaddr_tests();
	TAP_DONE();
}
