/*
 * Simulated GPU: modules, kernels, launches, graphs.
 *
 * No code runs on the "GPU": a launch reserves GPU time. Its start is
 * max(now, the stream's ready time, the GPU's busy-until shared by every
 * process on the state file), so kernels of co-running processes serialize
 * like time-sliced contexts; its length is the kernel's duration plus the
 * time to fault-migrate the managed pages it touches. A launch first waits
 * while NVSHARE_SIM_MAX_PENDING launches on its stream are incomplete (the
 * push buffer is full; sim_stream_admit). See sim_api.h for the
 * nvshare_sim_kernel parameter convention.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_internal.h"

struct sim_module {
	uint32_t magic;
	struct sim_func *funcs; /* linked list, one per name */
};
#define SIM_MODULE_MAGIC 0x444f4d53u

struct sim_func {
	uint32_t magic;
	struct sim_func *next;
	struct sim_module *mod;
	int is_sim;
	char name[128];
};
#define SIM_FUNC_MAGIC 0x434e5546u

static struct sim_module *module_check(void *h)
{
	struct sim_module *m = h;
	return m && m->magic == SIM_MODULE_MAGIC ? m : NULL;
}

static struct sim_func *func_check(void *h)
{
	struct sim_func *f = h;
	return f && f->magic == SIM_FUNC_MAGIC ? f : NULL;
}

static CUresult module_new(CUmodule *m)
{
	SIM_REQUIRE_INIT();
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_module *x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->magic = SIM_MODULE_MAGIC;
	sim_keep(x);
	*m = (CUmodule)x;
	return CUDA_SUCCESS;
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	if (!fname || access(fname, R_OK) != 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	return module_new(module);
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	return image ? module_new(module) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
			    CUjit_option *options, void **optionValues)
{
	return image ? module_new(module) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	return fatCubin ? module_new(module) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuModuleUnload(CUmodule hmod)
{
	struct sim_module *m = module_check(hmod);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	m->magic = 0; /* kept: functions may still be referenced by graphs */
	return CUDA_SUCCESS;
}

static CUresult get_func(struct sim_func **out, struct sim_module *m, const char *name)
{
	if (!out || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&sim_mu);
	struct sim_func *f;
	for (f = m->funcs; f; f = f->next)
		if (strcmp(f->name, name) == 0)
			break;
	if (!f) {
		f = calloc(1, sizeof(*f));
		if (f) {
			f->magic = SIM_FUNC_MAGIC;
			f->mod = m;
			snprintf(f->name, sizeof(f->name), "%s", name);
			f->is_sim = strcmp(name, NVSHARE_SIM_KERNEL_NAME) == 0;
			f->next = m->funcs;
			m->funcs = f;
		}
	}
	pthread_mutex_unlock(&sim_mu);
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = f;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	SIM_REQUIRE_INIT();
	return get_func((struct sim_func **)hfunc, module_check(hmod), name);
}

CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
	if (!count || !module_check(mod))
		return CUDA_ERROR_INVALID_VALUE;
	*count = 0;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	return module_check(hmod) ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	*mode = CU_MODULE_EAGER_LOADING;
	return CUDA_SUCCESS;
}

/* Libraries are modules; kernels are functions. */
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
			   void **jitOptionsValues, unsigned int numJitOptions,
			   CUlibraryOption *libraryOptions, void **libraryOptionValues,
			   unsigned int numLibraryOptions)
{
	return code ? module_new((CUmodule *)library) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
			       void **jitOptionsValues, unsigned int numJitOptions,
			       CUlibraryOption *libraryOptions, void **libraryOptionValues,
			       unsigned int numLibraryOptions)
{
	if (!fileName || access(fileName, R_OK) != 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	return module_new((CUmodule *)library);
}

CUresult cuLibraryUnload(CUlibrary library)
{
	return cuModuleUnload((CUmodule)library);
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	SIM_REQUIRE_INIT();
	return get_func((struct sim_func **)pKernel, module_check(library), name);
}

CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	if (!pMod || !module_check(library))
		return CUDA_ERROR_INVALID_HANDLE;
	*pMod = (CUmodule)library;
	return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
	if (!count || !module_check(lib))
		return CUDA_ERROR_INVALID_VALUE;
	*count = 0;
	return CUDA_SUCCESS;
}

CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
	return module_check(library) ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
	return module_check(library) ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	if (!pFunc || !func_check(kernel))
		return CUDA_ERROR_INVALID_HANDLE;
	*pFunc = (CUfunction)kernel;
	return CUDA_SUCCESS;
}

CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
	struct sim_func *f = func_check(kernel);
	if (!pLib || !f)
		return CUDA_ERROR_INVALID_HANDLE;
	*pLib = (CUlibrary)f->mod;
	return CUDA_SUCCESS;
}

static int func_attr(CUfunction_attribute a)
{
	switch (a) {
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		return 1024;
	case CU_FUNC_ATTRIBUTE_NUM_REGS:
		return 32;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION:
		return 90;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
		return 90;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
		return 49152;
	case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
		return -1;
	default:
		return 0;
	}
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	if (!pi || !func_check(hfunc))
		return CUDA_ERROR_INVALID_HANDLE;
	*pi = func_attr(attrib);
	return CUDA_SUCCESS;
}

CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
	return cuFuncGetAttribute(pi, attrib, (CUfunction)kernel);
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	return func_check(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
	return func_check(kernel) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	return func_check(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
	return func_check(kernel) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
	return func_check(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
	struct sim_func *f = func_check(hfunc);
	if (!hmod || !f)
		return CUDA_ERROR_INVALID_HANDLE;
	*hmod = (CUmodule)f->mod;
	return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	struct sim_func *f = func_check(hfunc);
	if (!name || !f)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = f->name;
	return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
	return cuFuncGetName(name, (CUfunction)hfunc);
}

CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
	if (!state || !func_check(function))
		return CUDA_ERROR_INVALID_HANDLE;
	*state = CU_FUNCTION_LOADING_STATE_LOADED;
	return CUDA_SUCCESS;
}

CUresult cuFuncLoad(CUfunction function)
{
	return func_check(function) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
						     size_t dynamicSMemSize)
{
	if (!numBlocks || blockSize <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	int n = 2048 / blockSize;
	*numBlocks = n > 32 ? 32 : n;
	return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
							      int blockSize, size_t dynamicSMemSize,
							      unsigned int flags)
{
	return cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, func, blockSize,
							   dynamicSMemSize);
}

CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
					  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
					  size_t dynamicSMemSize, int blockSizeLimit)
{
	if (!minGridSize || !blockSize)
		return CUDA_ERROR_INVALID_VALUE;
	*blockSize = blockSizeLimit > 0 && blockSizeLimit < 1024 ? blockSizeLimit : 1024;
	*minGridSize = 132 * (2048 / *blockSize);
	return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize,
						   CUfunction func,
						   CUoccupancyB2DSize blockSizeToDynamicSMemSize,
						   size_t dynamicSMemSize, int blockSizeLimit,
						   unsigned int flags)
{
	return cuOccupancyMaxPotentialBlockSize(minGridSize, blockSize, func,
						blockSizeToDynamicSMemSize, dynamicSMemSize,
						blockSizeLimit);
}

/* ---- running a kernel ---- */

/* launch: 1 for a launch of its own, bounded by the stream's pending
 * launches (sim_stream_admit) and counted in them; 0 for a node of a graph
 * launch (graph_launch bounds and counts the graph as one launch). */
