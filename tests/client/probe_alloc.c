/*
 * Allocation, limits and memory information under LD_PRELOAD=libnvshare.so
 * (run by t_alloc.sh). Linked with -lcuda against the simulated GPU, so it
 * also exercises the plain-link path (symbol interposition). One case per
 * run: probe_alloc CASE. Prints TAP lines (numbering done by the script).
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)

static int fails;
static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(int cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%sok - ", cond ? "" : "not ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	if (!cond)
		fails++;
}

static int is_managed(CUdeviceptr p)
{
	unsigned int m = 0;
	return cuPointerGetAttribute(&m, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS && m;
}

static const char *lib_of(void *p)
{
	Dl_info i;
	if (!p || !dladdr(p, &i))
		return "(none)";
	const char *b = strrchr(i.dli_fname, '/');
	return b ? b + 1 : i.dli_fname;
}

static CUcontext ctx;
static void setup(void)
{
	CUdevice d;
	if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) ||
	    cuCtxSetCurrent(ctx)) {
		ok(0, "CUDA setup");
		exit(1);
	}
}

static size_t total_mem(void)
{
	size_t t = 0;
	CUdevice d;
	cuDeviceGet(&d, 0);
	cuDeviceTotalMem(&t, d);
	return t;
}

static void case_convert(void)
{
	ok(!strncmp(lib_of((void *)&cuMemAlloc), "libnvshare", 10),
	   "plain link: cuMemAlloc_v2 binds to libnvshare (%s)", lib_of((void *)&cuMemAlloc));
	setup();
	CUdeviceptr p = 0;
	ok(cuMemAlloc(&p, 64 * MiB) == CUDA_SUCCESS && p, "cuMemAlloc 64 MiB");
	ok(is_managed(p), "cuMemAlloc became managed memory");
	size_t pitch = 0;
	CUdeviceptr q = 0;
	ok(cuMemAllocPitch(&q, &pitch, 1000, 100, 4) == CUDA_SUCCESS && is_managed(q),
	   "cuMemAllocPitch became managed");
	ok(pitch >= 1000 && pitch % 512 == 0, "pitch %zu >= width and 512-aligned", pitch);
	CUdeviceptr m = 0;
	ok(cuMemAllocManaged(&m, 8 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS && is_managed(m),
	   "cuMemAllocManaged passes");
	ok(cuMemFree(p) == CUDA_SUCCESS && cuMemFree(q) == CUDA_SUCCESS &&
	       cuMemFree(m) == CUDA_SUCCESS,
	   "frees");
	CUstream s;
	cuStreamCreate(&s, 0);
	CUdeviceptr a = 0;
	ok(cuMemAllocAsync(&a, 16 * MiB, s) == CUDA_SUCCESS && is_managed(a),
	   "cuMemAllocAsync became managed");
	ok(cuMemFreeAsync(a, s) == CUDA_SUCCESS, "cuMemFreeAsync of converted memory");
	ok(cuMemFree(a) != CUDA_SUCCESS, "freed exactly once (second free fails)");
}

/* free bytes as the application sees them */
static size_t app_free(void)
{
	size_t f = 0, t = 0;
	cuMemGetInfo(&f, &t);
	return f;
}

