/*
 * Allocation family: device allocations become managed (CU_MEM_ATTACH_GLOBAL)
 * so the scheduler can swap a process's memory out; every allocation is
 * reserved against the limit before the driver is asked.
 *
 * Stream-ordered allocations (cuMemAllocAsync): converted to a synchronous
 * managed allocation (valid earlier than the stream needs it, which is
 * allowed); cuMemFreeAsync of such memory synchronizes that stream and then
 * frees (the free must not overtake queued work). While the stream is being
 * captured a synchronous allocation is illegal, so the call passes through
 * and is accounted as pinned device memory (a graph memory node).
 * cuMemAllocFromPoolAsync (an explicit pool, possibly with IPC or
 * non-default attributes) passes through, accounted as pinned device memory.
 *
 * NVSHARE_UNIFIED_MEMORY=0 (per process) turns the conversion off: cuMemAlloc,
 * cuMemAllocPitch and cuMemAllocAsync get the driver's own device memory,
 * reserved against the limit first and counted as pinned device memory like
 * pools, so the process stays gated, limited and accounted but cannot
 * oversubscribe the GPU, and its memory can be exported with CUDA IPC
 * (hooks_ipc.c), which managed memory cannot.
 *
 * Graph memory nodes added explicitly (cuGraphAddMemAllocNode, or
 * cuGraphAddNode[_v2] with CU_GRAPH_NODE_TYPE_MEM_ALLOC) are what a captured
 * cuMemAllocAsync becomes, so they are counted the same way: reserved when
 * the node is added, pinned, un-counted by a free node (or any free) of the
 * address. Without this a program could build a graph that allocates beyond
 * its limit.
 */
#include "client/accounting.h"
#include "client/internal.h"
#include "client/sched_client.h"
#include "client/sched_swap.h"
#include "client/swap_engine.h"

#include "parse.h"

#include <string.h>

#define PITCH_ALIGN 512u

/* Device of the current context, first-use notification. */
static CUresult alloc_device(int *dev)
{
	CUresult r = nvs_current_device(dev);
	if (r == CUDA_SUCCESS)
		nvs_device_used(*dev);
	return r;
}

/* Completes a reservation of `bytes` on dev once the driver answered r:
 * undone if it failed, else *dptr (read after the call) tracked as pinned
 * device memory (pool or graph memory: never swapped). Returns r. */
static CUresult pinned_done(CUresult r, int dev, const CUdeviceptr *dptr, size_t bytes)
{
	if (r != CUDA_SUCCESS)
		nvs_acct_unreserve(dev, bytes);
	else
		nvs_acct_track(dev, *dptr, bytes, NVS_ALLOC_PINNED_DEVICE);
	return r;
}

/* Reserves `bytes` on the current context's device before a device-memory
 * allocation; *dev is where. CUDA_ERROR_OUT_OF_MEMORY over the limit. */