static CUresult run_kernel(struct sim_stream *s, const struct sim_kernel_desc *k, int launch)
{
	if (s->capturing == CU_STREAM_CAPTURE_STATUS_ACTIVE)
		return sim_graph_record(s, k);
	if (s->capturing == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (k->host_fn) {
		/* Host functions run in order on the stream; run inline once the
		 * stream's earlier work is complete (the launching thread waits). */
		sim_sleep_until(sim_stream_ready(s));
		if (k->fn)
			k->fn(k->user);
		return CUDA_SUCCESS;
	}
	if (launch)
		sim_stream_admit(s);
	int dev = s->ctx->dev;
	uint64_t ready = sim_stream_ready(s), fault_ns = 0;
	if (k->touch_ptr && k->touch_bytes) {
		/* An unmapped (or inaccessible) VMM range faults the kernel, as
		 * on a real GPU: the launch reports it at once. */
		CUresult r = sim_gpu_access(k->touch_ptr, k->touch_bytes, dev, 0);
		if (r != CUDA_SUCCESS)
			return r;
	}
	if (k->touch_ptr && k->touch_bytes)
		fault_ns = sim_migrate(k->touch_ptr, k->touch_bytes, dev, ready, 1, NULL) - ready;
	sim_lock();
	struct sim_gpu *g = &sim_sh->gpu[dev];
	uint64_t start = ready > g->busy_until ? ready : g->busy_until;
	uint64_t end = start + fault_ns + k->dur_ns;
	g->busy_until = end;
	g->c.kernels++;
	g->c.kernel_busy_ns += end - start;
	struct sim_proc *me = sim_self_locked();
	me->c[dev].kernels++;
	me->c[dev].kernel_busy_ns += end - start;
	me->k_start[dev] = start;
	me->k_end[dev] = end;
	sim_util_add_locked(dev, start, end);
	sim_unlock();
	/* The GPU's own timeline (NVSHARE_SIM_LOG): when each kernel runs on
	 * the simulated device, whatever the process's CPU time does later. */
	sim_log("kernel dev=%d start_ns=%llu end_ns=%llu", dev, (unsigned long long)start,
		(unsigned long long)end);
	sim_stream_enqueue(s, end, launch);
	return CUDA_SUCCESS;
}

CUresult sim_run_kernel(struct sim_stream *s, const struct sim_kernel_desc *k)
{
	return run_kernel(s, k, 1);
}

static void describe(struct sim_kernel_desc *k, struct sim_func *f, void **params)
{
	memset(k, 0, sizeof(*k));
	k->dur_ns = sim_cfg.kernel_ns;
	if (f->is_sim && params && params[0]) {
		k->dur_ns = *(unsigned long long *)params[0] * 1000ULL;
		if (params[1] && params[2]) {
			k->touch_ptr = *(CUdeviceptr *)params[1];
			k->touch_bytes = *(unsigned long long *)params[2];
		}
	}
}

static CUresult launch(CUfunction hf, CUstream h, int pt, void **params, const char *api)
{
	SIM_REQUIRE_INIT();
	struct sim_func *f = func_check(hf);
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return h ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
	struct sim_kernel_desc k;
	describe(&k, f, params);
	CUresult r = sim_run_kernel(s, &k);
	sim_log("call %s %s dur_us=%llu -> %d", api, f->name, (unsigned long long)(k.dur_ns / 1000),
		(int)r);
	return r;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			CUstream h, void **kernelParams, void **extra)
{
	return launch(f, h, 0, kernelParams, "cuLaunchKernel");
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			     unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			     CUstream h, void **kernelParams, void **extra)
{
	return launch(f, h, 1, kernelParams, "cuLaunchKernel_ptsz");
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			  void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, config->hStream, 0, kernelParams, "cuLaunchKernelEx");
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			       void **extra)
{
	if (!config)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, config->hStream, 1, kernelParams, "cuLaunchKernelEx_ptsz");
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
				   unsigned int bx, unsigned int by, unsigned int bz,
				   unsigned int shmem, CUstream h, void **kernelParams)
{
	return launch(f, h, 0, kernelParams, "cuLaunchCooperativeKernel");
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
					unsigned int gz, unsigned int bx, unsigned int by,
					unsigned int bz, unsigned int shmem, CUstream h,
					void **kernelParams)
{
	return launch(f, h, 0, kernelParams, "cuLaunchCooperativeKernel_ptsz");
}

CUresult cuLaunch(CUfunction f)
{
	return launch(f, NULL, 0, NULL, "cuLaunch");
}

CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
	return launch(f, NULL, 0, NULL, "cuLaunchGrid");
}

CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
	return launch(f, hStream, 0, NULL, "cuLaunchGridAsync");
}

static CUresult host_func(CUstream h, CUhostFn fn, void *user, int pt)
{
	SIM_REQUIRE_INIT();
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	struct sim_kernel_desc k = {.host_fn = 1, .fn = fn, .user = user};
	return sim_run_kernel(s, &k);
}

CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *userData)
{
	return host_func(h, fn, userData, 0);
}

CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *userData)
{
	return host_func(h, fn, userData, 1);
}

static CUresult add_callback(CUstream h, CUstreamCallback cb, void *user, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!s || !cb)
		return CUDA_ERROR_INVALID_VALUE;
	if (s->capturing)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	sim_sleep_until(sim_stream_ready(s));
	cb(h, CUDA_SUCCESS, user);
	return CUDA_SUCCESS;
}

CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void *user, unsigned int flags)
{
	return add_callback(h, cb, user, 0);
}

CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void *user, unsigned int flags)
{
	return add_callback(h, cb, user, 1);
}