static void case_limit(void)
{
	/* NVSHARE_GPU_MEMORY_LIMIT=512Mi */
	setup();
	size_t f = 0, t = 0;
	CUresult gr = cuMemGetInfo(&f, &t);
	ok(gr == CUDA_SUCCESS && t == 512 * MiB && f == 512 * MiB,
	   "cuMemGetInfo: total %zu free %zu = the limit", t, f);
	ok(total_mem() == 512 * MiB, "cuDeviceTotalMem = the limit (%zu)", total_mem());
	CUdeviceptr p = 0, q = 0;
	ok(cuMemAlloc(&p, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY,
	   "600 MiB over a 512 MiB limit: OOM");
	ok(cuMemAlloc(&p, 400 * MiB) == CUDA_SUCCESS, "400 MiB fits; the process carried on");
	ok(app_free() == 112 * MiB, "free = limit - used (%zu)", app_free());
	ok(cuMemAlloc(&q, 200 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "another 200 MiB: OOM");
	ok(cuMemAllocManaged(&q, 200 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY,
	   "cuMemAllocManaged counts too");
	CUstream s;
	cuStreamCreate(&s, 0);
	ok(cuMemAllocAsync(&q, 200 * MiB, s) == CUDA_ERROR_OUT_OF_MEMORY,
	   "cuMemAllocAsync counts too");
	cuMemFree(p);
	ok(app_free() == 512 * MiB, "free restored after cuMemFree");
	ok(cuMemAlloc(&q, 500 * MiB) == CUDA_SUCCESS, "500 MiB after the free");
	cuMemFree(q);

	/* VMM: device location counted, host location not */
	CUmemAllocationProp prop = {0};
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CUmemGenericAllocationHandle h1 = 0, h2 = 0;
	ok(cuMemCreate(&h1, 256 * MiB, &prop, 0) == CUDA_SUCCESS, "cuMemCreate 256 MiB on the GPU");
	ok(app_free() == 256 * MiB, "VMM handle counted (free %zu)", app_free());
	ok(cuMemCreate(&h2, 300 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY,
	   "VMM over the limit: OOM");
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
	CUresult hr = cuMemCreate(&h2, 300 * MiB, &prop, 0);
	ok(app_free() == 256 * MiB, "host-located VMM not counted (driver said %d)", (int)hr);
	if (hr == CUDA_SUCCESS)
		cuMemRelease(h2);
	ok(cuMemRelease(h1) == CUDA_SUCCESS && app_free() == 512 * MiB, "cuMemRelease un-counts");

	/* arrays */
	CUDA_ARRAY_DESCRIPTOR ad = {
	    .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
	CUarray arr;
	hr = cuArrayCreate(&arr, &ad);
	ok(hr == CUDA_SUCCESS && app_free() == 496 * MiB, "cuArrayCreate 16 MiB counted (free %zu)",
	   app_free());
	if (hr == CUDA_SUCCESS)
		ok(cuArrayDestroy(arr) == CUDA_SUCCESS && app_free() == 512 * MiB,
		   "cuArrayDestroy");

	/* pools: explicit pool allocations counted as pinned */
	CUmemPoolProps pp = {0};
	pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = 0;
	CUmemoryPool pool;
	if (cuMemPoolCreate(&pool, &pp) == CUDA_SUCCESS) {
		CUdeviceptr x = 0;
		ok(cuMemAllocFromPoolAsync(&x, 128 * MiB, pool, s) == CUDA_SUCCESS &&
		       !is_managed(x) && app_free() == 384 * MiB,
		   "cuMemAllocFromPoolAsync counted as pinned (free %zu)", app_free());
		ok(cuMemAllocFromPoolAsync(&x, 400 * MiB, pool, s) == CUDA_ERROR_OUT_OF_MEMORY,
		   "pool allocation over the limit: OOM");
		ok(cuMemFreeAsync(x, s) == CUDA_SUCCESS && app_free() == 512 * MiB,
		   "cuMemFreeAsync of pool memory un-counts");
	}
}

static size_t graph_nodes(CUgraph g)
{
	size_t n = 0;
	cuGraphGetNodes(g, NULL, &n);
	return n;
}

/* A node description for cuGraphAddNode (the driver wants every unused
 * byte zero). */
static CUgraphNodeParams node_params(CUgraphNodeType type)
{
	CUgraphNodeParams np;
	memset(&np, 0, sizeof np);
	np.type = type;
	return np;
}

static CUgraphNodeParams free_node(CUdeviceptr p)
{
	CUgraphNodeParams np = node_params(CU_GRAPH_NODE_TYPE_MEM_FREE);
	np.free.dptr = p;
	return np;
}

static CUgraphNodeParams alloc_node(size_t bytes, CUmemLocationType where)
{
	CUgraphNodeParams np = node_params(CU_GRAPH_NODE_TYPE_MEM_ALLOC);
	np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.alloc.poolProps.location.type = where;
	np.alloc.poolProps.location.id = 0;
	np.alloc.bytesize = bytes;
	return np;
}

static void case_graph(void)
{
	/* NVSHARE_GPU_MEMORY_LIMIT=512Mi: graph memory nodes added explicitly
	 * are counted like captured cuMemAllocAsync (pinned, from the node's
	 * creation) and refused over the limit. Each call is made before its
	 * ok() so that the message shows the state after it. */
	setup();
	CUgraph g;
	ok(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate");
	CUDA_MEM_ALLOC_NODE_PARAMS ap = {0};
	ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ap.poolProps.location.id = 0;
	ap.bytesize = 128 * MiB;
	CUgraphNode n1, n2, nx;
	CUresult r = cuGraphAddMemAllocNode(&n1, g, NULL, 0, &ap);
	CUdeviceptr a1 = ap.dptr;
	ok(r == CUDA_SUCCESS && a1 && !is_managed(a1),
	   "cuGraphAddMemAllocNode 128 MiB: device memory at 0x%llx", (unsigned long long)a1);
	size_t f = app_free();
	ok(f == 384 * MiB, "alloc node counted: cuMemGetInfo free 512 -> %zu MiB",
	   (size_t)(f / MiB));
	CUDA_MEM_ALLOC_NODE_PARAMS got = {0};
	r = cuGraphMemAllocNodeGetParams(n1, &got);
	ok(r == CUDA_SUCCESS && got.dptr == a1 && got.bytesize == 128 * MiB,
	   "the node reports its allocation (driver's view unchanged)");

	ap.bytesize = 400 * MiB;
	ap.dptr = 0;
	r = cuGraphAddMemAllocNode(&nx, g, NULL, 0, &ap);
	ok(r == CUDA_ERROR_OUT_OF_MEMORY, "400 MiB alloc node over the limit: OOM (%d)", (int)r);
	size_t nodes = graph_nodes(g);
	f = app_free();
	ok(nodes == 1 && ap.dptr == 0 && f == 384 * MiB,
	   "refused before the driver: no node added (%zu), nothing counted (free %zu MiB)", nodes,
	   (size_t)(f / MiB));

	/* the generic entry points: _v2 (cuda.h's cuGraphAddNode) and the
	 * 12.2 ABI as cuGetProcAddress hands it out */
	CUgraphNodeParams np = alloc_node(300 * MiB, CU_MEM_LOCATION_TYPE_DEVICE);
	r = cuGraphAddNode(&n2, g, NULL, NULL, 0, &np);
	CUdeviceptr a2 = np.alloc.dptr;
	f = app_free();
	ok(r == CUDA_SUCCESS && a2, "process carried on: cuGraphAddNode_v2 MEM_ALLOC 300 MiB");
	ok(f == 84 * MiB, "generic alloc node counted (free %zu MiB)", (size_t)(f / MiB));
	PFN_cuGraphAddNode_v12020 add_v1 = NULL;
	r = cuGetProcAddress("cuGraphAddNode", (void **)&add_v1, 12020, 0, NULL);
	ok(r == CUDA_SUCCESS && !strncmp(lib_of((void *)add_v1), "libnvshare", 10),
	   "cuGetProcAddress(cuGraphAddNode@12020) -> our wrapper (%s)", lib_of((void *)add_v1));
	if (!add_v1)
		return;
	np = alloc_node(100 * MiB, CU_MEM_LOCATION_TYPE_DEVICE);
	r = add_v1(&nx, g, NULL, 0, &np);
	nodes = graph_nodes(g);
	ok(r == CUDA_ERROR_OUT_OF_MEMORY && nodes == 2,
	   "cuGraphAddNode (12.2 ABI) MEM_ALLOC over the limit: OOM (%d), no node (%zu)", (int)r,
	   nodes);

	/* free nodes un-count */
	r = cuGraphAddMemFreeNode(&nx, g, &n1, 1, a1);
	f = app_free();
	ok(r == CUDA_SUCCESS && f == 212 * MiB,
	   "cuGraphAddMemFreeNode un-counts the 128 MiB (free %zu MiB)", (size_t)(f / MiB));
	r = cuGraphAddMemFreeNode(&nx, g, NULL, 0, a1);
	f = app_free();
	ok(r != CUDA_SUCCESS && f == 212 * MiB,
	   "a second free node of it: the driver's error (%d), nothing un-counted twice", (int)r);
	CUgraphNodeParams fp = free_node(a2);
	r = add_v1(&nx, g, &n2, 1, &fp);
	f = app_free();
	ok(r == CUDA_SUCCESS && f == 512 * MiB,
	   "cuGraphAddNode (12.2 ABI) MEM_FREE un-counts the 300 MiB (free %zu MiB)",
	   (size_t)(f / MiB));

	/* not GPU memory, not memory at all: untouched */
	np = alloc_node(600 * MiB, CU_MEM_LOCATION_TYPE_HOST);
	r = cuGraphAddNode(&nx, g, NULL, NULL, 0, &np);
	f = app_free();
	ok(r != CUDA_ERROR_OUT_OF_MEMORY && f == 512 * MiB,
	   "host-located alloc node not counted (driver said %d)", (int)r);
	CUgraphNodeParams ep = node_params(CU_GRAPH_NODE_TYPE_EMPTY);
	r = cuGraphAddNode(&nx, g, NULL, NULL, 0, &ep);
	f = app_free();
	ok(r == CUDA_SUCCESS && f == 512 * MiB, "other node types pass through");

	/* memory not freed in its graph: counted until cuMemFree; the graph runs */
	np = alloc_node(64 * MiB, CU_MEM_LOCATION_TYPE_DEVICE);
	r = add_v1(&nx, g, NULL, 0, &np);
	f = app_free();
	ok(r == CUDA_SUCCESS && f == 448 * MiB,
	   "cuGraphAddNode (12.2 ABI) MEM_ALLOC 64 MiB counted (free %zu MiB)", (size_t)(f / MiB));
	CUgraphExec ge;
	CUstream s;
	cuStreamCreate(&s, 0);
	r = cuGraphInstantiate(&ge, g, 0);
	if (r == CUDA_SUCCESS)
		r = cuGraphLaunch(ge, s);
	if (r == CUDA_SUCCESS)
		r = cuStreamSynchronize(s);
	ok(r == CUDA_SUCCESS, "the graph with memory nodes instantiates and runs (%d)", (int)r);
	cuGraphExecDestroy(ge);
	cuGraphDestroy(g);
	f = app_free();
	ok(f == 448 * MiB, "still counted after the graph is gone (its memory outlives it)");
	r = cuMemFree(np.alloc.dptr);
	f = app_free();
	ok(r == CUDA_SUCCESS && f == 512 * MiB,
	   "cuMemFree of graph memory un-counts it (free %zu MiB)", (size_t)(f / MiB));
}

static void case_graph_disable(void)
{
	/* NVSHARE_DISABLE=1 and a 512Mi limit: memory nodes pass through */
	setup();
	CUgraph g;
	CUgraphNode n;
	cuGraphCreate(&g, 0);
	CUgraphNodeParams np = alloc_node(600 * MiB, CU_MEM_LOCATION_TYPE_DEVICE);
	ok(cuGraphAddNode(&n, g, NULL, NULL, 0, &np) == CUDA_SUCCESS,
	   "NVSHARE_DISABLE=1: 600 MiB alloc node passes (no limit)");
	CUgraphNodeParams fp = free_node(np.alloc.dptr);
	ok(cuGraphAddNode(&n, g, NULL, NULL, 0, &fp) == CUDA_SUCCESS, "and its free node");
	cuGraphDestroy(g);
}

static void case_default(void)
{
	/* no limit: the GPU's size bounds one process */
	setup();
	size_t t = total_mem(), f = 0, tt = 0;
	cuMemGetInfo(&f, &tt);
	ok(tt == t && t > 0, "unlimited: cuMemGetInfo total is physical (%zu)", tt);
	CUdeviceptr p = 0, q = 0;
	ok(cuMemAlloc(&p, t + MiB) == CUDA_ERROR_OUT_OF_MEMORY,
	   "more than the GPU: OOM by default");
	ok(cuMemAlloc(&p, t / 2) == CUDA_SUCCESS, "half the GPU fits");
	ok(cuMemAlloc(&q, t / 2 + MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the rest plus 1 MiB: OOM");
	cuMemFree(p);
}

static void case_oversub(void)
{
	/* NVSHARE_ENABLE_SINGLE_OVERSUB=1 */
	setup();
	size_t t = total_mem();
	CUdeviceptr p = 0;
	ok(cuMemAlloc(&p, t + 64 * MiB) == CUDA_SUCCESS && is_managed(p),
	   "NVSHARE_ENABLE_SINGLE_OVERSUB=1: more than the GPU allowed");
	cuMemFree(p);
}

static void case_unlimited_size(void)
{
	/* NVSHARE_GPU_MEMORY_LIMIT=$1 given in bytes on the command line:
	 * checks the parsed value through cuMemGetInfo. */
	setup();
	size_t f, t;
	cuMemGetInfo(&f, &t);
	printf("total=%zu\n", t);
}

#define NTHREADS 16
static void *racer(void *arg)
{
	cuCtxSetCurrent(ctx);
	CUdeviceptr *held = arg;
	int n = 0;
	for (int i = 0; i < 200; i++) {
		CUdeviceptr p;
		if (cuMemAlloc(&p, 48 * MiB) == CUDA_SUCCESS) {
			if (n < 64)
				held[n++] = p;
			else
				cuMemFree(p);
		} else if (n) {
			cuMemFree(held[--n]);
		}
	}
	return (void *)(long)n;
}

static void case_threads(void)
{
	/* NVSHARE_GPU_MEMORY_LIMIT=1Gi: 16 threads race allocations */
	setup();
	pthread_t th[NTHREADS];
	static CUdeviceptr held[NTHREADS][64];
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, racer, held[i]);
	long total = 0;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;
		pthread_join(th[i], &r);
		total += (long)r;
	}
	ok(total * 48 * MiB <= 1024 * MiB, "racing threads hold %ld x 48 MiB <= 1 GiB", total);
	ok(app_free() == 1024 * MiB - (size_t)total * 48 * MiB, "accounting matches what is held");
	for (int i = 0; i < NTHREADS; i++)
		for (int j = 0; j < 64; j++)
			if (held[i][j])
				cuMemFree(held[i][j]);
	ok(app_free() == 1024 * MiB, "all freed: back to the limit (%zu)", app_free());
}

static void case_fork(void)
{
	/* NVSHARE_GPU_MEMORY_LIMIT=512Mi: the child's accounting starts empty */
	setup();
	CUdeviceptr p = 0;
	ok(cuMemAlloc(&p, 400 * MiB) == CUDA_SUCCESS, "parent holds 400 MiB");
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		/* fresh CUDA use in the child (the sim allows it) */
		CUdevice d;
		CUcontext cc;
		cuDeviceGet(&d, 0);
		cuDevicePrimaryCtxRetain(&cc, d);
		cuCtxSetCurrent(cc);
		CUdeviceptr q = 0;
		size_t f = app_free();
		CUresult r = cuMemAlloc(&q, 400 * MiB);
		printf("%sok - child: accounting re-initialised (free %zu, 400 MiB alloc %d)\n",
		       f == 512 * MiB && r == CUDA_SUCCESS ? "" : "not ", f, (int)r);
		fflush(stdout);
		_exit(0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exited cleanly");
	ok(app_free() == 112 * MiB, "parent's accounting unchanged (free %zu)", app_free());
}

static void case_disable(void)
{
	/* NVSHARE_DISABLE=1 and a 512Mi limit: everything passes through */
	setup();
	CUdeviceptr p = 0;
	ok(cuMemAlloc(&p, 600 * MiB) == CUDA_SUCCESS && !is_managed(p),
	   "NVSHARE_DISABLE=1: cuMemAlloc passes through (not managed, no limit)");
	size_t f, t;
	cuMemGetInfo(&f, &t);
	ok(t == total_mem() && t != 512 * MiB, "NVSHARE_DISABLE=1: physical memory info");
	cuMemFree(p);
}

/* Waits up to 10 s until cuMemGetInfo reports `total`. */
static int wait_total(size_t want)
{
	for (int i = 0; i < 500; i++) {
		size_t f, t;
		if (cuMemGetInfo(&f, &t) == CUDA_SUCCESS && t == want)
			return 1;
		usleep(20000);
	}
	return 0;
}

static void touch(const char *name)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", getenv("NVS_STEP_DIR") ? getenv("NVS_STEP_DIR") : ".",
		 name);
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
}

static void case_runtime(void)
{
	/* the scheduler lowers the limit to 256 MiB, then removes it */
	setup();
	size_t phys = total_mem();
	CUdeviceptr p = 0, q = 0;
	ok(cuMemAlloc(&p, 400 * MiB) == CUDA_SUCCESS, "400 MiB before any run-time limit");
	touch("ready1");
	ok(wait_total(256 * MiB), "run-time limit 256 MiB seen by cuMemGetInfo");
	ok(app_free() == 0, "lowered below use: free clamps at 0");
	ok(cuMemAlloc(&q, MiB) == CUDA_ERROR_OUT_OF_MEMORY,
	   "new allocations fail while over the limit");
	ok(is_managed(p), "existing memory stays");
	ok(cuMemFree(p) == CUDA_SUCCESS && cuMemAlloc(&q, 200 * MiB) == CUDA_SUCCESS,
	   "after usage drops, allocations under the limit work");
	cuMemFree(q);
	touch("ready2");
	ok(wait_total(phys), "limit removed: physical total again");
	ok(cuMemAlloc(&q, 1024 * MiB) == CUDA_SUCCESS, "1 GiB after the limit was removed");
}

static void case_nocuda(void)
{
	ok(1, "ran without touching CUDA");
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "convert"))
		case_convert();
	else if (!strcmp(c, "limit"))
		case_limit();
	else if (!strcmp(c, "default"))
		case_default();
	else if (!strcmp(c, "oversub"))
		case_oversub();
	else if (!strcmp(c, "size"))
		case_unlimited_size();
	else if (!strcmp(c, "threads"))
		case_threads();
	else if (!strcmp(c, "fork"))
		case_fork();
	else if (!strcmp(c, "disable"))
		case_disable();
	else if (!strcmp(c, "graph"))
		case_graph();
	else if (!strcmp(c, "graph_disable"))
		case_graph_disable();
	else if (!strcmp(c, "runtime"))
		case_runtime();
	else if (!strcmp(c, "nocuda"))
		case_nocuda();
	else {
		fprintf(stderr, "usage: probe_alloc CASE\n");
		return 2;
	}
	return fails ? 1 : 0;
}