static CUresult device_reserve(int *dev, size_t bytes)
{
	CUresult r = alloc_device(dev);
	if (r != CUDA_SUCCESS)
		return r;
	return nvs_acct_reserve(*dev, bytes) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* NVSHARE_UNIFIED_MEMORY=0: what the driver answered for a device
 * allocation reserved on dev, logged. */
static CUresult device_done(const char *why, CUresult r, int dev, const CUdeviceptr *dptr,
			    size_t bytes)
{
	r = pinned_done(r, dev, dptr, bytes);
	if (r == CUDA_SUCCESS) {
		char b[32];
		NVS_DEBUG("%s: %s on GPU %d -> device memory 0x%llx (NVSHARE_UNIFIED_MEMORY=0, "
			  "counted as pinned)",
			  why, nvs_format_size(bytes, b, sizeof b), dev, (unsigned long long)*dptr);
	}
	return r;
}

/* Managed (1) or device memory (0) for a new allocation: read each time,
 * since the scheduler's MEMORY_MODE (a Pod's nvshare.com/unified-memory:
 * "false") may turn it off. Creating the context already attached its GPU,
 * waiting (bounded) for the scheduler's answer, which comes after
 * MEMORY_MODE: so the word normally decides the first allocation too. */
static int unified_now(void)
{
	return nvs_config_unified();
}

/* Managed allocation reserved against the limit. */
static CUresult alloc_managed(CUdeviceptr *dptr, size_t bytes, unsigned flags, const char *why)
{
	if (!nvs_real.cuMemAllocManaged)
		return nvs_unresolved("cuMemAllocManaged");
	if (!dptr || bytes == 0)
		return nvs_real.cuMemAllocManaged(dptr, bytes, flags); /* driver's error */
	int dev;
	CUresult r = alloc_device(&dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (nvs_acct_reserve(dev, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* Converted device memory goes by the swap engine's fast path; the
	 * application's own managed memory by the prefetch path (it may be
	 * used from the host). In trap mode converted memory is VMM memory,
	 * unmapped while swapped out (swap_engine.h). */
	int converted = strcmp(why, "cuMemAllocManaged") != 0;
	int trap = converted && nvs_swap_trap();
	r = trap ? nvs_svmm_alloc_backing(dev, bytes, dptr)
		 : nvs_real.cuMemAllocManaged(dptr, bytes, flags);
	if (r != CUDA_SUCCESS) {
		nvs_acct_unreserve(dev, bytes);
		return r;
	}
	nvs_acct_track(dev, *dptr, bytes, NVS_ALLOC_MANAGED);
	if (converted && !trap) {
		nvs_fast_track(dev, *dptr, bytes);
		nvs_swap_fresh(dev, *dptr, bytes);
	}
	char b[32];
	NVS_DEBUG("%s: %s on GPU %d -> %s 0x%llx (swap: %s path)", why,
		  nvs_format_size(bytes, b, sizeof b), dev,
		  trap ? "VMM memory (trap mode)" : "managed", (unsigned long long)*dptr,
		  converted && nvs_fast_enabled() ? "fast" : "prefetch");
	return CUDA_SUCCESS;
}

CUresult CUDAAPI nvs_wrap_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	nvs_init();
	if (nvs_cfg.disable)
		return nvs_real.cuMemAlloc_v2 ? nvs_real.cuMemAlloc_v2(dptr, bytesize)
					      : nvs_unresolved("cuMemAlloc_v2");
	if (unified_now())
		return alloc_managed(dptr, bytesize, CU_MEM_ATTACH_GLOBAL, "cuMemAlloc");
	if (!nvs_real.cuMemAlloc_v2)
		return nvs_unresolved("cuMemAlloc_v2");
	if (!dptr || bytesize == 0)
		return nvs_real.cuMemAlloc_v2(dptr, bytesize); /* driver's error */
	int dev;
	CUresult r = device_reserve(&dev, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	return device_done("cuMemAlloc", nvs_real.cuMemAlloc_v2(dptr, bytesize), dev, dptr,
			   bytesize);
}

CUresult CUDAAPI nvs_wrap_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
					     size_t Height, unsigned int ElementSizeBytes)
{
	nvs_init();
	if (nvs_cfg.disable)
		return nvs_real.cuMemAllocPitch_v2
			   ? nvs_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height,
							 ElementSizeBytes)
			   : nvs_unresolved("cuMemAllocPitch_v2");
	if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	if (WidthInBytes > SIZE_MAX - PITCH_ALIGN)
		return CUDA_ERROR_INVALID_VALUE;
	size_t pitch = (WidthInBytes + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
	if (Height > SIZE_MAX / pitch)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!unified_now()) {
		/* The driver picks the pitch; ours (512-byte rows) is what is
		 * counted, as for the managed form. */
		if (!nvs_real.cuMemAllocPitch_v2)
			return nvs_unresolved("cuMemAllocPitch_v2");
		int dev;
		CUresult r = device_reserve(&dev, pitch * Height);
		if (r != CUDA_SUCCESS)
			return r;
		return device_done("cuMemAllocPitch",
				   nvs_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height,
							       ElementSizeBytes),
				   dev, dptr, pitch * Height);
	}
	CUresult r = alloc_managed(dptr, pitch * Height, CU_MEM_ATTACH_GLOBAL, "cuMemAllocPitch");
	if (r == CUDA_SUCCESS)
		*pPitch = pitch;
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	nvs_init();
	if (nvs_cfg.disable)
		return nvs_real.cuMemAllocManaged
			   ? nvs_real.cuMemAllocManaged(dptr, bytesize, flags)
			   : nvs_unresolved("cuMemAllocManaged");
	return alloc_managed(dptr, bytesize, flags, "cuMemAllocManaged");
}

/* Drops ptr from the allocation table if we tracked it; returns its bytes
 * (0: not ours) and their GPU in *dev. `why` names the call for the log. */