/* ---- graphs: a list of kernel/host nodes replayed in order (memory
 * nodes allocate and free when they are added, see sim_alloc.c) ---- */

struct sim_gnode {
	uint32_t magic;
	int type; /* CUgraphNodeType */
	struct sim_graph *g;
	struct sim_kernel_desc k;
	CUDA_MEM_ALLOC_NODE_PARAMS alloc; /* MEM_ALLOC (accessDescs not kept) */
	CUdeviceptr freed;		  /* MEM_FREE */
};
#define SIM_GNODE_MAGIC 0x45444f4eu

struct sim_graph {
	uint32_t magic;
	struct sim_gnode **nodes;
	size_t n, cap;
};
#define SIM_GRAPH_MAGIC 0x48505247u

struct sim_gexec {
	uint32_t magic;
	struct sim_kernel_desc *k;
	size_t n;
};
#define SIM_GEXEC_MAGIC 0x43455847u

static struct sim_graph *graph_check(CUgraph h)
{
	struct sim_graph *g = (struct sim_graph *)h;
	return g && g->magic == SIM_GRAPH_MAGIC ? g : NULL;
}

static struct sim_gnode *gnode_check(CUgraphNode h)
{
	struct sim_gnode *n = (struct sim_gnode *)h;
	return n && n->magic == SIM_GNODE_MAGIC ? n : NULL;
}

static struct sim_gexec *gexec_check(CUgraphExec h)
{
	struct sim_gexec *x = (struct sim_gexec *)h;
	return x && x->magic == SIM_GEXEC_MAGIC ? x : NULL;
}

struct sim_graph *sim_graph_new(void)
{
	struct sim_graph *g = calloc(1, sizeof(*g));
	if (g)
		g->magic = SIM_GRAPH_MAGIC;
	return g;
}

static struct sim_gnode *graph_add(struct sim_graph *g, int type, const struct sim_kernel_desc *k)
{
	struct sim_gnode *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	pthread_mutex_lock(&sim_mu);
	if (g->n == g->cap) {
		size_t c = g->cap ? g->cap * 2 : 16;
		struct sim_gnode **x = realloc(g->nodes, c * sizeof(*x));
		if (!x) {
			pthread_mutex_unlock(&sim_mu);
			free(n);
			return NULL;
		}
		g->nodes = x;
		g->cap = c;
	}
	n->magic = SIM_GNODE_MAGIC;
	n->type = type;
	n->g = g;
	if (k)
		n->k = *k;
	g->nodes[g->n++] = n;
	pthread_mutex_unlock(&sim_mu);
	return n;
}

CUresult sim_graph_record(struct sim_stream *s, const struct sim_kernel_desc *k)
{
	if (!graph_add(s->capture_graph,
		       k->host_fn ? CU_GRAPH_NODE_TYPE_HOST : CU_GRAPH_NODE_TYPE_KERNEL, k))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	SIM_REQUIRE_INIT();
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_graph *g = sim_graph_new();
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

void sim_graph_free(struct sim_graph *g)
{
	if (g)
		cuGraphDestroy((CUgraph)g);
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
	struct sim_graph *g = graph_check(hGraph);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < g->n; i++) {
		g->nodes[i]->magic = 0;
		free(g->nodes[i]);
	}
	free(g->nodes);
	g->magic = 0;
	free(g);
	return CUDA_SUCCESS;
}

static CUresult add_kernel_node(CUgraphNode *ph, CUgraph hg, CUfunction fn, CUkernel kern,
				void **params)
{
	SIM_REQUIRE_INIT();
	struct sim_graph *g = graph_check(hg);
	struct sim_func *f = func_check(fn ? (void *)fn : (void *)kern);
	if (!ph || !g || !f)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_kernel_desc k;
	describe(&k, f, params);
	struct sim_gnode *n = graph_add(g, CU_GRAPH_NODE_TYPE_KERNEL, &k);
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ph = (CUgraphNode)n;
	return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n,
				 const CUDA_KERNEL_NODE_PARAMS *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return add_kernel_node(ph, g, p->func, p->kern, p->kernelParams);
}

CUresult cuGraphAddKernelNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n,
			      const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return add_kernel_node(ph, g, p->func, NULL, p->kernelParams);
}

static CUresult add_host_node(CUgraphNode *ph, CUgraph hg, CUhostFn fn, void *user)
{
	struct sim_graph *g = graph_check(hg);
	if (!ph || !g || !fn)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_kernel_desc k = {.host_fn = 1, .fn = fn, .user = user};
	struct sim_gnode *x = graph_add(g, CU_GRAPH_NODE_TYPE_HOST, &k);
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ph = (CUgraphNode)x;
	return CUDA_SUCCESS;
}

CUresult cuGraphAddHostNode(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps, size_t n,
			    const CUDA_HOST_NODE_PARAMS *p)
{
	return p ? add_host_node(ph, hg, p->fn, p->userData) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphAddEmptyNode(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps, size_t n)
{
	struct sim_graph *g = graph_check(hg);
	if (!ph || !g)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_gnode *x = graph_add(g, CU_GRAPH_NODE_TYPE_EMPTY, NULL);
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ph = (CUgraphNode)x;
	return CUDA_SUCCESS;
}

/* Memory nodes. The allocation node returns its address in *dptr; a free
 * node takes only such an address, once (sim_alloc.c). */
static CUresult add_mem_alloc_node(CUgraphNode *ph, CUgraph hg, const CUmemPoolProps *pp,
				   size_t bytes, CUdeviceptr *dptr)
{
	SIM_REQUIRE_INIT();
	struct sim_graph *g = graph_check(hg);
	if (!ph || !g || !dptr)
		return CUDA_ERROR_INVALID_VALUE;
	CUdeviceptr p = 0;
	CUresult r = sim_graph_mem_alloc(&p, bytes, pp);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_gnode *x = graph_add(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, NULL);
	if (!x) {
		sim_graph_mem_free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	x->alloc.poolProps = *pp;
	x->alloc.bytesize = bytes;
	x->alloc.dptr = p;
	*dptr = p;
	*ph = (CUgraphNode)x;
	sim_log("call graph alloc node %zu bytes on GPU %d -> 0x%llx", bytes, pp->location.id,
		(unsigned long long)p);
	return CUDA_SUCCESS;
}

static CUresult add_mem_free_node(CUgraphNode *ph, CUgraph hg, CUdeviceptr dptr)
{
	SIM_REQUIRE_INIT();
	struct sim_graph *g = graph_check(hg);
	if (!ph || !g)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = sim_graph_mem_free(dptr);
	if (r != CUDA_SUCCESS)
		return r;
	struct sim_gnode *x = graph_add(g, CU_GRAPH_NODE_TYPE_MEM_FREE, NULL);
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->freed = dptr;
	*ph = (CUgraphNode)x;
	return CUDA_SUCCESS;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps, size_t n,
				CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return add_mem_alloc_node(ph, hg, &p->poolProps, p->bytesize, &p->dptr);
}

CUresult cuGraphAddMemFreeNode(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps, size_t n,
			       CUdeviceptr dptr)
{
	return add_mem_free_node(ph, hg, dptr);
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
	struct sim_gnode *x = gnode_check(hNode);
	if (!x || x->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !params_out)
		return CUDA_ERROR_INVALID_VALUE;
	*params_out = x->alloc;
	return CUDA_SUCCESS;
}

CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
	struct sim_gnode *x = gnode_check(hNode);
	if (!x || x->type != CU_GRAPH_NODE_TYPE_MEM_FREE || !dptr_out)
		return CUDA_ERROR_INVALID_VALUE;
	*dptr_out = x->freed;
	return CUDA_SUCCESS;
}

/* The generic cuGraphAddNode: the node types the simulator models. Unused
 * reserved bytes must be zero, as the driver requires. */
static CUresult add_node(CUgraphNode *ph, CUgraph hg, CUgraphNodeParams *p)
{
	if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
		return CUDA_ERROR_INVALID_VALUE;
	switch (p->type) {
	case CU_GRAPH_NODE_TYPE_KERNEL:
		return add_kernel_node(ph, hg, p->kernel.func, p->kernel.kern,
				       p->kernel.kernelParams);
	case CU_GRAPH_NODE_TYPE_HOST:
		return add_host_node(ph, hg, p->host.fn, p->host.userData);
	case CU_GRAPH_NODE_TYPE_EMPTY:
		return cuGraphAddEmptyNode(ph, hg, NULL, 0);
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		return add_mem_alloc_node(ph, hg, &p->alloc.poolProps, p->alloc.bytesize,
					  &p->alloc.dptr);
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		return add_mem_free_node(ph, hg, p->free.dptr);
	default:
		sim_log("call cuGraphAddNode type %d -> not supported", (int)p->type);
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

/* cuda.h maps the name cuGraphAddNode to cuGraphAddNode_v2; the driver's
 * internal view declares both ABIs. */
CUresult cuGraphAddNode(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps, size_t n,
			CUgraphNodeParams *p)
{
	return add_node(ph, hg, p);
}

CUresult cuGraphAddNode_v2(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps,
			   const CUgraphEdgeData *edgeData, size_t n, CUgraphNodeParams *p)
{
	return add_node(ph, hg, p);
}

CUresult cuGraphGetNodes(CUgraph hg, CUgraphNode *nodes, size_t *numNodes)
{
	struct sim_graph *g = graph_check(hg);
	if (!g || !numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes) {
		size_t m = *numNodes < g->n ? *numNodes : g->n;
		for (size_t i = 0; i < m; i++)
			nodes[i] = (CUgraphNode)g->nodes[i];
		*numNodes = m;
	} else {
		*numNodes = g->n;
	}
	return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	struct sim_gnode *n = gnode_check(hNode);
	if (!n || !type)
		return CUDA_ERROR_INVALID_VALUE;
	*type = (CUgraphNodeType)n->type;
	return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *ph, CUgraph hg)
{
	SIM_REQUIRE_INIT();
	struct sim_graph *g = graph_check(hg);
	if (!ph || !g)
		return CUDA_ERROR_INVALID_VALUE;
	struct sim_gexec *x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	x->k = calloc(g->n ? g->n : 1, sizeof(*x->k));
	if (!x->k) {
		free(x);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < g->n; i++)
		if (g->nodes[i]->type == CU_GRAPH_NODE_TYPE_KERNEL ||
		    g->nodes[i]->type == CU_GRAPH_NODE_TYPE_HOST)
			x->k[x->n++] = g->nodes[i]->k;
	x->magic = SIM_GEXEC_MAGIC;
	*ph = (CUgraphExec)x;
	return CUDA_SUCCESS;
}

/* cuda.h maps the name cuGraphInstantiate to cuGraphInstantiateWithFlags and
 * no longer declares the 5-argument ABIs the driver still exports. */
#undef cuGraphInstantiate
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
			    char *logBuffer, size_t bufferSize);
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
			       char *logBuffer, size_t bufferSize);

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
			    char *logBuffer, size_t bufferSize)
{
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = 0;
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
			       char *logBuffer, size_t bufferSize)
{
	return cuGraphInstantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
				     unsigned long long flags)
{
	return instantiate(phGraphExec, hGraph);
}