static uint64_t untrack(CUdeviceptr ptr, const char *why, int *dev)
{
	uint64_t b = nvs_acct_untrack(ptr, dev);
	if (b) {
		char s[32];
		NVS_DEBUG("%s 0x%llx: %s on GPU %d released", why, (unsigned long long)ptr,
			  nvs_format_size(b, s, sizeof s), *dev);
	}
	return b;
}

/* Un-accounts ptr if we tracked it. */
static void forget(CUdeviceptr ptr, const char *why)
{
	int dev;
	uint64_t b = untrack(ptr, why, &dev);
	if (b)
		nvs_acct_unreserve(dev, b);
}

/* Frees memory the library allocated or converted: the swap engine lets go
 * of it first (its staging, if it is out), then the driver frees it (or the
 * engine does, for trap mode's VMM memory). */
static CUresult free_ours(CUdeviceptr dptr)
{
	nvs_fast_untrack(dptr);
	CUresult r;
	if (!nvs_svmm_free_backing(dptr, &r))
		r = nvs_real.cuMemFree_v2(dptr);
	return r;
}

/* free_ours, and the accounting. Managed memory is counted free before the
 * driver frees it: that takes ~7 ms per GiB on an H200 (0.5 ms for device
 * memory), and the scheduler, told first, lets a client waiting for that
 * room go on meanwhile (a job's end is a hand-off: the pressure benchmark's
 * next job started 7 ms later per freed GiB). Managed pages the other
 * client meets in that time are the driver's to evict, never an error;
 * device and VMM memory (trap mode's backing too) is counted after its
 * free. */
static CUresult free_counted(CUdeviceptr dptr, const char *why)
{
	int dev = -1;
	uint64_t early = 0;
	enum nvs_alloc_kind kind;
	if (nvs_acct_lookup(dptr, &dev, &early, &kind) == 0 && kind == NVS_ALLOC_MANAGED &&
	    !nvs_svmm_is_backing(dptr))
		nvs_acct_unreserve(dev, early);
	else
		early = 0;
	CUresult r = free_ours(dptr);
	if (r != CUDA_SUCCESS) {
		if (early)
			nvs_acct_recount(dev, early); /* still allocated after all */
		return r;
	}
	if (early)
		(void)untrack(dptr, why, &dev); /* un-accounted above */
	else
		forget(dptr, why);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemFree_v2(CUdeviceptr dptr)
{
	nvs_init();
	if (!nvs_real.cuMemFree_v2)
		return nvs_unresolved("cuMemFree_v2");
	if (nvs_cfg.disable)
		return nvs_real.cuMemFree_v2(dptr);
	return free_counted(dptr, "cuMemFree_v2");
}

/* ---- stream-ordered ---- */

static int capturing(CUstream s, int ptsz)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	CUresult r;
	if (ptsz && nvs_real.cuStreamIsCapturing_ptsz)
		r = nvs_real.cuStreamIsCapturing_ptsz(s, &st);
	else if (nvs_real.cuStreamIsCapturing)
		r = nvs_real.cuStreamIsCapturing(ptsz && !s ? CU_STREAM_PER_THREAD : s, &st);
	else
		return 0;
	return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);

static CUresult alloc_async(alloc_async_fn real, const char *name, CUdeviceptr *dptr, size_t bytes,
			    CUstream s, int ptsz)
{
	nvs_init();
	if (!real)
		return nvs_unresolved(name);
	if (nvs_cfg.disable)
		return real(dptr, bytes, s);
	int captured = capturing(s, ptsz);
	if (!captured && unified_now())
		return alloc_managed(dptr, bytes, CU_MEM_ATTACH_GLOBAL, name);
	/* Captured (becomes a graph memory node), or NVSHARE_UNIFIED_MEMORY=0:
	 * the driver's stream-ordered device memory, counted as pinned. */
	int dev;
	CUresult r = alloc_device(&dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!dptr || bytes == 0)
		return real(dptr, bytes, s);
	if (nvs_acct_reserve(dev, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = pinned_done(real(dptr, bytes, s), dev, dptr, bytes);
	if (r == CUDA_SUCCESS)
		NVS_DEBUG("%s %s: passed through, %zu bytes counted as pinned", name,
			  captured ? "during stream capture" : "with NVSHARE_UNIFIED_MEMORY=0",
			  bytes);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(nvs_real.cuMemAllocAsync, "cuMemAllocAsync", dptr, bytesize, hStream, 0);
}

CUresult CUDAAPI nvs_wrap_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	return alloc_async(nvs_real.cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz", dptr, bytesize,
			   hStream, 1);
}

typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);