static CUresult instantiate_params(CUgraphExec *ph, CUgraph hg, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	CUresult r = instantiate(ph, hg);
	if (p) {
		p->hErrNode_out = NULL;
		p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
						  : CUDA_GRAPH_INSTANTIATE_ERROR;
	}
	return r;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *ph, CUgraph hg, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	return instantiate_params(ph, hg, p);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *ph, CUgraph hg,
					   CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
	return instantiate_params(ph, hg, p);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	struct sim_gexec *x = gexec_check(hGraphExec);
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	x->magic = 0;
	free(x->k);
	free(x);
	return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec he, CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	struct sim_gexec *x = gexec_check(he);
	struct sim_stream *s = sim_stream_get(h, pt);
	if (!x || !s)
		return CUDA_ERROR_INVALID_HANDLE;
	/* One submission, however many nodes: bounded and counted as one
	 * launch that completes with its last node. */
	int live = s->capturing == CU_STREAM_CAPTURE_STATUS_NONE;
	if (live)
		sim_stream_admit(s);
	CUresult r = CUDA_SUCCESS;
	for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++)
		r = run_kernel(s, &x->k[i], 0);
	if (live)
		sim_stream_enqueue(s, 0, 1);
	if (r)
		return r;
	sim_log("call cuGraphLaunch nodes=%zu", x->n);
	return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
	return graph_launch(g, s, 0);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
	return graph_launch(g, s, 1);
}

static CUresult graph_upload(CUgraphExec he, CUstream h, int pt)
{
	SIM_REQUIRE_INIT();
	return gexec_check(he) && sim_stream_get(h, pt) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuGraphUpload(CUgraphExec g, CUstream s)
{
	return graph_upload(g, s, 0);
}
CUresult cuGraphUpload_ptsz(CUgraphExec g, CUstream s)
{
	return graph_upload(g, s, 1);
}