static CUresult alloc_pool(alloc_pool_fn real, const char *name, CUdeviceptr *dptr, size_t bytes,
			   CUmemoryPool pool, CUstream s)
{
	nvs_init();
	if (!real)
		return nvs_unresolved(name);
	if (nvs_cfg.disable || !dptr || bytes == 0)
		return real(dptr, bytes, pool, s);
	int dev;
	CUresult r = alloc_device(&dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (nvs_acct_reserve(dev, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = pinned_done(real(dptr, bytes, pool, s), dev, dptr, bytes);
	if (r == CUDA_SUCCESS)
		NVS_DEBUG("%s: %zu bytes from an explicit pool, counted as pinned on GPU %d", name,
			  bytes, dev);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
						  CUmemoryPool pool, CUstream hStream)
{
	return alloc_pool(nvs_real.cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", dptr,
			  bytesize, pool, hStream);
}

CUresult CUDAAPI nvs_wrap_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						       CUmemoryPool pool, CUstream hStream)
{
	return alloc_pool(nvs_real.cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz",
			  dptr, bytesize, pool, hStream);
}

typedef CUresult (*free_async_fn)(CUdeviceptr, CUstream);

static CUresult free_async(free_async_fn real, const char *name, CUdeviceptr dptr, CUstream s,
			   int ptsz)
{
	nvs_init();
	if (!real)
		return nvs_unresolved(name);
	if (nvs_cfg.disable)
		return real(dptr, s);
	enum nvs_alloc_kind kind;
	if (nvs_acct_lookup(dptr, NULL, NULL, &kind) == 0 && kind == NVS_ALLOC_MANAGED) {
		/* Ours (converted): wait for the stream's queued work, then
		 * free. A captured stream cannot be synchronized: refuse. */
		if (capturing(s, ptsz))
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		if (!nvs_real.cuStreamSynchronize || !nvs_real.cuMemFree_v2)
			return nvs_unresolved("cuStreamSynchronize");
		CUresult r = nvs_real.cuStreamSynchronize(ptsz && !s ? CU_STREAM_PER_THREAD : s);
		if (r != CUDA_SUCCESS)
			return r;
		r = free_counted(dptr, name);
		NVS_DEBUG("%s of converted 0x%llx: stream synchronized, freed", name,
			  (unsigned long long)dptr);
		return r;
	}
	CUresult r = real(dptr, s);
	if (r == CUDA_SUCCESS)
		forget(dptr, name);
	return r;
}

CUresult CUDAAPI nvs_wrap_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(nvs_real.cuMemFreeAsync, "cuMemFreeAsync", dptr, hStream, 0);
}

CUresult CUDAAPI nvs_wrap_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	return free_async(nvs_real.cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", dptr, hStream, 1);
}

/* ---- graph memory nodes ----
 * An allocation node's memory comes from the graph memory pool of the device
 * in poolProps.location: its address is fixed when the node is added and
 * backed when the graph runs, so it cannot be made managed. It is counted as
 * pinned device memory from the node's creation, as a captured
 * cuMemAllocAsync is (the same kind of node), and refused over the limit
 * before the driver is asked. A free node of a counted address un-counts it
 * when added, as a captured cuMemFreeAsync does; so does cuMemFree[Async]
 * of it (allowed for graph memory not freed in its graph). Nodes located
 * elsewhere (host) are not GPU memory and pass through. Over-counts, in the
 * safe direction: a graph destroyed before it ran, or instantiated with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, keeps its allocations
 * counted until their addresses are freed. Memory nodes cannot be changed
 * afterwards (cuGraph[Exec]NodeSetParams refuse them), nor graphs with them
 * cloned, so these calls are the only way in.
 */

#define GRAPH_UNCOUNTED (-1) /* nothing reserved: not device memory, or the driver's error */
#define GRAPH_REFUSED (-2)   /* over the limit */

/* Reserves an allocation node's bytes on its device. Returns the device,
 * GRAPH_UNCOUNTED or GRAPH_REFUSED. */
static int graph_alloc_reserve(const char *name, const CUmemPoolProps *pp, size_t bytes)
{
	if (pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE || pp->location.id < 0 ||
	    pp->location.id >= NVS_MAX_GPUS || bytes == 0)
		return GRAPH_UNCOUNTED;
	int dev = pp->location.id;
	nvs_device_used(dev);
	if (nvs_acct_reserve(dev, bytes)) {
		char b[32];
		NVS_DEBUG("%s: %s on GPU %d refused (over the limit)", name,
			  nvs_format_size(bytes, b, sizeof b), dev);
		return GRAPH_REFUSED;
	}
	return dev;
}

/* After the driver answered r for a node reserved on dev. */
static CUresult graph_alloc_done(const char *name, CUresult r, int dev, const CUdeviceptr *dptr,
				 size_t bytes)
{
	if (dev < 0)
		return r;
	r = pinned_done(r, dev, dptr, bytes);
	if (r == CUDA_SUCCESS) {
		char b[32];
		NVS_DEBUG("%s: %s on GPU %d counted as pinned (graph memory node) at 0x%llx", name,
			  nvs_format_size(bytes, b, sizeof b), dev, (unsigned long long)*dptr);
	}
	return r;
}

CUresult CUDAAPI nvs_wrap_cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
						 const CUgraphNode *dependencies,
						 size_t numDependencies,
						 CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	nvs_init();
	PFN_cuGraphAddMemAllocNode_v11040 real = nvs_real.cuGraphAddMemAllocNode;
	if (!real)
		return nvs_unresolved("cuGraphAddMemAllocNode");
	if (nvs_cfg.disable || !nodeParams)
		return real(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
	size_t bytes = nodeParams->bytesize;
	int dev = graph_alloc_reserve("cuGraphAddMemAllocNode", &nodeParams->poolProps, bytes);
	if (dev == GRAPH_REFUSED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	return graph_alloc_done(
	    "cuGraphAddMemAllocNode",
	    real(phGraphNode, hGraph, dependencies, numDependencies, nodeParams), dev,
	    &nodeParams->dptr, bytes);
}

CUresult CUDAAPI nvs_wrap_cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
						const CUgraphNode *dependencies,
						size_t numDependencies, CUdeviceptr dptr)
{
	nvs_init();
	if (!nvs_real.cuGraphAddMemFreeNode)
		return nvs_unresolved("cuGraphAddMemFreeNode");
	CUresult r = nvs_real.cuGraphAddMemFreeNode(phGraphNode, hGraph, dependencies,
						    numDependencies, dptr);
	if (r == CUDA_SUCCESS && !nvs_cfg.disable)
		forget(dptr, "cuGraphAddMemFreeNode");
	return r;
}

/* The generic cuGraphAddNode[_v2]: memory nodes as above (the node type is
 * in the parameters), every other type untouched. */
static int node_reserve(const char *name, const CUgraphNodeParams *np, size_t *bytes)
{
	if (nvs_cfg.disable || !np || np->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		return GRAPH_UNCOUNTED;
	*bytes = np->alloc.bytesize;
	return graph_alloc_reserve(name, &np->alloc.poolProps, *bytes);
}

static CUresult node_done(const char *name, CUresult r, const CUgraphNodeParams *np, int dev,
			  size_t bytes)
{
	if (dev >= 0)
		return graph_alloc_done(name, r, dev, &np->alloc.dptr, bytes);
	if (r == CUDA_SUCCESS && !nvs_cfg.disable && np && np->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
		forget(np->free.dptr, name);
	return r;
}

#define ADD_NODE(member, name, np, call)                                                           \
	do {                                                                                       \
		nvs_init();                                                                        \
		if (!nvs_real.member)                                                              \
			return nvs_unresolved(name);                                               \
		size_t bytes_ = 0;                                                                 \
		int dev_ = node_reserve(name, np, &bytes_);                                        \
		if (dev_ == GRAPH_REFUSED)                                                         \
			return CUDA_ERROR_OUT_OF_MEMORY;                                           \
		return node_done(name, nvs_real.member call, np, dev_, bytes_);                    \
	} while (0)

/* cuGraphAddNode (CUDA 12.2 ABI, without edge data; cuda.h renames the name
 * to _v2, so its real pointer is abi_cuGraphAddNode). */
CUresult CUDAAPI nvs_wrap_cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
					 const CUgraphNode *dependencies, size_t numDependencies,
					 CUgraphNodeParams *nodeParams)
{
	ADD_NODE(abi_cuGraphAddNode, "cuGraphAddNode", nodeParams,
		 (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

CUresult CUDAAPI nvs_wrap_cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
					    const CUgraphNode *dependencies,
					    const CUgraphEdgeData *dependencyData,
					    size_t numDependencies, CUgraphNodeParams *nodeParams)
{
	ADD_NODE(cuGraphAddNode_v2, "cuGraphAddNode_v2", nodeParams,
		 (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams));
}
